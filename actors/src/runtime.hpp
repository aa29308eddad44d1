#pragma once

// Private to actors/: the actors a task actor spawns.

#include <atomic>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actorflow/actors/messages.hpp"
#include "actorflow/graph/graph_def.hpp"

namespace actorflow {

/// Counters shared by a task actor and its executors. Monitoring only:
/// relaxed atomics, never used for control flow.
struct task_counters {
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> steps{0};
};

/// A variable: owns one tensor (container/name on its task). Messages:
/// (read) -> (status, tensor); (assign, tensor, bool validate_shape),
/// (assign_add | assign_sub, tensor) -> (status, tensor);
/// (is_init) -> bool.
caf::actor spawn_variable(caf::actor_system& sys, std::string name,
                          dtype type, tensor_shape shape);

/// Runs one registered partition. `task` is its task actor (resource
/// lookups); messages: (run_graph, run_graph_request, vector<actor> peers)
/// -> run_graph_response; (recv_tensor, int64 step, string key, tensor);
/// (abort_step, int64 step, status).
caf::actor spawn_executor(caf::actor_system& sys, caf::actor task,
                          graph_def partition, std::string device,
                          std::string default_container,
                          std::shared_ptr<task_counters> counters);

/// Microseconds since the epoch (step stats).
int64_t now_micros();

} // namespace actorflow
