#pragma once

#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow {

struct placer_options {
  /// Full names of the devices available, e.g.
  /// "/job:local/replica:0/task:0/device:CPU:0". The placer sorts them as
  /// TensorFlow does (type priority, then name), so unpinned nodes land on
  /// the first: the same for every master of a cluster.
  std::vector<std::string> devices;
  /// A request no device satisfies retries without device type and id.
  bool allow_soft_placement = false;
};

/// One line of TensorFlow's log_device_placement: "name: (Op): device".
struct placement_record {
  std::string node;
  std::string op;
  std::string device;
};

/// Assigns a full device name to every node of `g` (TensorFlow's Placer):
/// nodes connected by ref-typed inputs (a variable and the Assign,
/// AssignAdd, AssignSub or IsVariableInitialized that takes it) or
/// `_class = loc:@x` form one colocation group and share a device; a
/// group's merged request picks the first matching device; a Const or
/// `_Arg` without a request follows its consumers when they agree.
/// Errors (InvalidArgument, `g` unchanged): "Cannot assign a device for
/// operation 'x': ..." naming the node and the request, and "Cannot
/// colocate nodes ..." for conflicting requests.
status place(graph_def& g, const placer_options& opts,
             std::vector<placement_record>* log = nullptr);

} // namespace actorflow
