#include "actorflow/client/device_setter.hpp"

#include "actorflow/graph/device_name.hpp"

namespace actorflow {

std::optional<device_function>
replica_device_setter(const cluster_spec& cluster,
                      replica_device_setter_options opts) {
  device_name ps;
  throw_if_error(device_name::parse_spec(opts.ps_device, ps));
  // TF looks the ps job up in cluster.as_dict() and returns None when it is
  // missing; a ps_device without a job looks up None, which is never there.
  if (!ps.job || !cluster.has_job(*ps.job))
    return std::nullopt;
  // len(as_dict()[job]): the defined tasks, so a sparse job {0, 3} gives 2
  // ps tasks (0 and 1), as in TF.
  opts.ps_tasks = cluster.num_tasks(*ps.job);
  return replica_device_setter(std::move(opts));
}

} // namespace actorflow
