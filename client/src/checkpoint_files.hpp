#pragma once

// Private to client/: the files of a checkpoint (saver.cpp writes and
// reads their payloads): TF's file names, writes that are atomic and
// durable, a checksummed frame around each file's payload, and the
// CheckpointState text file. Errors are op_errors with TF's codes, naming
// the file. Every call blocks for its file system work.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/client/saver.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow::checkpoint_files {

/// Throws op_error(code, msg).
[[noreturn]] void fail(error_code code, std::string msg);

/// Throws op_error InvalidArgument.
[[noreturn]] void invalid(std::string msg);

/// A failed system call on `path`, with TF's mapping of errno to codes.
[[noreturn]] void fs_fail(const std::string& what, const std::string& path,
                          int err);

/// DataLoss naming `file`.
[[noreturn]] void data_loss(const std::string& file, const std::string& why);

/// A random id (a checkpoint's, and its temporary files' suffix).
uint64_t random_u64();

/// `x` as 16 hex digits.
std::string hex16(uint64_t x);

/// The directory part of `path` ("" for none), and `dir`/`name`.
std::string dir_of(const std::string& path);
std::string join(const std::string& dir, const std::string& name);

bool file_exists(const std::string& path);

/// fsync of a directory, so that a rename in it is durable.
void sync_dir(const std::string& dir);

/// Writes `contents` to a temporary file beside `path`, syncs it and
/// renames it over `path`: readers see the old file or the new one.
void write_atomically(const std::string& path, std::string_view contents);

std::string read_file(const std::string& path);

/// What a file's frame says: index or data, its flags, the checkpoint's
/// id, and for data files the shard and the shard count.
struct frame_info {
  char kind = 0;
  uint8_t flags = 0;
  uint64_t id = 0;
  uint32_t shard = 0;
  uint32_t count = 0;
};

inline constexpr char kind_index = 'I';
inline constexpr char kind_data = 'D';

/// An index's flag: its shards are named with the checkpoint's id
/// (data_file with an id). Without it, TF's names (files written before
/// the flag existed have it clear).
inline constexpr uint8_t flag_named_shards = 1;

/// `payload` framed: magic, kind, version, `info`, length and checksums.
std::string frame(const frame_info& info, std::string_view payload);

/// Checks the frame of `bytes` (read from `file`) and returns the
/// payload; DataLoss naming the file for anything that does not check out.
std::string_view unframe(const std::string& file, std::string_view bytes,
                         char kind, frame_info& info);

/// Checks the header of `file` (its first 40 bytes, checksummed) without
/// reading the payload; false if it cannot be read or does not check out.
bool peek_frame(const std::string& file, frame_info& info);

/// "<prefix>.data-NNNNN-of-MMMMM", TF's name.
std::string data_file(const std::string& prefix, uint32_t shard,
                      uint32_t count);

/// "<prefix>.data-NNNNN-of-MMMMM.<id as 16 hex digits>": the name of a
/// shard of checkpoint `id` when it must not replace the files of a
/// checkpoint that exists under `prefix`.
std::string data_file(const std::string& prefix, uint32_t shard,
                      uint32_t count, uint64_t id);

/// What the name of a data file says.
struct data_file_name {
  uint32_t shard = 0;
  uint32_t count = 0;
  /// Named with a checkpoint id (the second data_file).
  bool has_id = false;
  uint64_t id = 0;
};

/// If `name` (a file name, no directory) is a data file of base name
/// `base` (the prefix's file name), what its name says.
bool parse_data_file(std::string_view name, std::string_view base,
                     data_file_name& out);

/// Removes the data files of `prefix` for which `pred` holds. Failures
/// are ignored (TF only logs them).
void remove_data_files(const std::string& prefix,
                       const std::function<bool(const data_file_name&)>& pred);

/// TF's remove_checkpoint: the index first (so the checkpoint stops being
/// valid at once), then the shards.
void remove_checkpoint(const std::string& prefix);

/// Removes from `dir` what interrupted saves left there: temporary files
/// of checkpoint files and of the state file, and data files that no index
/// refers to. Returns their paths.
std::vector<std::string> remove_leftovers(const std::string& dir);

/// TF's update_checkpoint_state_internal (plus
/// generate_checkpoint_state_proto) for `save_dir`.
void update_checkpoint_state(const std::string& save_dir,
                             std::string model_path,
                             std::vector<std::string> all_paths,
                             bool save_relative_paths);

} // namespace actorflow::checkpoint_files
