#include "actorflow/client/session.hpp"

#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actorflow/actors/deadline_table.hpp"
#include "actorflow/actors/instrumented.hpp"
#include "actorflow/transport/run_actors.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/wire.hpp"
#include "actorflow/client/runtime.hpp"
#include "address.hpp"
#include "connect_master.hpp"

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <unordered_map>

namespace actorflow {

namespace {

/// Moving averages of a session's reply times, in ns, each capped so that
/// one slow step moves it little (see call_master).
struct reply_times {
  /// Capped at 4 x spin: whether to poll for the reply.
  std::atomic<int64_t> polling_ns{0};
  /// Whole calls, from the send to the caller having the reply, when the
  /// caller ran actors (helped) and when it did not: which way is faster
  /// for this session's steps (see call_master), and (plain calls)
  /// whether its steps are too long to help at all. Capped at 2 x
  /// help_max_ns. 0: not measured yet.
  std::atomic<int64_t> helped_call_ns{0};
  std::atomic<int64_t> plain_call_ns{0};
  std::atomic<uint64_t> calls{0};
};

struct step_result {
  run_step_response response;
  status transport;
  /// When the reply was handed over (see call_master).
  std::chrono::steady_clock::time_point done;
};

/// The steps of one session waiting for the master, by id. Once `ended`,
/// no step is added: its status answers them all.
struct pending_steps {
  explicit pending_steps(caf::actor_system& sys) : sys(sys) {
    // nop
  }

  /// Where callers may wait in run_actors_until (see call_master).
  caf::actor_system& sys;
  /// How many of this session's callers wait there: only they need
  /// notify_actor_helpers (which takes the scheduler's lock), so a step
  /// whose caller blocks or polls does not pay for it.
  std::atomic<int> helping{0};
  std::mutex mtx;
  std::unordered_map<uint64_t, std::promise<step_result>> waiting;
  uint64_t next_id = 0;
  bool ended = false;
  status end_status;

  /// False when `id` was answered already.
  bool finish(uint64_t id, step_result result) {
    std::promise<step_result> p;
    {
      std::lock_guard<std::mutex> guard{mtx};
      auto i = waiting.find(id);
      if (i == waiting.end())
        return false;
      p = std::move(i->second);
      waiting.erase(i);
    }
    result.done = std::chrono::steady_clock::now();
    p.set_value(std::move(result));
    notify_helpers();
    return true;
  }

  void end(status why) {
    std::unordered_map<uint64_t, std::promise<step_result>> left;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (ended)
        return;
      ended = true;
      end_status = why;
      left.swap(waiting);
    }
    for (auto& [id, p] : left)
      p.set_value({{}, why, std::chrono::steady_clock::now()});
    notify_helpers();
  }

  void notify_helpers() {
    if (helping.load() > 0)
      notify_actor_helpers(sys);
  }
};

} // namespace

struct session::impl {
  caf::actor_system* sys = nullptr;
  graph* g = nullptr;
  session_config config;
  master_actor master;
  /// Set for a private in-process engine, which this session owns.
  bool owns_master = false;
  std::string target;
  std::string handle;
  /// Guards sent_nodes: runs may come from several threads (queue
  /// runners beside the training loop).
  std::mutex mtx;
  /// Nodes of `g` the master has already received.
  int sent_nodes = 0;
  std::atomic<bool> closed = false;
  /// Steps waiting for the master, shared with `client`.
  std::shared_ptr<pending_steps> pending;
  /// Sends this session's steps to the master and hands the replies to
  /// the waiting threads (see client_actor).
  caf::actor client;
  /// How long run() may poll for the reply before it blocks.
  caf::timespan spin{0};
  /// Moving averages of the reply times (see call_master).
  reply_times replies;

  /// Spawns `client` for `master`; `what` names the master in errors.
  void start_client(std::string what);
};

namespace {

std::chrono::milliseconds connect_timeout(const session_config& config) {
  return std::chrono::milliseconds(
    config.operation_timeout_in_ms > 0 ? config.operation_timeout_in_ms
                                       : 10000);
}


// Opens the master session; returns its handle.
std::string create_master_session(caf::actor_system& sys,
                                  const master_actor& master,
                                  const session_config& config,
                                  const std::string& what) {
  caf::scoped_actor self{sys};
  std::string handle;
  status err;
  self
    ->request(master, connect_timeout(config), create_session_atom_v, config)
    .receive([&](std::string& h) { handle = std::move(h); },
             [&](caf::error& e) {
               err = to_status(e, what);
               if (err.code() == error_code::deadline_exceeded)
                 err = {error_code::unavailable,
                        "Master at " + what + " did not answer: "
                          + err.message()};
             });
  throw_if_error(err);
  return handle;
}

// One actor per session carries its steps (spawning one per step cost
// more than the rest of a trivial step, and left a monitor behind on the
// master each time). It monitors the master, so that a master that dies
// or whose process is lost ends every wait with Unavailable instead of
// leaving callers blocked; when the session closes it ends, and steps
// still waiting fail with Aborted.
caf::behavior client_actor(caf::event_based_actor* self, master_actor master,
                           std::shared_ptr<pending_steps> pending,
                           std::string what) {
  self->monitor(master);
  self->set_down_handler([self, pending, what](caf::down_msg& dm) {
    pending->end({error_code::unavailable, "Lost the master at " + what
                                             + ": "
                                             + caf::to_string(dm.reason)});
    self->quit();
  });
  self->attach_functor([pending] {
    pending->end({error_code::aborted, "Session was closed while the step "
                                       "was running."});
  });
  // The waits' deadlines, without CAF request timeouts (deadline_table.hpp).
  auto deadlines = std::make_shared<deadline_table<uint64_t>>();
  return {
    [self, master, pending, what, deadlines](run_step_atom, uint64_t id,
                                             run_step_request& req,
                                             int64_t wait_ms) {
      if (wait_ms > 0) {
        auto now = std::chrono::steady_clock::now();
        if (auto delay = deadlines->add(
              id, now + std::chrono::milliseconds(wait_ms), now))
          self->delayed_send(self, *delay, check_deadlines_atom_v);
      }
      self->request(master, caf::infinite, run_step_atom_v, std::move(req))
        .then(
          [pending, id, deadlines](run_step_response& r) {
            deadlines->erase(id);
            pending->finish(id, {std::move(r), {}, {}});
          },
          [pending, id, what, deadlines](caf::error& e) {
            deadlines->erase(id);
            pending->finish(id, {{}, to_status(e, what), {}});
          });
    },
    [self, pending, what, deadlines](check_deadlines_atom) {
      std::optional<std::chrono::steady_clock::duration> rearm;
      for (auto id : deadlines->expire(std::chrono::steady_clock::now(),
                                       rearm))
        pending->finish(id, {{},
                             {error_code::deadline_exceeded,
                              "Timed out waiting for a reply (" + what + ")"},
                             {}});
      if (rearm)
        self->delayed_send(self, *rearm, check_deadlines_atom_v);
    },
    // The caller gave up (step_cancellation): it is answered now, and the
    // master withdraws the step. Messages to the master stay in order, so
    // the caller's next step comes after the withdrawal.
    [self, master, pending, deadlines](cancel_step_atom, int64_t id) {
      auto key = static_cast<uint64_t>(id);
      deadlines->erase(key);
      if (pending->finish(key, {{},
                                {error_code::cancelled,
                                 "Step was cancelled by its caller"},
                                {}}))
        self->send(master, cancel_step_atom_v, id);
    },
  };
}

// A caller may wait for its reply by running actors (run_actors_until):
// its thread takes the step to the master and the reply from the
// network, where a worker would have to be woken for each. Whether that
// is faster depends on the step, so each session measures both ways and
// takes the faster, trying the other way every help_probe_every calls
// (the steps of a session change). What was measured: a local step takes
// 4-9 us when a spinning worker runs it and ~19 us when its caller does
// (the two race); a remote small step 54 us against 30; a one-worker
// training step of actorflow-train's MLP (~2-3 ms) saved ~90 us of
// wake-ups when its caller helped: +5-9 % (docs/PERFORMANCE.md). Steps
// whose plain calls average more than help_max_ns never are: a caller
// running actors could be kept in a long job that is not its own.
constexpr int64_t help_max_ns = 10'000'000;
constexpr uint64_t help_probe_every = 32;

// Sends one step through the session's client actor and waits for its
// reply. While this session's replies have been arriving within `spin`,
// it polls for up to that long first (waking a blocked thread costs tens
// of µs on a VM: more than a small local step); while they take a remote
// step's time, it runs actors until the reply is there; otherwise it
// blocks at once, leaving the core to the processes that compute the
// reply.
step_result call_master(pending_steps& pending, const caf::actor& client,
                        run_step_request req, int64_t wait_ms,
                        caf::timespan spin, reply_times& replies,
                        step_cancellation* cancel) {
  auto wants_cancel = [cancel] {
    if (cancel->cancelled())
      return true;
    if (cancel->poll && cancel->poll()) {
      cancel->cancel();
      return true;
    }
    return false;
  };
  if (cancel != nullptr && wants_cancel())
    return {{},
            {error_code::cancelled, "Step was cancelled by its caller"},
            std::chrono::steady_clock::now()};
  std::future<step_result> result;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> guard{pending.mtx};
    if (pending.ended)
      return {{}, pending.end_status, std::chrono::steady_clock::now()};
    id = pending.next_id++;
    result = pending.waiting[id].get_future();
  }
  req.client_step = static_cast<int64_t>(id);
  using clock = std::chrono::steady_clock;
  auto sent = clock::now();
  auto polling_avg = replies.polling_ns.load(std::memory_order_relaxed);
  auto send = [&] {
    caf::anon_send(client, run_step_atom_v, id, std::move(req), wait_ms);
  };
  auto ready = [&] {
    return result.wait_for(std::chrono::seconds{0})
           == std::future_status::ready;
  };
  bool helped = false;
  auto call = replies.calls.fetch_add(1, std::memory_order_relaxed);
  auto helped_avg = replies.helped_call_ns.load(std::memory_order_relaxed);
  auto plain_avg = replies.plain_call_ns.load(std::memory_order_relaxed);
  // The faster way so far; a way not measured yet is tried first, and the
  // slower one again now and then.
  bool help = helped_avg == 0 || (plain_avg != 0 && helped_avg < plain_avg);
  if (call % help_probe_every == help_probe_every - 1)
    help = !help;
  // A caller that may cancel waits where it can look at its cancellation.
  if (help && plain_avg <= help_max_ns && cancel == nullptr) {
    // Counted before the step goes out, so that its reply notifies.
    ++pending.helping;
    helped = run_actors_until(pending.sys, send, ready);
    --pending.helping;
  }
  if (!helped)
    send();
  if (spin.count() > 0 && polling_avg < spin.count()) {
    auto deadline = sent + spin;
    while (!ready() && clock::now() < deadline) {
      // poll
    }
  }
  if (cancel != nullptr)
    while (result.wait_for(cancel->poll_interval)
           != std::future_status::ready)
      if (wants_cancel()) {
        caf::anon_send(client, cancel_step_atom_v, static_cast<int64_t>(id));
        break;
      }
  auto out = result.get();
  // Until the reply was handed over, not until this thread woke up: a
  // blocked caller's wake-up latency must not make replies look too slow
  // to poll for. Capped, so that one slow step does not stop the polling
  // for long.
  auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(
                out.done - sent)
                .count();
  took = std::max<int64_t>(took, 0);
  auto add = [](std::atomic<int64_t>& into, int64_t old, int64_t sample,
                int64_t cap) {
    into.store(old + (std::min(sample, cap) - old) / 8,
               std::memory_order_relaxed);
  };
  add(replies.polling_ns, polling_avg, took, 4 * spin.count());
  // The whole call, wake-up included: what the two ways are compared on.
  // A way's first sample is taken as it is (0 means "not measured").
  auto whole = std::max<int64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - sent)
      .count(),
    1);
  auto old_way = helped ? helped_avg : plain_avg;
  add(helped ? replies.helped_call_ns : replies.plain_call_ns,
      old_way == 0 ? whole : old_way, whole, 2 * help_max_ns);
  return out;
}

} // namespace

master_actor connect_master(caf::actor_system& sys, const std::string& target,
                            const session_config& config) {
  auto address = strip_scheme(target);
  host_port parsed;
  if (!host_port::parse(address, parsed).ok()) {
    // As TF: a target no session factory takes is NotFound; one with a
    // known scheme but a bad address, InvalidArgument.
    if (address == target)
      throw op_error(error_code::not_found,
                     "No session factory registered for the given session "
                     "options: {target: \"" + target
                       + "\"} Registered factories are {DIRECT_SESSION, "
                         "GRPC_SESSION, CAF_SESSION} (targets \"\", "
                         "grpc://host:port, caf://host:port or host:port)");
    throw op_error(error_code::invalid_argument,
                   "Malformed session target \"" + target
                     + "\": expected caf://host:port or grpc://host:port");
  }
  // Through the middleman actor, so that the wait has a deadline.
  caf::scoped_actor self{sys};
  status err;
  master_actor master;
  auto mm = transport_actor(sys);
  self
    ->request(mm, connect_timeout(config), caf::connect_atom::value,
              parsed.host, parsed.port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr,
          const std::set<std::string>&) {
        master = caf::actor_cast<master_actor>(ptr);
        if (!master)
          err = {error_code::unavailable,
                 "No master published at " + std::string{address}};
      },
      [&](caf::error& e) {
        auto tls = last_tls_failure(sys, parsed.host, parsed.port);
        err = {error_code::unavailable,
               "Could not connect to master at " + std::string{address} + ": "
                 + sys.render(e) + (tls.empty() ? "" : " (" + tls + ")")};
      });
  throw_if_error(err);
  return master;
}

void session::impl::start_client(std::string what) {
  pending = std::make_shared<pending_steps>(*sys);
  spin = caf::get_or(sys->config(), "actorflow.scheduler-spin",
                     caf::timespan{0});
  client = spawn_instrumented(*sys,
                              {.kind = monitoring::actor_kind::client,
                               .name = handle + " on " + what,
                               .container = "",
                               .task = ""},
                              client_actor, master, pending, std::move(what));
}

session::session(session_config config, graph* g)
  : impl_(std::make_unique<impl>()) {
  impl_->sys = &default_system();
  impl_->g = g != nullptr ? g : &default_graph();
  impl_->config = config;
  task_options opts;
  opts.job = "localhost";
  opts.task = 0;
  opts.cluster["/job:localhost/replica:0/task:0"] = "";
  impl_->master = caf::actor_cast<master_actor>(spawn_task(*impl_->sys, opts));
  impl_->owns_master = true;
  impl_->target = "";
  impl_->handle = create_master_session(*impl_->sys, impl_->master, config,
                                        "in-process engine");
  impl_->start_client("in-process engine");
}

session::session(const std::string& target, session_config config, graph* g)
  : session(default_system(), target, config, g) {
  // nop
}

session::session(caf::actor_system& sys, const std::string& target,
                 session_config config, graph* g)
  : impl_(std::make_unique<impl>()) {
  impl_->sys = &sys;
  impl_->g = g != nullptr ? g : &default_graph();
  impl_->config = config;
  impl_->target = target;
  impl_->master = connect_master(sys, target, config);
  impl_->handle = create_master_session(
    sys, impl_->master, config, std::string{strip_scheme(target)});
  impl_->start_client(std::string{strip_scheme(target)});
}

session::session(session&&) noexcept = default;

session& session::operator=(session&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

session::~session() {
  close();
}

graph& session::get_graph() const {
  return *impl_->g;
}

void session::close() {
  if (!impl_ || impl_->closed.exchange(true))
    return;
  // Steps still running fail (Aborted) now, not when the master answers.
  if (impl_->client)
    caf::anon_send_exit(impl_->client, caf::exit_reason::user_shutdown);
  if (impl_->owns_master) {
    caf::anon_send_exit(impl_->master, caf::exit_reason::user_shutdown);
    return;
  }
  // Best effort: a master that is gone has nothing left to release.
  caf::anon_send(impl_->master, close_session_atom_v, impl_->handle);
}

std::vector<tensor> session::run(const std::vector<fetch>& fetches,
                                 const feed_dict& feeds,
                                 const run_options& options,
                                 run_metadata* metadata,
                                 step_cancellation* cancel) {
  auto& im = *impl_;
  if (im.closed)
    throw op_error(error_code::aborted, "Attempted to use a closed Session.");
  run_step_request req;
  req.session_handle = im.handle;
  req.options = options;
  std::vector<int> fetch_slot;
  for (auto& f : fetches) {
    if (f.g != nullptr && f.g != im.g)
      throw op_error(error_code::invalid_argument,
                     "Fetch " + f.name
                       + " is not an element of this session's graph");
    if (f.target) {
      req.targets.push_back(f.name);
      fetch_slot.push_back(-1);
    } else {
      fetch_slot.push_back(static_cast<int>(req.fetches.size()));
      req.fetches.push_back(f.name);
    }
  }
  for (auto& [out, value] : feeds) {
    if (out.owner() != im.g)
      throw op_error(error_code::invalid_argument,
                     "Feed " + (out.valid() ? out.name() : std::string{"?"})
                       + " is not an element of this session's graph");
    req.feed_names.push_back(out.name());
    req.feed_values.push_back(value);
  }
  // Send what the master has not seen of the (append-only) graph. Runs
  // racing on other threads may send overlapping deltas; the master skips
  // the nodes it already has.
  auto& nodes = im.g->def().nodes;
  int total = 0;
  {
    std::lock_guard<std::mutex> guard{im.mtx};
    total = static_cast<int>(nodes.size());
    if (total > im.sent_nodes || im.sent_nodes == 0) {
      graph_def delta;
      delta.seed = im.g->seed();
      delta.nodes.assign(nodes.begin() + im.sent_nodes, nodes.end());
      req.graph_delta = to_bytes(delta);
      req.graph_base = im.sent_nodes;
    }
  }
  auto timeout_ms = options.timeout_in_ms > 0
                      ? options.timeout_in_ms
                      : im.config.operation_timeout_in_ms;
  // The master enforces the step deadline; the client waits a little
  // longer so that the master's DeadlineExceeded (not a local timeout)
  // reaches the caller, and never forever when a deadline is set.
  auto wait_ms = timeout_ms > 0 ? timeout_ms + 5000 : 0;
  auto reply = call_master(*im.pending, im.client, std::move(req), wait_ms,
                           im.spin, im.replies, cancel);
  throw_if_error(reply.transport);
  auto& resp = reply.response;
  // The master applied the delta unless it rejected the session itself.
  if (resp.result.ok() || resp.result.code() != error_code::aborted) {
    std::lock_guard<std::mutex> guard{im.mtx};
    im.sent_nodes = std::max(im.sent_nodes, total);
  }
  throw_if_error(resp.result);
  std::vector<tensor> result;
  for (auto slot : fetch_slot)
    result.push_back(slot >= 0 && static_cast<size_t>(slot)
                                    < resp.outputs.size()
                       ? resp.outputs[static_cast<size_t>(slot)]
                       : tensor{});
  if (metadata != nullptr) {
    metadata->has_step_stats = resp.has_stats;
    metadata->stats = std::move(resp.stats);
    metadata->partition_graphs.clear();
    for (auto& bytes : resp.partition_graphs) {
      graph_def g;
      throw_if_error(from_bytes(bytes, g));
      metadata->partition_graphs.push_back(std::move(g));
    }
  }
  return result;
}

void session::reset(const std::string& target,
                    const std::vector<std::string>& containers,
                    session_config config) {
  auto& sys = default_system();
  auto master = connect_master(sys, target, config);
  caf::scoped_actor self{sys};
  status result;
  self->request(master, connect_timeout(config), reset_atom_v, containers)
    .receive([&](status& st) { result = std::move(st); },
             [&](caf::error& e) {
               result = to_status(e, std::string{strip_scheme(target)});
             });
  throw_if_error(result);
}

tensor session::run(const fetch& f, const feed_dict& feeds,
                    const run_options& options, run_metadata* metadata) {
  return run(std::vector<fetch>{f}, feeds, options, metadata).front();
}

} // namespace actorflow
