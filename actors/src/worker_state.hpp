#pragma once

// Private to actors/: the state of a task's worker (worker.cpp: graph
// registration and resources; worker_replicas.cpp: its stores of
// variables and their replication).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "durable_state.hpp"
#include "runtime.hpp"

namespace actorflow {

/// The variables, queues and accumulators of one task (its home) that
/// this worker holds, as the task itself, as its backup (variables only:
/// a queue's or accumulator's state is a variable, durable_state.hpp), or
/// acting for it after a failover (docs/DESIGN.md, "Replicated
/// variables").
struct variable_store {
  enum class role_t : uint8_t {
    /// A replicated task that has just started: it asks its backup
    /// whether that serves its variables already (it was replaced) before
    /// it serves them itself.
    starting,
    /// Serves the variables (as the task itself, or acting for it).
    primary,
    /// Holds a primary's copy; serves nothing until promoted.
    backup,
    /// Superseded by a promoted backup.
    deposed,
  };
  role_t role = role_t::primary;
  /// Raised by each promotion; writes of older epochs are refused.
  int64_t epoch = 1;
  /// A primary that may write without a backup (unreplicated, or a
  /// promoted backup until a backup of its own joins).
  bool alone = true;
  /// A primary's backup: its task and, once attached, its worker.
  std::string backup_task;
  worker_actor backup;
  bool attaching = false;
  /// A backup: its primary's task; whether the primary finished handing
  /// over its variables (a backup promoted before serves what it has).
  std::string primary_task;
  bool complete = false;
  /// A backup: its primary's worker, watched.
  caf::actor_addr primary_worker;
  struct entry {
    variable_actor handle;
    int32_t type = 0;
    std::string shape_bytes;
  };
  std::map<std::pair<std::string, std::string>, entry> vars;
  /// A primary's variables given a backup variable on `backup`.
  std::set<std::pair<std::string, std::string>> replicated_keys;
  /// A queue or accumulator by (container, name); replicated, it exists
  /// once its state variable was found (`waiting` holds the lookups
  /// until then).
  template <class Options, class Handle>
  struct resource_entry {
    using options_type = Options;
    Options opts;
    Handle handle;
    std::vector<caf::typed_response_promise<status, Handle>> waiting;
  };
  using queue_entry = resource_entry<queue_options, queue_actor>;
  using accumulator_entry
    = resource_entry<accumulator_options, accumulator_actor>;
  std::map<std::pair<std::string, std::string>, queue_entry> queues;
  std::map<std::pair<std::string, std::string>, accumulator_entry>
    accumulators;
};

struct worker_state {
  task_options opts;
  std::string task_prefix; // "/job:J/replica:0/task:T"
  std::string device;      // task_prefix + "/device:CPU:0"
  /// The host this task's executors receive tensors on (tensor_channel):
  /// its address's host, "" without an address or with the channel off.
  std::string channel_host;
  /// Variables, queues and accumulators by home task (this task's own:
  /// task_prefix).
  std::map<std::string, variable_store> stores;
  /// This task's job is replicated (task_options::replicate_variables and
  /// job "ps" with two tasks or more); its tasks in order.
  bool replicated = false;
  std::vector<std::string> ring;
  /// The master that finds other tasks' workers (find_peer).
  caf::actor master;
  /// A replica tick is scheduled.
  bool ticking = false;
  struct reader_entry {
    node_def def;
    reader_actor handle;
  };
  std::map<std::pair<std::string, std::string>, reader_entry> readers;
  std::vector<executor_actor> executors;
  /// Stateful kernels' state (kernel_cell) per (session, node), shared by
  /// that session's executors on this task; gone with the last of them.
  std::map<std::pair<std::string, std::string>, std::weak_ptr<kernel_cell>> cells;
  std::shared_ptr<task_counters> counters;
  static inline const char* name = "actorflow.worker";

  /// The gauges the master's statistics read.
  void count_resources() {
    size_t n = 0;
    // A graph's variables: not the states of queues and accumulators.
    for (auto& [home, store] : stores)
      if (store.role == variable_store::role_t::primary)
        for (auto& [key, e] : store.vars)
          n += is_durable_state_name(key.second) ? 0 : 1;
    counters->variables.store(n, std::memory_order_relaxed);
    counters->partitions.store(executors.size(), std::memory_order_relaxed);
  }
};

using worker_self = worker_actor::stateful_pointer<worker_state>;

/// Ends one resource of a store or the worker (a container reset, a
/// store handed over, the task's end): its actor exits with `reason`, and
/// the lookups still waiting for it (a replicated queue or accumulator
/// whose state variable is being found) get `why`.
template <class Entry>
void end_resource(worker_self self, Entry& e, const status& why,
                  caf::error reason = caf::exit_reason::user_shutdown) {
  if constexpr (requires { e.waiting; })
    for (auto& rp : e.waiting)
      rp.deliver(why, decltype(e.handle){});
  if (e.handle)
    self->send_exit(e.handle, reason);
}

/// InvalidArgument for a container name TF refuses (worker.cpp).
status check_container(const std::string& container);

// -- worker_replicas.cpp ---------------------------------------------------

/// Sets up this task's own store (replicated: starting).
void init_stores(worker_self self);

/// The variable (container, name) of `home` (this task's own for ""),
/// created on first lookup; Aborted ("Superseded: ...") when this worker
/// does not serve `home`'s variables.
caf::typed_response_promise<status, variable_actor>
get_variable(worker_self self, const std::string& container,
             const std::string& name, int32_t type,
             const std::string& shape_bytes, const std::string& home);

/// OK where this worker serves the store of `home` (its own, or a task's
/// it took over); Unavailable while it is starting, Aborted ("Superseded:
/// ...") otherwise.
status serves_store(worker_self self, const std::string& home);

/// get_variable's work: calls `k` with the variable or the error, at once
/// or (a new variable whose backup is created first) later.
void find_variable(worker_self self, const std::string& container,
                   const std::string& name, int32_t type,
                   const std::string& shape_bytes, const std::string& home,
                   std::function<void(status, variable_actor)> k);

/// Whether this worker may register a partition for `device` (its own, or
/// of a task it serves after a failover); readers are not replicated: a
/// failed-over partition that uses one is refused naming it.
status check_partition_home(worker_self self, const std::string& device,
                            const graph_def& g);

/// The handlers of replication (attach, get_replica, promote, serving,
/// replica_lost, the tick).
void on_attach(worker_self self, caf::typed_response_promise<status> rp,
               const std::string& home, int64_t epoch,
               const std::string& primary, bool complete,
               const caf::actor& primary_worker);
caf::result<status, caf::actor>
get_replica(worker_self self, const std::string& home,
            const std::string& container, const std::string& name,
            int32_t type, const std::string& shape_bytes, int64_t epoch);
caf::result<status, int64_t> promote(worker_self self,
                                     const std::string& home);
std::pair<std::string, int64_t> serving(worker_self self,
                                        const std::string& home);
void on_replica_lost(worker_self self, const std::string& home,
                     bool deposed, const caf::actor_addr& var);
void replica_tick(worker_self self);
/// A store's backup worker went down; true when it was one.
bool forget_backup(worker_self self, const caf::actor_addr& source);
/// A backup store's primary worker went down (`reason`): the store is
/// promoted; true when it was one.
bool lost_primary(worker_self self, const caf::actor_addr& source,
                  const std::string& reason);

} // namespace actorflow
