#pragma once

// Private to actors/: the partition executor's state and what its files
// share. executor.cpp holds the actor and a step's life (start, the ready
// stack, the answer), executor_nodes.cpp what each kind of node does when
// it runs (its kind comes from node_class.hpp, decided at registration),
// executor_recv.cpp the tensors that arrive from other partitions.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/all.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "node_class.hpp"
#include "runtime.hpp"
#include "step_rendezvous.hpp"
#include "actorflow/transport/tensor_channel.hpp"

namespace actorflow::executor_detail {

/// Tensors larger than this cross the wire in chunks of this size.
constexpr uint64_t chunk_size = uint64_t{1} << 20;

/// The largest value for a fetch-only partition that rides in the
/// sender's reply (run_graph_request::sink_devices) when the tensor
/// channel reaches that partition: a 1 MiB fetch took 1 700 MB/s in the
/// reply and 2 200 over the channel, a 256 KiB one 1 100 and 900.
constexpr uint64_t held_max_with_channel = uint64_t{256} << 10;

struct node_plan {
  node_def def;
  /// What this node is and needs, decided at registration (node_class.hpp).
  node_class cls;
  /// Its name's hash, a part of its variable writes' tags (write_tag).
  uint64_t name_hash = 0;
  /// Data inputs as (producer, output index).
  std::vector<std::pair<int, int>> inputs;
  /// Consumers, one entry per edge (data or control).
  std::vector<int> out_edges;
  int num_deps = 0;
  /// Stateful kernels (random ops, Print) keep their state across steps
  /// and plans of a session, as TF's kernels do.
  std::shared_ptr<kernel_cell> cell;
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
  /// Inputs of other nodes that take one of this node's outputs as a value.
  /// The last of them moves its input out of the step, as TF's executor
  /// clears an input entry once its consumer ran: a variable's read is not
  /// kept alive until the step ends (which made its next update copy the
  /// whole value) and a step's peak memory is its live tensors.
  int value_uses = 0;

  /// A variable node, whose value other consumers read.
  bool variable() const noexcept {
    return cls.kind == node_kind::variable;
  }
  /// A kernel that takes long (a GEMM or convolution): readied after its
  /// cheap siblings, so that they run first (see complete_node).
  bool heavy() const noexcept {
    return cls.heavy;
  }
  template <class T>
  const T& detail() const {
    return std::get<T>(cls.detail);
  }
};

struct step_state {
  int64_t id = 0;
  /// Its identity across retries (run_graph_request::tag): with a node's
  /// name, the tag of the node's variable writes.
  int64_t tag = 0;
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
  /// Where its Recvs and the tensors sent to them meet.
  step_rendezvous rendezvous;
  run_graph_response response;
  /// Index into response.node_stats per node (-1 = not traced).
  std::vector<int> stat_index;
  /// Queues and readers with an operation of this step pending, to cancel
  /// on abort.
  std::vector<queue_actor> queues;
  /// Of those, the queues its dequeues took elements from (leased to the
  /// step until its master commits it).
  std::vector<queue_actor> taken_from;
  std::vector<reader_actor> readers;
  std::vector<accumulator_actor> accumulators;
  /// Nodes waiting on something outside this executor (a queue, reader or
  /// accumulator operation, a _Recv), in the order they started: what a
  /// step that times out names (waiting_for).
  std::vector<int> waiting;
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
  /// The master that registered this partition (executor_options::master).
  caf::actor_addr owner;
  /// This executor's mark in the process's stall_watch.
  uint64_t stall_seen = 0;
  tensor_channel::route reply_route;
  int64_t part = 0;
  /// The nodes without inputs, in the order a step pushes them on its
  /// ready stack (see start_order).
  std::vector<int> roots;
  std::string device;
  /// The task whose partition this is ("/job:ps/replica:0/task:0"): whose
  /// variables it uses, also when this task serves them for it after a
  /// failover.
  std::string home;
  std::string default_container;
  /// The session this partition belongs to: private queues are per
  /// session, as TF's per-session kernels.
  std::string session;
  /// Its task's worker (resource lookups).
  worker_actor worker;
  std::shared_ptr<task_counters> counters;
  std::unordered_map<int64_t, step_state> steps;
  /// Tensors for steps that have not started here yet.
  std::unordered_map<int64_t, std::unordered_map<std::string, tensor>> early;
  /// Where chunks of large tensors for this system's steps land (the
  /// middleman's deserializer fills it; a finished step's are forgotten).
  std::shared_ptr<chunk_landing> landing;
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
  /// Steps that succeeded here with elements leased in these queues,
  /// until their master commits them (commit_step) or they die after all
  /// (abort_step, the master lost): then the elements go back.
  std::unordered_map<int64_t, std::vector<queue_actor>> leased;
  /// Steps that ended here: late tensors for them are dropped.
  std::unordered_set<int64_t> finished;
  std::deque<int64_t> finished_order;
  static inline const char* name = "actorflow.executor";
};

/// A step's master aborted it at its deadline (`why`, DeadlineExceeded):
/// `why` naming what the step waits for here, a queue, reader or
/// accumulator operation (after waiting_for_marker) or else a value from
/// another device (after waiting_on_marker), or `why` itself when it waits
/// for nothing outside this executor.
status waiting_for(const executor_state& st, const step_state& step,
                   const status& why);


using executor_self = executor_actor::stateful_pointer<executor_state>;

// -- shared by the executor's files ------------------------------------------

/// Step `step` ended here: tensors still arriving for it are dropped.
void mark_finished(executor_state& st, int64_t step);

/// Fails step `id` with `err` (its pending queue, reader and accumulator
/// operations are cancelled) and answers the master.
void fail_step(executor_self self, int64_t id, status err);

/// fail_step, naming node `i` in the message unless it does already.
void fail_node(executor_self self, int64_t id, int i, status err);

/// Node `i` of `step` finished with `outputs`: readies its consumers.
void complete_node(executor_self self, step_state& step, int i,
                   std::vector<tensor> outputs);

/// Continues step `id` after an asynchronous part of node `i` finished
/// (fails the step, naming the node, unless `st` is OK).
void resume(executor_self self, int64_t id, int i, status st,
            std::vector<tensor> outputs);

/// Runs the ready nodes of step `id`; answers when it is done.
void drive(executor_self self, int64_t id);

/// Runs node `i` with its inputs (refs already read) by its kind; a
/// malformed node fails the step, never the executor.
void compute(executor_self self, step_state& step, int i,
             std::vector<tensor> inputs);

/// A tensor for `key` in step `id` arrived whole.
void deliver(executor_self self, int64_t id, std::string key, tensor value);

/// One chunk of a tensor sent in chunks arrived.
void receive_chunk(executor_self self, wire_chunk& wire);

/// The tag of node `i`'s variable writes in `step`: the same in every
/// attempt of the step, different for each node.
int64_t write_tag(const executor_state& st, const step_state& step, int i);

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

} // namespace actorflow::executor_detail
