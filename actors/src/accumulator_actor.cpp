// A conditional accumulator as an actor: the core (kernels/
// accumulator_core.hpp) keeps waiting takes as pending attempts; their
// replies are response promises delivered when enough gradients arrived.
// On a replicated ps task its state (the sum so far, applied tags, the
// last takes' results) goes to a variable of its store after each
// operation, and replies wait until the variable holds it
// (durable_state.hpp).

#include <deque>
#include <unordered_map>

#include "actorflow/actors/instrumented.hpp"
#include "durable_writer.hpp"
#include "runtime.hpp"
#include "step_attempts.hpp"

namespace actorflow {

namespace {

struct accumulator_state {
  std::unique_ptr<accumulator_core> core;
  /// Pending attempts by the step that made them, for cancellation.
  step_attempts<accumulator_core::attempt_id> by_step;
  /// Replicated: the replies waiting for the state, the tags applied,
  /// the last takes' results by tag, and why a promoted backup's state
  /// could not be read (every operation fails with it).
  durable_replies replies;
  applied_tags tags;
  std::deque<std::pair<int64_t, tensor>> takes;
  /// Pending takes by tag (replicated): a failed attempt of a step and
  /// its retry may both wait here, and the retry must not wait behind
  /// the gradient the failed attempt took.
  struct take_cell {
    accumulator_core::attempt_id id = 0;
    int64_t tag = 0;
    bool done = false;
    /// Cancelled to be answered with the result another attempt took.
    bool from_cache = false;
  };
  std::unordered_multimap<int64_t, std::shared_ptr<take_cell>> pending_takes;
  status broken;
  static inline const char* name = "actorflow.accumulator";
};

/// How many takes' results a replicated accumulator keeps for retries:
/// the last. An update whose step failed is retried before the next
/// update starts (the chief runs them one after another), even when its
/// tokens went out and gradients of the next step arrived already: only
/// the next take shows that the last one's step is over.
constexpr size_t kept_takes = 1;

using accumulator_self = accumulator_actor::stateful_pointer<accumulator_state>;

using accumulator_promise
  = caf::typed_response_promise<status, std::vector<tensor>>;

void forget_pending(accumulator_state& st,
                    const std::shared_ptr<accumulator_state::take_cell>& cell) {
  auto [first, last] = st.pending_takes.equal_range(cell->tag);
  for (auto i = first; i != last; ++i)
    if (i->second == cell) {
      st.pending_takes.erase(i);
      return;
    }
}

accumulator_image image_of(const accumulator_state& st) {
  accumulator_image x;
  x.core = st.core->snapshot();
  x.tags = st.tags.list();
  x.takes.assign(st.takes.begin(), st.takes.end());
  return x;
}

// Answers `rp` once the state after the operation is held (at once when
// not replicated), with `result` or the error that kept it from being held.
void answer(accumulator_self self, accumulator_promise rp, status s,
            std::vector<tensor> out) {
  self->state.replies.defer([rp, s = std::move(s), out = std::move(out)](
                              const status& err) mutable {
    if (!err.ok() && s.ok())
      rp.deliver(err, std::vector<tensor>{});
    else
      rp.deliver(std::move(s), std::move(out));
  });
}

void commit(accumulator_self self) {
  self->state.replies.commit(
    [self] { return encode_image(image_of(self->state)); });
}

accumulator_actor::behavior_type accumulator(accumulator_self self,
                                             accumulator_options opts,
                                             durable_init durable) {
  auto& st = self->state;
  auto name = opts.name;
  st.core = std::make_unique<accumulator_core>(std::move(opts));
  if (durable.var) {
    if (durable.image.valid()) {
      accumulator_image x;
      st.broken = decode_image(durable.image, "accumulator " + name, x);
      if (st.broken.ok())
        st.broken = st.core->restore(std::move(x.core));
      if (st.broken.ok()) {
        st.tags.assign(x.tags);
        st.takes.assign(x.takes.begin(), x.takes.end());
      }
    }
    st.replies.set_writer(durable_writer(self, durable.var));
  }
  // Freed (container reset, task stop): waiting takes get their answer.
  self->set_exit_handler([self, name](caf::exit_msg& em) {
    auto why = freed_status(em.reason, "accumulator " + name);
    // A container reset says so to what waits (see queue_actor.cpp).
    self->state.core->cancel_all(
      freed_by_reset(em.reason) ? why : status{});
    self->state.by_step.clear();
    self->state.replies.end(why);
    self->quit(em.reason);
  });
  return {
    [self](apply_gradient_atom, const tensor& grad, int64_t local_step,
           const std::string& replica, int64_t tag) -> accumulator_promise {
      auto rp = self->make_response_promise<status, std::vector<tensor>>();
      auto& st = self->state;
      if (!st.broken.ok()) {
        rp.deliver(st.broken, std::vector<tensor>{});
        return rp;
      }
      // A retried step's gradient counts once.
      auto s = st.replies.replicated() && st.tags.seen(tag)
                 ? status{}
                 : st.core->apply(grad, local_step, replica);
      if (s.ok() && st.replies.replicated())
        st.tags.record(tag);
      answer(self, rp, std::move(s), {});
      commit(self);
      return rp;
    },
    [self](take_gradient_atom, int64_t n, int64_t step,
           int64_t tag) -> accumulator_promise {
      auto rp = self->make_response_promise<status, std::vector<tensor>>();
      auto& st = self->state;
      if (!st.broken.ok()) {
        rp.deliver(st.broken, std::vector<tensor>{});
        return rp;
      }
      if (st.replies.replicated() && tag != 0)
        for (auto& [t, value] : st.takes)
          if (t == tag) {
            // A retried update gets the gradient the first one took.
            answer(self, rp, status{}, {value});
            commit(self);
            return rp;
          }
      auto cell = std::make_shared<accumulator_state::take_cell>();
      cell->tag = tag;
      if (st.replies.replicated() && tag != 0)
        st.pending_takes.emplace(tag, cell);
      cell->id = st.core->take(
        static_cast<int32_t>(n),
        [self, rp, step, cell](status s, tensor value) mutable {
          auto& st = self->state;
          cell->done = true;
          st.by_step.forget(step, cell->id);
          forget_pending(st, cell);
          auto tag = cell->tag;
          if (!s.ok() && cell->from_cache) {
            // Another attempt of its step took: the same gradient.
            for (auto& [t, v] : st.takes)
              if (t == tag) {
                s = status{};
                value = v;
              }
          } else if (s.ok() && st.replies.replicated() && tag != 0) {
            st.takes.emplace_back(tag, value);
            if (st.takes.size() > kept_takes)
              st.takes.pop_front();
            // An attempt of the same step waiting behind this one (a
            // retry that came before the failed attempt was withdrawn)
            // gets this gradient instead of waiting for the next update's.
            std::vector<std::shared_ptr<accumulator_state::take_cell>> same;
            auto [first, last] = st.pending_takes.equal_range(tag);
            for (auto i = first; i != last; ++i)
              same.push_back(i->second);
            for (auto& other : same) {
              other->from_cache = true;
              st.core->cancel(other->id);
            }
          }
          std::vector<tensor> out;
          if (s.ok())
            out.push_back(std::move(value));
          answer(self, rp, std::move(s), std::move(out));
        });
      if (!cell->done)
        st.by_step.add(step, cell->id);
      commit(self);
      return rp;
    },
    [self](num_accumulated_atom) {
      auto n = self->state.core->num_accumulated();
      return std::make_tuple(status{},
                             std::vector<tensor>{tensor::scalar(n)});
    },
    [self](accumulator_replicas_atom) {
      // AccumulatorReplicas' outputs: who sent, their last local steps,
      // seconds since, the global step, the number accumulated.
      auto& core = *self->state.core;
      auto now = accumulator_core::clock::now();
      std::vector<std::string> names;
      std::vector<int64_t> steps;
      std::vector<double> idle;
      for (auto& r : core.replicas()) {
        names.push_back(r.name);
        steps.push_back(r.last_step);
        idle.push_back(std::chrono::duration<double>(now - r.last_time)
                         .count());
      }
      std::vector<tensor> out;
      out.push_back(tensor::vec(std::move(names)));
      out.push_back(tensor::vec(std::move(steps)));
      out.push_back(tensor::vec(std::move(idle)));
      out.push_back(tensor::scalar(core.global_step()));
      out.push_back(tensor::scalar(core.num_accumulated()));
      return std::make_tuple(status{}, std::move(out));
    },
    [self](set_global_step_atom, int64_t global_step) -> accumulator_promise {
      auto rp = self->make_response_promise<status, std::vector<tensor>>();
      if (!self->state.broken.ok()) {
        rp.deliver(self->state.broken, std::vector<tensor>{});
        return rp;
      }
      self->state.core->set_global_step(global_step);
      answer(self, rp, status{}, {});
      commit(self);
      return rp;
    },
    [self](set_num_required_atom, int64_t n) -> accumulator_promise {
      auto rp = self->make_response_promise<status, std::vector<tensor>>();
      // Serves waiting takes that now have enough: their state is
      // written before they are answered.
      auto err = n > INT32_MAX
                   ? invalid_argument("Argument num_required is too large: "
                                      + std::to_string(n))
                   : self->state.core->set_num_required(
                     static_cast<int32_t>(n));
      answer(self, rp, std::move(err), {});
      commit(self);
      return rp;
    },
    [self](cancel_step_atom, int64_t step) {
      for (auto id : self->state.by_step.take(step))
        self->state.core->cancel(id);
      // The cancellations' replies, and those of takes served since the
      // one in front went.
      commit(self);
    },
  };
}

} // namespace

accumulator_actor spawn_accumulator(caf::actor_system& sys,
                                    accumulator_options opts,
                                    monitoring::identity who,
                                    durable_init durable) {
  who.kind = monitoring::actor_kind::accumulator;
  return spawn_instrumented(sys, std::move(who), accumulator,
                            std::move(opts), std::move(durable));
}

accumulator_options accumulator_options_of(const node_def& node,
                                           std::string name) {
  accumulator_options opts;
  opts.name = std::move(name);
  opts.type = node.attr_or<dtype>("dtype", dtype::float32);
  opts.shape = node.attr_or<tensor_shape>("shape", tensor_shape::unknown());
  opts.reduction_type = node.attr_or<std::string>("reduction_type", "MEAN");
  return opts;
}

} // namespace actorflow
