#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "actorflow/transport/messages.hpp"

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace actorflow {

/// What a task actor needs to know about itself and its cluster.
struct task_options {
  /// This task's job and index.
  std::string job;
  int task = 0;
  /// Every task of the cluster: "/job:J/replica:0/task:T" -> "host:port".
  /// A private in-process engine lists only itself with an empty address.
  std::map<std::string, std::string> cluster;
  /// Replicated variables (docs/DESIGN.md, "Replicated variables"): every
  /// variable of a task of job "ps" has a backup on the job's next task,
  /// and a task that is lost is replaced by its backup. Cluster-wide:
  /// every task must agree. Needs at least two ps tasks.
  bool replicate_variables = false;
  /// TensorFlow's ServerDef.default_session_config: every session of this
  /// task's master takes these settings where its own config leaves the
  /// default (a deadline of 0, a flag off, no device filters).
  session_config default_session_config;
  /// The membership version at which this task joined a running cluster
  /// (server::join_cluster); 0 for a task of the ClusterSpec. A newer
  /// version without a joined task means it was removed.
  int64_t joined_at = 0;
};

/// Spawns the actor of one task: master service (sessions, placement,
/// partitioning, step fan-out), worker service (registered partitions,
/// executors) and the task's resource manager (containers of variables).
/// The caller publishes it (client/) or talks to it in process. It stops on an
/// exit message; its executors and variables go with it.
caf::actor spawn_task(caf::actor_system& sys, task_options opts);

/// "/job:J/replica:0/task:T", the task `opts` describe.
std::string task_name(const task_options& opts);

/// What this process's monitoring registry (actors/monitoring.hpp) knows
/// about the task `opts` describe (a task of `sys`), in Prometheus' text exposition format
/// (version 0.0.4): its actors' mailboxes, messages and busy time, queue
/// and variable gauges, steps by code and a step duration histogram, the
/// tensor channel's bytes and frames (`sys`'s links), the peers, the trainer's progress
/// and the process (process_resident_memory_bytes, ...). Never blocks
/// beyond the registry's short locks.
std::string metrics_text(caf::actor_system& sys, const task_options& opts);

} // namespace actorflow
