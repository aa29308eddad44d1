// The master service of a task: client sessions and their graphs, a
// step's fan-out to its partitions' executors and the fan-in of their
// replies, and step deadlines. What a lost task, executor or client does
// to the steps and plans that use it is in master_losses.cpp, planning in
// master_plan.cpp, the directory of the other tasks in
// peer_directory.cpp.

#include <algorithm>
#include <random>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/transport/transport.hpp"
#include "master.hpp"
#include "worker.hpp"

namespace actorflow {

namespace {

// Checks fed values against the placeholders they replace. Every bad feed
// is named at once, each with what was expected and what came: the
// first's code, its message first, the others after it.
status check_feeds(const master_session& sess, const run_step_request& req) {
  if (req.feed_names.size() != req.feed_values.size())
    return invalid_argument("feed names and values differ in number");
  std::vector<status> bad;
  for (size_t i = 0; i < req.feed_names.size(); ++i) {
    auto ref = parse_input(req.feed_names[i]);
    auto n = sess.node_index.find(ref.node);
    if (n == sess.node_index.end()) {
      bad.push_back(
        not_found("Feed " + req.feed_names[i] + ": not found in graph"));
      continue;
    }
    auto& value = req.feed_values[i];
    if (!value.valid()) {
      bad.push_back(invalid_argument("Feed for " + req.feed_names[i]
                                     + " is an empty tensor"));
      continue;
    }
    auto& node = sess.graph.nodes[n->second];
    if (node.op != "Placeholder" && node.op != "PlaceholderWithDefault")
      continue;
    auto type = node.attr_or<dtype>("dtype", dtype::invalid);
    auto shape = node.attr_or<tensor_shape>("shape", tensor_shape::unknown());
    if (value.type() != type)
      bad.push_back(invalid_argument(
        "Cannot feed value of type " + std::string{to_string(value.type())}
        + " for Tensor '" + tensor_name(node.name, 0) + "', which has type "
        + std::string{to_string(type)}));
    else if (!shape.is_compatible_with(value.shape()))
      bad.push_back(invalid_argument(
        "Cannot feed value of shape " + value.shape().to_string()
        + " for Tensor '" + tensor_name(node.name, 0) + "', which has shape "
        + shape.to_string()));
  }
  if (bad.empty())
    return {};
  if (bad.size() == 1)
    return bad.front();
  auto msg = std::to_string(bad.size()) + " feeds are invalid: ";
  for (size_t i = 0; i < bad.size(); ++i)
    msg += (i > 0 ? "; " : "") + bad[i].message();
  return {bad.front().code(), msg};
}

// A step ended: its duration and status go to the monitor's record.
void record_step(master_state& st, const master_step& step,
                 const status& result) {
  if (!st.step_record)
    return;
  auto ticks = monitoring::ticks() - step.start_ticks;
  st.step_record->finished(static_cast<int64_t>(static_cast<double>(ticks)
                                                * monitoring::ns_per_tick()
                                                / 1000),
                           static_cast<int>(result.code()),
                           result.message());
}

// How long the parts of a step past its deadline have to say what they
// wait for before the step fails without it.
constexpr auto expiry_grace = std::chrono::milliseconds(500);

// A session's config with its server's defaults where it left its own
// default (task_options::default_session_config). TF merges the server's
// config over the session's (a server's non-zero setting wins); here the
// session's own setting wins, as TF's in-process master does for the
// deadline.
session_config with_defaults(session_config c, const session_config& d) {
  if (c.operation_timeout_in_ms == 0)
    c.operation_timeout_in_ms = d.operation_timeout_in_ms;
  c.allow_soft_placement = c.allow_soft_placement || d.allow_soft_placement;
  c.log_device_placement = c.log_device_placement || d.log_device_placement;
  if (c.device_filters.empty())
    c.device_filters = d.device_filters;
  return c;
}

// The start of a step's DeadlineExceeded text. A private engine's (in
// process, like TF's DirectSession) starts as TF's does, which programs
// match: "Timed out waiting for notification".
std::string timed_out_text(const master_state& st, int64_t ms) {
  bool private_engine = st.opts.cluster.size() == 1
                        && st.opts.cluster.begin()->second.empty();
  return std::string{private_engine ? "Timed out waiting for notification "
                                      "(after "
                                    : "Timed out (after "}
         + std::to_string(ms) + " ms)";
}

// Why a step past its deadline failed when no part named a blocking
// operation: a value some part waited for, or part `p`, which did not
// answer.
status expired_status(const master_state& st, const master_step& step,
                      size_t p) {
  if (!step.waiting_on.ok())
    return step.waiting_on;
  return {error_code::deadline_exceeded,
          timed_out_text(st, step.timeout_ms) + " waiting for the step on "
            + step.parts()[p].device};
}

} // namespace

void on_step_reply(master_self self, int64_t id, size_t part,
                   run_graph_response resp) {
  auto& st = self->state;
  auto i = st.steps.find(id);
  if (i == st.steps.end() || i->second.done)
    return;
  auto& step = i->second;
  if (!resp.result.ok() && step.expiring) {
    // A part's answer to the deadline's abort: a blocking operation named
    // ends the step with it; otherwise wait for the other parts.
    auto& msg = resp.result.message();
    if (msg.find(waiting_for_marker) == std::string::npos) {
      if (msg.find(waiting_on_marker) != std::string::npos
          && step.waiting_on.ok())
        step.waiting_on = resp.result;
      if (part < step.replied.size())
        step.replied[part] = true;
      if (std::find(step.replied.begin(), step.replied.end(), false)
          != step.replied.end())
        return;
      resp.result = expired_status(st, step, part);
    }
    step.expiring = false;
  }
  if (!resp.result.ok()) {
    // The first error aborts the step everywhere; the client gets it,
    // unless the step runs again after a failover.
    step.done = true;
    for (auto& p : step.parts())
      self->send(p.executor, abort_step_atom_v, id,
                 status{error_code::aborted, "step aborted"});
    record_step(st, step, resp.result);
    // The monitor still waits for a traced step: the next one.
    if (step.trace_for_monitor)
      st.step_record->request_trace();
    bool again = false;
    if (step.req && part < step.parts().size()) {
      pending_run run{std::move(step.rp), std::move(*step.req), 0,
                      step.retry};
      again = retry_run(self, run, step.parts()[part].device, resp.result);
      if (!again)
        step.rp = std::move(run.rp);
    }
    if (!again)
      deliver_error(step.rp, resp.result);
    st.step_deadlines.erase(id);
    st.steps.erase(i);
    return;
  }
  for (auto& h : resp.held) {
    auto sink = std::find_if(step.parts().begin(), step.parts().end(),
                             [&](const plan_part& x) {
                               return x.device == h.device;
                             });
    if (sink == step.parts().end()) {
      resp.result = internal_error("no partition on " + h.device
                                   + " for the value of " + h.key);
      return on_step_reply(self, id, part, std::move(resp));
    }
    self->send(sink->executor, recv_tensor_atom_v, id, std::move(h.key),
               std::move(h.value));
  }
  for (auto& [index, value] : resp.outputs)
    if (index >= 0 && static_cast<size_t>(index) < step.outputs.size())
      step.outputs[static_cast<size_t>(index)] = std::move(value);
  step.responses[part] = std::move(resp);
  step.replied[part] = true;
  if (--step.remaining > 0)
    return;
  run_step_response out;
  out.outputs = std::move(step.outputs);
  if (step.partition_graphs)
    out.partition_graphs = step.plan->graphs;
  if (step.trace) {
    out.has_stats = step.trace_for_client;
    // Receives first (TF lists RecvTensor per receiving device), then each
    // partition, the master's own device first.
    for (size_t p = 0; p < step.parts().size(); ++p)
      if (!step.responses[p].recv_stats.empty())
        out.stats.dev_stats.push_back(
          {step.parts()[p].device, std::move(step.responses[p].recv_stats)});
    for (size_t p = 0; p < step.parts().size(); ++p)
      out.stats.dev_stats.push_back(
        {step.parts()[p].device, std::move(step.responses[p].node_stats)});
  }
  // The step has what its dequeues took: their queues drop the leases.
  for (size_t p = 0; p < step.parts().size(); ++p)
    if (step.responses[p].leased)
      self->send(step.parts()[p].executor, commit_step_atom_v, id);
  record_step(st, step, {});
  if (step.trace_for_monitor)
    st.step_record->store_trace(
      run_metadata{true, out.stats, {}}.to_chrome_trace());
  if (!step.trace_for_client)
    out.stats = {};
  step.rp.deliver(std::move(out));
  st.step_deadlines.erase(id);
  st.steps.erase(i);
  st.counters->steps.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Fails the steps whose deadline has passed with DeadlineExceeded, naming
// what they wait for (see master_step::expiring); on_step_reply aborts
// the rest.
void check_step_deadlines(master_self self) {
  auto& st = self->state;
  std::optional<std::chrono::steady_clock::duration> rearm;
  auto expired = st.step_deadlines.expire(self->clock().now(), rearm);
  if (rearm)
    self->delayed_send(self, *rearm, check_deadlines_atom_v);
  for (auto id : expired) {
    auto i = st.steps.find(id);
    if (i == st.steps.end() || i->second.done)
      continue;
    auto& step = i->second;
    if (!step.expiring) {
      // The parts that have not answered abort and say what they wait
      // for; their answers end the step (on_step_reply), or the grace.
      step.expiring = true;
      status why{error_code::deadline_exceeded,
                 timed_out_text(st, step.timeout_ms)};
      for (size_t p = 0; p < step.parts().size(); ++p)
        if (!step.replied[p])
          self->send(step.parts()[p].executor, abort_step_atom_v, id, why);
      auto now = self->clock().now();
      if (auto delay = st.step_deadlines.add(id, now + expiry_grace, now))
        self->delayed_send(self, *delay, check_deadlines_atom_v);
      continue;
    }
    // Some part did not answer within the grace (its task stopped, say).
    size_t p = 0;
    while (p + 1 < step.parts().size() && step.replied[p])
      ++p;
    run_graph_response resp;
    resp.result = expired_status(st, step, p);
    step.expiring = false;
    on_step_reply(self, id, p, std::move(resp));
  }
}

} // namespace

/// Errors of planning fail the step, never the task.
void run_planned(master_self self, step_promise rp, master_session& sess,
                 run_step_request req, step_retry retry) {
  auto timeout_ms = req.options.timeout_in_ms > 0
                      ? req.options.timeout_in_ms
                      : sess.config.operation_timeout_in_ms;
  if (retry.attempts > 0) {
    // What is left of the run's own deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  retry.deadline - self->clock().now())
                  .count();
    timeout_ms = timeout_ms > 0 ? std::max<int64_t>(left, 1) : 0;
  }
  auto sig = signature(req);
  if (auto p = sess.plans.find(sig); p != sess.plans.end()) {
    start_step(self, rp, p->second, req, timeout_ms, retry);
    return;
  }
  pending_run run{std::move(rp), std::move(req), timeout_ms, retry};
  if (auto p = sess.planning.find(sig); p != sess.planning.end()) {
    // A concurrent first run of the same signature registers the plan:
    // this run starts with it.
    p->second->registration.wait(std::move(run));
    return;
  }
  plan_and_run(self, std::move(run));
}

namespace {

// Appends a graph delta to the session's graph. A delta may overlap what
// arrived from a concurrent run of the same session (the graph is
// append-only): the known prefix is skipped.
status extend_graph(master_session& sess, run_step_request& req) {
  auto have = static_cast<int64_t>(sess.graph.nodes.size());
  if (req.graph_base > have)
    return {error_code::aborted,
            "graph version mismatch: master has "
              + std::to_string(sess.graph.nodes.size())
              + " nodes, client sent a delta from "
              + std::to_string(req.graph_base)};
  graph_def delta;
  if (auto err = from_bytes(req.graph_delta, delta); !err.ok())
    return err;
  sess.graph.seed = delta.seed;
  auto known = static_cast<size_t>(have - req.graph_base);
  if (known > delta.nodes.size())
    known = delta.nodes.size();
  delta.nodes.erase(delta.nodes.begin(),
                    delta.nodes.begin() + static_cast<std::ptrdiff_t>(known));
  for (auto& n : delta.nodes) {
    sess.node_index[n.name] = sess.graph.nodes.size();
    sess.graph.nodes.push_back(std::move(n));
  }
  req.graph_delta.clear();
  return {};
}

// A session that lost a task: whether the task is back, as the same worker
// (the session goes on) or another one (a restarted task: Aborted, once).
// Still down: Unavailable within about a second (a dead process refuses at
// once; a silent one is given the connect request's 5 s), as any step that
// needs it.
void run_after_loss(master_self self, step_promise rp, master_session& sess,
                    run_step_request req) {
  auto [task, lost] = *sess.lost_tasks.begin();
  auto ms = req.options.timeout_in_ms > 0 ? req.options.timeout_in_ms
                                          : sess.config.operation_timeout_in_ms;
  auto deadline = self->clock().now()
                  + std::chrono::milliseconds(
                    std::clamp<int64_t>(ms > 0 ? ms : 1000, 1, 1000));
  auto handle = req.session_handle;
  resolve_peer(
    self, task, deadline,
    [self, rp, handle, task = task, lost = lost,
     req = std::move(req)](status err, worker_actor peer) mutable {
      if (!err.ok())
        return deliver_error(rp, err);
      auto s = self->state.sessions.find(handle);
      if (s == self->state.sessions.end())
        return deliver_error(rp, {error_code::aborted,
                                  "Session " + handle + " is closed"});
      s->second.lost_tasks.erase(task);
      if (peer.node() == lost.node && peer.id() == lost.id) {
        // The same worker: its state is intact.
        if (!s->second.lost_tasks.empty())
          return deliver_error(rp, {error_code::unavailable,
                                    "Lost task "
                                      + s->second.lost_tasks.begin()->first});
        run_planned(self, rp, s->second, std::move(req));
        return;
      }
      s->second.lost_tasks.clear();
      deliver_error(rp, {error_code::aborted,
                         "Task " + task + " was lost (" + lost.reason
                           + ") after this session ran a step on it, and "
                             "has restarted without its state (variables, "
                             "queues). Create a new session."});
    });
}

step_promise run_step(master_self self, run_step_request& req) {
  auto& st = self->state;
  auto rp = self->make_response_promise<run_step_response>();
  auto s = st.sessions.find(req.session_handle);
  if (s == st.sessions.end()) {
    deliver_error(rp, {error_code::aborted,
                       "Session " + req.session_handle + " is not found."});
    return rp;
  }
  if (!st.removed.empty()) {
    deliver_error(rp, {error_code::failed_precondition, st.removed});
    return rp;
  }
  auto& sess = s->second;
  for (auto& v : req.feed_values)
    st.counters->bytes_in.fetch_add(v.byte_size(), std::memory_order_relaxed);
  if (!req.graph_delta.empty())
    if (auto err = extend_graph(sess, req); !err.ok()) {
      deliver_error(rp, err);
      return rp;
    }
  // A malformed graph (e.g. an attribute of the wrong kind) fails this
  // run, never the task.
  try {
    if (auto err = check_feeds(sess, req); !err.ok()) {
      deliver_error(rp, err);
      return rp;
    }
    if (!sess.lost_tasks.empty())
      run_after_loss(self, rp, sess, std::move(req));
    else
      run_planned(self, rp, sess, std::move(req));
  } catch (const op_error& e) {
    deliver_error(rp, {error_code::invalid_argument,
                       e.get_status().message()});
  } catch (const std::exception& e) {
    deliver_error(rp, internal_error(e.what()));
  }
  return rp;
}

task_stats stats(master_self self) {
  auto& st = self->state;
  task_stats s;
  s.task = st.task_prefix;
  s.messages_handled = st.counters->messages.load();
  s.bytes_in = st.counters->bytes_in.load();
  s.bytes_out = st.counters->bytes_out.load();
  // What is queued, as the monitoring records count it: size() would
  // first move the newly arrived messages over (fetch_more) in the
  // middle of this message's turn.
  s.mailbox_depth = self->mailbox().queue().total_task_size();
  s.steps_run = st.counters->steps.load();
  s.sessions = st.sessions.size();
  s.variables = st.counters->variables.load();
  s.partitions = st.counters->partitions.load();
  return s;
}

master_actor::behavior_type master(master_self self, task_options opts,
                                   worker_actor worker,
                                   std::shared_ptr<task_counters> counters) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.task_prefix = task_name(st.opts);
  st.device = st.task_prefix + "/device:CPU:0";
  st.worker = std::move(worker);
  st.counters = std::move(counters);
  if (monitoring::enabled()) {
    st.step_record = monitoring::registry::instance().steps(st.task_prefix);
    // Its history starts now (a console that connects later sees it).
    st.monitor = spawn_monitor(self->system(), st.opts);
  }
  if (auto host = channel_host_of(self->system(), st.opts); !host.empty()) {
    st.reply_inbox = tensor_channel::open_inbox(
      host, caf::actor_cast<caf::actor>(self));
    if (!st.reply_inbox.empty())
      self->attach_functor(
        [inbox = st.reply_inbox, sys = &self->system()] {
          tensor_channel::close_inbox(*sys, inbox);
        });
  }
  st.ring = replica_ring(st.opts);
  st.members = membership{st.opts.cluster};
  // The worker reaches other tasks (its backups) through this master.
  self->send(st.worker, find_peer_atom_v, caf::actor_cast<caf::actor>(self));
  watch_members(self);
  std::random_device rd;
  // Step ids from different masters must not collide on a shared worker.
  st.step_base = static_cast<int64_t>(((static_cast<uint64_t>(rd()) << 32)
                                       ^ rd())
                                      & 0x7fffffff00000000ULL);
  self->set_down_handler([self](caf::down_msg& dm) {
    if (self->state.requesters.erase(dm.source) > 0) {
      lost_requester(self, dm.source, caf::to_string(dm.reason));
      return;
    }
    std::string task;
    master_actor master;
    if (forget_peer(self, dm.source, task, &master)) {
      auto reason = caf::to_string(dm.reason);
      monitoring::registry::instance().peer_changed(
        self->state.task_prefix,
        {task, "", false, monitoring::wall_us(), reason});
      lost_task(self, task, reason, dm.source);
      member_lost(self, task, reason,
                  dm.reason == caf::exit_reason::user_shutdown, master);
      return;
    }
    lost_executor(self, dm.source, caf::to_string(dm.reason));
  });
  // The task's worker (and with it its executors and resources) and its
  // monitor end with it (server::stop and a private session's end send
  // the exit).
  self->set_exit_handler([self](caf::exit_msg& em) {
    self->send_exit(self->state.worker, em.reason);
    if (self->state.monitor)
      self->send_exit(self->state.monitor, em.reason);
    self->quit(em.reason);
  });
  auto count = [self] {
    self->state.counters->messages.fetch_add(1, std::memory_order_relaxed);
  };
  return {
    [self, count](create_session_atom, session_config& config) {
      count();
      auto& st = self->state;
      auto handle = st.task_prefix + "/session:"
                    + std::to_string(st.next_session++);
      st.sessions[handle].config = with_defaults(
        std::move(config), st.opts.default_session_config);
      return handle;
    },
    [self, count](close_session_atom, const std::string& handle) {
      count();
      auto i = self->state.sessions.find(handle);
      if (i == self->state.sessions.end())
        return status{error_code::aborted, "Session " + handle
                                               + " is not found. Possibly, "
                                                 "this master has restarted."};
      for (auto& exec : i->second.executors)
        self->send_exit(exec, caf::exit_reason::user_shutdown);
      self->state.sessions.erase(i);
      return status{};
    },
    [self, count](run_step_atom, run_step_request& req) {
      count();
      return run_step(self, req);
    },
    [self, count](reset_atom, std::vector<std::string>& containers) {
      count();
      return reset(self, containers);
    },
    [self](get_worker_atom) { return self->state.worker; },
    [self](step_alive_atom, int64_t id) {
      // An executor resuming from silence asks before it runs a step.
      auto i = self->state.steps.find(id);
      return i != self->state.steps.end() && !i->second.done;
    },
    [self](get_monitor_atom) {
      auto& st = self->state;
      if (!st.monitor)
        st.monitor = spawn_monitor(self->system(), st.opts);
      return st.monitor;
    },
    [self, count](get_stats_atom) {
      count();
      return stats(self);
    },
    [self](caf::connect_atom, const std::string& task, int64_t deadline_ns,
           int attempt) {
      auto deadline = caf::actor_clock::time_point{
        caf::actor_clock::duration_type{deadline_ns}};
      connect_peer(self, task, deadline, attempt);
    },
    [self](membership_atom) {
      auto& m = self->state.members;
      return caf::result<int64_t, std::vector<std::string>>{m.version(),
                                                            m.flat()};
    },
    [self](join_atom, const std::string& job, const std::string& address) {
      return on_join(self, job, address);
    },
    [self](leave_atom, const std::string& task) {
      return on_leave(self, task);
    },
    [self](membership_update_atom, int64_t version,
           const std::vector<std::string>& flat) {
      on_membership_update(self, version, flat);
    },
    [self](membership_update_atom, int64_t version,
           const std::vector<std::string>& flat, const std::string& task) {
      on_member_greeting(self, version, flat, task);
    },
    [self](member_check_atom, const std::string& task) {
      on_member_check(self, task);
    },
    [self](check_deadlines_atom) { check_step_deadlines(self); },
    [self](retry_step_atom, int64_t id) { on_retry(self, id); },
    [self](cancel_step_atom, int64_t client_step) {
      cancel_client_step(
        self, caf::actor_cast<caf::actor_addr>(self->current_sender()),
        client_step);
    },
    [self](find_peer_atom, const std::string& task, int64_t deadline_ms) {
      // The worker's way to its backups: this master's directory.
      auto rp = self->make_response_promise<status, worker_actor>();
      if (self->state.opts.cluster.count(task) == 0) {
        rp.deliver(not_found("no task " + task + " in the cluster"),
                   worker_actor{});
        return rp;
      }
      resolve_peer(self, task,
                   self->clock().now()
                     + std::chrono::milliseconds(
                       std::clamp<int64_t>(deadline_ms, 1, 30000)),
                   [rp](status err, worker_actor w) mutable {
                     rp.deliver(std::move(err), std::move(w));
                   });
      return rp;
    },
    [self](step_reply_atom, int64_t id, int64_t part,
           run_graph_response& resp) {
      // Only the part that was asked over the channel may answer this way.
      auto i = self->state.steps.find(id);
      if (i == self->state.steps.end() || part < 0
          || static_cast<size_t>(part) >= i->second.parts().size()
          || !i->second.parts()[static_cast<size_t>(part)].route
          || i->second.replied[static_cast<size_t>(part)])
        return;
      on_step_reply(self, id, static_cast<size_t>(part), std::move(resp));
    },
  };
}

} // namespace

void deliver_error(step_promise& rp, status err) {
  run_step_response resp;
  resp.result = std::move(err);
  rp.deliver(std::move(resp));
}

std::string signature(const run_step_request& req) {
  std::string s;
  for (auto& f : req.feed_names)
    s += f + ",";
  s += "|";
  for (auto& f : req.fetches)
    s += f + ",";
  s += "|";
  for (auto& t : req.targets)
    s += t + ",";
  return s;
}

void start_step(master_self self, step_promise rp,
                const std::shared_ptr<step_plan>& plan_ptr,
                run_step_request& req, int64_t timeout_ms, step_retry retry) {
  auto& st = self->state;
  auto& plan = *plan_ptr;
  auto src = static_cast<caf::response_promise&>(rp).source();
  auto requester = caf::actor_cast<caf::actor_addr>(src);
  if (!st.cancelled_early.empty() && requester
      && cancelled_before_start(st, requester, req.client_step)) {
    deliver_error(rp, {error_code::cancelled,
                       "Step was cancelled by its client"});
    return;
  }
  auto id = st.step_base + st.next_step++;
  auto& step = st.steps[id];
  if (retry.tag == 0) {
    retry.tag = id;
    retry.deadline = self->clock().now()
                     + std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms
                                                                : 30000);
  }
  if (!st.ring.empty())
    step.req = std::make_shared<run_step_request>(req);
  step.retry = retry;
  step.rp = std::move(rp);
  step.remaining = plan.parts.size();
  step.trace_for_client = req.options.trace_level > run_options::no_trace;
  step.partition_graphs = req.options.output_partition_graphs;
  step.trace_for_monitor = st.step_record
                           && st.step_record->take_trace_request();
  step.trace = step.trace_for_client || step.trace_for_monitor;
  step.plan = plan_ptr;
    step.outputs.resize(req.fetches.size());
  step.responses.resize(plan.parts.size());
  step.replied.resize(plan.parts.size());
  step.timeout_ms = timeout_ms;
  step.start_ticks = monitoring::ticks();
  step.client_step = req.client_step;
  if (requester) {
    step.requester = requester;
    if (st.requesters.insert(requester).second)
      self->monitor(caf::actor_cast<caf::actor>(src));
  }
  if (plan.parts.empty()) {
    on_step_reply(self, id, 0, {});
    return;
  }
  // Requests without CAF timeouts: the deadline is ours (deadline_table),
  // on the actor clock (which a test's clock drives).
  if (timeout_ms > 0) {
    auto now = self->clock().now();
    if (auto delay = st.step_deadlines.add(
          id, now + std::chrono::milliseconds(timeout_ms), now))
      self->delayed_send(self, *delay, check_deadlines_atom_v);
  }
  auto by_channel = [](const plan_part& part) {
    return part.peers == peers_state::known && part.route;
  };
  // Parts asked over the channel first: their requests travel to another
  // process, whose first tensors this step's part here may be waiting
  // for, while a part of this process starts as soon as it is asked.
  std::vector<size_t> order;
  order.reserve(plan.parts.size());
  for (int channel = 1; channel >= 0; --channel)
    for (size_t p = 0; p < plan.parts.size(); ++p)
      if (by_channel(plan.parts[p]) == (channel == 1))
        order.push_back(p);
  for (auto p : order) {
    auto& part = plan.parts[p];
    run_graph_request rg;
    rg.step_id = id;
    rg.tag = step.retry.tag;
    rg.trace = step.trace;
    for (auto f : part.feeds)
      rg.feeds.emplace_back(f, req.feed_values[static_cast<size_t>(f)]);
    if (by_channel(part)) {
      // The answer comes back as a step_reply (deadlines and lost
      // executors: step_deadlines and the down handler).
      tensor_channel::send_run_graph(part.route, std::move(rg),
                                     caf::actor_cast<caf::actor>(
                                       part.executor));
      continue;
    }
    // Over CAF: the first request brings the peers; the ones after it,
    // until it is answered, follow it on the same connection.
    std::vector<caf::actor> peers;
    if (part.peers == peers_state::unsent) {
      rg.peer_devices = plan.peer_devices;
      rg.sink_devices = plan.sink_devices;
      rg.peer_inboxes = plan.peer_inboxes;
      peers = plan.peers;
      part.peers = peers_state::sent;
    }
    rg.reply_inbox = st.reply_inbox;
    rg.part = static_cast<int64_t>(p);
    self->request(part.executor, caf::infinite, run_graph_atom_v,
                  std::move(rg), std::move(peers))
      .then(
        [self, id, p, weak = std::weak_ptr<step_plan>{plan_ptr}](
          run_graph_response& resp) {
          // Whatever the step's result, the executor has its peers now.
          if (auto plan = weak.lock(); plan && p < plan->parts.size())
            plan->parts[p].peers = peers_state::known;
          on_step_reply(self, id, p, std::move(resp));
        },
        [self, id, p, device = part.device](caf::error& err) {
          run_graph_response resp;
          resp.result = to_status(err, device);
          on_step_reply(self, id, p, std::move(resp));
        });
  }
}

master_actor spawn_master(caf::actor_system& sys, task_options opts,
                          worker_actor worker,
                          std::shared_ptr<task_counters> counters) {
  auto prefix = task_name(opts);
  auto self = spawn_instrumented(
    sys, {monitoring::actor_kind::task, prefix, "", prefix}, master,
    std::move(opts), std::move(worker), std::move(counters));
  // What a monitor certificate may ask the task: its monitor and counters.
  allow_monitors(sys, self.id(), {get_monitor_atom::value,
                                  get_stats_atom::value});
  return self;
}

} // namespace actorflow
