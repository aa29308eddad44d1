// What each kind of node does when an executor runs it. The kind and what
// it needs were decided when the partition was registered (node_class.hpp):
// plumbing (_Send), resource handles looked up once in the task's worker,
// queue, reader and accumulator operations, training ops, variable ops,
// and synchronous kernels.

#include <algorithm>
#include <cmath>

#include "actorflow/kernels/kernel.hpp"
#include "executor.hpp"

namespace actorflow::executor_detail {

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
  /// The node's write tag (each update adds its position).
  int64_t tag = 0;
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
                s.args(run->results), run->row_begin,
                run->tag + static_cast<int64_t>(j))
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
std::vector<apply_step> training_steps(const apply_info& info,
                                       const std::vector<variable_actor>& refs,
                                       const std::vector<tensor>& in) {
  using k = apply_kind;
  using training = apply_info::training;
  std::vector<apply_step> steps;
  if (info.op == training::gradient_descent) {
    steps.push_back({refs[0], k::gradient_descent,
                     [in](auto&) { return std::vector<tensor>{in[1], in[2]}; }});
  } else if (info.op == training::momentum) {
    // var, accum, lr, grad, momentum.
    steps.push_back({refs[1], k::momentum,
                     [in](auto&) { return std::vector<tensor>{in[3], in[4]}; }});
    if (info.use_nesterov)
      steps.push_back({refs[0], k::nesterov, [in](auto& r) {
                         return std::vector<tensor>{in[2], in[3], in[4], r[0]};
                       }});
    else
      steps.push_back({refs[0], k::gradient_descent, [in](auto& r) {
                         return std::vector<tensor>{in[2], r[0]};
                       }});
  } else if (info.op == training::adagrad) {
    // var, accum, lr, grad.
    steps.push_back({refs[1], k::square_sum,
                     [in](auto&) { return std::vector<tensor>{in[3]}; }});
    steps.push_back({refs[0], k::scaled_sqrt, [in](auto& r) {
                       return std::vector<tensor>{in[2], in[3], r[0],
                                                  scalar_as(in[3].type(), 0)};
                     }});
  } else if (info.op == training::adam) {
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
    return nodes[static_cast<size_t>(i)].heavy();
  });
}

// A `_Send`: its value to the consuming partition, over the tensor
// channel, CAF, or held in this partition's reply for the master.
void run_send(executor_self self, step_state& step, int i,
              std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  auto& recv_device = plan.detail<send_info>().recv_device;
  auto peer = st.peers.find(recv_device);
  if (peer == st.peers.end())
    return fail_node(self, id, i,
                     internal_error("no executor for device " + recv_device));
  auto value = inputs.empty() ? tensor{} : inputs.front();
  st.counters->bytes_out.fetch_add(value.byte_size(),
                                   std::memory_order_relaxed);
  auto& dest = peer->second;
  auto remote = dest->node() != self->node();
  auto route = remote ? st.routes.find(recv_device) : st.routes.end();
  auto& key = plan.cls.rendezvous_key;
  if (remote
      && value.byte_size()
           <= (route != st.routes.end() ? held_max_with_channel : chunk_size)
      && std::find(st.sinks.begin(), st.sinks.end(), recv_device)
           != st.sinks.end()) {
    step.response.held.push_back({recv_device, key, std::move(value)});
  } else if (route != st.routes.end()
             && tensor_channel::send(route->second, id, key, value,
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
    send_over_caf(self, dest, id, key, std::move(value), remote);
  }
  complete_node(self, step, i, {});
}

// A handle node (variable, queue, reader, accumulator): the first step
// looks its actor up in the task's worker, later ones have it.
void run_resource(executor_self self, step_state& step, int i) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  if (plan.var || plan.queue || plan.reader || plan.accumulator) {
    complete_node(self, step, i, {tensor{}});
    return;
  }
  auto& r = plan.detail<resource_info>();
  auto on_error = [self, id, i](caf::error& err) {
    resume(self, id, i, to_status(err, "worker"), {});
  };
  ++step.in_flight;
  switch (plan.cls.kind) {
    case node_kind::queue:
      self
        ->request(st.worker, caf::infinite, get_queue_atom_v, r.container,
                  r.name, r.node_bytes, st.home)
        .then(
          [self, id, i](status& err, queue_actor& q) {
            attach_resource(self, id, i, std::move(err), q,
                            &node_plan::queue);
          },
          on_error);
      return;
    case node_kind::accumulator:
      self
        ->request(st.worker, caf::infinite, get_accumulator_atom_v,
                  r.container, r.name, r.node_bytes, st.home)
        .then(
          [self, id, i](status& err, accumulator_actor& a) {
            attach_resource(self, id, i, std::move(err), a,
                            &node_plan::accumulator);
          },
          on_error);
      return;
    case node_kind::reader:
      self
        ->request(st.worker, caf::infinite, get_reader_atom_v, r.container,
                  r.name, r.node_bytes)
        .then(
          [self, id, i](status& err, reader_actor& rd) {
            attach_resource(self, id, i, std::move(err), rd,
                            &node_plan::reader);
          },
          on_error);
      return;
    default:
      self
        ->request(st.worker, caf::infinite, get_variable_atom_v, r.container,
                  r.name, static_cast<int32_t>(r.type), r.shape_bytes,
                  st.home)
        .then(
          [self, id, i](status& err, variable_actor& var) {
            self->state.nodes[static_cast<size_t>(i)].var_cell
              = variable_cell_of(var);
            attach_resource(self, id, i, std::move(err), var,
                            &node_plan::var);
          },
          on_error);
  }
}

int64_t count_of(const tensor& t) {
  return t.type() == dtype::int64 ? t.scalar_value<int64_t>()
                                  : t.scalar_value<int32_t>();
}

// Sends queue `q` one operation of step `id` for node `i` (the message
// `xs`) and resumes the node with its outputs. Elements a dequeue
// (`takes`) hands over after the step ended go back to the front: they
// are leased to the step, and cancelling it there returns them.
template <class... Ts>
void request_queue(executor_self self, const queue_actor& q, int64_t id,
                   int i, bool takes, Ts&&... xs) {
  self->request(q, caf::infinite, std::forward<Ts>(xs)...)
    .then(
      [self, id, i, q, takes](status& err, std::vector<tensor>& result) {
        if (takes && err.ok() && !result.empty()
            && self->state.steps.count(id) == 0) {
          self->send(q, cancel_step_atom_v, id);
          return;
        }
        resume(self, id, i, std::move(err), std::move(result));
      },
      [self, id, i](caf::error& err) {
        resume(self, id, i, to_status(err, "queue actor"), {});
      });
}

// A queue operation on the queue whose handle is input 0.
void run_queue_op(executor_self self, step_state& step, int i,
                  std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  auto [qop, cancel] = plan.detail<queue_call>();
  auto q = st.nodes[static_cast<size_t>(plan.inputs.at(0).first)].queue;
  if (!q)
    return fail_node(self, id, i,
                     internal_error("queue handle of " + plan.def.name
                                    + " is not a queue"));
  step.queues.push_back(q);
  step.waiting.push_back(i);
  ++step.in_flight;
  auto values = [&] {
    return std::vector<tensor>(inputs.begin() + 1, inputs.end());
  };
  switch (qop) {
    case queue_op::enqueue:
      return request_queue(self, q, id, i, false, enqueue_atom_v,
                           values(), id, write_tag(st, step, i));
    case queue_op::enqueue_many:
      return request_queue(self, q, id, i, false, enqueue_many_atom_v,
                           values(), id, write_tag(st, step, i));
    case queue_op::dequeue:
      step.taken_from.push_back(q);
      return request_queue(self, q, id, i, true, dequeue_atom_v, id);
    case queue_op::dequeue_many:
      step.taken_from.push_back(q);
      return request_queue(self, q, id, i, true, dequeue_many_atom_v,
                           count_of(inputs.at(1)), id);
    case queue_op::dequeue_up_to:
      step.taken_from.push_back(q);
      return request_queue(self, q, id, i, true, dequeue_up_to_atom_v,
                           count_of(inputs.at(1)), id);
    case queue_op::close:
      return request_queue(self, q, id, i, false, close_queue_atom_v,
                           cancel, id, write_tag(st, step, i));
    case queue_op::size:
      return request_queue(self, q, id, i, false, queue_size_atom_v);
    case queue_op::is_closed:
      return request_queue(self, q, id, i, false,
                           queue_closed_atom_v);
  }
}

// The task that sent an AccumulatorApplyGradient's gradient (or its local
// step) to this partition, "/job:worker/replica:0/task:1": the _Recv that
// feeds it names the sending device. "" when both come from this
// partition. The accumulator remembers who sent (AccumulatorReplicas).
static std::string sender_of(const executor_state& st,
                             const node_plan& plan) {
  for (size_t input : {size_t{2}, size_t{1}}) {
    if (input >= plan.inputs.size())
      continue;
    auto producer = plan.inputs[input].first;
    if (producer < 0 || static_cast<size_t>(producer) >= st.nodes.size())
      continue;
    const auto& def = st.nodes[static_cast<size_t>(producer)].def;
    if (def.op != "_Recv")
      continue;
    auto device = def.attr_or<std::string>("send_device", "");
    if (auto at = device.find("/device:"); at != std::string::npos)
      device.resize(at);
    if (!device.empty())
      return device;
  }
  return {};
}

// An accumulator operation on the accumulator whose handle is input 0.
void run_accumulator_op(executor_self self, step_state& step, int i,
                        std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  auto aop = plan.detail<accumulator_call>().op;
  auto& acc
    = st.nodes[static_cast<size_t>(plan.inputs.at(0).first)].accumulator;
  if (!acc)
    return fail_node(self, id, i,
                     {error_code::aborted,
                      "the accumulator of " + plan.def.name
                        + " was freed during the step (container reset)"});
  step.accumulators.push_back(acc);
  step.waiting.push_back(i);
  constexpr const char* what = "accumulator actor";
  switch (aop) {
    case accumulator_op::apply:
      return request_outputs(self, acc, id, i, what, apply_gradient_atom_v,
                             inputs.at(2), count_of(inputs.at(1)),
                             sender_of(st, plan), write_tag(st, step, i));
    case accumulator_op::take:
      return request_outputs(self, acc, id, i, what, take_gradient_atom_v,
                             count_of(inputs.at(1)), id,
                             write_tag(st, step, i));
    case accumulator_op::num_accumulated:
      return request_outputs(self, acc, id, i, what, num_accumulated_atom_v);
    case accumulator_op::set_global_step:
      return request_outputs(self, acc, id, i, what, set_global_step_atom_v,
                             count_of(inputs.at(1)));
    case accumulator_op::set_num_required:
      return request_outputs(self, acc, id, i, what, set_num_required_atom_v,
                             count_of(inputs.at(1)));
    case accumulator_op::replicas:
      return request_outputs(self, acc, id, i, what,
                             accumulator_replicas_atom_v);
  }
}

// A reader operation on the reader whose handle is input 0 (a read pulls
// file names from the queue whose handle is input 1).
void run_reader_op(executor_self self, step_state& step, int i,
                   std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  auto rop = plan.detail<reader_call>().op;
  auto& reader = st.nodes[static_cast<size_t>(plan.inputs.at(0).first)].reader;
  if (!reader)
    return fail_node(self, id, i,
                     {error_code::aborted,
                      "the reader of " + plan.def.name
                        + " was freed during the step (container reset)"});
  queue_actor queue;
  if (rop == reader_op::read || rop == reader_op::read_up_to) {
    queue = st.nodes[static_cast<size_t>(plan.inputs.at(1).first)].queue;
    if (!queue)
      return fail_node(self, id, i,
                       invalid_argument("input 1 of " + plan.def.name
                                        + " must be a queue on the reader's "
                                          "device"));
    // Cancelling the step also cancels the reader's pending dequeue.
    step.queues.push_back(queue);
  }
  step.readers.push_back(reader);
  step.waiting.push_back(i);
  constexpr const char* what = "reader actor";
  switch (rop) {
    case reader_op::read:
      return request_outputs(self, reader, id, i, what, read_record_atom_v,
                             queue, id);
    case reader_op::read_up_to:
      return request_outputs(self, reader, id, i, what, read_up_to_atom_v,
                             queue, inputs.at(2).scalar_value<int64_t>(), id);
    case reader_op::num_records_produced:
      return request_outputs(self, reader, id, i, what,
                             records_produced_atom_v, id);
    case reader_op::num_work_units_completed:
      return request_outputs(self, reader, id, i, what,
                             work_units_completed_atom_v, id);
    case reader_op::reset:
      return request_outputs(self, reader, id, i, what, reset_reader_atom_v,
                             id);
  }
}

// A training op: its updates of the variables whose refs lead its inputs.
void run_apply(executor_self self, step_state& step, int i,
               std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto& info = plan.detail<apply_info>();
  std::vector<variable_actor> refs;
  for (int k = 0; k < info.refs; ++k) {
    auto& p = st.nodes[static_cast<size_t>(
      plan.inputs.at(static_cast<size_t>(k)).first)];
    if (!p.var)
      return fail_node(self, step.id, i,
                       {error_code::aborted,
                        "variable " + p.def.name
                          + " was freed during the step (container reset)"});
    refs.push_back(p.var);
  }
  auto run = std::make_shared<apply_run>();
  run->steps = training_steps(info, refs, inputs);
  run->row_begin = info.row_begin;
  run->tag = write_tag(st, step, i);
  ++step.in_flight;
  run_applies(self, step.id, i, std::move(run), 0);
}

// CountUpTo, IsVariableInitialized, Assign, AssignAdd, AssignSub on the
// variable whose ref is input 0.
void run_variable_op(executor_self self, step_state& step, int i,
                     std::vector<tensor>& inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  auto producer = static_cast<size_t>(plan.inputs.at(0).first);
  auto& var = st.nodes[producer].var;
  if (!var)
    return fail_node(self, id, i,
                     {error_code::aborted,
                      "variable " + st.nodes[producer].def.name
                        + " was freed during the step (container reset)"});
  switch (plan.cls.kind) {
    case node_kind::count_up_to:
      request_async(self, var, id, i, count_up_to_atom_v,
                    plan.detail<variable_call>().limit,
                    write_tag(st, step, i));
      return;
    case node_kind::is_initialized:
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
    case node_kind::assign:
      request_async(self, var, id, i, assign_atom_v, inputs.at(1),
                    plan.detail<variable_call>().validate_shape,
                    write_tag(st, step, i));
      return;
    case node_kind::assign_add:
      request_async(self, var, id, i, assign_add_atom_v, inputs.at(1),
                    write_tag(st, step, i));
      return;
    default:
      request_async(self, var, id, i, assign_sub_atom_v, inputs.at(1),
                    write_tag(st, step, i));
  }
}

// Runs node `i` once the values of its ref inputs are known: by the kind
// its registration gave it, never by its op's name.
void compute_unchecked(executor_self self, step_state& step, int i,
                       std::vector<tensor> inputs) {
  auto& st = self->state;
  auto& plan = st.nodes[static_cast<size_t>(i)];
  auto id = step.id;
  switch (plan.cls.kind) {
    case node_kind::arg: {
      auto index = plan.detail<index_info>().index;
      auto f = step.feeds.find(index);
      if (f == step.feeds.end())
        return fail_node(self, id, i,
                         internal_error("missing feed for _Arg index "
                                        + std::to_string(index)));
      complete_node(self, step, i, {f->second});
      return;
    }
    case node_kind::retval:
      // A fetched value may be kept for long: not in a ring's room.
      step.response.outputs.emplace_back(plan.detail<index_info>().index,
                                         inputs.at(0).owned());
      complete_node(self, step, i, {});
      return;
    case node_kind::send:
      return run_send(self, step, i, inputs);
    case node_kind::recv:
      if (auto value = step.rendezvous.recv(plan.cls.rendezvous_key, i)) {
        complete_node(self, step, i, {std::move(*value)});
        return;
      }
      step.waiting.push_back(i);
      ++step.in_flight; // until deliver() resumes it
      return;
    case node_kind::placeholder:
    case node_kind::invalid:
      return fail_node(self, id, i, plan.detail<status>());
    case node_kind::no_op:
      complete_node(self, step, i, {});
      return;
    case node_kind::variable:
    case node_kind::queue:
    case node_kind::reader:
    case node_kind::accumulator:
      return run_resource(self, step, i);
    case node_kind::queue_op:
      return run_queue_op(self, step, i, inputs);
    case node_kind::accumulator_op:
      return run_accumulator_op(self, step, i, inputs);
    case node_kind::reader_op:
      return run_reader_op(self, step, i, inputs);
    case node_kind::apply:
      return run_apply(self, step, i, inputs);
    case node_kind::count_up_to:
    case node_kind::is_initialized:
    case node_kind::assign:
    case node_kind::assign_add:
    case node_kind::assign_sub:
      return run_variable_op(self, step, i, inputs);
    case node_kind::kernel:
      break;
  }
  // A synchronous kernel.
  kernel_context ctx{plan.def, inputs, {}, nullptr, {}};
  auto fn = plan.detail<kernel_info>().fn;
  status result;
  if (plan.cell) {
    std::lock_guard<std::mutex> guard{plan.cell->mtx};
    ctx.rng = &plan.cell->gen;
    ctx.runs = &plan.cell->runs;
    result = run_kernel(fn, ctx);
  } else {
    result = run_kernel(fn, ctx);
  }
  if (!result.ok())
    return fail_node(self, id, i, std::move(result));
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
    fail_node(self, id, i, {e.code(), e.get_status().message()});
  } catch (const std::exception& e) {
    fail_step(self, id, internal_error(e.what()));
  }
}

} // namespace actorflow::executor_detail
