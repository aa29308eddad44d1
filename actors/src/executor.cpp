// The partition executor: runs one registered partition, step by step
// (what each node does: executor_nodes.cpp; arriving tensors:
// executor_recv.cpp).
// Ready nodes run one after another on the actor (a LIFO stack, so a
// node's freshly readied consumers run next, as TensorFlow's inline ready
// queue does). Variable ops, reads of refs and Recv are asynchronous: they
// send a request and the step continues in the reply handler. Nothing here
// ever blocks a scheduler thread.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "actorflow/graph/device_name.hpp"
#include "actorflow/actors/instrumented.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/kernels/kernel.hpp"
#include "executor.hpp"
#include "stall_watch.hpp"

namespace actorflow {

int64_t now_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

namespace executor_detail {

int64_t write_tag(const executor_state& st, const step_state& step, int i) {
  // splitmix64 of the step's tag and the node's name: a retry of the step
  // (another plan, maybe other positions) names its nodes the same.
  auto x = static_cast<uint64_t>(step.tag)
           ^ st.nodes[static_cast<size_t>(i)].name_hash;
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  // Leaves room for an apply's updates (tag + k) and is never 0.
  return static_cast<int64_t>((x & ~uint64_t{0xff}) | 0x80);
}

void mark_finished(executor_state& st, int64_t step) {
  st.early.erase(step);
  st.partials.erase(step);
  if (st.landing)
    st.landing->forget(step);
  if (st.finished.insert(step).second) {
    st.finished_order.push_back(step);
    // Bounded memory: a tensor for a step this old cannot still be coming.
    if (st.finished_order.size() > 4096) {
      st.finished.erase(st.finished_order.front());
      st.finished_order.pop_front();
    }
  }
}

// Answers the master: the request's promise, or the tensor channel (CAF
// when it is down) for a request that came over it.
void answer(executor_self self, int64_t id, bool by_channel,
            caf::typed_response_promise<run_graph_response>& rp,
            run_graph_response resp) {
  auto& st = self->state;
  if (by_channel)
    tensor_channel::send_step_reply(st.reply_route, id, st.part,
                                    std::move(resp), st.master);
  else
    rp.deliver(std::move(resp));
}

void reply(executor_self self, step_state& step) {
  answer(self, step.id, step.by_channel, step.rp, std::move(step.response));
}

void fail_step(executor_self self, int64_t id, status err) {
  auto& st = self->state;
  auto i = st.steps.find(id);
  if (i == st.steps.end())
    return;
  auto& step = i->second;
  // Pending queue operations of this step fail with Cancelled and leave
  // every element in its queue.
  for (auto& q : step.queues)
    self->send(q, cancel_step_atom_v, id);
  for (auto& r : step.readers)
    self->send(r, cancel_step_atom_v, id);
  for (auto& a : step.accumulators)
    self->send(a, cancel_step_atom_v, id);
  step.response.result = std::move(err);
  step.response.outputs.clear();
  reply(self, step);
  st.steps.erase(i);
  mark_finished(st, id);
}

// Ends the leases of step `id`, which succeeded here: committed (its
// master has the elements), or released (it died after all: the elements
// go back to the head of their queues).
void settle_leases(executor_self self, int64_t id, bool commit) {
  auto& st = self->state;
  if (auto i = st.leased.find(id); i != st.leased.end()) {
    for (auto& q : i->second)
      if (commit)
        self->send(q, commit_step_atom_v, id);
      else
        self->send(q, cancel_step_atom_v, id);
    st.leased.erase(i);
  }
}

status waiting_for(const executor_state& st, const step_state& step,
                   const status& why) {
  const node_plan* blocked = nullptr;
  const node_plan* recv = nullptr;
  for (auto i : step.waiting) {
    auto& plan = st.nodes[static_cast<size_t>(i)];
    if (plan.cls.kind == node_kind::recv)
      recv = recv ? recv : &plan;
    else
      blocked = blocked ? blocked : &plan;
  }
  if (blocked != nullptr) {
    auto kind = blocked->cls.kind == node_kind::queue_op      ? "queue"
                : blocked->cls.kind == node_kind::reader_op   ? "reader"
                                                              : "accumulator";
    auto& res = st.nodes[static_cast<size_t>(blocked->inputs.at(0).first)];
    auto shared = res.def.attr_or<std::string>("shared_name", "");
    return {why.code(), why.message() + waiting_for_marker + blocked->def.op
                          + " '" + blocked->def.name + "' on " + st.device
                          + " (" + kind + " '"
                          + (shared.empty() ? res.def.name : shared) + "')"};
  }
  if (recv != nullptr)
    return {why.code(),
            why.message() + waiting_on_marker + st.device
              + " for the value of '"
              + recv->def.attr_or<std::string>("tensor_name", "?")
              + "' from "
              + recv->def.attr_or<std::string>("send_device", "?")};
  return why;
}

// Fails every running step with `why` and releases every lease still
// held: nobody will wait for them (the executor ends, or its master is
// lost).
void withdraw_all(executor_self self, const status& why) {
  auto& st = self->state;
  std::vector<int64_t> running;
  for (auto& [id, step] : st.steps)
    running.push_back(id);
  for (auto id : running)
    fail_step(self, id, why);
  std::vector<int64_t> leased;
  for (auto& [id, queues] : st.leased)
    leased.push_back(id);
  for (auto id : leased)
    settle_leases(self, id, false);
}

void finish_if_done(executor_self self, step_state& step) {
  if (step.remaining > 0 || step.in_flight > 0)
    return;
  auto id = step.id;
  // What its dequeues took stays leased until the master commits.
  if (!step.taken_from.empty()) {
    step.response.leased = true;
    self->state.leased.emplace(id, std::move(step.taken_from));
  }
  reply(self, step);
  self->state.steps.erase(id);
  mark_finished(self->state, id);
  self->state.counters->steps.fetch_add(1, std::memory_order_relaxed);
}

void complete_node(executor_self self, step_state& step, int i,
                   std::vector<tensor> outputs) {
  auto& plan = self->state.nodes[static_cast<size_t>(i)];
  step.outs[static_cast<size_t>(i)] = std::move(outputs);
  if (step.trace && step.stat_index[static_cast<size_t>(i)] >= 0) {
    auto& s = step.response.node_stats[static_cast<size_t>(
      step.stat_index[static_cast<size_t>(i)])];
    auto rel = now_micros() - s.all_start_micros;
    s.op_end_rel_micros = rel;
    s.all_end_rel_micros = rel;
  }
  // Ready nodes run last in, first out; heavy consumers go in first, so
  // the cheap ones run before them. A bias gradient then reaches its
  // _Send (and the ps applies it) while the weight gradient's GEMM runs,
  // not after it.
  auto& nodes = self->state.nodes;
  for (int pass = 0; pass < 2; ++pass)
    for (auto c : plan.out_edges)
      if (nodes[static_cast<size_t>(c)].heavy() == (pass == 0)
          && --step.pending[static_cast<size_t>(c)] == 0)
        step.ready.push_back(c);
  --step.remaining;
}

// Continues a step after an asynchronous part of node `i` finished.
void fail_node(executor_self self, int64_t id, int i, status err) {
  if (err.message().find("[[node") == std::string::npos)
    err = status{err.code(),
                 err.message() + " [[node "
                   + self->state.nodes[static_cast<size_t>(i)].def.name
                   + "]]"};
  fail_step(self, id, std::move(err));
}

void resume(executor_self self, int64_t id, int i, status st,
            std::vector<tensor> outputs) {
  auto s = self->state.steps.find(id);
  if (s == self->state.steps.end())
    return; // aborted meanwhile
  auto& step = s->second;
  --step.in_flight;
  if (auto w = std::find(step.waiting.begin(), step.waiting.end(), i);
      w != step.waiting.end())
    step.waiting.erase(w);
  if (!st.ok()) {
    fail_node(self, id, i, std::move(st));
    return;
  }
  complete_node(self, step, i, std::move(outputs));
  drive(self, id);
}

// Starts node `i`: gathers its inputs, reading refs first if it needs
// values.
void start_node(executor_self self, step_state& step, int i) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  if (step.trace && !plan.cls.plumbing) {
    step.stat_index[static_cast<size_t>(i)]
      = static_cast<int>(step.response.node_stats.size());
    node_exec_stats s;
    s.node_name = plan.def.name;
    s.all_start_micros = now_micros();
    s.timeline_label = plan.def.name + " = " + plan.def.op + "()";
    step.response.node_stats.push_back(std::move(s));
  }
  std::vector<tensor> inputs;
  inputs.reserve(plan.inputs.size());
  std::vector<std::pair<size_t, variable_actor>> reads;
  for (auto [producer, index] : plan.inputs) {
    auto& p = st.nodes[static_cast<size_t>(producer)];
    // A ref consumer takes its first input as the ref itself; every other
    // input from a variable is its value.
    if (p.variable() && inputs.size() >= plan.cls.ref_inputs) {
      if (!p.var) {
        fail_step(self, step.id,
                  {error_code::aborted, "variable " + p.def.name
                                          + " was freed during the step "
                                            "(container reset) [[node "
                                          + plan.def.name + "]]"});
        return;
      }
      // The value straight from the variable's cell unless the variable
      // is writing it (or holds none: its read reports the error).
      if (p.var_cell) {
        std::unique_lock<std::mutex> lock{p.var_cell->mtx, std::try_to_lock};
        if (lock && p.var_cell->value.valid()
            && !p.var_cell->stale.load(std::memory_order_acquire)) {
          inputs.push_back(p.var_cell->value);
          continue;
        }
      }
      reads.emplace_back(inputs.size(), p.var);
      inputs.emplace_back();
      continue;
    }
    auto& outs = step.outs[static_cast<size_t>(producer)];
    if (static_cast<size_t>(index) >= outs.size()) {
      fail_step(self, step.id,
                internal_error("node '" + p.def.name + "' produced no output "
                               + std::to_string(index) + " for '"
                               + plan.def.name + "'"));
      return;
    }
    if (--step.uses_left[static_cast<size_t>(producer)] > 0) {
      inputs.push_back(outs[static_cast<size_t>(index)]);
    } else {
      inputs.push_back(std::move(outs[static_cast<size_t>(index)]));
      outs.clear();
    }
  }
  if (reads.empty()) {
    compute(self, step, i, std::move(inputs));
    return;
  }
  // Dereference refs: read every variable, then compute.
  struct pending_reads {
    std::vector<tensor> inputs;
    size_t left;
    bool failed = false;
  };
  auto pr = std::make_shared<pending_reads>();
  pr->inputs = std::move(inputs);
  pr->left = reads.size();
  auto id = step.id;
  step.in_flight += 1;
  for (auto& [slot, var] : reads) {
    auto on_value = [self, id, i, pr, slot = slot](status& err,
                                                    tensor& value) {
      if (pr->failed)
        return;
      if (!err.ok()) {
        pr->failed = true;
        resume(self, id, i, std::move(err), {});
        return;
      }
      pr->inputs[slot] = std::move(value);
      if (--pr->left > 0)
        return;
      auto s = self->state.steps.find(id);
      if (s == self->state.steps.end())
        return;
      --s->second.in_flight;
      compute(self, s->second, i, std::move(pr->inputs));
      drive(self, id);
    };
    auto on_error = [self, id, i, pr](caf::error& err) {
      if (pr->failed)
        return;
      pr->failed = true;
      resume(self, id, i, to_status(err, "variable actor"), {});
    };
    self->request(var, caf::infinite, read_atom_v).then(on_value, on_error);
  }
}

// The nodes without inputs in the order a step readies them. The ready
// stack runs last in, first out, so the nodes that lead to a _Send go in
// last, the earliest in the graph on top: a ps then reads and sends its
// variables before it runs the dozens of optimizer constants its updates
// need later, and sends the first layer's weights, which the worker needs
// first, before the others (models create their layers in order).
std::vector<int> start_order(const std::vector<node_plan>& nodes,
                             const std::vector<std::vector<int>>& producers) {
  std::vector<bool> feeds_send(nodes.size(), false);
  std::vector<int> frontier;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].cls.kind == node_kind::send) {
      feeds_send[i] = true;
      frontier.push_back(static_cast<int>(i));
    }
  while (!frontier.empty()) {
    auto i = frontier.back();
    frontier.pop_back();
    for (auto p : producers[static_cast<size_t>(i)])
      if (!feeds_send[static_cast<size_t>(p)]) {
        feeds_send[static_cast<size_t>(p)] = true;
        frontier.push_back(p);
      }
  }
  std::vector<int> order;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].num_deps == 0 && !feeds_send[i])
      order.push_back(static_cast<int>(i));
  for (size_t i = nodes.size(); i-- > 0;)
    if (nodes[i].num_deps == 0 && feeds_send[i])
      order.push_back(static_cast<int>(i));
  return order;
}

void drive(executor_self self, int64_t id) {
  for (;;) {
    auto s = self->state.steps.find(id);
    if (s == self->state.steps.end())
      return;
    auto& step = s->second;
    if (step.ready.empty()) {
      finish_if_done(self, step);
      return;
    }
    auto i = step.ready.back();
    step.ready.pop_back();
    start_node(self, step, i);
  }
}

// Starts step `req.step_id` here, checked (start_step).
void begin_step(executor_self self, run_graph_request& req,
                caf::typed_response_promise<run_graph_response> rp,
                bool by_channel) {
  auto& st = self->state;
  auto id = req.step_id;
  auto& step = st.steps[id];
  step.id = id;
  step.tag = req.tag != 0 ? req.tag : id;
  step.rp = std::move(rp);
  step.by_channel = by_channel;
  step.trace = req.trace;
  for (auto& [k, v] : req.feeds) {
    st.counters->bytes_in.fetch_add(v.byte_size(),
                                    std::memory_order_relaxed);
    step.feeds.emplace(k, std::move(v));
  }
  if (auto e = st.early.find(id); e != st.early.end()) {
    step.rendezvous.adopt(std::move(e->second));
    st.early.erase(e);
  }
  auto n = st.nodes.size();
  step.pending.resize(n);
  step.outs.resize(n);
  step.uses_left.resize(n);
  step.stat_index.assign(n, -1);
  step.remaining = n;
  if (step.trace) {
    node_exec_stats source;
    source.node_name = "_SOURCE";
    source.all_start_micros = now_micros();
    source.timeline_label = "_SOURCE = NoOp()";
    step.response.node_stats.push_back(std::move(source));
  }
  for (size_t i = 0; i < n; ++i) {
    step.pending[i] = st.nodes[i].num_deps;
    step.uses_left[i] = st.nodes[i].value_uses;
  }
  step.ready = st.roots;
  drive(self, id);
}

// Starts step `req.step_id` here: the master's request (`rp`), or one
// that came over the tensor channel. After this process may have been
// frozen (stall_watch.hpp), a request from a master in another process
// may be for a step that master failed meanwhile, declaring this task
// lost: the master says first whether the step still runs.
void start_step(executor_self self, run_graph_request& req,
                caf::typed_response_promise<run_graph_response> rp,
                bool by_channel) {
  auto& st = self->state;
  auto id = req.step_id;
  auto aborted = [self, id, by_channel](auto& promise, std::string why) {
    run_graph_response resp;
    resp.result = {error_code::aborted, std::move(why)};
    answer(self, id, by_channel, promise, std::move(resp));
  };
  if (st.finished.count(id) > 0 || st.steps.count(id) > 0)
    // Aborted before it started here, or a duplicate.
    return aborted(rp, "step " + std::to_string(id) + " was aborted");
  if (!st.master || st.master->node() == self->node()
      || !process_stall_watch().suspect(stall_watch::clock_type::now(),
                                        st.stall_seen)) {
    begin_step(self, req, std::move(rp), by_channel);
    return;
  }
  auto held = std::make_shared<run_graph_request>(std::move(req));
  auto withdrawn = "step " + std::to_string(id)
                   + " was withdrawn: it ended while this task was silent";
  self->request(st.master, std::chrono::seconds(5), step_alive_atom_v, id)
    .then(
      [self, held, rp, by_channel, aborted, withdrawn](bool alive) mutable {
        auto id = held->step_id;
        if (!alive || self->state.finished.count(id) > 0)
          return aborted(rp, withdrawn);
        begin_step(self, *held, std::move(rp), by_channel);
      },
      [rp, aborted, withdrawn](caf::error&) mutable {
        aborted(rp, withdrawn);
      });
}

executor_actor::behavior_type executor(executor_self self,
                                       executor_options opts) {
  auto& st = self->state;
  st.worker = std::move(opts.worker);
  st.device = std::move(opts.device);
  st.home = task_of_device(st.device);
  st.default_container = std::move(opts.default_container);
  st.counters = std::move(opts.counters);
  st.landing = chunk_landing::of(self->system());
  st.session = std::move(opts.session);
  auto& partition = opts.partition;
  auto& cells = opts.cells;
  std::unordered_map<std::string, int> index;
  st.nodes.resize(partition.nodes.size());
  for (size_t i = 0; i < partition.nodes.size(); ++i) {
    auto& plan = st.nodes[i];
    plan.def = std::move(partition.nodes[i]);
    index.emplace(plan.def.name, static_cast<int>(i));
    plan.cls = classify(plan.def, st.session, st.default_container);
    plan.name_hash = std::hash<std::string>{}(plan.def.name);
    // The worker made a generator for every random op (register_graph).
    if (auto r = cells.find(plan.def.name); r != cells.end())
      plan.cell = r->second;
  }
  // Ended (its session closed, its task stopped): the running steps fail,
  // which cancels their queue operations before any element is taken.
  self->set_exit_handler([self](caf::exit_msg& em) {
    withdraw_all(self, {error_code::cancelled, "Step was cancelled: its "
                                               "session or task ended"});
    self->quit(em.reason);
  });
  // Its master's process died or went silent (BASP's heartbeat bound):
  // nobody waits for its steps any more, and a dequeue left waiting would
  // take the next element for nobody. Every step is withdrawn, its queue
  // operations cancelled, and the executor ends (the master registers
  // again when it comes back).
  if (opts.master) {
    st.owner = opts.master.address();
    self->monitor(opts.master);
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.owner) {
      withdraw_all(self, {error_code::aborted,
                          "Step was withdrawn: its master was lost ("
                            + caf::to_string(dm.reason) + ")"});
      self->quit(dm.reason);
      return;
    }
    for (auto& plan : self->state.nodes)
      if (plan.var && plan.var.address() == dm.source) {
        plan.var = nullptr;
        plan.var_cell = nullptr;
      }
      else if (plan.queue && plan.queue.address() == dm.source)
        plan.queue = nullptr;
      else if (plan.reader && plan.reader.address() == dm.source)
        plan.reader = nullptr;
      else if (plan.accumulator && plan.accumulator.address() == dm.source)
        plan.accumulator = nullptr;
  });
  std::vector<std::vector<int>> producers(st.nodes.size());
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto& plan = st.nodes[i];
    for (auto& in : plan.def.inputs) {
      auto ref = parse_input(in);
      auto p = index.find(ref.node);
      if (p == index.end())
        continue; // validated by the master; a dangling edge never fires
      st.nodes[static_cast<size_t>(p->second)].out_edges.push_back(
        static_cast<int>(i));
      ++plan.num_deps;
      producers[i].push_back(p->second);
      if (!ref.control)
        plan.inputs.emplace_back(p->second, ref.index);
    }
  }
  // As the gathering of inputs: a variable's value inputs past the leading
  // refs are reads, not its outputs.
  for (auto& plan : st.nodes)
    for (size_t j = 0; j < plan.inputs.size(); ++j) {
      auto& p = st.nodes[static_cast<size_t>(plan.inputs[j].first)];
      if (!(p.variable() && j >= plan.cls.ref_inputs))
        ++p.value_uses;
    }
  st.roots = start_order(st.nodes, producers);
  return {
    [self](run_graph_atom, run_graph_request& req,
           std::vector<caf::actor>& peers) {
      auto& st = self->state;
      // Before the promise, which takes the sender over.
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      auto rp = self->make_response_promise<run_graph_response>();
      // The partition's first step brings the peers (see run_graph_request).
      if (!peers.empty()) {
        st.peers.clear();
        st.routes.clear();
        for (size_t p = 0; p < peers.size() && p < req.peer_devices.size();
             ++p) {
          auto& device = req.peer_devices[p];
          st.peers.emplace(device, caf::actor_cast<executor_actor>(peers[p]));
          if (p < req.peer_inboxes.size() && !req.peer_inboxes[p].empty()
              && peers[p] && peers[p]->node() != self->node())
            if (auto r = tensor_channel::route_to(req.peer_inboxes[p],
                                                  self->home_system())) {
              st.routes.emplace(device, std::move(r));
              tensor_channel::name_peer(self->home_system(),
                                        req.peer_inboxes[p],
                                        task_of_device(device));
            }
        }
        st.sinks = std::move(req.sink_devices);
        // Where later requests that come over the channel are answered.
        st.master = std::move(sender);
        st.part = req.part;
        st.reply_route = {};
        if (!req.reply_inbox.empty() && st.master
            && st.master->node() != self->node())
          st.reply_route = tensor_channel::route_to(req.reply_inbox,
                                                    self->home_system());
      }
      start_step(self, req, rp, false);
      return rp;
    },
    [self](run_graph_atom, run_graph_request& req) {
      // A later step's request over the tensor channel (or CAF, when its
      // link went down): no promise, the answer goes back the same way.
      // The master sends these only once this executor has answered a
      // request that brought its peers (peers_state, master.hpp), so one
      // that finds no master is not from it and is dropped.
      if (!self->state.master)
        return;
      start_step(self, req, {}, true);
    },
    [self](recv_tensor_atom, int64_t id, std::string& key, tensor& value) {
      deliver(self, id, std::move(key), std::move(value));
    },
    [self](recv_tensor_atom, wire_chunk& wire) {
      receive_chunk(self, wire);
    },
    [self](abort_step_atom, int64_t id, status& why) {
      if (why.code() == error_code::deadline_exceeded)
        if (auto s = self->state.steps.find(id); s != self->state.steps.end())
          why = waiting_for(self->state, s->second, why);
      fail_step(self, id, std::move(why));
      settle_leases(self, id, false);
      mark_finished(self->state, id);
    },
    [self](commit_step_atom, int64_t id) { settle_leases(self, id, true); },
  };
}

} // namespace executor_detail

executor_actor spawn_executor(caf::actor_system& sys, executor_options opts) {
  auto who = std::move(opts.who);
  who.kind = monitoring::actor_kind::executor;
  return spawn_instrumented(sys, std::move(who), executor_detail::executor,
                            std::move(opts));
}

namespace {

bool is_random_op(const std::string& op) {
  return op == "RandomStandardNormal" || op == "TruncatedNormal"
         || op == "RandomUniform" || op == "RandomShuffle";
}

} // namespace

bool has_kernel_cell(const std::string& op) {
  return is_random_op(op) || op == "Print";
}

std::shared_ptr<kernel_cell> make_kernel_cell(const node_def& node) {
  auto cell = std::make_shared<kernel_cell>();
  if (!is_random_op(node.op))
    return cell;
  auto seed = node.attr_or<int64_t>("seed", 0);
  auto seed2 = node.attr_or<int64_t>("seed2", 0);
  if (seed == 0 && seed2 == 0) {
    std::random_device rd;
    cell->gen.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  } else {
    std::seed_seq seq{static_cast<uint32_t>(seed),
                      static_cast<uint32_t>(seed >> 32),
                      static_cast<uint32_t>(seed2),
                      static_cast<uint32_t>(seed2 >> 32)};
    cell->gen.seed(seq);
  }
  return cell;
}

} // namespace actorflow
