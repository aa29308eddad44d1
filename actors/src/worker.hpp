#pragma once

// Private to actors/: the worker service of a task (worker.cpp).

#include <memory>
#include <string>
#include <vector>

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

/// The tasks of job "ps" in order when `opts` replicates variables
/// (docs/DESIGN.md, "Replicated variables") and the job has two or more;
/// nothing otherwise.
std::vector<std::string> replica_ring(const task_options& opts);

/// The task that holds the backup of `home`'s variables while `acting`
/// serves them: the job's next task when the task serves its own, else
/// the home task itself (its replacement).
std::string backup_task_of(const std::vector<std::string>& ring,
                           const std::string& home, const std::string& acting);

/// The host a task's executors and master receive on over the tensor
/// channel: its address's host; "" without an address or with the channel
/// turned off (`actorflow.tensor-channel`).
std::string channel_host_of(caf::actor_system& sys, const task_options& opts);

} // namespace actorflow
