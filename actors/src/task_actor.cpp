// The task actor: master service (sessions, prune/place/partition, step
// fan-out and fan-in), worker service (partition registration) and the
// task's resource manager (containers of variable actors).

#include <algorithm>
#include <iostream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actorflow/actors/deadline_table.hpp"
#include "actorflow/actors/instrumented.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/actors/transport.hpp"
#include "actorflow/actors/type_ids.hpp"
#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/matmul_pipelining.hpp"
#include "actorflow/graph/partition.hpp"
#include "actorflow/graph/placer.hpp"
#include "actorflow/graph/subgraph.hpp"
#include "actorflow/kernels/reader_core.hpp"
#include "runtime.hpp"
#include "tensor_channel.hpp"

namespace actorflow {

namespace {

/// A registered partition of a cached plan.
struct plan_part {
  std::string device;
  executor_actor executor;
  /// Feed positions this partition's `_Arg` nodes read.
  std::vector<int64_t> feeds;
  /// Whether the executor has had the plan's peers (run_graph_request).
  bool has_peers = false;
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
};

struct master_session {
  session_config config;
  graph_def graph;
  /// Node name -> position in `graph`, kept as deltas arrive so that a
  /// step's feed checks don't walk the whole graph.
  std::unordered_map<std::string, size_t> node_index;
  std::unordered_map<std::string, step_plan> plans;
  /// Tasks this session had partitions on that were lost since: why, and
  /// the task actor that was lost (its node and id). When the same actor
  /// answers again (a network cut or a stopped process that came back)
  /// the session goes on; another one (a restarted task), the next
  /// step fails Aborted (TF: "Graph handle is not found ... Possibly, this
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
using step_promise = caf::typed_response_promise<run_step_response>;

struct master_step {
  step_promise rp;
  size_t remaining = 0;
  bool done = false;
  bool trace = false;
  std::vector<plan_part> parts;
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
};

using peer_callback = std::function<void(status, task_actor)>;

struct task_state {
  task_options opts;
  std::string task_prefix; // "/job:J/replica:0/task:T"
  std::string device;      // task_prefix + "/device:CPU:0"
  /// The host this task's executors receive tensors on (tensor_channel):
  /// its address's host, "" without an address or with the channel off.
  std::string channel_host;
  /// This task's own inbox there, where executors in other processes
  /// answer the requests that went over the channel ("" for none).
  std::string reply_inbox;
  std::map<std::pair<std::string, std::string>, variable_actor> variables;
  struct queue_entry {
    queue_options opts;
    queue_actor handle;
  };
  std::map<std::pair<std::string, std::string>, queue_entry> queues;
  struct reader_entry {
    node_def def;
    reader_actor handle;
  };
  std::map<std::pair<std::string, std::string>, reader_entry> readers;
  struct accumulator_entry {
    accumulator_options opts;
    accumulator_actor handle;
  };
  std::map<std::pair<std::string, std::string>, accumulator_entry>
    accumulators;
  std::unordered_map<std::string, master_session> sessions;
  std::vector<executor_actor> executors;
  /// Random generators per (session, node), shared by that session's
  /// executors on this task; gone with the last of them.
  std::map<std::pair<std::string, std::string>, std::weak_ptr<rng_cell>> rngs;
  std::unordered_map<std::string, task_actor> peers;
  std::unordered_map<std::string, std::vector<peer_callback>> connecting;
  /// Graph registrations waiting for a remote task's reply, by task: a
  /// lost task fails them at once (CAF fails no request already sent to
  /// a peer whose connection times out).
  std::map<std::string, std::map<uint64_t, std::function<void(status)>>>
    registering;
  uint64_t next_registration = 0;
  std::unordered_map<int64_t, master_step> steps;
  /// Deadlines of the steps in `steps` that have one.
  deadline_table<int64_t> step_deadlines;
  std::shared_ptr<task_counters> counters = std::make_shared<task_counters>();
  /// The task's monitor, spawned when first asked for (get_monitor).
  monitor_actor monitor;
  /// Where this master records its steps (the monitor reads it).
  std::shared_ptr<monitoring::step_record> step_record;
  uint64_t next_session = 0;
  int64_t step_base = 0;
  int64_t next_step = 0;
  static inline const char* name = "actorflow.task";
};

using task_self = task_actor::stateful_pointer<task_state>;

// Two reader nodes describe the same reader: same op and attributes,
// wherever they sit in their graphs.
bool same_reader(const node_def& x, const node_def& y) {
  auto relevant = [](const node_def& n) {
    auto attrs = n.attrs;
    attrs.erase("_class");
    attrs.erase("container");
    return attrs;
  };
  return x.op == y.op && relevant(x) == relevant(y);
}

bool valid_container(const std::string& c) {
  static const std::regex re{"[A-Za-z0-9.][A-Za-z0-9_.\\-/]*"};
  return std::regex_match(c, re);
}

// The node a queue or reader lookup carries (one node, encoded), after
// checking the container's name.
status resource_node(const std::string& container, const std::string& name,
                     const std::string& node_bytes, node_def& out) {
  if (!valid_container(container))
    return invalid_argument("container contains invalid characters: "
                            + container);
  graph_def g;
  if (auto err = from_bytes(node_bytes, g); !err.ok() || g.nodes.size() != 1)
    return invalid_argument("malformed resource node for " + name);
  out = std::move(g.nodes.front());
  return {};
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

// Checks fed values against the placeholders they replace.
status check_feeds(const master_session& sess, const run_step_request& req) {
  if (req.feed_names.size() != req.feed_values.size())
    return invalid_argument("feed names and values differ in number");
  for (size_t i = 0; i < req.feed_names.size(); ++i) {
    auto ref = parse_input(req.feed_names[i]);
    auto n = sess.node_index.find(ref.node);
    if (n == sess.node_index.end())
      return not_found("Feed " + req.feed_names[i] + ": not found in graph");
    auto& value = req.feed_values[i];
    if (!value.valid())
      return invalid_argument("Feed for " + req.feed_names[i]
                              + " is an empty tensor");
    auto& node = sess.graph.nodes[n->second];
    if (node.op != "Placeholder")
      continue;
    auto type = node.attr_or<dtype>("dtype", dtype::invalid);
    if (value.type() != type)
      return invalid_argument(
        "Cannot feed value of type " + std::string{to_string(value.type())}
        + " for Tensor '" + tensor_name(node.name, 0) + "', which has type "
        + std::string{to_string(type)});
    auto shape = node.attr_or<tensor_shape>("shape", tensor_shape::unknown());
    if (!shape.is_compatible_with(value.shape()))
      return invalid_argument("Cannot feed value of shape "
                              + value.shape().to_string() + " for Tensor '"
                              + tensor_name(node.name, 0)
                              + "', which has shape " + shape.to_string());
  }
  return {};
}

void deliver_error(step_promise& rp, status err) {
  run_step_response resp;
  resp.result = std::move(err);
  rp.deliver(std::move(resp));
}

// -- directory of remote tasks -----------------------------------------------

void connect_peer(task_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, int attempt);

void resolve_peer(task_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, peer_callback k) {
  auto& st = self->state;
  if (task == st.task_prefix) {
    k({}, caf::actor_cast<task_actor>(self));
    return;
  }
  if (auto i = st.peers.find(task); i != st.peers.end()) {
    k({}, i->second);
    return;
  }
  auto& waiters = st.connecting[task];
  waiters.push_back(std::move(k));
  if (waiters.size() == 1)
    connect_peer(self, task, deadline, 0);
}

void finish_connect(task_self self, const std::string& task, status err,
                    task_actor peer) {
  auto i = self->state.connecting.find(task);
  if (i == self->state.connecting.end())
    return;
  auto waiters = std::move(i->second);
  self->state.connecting.erase(i);
  for (auto& k : waiters)
    k(err, peer);
}

void connect_peer(task_self self, const std::string& task,
                  caf::actor_clock::time_point deadline, int attempt) {
  auto& st = self->state;
  auto a = st.opts.cluster.find(task);
  if (a == st.opts.cluster.end() || a->second.empty()) {
    finish_connect(self, task,
                   invalid_argument("Task " + task + " is not in the cluster"),
                   {});
    return;
  }
  auto address = a->second;
  auto colon = address.rfind(':');
  uint16_t port = 0;
  std::string host = address.substr(0, colon);
  try {
    port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
  } catch (...) {
    finish_connect(self, task,
                   invalid_argument("Could not parse port of " + task
                                    + " from \"" + address + "\""),
                   {});
    return;
  }
  auto mm = transport_actor(self->home_system());
  self->request(mm, std::chrono::seconds(5), caf::connect_atom::value, host, port)
    .then(
      [self, task](const caf::node_id&, caf::strong_actor_ptr& ptr,
                   const std::set<std::string>&) {
        auto peer = caf::actor_cast<task_actor>(ptr);
        if (!peer) {
          finish_connect(self, task,
                         {error_code::unavailable,
                          "No actor published for " + task},
                         {});
          return;
        }
        self->state.peers[task] = peer;
        monitoring::registry::instance().peer_changed(
          self->state.task_prefix,
          {task, self->state.opts.cluster[task], true,
           monitoring::wall_us(), ""});
        // Forget the handle when the peer goes away, so the next step
        // reconnects (a restarted task gets a fresh connection).
        self->monitor(peer);
        finish_connect(self, task, {}, peer);
      },
      [self, task, address, host, port, deadline, attempt](caf::error& err) {
        auto now = self->clock().now();
        // Tasks of a cluster start in any order: retry with back-off
        // until the step's deadline.
        auto delay = std::chrono::milliseconds(
          std::min(1000, 50 * (1 << std::min(attempt, 5))));
        if (now + delay >= deadline) {
          auto tls = last_tls_failure(self->home_system(), host, port);
          finish_connect(self, task,
                         {error_code::unavailable,
                          "Could not connect to " + task + " at " + address
                            + ": " + self->system().render(err)
                            + (tls.empty() ? "" : " (" + tls + ")")},
                         {});
          return;
        }
        self->delayed_send(self, delay, caf::connect_atom::value, task,
                           deadline.time_since_epoch().count(), attempt + 1);
      });
}

// -- master ---------------------------------------------------------------------

std::vector<std::string> cluster_devices(const task_state& st) {
  std::vector<std::string> devices;
  for (auto& [task, addr] : st.opts.cluster)
    devices.push_back(task + "/device:CPU:0");
  return devices;
}

void start_step(task_self self, step_promise rp, step_plan& plan,
                run_step_request& req, int64_t timeout_ms);

// A step ended: its duration and status go to the monitor's record.
void record_step(task_state& st, const master_step& step,
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

void on_step_reply(task_self self, int64_t id, size_t part,
                   run_graph_response resp) {
  auto& st = self->state;
  auto i = st.steps.find(id);
  if (i == st.steps.end() || i->second.done)
    return;
  auto& step = i->second;
  if (!resp.result.ok()) {
    // The first error aborts the step everywhere; the client gets it.
    step.done = true;
    for (auto& p : step.parts)
      self->send(p.executor, abort_step_atom_v, id,
                 status{error_code::aborted, "step aborted"});
    record_step(st, step, resp.result);
    // The monitor still waits for a traced step: the next one.
    if (step.trace_for_monitor)
      st.step_record->request_trace();
    deliver_error(step.rp, resp.result);
    st.step_deadlines.erase(id);
    st.steps.erase(i);
    return;
  }
  for (auto& h : resp.held) {
    auto sink = std::find_if(step.parts.begin(), step.parts.end(),
                             [&](const plan_part& x) {
                               return x.device == h.device;
                             });
    if (sink == step.parts.end()) {
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
  if (step.trace) {
    out.has_stats = step.trace_for_client;
    // Receives first (TF lists RecvTensor per receiving device), then each
    // partition, the master's own device first.
    for (size_t p = 0; p < step.parts.size(); ++p)
      if (!step.responses[p].recv_stats.empty())
        out.stats.dev_stats.push_back(
          {step.parts[p].device, std::move(step.responses[p].recv_stats)});
    for (size_t p = 0; p < step.parts.size(); ++p)
      out.stats.dev_stats.push_back(
        {step.parts[p].device, std::move(step.responses[p].node_stats)});
  }
  record_step(st, step, {});
  if (step.trace_for_monitor)
    st.step_record->store_trace(
      run_metadata{true, out.stats}.to_chrome_trace());
  if (!step.trace_for_client)
    out.stats = {};
  step.rp.deliver(std::move(out));
  st.step_deadlines.erase(id);
  st.steps.erase(i);
  st.counters->steps.fetch_add(1, std::memory_order_relaxed);
}

void start_step(task_self self, step_promise rp, step_plan& plan,
                run_step_request& req, int64_t timeout_ms) {
  auto& st = self->state;
  auto id = st.step_base + st.next_step++;
  auto& step = st.steps[id];
  step.rp = std::move(rp);
  step.remaining = plan.parts.size();
  step.trace_for_client = req.options.trace_level > run_options::no_trace;
  step.trace_for_monitor = st.step_record
                           && st.step_record->take_trace_request();
  step.trace = step.trace_for_client || step.trace_for_monitor;
  step.parts = plan.parts;
  step.outputs.resize(req.fetches.size());
  step.responses.resize(plan.parts.size());
  step.replied.resize(plan.parts.size());
  step.timeout_ms = timeout_ms;
  step.start_ticks = monitoring::ticks();
  if (plan.parts.empty()) {
    on_step_reply(self, id, 0, {});
    return;
  }
  // Requests without CAF timeouts: the deadline is ours (deadline_table).
  if (timeout_ms > 0) {
    auto now = std::chrono::steady_clock::now();
    if (auto delay = st.step_deadlines.add(
          id, now + std::chrono::milliseconds(timeout_ms), now))
      self->delayed_send(self, *delay, check_deadlines_atom_v);
  }
  // Parts asked over the channel first: their requests travel to another
  // process, whose first tensors this step's part here may be waiting
  // for, while a part of this process starts as soon as it is asked.
  std::vector<size_t> order;
  order.reserve(plan.parts.size());
  for (int by_channel = 1; by_channel >= 0; --by_channel)
    for (size_t p = 0; p < plan.parts.size(); ++p)
      if ((plan.parts[p].has_peers && plan.parts[p].route)
          == (by_channel == 1))
        order.push_back(p);
  for (auto p : order) {
    auto& part = plan.parts[p];
    run_graph_request rg;
    rg.step_id = id;
    rg.trace = step.trace;
    std::vector<caf::actor> peers;
    bool first = !part.has_peers;
    if (first) {
      rg.peer_devices = plan.peer_devices;
      rg.sink_devices = plan.sink_devices;
      rg.peer_inboxes = plan.peer_inboxes;
      peers = plan.peers;
      part.has_peers = true;
    }
    for (auto f : part.feeds)
      rg.feeds.emplace_back(f, req.feed_values[static_cast<size_t>(f)]);
    if (!first && part.route) {
      // The answer comes back as a step_reply (deadlines and lost
      // executors: step_deadlines and the down handler).
      tensor_channel::send_run_graph(part.route, std::move(rg),
                                     caf::actor_cast<caf::actor>(
                                       part.executor));
      continue;
    }
    rg.reply_inbox = st.reply_inbox;
    rg.part = static_cast<int64_t>(p);
    self->request(part.executor, caf::infinite, run_graph_atom_v,
                  std::move(rg), std::move(peers))
      .then(
        [self, id, p](run_graph_response& resp) {
          on_step_reply(self, id, p, std::move(resp));
        },
        [self, id, p, device = part.device](caf::error& err) {
          run_graph_response resp;
          resp.result = to_status(err, device);
          on_step_reply(self, id, p, std::move(resp));
        });
  }
}

// Fails the steps whose deadline has passed with DeadlineExceeded, naming
// a partition that has not answered; on_step_reply aborts the others.
void check_step_deadlines(task_self self) {
  auto& st = self->state;
  std::optional<std::chrono::steady_clock::duration> rearm;
  auto expired = st.step_deadlines.expire(std::chrono::steady_clock::now(),
                                          rearm);
  if (rearm)
    self->delayed_send(self, *rearm, check_deadlines_atom_v);
  for (auto id : expired) {
    auto i = st.steps.find(id);
    if (i == st.steps.end() || i->second.done)
      continue;
    auto& step = i->second;
    size_t p = 0;
    while (p + 1 < step.parts.size() && step.replied[p])
      ++p;
    run_graph_response resp;
    resp.result = {error_code::deadline_exceeded,
                   "Timed out after " + std::to_string(step.timeout_ms)
                     + " ms waiting for the step on " + step.parts[p].device};
    on_step_reply(self, id, p, std::move(resp));
  }
}

// Builds, registers and caches the plan of a signature, then runs the step.
void plan_and_run(task_self self, step_promise rp,
                  std::string handle, run_step_request req,
                  int64_t timeout_ms) {
  auto& st = self->state;
  auto& sess = st.sessions.at(handle);
  subgraph sub;
  if (auto err = build_subgraph(sess.graph, req.feed_names, req.fetches,
                                req.targets, sub);
      !err.ok())
    return deliver_error(rp, err);
  placer_options popts;
  popts.devices = cluster_devices(st);
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
    return deliver_error(rp, err);
  if (sess.config.log_device_placement) {
    std::ostringstream out;
    for (auto& r : log)
      out << r.node << ": (" << r.op << "): " << r.device << "\n";
    std::cout << out.str() << std::flush;
  }
  if (sess.config.matmul_pipelining)
    pipeline_cut_matmuls(sub.def);
  std::map<std::string, graph_def> partitions;
  if (auto err = partition(sub.def, partitions); !err.ok())
    return deliver_error(rp, err);
  // Register every partition with its task; the master's own first.
  auto plan = std::make_shared<step_plan>();
  std::vector<std::pair<std::string, graph_def*>> order;
  if (auto own = partitions.find(st.device); own != partitions.end())
    order.emplace_back(own->first, &own->second);
  for (auto& [dev, g] : partitions)
    if (dev != st.device)
      order.emplace_back(dev, &g);
  for (auto& [dev, g] : order) {
    plan_part part;
    part.device = dev;
    for (auto& n : g->nodes)
      if (n.op == "_Arg")
        part.feeds.push_back(n.attr_or<int64_t>("index", 0));
    plan->parts.push_back(std::move(part));
    plan->peer_devices.push_back(dev);
    if (std::all_of(g->nodes.begin(), g->nodes.end(), [](const node_def& n) {
          return n.op == "_Recv" || n.op == "_Retval";
        }))
      plan->sink_devices.push_back(dev);
  }
  plan->peers.resize(plan->parts.size());
  plan->peer_inboxes.resize(plan->parts.size());
  auto left = std::make_shared<size_t>(order.size());
  auto failed = std::make_shared<bool>(false);
  // Tasks that could not be reached by the deadline: the step fails once
  // every part has answered, naming all of them.
  auto unreachable = std::make_shared<std::vector<std::string>>();
  auto fail_unreachable = [rp, unreachable]() mutable {
    std::string list;
    for (const auto& why : *unreachable)
      list += (list.empty() ? "" : "; ") + why;
    deliver_error(rp, {error_code::unavailable,
                       unreachable->size() == 1
                         ? list
                         : std::to_string(unreachable->size())
                             + " tasks unreachable: " + list});
  };
  auto deadline = self->clock().now()
                  + (timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms)
                                    : std::chrono::milliseconds(30000));
  auto shared_req = std::make_shared<run_step_request>(std::move(req));
  for (size_t p = 0; p < order.size(); ++p) {
    auto dev = order[p].first;
    auto bytes = to_bytes(*order[p].second);
    device_name parsed;
    device_name::parse(dev, parsed);
    auto task = "/job:" + parsed.job.value_or("") + "/replica:0/task:"
                + std::to_string(parsed.task.value_or(0));
    // `not_up`: the task could not be reached by the deadline (its other
    // errors fail the step at once).
    auto on_registered = [self, rp, handle, plan, left, failed, p, shared_req,
                          timeout_ms, dev, unreachable,
                          fail_unreachable](status err, executor_actor exec,
                                            std::string inbox,
                                            bool not_up = false) mutable {
      if (*failed)
        return;
      if (!err.ok()) {
        if (not_up) {
          unreachable->push_back(err.message());
          if (--*left == 0) {
            *failed = true;
            fail_unreachable();
          }
          return;
        }
        *failed = true;
        return deliver_error(rp, err);
      }
      plan->parts[p].executor = exec;
      plan->peers[p] = caf::actor_cast<caf::actor>(exec);
      if (!inbox.empty() && !self->state.reply_inbox.empty() && exec
          && exec->node() != self->node()) {
        plan->parts[p].route
          = tensor_channel::route_to(inbox, &self->home_system());
        // Its requests get no CAF error once they go over the channel.
        if (plan->parts[p].route)
          self->monitor(exec);
      }
      plan->peer_inboxes[p] = std::move(inbox);
      auto s = self->state.sessions.find(handle);
      if (s == self->state.sessions.end()) {
        // Closed meanwhile: nothing will run this partition.
        self->send_exit(exec, caf::exit_reason::user_shutdown);
        if (!*failed) {
          *failed = true;
          deliver_error(rp, {error_code::aborted,
                             "Session " + handle + " is not found."});
        }
        return;
      }
      s->second.executors.push_back(exec);
      if (--*left > 0)
        return;
      if (!unreachable->empty()) {
        *failed = true;
        return fail_unreachable();
      }
      auto& cached = s->second.plans[signature(*shared_req)] = *plan;
      start_step(self, rp, cached, *shared_req, timeout_ms);
    };
    resolve_peer(
      self, task, deadline,
      [self, bytes, dev, handle, task,
       on_registered](status err, task_actor peer) mutable {
        if (!err.ok())
          return on_registered(err, {}, {},
                               err.code() == error_code::unavailable);
        auto id = self->state.next_registration++;
        if (peer->node() != self->node())
          self->state.registering[task][id]
            = [on_registered](status err) mutable {
                on_registered(err, {}, {});
              };
        auto done = [self, task, id] {
          auto i = self->state.registering.find(task);
          if (i != self->state.registering.end()) {
            i->second.erase(id);
            if (i->second.empty())
              self->state.registering.erase(i);
          }
        };
        self
          ->request(peer, std::chrono::seconds(30), register_graph_atom_v,
                    bytes, dev, handle)
          .then(
            [on_registered, done](status& err, executor_actor& exec,
                                  std::string& inbox) mutable {
              done();
              on_registered(err, exec, std::move(inbox));
            },
            [self, on_registered, dev, done](caf::error& err) mutable {
              done();
              on_registered(to_status(err, dev), {}, {});
            });
      });
  }
}

// Ends every session of this master: their executors on every task go,
// and their handles answer Aborted from now on.
void close_all_sessions(task_self self) {
  for (auto& [handle, sess] : self->state.sessions)
    for (auto& exec : sess.executors)
      self->send_exit(exec, caf::exit_reason::user_shutdown);
  self->state.sessions.clear();
}

// Frees the variables of `containers` on this task (the job-named default
// container when the list is empty, as TF's ClearContainers). A missing
// container is fine.
void clear_containers(task_self self, std::vector<std::string> containers) {
  auto& st = self->state;
  if (containers.empty())
    containers.push_back(st.opts.job);
  std::set<std::string> doomed(containers.begin(), containers.end());
  auto free = [&](auto& resources, auto handle_of) {
    for (auto i = resources.begin(); i != resources.end();) {
      if (doomed.count(i->first.first) > 0) {
        self->send_exit(handle_of(i->second), caf::exit_reason::user_shutdown);
        i = resources.erase(i);
      } else {
        ++i;
      }
    }
  };
  free(st.variables, [](auto& var) -> auto& { return var; });
  free(st.queues, [](auto& q) -> auto& { return q.handle; });
  free(st.readers, [](auto& r) -> auto& { return r.handle; });
  free(st.accumulators, [](auto& a) -> auto& { return a.handle; });
}

// A remote task went away: its steps fail now (not at their deadline)
// with Unavailable, and plans that use it are dropped so that the next run
// registers again (with a restarted task, if there is one).
// Fails with Unavailable (message `why(part)`) every running step with a
// part for which `lost(step, p)` holds, naming the first such part.
template <class Lost, class Why>
void fail_steps_on(task_self self, Lost lost, Why why) {
  auto& st = self->state;
  std::vector<std::pair<int64_t, size_t>> failed;
  for (auto& [id, step] : st.steps)
    for (size_t p = 0; p < step.parts.size(); ++p)
      if (lost(step, p)) {
        failed.emplace_back(id, p);
        break;
      }
  for (auto [id, p] : failed) {
    run_graph_response resp;
    resp.result = {error_code::unavailable, why(st.steps[id].parts[p])};
    on_step_reply(self, id, p, std::move(resp));
  }
}

void lost_task(task_self self, const std::string& task,
               const std::string& reason, const caf::actor_addr& lost) {
  auto& st = self->state;
  if (auto i = st.registering.find(task); i != st.registering.end()) {
    auto waiting = std::move(i->second);
    st.registering.erase(i);
    for (auto& [id, fail] : waiting)
      fail({error_code::unavailable, "Lost task " + task + " at "
                                       + st.opts.cluster[task] + " ("
                                       + reason + ")"});
  }
  auto on_task = [&](const std::string& device) {
    return device.rfind(task + "/", 0) == 0;
  };
  fail_steps_on(
    self,
    [&](const master_step& step, size_t p) {
      return on_task(step.parts[p].device);
    },
    [&](const plan_part&) {
      return "Lost task " + task + " at " + st.opts.cluster[task] + " ("
             + reason + ")";
    });
  for (auto& [handle, sess] : st.sessions)
    for (auto i = sess.plans.begin(); i != sess.plans.end();) {
      auto& parts = i->second.parts;
      bool uses = std::any_of(parts.begin(), parts.end(),
                              [&](const plan_part& p) {
                                return on_task(p.device);
                              });
      if (uses)
        sess.lost_tasks.emplace(task, master_session::lost_task_info{
                                        reason, lost.node(), lost.id()});
      i = uses ? sess.plans.erase(i) : std::next(i);
    }
}

// An executor in another process that this master sent requests over the
// tensor channel ended: its steps fail as a CAF request to it would have.
void lost_executor(task_self self, const caf::actor_addr& exec,
                   const std::string& reason) {
  fail_steps_on(
    self,
    [&](const master_step& step, size_t p) {
      return !step.replied[p] && step.parts[p].route
             && step.parts[p].executor.address() == exec;
    },
    [&](const plan_part& part) {
      return "Lost connection (" + part.device + "): " + reason;
    });
}

/// Runs a checked step of `sess` with its plan, planning it first if
/// needed. Errors of planning fail the step, never the task.
void run_planned(task_self self, step_promise rp, master_session& sess,
                 run_step_request req) {
  try {
    auto timeout_ms = req.options.timeout_in_ms > 0
                        ? req.options.timeout_in_ms
                        : sess.config.operation_timeout_in_ms;
    auto p = sess.plans.find(signature(req));
    if (p != sess.plans.end()) {
      start_step(self, rp, p->second, req, timeout_ms);
    } else {
      auto handle = req.session_handle;
      plan_and_run(self, rp, std::move(handle), std::move(req), timeout_ms);
    }
  } catch (const op_error& e) {
    deliver_error(rp, {error_code::invalid_argument,
                       e.get_status().message()});
  } catch (const std::exception& e) {
    deliver_error(rp, internal_error(e.what()));
  }
}

task_actor::behavior_type task(task_self self, task_options opts) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.task_prefix = task_name(st.opts);
  st.device = st.task_prefix + "/device:CPU:0";
  if (monitoring::enabled())
    st.step_record = monitoring::registry::instance().steps(st.task_prefix);
  if (auto own = st.opts.cluster.find(st.task_prefix);
      own != st.opts.cluster.end() && !own->second.empty()
      && caf::get_or(self->system().config(), "actorflow.tensor-channel",
                     true)) {
    // Everything before the port: a name, an IPv4 or a bracketed IPv6.
    auto colon = own->second.rfind(':');
    st.channel_host = own->second.substr(0, colon);
    st.reply_inbox = tensor_channel::open_inbox(
      st.channel_host, caf::actor_cast<caf::actor>(self));
    if (!st.reply_inbox.empty())
      self->attach_functor(
        [inbox = st.reply_inbox] { tensor_channel::close_inbox(inbox); });
  }
  std::random_device rd;
  // Step ids from different masters must not collide on a shared worker.
  st.step_base = static_cast<int64_t>(((static_cast<uint64_t>(rd()) << 32)
                                       ^ rd())
                                      & 0x7fffffff00000000ULL);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto i = st.peers.begin(); i != st.peers.end(); ++i)
      if (i->second.address() == dm.source) {
        auto task = i->first;
        st.peers.erase(i);
        monitoring::registry::instance().peer_changed(
          st.task_prefix,
          {task, "", false, monitoring::wall_us(), caf::to_string(dm.reason)});
        lost_task(self, task, caf::to_string(dm.reason), dm.source);
        return;
      }
    auto& xs = st.executors;
    xs.erase(std::remove_if(xs.begin(), xs.end(),
                            [&](const executor_actor& x) {
                              return x.address() == dm.source;
                            }),
             xs.end());
    lost_executor(self, dm.source, caf::to_string(dm.reason));
  });
  // The task's executors and variables end with it (server::stop and a
  // private session's end send the exit).
  self->set_exit_handler([self](caf::exit_msg& em) {
    for (auto& exec : self->state.executors)
      self->send_exit(exec, em.reason);
    for (auto& [key, var] : self->state.variables)
      self->send_exit(var, em.reason);
    for (auto& [key, q] : self->state.queues)
      self->send_exit(q.handle, em.reason);
    for (auto& [key, r] : self->state.readers)
      self->send_exit(r.handle, em.reason);
    for (auto& [key, a] : self->state.accumulators)
      self->send_exit(a.handle, em.reason);
    if (self->state.monitor)
      self->send_exit(self->state.monitor, em.reason);
    self->quit(em.reason);
  });
  auto count = [self] {
    self->state.counters->messages.fetch_add(1, std::memory_order_relaxed);
  };
  return {
    // -- master service ------------------------------------------------------
    [self, count](create_session_atom, session_config& config) {
      count();
      auto& st = self->state;
      auto handle = st.task_prefix + "/session:"
                    + std::to_string(st.next_session++);
      st.sessions[handle].config = config;
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
      auto& st = self->state;
      auto rp = self->make_response_promise<run_step_response>();
      auto s = st.sessions.find(req.session_handle);
      if (s == st.sessions.end()) {
        deliver_error(rp, {error_code::aborted, "Session "
                                                  + req.session_handle
                                                  + " is not found."});
        return rp;
      }
      auto& sess = s->second;
      for (auto& v : req.feed_values)
        st.counters->bytes_in.fetch_add(v.byte_size(),
                                        std::memory_order_relaxed);
      if (!req.graph_delta.empty()) {
        // A delta may overlap what arrived from a concurrent run of the
        // same session (the graph is append-only): skip the known prefix.
        auto have = static_cast<int64_t>(sess.graph.nodes.size());
        if (req.graph_base > have) {
          deliver_error(rp, {error_code::aborted,
                             "graph version mismatch: master has "
                               + std::to_string(sess.graph.nodes.size())
                               + " nodes, client sent a delta from "
                               + std::to_string(req.graph_base)});
          return rp;
        }
        graph_def delta;
        if (auto err = from_bytes(req.graph_delta, delta); !err.ok()) {
          deliver_error(rp, err);
          return rp;
        }
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
      }
      // A malformed graph (e.g. an attribute of the wrong kind) fails this
      // run, never the task.
      try {
        if (auto err = check_feeds(sess, req); !err.ok()) {
          deliver_error(rp, err);
          return rp;
        }
        if (!sess.lost_tasks.empty()) {
          // Still down: Unavailable within about a second (a dead process
          // refuses at once; a silent one is given the connect request's
          // 5 s), as any step that needs it. The same task actor back:
          // the session goes on. Another one (a restarted task): Aborted,
          // once.
          auto [task, lost] = *sess.lost_tasks.begin();
          auto ms = req.options.timeout_in_ms > 0
                      ? req.options.timeout_in_ms
                      : sess.config.operation_timeout_in_ms;
          auto deadline = self->clock().now()
                          + std::chrono::milliseconds(
                            std::clamp<int64_t>(ms > 0 ? ms : 1000, 1, 1000));
          auto handle = req.session_handle;
          resolve_peer(self, task, deadline,
                       [self, rp, handle, task = task, lost = lost,
                        req = std::move(req)](status err,
                                              task_actor peer) mutable {
                         if (!err.ok())
                           return deliver_error(rp, err);
                         auto s = self->state.sessions.find(handle);
                         if (s == self->state.sessions.end())
                           return deliver_error(
                             rp, {error_code::aborted,
                                  "Session " + handle + " is closed"});
                         s->second.lost_tasks.erase(task);
                         if (peer.node() == lost.node
                             && peer.id() == lost.id) {
                           // The same task actor: its state is intact.
                           if (!s->second.lost_tasks.empty())
                             return deliver_error(
                               rp, {error_code::unavailable,
                                    "Lost task "
                                      + s->second.lost_tasks.begin()->first});
                           run_planned(self, rp, s->second, std::move(req));
                           return;
                         }
                         s->second.lost_tasks.clear();
                         deliver_error(
                           rp, {error_code::aborted,
                                "Task " + task + " was lost (" + lost.reason
                                  + ") after this session ran a step on "
                                    "it, and has restarted without its "
                                    "state (variables, queues). Create a "
                                    "new session."});
                       });
          return rp;
        }
        run_planned(self, rp, sess, std::move(req));
      } catch (const op_error& e) {
        deliver_error(rp, {error_code::invalid_argument,
                           e.get_status().message()});
      } catch (const std::exception& e) {
        deliver_error(rp, internal_error(e.what()));
      }
      return rp;
    },
    // -- worker service -------------------------------------------------------
    [self, count](register_graph_atom, const std::string& bytes,
                  const std::string& device, const std::string& session)
      -> caf::result<status, executor_actor, std::string> {
      count();
      auto& st = self->state;
      graph_def g;
      if (auto err = from_bytes(bytes, g); !err.ok())
        return {err, executor_actor{}, std::string{}};
      if (device != st.device)
        return {invalid_argument("partition for " + device + " sent to "
                                 + st.device),
                executor_actor{}, std::string{}};
      rng_map rngs;
      for (auto& n : g.nodes) {
        if (!is_random_op(n.op))
          continue;
        auto& slot = st.rngs[{session, n.name}];
        auto cell = slot.lock();
        if (!cell) {
          cell = make_rng(n);
          slot = cell;
        }
        rngs.emplace(n.name, std::move(cell));
      }
      for (auto i = st.rngs.begin(); i != st.rngs.end();)
        i = i->second.expired() ? st.rngs.erase(i) : std::next(i);
      auto exec = spawn_executor(self->system(),
                                 caf::actor_cast<task_actor>(self),
                                 std::move(g), device, st.opts.job,
                                 st.counters, std::move(rngs), session,
                                 {.name = session + " " + device,
                                  .container = "",
                                  .task = st.task_prefix});
      self->monitor(exec);
      st.executors.push_back(exec);
      std::string inbox;
      if (!st.channel_host.empty()) {
        inbox = tensor_channel::open_inbox(st.channel_host,
                                           caf::actor_cast<caf::actor>(exec));
        if (!inbox.empty())
          exec->attach_functor(
            [inbox] { tensor_channel::close_inbox(inbox); });
      }
      return {status{}, exec, std::move(inbox)};
    },
    [self, count](get_variable_atom, const std::string& container,
                  const std::string& name, int32_t type,
                  const std::string& shape_bytes)
      -> caf::result<status, variable_actor> {
      count();
      auto& st = self->state;
      if (!valid_container(container))
        return {invalid_argument("container contains invalid characters: "
                                 + container),
                variable_actor{}};
      auto key = std::make_pair(container, name);
      auto i = st.variables.find(key);
      if (i == st.variables.end()) {
        tensor_shape shape = tensor_shape::unknown();
        byte_reader r{shape_bytes};
        decode(r, shape);
        auto var = spawn_variable(self->system(), name,
                                  static_cast<dtype>(type), shape,
                                  {.name = name,
                                   .container = container,
                                   .task = st.task_prefix});
        i = st.variables.emplace(key, var).first;
      }
      return {status{}, i->second};
    },
    [self, count](get_queue_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes)
      -> caf::result<status, queue_actor> {
      count();
      auto& st = self->state;
      node_def def;
      if (auto err = resource_node(container, name, node_bytes, def);
          !err.ok())
        return {err, queue_actor{}};
      auto opts = queue_options_of(def, name);
      if (auto err = validate(opts); !err.ok())
        return {err, queue_actor{}};
      auto key = std::make_pair(container, name);
      if (auto i = st.queues.find(key); i != st.queues.end()) {
        // Same container and shared_name: the same queue, if it agrees.
        if (auto err = check_compatible(i->second.opts, opts); !err.ok())
          return {err, queue_actor{}};
        return {status{}, i->second.handle};
      }
      auto handle = spawn_queue(self->system(), opts,
                                {.name = name,
                                 .container = container,
                                 .task = st.task_prefix});
      st.queues.emplace(key, task_state::queue_entry{std::move(opts), handle});
      return {status{}, handle};
    },
    [self, count](get_reader_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes)
      -> caf::result<status, reader_actor> {
      count();
      auto& st = self->state;
      node_def def;
      if (auto err = resource_node(container, name, node_bytes, def);
          !err.ok())
        return {err, reader_actor{}};
      auto key = std::make_pair(container, name);
      if (auto i = st.readers.find(key); i != st.readers.end()) {
        // Same container and shared_name: the same reader, if it agrees.
        if (!same_reader(i->second.def, def))
          return {invalid_argument("Shared reader " + name + " in container '"
                                     + container + "' is a "
                                     + i->second.def.op
                                     + " with other attributes than "
                                     + def.name + " (" + def.op + ")"),
                  reader_actor{}};
        return {status{}, i->second.handle};
      }
      std::unique_ptr<reader_core> core;
      if (auto err = reader_core::make(def, core); !err.ok())
        return {err, reader_actor{}};
      auto handle = spawn_reader(self->system(), std::move(core),
                                 {.name = name,
                                  .container = container,
                                  .task = st.task_prefix});
      st.readers.emplace(key, task_state::reader_entry{def, handle});
      return {status{}, handle};
    },
    [self, count](get_accumulator_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes)
      -> caf::result<status, accumulator_actor> {
      count();
      auto& st = self->state;
      node_def def;
      if (auto err = resource_node(container, name, node_bytes, def);
          !err.ok())
        return {err, accumulator_actor{}};
      auto opts = accumulator_options_of(def, name);
      if (auto err = validate(opts); !err.ok())
        return {err, accumulator_actor{}};
      auto key = std::make_pair(container, name);
      if (auto i = st.accumulators.find(key); i != st.accumulators.end()) {
        auto& have = i->second.opts;
        if (have.type != opts.type || !(have.shape == opts.shape)
            || have.reduction_type != opts.reduction_type)
          return {invalid_argument("Shared accumulator " + name
                                     + " in container '" + container
                                     + "' has dtype "
                                     + std::string{to_string(have.type)}
                                     + " and shape " + have.shape.to_string()
                                     + "; requested "
                                     + std::string{to_string(opts.type)}
                                     + " and " + opts.shape.to_string()),
                  accumulator_actor{}};
        return {status{}, i->second.handle};
      }
      auto handle = spawn_accumulator(self->system(), opts,
                                      {.name = name,
                                       .container = container,
                                       .task = st.task_prefix});
      st.accumulators.emplace(
        key, task_state::accumulator_entry{std::move(opts), handle});
      return {status{}, handle};
    },
    [self](get_monitor_atom) {
      auto& st = self->state;
      if (!st.monitor)
        st.monitor = spawn_monitor(self->system(), st.opts);
      return st.monitor;
    },
    [self, count](get_stats_atom) {
      count();
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
      s.variables = st.variables.size();
      s.partitions = st.executors.size();
      return s;
    },
    [self, count](reset_atom, std::vector<std::string>& containers) {
      count();
      auto rp = self->make_response_promise<status>();
      close_all_sessions(self);
      // Clear the containers on every task of the cluster, this one
      // included; the reply carries the first failure.
      auto& cluster = self->state.opts.cluster;
      auto left = std::make_shared<size_t>(cluster.size());
      auto first_error = std::make_shared<status>();
      auto done = [rp, left, first_error](status st) mutable {
        if (!st.ok() && first_error->ok())
          *first_error = st;
        if (--*left == 0)
          rp.deliver(*first_error);
      };
      auto deadline = self->clock().now() + std::chrono::seconds(10);
      for (auto& [task, address] : cluster) {
        resolve_peer(self, task, deadline,
                     [self, containers, done, task = task](
                       status err, task_actor peer) mutable {
                       if (!err.ok())
                         return done(err);
                       self
                         ->request(peer, std::chrono::seconds(10),
                                   cleanup_atom_v, containers)
                         .then([done](status& st) mutable { done(st); },
                               [done, task](caf::error& e) mutable {
                                 done(to_status(e, task));
                               });
                     });
      }
      return rp;
    },
    [self, count](cleanup_atom, std::vector<std::string>& containers) {
      count();
      clear_containers(self, std::move(containers));
      return status{};
    },
    [self](caf::connect_atom, const std::string& task, int64_t deadline_ns,
           int attempt) {
      auto deadline = caf::actor_clock::time_point{
        caf::actor_clock::duration_type{deadline_ns}};
      connect_peer(self, task, deadline, attempt);
    },
    [self](check_deadlines_atom) { check_step_deadlines(self); },
    [self](step_reply_atom, int64_t id, int64_t part,
           run_graph_response& resp) {
      // Only the part that was asked over the channel may answer this way.
      auto i = self->state.steps.find(id);
      if (i == self->state.steps.end() || part < 0
          || static_cast<size_t>(part) >= i->second.parts.size()
          || !i->second.parts[static_cast<size_t>(part)].route
          || i->second.replied[static_cast<size_t>(part)])
        return;
      on_step_reply(self, id, static_cast<size_t>(part), std::move(resp));
    },
  };
}

} // namespace

std::string task_name(const task_options& opts) {
  return "/job:" + opts.job + "/replica:0/task:" + std::to_string(opts.task);
}

caf::actor spawn_task(caf::actor_system& sys, task_options opts) {
  auto prefix = task_name(opts);
  return caf::actor_cast<caf::actor>(spawn_instrumented(
    sys, {monitoring::actor_kind::task, prefix, "", prefix}, task,
    std::move(opts)));
}

} // namespace actorflow
