#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// A parsed, possibly partial device name:
/// `/job:J/replica:R/task:T/device:TYPE:ID`. Unset fields are wildcards.
/// Mirrors TensorFlow's DeviceNameUtils::ParsedName (C++) and, through
/// `merge_from`, the Python DeviceSpec used by `tf.device` scopes.
struct device_name {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<std::string> type;
  std::optional<int> id;

  /// Parses like TensorFlow's C++ ParseFullName: components in any order,
  /// `*` leaves a field unset, legacy `/cpu:N` and `/gpu:N` map to "CPU" and
  /// "GPU", `/device:TYPE[:N]` keeps TYPE verbatim, a later component
  /// overwrites an earlier one; "" and "/" give the empty name. On failure
  /// returns InvalidArgument naming the text.
  static status parse(std::string_view text, device_name& out);

  /// Parses or throws op_error (InvalidArgument).
  static device_name parse_or_throw(std::string_view text);

  /// Parses like Python TF1's `DeviceSpec.from_string`, the parser behind
  /// `tf.device` scopes and `replica_device_setter`: the text is split on
  /// `/` and `:`; `job:X` keeps X literally (even `*`), `replica:N` and
  /// `task:N` go through Python's `int()`, `cpu|gpu[:N|*]` (any case) gives
  /// "CPU"/"GPU", `device:TYPE:N|*` keeps TYPE verbatim; empty components
  /// are skipped. Stricter than `parse`: `/device:GPU` without an index is
  /// rejected. Errors (InvalidArgument, TF's ValueError texts): "invalid
  /// literal for int() with base 10: 'x'", "Cannot specify multiple device
  /// types: <text>", "Unknown attribute: 'x' in '<text>'".
  static status parse_spec(std::string_view text, device_name& out);

  /// Canonical form: only the set fields, in the order job, replica, task,
  /// device; `/device:TYPE:*` when the type is set without an id.
  std::string to_string() const;

  /// Copies every set field of `other` onto this name (Python
  /// DeviceSpec.merge_from: `other` wins, no conflicts).
  void merge_from(const device_name& other);

  bool empty() const noexcept {
    return !job && !replica && !task && !type && !id;
  }

  /// A fully specified name: job, replica, task, type and id all set.
  bool fully_specified() const noexcept {
    return job && replica && task && type && id;
  }

  friend bool operator==(const device_name&, const device_name&) = default;
};

/// `/job:J/replica:R/task:T/device:TYPE:ID`.
std::string full_device_name(std::string_view job, int replica, int task,
                             std::string_view type, int id);

/// `/job:J/replica:R/task:T`, the name of a task (and the prefix of its
/// devices' names).
std::string task_name(std::string_view job, int task, int replica = 0);

/// The name of the task a device belongs to (`/job:J/replica:R/task:T`),
/// or "" when `device` names no job and task.
std::string task_of_device(std::string_view device);

/// True if every field set in `less` is set in `more` with the same value
/// (TensorFlow's IsSpecification).
bool is_specification(const device_name& less, const device_name& more);

/// Merges `other` into `target` (TensorFlow's MergeDevNames): a field set
/// in both with different values is InvalidArgument "Cannot merge devices
/// with incompatible jobs|replicas|tasks|types|ids: 'A' and 'B'"; with
/// `allow_soft_placement`, a type conflict clears type and id and an id
/// conflict clears the id instead. `target` is unchanged on error.
status merge_device_names(device_name& target, const device_name& other,
                          bool allow_soft_placement = false);

/// Python's `canonical_name`: `parse_spec` then `to_string`; "" for "".
/// Throws op_error (InvalidArgument) where `parse_spec` fails.
std::string canonical_device(std::string_view text);

} // namespace actorflow
