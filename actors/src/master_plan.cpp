// Planning a step on the master (TF's master: prune, place, partition,
// RegisterGraph): a signature's first run builds its plan, registers each
// partition with its task's worker, caches the plan and runs; runs of the
// same signature that arrive meanwhile wait for that plan
// (plan_registration.hpp) instead of registering executors of their own.

#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/matmul_pipelining.hpp"
#include "actorflow/graph/partition.hpp"
#include "actorflow/graph/placer.hpp"
#include "actorflow/graph/subgraph.hpp"
#include "actorflow/graph/text_util.hpp"
#include "master.hpp"

namespace actorflow {

namespace {

using outcome = plan_registration<pending_run>::outcome;

// The devices a session may place nodes on: every task's, or with
// device_filters those matching a filter, plus the master's own task's
// (TF's DeviceFinder always keeps the local worker). InvalidArgument for
// a filter that is not a device name.
status session_devices(const master_state& st, const session_config& config,
                       std::vector<std::string>& devices) {
  std::vector<device_name> filters;
  for (auto& text : config.device_filters) {
    device_name f;
    if (auto err = device_name::parse(text, f); !err.ok())
      return invalid_argument("Invalid device filter '" + log_escape(text)
                              + "' in the session's device_filters: "
                              + err.message());
    filters.push_back(std::move(f));
  }
  auto own_task = task_of_device(st.device);
  for (auto& [task, addr] : st.opts.cluster) {
    auto dev = task + "/device:CPU:0";
    auto full = device_name::parse_or_throw(dev);
    bool kept = filters.empty() || task == own_task
                || std::any_of(filters.begin(), filters.end(),
                               [&](const device_name& f) {
                                 return is_specification(f, full);
                               });
    if (kept)
      devices.push_back(std::move(dev));
  }
  return {};
}

// Prunes, places and partitions the run's graph: partitions by device.
status build_partitions(master_state& st, const master_session& sess,
                        const run_step_request& req,
                        std::map<std::string, graph_def>& partitions) {
  subgraph sub;
  if (auto err = build_subgraph(sess.graph, req.feed_names, req.fetches,
                                req.targets, sub);
      !err.ok())
    return err;
  placer_options popts;
  if (auto err = session_devices(st, sess.config, popts.devices); !err.ok())
    return err;
  popts.allow_soft_placement = sess.config.allow_soft_placement;
  // Fetches go through the master's own device, so that a large value
  // streams in chunks (Send/Recv). TF returns a fetch in the computing
  // worker's RunGraphResponse instead; here that reply would carry it as
  // one message, measured slower for 16-64 MiB (docs/DESIGN.md).
  for (auto& n : sub.def.nodes)
    if (n.op == "_Retval")
      n.device = st.device;
  std::vector<placement_record> log;
  if (auto err = place(sub.def, popts, &log); !err.ok())
    return err;
  if (sess.config.log_device_placement) {
    std::ostringstream out;
    auto line = [&](const std::string& node, const std::string& op,
                    const std::string& device) {
      // Names from the client, one line each whatever they hold.
      out << log_escape(node) << ": (" << log_escape(op)
          << "): " << log_escape(device) << "\n";
    };
    auto find = [](const graph_def& g, const std::string& name) {
      auto i = std::find_if(g.nodes.begin(), g.nodes.end(),
                            [&](const node_def& n) { return n.name == name; });
      return i == g.nodes.end() ? nullptr : &*i;
    };
    // A fed node is cut out of the run's graph (an _Arg takes its value),
    // but TF logs it too: where its value enters, the _Arg's device.
    std::set<std::string> fed;
    for (size_t i = 0; i < sub.arg_nodes.size() && i < req.feed_names.size();
         ++i) {
      auto node = parse_input(req.feed_names[i]).node;
      auto* def = find(sess.graph, node);
      auto* arg = find(sub.def, sub.arg_nodes[i]);
      if (def != nullptr && arg != nullptr && fed.insert(node).second)
        line(node, def->op, arg->device);
    }
    for (auto& r : log)
      if (fed.count(r.node) == 0)
        line(r.node, r.op, r.device);
    std::cout << out.str() << std::flush;
  }
  if (sess.config.matmul_pipelining)
    pipeline_cut_matmuls(sub.def);
  return partition(sub.def, partitions);
}

// A run that waited for the plan: its step starts now (its deadline, if
// any, counts from here; the registration had the first run's).
void start_waiting(master_self self, const std::shared_ptr<step_plan>& plan,
                   pending_run& run) {
  start_step(self, std::move(run.rp), plan, run.req, run.timeout_ms,
             run.retry);
}

// The registration of `sig` in session `handle` settled: every run that
// waited for it starts (ready) or fails with its error.
void settle(master_self self, const std::string& handle,
            const std::string& sig, const std::shared_ptr<pending_plan>& pp,
            outcome result) {
  auto& st = self->state;
  auto s = st.sessions.find(handle);
  if (s != st.sessions.end()) {
    auto i = s->second.planning.find(sig);
    if (i != s->second.planning.end() && i->second == pp)
      s->second.planning.erase(i);
  }
  auto runs = pp->registration.take_runs();
  if (result == outcome::ready && s != st.sessions.end()) {
    s->second.plans[sig] = pp->plan;
    for (auto& run : runs)
      start_waiting(self, pp->plan, run);
    return;
  }
  // Failed: the partitions registered so far will not run.
  for (auto& part : pp->plan->parts)
    if (part.executor)
      self->send_exit(part.executor, caf::exit_reason::user_shutdown);
  auto err = s == st.sessions.end()
               ? status{error_code::aborted,
                        "Session " + handle + " is not found."}
               : pp->registration.error();
  for (auto& run : runs) {
    if (retry_run(self, run, pp->failed_device, err))
      continue;
    // A deadline the caller gave ended the wait for tasks not up: TF's
    // client reports that as DeadlineExceeded, not Unavailable.
    if (pp->registration.timed_out() && run.timeout_ms > 0)
      deliver_error(run.rp,
                    {error_code::deadline_exceeded,
                     "Timed out after " + std::to_string(run.timeout_ms)
                       + " ms waiting for the tasks of the step: "
                       + err.message()});
    else
      deliver_error(run.rp, err);
  }
}

// Partition `p` of the plan answered its registration.
void on_registered(master_self self, const std::string& handle,
                   const std::string& sig,
                   const std::shared_ptr<pending_plan>& pp, size_t p,
                   status err, executor_actor exec, std::string inbox,
                   bool not_up) {
  auto& st = self->state;
  auto& reg = pp->registration;
  auto s = st.sessions.find(handle);
  outcome result;
  if (!err.ok() && pp->failed_device.empty())
    pp->failed_device = pp->plan->parts[p].device;
  if (!err.ok())
    result = not_up ? reg.unreachable(p, err.message())
                    : reg.failed(p, std::move(err));
  else if (s == st.sessions.end())
    // Closed meanwhile: nothing will run this partition.
    result = reg.failed(p, {error_code::aborted,
                            "Session " + handle + " is not found."});
  else
    result = reg.registered(p);
  if (exec) {
    if (result == outcome::settled || s == st.sessions.end()) {
      // Too late for a plan that failed (or a closed session).
      self->send_exit(exec, caf::exit_reason::user_shutdown);
    } else {
      auto& part = pp->plan->parts[p];
      part.executor = exec;
      pp->plan->peers[p] = caf::actor_cast<caf::actor>(exec);
      if (!inbox.empty() && !st.reply_inbox.empty()
          && exec->node() != self->node()) {
        part.route = tensor_channel::route_to(inbox, self->home_system());
        tensor_channel::name_peer(self->home_system(), inbox,
                                  route_of(st, task_of_device(part.device)));
        // Its requests get no CAF error once they go over the channel.
        if (part.route)
          self->monitor(exec);
      }
      pp->plan->peer_inboxes[p] = std::move(inbox);
      s->second.executors.push_back(exec);
    }
  }
  if (result == outcome::ready || result == outcome::failed)
    settle(self, handle, sig, pp, result);
}

// Registers partition `p` (device `dev`, encoded `bytes`) with its task's
// worker, reaching the task first if needed.
void register_part(master_self self, const std::string& handle,
                   const std::string& sig,
                   const std::shared_ptr<pending_plan>& pp, size_t p,
                   const std::string& dev, std::string bytes,
                   caf::actor_clock::time_point deadline) {
  // The task that serves it: after a failover, a ps task's backup.
  auto task = route_of(self->state, task_of_device(dev));
  auto answer = [self, handle, sig, pp, p](status err, executor_actor exec,
                                           std::string inbox, bool not_up) {
    on_registered(self, handle, sig, pp, p, std::move(err), std::move(exec),
                  std::move(inbox), not_up);
  };
  // A replicated task out of reach fails over to its backup: not waited
  // for until the run's deadline (a task that is only starting is asked
  // again by the run's next attempt).
  if (!replicated_home(self->state, dev).empty())
    deadline = std::min(deadline, self->clock().now()
                                    + std::chrono::milliseconds(250));
  resolve_peer(
    self, task, deadline,
    [self, bytes = std::move(bytes), dev, handle, task,
     answer](status err, worker_actor peer) mutable {
      // `not_up`: the task could not be reached by the deadline (its
      // other errors fail the plan at once).
      if (!err.ok())
        return answer(err, {}, {}, err.code() == error_code::unavailable);
      auto& st = self->state;
      auto id = st.next_registration++;
      if (peer->node() != self->node())
        st.registering[task][id] = [answer](status err) {
          answer(std::move(err), {}, {}, false);
        };
      auto done = [self, task, id] {
        auto& reg = self->state.registering;
        if (auto i = reg.find(task); i != reg.end()) {
          i->second.erase(id);
          if (i->second.empty())
            reg.erase(i);
        }
      };
      self
        ->request(peer, std::chrono::seconds(30), register_graph_atom_v,
                  std::move(bytes), dev, handle)
        .then(
          [answer, done](status& err, executor_actor& exec,
                         std::string& inbox) {
            done();
            answer(std::move(err), std::move(exec), std::move(inbox), false);
          },
          [answer, done, dev](caf::error& err) {
            done();
            answer(to_status(err, dev), {}, {}, false);
          });
    },
    true);
}

} // namespace

void plan_and_run(master_self self, pending_run run) {
  auto& st = self->state;
  auto handle = run.req.session_handle;
  auto& sess = st.sessions.at(handle);
  std::map<std::string, graph_def> partitions;
  // A malformed graph (e.g. an attribute of the wrong kind) fails this
  // run, never the task.
  status err;
  try {
    err = build_partitions(st, sess, run.req, partitions);
  } catch (const op_error& e) {
    err = {error_code::invalid_argument, e.get_status().message()};
  } catch (const std::exception& e) {
    err = internal_error(e.what());
  }
  if (!err.ok())
    return deliver_error(run.rp, err);
  // Every partition registers with its task; the master's own first.
  std::vector<std::pair<std::string, graph_def*>> order;
  if (auto own = partitions.find(st.device); own != partitions.end())
    order.emplace_back(own->first, &own->second);
  for (auto& [dev, g] : partitions)
    if (dev != st.device)
      order.emplace_back(dev, &g);
  auto pp = std::make_shared<pending_plan>(order.size());
  auto& plan = *pp->plan;
  for (auto& [dev, g] : order) {
    plan_part part;
    part.device = dev;
    for (auto& n : g->nodes)
      if (n.op == "_Arg")
        part.feeds.push_back(n.attr_or<int64_t>("index", 0));
    plan.parts.push_back(std::move(part));
    plan.peer_devices.push_back(dev);
    if (std::all_of(g->nodes.begin(), g->nodes.end(), [](const node_def& n) {
          return n.op == "_Recv" || n.op == "_Retval";
        }))
      plan.sink_devices.push_back(dev);
  }
  plan.peers.resize(plan.parts.size());
  plan.peer_inboxes.resize(plan.parts.size());
  for (auto& [dev, g] : order)
    plan.graphs.push_back(to_bytes(*g));
  auto sig = signature(run.req);
  auto timeout_ms = run.timeout_ms;
  // This run waits as the others do: first in line.
  pp->registration.wait(std::move(run));
  if (order.empty()) {
    // Nothing to run anywhere (e.g. only fed values fetched).
    sess.plans[sig] = pp->plan;
    for (auto& r : pp->registration.take_runs())
      start_waiting(self, pp->plan, r);
    return;
  }
  sess.planning[sig] = pp;
  auto deadline = self->clock().now()
                  + (timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms)
                                    : std::chrono::milliseconds(30000));
  for (size_t p = 0; p < order.size(); ++p)
    register_part(self, handle, sig, pp, p, order[p].first,
                  plan.graphs[p], deadline);
}

} // namespace actorflow
