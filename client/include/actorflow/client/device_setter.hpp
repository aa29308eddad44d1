#pragma once

#include <optional>

#include "actorflow/graph/device_setter.hpp"
#include "actorflow/client/cluster_spec.hpp"

namespace actorflow {

/// TF's `replica_device_setter(cluster=...)`: as the graph-layer overload,
/// with `ps_tasks` taken from the cluster: the number of defined tasks of
/// the job named by `opts.ps_device` ("ps" by default). Any `ps_tasks` in
/// `opts` is ignored. Returns std::nullopt where TF returns None: when
/// `ps_device` names no job, the cluster has no such job, or the job has no
/// tasks.
///
/// Errors: op_error (InvalidArgument) if `ps_device` or `worker_device`
/// does not parse (Python DeviceSpec rules), as the graph-layer overload.
std::optional<device_function>
replica_device_setter(const cluster_spec& cluster,
                      replica_device_setter_options opts = {});

} // namespace actorflow
