#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

/// TensorFlow's ReaderBase and its readers (TextLineReader,
/// FixedLengthRecordReader, WholeFileReader) in plain C++, without actors
/// (tf_semantics: readers). A reader turns work units (file names, pulled
/// from a filename queue by its owner) into (key, value) records.
///
/// The owner drives a read as a small state machine, so that pulling the
/// next file name from a queue can be asynchronous:
///
/// ~~~
/// reader_core::request req{.num_records = 1};
/// while (!reader->advance(req)) {
///   std::string work = /* dequeue one file name */;
///   if (auto st = reader->start_work(work); !st.ok()) { req.result = st; break; }
/// }
/// // req.result, req.keys, req.values
/// ~~~
///
/// File I/O here blocks the calling thread (the reader actor runs on a
/// thread of its own for this reason).
namespace actorflow {

class reader_core {
public:
  /// One ReaderRead (up_to = false, num_records = 1) or ReaderReadUpTo in
  /// progress. Starts with no records: `keys.size()` is what this call has
  /// produced so far.
  struct request {
    int64_t num_records = 1;
    bool up_to = false;
    std::vector<std::string> keys;
    std::vector<std::string> values;
    /// Set when advance returns true.
    status result;
  };

  /// Makes the reader for a TextLineReaderV2 (`skip_header_lines`),
  /// FixedLengthRecordReaderV2 (`header_bytes`, `record_bytes`,
  /// `footer_bytes`, `hop_bytes`, `encoding` "" | "ZLIB" | "GZIP") or
  /// WholeFileReaderV2 node, named in its messages. InvalidArgument,
  /// naming the node and attribute, for a bad attribute (record_bytes <= 0,
  /// a negative size, an unknown encoding, another op).
  static status make(const node_def& node, std::unique_ptr<reader_core>& out);

  virtual ~reader_core();

  /// Progress on `req` from the current work unit, as TF's
  /// ReaderBase::Read / ReadUpTo. Returns true when `req` is complete
  /// (`req.result` set, records appended); false when the reader needs the
  /// next work unit: the owner dequeues a file name and calls start_work,
  /// then advance again. A read_up_to returns what the current work unit
  /// holds (at most num_records) once it has produced at least one
  /// record; it never pulls a second work unit after producing one.
  /// A read_up_to of 0 records completes at once with none (as TF); a
  /// negative count is InvalidArgument. On an error the request carries no
  /// records and the work unit stays current (TF retries it next time).
  bool advance(request& req);

  /// Starts a work unit (opens the file, skips headers). NotFound naming
  /// the file ("<file>; No such file or directory") when it cannot be
  /// opened; PermissionDenied, before anything is opened, for a file the
  /// process's file policy refuses (outside --file_roots, or the node's
  /// own TLS or configuration files: file_policy.hpp); the owner fails the request with this status and the next
  /// read takes the next work unit. The WholeFileReader opens its file
  /// only when reading it, as TF's.
  status start_work(const std::string& work);

  /// Checks a tuple dequeued from the filename queue: a single string
  /// scalar ("Expected single component queue", "Expected queue with
  /// single string component", "Expected to dequeue a one-element string
  /// tensor"), and gives its value.
  static status work_from_tuple(const std::vector<tensor>& tuple,
                                std::string& work);

  /// Counted as TF does, so that an empty file name is a work unit too.
  bool work_in_progress() const noexcept {
    return work_finished_ < work_started_;
  }
  /// ReaderResetV2: drops the current work unit and zeroes the counters.
  void reset();
  int64_t num_records_produced() const noexcept {
    return records_produced_;
  }
  int64_t num_work_units_completed() const noexcept {
    return work_finished_;
  }

protected:
  explicit reader_core(std::string name) : name_(std::move(name)) {
  }
  const std::string& current_work() const noexcept {
    return work_;
  }
  const std::string& name() const noexcept {
    return name_;
  }
  /// Opens `current_work()`.
  virtual status on_work_started() = 0;
  /// Closes it; also called by reset and after a failed start, so it
  /// must accept a reader with nothing open.
  virtual void on_work_finished() = 0;
  /// Reads up to `n` (>= 1) records, appending them; sets at_end when the
  /// work unit has no more. Produces nothing only together with at_end
  /// or an error.
  virtual status read_up_to_locked(int64_t n, std::vector<std::string>& keys,
                                   std::vector<std::string>& values,
                                   int64_t& produced, bool& at_end)
    = 0;

private:
  std::string name_;
  std::string work_;
  int64_t records_produced_ = 0;
  int64_t work_started_ = 0;
  int64_t work_finished_ = 0;
};

} // namespace actorflow
