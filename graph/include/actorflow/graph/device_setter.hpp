#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow {

/// A device function, as in `tf.device(fn)`: given the node being created
/// (its `device` field holds the device the inner scopes produced so far),
/// returns the device string to set.
using device_function = std::function<std::string(const node_def&)>;

/// Chooses a ps task for a node (TF's `ps_strategy`). Strategies keep state
/// between calls; copies of one strategy share that state.
using ps_strategy = std::function<int(const node_def&)>;

/// TF's `_RoundRobinStrategy`: returns 0, 1, ..., num_tasks-1, 0, ...
/// Throws op_error (InvalidArgument) if `num_tasks` is not positive.
ps_strategy round_robin_strategy(int num_tasks);

/// TF's `GreedyLoadBalancingStrategy`: returns the task with the least load
/// so far (the lowest index on ties) and adds `load_fn(node)` to its load.
/// Throws op_error (InvalidArgument) if `num_tasks` is not positive or
/// `load_fn` is empty; errors of `load_fn` propagate.
ps_strategy
greedy_load_balancing_strategy(int num_tasks,
                               std::function<int64_t(const node_def&)> load_fn);

/// TF's `byte_size_load_fn`: the number of elements of the node's "shape"
/// attribute (a tensor_shape; a scalar counts 1) times the size of its
/// "dtype" attribute (string elements count 8 bytes, as TF's
/// `tf.string.size`). Throws op_error (InvalidArgument) if either attribute
/// is missing or has the wrong kind, the shape is not fully defined, or the
/// dtype is invalid.
int64_t byte_size_load_fn(const node_def& node);

/// TF's `STANDARD_PS_OPS`.
std::vector<std::string> standard_ps_ops();

/// The arguments of TF's `replica_device_setter` (except `cluster`, see
/// actorflow/client/device_setter.hpp).
struct replica_device_setter_options {
  /// Number of ps tasks; 0 means "no ps", and the setter is not built.
  int ps_tasks = 0;
  /// Device for the ops in `ps_ops`; its task comes from `strategy` when it
  /// names a job.
  std::string ps_device = "/job:ps";
  /// Device for every other op.
  std::string worker_device = "/job:worker";
  /// If false, a node that already has a device keeps it verbatim.
  bool merge_devices = true;
  /// Op types placed on `ps_device`.
  std::vector<std::string> ps_ops = standard_ps_ops();
  /// Chooses the ps task; empty means round robin over `ps_tasks`.
  ps_strategy strategy;
};

/// TF's `replica_device_setter`: a device function that puts `ps_ops` on
/// `ps_device` (with the task chosen by the strategy, which is called only
/// if `ps_device` names a job and the node's current job is empty or that
/// same job) and every other op on `worker_device`; in both cases the
/// node's current device fields win (DeviceSpec.merge_from) and the result
/// is the canonical device string. Returns std::nullopt where TF returns
/// None: when `ps_tasks` is 0.
///
/// Errors: op_error (InvalidArgument) if `ps_tasks` is negative or
/// `ps_device`/`worker_device` does not parse (Python DeviceSpec rules, see
/// device_name::parse_spec). The returned function throws op_error
/// (InvalidArgument) if the node's device does not parse, and lets errors
/// of the strategy through. Copies of the returned function share the
/// strategy's state.
std::optional<device_function>
replica_device_setter(replica_device_setter_options opts);

} // namespace actorflow
