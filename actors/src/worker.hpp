#pragma once

// Private to actors/: the worker service of a task (worker.cpp).

#include <memory>
#include <string>

#include "actorflow/transport/host_port.hpp"
#include "actorflow/actors/task.hpp"
#include "runtime.hpp"
#include "actorflow/transport/tensor_channel.hpp"

namespace actorflow {

/// Spawns the worker of the task `opts` describe: it registers partitions
/// (one executor each, with its tensor channel inbox) and owns the task's
/// containers of variables, queues, readers and accumulators. It ends its
/// executors and resources when it gets an exit message.
worker_actor spawn_worker(caf::actor_system& sys, task_options opts,
                          std::shared_ptr<task_counters> counters);

/// The host a task's executors and master receive on over the tensor
/// channel: its address's host; "" without an address or with the channel
/// turned off (`actorflow.tensor-channel`).
std::string channel_host_of(caf::actor_system& sys, const task_options& opts);

} // namespace actorflow
