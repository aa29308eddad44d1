// A conditional accumulator as an actor: the core (kernels/
// accumulator_core.hpp) keeps waiting takes as pending attempts; their
// replies are response promises delivered when enough gradients arrived.

#include <unordered_map>

#include "actorflow/actors/instrumented.hpp"
#include "runtime.hpp"
#include "step_attempts.hpp"

namespace actorflow {

namespace {

struct accumulator_state {
  std::unique_ptr<accumulator_core> core;
  /// Pending attempts by the step that made them, for cancellation.
  step_attempts<accumulator_core::attempt_id> by_step;
  static inline const char* name = "actorflow.accumulator";
};

using accumulator_self = accumulator_actor::stateful_pointer<accumulator_state>;

using accumulator_promise
  = caf::typed_response_promise<status, std::vector<tensor>>;

accumulator_actor::behavior_type accumulator(accumulator_self self,
                                             accumulator_options opts) {
  self->state.core = std::make_unique<accumulator_core>(std::move(opts));
  // Freed (container reset, task stop): waiting takes get their answer.
  self->set_exit_handler([self](caf::exit_msg& em) {
    self->state.core->cancel_all();
    self->state.by_step.clear();
    self->quit(em.reason);
  });
  return {
    [self](apply_gradient_atom, const tensor& grad, int64_t local_step,
           const std::string& replica) {
      return std::make_tuple(self->state.core->apply(grad, local_step,
                                                     replica),
                             std::vector<tensor>{});
    },
    [self](take_gradient_atom, int64_t n,
           int64_t step) -> accumulator_promise {
      auto rp = self->make_response_promise<status, std::vector<tensor>>();
      auto id_cell = std::make_shared<accumulator_core::attempt_id>(0);
      auto id = self->state.core->take(
        static_cast<int32_t>(n),
        [self, rp, step, id_cell](status st, tensor value) mutable {
          self->state.by_step.forget(step, *id_cell);
          std::vector<tensor> out;
          if (st.ok())
            out.push_back(std::move(value));
          rp.deliver(std::move(st), std::move(out));
        });
      *id_cell = id;
      if (rp.pending())
        self->state.by_step.add(step, id);
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
    [self](set_global_step_atom, int64_t global_step) {
      self->state.core->set_global_step(global_step);
      return std::make_tuple(status{}, std::vector<tensor>{});
    },
    [self](set_num_required_atom, int64_t n) {
      auto err = n > INT32_MAX
                   ? invalid_argument("Argument num_required is too large: "
                                      + std::to_string(n))
                   : self->state.core->set_num_required(
                     static_cast<int32_t>(n));
      return std::make_tuple(std::move(err), std::vector<tensor>{});
    },
    [self](cancel_step_atom, int64_t step) {
      for (auto id : self->state.by_step.take(step))
        self->state.core->cancel(id);
    },
  };
}

} // namespace

accumulator_actor spawn_accumulator(caf::actor_system& sys,
                                    accumulator_options opts,
                                    monitoring::identity who) {
  who.kind = monitoring::actor_kind::accumulator;
  return spawn_instrumented(sys, std::move(who), accumulator,
                            std::move(opts));
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
