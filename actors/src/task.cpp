// A task: one worker and one master, as a TF server hosts its worker and
// master services. The master is what the task publishes and what clients
// and the console talk to; other masters reach the worker through it
// (get_worker).

#include "actorflow/actors/task.hpp"

#include "actorflow/graph/device_name.hpp"
#include "actorflow/transport/tensor_channel.hpp"
#include "master.hpp"
#include "worker.hpp"

namespace actorflow {

std::string task_name(const task_options& opts) {
  return task_name(opts.job, opts.task);
}

caf::actor spawn_task(caf::actor_system& sys, task_options opts) {
  // The tensor-channel links of this system say which task they come from.
  tensor_channel::name_self(sys, task_name(opts));
  auto counters = std::make_shared<task_counters>();
  auto worker = spawn_worker(sys, opts, counters);
  return caf::actor_cast<caf::actor>(
    spawn_master(sys, std::move(opts), std::move(worker), std::move(counters)));
}

} // namespace actorflow
