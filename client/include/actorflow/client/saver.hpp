#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"
#include "actorflow/graph/ops.hpp"

/// Checkpoints, as TensorFlow 1.x's `tf.train.Saver`
/// (python/training/saver.py) and `checkpoint_management.py`:
///
/// ~~~
/// saver s;                                   // every global variable
/// auto path = s.save(sess, "/ckpt/model.ckpt", step);  // ".../model.ckpt-<step>"
/// ...
/// auto latest = latest_checkpoint("/ckpt");  // "" if none
/// if (!latest.empty())
///   s.restore(sess, latest);
/// ~~~
///
/// A checkpoint `<p>` (e.g. "/ckpt/model.ckpt-100") is a set of files:
///
/// - `<p>.data-00000-of-0000N` ... `<p>.data-0000{N-1}-of-0000N`: one shard
///   per task (job, replica and task of the variable's device, e.g. one per
///   ps task), in the order of the sorted device names; variables without
///   a device share the shard of "". `sharded = false` writes one shard.
///   A save under a name whose checkpoint exists (`<p>.index` is there)
///   names its shards `<p>.data-0000i-of-0000N.<id>`, the checkpoint id
///   below in 16 hex digits, so that the files of the checkpoint it
///   replaces stay whole until its index replaces theirs.
/// - `<p>.index`: the shards (their devices) and, for every
///   variable, its key (the variable's node name: "w", "layer1/w",
///   "w/Momentum"), dtype, shape and shard.
///
/// Every file starts with a 40-byte little-endian header, then a payload:
///
///     offset size
///      0      4   magic "AFCK"
///      4      1   kind: 'I' (index) or 'D' (data shard)
///      5      1   format version (1)
///      6      1   flags: bit 0 in an index: its shards' names carry the
///                 checkpoint id (above); 0 otherwise
///      7      1   reserved, 0
///      8      8   checkpoint id: random, equal in the index and every
///                 shard of one save (a shard left by another save of the
///                 same prefix is detected)
///     16      4   shard number (0 in the index)
///     20      4   shard count
///     24      8   payload length in bytes
///     32      4   CRC-32 (zlib) of the payload
///     36      4   CRC-32 (zlib) of bytes 0..35
///
/// The payload is a Boost.Serialization binary archive (`no_header`, plain
/// objects without class information, so it holds only the fields below;
/// integers in native byte order, little-endian on our platforms; a string
/// or sequence is a u64 count followed by its bytes or items):
///
/// - index: shards (u64 count, then per shard its device string, e.g.
///   "/job:ps/task:1", "" for variables without a device), entries sorted
///   by key (u64 count, then key, u8 TensorFlow DataType number, dims as
///   u64 count + i64s, u32 shard);
/// - shard: records (u64 count, then key and the tensor in the checked
///   wire encoding of graph/wire.hpp, `to_bytes`, as a byte string).
///
/// A file whose size, magic, kind, version, CRCs or ids do not check out,
/// whose archive does not load (every length read back is bounded by the
/// payload size before anything is allocated) or whose tensors do not
/// decode to the dtype and shape of the index is DataLoss naming the file:
/// restore never crashes on a damaged file and assigns nothing then.
///
/// `<dir>/checkpoint` is TensorFlow's text CheckpointState, e.g.
///
///     model_checkpoint_path: "/ckpt/model.ckpt-300"
///     all_model_checkpoint_paths: "/ckpt/model.ckpt-200"
///     all_model_checkpoint_paths: "/ckpt/model.ckpt-300"
///
/// Crash safety: a save never changes a file that a checkpoint in place
/// reads. Every file (shards, then the index, then the state file) is
/// written under a temporary name ("<file>.tmp<16 hex digits>"), flushed
/// to disk (fsync) and renamed to its final name; the shards' names are
/// new (TF's names for a new checkpoint, names with the new id when one
/// exists under that name), so one rename of the index publishes the
/// checkpoint whole, and one rename of the state file makes it the
/// latest. Only then are the files it replaced removed, and the
/// checkpoints beyond max_to_keep (index first). A save killed at any
/// point leaves every checkpoint the state file names as it was or
/// replaced whole, plus leftovers (temporary files, shards no index
/// refers to) that restore ignores and remove_checkpoint_leftovers
/// removes (the chief's checkpoint_saver_hook does at start).
///
/// Deviation from TensorFlow's sharded saver: TF writes each shard on the
/// machine of its device (SaveV2 runs on the ps task) and merges the
/// indexes there. Here the client fetches every value in one step and
/// writes all shards itself, so `save_path` is a path of the client's
/// filesystem; the tasks never touch checkpoint files. (In our deployments
/// the processes share a filesystem, so a client on another host, e.g. a
/// restarted chief, finds them.) Restore reads them on the client too and
/// feeds the values to Assign ops colocated with the variables. Because
/// variables are keyed by node name, a checkpoint restores into a graph
/// whose variables are placed differently (e.g. a cluster with another
/// number of ps tasks).
namespace actorflow {

class session;

struct saver_options {
  /// The variables to save and restore. Empty: the global variables of
  /// the default graph when the saver is constructed.
  std::vector<variable> var_list;
  /// The names the variables are saved and restored under, one per
  /// `var_list` entry (TF's dict var_list: {name: variable}); empty: each
  /// variable's node name.
  std::vector<std::string> var_names;
  /// One data file per device (ps task) of the variables; false: one file.
  bool sharded = true;
  /// How many recent checkpoints `save` keeps; older ones are deleted
  /// (their files) when a new save exceeds the count. 0 or less: as TF's
  /// None/0, no file is ever deleted and only the latest checkpoint is
  /// tracked (last_checkpoints() stays empty and the state file lists just
  /// the latest one).
  int max_to_keep = 5;
  /// The name scope of the restore ops ("save", made unique as TF does:
  /// "save_1" for a second saver).
  std::string name = "save";
  /// As TF's `save_relative_paths`: write the paths in "<dir>/checkpoint"
  /// relative to that directory. Otherwise they are written as passed to
  /// `save` (relative ones relative to the state file's directory when
  /// that directory is itself given relatively, as TF does).
  bool save_relative_paths = false;
};

/// TF's CheckpointState: the newest checkpoint and all tracked ones,
/// oldest first (relative paths already joined with the directory).
struct checkpoint_state {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths;
};

/// Saves and restores variables (`tf.train.Saver`).
///
/// The saver holds no session; `save` and `restore` take one and block the
/// calling thread (not an actor) for the session step and the file I/O.
/// A saver may be used from several threads once constructed, but its
/// checkpoint bookkeeping (`save`, `last_checkpoints`,
/// `recover_last_checkpoints`) is not synchronized: call those from one
/// thread at a time (the chief's training loop, typically).
class saver {
public:
  /// Builds, in the graph of the variables (the default graph when
  /// `var_list` is empty) under name scope `opts.name`, one Placeholder
  /// and one Assign per variable, both colocated with the variable
  /// ("save/Placeholder", "save/Assign", "save/Placeholder_1",
  /// "save/Assign_1", ...), and the NoOp "save/restore_all" grouping the
  /// Assigns. Enclosing control dependencies are not applied to them.
  /// Throws op_error (InvalidArgument): "No variables to save", an invalid
  /// variable, variables of different graphs, "At least two variables have
  /// the same name: w", var_names not one non-empty name per variable.
  explicit saver(saver_options opts = {});

  saver(const saver&) = delete;
  saver& operator=(const saver&) = delete;
  saver(saver&&) noexcept = default;
  saver& operator=(saver&&) noexcept = default;
  ~saver();

  /// Saves the variables' current values to "<save_path>-<global_step>"
  /// (or `save_path` for a negative `global_step`) and returns that path.
  /// Fetches every value in one `sess.run`, writes the shards and the
  /// index (each atomically, see above), records the path as the newest of
  /// `last_checkpoints()` (moving it to the end if saved before), writes
  /// "<dir of path>/checkpoint" atomically, then deletes the files of the
  /// checkpoints beyond `max_to_keep`, oldest first (a failed deletion is
  /// ignored). A checkpoint saved again under the same path replaces it
  /// whole: its shards are named with the new checkpoint id, the new index
  /// replaces the old one in one rename, and the old shards are removed
  /// after.
  ///
  /// Errors (op_error): InvalidArgument for an empty path, "Parent
  /// directory of <path> doesn't exist, can't save.", a path equal to the
  /// state file; whatever the session throws (FailedPrecondition for an
  /// uninitialized variable, Unavailable, DeadlineExceeded, ...) before
  /// any file is written; filesystem errors naming the file:
  /// PermissionDenied (EACCES, EPERM, EROFS), ResourceExhausted (ENOSPC,
  /// EDQUOT), NotFound (ENOENT), Unknown otherwise (e.g. EISDIR). After
  /// an error, the state file, `last_checkpoints()` and the previous
  /// checkpoints are as before (one saved under the same path included),
  /// unless the error came after the new index was in place: then that
  /// checkpoint is the new one, whole.
  std::string save(session& sess, const std::string& save_path,
                   int64_t global_step = -1);

  /// As above with the step read from `global_step` (an integer scalar
  /// variable, typically get_global_step()) in the same `sess.run` that
  /// fetches the values.
  std::string save(session& sess, const std::string& save_path,
                   const variable& global_step);

  /// Restores every variable of the saver from checkpoint `save_path` (as
  /// `save` returned it, or latest_checkpoint()). Reads and checks the
  /// index and the shards it needs, then assigns all values in one
  /// `sess.run` of "save/restore_all" (this also initializes variables
  /// that were not). The checkpoint may hold more variables than the
  /// saver. Nothing is assigned unless every check passed.
  ///
  /// Errors (op_error): InvalidArgument "Can't load save_path when it is
  /// empty." and "The passed save_path is not a valid checkpoint: <p>"
  /// (no "<p>.index"); NotFound "Key w not found in checkpoint <p>" for a
  /// variable of the saver the checkpoint lacks;
  /// InvalidArgument for a dtype ("tensor_name = w; expected dtype float
  /// does not equal original dtype int64") or shape mismatch ("Assign
  /// requires shapes of both tensors to match. lhs shape= [3] rhs shape=
  /// [2]", naming w); DataLoss naming the file for a truncated, corrupt,
  /// mismatched (another save's shard) or unreadable-as-archive file;
  /// NotFound / PermissionDenied / Unknown naming a file that cannot be
  /// read (e.g. a missing shard); whatever the session throws.
  void restore(session& sess, const std::string& save_path);

  /// Restores the newest checkpoint of `checkpoint_dir` that restores:
  /// the state file's model_checkpoint_path, else those of
  /// all_model_checkpoint_paths from the newest back. A checkpoint whose
  /// files are missing, unreadable or damaged (the DataLoss, NotFound, ...
  /// of `restore` naming one of its files) is skipped, and `log` says so
  /// ("Could not restore checkpoint <p> (<error>): trying the next
  /// newest, <q>"); each attempt is logged first, "Restoring parameters
  /// from <p>" (TF's line). Returns the path restored, or "" if there is
  /// no state file or it names no checkpoint whose index exists (TF's
  /// latest_checkpoint None: initialize instead).
  ///
  /// Throws without trying older checkpoints what `restore` throws for a
  /// checkpoint that does not fit the variables (NotFound "Key w not
  /// found", InvalidArgument for a dtype or shape) and what the session
  /// throws; when no checkpoint restores, the newest one's error (its
  /// code) as "No checkpoint in <dir> restores: ...", listing the others'.
  std::string restore_newest(
    session& sess, const std::string& checkpoint_dir,
    const std::function<void(const std::string&)>& log = {});

  /// The checkpoint the last successful `restore` (or `restore_newest`)
  /// assigned, until the next successful `save`; "" otherwise. The
  /// checkpoint_saver_hook does not save a checkpoint of the step it was
  /// just restored from again.
  const std::string& last_restored() const noexcept {
    return last_restored_;
  }

  /// The checkpoints this saver keeps, oldest first (at most max_to_keep).
  const std::vector<std::string>& last_checkpoints() const noexcept {
    return last_checkpoints_;
  }

  /// TF's `recover_last_checkpoints`: after a restart, takes over the
  /// checkpoints of a previous run (e.g.
  /// `get_checkpoint_state(dir)->all_model_checkpoint_paths`), keeping
  /// those whose index file exists, so that later saves delete them in
  /// turn.
  void recover_last_checkpoints(const std::vector<std::string>& paths);

  /// The variables saved, and their checkpoint keys (node names).
  const std::vector<variable>& variables() const noexcept {
    return vars_;
  }
  const std::vector<std::string>& keys() const noexcept {
    return keys_;
  }
  /// The NoOp running every restore Assign ("save/restore_all").
  operation restore_op() const noexcept {
    return restore_all_;
  }

private:
  std::string save_impl(session& sess, const std::string& save_path,
                        const variable* step_var, int64_t global_step);
  /// The checked values of the variables in checkpoint `save_path`.
  std::vector<tensor> load(const std::string& save_path) const;

  saver_options opts_;
  graph* graph_ = nullptr;
  std::vector<variable> vars_;
  std::vector<std::string> keys_;
  std::vector<output> restore_feeds_;
  operation restore_all_;
  std::vector<std::string> last_checkpoints_;
  std::string last_restored_;
};

/// TF's `get_checkpoint_state`: parses "<checkpoint_dir>/checkpoint".
/// std::nullopt if the file is missing, unreadable or not a valid
/// CheckpointState (TF logs and returns None; an empty
/// model_checkpoint_path, a ValueError there, gives std::nullopt too).
/// Relative paths are joined with `checkpoint_dir`. Never throws op_error.
std::optional<checkpoint_state>
get_checkpoint_state(const std::string& checkpoint_dir);

/// TF's `tf.train.latest_checkpoint`: the newest checkpoint named by
/// "<checkpoint_dir>/checkpoint", or "" if there is none or its index file
/// is missing. Never throws op_error.
std::string latest_checkpoint(const std::string& checkpoint_dir);

/// TF's `checkpoint_exists`: true if "<path>.index" exists.
bool checkpoint_exists(const std::string& path);

/// Removes what interrupted saves left in `checkpoint_dir`: temporary
/// files ("<file>.tmp<16 hex digits>" of the state file, an index or a
/// data file) and data files no index refers to (a save killed before its
/// index was in place, or after it but before the shards it replaced were
/// removed). Data files of an index that cannot be read stay. Returns the
/// paths removed. Call it only while nothing saves into the directory
/// (the chief's checkpoint_saver_hook does in begin()). Never throws
/// op_error; files that cannot be removed are left.
std::vector<std::string>
remove_checkpoint_leftovers(const std::string& checkpoint_dir);

} // namespace actorflow
