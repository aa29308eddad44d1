#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// The tasks of one job as `ClusterSpec.as_dict()` gives them: a list of
/// addresses when the indices are dense (0..n-1), otherwise a map from index
/// to address. A job without tasks is an empty map (Python's `{}`).
using job_tasks_form
  = std::variant<std::vector<std::string>, std::map<int, std::string>>;

/// `ClusterSpec.as_dict()`: job name -> tasks.
using cluster_dict = std::map<std::string, job_tasks_form>;

/// Python's repr of an as_dict() result, e.g.
/// `{'ps': ['ps0:1111'], 'sparse': {0: 'a', 3: 'b'}, 'worker': {}}`.
std::string to_string(const cluster_dict& dict);

/// The cluster of a distributed runtime, as TensorFlow's
/// `tf.train.ClusterSpec`: job name -> (task index -> "host:port"). A job
/// may be sparse (indices 0 and 3 only).
///
/// Jobs are kept sorted by name. TF's `jobs` property is the insertion order
/// of the dict it was built from, but the ClusterDef it builds (and hence
/// every spec built from a ClusterDef or another ClusterSpec) is sorted;
/// we always use the sorted order.
///
/// Errors: the constructors and `from_json` reject bad input with op_error
/// (InvalidArgument) where TF raises TypeError or ValueError. Lookups of an
/// unknown job or index throw op_error (InvalidArgument) where TF raises
/// ValueError: "No such job in cluster: 'x'", "No task with index 2 in job
/// 'sparse'".
class cluster_spec {
public:
  /// The empty cluster (no jobs).
  cluster_spec() = default;

  /// Dense jobs: job -> addresses of tasks 0, 1, ... Throws op_error
  /// (InvalidArgument) for an empty job name.
  explicit cluster_spec(
    const std::map<std::string, std::vector<std::string>>& jobs);

  /// Sparse jobs: job -> (task index -> address). Throws op_error
  /// (InvalidArgument) for an empty job name or a negative index.
  explicit cluster_spec(
    const std::map<std::string, std::map<int, std::string>>& jobs);

  /// From an as_dict() result (TF's round trip through `as_dict()`). Throws
  /// as the constructors above.
  explicit cluster_spec(const cluster_dict& dict);

  /// Parses the JSON form of the Python dict, e.g.
  /// `{"ps": ["h:1", "h:2"], "worker": {"0": "h:3", "3": "h:4"}}`: each job
  /// maps to a list of addresses or to an object whose keys are task
  /// indices as strings (read like Python's `int()`). Throws op_error
  /// (InvalidArgument), naming the offending job, key or text, if the text
  /// is not JSON, not an object, a job name is empty, a job's value is
  /// neither list nor object, a key is not an integer (or is negative, out
  /// of range, or a duplicate of another key's index), or an address is not
  /// a string.
  static cluster_spec from_json(std::string_view text);

  /// The JSON form of `as_dict()`: dense jobs as lists, sparse jobs (and
  /// jobs without tasks) as objects with string keys. `from_json` reads it
  /// back to an equal spec.
  std::string to_json() const;

  /// Job names, sorted.
  std::vector<std::string> jobs() const;

  /// Addresses of `job` by index, with std::nullopt in the holes of a
  /// sparse job; size max index + 1. Throws for an unknown job.
  std::vector<std::optional<std::string>> job_tasks(std::string_view job) const;

  /// Number of defined tasks of `job` (a sparse job counts its indices
  /// only). Throws for an unknown job.
  int num_tasks(std::string_view job) const;

  /// The defined task indices of `job`, ascending. Throws for an unknown
  /// job.
  std::vector<int> task_indices(std::string_view job) const;

  /// The address of task `index` of `job`. Throws for an unknown job or an
  /// undefined index.
  const std::string& task_address(std::string_view job, int index) const;

  /// True if `job` exists and defines task `index`; never throws.
  bool has_task(std::string_view job, int index) const noexcept;

  /// True if the cluster has job `job` (possibly without tasks).
  bool has_job(std::string_view job) const noexcept;

  /// Per job: a list if dense, a map if sparse, an empty map if it has no
  /// tasks (TF's `as_dict()`).
  cluster_dict as_dict() const;

  /// The ClusterDef in protobuf text format, as Python prints
  /// `as_cluster_def()` (text_format.MessageToString): jobs sorted by name,
  /// tasks by index, two-space indentation, proto3 defaults omitted (so
  /// task 0 has no `key:` line), strings C-escaped, every line ending in a
  /// newline. "" for the empty cluster.
  std::string as_cluster_def() const;

  /// Python's `str(ClusterSpec)`, e.g.
  /// `ClusterSpec({'ps': ['ps0:1111'], 'worker': ['w0:3333', 'w1:4444']})`.
  std::string to_string() const;

  /// Every task as `/job:J/replica:0/task:T`, in TF's device order: sorted
  /// lexicographically by the full name "/job:J/replica:0/task:T/device:
  /// CPU:0", so task 10 comes before task 2.
  std::vector<std::string> task_names() const;

  /// True if the cluster has no jobs (TF's falsy ClusterSpec). A cluster
  /// with a job without tasks is not empty.
  bool empty() const noexcept {
    return jobs_.empty();
  }

  /// The underlying job -> (index -> address) map.
  const std::map<std::string, std::map<int, std::string>, std::less<>>&
  job_map() const noexcept {
    return jobs_;
  }

  /// Equal if both define the same addresses at the same indices, whether
  /// built dense or sparse.
  friend bool operator==(const cluster_spec&, const cluster_spec&) = default;

private:
  const std::map<int, std::string>& tasks_of(std::string_view job) const;

  std::map<std::string, std::map<int, std::string>, std::less<>> jobs_;
};

std::ostream& operator<<(std::ostream& out, const cluster_spec& spec);

} // namespace actorflow
