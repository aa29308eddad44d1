#pragma once

// Private to actors/: the actors a task's master and worker spawn.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>

#include <caf/all.hpp>

#include "actorflow/transport/messages.hpp"
#include "actorflow/actors/monitoring.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/transport/env_number.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/graph_def.hpp"
#include "actorflow/kernels/accumulator_core.hpp"
#include "actorflow/kernels/queue_core.hpp"

namespace actorflow {

/// Counters shared by a task's master, its worker and its executors.
/// Monitoring only: relaxed atomics, never used for control flow.
struct task_counters {
  std::atomic<uint64_t> messages{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> steps{0};
  /// Gauges the worker sets: its variables and registered partitions.
  std::atomic<uint64_t> variables{0};
  std::atomic<uint64_t> partitions{0};
};

/// The state of one stateful kernel (a random op's generator, Print's
/// count of runs) in one session. TensorFlow keeps one kernel per stateful
/// node and session, so every plan (fetch signature) that runs the node
/// continues the same sequence or count; executors of different plans may
/// run at once, hence the mutex.
struct kernel_cell {
  std::mutex mtx;
  std::mt19937_64 gen;
  int64_t runs = 0;
};

/// The kernel cells of a partition's stateful kernels, by node name.
using kernel_cells
  = std::unordered_map<std::string, std::shared_ptr<kernel_cell>>;

/// A cell for `node`; for a random op its generator seeded as TF seeds
/// one: from its `seed`/`seed2` attributes, or from std::random_device when
/// both are 0.
std::shared_ptr<kernel_cell> make_kernel_cell(const node_def& node);

/// The exit reason of a resource actor its worker frees (a container
/// reset): user_shutdown, carrying `why` ("container 'c' was reset") for
/// the operations the actor cancels (freed_status).
inline caf::error freeing_reason(const std::string& why) {
  return caf::error{static_cast<uint8_t>(caf::exit_reason::user_shutdown),
                    caf::atom("exit"), caf::make_message(why)};
}

/// True for freeing_reason's reasons (a container reset).
inline bool freed_by_reset(const caf::error& reason) {
  return reason.context().match_elements<std::string>();
}

/// What a resource actor (`what`: "FIFOQueue 'q'") ending with `reason`
/// answers its pending operations: Aborted with freeing_reason's text, or
/// naming the reason (the task stops, say).
inline status freed_status(const caf::error& reason, const std::string& what) {
  if (freed_by_reset(reason))
    return {error_code::aborted, reason.context().get_as<std::string>(0)};
  return {error_code::aborted,
          what + " was freed (" + caf::to_string(reason) + ")"};
}

/// How an executor's answer to a step aborted at its deadline says what
/// the step waits for there (executor_detail::waiting_for): a blocking
/// operation (the cause, which the master reports) or a value from
/// another device (a consequence, reported only without a cause).
inline constexpr const char* waiting_for_marker = " waiting for ";
inline constexpr const char* waiting_on_marker = " waiting on ";

/// True for the ops whose kernels keep state across steps: the random
/// ops and Print.
bool has_kernel_cell(const std::string& op);

// Each spawn_* below takes the name, container and task the monitor shows
// the actor under (monitoring::identity); it sets the kind itself.

/// A variable's part in replication (docs/DESIGN.md, "Replicated
/// variables").
enum class replica_role : uint8_t {
  /// Not replicated, or a promoted backup without a backup of its own:
  /// writes apply here alone.
  solo,
  /// Forwards each write to its backup and answers once the backup has it.
  primary,
  /// A primary whose backup was lost: refuses writes (Unavailable) until
  /// its worker attaches a new backup. Going on alone could split the
  /// brain: the lost backup may be silent, not dead, and promoted.
  orphan,
  /// Takes a primary's forwarded writes; serves nothing until promoted.
  backup,
  /// Superseded by a promoted backup: takes and serves nothing.
  deposed,
};

/// How a variable starts: its role and epoch, the task whose variable it
/// is (for messages) and the worker told about losses.
struct replica_init {
  replica_role role = replica_role::solo;
  int64_t epoch = 0;
  std::string home;
  caf::actor worker;
  /// Where its tensor channel inbox listens ("" for none: its writes and
  /// acknowledgements take CAF's connection).
  std::string inbox_host;
};

/// A variable: owns one tensor (container/name on its task). Messages:
/// variable_actor in type_ids.hpp.
variable_actor spawn_variable(caf::actor_system& sys, std::string name,
                              dtype type, tensor_shape shape,
                              monitoring::identity who = {},
                              replica_init init = {});

/// Where a variable actor keeps its value. The actor is the only writer
/// and holds `mtx` while it changes the value (in place, when nothing
/// else shares the buffer); an executor of the same process reads it
/// without a message round trip when `try_lock` succeeds and sends the
/// actor a read otherwise. Nothing waits on `mtx` but the writer, for the
/// length of a tensor copy.
struct variable_cell {
  std::mutex mtx;
  tensor value;
  /// Set when the variable was superseded (a deposed primary): its value
  /// is no longer the variable's, and readers ask the actor (which says
  /// so).
  std::atomic<bool> stale{false};
};

/// The cell of a variable actor spawned by spawn_variable in its actor
/// system; nullptr for any other actor (e.g. a proxy of a remote one) or
/// one that ended.
std::shared_ptr<variable_cell> variable_cell_of(const variable_actor& var);

/// A queue or accumulator of a replicated ps task (issue 31 §1;
/// durable_state.hpp): the variable of its store its state goes to, and
/// that variable's value when it was spawned (a promoted backup's; an
/// invalid tensor for a new one). A default one: not replicated.
struct durable_init {
  variable_actor var;
  tensor image;
};

/// A queue with TensorFlow's semantics (kernels/queue_core.hpp) as an
/// actor: waiting operations are pending requests inside it. Replicated
/// (`durable.var`), it answers each operation once the variable holds
/// the state after it; an image it cannot read makes every operation
/// fail with DataLoss.
queue_actor spawn_queue(caf::actor_system& sys, queue_options opts,
                        monitoring::identity who = {},
                        durable_init durable = {});

class reader_core;

/// A reader (kernels/reader_core.hpp) as a detached actor: it reads files
/// on a thread of its own and pulls file names from the queue each read
/// names.
reader_actor spawn_reader(caf::actor_system& sys,
                          std::shared_ptr<reader_core> core,
                          monitoring::identity who = {});

/// A ConditionalAccumulator (kernels/accumulator_core.hpp) as an actor:
/// waiting takes are pending requests inside it.
/// Replicated as a queue is (spawn_queue).
accumulator_actor spawn_accumulator(caf::actor_system& sys,
                                    accumulator_options opts,
                                    monitoring::identity who = {},
                                    durable_init durable = {});

/// The accumulator options a ConditionalAccumulator node describes.
accumulator_options accumulator_options_of(const node_def& node,
                                           std::string name);

/// The queue options a queue node's attributes describe, named `name`.
queue_options queue_options_of(const node_def& node, std::string name);

/// What an executor is spawned with.
struct executor_options {
  /// Its task's worker (resource lookups).
  worker_actor worker;
  /// The registered partition.
  graph_def partition;
  /// Its device, and the container of resources that name none.
  std::string device;
  std::string default_container;
  std::shared_ptr<task_counters> counters;
  /// The state of its stateful kernels, by node.
  kernel_cells cells;
  /// The session it belongs to (private queues are per session).
  std::string session;
  /// The master that registered it, whose steps it runs: watched, so that
  /// its steps are withdrawn (their queue operations cancelled) and the
  /// executor ends when that master's process dies or goes silent.
  caf::actor master;
  /// What the monitor shows it as.
  monitoring::identity who;
};

/// Runs one registered partition. Messages: (run_graph,
/// run_graph_request, vector<actor> peers) -> run_graph_response;
/// (recv_tensor, int64 step, string key, tensor); (abort_step, int64 step,
/// status).
executor_actor spawn_executor(caf::actor_system& sys, executor_options opts);

/// Spawns the monitor actor of the task `opts` describe (monitor_actor in
/// type_ids.hpp).
monitor_actor spawn_monitor(caf::actor_system& sys, task_options opts);

/// Microseconds since the epoch (step stats).
int64_t now_micros();

} // namespace actorflow
