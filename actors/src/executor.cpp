// The partition executor: runs one registered partition, step by step.
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

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/actors/type_ids.hpp"
#include "actorflow/kernels/kernel.hpp"
#include "runtime.hpp"
#include "tensor_channel.hpp"

namespace actorflow {

int64_t now_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch())
    .count();
}

namespace {

/// Tensors larger than this cross the wire in chunks of this size.
constexpr uint64_t chunk_size = uint64_t{1} << 20;

/// The largest value for a fetch-only partition that rides in the
/// sender's reply (run_graph_request::sink_devices) when the tensor
/// channel reaches that partition: a 1 MiB fetch took 1 700 MB/s in the
/// reply and 2 200 over the channel, a 256 KiB one 1 100 and 900.
constexpr uint64_t held_max_with_channel = uint64_t{256} << 10;

bool is_queue_producer(const std::string& op) {
  return op == "FIFOQueueV2" || op == "PaddingFIFOQueueV2"
         || op == "RandomShuffleQueueV2";
}

bool is_reader_producer(const std::string& op) {
  return op == "TextLineReaderV2" || op == "FixedLengthRecordReaderV2"
         || op == "WholeFileReaderV2";
}

bool is_accumulator_producer(const std::string& op) {
  return op == "ConditionalAccumulator";
}

// Accumulator operations, by op type; take the handle as input 0.
std::optional<accumulator_op> accumulator_op_of(const std::string& op) {
  if (op == "AccumulatorApplyGradient")
    return accumulator_op::apply;
  if (op == "AccumulatorTakeGradient")
    return accumulator_op::take;
  if (op == "AccumulatorNumAccumulated")
    return accumulator_op::num_accumulated;
  if (op == "AccumulatorSetGlobalStep")
    return accumulator_op::set_global_step;
  return std::nullopt;
}

bool is_variable(const std::string& op) {
  return op == "VariableV2" || op == "Variable";
}

// Nodes whose output is a handle to a resource actor (a ref).
bool is_ref_producer(const std::string& op) {
  return is_variable(op) || is_queue_producer(op) || is_reader_producer(op)
         || is_accumulator_producer(op);
}

// Queue operations, by op type; take the queue handle as input 0.
std::optional<queue_op> queue_op_of(const std::string& op) {
  static const std::unordered_map<std::string, queue_op> ops{
    {"QueueEnqueueV2", queue_op::enqueue},
    {"QueueEnqueueManyV2", queue_op::enqueue_many},
    {"QueueDequeueV2", queue_op::dequeue},
    {"QueueDequeueManyV2", queue_op::dequeue_many},
    {"QueueDequeueUpToV2", queue_op::dequeue_up_to},
    {"QueueCloseV2", queue_op::close},
    {"QueueSizeV2", queue_op::size},
    {"QueueIsClosedV2", queue_op::is_closed}};
  auto i = ops.find(op);
  if (i == ops.end())
    return std::nullopt;
  return i->second;
}

// Reader operations, by op type; take the reader handle as input 0 (and
// a read the filename queue's as input 1).
std::optional<reader_op> reader_op_of(const std::string& op) {
  static const std::unordered_map<std::string, reader_op> ops{
    {"ReaderReadV2", reader_op::read},
    {"ReaderReadUpToV2", reader_op::read_up_to},
    {"ReaderNumRecordsProducedV2", reader_op::num_records_produced},
    {"ReaderNumWorkUnitsCompletedV2", reader_op::num_work_units_completed},
    {"ReaderResetV2", reader_op::reset}};
  auto i = ops.find(op);
  if (i == ops.end())
    return std::nullopt;
  return i->second;
}

// Training ops: how many leading inputs are variable refs (the variable
// and its slots); 0 for other ops.
int training_refs(const std::string& op) {
  if (op == "ApplyGradientDescent")
    return 1;
  if (op == "ApplyMomentum" || op == "ApplyAdagrad")
    return 2;
  if (op == "ApplyAdam")
    return 3;
  return 0;
}

// Ops that take a resource's handle (input 0) rather than its value.
bool is_ref_consumer(const std::string& op) {
  return op == "Assign" || op == "AssignAdd" || op == "AssignSub"
         || op == "IsVariableInitialized" || op == "CountUpTo"
         || queue_op_of(op).has_value() || reader_op_of(op).has_value()
         || accumulator_op_of(op).has_value() || training_refs(op) > 0;
}

bool is_plumbing(const std::string& op) {
  return op == "_Send" || op == "_Recv" || op == "_Arg" || op == "_Retval";
}

struct node_plan {
  node_def def;
  /// Data inputs as (producer, output index).
  std::vector<std::pair<int, int>> inputs;
  /// Consumers, one entry per edge (data or control).
  std::vector<int> out_edges;
  int num_deps = 0;
  bool ref_output = false;
  bool ref_consumer = false;
  /// Leading inputs taken as refs, not values (1 for ref consumers; the
  /// variable and its slots for training ops).
  size_t ref_inputs = 0;
  /// Random ops keep their generator across steps and plans of a session,
  /// as TF's kernels do.
  std::shared_ptr<rng_cell> rng;
  /// VariableV2: the variable's actor, looked up once, and where it keeps
  /// its value (reads skip the message when they can, variable_cell).
  variable_actor var;
  std::shared_ptr<variable_cell> var_cell;
  /// A queue node: the queue's actor, looked up once.
  queue_actor queue;
  /// A reader node: the reader's actor, looked up once.
  reader_actor reader;
  /// A ConditionalAccumulator node: its actor, looked up once.
  accumulator_actor accumulator;
  /// A variable node, whose value other consumers read.
  bool variable = false;
  /// A kernel that takes long (a GEMM or convolution): readied after its
  /// cheap siblings, so that they run first (see complete_node).
  bool heavy = false;
  /// Inputs of other nodes that take one of this node's outputs as a value.
  /// The last of them moves its input out of the step, as TF's executor
  /// clears an input entry once its consumer ran: a variable's read is not
  /// kept alive until the step ends (which made its next update copy the
  /// whole value) and a step's peak memory is its live tensors.
  int value_uses = 0;
  std::string rendezvous_key;
};

struct step_state {
  int64_t id = 0;
  /// The master's request; none for one that came over the tensor channel
  /// (the answer then goes back there: reply()).
  caf::typed_response_promise<run_graph_response> rp;
  bool by_channel = false;
  std::vector<int> pending;
  std::vector<std::vector<tensor>> outs;
  /// Per node, its value_uses not yet taken in this step.
  std::vector<int> uses_left;
  std::vector<int> ready;
  size_t remaining = 0;
  size_t in_flight = 0;
  bool trace = false;
  std::unordered_map<int64_t, tensor> feeds;
  /// Recv nodes waiting for their tensor, by rendezvous key.
  std::unordered_map<std::string, int> waiting;
  /// Tensors that arrived before their Recv ran.
  std::unordered_map<std::string, tensor> arrived;
  run_graph_response response;
  /// Index into response.node_stats per node (-1 = not traced).
  std::vector<int> stat_index;
  /// Queues and readers with an operation of this step pending, to cancel
  /// on abort.
  std::vector<queue_actor> queues;
  std::vector<reader_actor> readers;
  std::vector<accumulator_actor> accumulators;
};

struct executor_state {
  std::vector<node_plan> nodes;
  /// The executors of the plan's partitions by device, and the sink
  /// devices among them, from the first run_graph_request.
  std::unordered_map<std::string, executor_actor> peers;
  /// The tensor channel to the peers in other processes that have an
  /// inbox (run_graph_request::peer_inboxes), by device.
  std::unordered_map<std::string, tensor_channel::route> routes;
  std::vector<std::string> sinks;
  /// Where answers to requests that came over the tensor channel go: the
  /// master (the sender of the first request, for the CAF fallback), its
  /// inbox and this partition's part in its plan.
  caf::actor master;
  tensor_channel::route reply_route;
  int64_t part = 0;
  /// The nodes without inputs, in the order a step pushes them on its
  /// ready stack (see start_order).
  std::vector<int> roots;
  std::string device;
  std::string default_container;
  /// The session this partition belongs to: private queues are per
  /// session, as TF's per-session kernels.
  std::string session;
  task_actor task;
  std::shared_ptr<task_counters> counters;
  std::unordered_map<int64_t, step_state> steps;
  /// Tensors for steps that have not started here yet.
  std::unordered_map<int64_t, std::unordered_map<std::string, tensor>> early;
  /// Large tensors arriving in chunks, by step and rendezvous key.
  /// A tensor arriving in chunks of its wire encoding. Chunks from one
  /// sender arrive in order, so the header (chunk 0) comes first: then
  /// the data goes straight into `value`. Otherwise (a string tensor, a
  /// header past the first chunk) the bytes are collected and decoded.
  struct partial_tensor {
    tensor value;
    size_t header_size = 0;
    std::string bytes;
    uint64_t received = 0;
  };
  std::unordered_map<int64_t, std::unordered_map<std::string, partial_tensor>>
    partials;
  /// Steps that ended here: late tensors for them are dropped.
  std::unordered_set<int64_t> finished;
  std::deque<int64_t> finished_order;
  static inline const char* name = "actorflow.executor";
};

using executor_self = executor_actor::stateful_pointer<executor_state>;

void mark_finished(executor_state& st, int64_t step) {
  st.early.erase(step);
  st.partials.erase(step);
  chunk_landing::forget(step);
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

void finish_if_done(executor_self self, step_state& step) {
  if (step.remaining > 0 || step.in_flight > 0)
    return;
  auto id = step.id;
  reply(self, step);
  self->state.steps.erase(id);
  mark_finished(self->state, id);
  self->state.counters->steps.fetch_add(1, std::memory_order_relaxed);
}

void drive(executor_self self, int64_t id);

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
      if (nodes[static_cast<size_t>(c)].heavy == (pass == 0)
          && --step.pending[static_cast<size_t>(c)] == 0)
        step.ready.push_back(c);
  --step.remaining;
}

// Continues a step after an asynchronous part of node `i` finished.
void resume(executor_self self, int64_t id, int i, status st,
            std::vector<tensor> outputs) {
  auto s = self->state.steps.find(id);
  if (s == self->state.steps.end())
    return; // aborted meanwhile
  auto& step = s->second;
  --step.in_flight;
  if (!st.ok()) {
    auto& name = self->state.nodes[static_cast<size_t>(i)].def.name;
    if (st.message().find("[[node") == std::string::npos)
      st = status{st.code(), st.message() + " [[node " + name + "]]"};
    fail_step(self, id, std::move(st));
    return;
  }
  complete_node(self, step, i, std::move(outputs));
  drive(self, id);
}

template <class... Ts>
void request_async(executor_self self, const variable_actor& dest, int64_t id,
                   int i, Ts&&... xs) {
  ++self->state.steps.at(id).in_flight;
  self->request(dest, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [self, id, i](status& st, tensor& value) {
        std::vector<tensor> outs;
        if (st.ok())
          outs.push_back(std::move(value));
        resume(self, id, i, std::move(st), std::move(outs));
      },
      [self, id, i](caf::error& err) {
        resume(self, id, i, to_status(err, "variable actor"), {});
      });
}

// Sends an operation to a resource actor that replies (status, outputs)
// and continues node `i` of step `id` with the reply.
template <class Handle, class... Ts>
void request_outputs(executor_self self, const Handle& dest, int64_t id,
                     int i, const char* what, Ts&&... xs) {
  ++self->state.steps.at(id).in_flight;
  self->request(dest, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [self, id, i](status& err, std::vector<tensor>& result) {
        resume(self, id, i, std::move(err), std::move(result));
      },
      [self, id, i, what](caf::error& err) {
        resume(self, id, i, to_status(err, what), {});
      });
}

// Stores a looked-up resource actor in node `i`'s plan (watched: a reset
// container ends it, and the next step looks it up again) and continues.
template <class Handle>
void attach_resource(executor_self self, int64_t id, int i, status err,
                     Handle handle, Handle node_plan::*member) {
  if (err.ok()) {
    self->state.nodes[static_cast<size_t>(i)].*member = handle;
    self->monitor(handle);
  }
  resume(self, id, i, std::move(err), {tensor{}});
}

// One update of a training op: a variable actor, what it applies, and its
// arguments given the new values of the updates before it.
struct apply_step {
  variable_actor var;
  apply_kind kind;
  std::function<std::vector<tensor>(const std::vector<tensor>&)> args;
  /// Runs at once with the step after it (neither needs the other's
  /// value): Adam's two slots of a large variable update in parallel.
  bool with_next = false;
};

struct apply_run {
  std::vector<apply_step> steps;
  /// -1: whole variables; else the first row of a row-block update.
  int64_t row_begin = -1;
  std::vector<tensor> results;
  size_t pending = 0;
  bool failed = false;
};

// Runs the steps from `k` on, a group of `with_next` steps at a time (a
// slot's new value feeds the variable's update), each atomic in its
// variable actor; node `i`'s output is the last new value (nothing for a
// row block: its only users are control edges, and holding the rows would
// make the variable's next block copy the whole buffer).
void run_applies(executor_self self, int64_t id, int i,
                 std::shared_ptr<apply_run> run, size_t k) {
  auto& steps = run->steps;
  if (k == steps.size()) {
    resume(self, id, i, {},
           {run->row_begin < 0 ? run->results.back() : tensor{}});
    return;
  }
  auto end = k + 1;
  while (end < steps.size() && steps[end - 1].with_next)
    ++end;
  auto first = run->results.size();
  run->results.resize(first + (end - k));
  run->pending = end - k;
  for (auto j = k; j < end; ++j) {
    auto& s = steps[j];
    self
      ->request(s.var, caf::infinite, apply_atom_v,
                static_cast<int32_t>(s.kind),
                s.args(run->results), run->row_begin)
      .then(
        [self, id, i, run, end, slot = first + (j - k)](status& err,
                                                       tensor& value) {
          if (run->failed)
            return;
          if (!err.ok()) {
            run->failed = true;
            resume(self, id, i, std::move(err), {});
            return;
          }
          run->results[slot] = std::move(value);
          if (--run->pending == 0)
            run_applies(self, id, i, run, end);
        },
        [self, id, i, run](caf::error& err) {
          if (run->failed)
            return;
          run->failed = true;
          resume(self, id, i, to_status(err, "variable actor"), {});
        });
  }
}

tensor scalar_as(dtype type, double value) {
  return type == dtype::float64 ? tensor::scalar(value)
                                : tensor::scalar(static_cast<float>(value));
}

double scalar_of(const tensor& t) {
  return t.type() == dtype::float64 ? t.scalar_value<double>()
                                    : static_cast<double>(
                                      t.scalar_value<float>());
}

// The fewest gradient elements for which Adam's two slots update at once,
// on two threads. Below it they update one after the other on the thread
// that runs the chain: the second slot's job would wait in the shared
// queue for a woken scheduler thread (20-600 us on the VMs measured),
// which costs more than the update itself (a 50 k-element row block's
// whole update took ~80-95 us one after the other, 80-1 180 us at once;
// docs/PERFORMANCE.md).
constexpr int64_t parallel_slots_min_elements = int64_t{1} << 21;

// The updates of a training op, as TF's ApplyGradientDescent,
// ApplyMomentum, ApplyAdagrad and ApplyAdam kernels compute them.
std::vector<apply_step> training_steps(const node_def& def,
                                       const std::vector<variable_actor>& refs,
                                       const std::vector<tensor>& in) {
  using k = apply_kind;
  std::vector<apply_step> steps;
  auto& op = def.op;
  if (op == "ApplyGradientDescent") {
    steps.push_back({refs[0], k::gradient_descent,
                     [in](auto&) { return std::vector<tensor>{in[1], in[2]}; }});
  } else if (op == "ApplyMomentum") {
    // var, accum, lr, grad, momentum.
    steps.push_back({refs[1], k::momentum,
                     [in](auto&) { return std::vector<tensor>{in[3], in[4]}; }});
    if (def.attr_or<bool>("use_nesterov", false))
      steps.push_back({refs[0], k::nesterov, [in](auto& r) {
                         return std::vector<tensor>{in[2], in[3], in[4], r[0]};
                       }});
    else
      steps.push_back({refs[0], k::gradient_descent, [in](auto& r) {
                         return std::vector<tensor>{in[2], r[0]};
                       }});
  } else if (op == "ApplyAdagrad") {
    // var, accum, lr, grad.
    steps.push_back({refs[1], k::square_sum,
                     [in](auto&) { return std::vector<tensor>{in[3]}; }});
    steps.push_back({refs[0], k::scaled_sqrt, [in](auto& r) {
                       return std::vector<tensor>{in[2], in[3], r[0],
                                                  scalar_as(in[3].type(), 0)};
                     }});
  } else if (op == "ApplyAdam") {
    // var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad.
    steps.push_back({refs[1], k::moving_average,
                     [in](auto&) { return std::vector<tensor>{in[9], in[6]}; },
                     in[9].num_elements() >= parallel_slots_min_elements});
    steps.push_back({refs[2], k::moving_square,
                     [in](auto&) { return std::vector<tensor>{in[9], in[7]}; }});
    steps.push_back({refs[0], k::scaled_sqrt, [in](auto& r) {
                       auto lr_t = scalar_of(in[5])
                                   * std::sqrt(1 - scalar_of(in[4]))
                                   / (1 - scalar_of(in[3]));
                       return std::vector<tensor>{
                         scalar_as(in[9].type(), lr_t), r[0], r[1], in[8]};
                     }});
  }
  return steps;
}

// A `_Send`'s value over CAF: one message in process or up to one chunk,
// else ~1 MiB chunks of its encoding, all in flight at once (one huge
// message is ~3x slower, docs/DESIGN.md). Each chunk is cut from the
// header and the tensor's own bytes: one copy, no encoding of the whole
// first.
void send_over_caf(executor_self self, const executor_actor& dest,
                   int64_t id, const std::string& key, tensor value,
                   bool remote) {
  if (value.byte_size() <= chunk_size || !remote) {
    // In process the message shares the buffer: no copy, no chunks.
    self->send(dest, recv_tensor_atom_v, id, key, std::move(value));
    return;
  }
  auto header = tensor_header_bytes(value);
  uint64_t data_bytes = value.byte_size();
  if (header.empty()) {
    header = to_bytes(value);
    data_bytes = 0;
  }
  // A string tensor's encoding is the whole header: chunks of it.
  auto source = data_bytes > 0 ? value : tensor{};
  uint64_t total = header.size() + data_bytes;
  for (uint64_t off = 0; off < total; off += chunk_size) {
    auto end = std::min(total, off + chunk_size);
    wire_chunk chunk;
    chunk.step = id;
    chunk.key = key;
    chunk.total = total;
    chunk.offset = off;
    if (off < header.size())
      chunk.prefix = header.substr(
        off, std::min<uint64_t>(end, header.size()) - off);
    if (end > header.size()) {
      chunk.source = source;
      chunk.data_begin = std::max<uint64_t>(off, header.size())
                         - header.size();
      chunk.data_size = end - header.size() - chunk.data_begin;
    }
    self->send(dest, recv_tensor_atom_v, std::move(chunk));
  }
}

// Whether a heavy kernel (a GEMM, a convolution) is ready to run in
// `step`.
bool heavy_ready(executor_self self, const step_state& step) {
  auto& nodes = self->state.nodes;
  return std::any_of(step.ready.begin(), step.ready.end(), [&](int i) {
    return nodes[static_cast<size_t>(i)].heavy;
  });
}

// Runs node `i` once the values of its ref inputs are known.
void compute_unchecked(executor_self self, step_state& step, int i,
                       std::vector<tensor> inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto& op = plan.def.op;
  auto id = step.id;
  auto fail = [&](status err) {
    if (err.message().find("[[node") == std::string::npos)
      err = status{err.code(), err.message() + " [[node " + plan.def.name
                                 + "]]"};
    fail_step(self, id, std::move(err));
  };
  if (op == "_Arg") {
    auto index = plan.def.attr_or<int64_t>("index", -1);
    auto f = step.feeds.find(index);
    if (f == step.feeds.end())
      return fail(internal_error("missing feed for _Arg index "
                                 + std::to_string(index)));
    complete_node(self, step, i, {f->second});
    return;
  }
  if (op == "_Retval") {
    auto index = plan.def.attr_or<int64_t>("index", -1);
    // A fetched value may be kept for long: not in a ring's room.
    step.response.outputs.emplace_back(index, inputs.at(0).owned());
    complete_node(self, step, i, {});
    return;
  }
  if (op == "_Send") {
    auto recv_device = plan.def.attr_or<std::string>("recv_device", "");
    auto peer = st.peers.find(recv_device);
    if (peer == st.peers.end())
      return fail(internal_error("no executor for device " + recv_device));
    auto value = inputs.empty() ? tensor{} : inputs.front();
    st.counters->bytes_out.fetch_add(value.byte_size(),
                                     std::memory_order_relaxed);
    auto& dest = peer->second;
    auto remote = dest->node() != self->node();
    auto route = remote ? st.routes.find(recv_device) : st.routes.end();
    if (remote
        && value.byte_size()
             <= (route != st.routes.end() ? held_max_with_channel
                                          : chunk_size)
        && std::find(st.sinks.begin(), st.sinks.end(), recv_device)
             != st.sinks.end()) {
      step.response.held.push_back(
        {recv_device, plan.rendezvous_key, std::move(value)});
    } else if (route != st.routes.end()
               && tensor_channel::send(route->second, id,
                                       plan.rendezvous_key, value,
                                       caf::actor_cast<caf::actor>(dest),
                                       !heavy_ready(self, step))) {
      // Written from the tensor's buffer, read into the receiver's: no
      // copies into and out of CAF's buffers (tensor_channel.hpp). This
      // thread writes what the socket takes at once unless a GEMM waits
      // to run here: then the link's thread writes beside it (the
      // gradient blocks of a pipelined MatMul). Handing every value to
      // the link's thread delayed the first weight block by ~500 µs: a
      // wake-up of an idle vCPU is that slow on the VMs measured.
    } else {
      send_over_caf(self, dest, id, plan.rendezvous_key, std::move(value),
                    remote);
    }
    complete_node(self, step, i, {});
    return;
  }
  if (op == "_Recv") {
    auto a = step.arrived.find(plan.rendezvous_key);
    if (a != step.arrived.end()) {
      auto value = std::move(a->second);
      step.arrived.erase(a);
      complete_node(self, step, i, {std::move(value)});
      return;
    }
    step.waiting.emplace(plan.rendezvous_key, i);
    ++step.in_flight;
    return;
  }
  if (op == "Placeholder") {
    auto type = plan.def.attr_or<dtype>("dtype", dtype::invalid);
    auto shape = plan.def.attr_or<tensor_shape>("shape",
                                                 tensor_shape::unknown());
    return fail(invalid_argument(
      "You must feed a value for placeholder tensor '" + plan.def.name
      + "' with dtype " + std::string{to_string(type)} + " and shape "
      + shape.to_string()));
  }
  if (op == "NoOp") {
    complete_node(self, step, i, {});
    return;
  }
  if (plan.ref_output) {
    if (plan.var || plan.queue || plan.reader || plan.accumulator) {
      complete_node(self, step, i, {tensor{}});
      return;
    }
    auto container = plan.def.attr_or<std::string>("container", "");
    if (container.empty())
      container = st.default_container;
    auto shared = plan.def.attr_or<std::string>("shared_name", "");
    if (is_queue_producer(op) || is_reader_producer(op)
        || is_accumulator_producer(op)) {
      // Without a shared_name a queue or reader is private to its session
      // (TF's "_<n>_<node>" names); such names start with '_', which a
      // shared_name may not.
      auto name = shared.empty() ? "_" + st.session + "_" + plan.def.name
                                 : shared;
      graph_def one;
      one.nodes.push_back(plan.def);
      auto on_error = [self, id, i](caf::error& err) {
        resume(self, id, i, to_status(err, "task actor"), {});
      };
      ++step.in_flight;
      if (is_queue_producer(op))
        self
          ->request(st.task, caf::infinite, get_queue_atom_v, container, name,
                    to_bytes(one))
          .then(
            [self, id, i](status& err, queue_actor& q) {
              attach_resource(self, id, i, std::move(err), q,
                              &node_plan::queue);
            },
            on_error);
      else if (is_accumulator_producer(op))
        self
          ->request(st.task, caf::infinite, get_accumulator_atom_v, container,
                    name, to_bytes(one))
          .then(
            [self, id, i](status& err, accumulator_actor& a) {
              attach_resource(self, id, i, std::move(err), a,
                              &node_plan::accumulator);
            },
            on_error);
      else
        self
          ->request(st.task, caf::infinite, get_reader_atom_v, container,
                    name, to_bytes(one))
          .then(
            [self, id, i](status& err, reader_actor& r) {
              attach_resource(self, id, i, std::move(err), r,
                              &node_plan::reader);
            },
            on_error);
      return;
    }
    auto name = shared.empty() ? plan.def.name : shared;
    auto type = plan.def.attr_or<dtype>("dtype", dtype::invalid);
    auto shape = plan.def.attr_or<tensor_shape>("shape",
                                                tensor_shape::unknown());
    std::string shape_bytes;
    byte_writer w{shape_bytes};
    encode(w, shape);
    ++step.in_flight;
    self
      ->request(st.task, caf::infinite, get_variable_atom_v, container, name,
                static_cast<int32_t>(type), shape_bytes)
      .then(
        [self, id, i](status& err, variable_actor& var) {
          self->state.nodes[static_cast<size_t>(i)].var_cell
            = variable_cell_of(var);
          attach_resource(self, id, i, std::move(err), var, &node_plan::var);
        },
        [self, id, i](caf::error& err) {
          resume(self, id, i, to_status(err, "task actor"), {});
        });
    return;
  }
  if (auto qop = queue_op_of(op)) {
    auto producer = plan.inputs.at(0).first;
    auto& q = st.nodes[static_cast<size_t>(producer)].queue;
    if (!q)
      return fail(internal_error("queue handle of " + plan.def.name
                                 + " is not a queue"));
    std::vector<tensor> values;
    int64_t n = 0;
    if (*qop == queue_op::enqueue || *qop == queue_op::enqueue_many)
      values.assign(inputs.begin() + 1, inputs.end());
    if (*qop == queue_op::dequeue_many || *qop == queue_op::dequeue_up_to) {
      auto& nt = inputs.at(1);
      n = nt.type() == dtype::int64 ? nt.scalar_value<int64_t>()
                                    : nt.scalar_value<int32_t>();
    }
    bool cancel = plan.def.attr_or<bool>("cancel_pending_enqueues", false);
    step.queues.push_back(q);
    ++step.in_flight;
    bool takes = *qop == queue_op::dequeue || *qop == queue_op::dequeue_many
                 || *qop == queue_op::dequeue_up_to;
    bool batched = *qop != queue_op::dequeue;
    self
      ->request(q, caf::infinite, queue_op_atom_v, static_cast<int32_t>(*qop),
                std::move(values), n, id, cancel)
      .then(
        [self, id, i, q, takes, batched](status& err,
                                         std::vector<tensor>& result) {
          // The step ended while the queue handed over elements: nobody
          // will receive them, so they go back to the front.
          if (takes && err.ok() && !result.empty()
              && self->state.steps.count(id) == 0) {
            caf::anon_send(q, queue_op_atom_v,
                           static_cast<int32_t>(queue_op::put_back),
                           std::move(result), int64_t{batched ? 1 : 0},
                           int64_t{0}, false);
            return;
          }
          resume(self, id, i, std::move(err), std::move(result));
        },
        [self, id, i](caf::error& err) {
          resume(self, id, i, to_status(err, "queue actor"), {});
        });
    return;
  }
  if (auto aop = accumulator_op_of(op)) {
    auto& acc
      = st.nodes[static_cast<size_t>(plan.inputs.at(0).first)].accumulator;
    if (!acc)
      return fail({error_code::aborted,
                   "the accumulator of " + plan.def.name
                     + " was freed during the step (container reset)"});
    tensor grad;
    int64_t n = 0;
    auto number = [](const tensor& t) -> int64_t {
      return t.type() == dtype::int64 ? t.scalar_value<int64_t>()
                                      : t.scalar_value<int32_t>();
    };
    if (*aop == accumulator_op::apply) {
      n = number(inputs.at(1));
      grad = inputs.at(2);
    } else if (*aop != accumulator_op::num_accumulated) {
      n = number(inputs.at(1));
    }
    step.accumulators.push_back(acc);
    request_outputs(self, acc, id, i, "accumulator actor",
                    accumulator_op_atom_v, static_cast<int32_t>(*aop),
                    std::move(grad), n, id);
    return;
  }
  if (auto rop = reader_op_of(op)) {
    auto& reader = st.nodes[static_cast<size_t>(plan.inputs.at(0).first)].reader;
    if (!reader)
      return fail({error_code::aborted,
                   "the reader of " + plan.def.name
                     + " was freed during the step (container reset)"});
    queue_actor queue;
    int64_t n = 0;
    if (*rop == reader_op::read || *rop == reader_op::read_up_to) {
      queue = st.nodes[static_cast<size_t>(plan.inputs.at(1).first)].queue;
      if (!queue)
        return fail(invalid_argument(
          "input 1 of " + plan.def.name + " must be a queue on the reader's "
          "device"));
      // Cancelling the step also cancels the reader's pending dequeue.
      step.queues.push_back(queue);
    }
    if (*rop == reader_op::read_up_to)
      n = inputs.at(2).scalar_value<int64_t>();
    step.readers.push_back(reader);
    request_outputs(self, reader, id, i, "reader actor", reader_op_atom_v,
                    static_cast<int32_t>(*rop), queue, n, id);
    return;
  }
  if (auto refs_count = training_refs(op); refs_count > 0) {
    std::vector<variable_actor> refs;
    for (int k = 0; k < refs_count; ++k) {
      auto& p = st.nodes[static_cast<size_t>(plan.inputs.at(static_cast<size_t>(k)).first)];
      if (!p.var)
        return fail({error_code::aborted,
                     "variable " + p.def.name
                       + " was freed during the step (container reset)"});
      refs.push_back(p.var);
    }
    auto run = std::make_shared<apply_run>();
    run->steps = training_steps(plan.def, refs, inputs);
    run->row_begin = plan.def.attr_or<int64_t>("_row_begin", -1);
    ++step.in_flight;
    run_applies(self, id, i, std::move(run), 0);
    return;
  }
  if (plan.ref_consumer) {
    auto producer = plan.inputs.at(0).first;
    auto& var = st.nodes[static_cast<size_t>(producer)].var;
    if (!var)
      return fail({error_code::aborted,
                   "variable " + st.nodes[static_cast<size_t>(producer)].def.name
                     + " was freed during the step (container reset)"});
    if (op == "CountUpTo") {
      request_async(self, var, id, i, count_up_to_atom_v,
                    plan.def.attr_or<int64_t>("limit", 0));
      return;
    }
    if (op == "IsVariableInitialized") {
      ++step.in_flight;
      self->request(var, caf::infinite, is_initialized_atom_v)
        .then(
          [self, id, i](bool initialized) {
            resume(self, id, i, {}, {tensor::scalar(initialized)});
          },
          [self, id, i](caf::error& err) {
            resume(self, id, i, to_status(err, "variable actor"), {});
          });
      return;
    }
    auto value = inputs.at(1);
    if (op == "Assign")
      request_async(self, var, id, i, assign_atom_v, std::move(value),
                    plan.def.attr_or<bool>("validate_shape", true));
    else if (op == "AssignAdd")
      request_async(self, var, id, i, assign_add_atom_v, std::move(value));
    else
      request_async(self, var, id, i, assign_sub_atom_v, std::move(value));
    return;
  }
  // A synchronous kernel.
  kernel_context ctx{plan.def, inputs, {}, nullptr, {}};
  status result;
  if (plan.rng) {
    std::lock_guard<std::mutex> guard{plan.rng->mtx};
    ctx.rng = &plan.rng->gen;
    result = run_kernel(ctx);
  } else {
    result = run_kernel(ctx);
  }
  if (!result.ok())
    return fail(std::move(result));
  complete_node(self, step, i, std::move(ctx.outputs));
}

// compute_unchecked, with a malformed node (an attribute of the wrong
// kind, say) failing the step instead of the executor.
void compute(executor_self self, step_state& step, int i,
             std::vector<tensor> inputs) {
  auto id = step.id;
  try {
    compute_unchecked(self, step, i, std::move(inputs));
  } catch (const op_error& e) {
    fail_step(self, id,
              {e.code(), e.get_status().message() + " [[node "
                           + self->state.nodes[static_cast<size_t>(i)].def.name
                           + "]]"});
  } catch (const std::exception& e) {
    fail_step(self, id, internal_error(e.what()));
  }
}

// Starts node `i`: gathers its inputs, reading refs first if it needs
// values.
void start_node(executor_self self, step_state& step, int i) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  if (step.trace && !is_plumbing(plan.def.op)) {
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
    if (p.variable && inputs.size() >= plan.ref_inputs) {
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
        if (lock && p.var_cell->value.valid()) {
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

// A tensor for `key` in step `id` arrived: completes its Recv, or keeps it
// until the Recv (or the step) starts here.
void deliver(executor_self self, int64_t id, std::string key,
             tensor value) {
  auto& st = self->state;
  st.counters->bytes_in.fetch_add(value.byte_size(),
                                  std::memory_order_relaxed);
  if (st.finished.count(id) > 0)
    return;
  auto s = st.steps.find(id);
  if (s == st.steps.end()) {
    st.early[id].emplace(std::move(key), std::move(value));
    return;
  }
  auto& step = s->second;
  auto w = step.waiting.find(key);
  if (w == step.waiting.end()) {
    step.arrived.emplace(std::move(key), std::move(value));
    return;
  }
  auto i = w->second;
  step.waiting.erase(w);
  if (step.trace) {
    node_exec_stats r;
    r.node_name = "RecvTensor";
    r.all_start_micros = now_micros();
    r.timeline_label = "RecvTensor " + key;
    step.response.recv_stats.push_back(std::move(r));
  }
  resume(self, id, i, {}, {std::move(value)});
}

// All chunks of `key` in step `id` have arrived: checks and delivers the
// tensor they make up.
void complete_chunked(executor_self self, int64_t id, const std::string& key) {
  auto& st = self->state;
  auto& part = st.partials[id][key];
  auto bad = [&](status err) {
    st.partials[id].erase(key);
    fail_step(self, id, std::move(err));
  };
  tensor value;
  if (part.value.valid()) {
    value = std::move(part.value);
    if (value.type() == dtype::bool_) {
      auto* b = static_cast<const unsigned char*>(value.raw());
      for (size_t i = 0; i < value.byte_size(); ++i)
        if (b[i] > 1)
          return bad({error_code::data_loss,
                      "corrupt tensor: invalid bool byte "
                        + std::to_string(b[i]) + " in " + key});
    }
  } else if (auto err = from_bytes(part.bytes, value); !err.ok()) {
    return bad(err);
  }
  st.partials[id].erase(key);
  deliver(self, id, key, std::move(value));
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
    if (nodes[i].def.op == "_Send") {
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

// Starts step `req.step_id` here: the master's request (`rp`), or one
// that came over the tensor channel.
void start_step(executor_self self, run_graph_request& req,
                caf::typed_response_promise<run_graph_response> rp,
                bool by_channel) {
  auto& st = self->state;
  auto id = req.step_id;
  if (st.finished.count(id) > 0 || st.steps.count(id) > 0) {
    // Aborted before it started here, or a duplicate.
    run_graph_response resp;
    resp.result = {error_code::aborted,
                   "step " + std::to_string(id) + " was aborted"};
    answer(self, id, by_channel, rp, std::move(resp));
    return;
  }
  auto& step = st.steps[id];
  step.id = id;
  step.rp = std::move(rp);
  step.by_channel = by_channel;
  step.trace = req.trace;
  for (auto& [k, v] : req.feeds) {
    st.counters->bytes_in.fetch_add(v.byte_size(),
                                    std::memory_order_relaxed);
    step.feeds.emplace(k, std::move(v));
  }
  if (auto e = st.early.find(id); e != st.early.end()) {
    step.arrived = std::move(e->second);
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

executor_actor::behavior_type executor(executor_self self, task_actor task,
                       graph_def partition, std::string device,
                       std::string default_container,
                       std::shared_ptr<task_counters> counters, rng_map rngs,
                       std::string session) {
  auto& st = self->state;
  st.task = std::move(task);
  st.device = std::move(device);
  st.default_container = std::move(default_container);
  st.counters = std::move(counters);
  st.session = std::move(session);
  std::unordered_map<std::string, int> index;
  st.nodes.resize(partition.nodes.size());
  for (size_t i = 0; i < partition.nodes.size(); ++i) {
    auto& plan = st.nodes[i];
    plan.def = std::move(partition.nodes[i]);
    index.emplace(plan.def.name, static_cast<int>(i));
    plan.ref_output = is_ref_producer(plan.def.op);
    plan.variable = is_variable(plan.def.op);
    plan.ref_consumer = is_ref_consumer(plan.def.op);
    plan.ref_inputs = plan.ref_consumer
                        ? static_cast<size_t>(
                          std::max(1, training_refs(plan.def.op)))
                        : 0;
    plan.rendezvous_key = plan.def.attr_or<std::string>("tensor_name", "");
    plan.heavy = plan.def.op == "MatMul" || plan.def.op == "BatchMatMul"
                 || plan.def.op.rfind("Conv2D", 0) == 0;
    if (is_random_op(plan.def.op)) {
      auto r = rngs.find(plan.def.name);
      plan.rng = r != rngs.end() ? r->second : make_rng(plan.def);
    }
  }
  // Ended (its session closed, its task stopped): the running steps fail,
  // which cancels their queue operations before any element is taken.
  self->set_exit_handler([self](caf::exit_msg& em) {
    std::vector<int64_t> running;
    for (auto& [id, step] : self->state.steps)
      running.push_back(id);
    for (auto id : running)
      fail_step(self, id,
                {error_code::cancelled, "Step was cancelled: its session "
                                        "or task ended"});
    self->quit(em.reason);
  });
  self->set_down_handler([self](caf::down_msg& dm) {
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
      if (!(p.variable && j >= plan.ref_inputs))
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
                                                  &self->home_system()))
              st.routes.emplace(device, std::move(r));
        }
        st.sinks = std::move(req.sink_devices);
        // Where later requests that come over the channel are answered.
        st.master = std::move(sender);
        st.part = req.part;
        st.reply_route = {};
        if (!req.reply_inbox.empty() && st.master
            && st.master->node() != self->node())
          st.reply_route = tensor_channel::route_to(req.reply_inbox,
                                                    &self->home_system());
      }
      start_step(self, req, rp, false);
      return rp;
    },
    [self](run_graph_atom, run_graph_request& req) {
      // A later step's request over the tensor channel (or CAF, when its
      // link went down): no promise, the answer goes back the same way.
      if (!self->state.master)
        return; // not from the master this partition was registered by
      start_step(self, req, {}, true);
    },
    [self](recv_tensor_atom, int64_t id, std::string& key, tensor& value) {
      deliver(self, id, std::move(key), std::move(value));
    },
    [self](recv_tensor_atom, wire_chunk& wire) {
      auto id = wire.step;
      auto& key = wire.key;
      auto total = wire.total;
      auto offset = wire.offset;
      auto& st = self->state;
      if (st.finished.count(id) > 0)
        return;
      if (wire.landed.valid()) {
        // Already in place (chunk_landing): count it.
        auto& part = st.partials[id][key];
        if (!part.value.valid()) {
          part.value = wire.landed;
          part.header_size = wire.header_size;
        } else if (part.value.raw() != wire.landed.raw()) {
          st.partials[id].erase(key);
          return fail_step(self, id,
                           {error_code::data_loss,
                            "chunks of " + key + " landed in two places"});
        }
        part.received += wire.size();
        if (part.received < total)
          return;
        return complete_chunked(self, id, key);
      }
      auto& part = st.partials[id][key];
      auto bad = [&](status err) {
        st.partials[id].erase(key);
        fail_step(self, id, std::move(err));
      };
      // Chunks only cross processes (a _Send in the same process shares
      // the tensor whole), so a chunk arrives deserialized.
      if (!wire.received.valid())
        return bad({error_code::internal,
                    "chunk of " + key + " arrived without its bytes"});
      std::string_view chunk{wire.data(), wire.size()};
      if (offset > total || chunk.size() > total - offset)
        return bad({error_code::data_loss, "chunk out of range for " + key});
      if (part.received == 0 && offset == 0 && part.bytes.empty()) {
        tensor value;
        size_t header = 0;
        if (tensor_from_header(chunk, value, header, total).ok()) {
          if (header + value.byte_size() != total)
            return bad({error_code::data_loss,
                        "corrupt tensor: " + std::to_string(total)
                          + " bytes announced for " + key + ", its header "
                          + "says " + std::to_string(header
                                                     + value.byte_size())});
          part.value = std::move(value);
          part.header_size = header;
        }
      }
      if (part.value.valid() && offset >= part.header_size) {
        std::memcpy(static_cast<char*>(part.value.raw()) + offset
                      - part.header_size,
                    chunk.data(), chunk.size());
      } else if (part.value.valid()) {
        // The header's chunk: its data part.
        auto skip = part.header_size - offset;
        if (skip > chunk.size())
          return bad({error_code::data_loss, "split header for " + key});
        std::memcpy(part.value.raw(), chunk.data() + skip,
                    chunk.size() - skip);
      } else {
        if (part.bytes.empty())
          part.bytes.resize(total);
        std::copy(chunk.begin(), chunk.end(), part.bytes.begin() + offset);
      }
      part.received += chunk.size();
      if (part.received < total)
        return;
      complete_chunked(self, id, key);
    },
    [self](abort_step_atom, int64_t id, status& why) {
      fail_step(self, id, std::move(why));
      mark_finished(self->state, id);
    },
  };
}

} // namespace

executor_actor spawn_executor(caf::actor_system& sys, task_actor task,
                          graph_def partition, std::string device,
                          std::string default_container,
                          std::shared_ptr<task_counters> counters,
                          rng_map rngs, std::string session,
                          monitoring::identity who) {
  who.kind = monitoring::actor_kind::executor;
  return spawn_instrumented(sys, std::move(who), executor, std::move(task),
                            std::move(partition),
                   std::move(device), std::move(default_container),
                   std::move(counters), std::move(rngs), std::move(session));
}

bool is_random_op(const std::string& op) {
  return op == "RandomStandardNormal" || op == "TruncatedNormal"
         || op == "RandomUniform" || op == "RandomShuffle";
}

std::shared_ptr<rng_cell> make_rng(const node_def& node) {
  auto cell = std::make_shared<rng_cell>();
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
