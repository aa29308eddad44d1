#pragma once

// Private to actors/: the master service of a task (TF's Master): client
// sessions, their graphs, planning (prune, place, partition, register) and
// its cache, the fan-out of a step to its partitions' executors and the
// fan-in of their replies, step deadlines, and the directory of the other
// tasks' workers. master.cpp holds the actor and the step protocol,
// master_plan.cpp the planning, peer_directory.cpp the directory.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actorflow/actors/deadline_table.hpp"
#include "actorflow/actors/monitoring.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "membership.hpp"
#include "plan_registration.hpp"
#include "runtime.hpp"
#include "actorflow/transport/tensor_channel.hpp"

namespace actorflow {

/// Whether a partition's executor knows the step's other executors (its
/// peers), which the first request of a plan brings. Later requests may go
/// over the tensor channel only once the executor has answered a request
/// that carried them: a channel request that overtook the first one (CAF's
/// connection and the channel are two paths) would find an executor that
/// does not know its master yet, and be dropped (docs/DESIGN.md,
/// "Concurrent first runs").
enum class peers_state : uint8_t {
  /// The next request carries the peers.
  unsent,
  /// Carried by a request not answered yet: requests go over CAF, behind it.
  sent,
  /// The executor answered: requests may take the channel.
  known,
};

/// A registered partition of a plan.
struct plan_part {
  std::string device;
  executor_actor executor;
  /// Feed positions this partition's `_Arg` nodes read.
  std::vector<int64_t> feeds;
  peers_state peers = peers_state::unsent;
  /// Its tensor channel inbox when it is in another process and both ends
  /// have one: later requests go there (tensor_channel::send_run_graph).
  tensor_channel::route route;
};

/// Everything a repeated run with the same signature reuses.
struct step_plan {
  std::vector<plan_part> parts;
  std::vector<std::string> peer_devices;
  /// run_graph_request::sink_devices.
  std::vector<std::string> sink_devices;
  std::vector<caf::actor> peers;
  /// run_graph_request::peer_inboxes.
  std::vector<std::string> peer_inboxes;
  /// Each part's graph, encoded (to_bytes), for the runs that ask for it
  /// (run_options::output_partition_graphs).
  std::vector<std::string> graphs;
};

using step_promise = caf::typed_response_promise<run_step_response>;

/// A step's identity and budget across its attempts: with replicated
/// variables a step that failed because a ps task was lost (or
/// superseded) runs again on the promoted backup, with the same tag (its
/// variable writes apply once) and inside its own deadline.
struct step_retry {
  /// run_graph_request::tag (0: the first attempt's step id).
  int64_t tag = 0;
  int attempts = 0;
  /// When the run gives up (its deadline, or 30 s without one); unset
  /// until its first attempt starts.
  caf::actor_clock::time_point deadline{};
  /// Why the last attempt failed: what the caller gets if the run gives
  /// up.
  status last_error;
};

/// A run waiting for its plan to be registered (or for a plan being
/// registered by a concurrent run of the same signature).
struct pending_run {
  step_promise rp;
  run_step_request req;
  int64_t timeout_ms = 0;
  step_retry retry;
};

/// A plan being registered and the runs that wait for it.
struct pending_plan {
  explicit pending_plan(size_t parts) : registration(parts) {
    // nop
  }
  std::shared_ptr<step_plan> plan = std::make_shared<step_plan>();
  plan_registration<pending_run> registration;
  /// The device of the first partition whose registration failed.
  std::string failed_device;
};

struct master_session {
  session_config config;
  graph_def graph;
  /// Node name -> position in `graph`, kept as deltas arrive so that a
  /// step's feed checks don't walk the whole graph.
  std::unordered_map<std::string, size_t> node_index;
  /// Registered plans by signature (feeds | fetches | targets).
  std::unordered_map<std::string, std::shared_ptr<step_plan>> plans;
  /// Plans being registered, by signature: a concurrent first run of the
  /// same signature waits there instead of registering its own.
  std::unordered_map<std::string, std::shared_ptr<pending_plan>> planning;
  /// Tasks this session had partitions on that were lost since: why, and
  /// the worker that was lost (its node and id). When the same worker
  /// answers again (a network cut or a stopped process that came back)
  /// the session goes on; another one (a restarted task), the next step
  /// fails Aborted (TF: "Graph handle is not found ... Possibly, this
  /// worker just restarted"), because the state (variables, queues) the
  /// session relied on is gone.
  struct lost_task_info {
    std::string reason;
    caf::node_id node;
    caf::actor_id id = 0;
  };
  std::map<std::string, lost_task_info> lost_tasks;
  /// Every executor registered for this session, on any task; ended when
  /// the session closes (TF's DeregisterGraph).
  std::vector<executor_actor> executors;
};

/// Fan-in state of one step on the master.
struct master_step {
  step_promise rp;
  size_t remaining = 0;
  bool done = false;
  bool trace = false;
  /// The plan it runs (its parts' peer state advances as they answer);
  /// `parts()` are the plan's, never copied per step.
  std::shared_ptr<step_plan> plan;
  std::vector<plan_part>& parts() const noexcept {
    return plan->parts;
  }
  std::vector<tensor> outputs;
  std::vector<run_graph_response> responses;
  /// Which parts have answered (the first one that has not is named when
  /// the step times out).
  std::vector<bool> replied;
  int64_t timeout_ms = 0;
  /// When the master started it (monitoring::ticks).
  uint64_t start_ticks = 0;
  /// Traced because the client asked (its response carries the stats)
  /// and/or because the monitor did (step_record::request_trace).
  bool trace_for_client = false;
  bool trace_for_monitor = false;
  /// run_options::output_partition_graphs.
  bool partition_graphs = false;
  /// Past its deadline: the parts that had not answered were asked to
  /// abort and say what they wait for (executor_detail::waiting_for);
  /// the first that names a blocking operation ends the step, else
  /// `waiting_on` (a part waiting for a value) or the generic message
  /// when all answered or the grace passed (check_step_deadlines).
  bool expiring = false;
  status waiting_on;
  /// Who asked for it (the client's session actor): when it dies or goes
  /// silent, the step is withdrawn everywhere.
  caf::actor_addr requester;
  /// The requester's number for it (run_step_request::client_step).
  int64_t client_step = 0;
  /// With replicated variables: the request, to run it again after a
  /// failover, and its identity across attempts.
  std::shared_ptr<run_step_request> req;
  step_retry retry;
};

/// Called with the worker of a task, or why it could not be reached.
using peer_callback = std::function<void(status, worker_actor)>;

struct master_state {
  task_options opts;
  std::string task_prefix; // "/job:J/replica:0/task:T"
  std::string device;      // task_prefix + "/device:CPU:0"
  /// This task's own worker.
  worker_actor worker;
  /// This task's inbox on the tensor channel, where executors in other
  /// processes answer the requests that went over the channel ("" for
  /// none).
  std::string reply_inbox;
  std::unordered_map<std::string, master_session> sessions;
  /// The requesters of steps this master watches (master_step::requester).
  std::set<caf::actor_addr> requesters;
  /// The workers of other tasks, by task, once reached.
  std::unordered_map<std::string, worker_actor> peers;
  /// Callers waiting for a task being reached, each until its deadline
  /// (one connect loop per task serves them all).
  struct peer_waiter {
    caf::actor_clock::time_point deadline;
    peer_callback k;
    /// A session's registration waits (resolve_peer's for_session).
    bool for_session = false;
  };
  std::unordered_map<std::string, std::vector<peer_waiter>> connecting;
  /// When the log next names a task being reached for a session (TF's
  /// "CreateSession still waiting for response from worker", every 10 s).
  std::unordered_map<std::string, caf::actor_clock::time_point> connect_log;
  /// Graph registrations waiting for a remote task's reply, by task: a
  /// lost task fails them at once (CAF fails no request already sent to
  /// a peer whose connection times out).
  std::map<std::string, std::map<uint64_t, std::function<void(status)>>>
    registering;
  uint64_t next_registration = 0;
  std::unordered_map<int64_t, master_step> steps;
  /// Steps their requester cancelled before they started (still being
  /// planned, or waiting for a task): each fails when it starts. Bounded:
  /// a cancel that crossed its step's reply matches nothing.
  std::deque<std::pair<caf::actor_addr, int64_t>> cancelled_early;
  /// Deadlines of the steps in `steps` that have one.
  deadline_table<int64_t> step_deadlines;
  std::shared_ptr<task_counters> counters;
  /// The task's monitor: spawned with the master when monitoring is on
  /// (its history starts then), else when first asked for (get_monitor).
  monitor_actor monitor;
  /// Where this master records its steps (the monitor reads it).
  std::shared_ptr<monitoring::step_record> step_record;
  uint64_t next_session = 0;
  int64_t step_base = 0;
  int64_t next_step = 0;
  // -- replicated variables (master_failover.cpp) --------------------------
  /// The replicated ps tasks in order (replica_ring), empty without
  /// replication.
  std::vector<std::string> ring;
  /// Which task serves each ps task's variables, where it is not the task
  /// itself (after a failover).
  std::map<std::string, std::string> routes;
  /// Ps tasks whose variables must move to their backup before the next
  /// attempt (their serving task was lost or superseded).
  std::set<std::string> failover_needed;
  /// Runs waiting to be tried again, by id (retry_step).
  std::unordered_map<int64_t, pending_run> retries;
  int64_t next_retry = 0;
  // -- elastic membership (membership.cpp) ---------------------------------
  /// Who is a member, at which version; `opts.cluster` follows it.
  membership members;
  /// The masters of other tasks, by task, once reached: membership
  /// changes and requests to the authority go there.
  std::unordered_map<std::string, master_actor> peer_masters;
  /// Tasks whose greeting the authority is answering (asking their
  /// worker over the connection they opened).
  std::set<std::string> greeted;
  /// Why this task, which joined, is no member any more (a newer version
  /// without it: it was removed while out of reach); its steps fail with
  /// it. Empty while it is a member.
  std::string removed;
  static inline const char* name = "actorflow.master";
};

using master_self = master_actor::stateful_pointer<master_state>;

/// Spawns the master of the task `opts` describe, with its worker.
master_actor spawn_master(caf::actor_system& sys, task_options opts,
                          worker_actor worker,
                          std::shared_ptr<task_counters> counters);

// -- master.cpp: the step protocol ---------------------------------------------

/// Answers `rp` with `err` as a step's result.
void deliver_error(step_promise& rp, status err);

/// Starts a step of `plan` for `req` on every partition.
void start_step(master_self self, step_promise rp,
                const std::shared_ptr<step_plan>& plan, run_step_request& req,
                int64_t timeout_ms, step_retry retry = {});

/// Runs a checked step of `sess` with its plan, planning it first if
/// needed (or waiting for the plan a concurrent run registers).
void run_planned(master_self self, step_promise rp, master_session& sess,
                 run_step_request req, step_retry retry = {});

/// Part `part` of step `id` answered `resp`: the step ends when every part
/// has answered or one failed (the others are then aborted).
void on_step_reply(master_self self, int64_t id, size_t part,
                   run_graph_response resp);

// -- master_reset.cpp -----------------------------------------------------------

/// Ends every session of this master: their executors on every task go,
/// and their handles answer Aborted from now on.
void close_all_sessions(master_self self);

/// TensorFlow's Session.reset: fails the steps running here with Aborted
/// naming the containers, closes every session, and frees `containers`
/// (each task's default one when empty) on every task of the cluster.
/// The reply: OK, or the first failure's code naming the tasks reached
/// and why each other one was not (a task gets 5 s to answer).
caf::typed_response_promise<status>
reset(master_self self, std::vector<std::string>& containers);

// -- master_losses.cpp -------------------------------------------------------------

/// Task `task` (its worker `lost`) went away: its steps fail now with
/// Unavailable naming it and its address, registrations waiting for it
/// too, and the plans that use it are dropped (remembered as lost unless
/// its variables are replicated).
void lost_task(master_self self, const std::string& task,
               const std::string& reason, const caf::actor_addr& lost);

/// An executor in another process that took requests over the tensor
/// channel ended: its steps fail as a CAF request to it would have.
void lost_executor(master_self self, const caf::actor_addr& exec,
                   const std::string& reason);

/// The client `who` of some steps died or went silent: each is withdrawn
/// everywhere (Cancelled).
void lost_requester(master_self self, const caf::actor_addr& who,
                    const std::string& reason);

/// `who` cancelled its step `client_step`: withdrawn everywhere; one not
/// started yet is remembered (the last 64) and fails when it starts.
void cancel_client_step(master_self self, const caf::actor_addr& who,
                        int64_t client_step);

/// Whether `who` cancelled step `client_step` before it started
/// (forgotten once matched).
bool cancelled_before_start(master_state& st, const caf::actor_addr& who,
                            int64_t client_step);

// -- master_failover.cpp ---------------------------------------------------------

/// The task that serves `home`'s variables (itself unless it failed over).
std::string route_of(const master_state& st, const std::string& home);

/// The replicated ps task a device belongs to, or "" (not replicated).
std::string replicated_home(const master_state& st, const std::string& device);

/// Whether a run that failed with `err` on `device` is tried again (after
/// a failover when its task was lost or superseded): then it is taken
/// over and true returned; `run` is left alone otherwise.
bool retry_run(master_self self, pending_run& run, const std::string& device,
               const status& err);

/// The handler of retry_step: the next attempt of run `id`.
void on_retry(master_self self, int64_t id);

/// The serving task `task` was lost: the ps tasks it served fail over to
/// their backups at their next step. True when `task` serves replicated
/// variables (its loss costs no state).
bool lost_replicated(master_self self, const std::string& task);

/// The signature plans are cached by.
std::string signature(const run_step_request& req);

/// One line to stderr: "actorflow: TASK: text" (what the nodes' logs
/// name: failovers, membership changes).
void log_line(master_self self, const std::string& text);

// -- membership.cpp ---------------------------------------------------------------

/// A task of `job` at `address` joins (the authority decides; another
/// task forwards): its name, the new version and the members.
/// InvalidArgument for job "ps" or an address that is not host:port;
/// Unavailable when the authority cannot be reached.
caf::result<status, std::string, int64_t, std::vector<std::string>>
on_join(master_self self, const std::string& job, const std::string& address);

/// Elastic member `task` leaves (forwarded to the authority).
/// FailedPrecondition for a member of the ClusterSpec, NotFound for no
/// member.
caf::result<status> on_leave(master_self self, const std::string& task);

/// A membership at `version` (the authority's broadcast, or a task's view
/// the authority missed): adopted when newer, and logged.
void on_membership_update(master_self self, int64_t version,
                          const std::vector<std::string>& flat);

/// The worker of `task` went down (`reason`; `orderly` when it shut down
/// in order, which the log leaves out): the authority removes an elastic
/// member, and marks a ClusterSpec task of a job other than "ps" down
/// until it is reached again (peer_reached). `master`, the task's master
/// where known, is told a removed elastic member's new version (a task
/// lost to silence may resume).
void member_lost(master_self self, const std::string& task,
                 const std::string& reason, bool orderly,
                 const master_actor& master = {});

/// At a master's start. The authority watches the ClusterSpec's tasks
/// that can go down (member_lost when they are lost or never reached);
/// such a task, or one that joined, greets the authority (its view, with
/// its name), so that the authority watches it through that connection
/// instead of dialing it.
void watch_members(master_self self);

/// A task's view with its name (it reached the authority): the authority
/// watches it through that connection; then as on_membership_update.
void on_member_greeting(master_self self, int64_t version,
                        const std::vector<std::string>& flat,
                        const std::string& task);

/// The authority's check of a member it watches: one it has not heard
/// from (no greeting, no step) since it began to watch it is dialed once.
void on_member_check(master_self self, const std::string& task);

/// What the monitor says of peer `task`: "joined (membership version N)"
/// for a task that joined the running cluster, "" otherwise.
std::string member_note(const master_state& st, const std::string& task);

/// `task`'s master was reached: it is remembered, a ClusterSpec task that
/// was down is back (at the authority), and the authority is told this
/// task's view when it is newer than a ClusterSpec's (the authority
/// restarted).
void peer_reached(master_self self, const std::string& task,
                  const master_actor& master);

// -- master_plan.cpp -------------------------------------------------------------

/// Prunes, places and partitions the step's graph, registers the
/// partitions with their tasks' workers and caches the plan, then runs the
/// step and every run of the same signature that arrived meanwhile.
/// Errors fail the step (and those runs), never the task; nothing throws.
void plan_and_run(master_self self, pending_run run);

// -- peer_directory.cpp ------------------------------------------------------------

/// Calls `k` with the worker of `task` (this task's own at once), reaching
/// it first if needed: tasks of a cluster start in any order, so a task
/// that refuses is tried again with back-off until `deadline`, then `k`
/// gets Unavailable naming the task and its address. With `for_session`
/// (a session's graph waits for the task), the log names the task every
/// 10 s while it cannot be reached, as TF's master does.
void resolve_peer(master_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, peer_callback k,
                  bool for_session = false);

/// One attempt of reaching `task` (the connect message's handler).
void connect_peer(master_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, int attempt);

/// `task`'s master and worker were reached (by this task's dial, or
/// through the connection `task` opened: it greeted the authority): the
/// worker is watched and the steps waiting for it go on.
void peer_found(master_self self, const std::string& task,
                const master_actor& master, const worker_actor& worker);

/// The worker of `task` went down: forget it; true when it was a peer's.
/// `master` gets the task's master, where it was known.
bool forget_peer(master_self self, const caf::actor_addr& source,
                 std::string& task, master_actor* master = nullptr);

} // namespace actorflow
