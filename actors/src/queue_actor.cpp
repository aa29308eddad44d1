// A queue as an actor: the queue core (kernels/queue_core.hpp) keeps
// waiting operations as pending attempts; their replies are response
// promises delivered when the core completes them. What a dequeue hands
// over stays leased to its step until the step commits (its master has
// the elements) or dies (back to the head): an element is never lost to
// a step nobody waits for. On a replicated ps task the queue's state
// (elements, leases, applied tags) goes to a variable of its store after
// each operation, and replies wait until the variable holds it
// (durable_state.hpp).

#include <algorithm>
#include <unordered_map>

#include "actorflow/actors/instrumented.hpp"
#include "durable_writer.hpp"
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
  /// What dequeues handed to a step: the tuple (batched: the rows of a
  /// dequeue_many/up_to) and when, across steps, it was taken.
  struct leased {
    uint64_t order = 0;
    queue_core::tuple values;
    bool batched = false;
  };
  /// Each step's, in order, held until the step commits or dies.
  std::unordered_map<int64_t, std::vector<leased>> leases;
  uint64_t next_lease = 0;
  /// Replicated: the replies waiting for the state, the tags applied, and
  /// why the state a promoted backup held could not be read (every
  /// operation fails with it).
  durable_replies replies;
  applied_tags tags;
  status broken;
};

using queue_self = queue_actor::stateful_pointer<queue_state>;

/// What an operation keeps leased to its step when it completes.
enum class lease { none, element, batch };

using queue_promise = caf::typed_response_promise<status, std::vector<tensor>>;

// What the queue's variable holds: the leased elements first, in the
// order they were taken, as they go back to the head if their steps die.
queue_image image_of(const queue_state& st) {
  queue_image x;
  x.contents = st.core->contents();
  x.closed = st.core->is_closed();
  std::vector<const queue_state::leased*> all;
  for (const auto& [step, taken] : st.leases)
    for (const auto& l : taken)
      all.push_back(&l);
  std::sort(all.begin(), all.end(),
            [](auto* a, auto* b) { return a->order < b->order; });
  for (auto* l : all)
    x.leased.emplace_back(l->values, l->batched);
  x.tags = st.tags.list();
  return x;
}

// A promoted backup's queue: the state its variable held, the leased
// elements back at the head (their steps died with the old primary).
void restore(queue_self self, const durable_init& durable) {
  auto& st = self->state;
  if (!durable.image.valid())
    return;
  queue_image x;
  auto what = std::string{to_string(st.core->options().kind)} + " '"
              + st.core->options().name + "'";
  st.broken = decode_image(durable.image, what, x);
  if (st.broken.ok())
    st.broken = st.core->restore_contents(std::move(x.contents), x.closed);
  if (!st.broken.ok())
    return;
  for (auto l = x.leased.rbegin(); l != x.leased.rend(); ++l)
    st.core->put_back(std::move(l->first), l->second);
  st.tags.assign(x.tags);
}

queue_actor::behavior_type queue(queue_self self, queue_options opts,
                                 durable_init durable) {
  self->state.core = std::make_unique<queue_core>(std::move(opts));
  self->state.record = record_of(self);
  if (durable.var) {
    restore(self, durable);
    self->state.replies.set_writer(durable_writer(self, durable.var));
  }
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
    auto& opts = self->state.core->options();
    auto why = freed_status(em.reason, std::string{to_string(opts.kind)}
                                         + " '" + opts.name + "'");
    // A container reset says so to what waits (Aborted); otherwise the
    // waiting operations are cancelled as TF's are.
    self->state.core->cancel_all(
      freed_by_reset(em.reason) ? why : status{});
    self->state.by_step.clear();
    self->state.replies.end(why);
    self->quit(em.reason);
  });
  // After an operation: its replies (and those it completed) go once the
  // state after it is held.
  auto commit = [self](bool changed = false) {
    self->state.replies.commit(
      [self] { return encode_image(image_of(self->state)); }, changed);
  };
  // An operation that may wait: `op(done)` starts it on the core, which
  // calls `done` when it completes (at once, or when other operations let
  // it); until then it is cancelled with `step`.
  // A dequeue keeps what it hands over (`leased`) leased to its step. A
  // replicated queue applies an operation with a tag it has applied
  // before (a step retried after a failover) once.
  auto start = [self, observed, commit](int64_t step, int64_t tag, auto op,
                                        lease leased
                                        = lease::none) -> queue_promise {
    auto rp = self->make_response_promise<status, std::vector<tensor>>();
    auto& st = self->state;
    if (!st.broken.ok()) {
      rp.deliver(st.broken, std::vector<tensor>{});
      return rp;
    }
    if (st.replies.replicated() && st.tags.seen(tag)) {
      st.replies.defer([rp](const status& err) mutable {
        rp.deliver(err, std::vector<tensor>{});
      });
      commit();
      return rp;
    }
    // Filled once the core returns the id (a callback that runs during
    // the call itself has nothing recorded to forget).
    struct attempt_cell {
      queue_core::attempt_id id = 0;
      bool done = false;
    };
    auto cell = std::make_shared<attempt_cell>();
    auto done = [self, rp, step, tag, cell,
                 leased](status s, queue_core::tuple result) mutable {
      auto& st = self->state;
      cell->done = true;
      st.by_step.forget(step, cell->id);
      // The values are shared, not copied (tensors are buffers by
      // reference).
      if (leased != lease::none && s.ok() && !result.empty())
        st.leases[step].push_back(
          {st.next_lease++, result, leased == lease::batch});
      if (s.ok() && st.replies.replicated())
        st.tags.record(tag);
      st.replies.defer([rp, s = std::move(s), result = std::move(result)](
                         const status& err) mutable {
        if (!err.ok() && s.ok())
          rp.deliver(err, std::vector<tensor>{});
        else
          rp.deliver(std::move(s), std::move(result));
      });
    };
    cell->id = op(*st.core, std::move(done));
    if (!cell->done)
      st.by_step.add(step, cell->id);
    commit();
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
    [start, owned](enqueue_atom, std::vector<tensor>& values, int64_t step,
                   int64_t tag) {
      return start(step, tag, [&](queue_core& core, auto done) {
        return core.enqueue(owned(values), std::move(done));
      });
    },
    [start, owned](enqueue_many_atom, std::vector<tensor>& values,
                   int64_t step, int64_t tag) {
      return start(step, tag, [&](queue_core& core, auto done) {
        return core.enqueue_many(owned(values), std::move(done));
      });
    },
    [start](dequeue_atom, int64_t step) {
      return start(
        step, 0,
        [](queue_core& core, auto done) {
          return core.dequeue(std::move(done));
        },
        lease::element);
    },
    [start](dequeue_many_atom, int64_t n, int64_t step) {
      return start(
        step, 0,
        [n](queue_core& core, auto done) {
          return core.dequeue_many(n, std::move(done));
        },
        lease::batch);
    },
    [start](dequeue_up_to_atom, int64_t n, int64_t step) {
      return start(
        step, 0,
        [n](queue_core& core, auto done) {
          return core.dequeue_up_to(n, std::move(done));
        },
        lease::batch);
    },
    [start](close_queue_atom, bool cancel_pending, int64_t step,
            int64_t tag) {
      return start(step, tag, [cancel_pending](queue_core& core, auto done) {
        return core.close(cancel_pending, std::move(done));
      });
    },
    [self, answer](queue_size_atom) {
      return answer(tensor::scalar(self->state.core->size()));
    },
    [self, answer](queue_closed_atom) {
      return answer(tensor::scalar(self->state.core->is_closed()));
    },
    [self, commit](commit_step_atom, int64_t step) {
      // Replicated, the backup learns that the elements left for good.
      if (self->state.leases.erase(step) > 0)
        commit(true);
    },
    [self, observed, commit](cancel_step_atom, int64_t step) {
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
          returned += t->batched && !t->values.empty()
                        && t->values[0].shape().rank() > 0
                        ? t->values[0].shape().dim(0)
                        : 1;
          st.core->put_back(std::move(t->values), t->batched);
        }
      }
      if (auto* rec = st.record) {
        rec->gauges[5].fetch_add(withdrawn, std::memory_order_relaxed);
        rec->gauges[6].fetch_add(returned, std::memory_order_relaxed);
      }
      commit(returned > 0);
      observed();
    },
  };
}

} // namespace

queue_actor spawn_queue(caf::actor_system& sys, queue_options opts,
                        monitoring::identity who, durable_init durable) {
  who.kind = monitoring::actor_kind::queue;
  return spawn_instrumented(sys, std::move(who), queue, std::move(opts),
                            std::move(durable));
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
