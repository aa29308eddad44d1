// A queue as an actor: the queue core (kernels/queue_core.hpp) keeps
// waiting operations as pending attempts; their replies are response
// promises delivered when the core completes them. What a dequeue hands
// over stays leased to its step until the step commits (its master has
// the elements) or dies (back to the head): an element is never lost to
// a step nobody waits for.

#include <unordered_map>

#include "actorflow/actors/instrumented.hpp"
#include "runtime.hpp"
#include "step_attempts.hpp"

namespace actorflow {

namespace {

struct queue_state {
  std::unique_ptr<queue_core> core;
  /// Its monitoring record (nullptr with monitoring off).
  monitoring::actor_record* record = nullptr;
  /// Pending attempts by the step that made them, for cancellation.
  step_attempts<queue_core::attempt_id> by_step;
  /// What dequeues handed to each step, in order (batched: the rows of a
  /// dequeue_many/up_to), held until the step commits or dies.
  std::unordered_map<int64_t, std::vector<std::pair<queue_core::tuple, bool>>>
    leases;
};

using queue_self = queue_actor::stateful_pointer<queue_state>;

/// What an operation keeps leased to its step when it completes.
enum class lease { none, element, batch };

using queue_promise = caf::typed_response_promise<status, std::vector<tensor>>;

queue_actor::behavior_type queue(queue_self self, queue_options opts) {
  self->state.core = std::make_unique<queue_core>(std::move(opts));
  self->state.record = record_of(self);
  if (auto* rec = self->state.record)
    rec->gauges[1].store(self->state.core->options().capacity,
                         std::memory_order_relaxed);
  // After every operation: the monitor's size, closed and blocked
  // enqueues and dequeues.
  auto observed = [self] {
    auto* rec = self->state.record;
    if (rec == nullptr)
      return;
    auto& core = *self->state.core;
    constexpr auto relaxed = std::memory_order_relaxed;
    rec->gauges[0].store(core.size(), relaxed);
    rec->gauges[2].store(core.is_closed() ? 1 : 0, relaxed);
    rec->gauges[3].store(static_cast<int64_t>(core.pending_enqueues()),
                         relaxed);
    rec->gauges[4].store(static_cast<int64_t>(core.pending_dequeues()),
                         relaxed);
  };
  // A queue that goes (container reset, task stop) first cancels what
  // waits on it, so every requester gets its answer.
  self->set_exit_handler([self](caf::exit_msg& em) {
    self->state.core->cancel_all();
    self->state.by_step.clear();
    self->quit(em.reason);
  });
  // An operation that may wait: `op(done)` starts it on the core, which
  // calls `done` when it completes (at once, or when other operations let
  // it); until then it is cancelled with `step`.
  // A dequeue keeps what it hands over (`leased`) leased to its step.
  auto start = [self, observed](int64_t step, auto op,
                                lease leased = lease::none) -> queue_promise {
    auto rp = self->make_response_promise<status, std::vector<tensor>>();
    // Filled once the core returns the id (a callback that runs during
    // the call itself has nothing recorded to forget).
    auto id_cell = std::make_shared<queue_core::attempt_id>(0);
    auto done = [self, rp, step, id_cell,
                 leased](status st, queue_core::tuple result) mutable {
      self->state.by_step.forget(step, *id_cell);
      // The values are shared, not copied (tensors are buffers by
      // reference).
      if (leased != lease::none && st.ok() && !result.empty())
        self->state.leases[step].emplace_back(result,
                                              leased == lease::batch);
      rp.deliver(std::move(st), std::move(result));
    };
    auto id = op(*self->state.core, std::move(done));
    *id_cell = id;
    if (rp.pending())
      self->state.by_step.add(step, id);
    observed();
    return rp;
  };
  // An element may wait in the queue for long: not in a ring's room.
  auto owned = [](std::vector<tensor>& values) {
    for (auto& v : values)
      v = std::move(v).owned();
    return std::move(values);
  };
  auto answer = [observed](tensor value) {
    observed();
    return std::make_tuple(status{}, std::vector<tensor>{std::move(value)});
  };
  return {
    [start, owned](enqueue_atom, std::vector<tensor>& values, int64_t step) {
      return start(step, [&](queue_core& core, auto done) {
        return core.enqueue(owned(values), std::move(done));
      });
    },
    [start, owned](enqueue_many_atom, std::vector<tensor>& values,
                   int64_t step) {
      return start(step, [&](queue_core& core, auto done) {
        return core.enqueue_many(owned(values), std::move(done));
      });
    },
    [start](dequeue_atom, int64_t step) {
      return start(
        step,
        [](queue_core& core, auto done) {
          return core.dequeue(std::move(done));
        },
        lease::element);
    },
    [start](dequeue_many_atom, int64_t n, int64_t step) {
      return start(
        step,
        [n](queue_core& core, auto done) {
          return core.dequeue_many(n, std::move(done));
        },
        lease::batch);
    },
    [start](dequeue_up_to_atom, int64_t n, int64_t step) {
      return start(
        step,
        [n](queue_core& core, auto done) {
          return core.dequeue_up_to(n, std::move(done));
        },
        lease::batch);
    },
    [start](close_queue_atom, bool cancel_pending, int64_t step) {
      return start(step, [cancel_pending](queue_core& core, auto done) {
        return core.close(cancel_pending, std::move(done));
      });
    },
    [self, answer](queue_size_atom) {
      return answer(tensor::scalar(self->state.core->size()));
    },
    [self, answer](queue_closed_atom) {
      return answer(tensor::scalar(self->state.core->is_closed()));
    },
    [self](commit_step_atom, int64_t step) {
      self->state.leases.erase(step);
    },
    [self, observed](cancel_step_atom, int64_t step) {
      auto& st = self->state;
      int64_t withdrawn = 0;
      int64_t returned = 0;
      for (auto id : st.by_step.take(step)) {
        st.core->cancel(id);
        ++withdrawn;
      }
      // What the step took goes back to the head, in the order it was
      // taken (the last first, so that the first ends in front).
      if (auto i = st.leases.find(step); i != st.leases.end()) {
        auto taken = std::move(i->second);
        st.leases.erase(i);
        for (auto t = taken.rbegin(); t != taken.rend(); ++t) {
          returned += t->second && !t->first.empty()
                        && t->first[0].shape().rank() > 0
                        ? t->first[0].shape().dim(0)
                        : 1;
          st.core->put_back(std::move(t->first), t->second);
        }
      }
      if (auto* rec = st.record) {
        rec->gauges[5].fetch_add(withdrawn, std::memory_order_relaxed);
        rec->gauges[6].fetch_add(returned, std::memory_order_relaxed);
      }
      observed();
    },
  };
}

} // namespace

queue_actor spawn_queue(caf::actor_system& sys, queue_options opts,
                        monitoring::identity who) {
  who.kind = monitoring::actor_kind::queue;
  return spawn_instrumented(sys, std::move(who), queue, std::move(opts));
}

queue_options queue_options_of(const node_def& node, std::string name) {
  queue_options opts;
  if (node.op == "PaddingFIFOQueueV2")
    opts.kind = queue_kind::padding_fifo;
  else if (node.op == "RandomShuffleQueueV2")
    opts.kind = queue_kind::random_shuffle;
  opts.name = std::move(name);
  opts.capacity = static_cast<int32_t>(node.attr_or<int64_t>("capacity", -1));
  opts.types = node.attr_or<std::vector<dtype>>("component_types", {});
  opts.shapes = node.attr_or<std::vector<tensor_shape>>("shapes", {});
  opts.min_after_dequeue = static_cast<int32_t>(
    node.attr_or<int64_t>("min_after_dequeue", 0));
  opts.seed = node.attr_or<int64_t>("seed", 0);
  opts.seed2 = node.attr_or<int64_t>("seed2", 0);
  return opts;
}

} // namespace actorflow
