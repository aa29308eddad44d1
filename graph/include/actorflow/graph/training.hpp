#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/accumulator_ops.hpp"
#include "actorflow/graph/graph.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/queue_ops.hpp"

/// Optimizers, as TensorFlow 1.x's `tf.train` (python/training/optimizer.py
/// and its subclasses):
///
/// ~~~
/// auto step = create_global_step();
/// adam_optimizer opt{0.001};
/// auto train_op = opt.minimize(loss, &step);   // "Adam"
/// ~~~
///
/// Each update is an Apply* node colocated with its variable (on the ps
/// task under replica_device_setter): the worker computes the gradient and
/// sends it, and the variable's actor applies it atomically (a slot such as
/// Momentum's accumulator is its own variable, updated first in its own
/// actor). Slots are variables "<var>/<optimizer name>" (Adam: "<var>/Adam"
/// and "<var>/Adam_1"), not trainable, in the global variables, so
/// global_variables_initializer and checkpoints cover them.
namespace actorflow {

inline constexpr const char* global_step_key = "global_step";

/// tf.train.create_global_step: an int64 scalar variable "global_step"
/// (initial 0, not trainable) in the default graph's global variables and
/// its "global_step" collection. InvalidArgument if one exists already.
variable create_global_step();
/// The default graph's global step; an invalid variable if none.
variable get_global_step();
variable get_or_create_global_step();

using grads_and_vars = std::vector<std::pair<output, variable>>;

/// A hyperparameter as TF's optimizers take it: a number, or a scalar
/// float tensor computed each step (e.g. exponential_decay's rate).
class hyperparameter {
public:
  hyperparameter(double value) : value_(value) {
  }
  hyperparameter(output tensor) : tensor_(std::move(tensor)) {
  }
  /// The tensor, or an empty output for a number.
  const output& tensor() const noexcept {
    return tensor_;
  }
  double value() const noexcept {
    return value_;
  }

private:
  double value_ = 0;
  output tensor_;
};

/// tf.train.exponential_decay: learning_rate * decay_rate ^ (global_step /
/// decay_steps), the exponent floored when `staircase`; a float32 scalar
/// under name scope `name`. Throws op_error (InvalidArgument) for an
/// invalid global step or decay_steps <= 0.
output exponential_decay(double learning_rate, const variable& global_step,
                         int64_t decay_steps, double decay_rate,
                         bool staircase = false,
                         const std::string& name = "ExponentialDecay");

/// TF's Optimizer: compute_gradients, apply_gradients, minimize.
class optimizer {
public:
  virtual ~optimizer() = default;

  /// d loss / d var for each of `var_list` (default: the trainable
  /// variables of loss's graph); an invalid gradient where the loss does
  /// not depend on the variable. InvalidArgument for a non-float loss or
  /// an empty variable list.
  grads_and_vars compute_gradients(const output& loss,
                                   std::vector<variable> var_list = {});

  /// One update per variable with a gradient, grouped into one op named
  /// `name` (default: the optimizer's name). With `global_step`, the op
  /// increments it once every update ran. InvalidArgument: no variable
  /// has a gradient ("No gradients provided for any variable"), a
  /// gradient of another dtype than its variable.
  operation apply_gradients(const grads_and_vars& gv,
                            const variable* global_step = nullptr,
                            const std::string& name = "");

  /// compute_gradients then apply_gradients.
  operation minimize(const output& loss, const variable* global_step = nullptr,
                     std::vector<variable> var_list = {},
                     const std::string& name = "");

  /// The slot `slot` ("Momentum", "m", "v", "accumulator") of `var`, or an
  /// invalid variable.
  variable get_slot(const variable& var, const std::string& slot) const;

  const std::string& name() const noexcept {
    return name_;
  }

protected:
  explicit optimizer(std::string name) : name_(std::move(name)) {
  }
  /// Creates the slots of `vars` (before the update scope opens).
  virtual void create_slots(const std::vector<variable>& vars);
  /// The update of one variable, in scope "<name>/update_<var>/" and
  /// colocated with it.
  virtual operation apply_dense(const output& grad, const variable& var) = 0;
  /// Groups the updates (Adam also advances its beta powers).
  virtual operation finish(const std::vector<operation>& updates,
                           const std::string& name);
  /// A slot variable of var's shape and dtype filled with `value`,
  /// colocated with `var`, named "<var>/<slot_name>".
  variable make_slot(const variable& var, const std::string& slot,
                     const std::string& slot_name, double value);
  /// A scalar Const of `var`'s dtype, named in the current scope.
  output hyper(const variable& var, double value, const std::string& name);
  /// `value`'s tensor cast to var's dtype, or a Const as above.
  output hyper(const variable& var, const hyperparameter& value,
               const std::string& name);

  std::string name_;
  std::map<std::string, std::map<std::string, variable>> slots_;
};

/// tf.train.GradientDescentOptimizer: var -= lr * grad.
class gradient_descent_optimizer : public optimizer {
public:
  explicit gradient_descent_optimizer(hyperparameter learning_rate,
                                      const std::string& name
                                      = "GradientDescent");

protected:
  operation apply_dense(const output& grad, const variable& var) override;

private:
  hyperparameter lr_;
};

/// tf.train.MomentumOptimizer: accum = accum * momentum + grad; var -= lr *
/// accum (Nesterov: var -= lr * (grad + momentum * accum)).
class momentum_optimizer : public optimizer {
public:
  momentum_optimizer(hyperparameter learning_rate, double momentum,
                     bool use_nesterov = false,
                     const std::string& name = "Momentum");

protected:
  void create_slots(const std::vector<variable>& vars) override;
  operation apply_dense(const output& grad, const variable& var) override;

private:
  hyperparameter lr_;
  double momentum_;
  bool nesterov_;
};

/// tf.train.AdagradOptimizer: accum += grad^2; var -= lr * grad /
/// sqrt(accum). InvalidArgument for initial_accumulator_value <= 0.
class adagrad_optimizer : public optimizer {
public:
  explicit adagrad_optimizer(hyperparameter learning_rate,
                             double initial_accumulator_value = 0.1,
                             const std::string& name = "Adagrad");

protected:
  void create_slots(const std::vector<variable>& vars) override;
  operation apply_dense(const output& grad, const variable& var) override;

private:
  hyperparameter lr_;
  double initial_;
};

/// tf.train.AdamOptimizer, with TF's update (lr_t = lr * sqrt(1 -
/// beta2^t) / (1 - beta1^t); var -= lr_t * m / (sqrt(v) + epsilon)) and
/// its non-slot variables "beta1_power", "beta2_power" colocated with the
/// first variable.
class adam_optimizer : public optimizer {
public:
  explicit adam_optimizer(hyperparameter learning_rate = 0.001,
                          double beta1 = 0.9,
                          double beta2 = 0.999, double epsilon = 1e-8,
                          const std::string& name = "Adam");

protected:
  void create_slots(const std::vector<variable>& vars) override;
  operation apply_dense(const output& grad, const variable& var) override;
  operation finish(const std::vector<operation>& updates,
                   const std::string& name) override;

private:
  hyperparameter lr_;
  double beta1_;
  double beta2_;
  double epsilon_;
  variable beta1_power_;
  variable beta2_power_;
};

/// tf.train.SyncReplicasOptimizer: synchronous between-graph replication.
/// Each worker builds the same graph and calls apply_gradients (or
/// minimize); its train op pushes every gradient into the variable's
/// ConditionalAccumulator on the ps ("<var>/grad_accum"), tagged with the
/// worker's local step, then waits for a token from the shared queue
/// "sync_token_q" and takes it as its next local step. The chief also runs
/// `chief_queue_runner()` in a thread: its sync op takes the mean of
/// `replicas_to_aggregate` gradients per variable (stale ones were
/// dropped), applies them with the wrapped optimizer, increments the
/// global step and enqueues one token per replica.
///
/// Start-up, as TF's SyncReplicasOptimizer hook does: every worker runs
/// `local_step_init_op()` after the variables are initialized; the chief
/// runs `chief_init_op()` and `get_init_tokens_op()`, then starts the
/// chief queue runner.
class sync_replicas_optimizer {
public:
  /// `total_num_replicas` < 1 means `replicas_to_aggregate`.
  /// InvalidArgument for replicas_to_aggregate < 1.
  sync_replicas_optimizer(optimizer& opt, int replicas_to_aggregate,
                          int total_num_replicas = -1);

  grads_and_vars compute_gradients(const output& loss,
                                   std::vector<variable> var_list = {}) {
    return opt_->compute_gradients(loss, std::move(var_list));
  }
  /// The worker's train op (see above). Call once per graph.
  /// InvalidArgument: no gradients, or a second call.
  operation apply_gradients(const grads_and_vars& gv,
                            const variable& global_step,
                            const std::string& name = "sync_replicas");
  operation minimize(const output& loss, const variable& global_step,
                     std::vector<variable> var_list = {});

  /// Assigns the global step to this worker's local step.
  operation local_step_init_op() const;
  /// Sets every accumulator's global step to the global step (the chief,
  /// at start or after a restore).
  operation chief_init_op() const;
  /// Enqueues `num_tokens` tokens (-1: replicas_to_aggregate; 0: a NoOp)
  /// so that replicas may run ahead of the first update. InvalidArgument
  /// for fewer than replicas_to_aggregate - total_num_replicas ("Too few
  /// tokens to finish the first step").
  operation get_init_tokens_op(int num_tokens = -1);
  /// The chief's queue runner: one thread running the sync op; build it
  /// with `queue_runner{graph, def}` (client/queue_runner.hpp).
  const queue_runner_def& chief_queue_runner() const;
  /// Elastic synchronous training (docs/DESIGN.md, "Elastic workers"):
  /// call before apply_gradients. The count of gradients per update and of
  /// tokens per update live in an int32 variable beside the global step
  /// ("sync_rep_replicas", replicas_to_aggregate at first) instead of the
  /// graph, and set_replicas_op changes it between updates.
  /// InvalidArgument after apply_gradients (the graph is built).
  void set_elastic(bool elastic);
  /// With set_elastic: the op that sets the number of replicas to the
  /// int32 scalar `replicas_placeholder()` is fed with, for the next
  /// update; an update waiting for more gradients than that waits for
  /// that many (a replica left), and a raise enqueues the difference in
  /// tokens at the current global step (a replica joined: without them
  /// every worker could wait for a token). InvalidArgument without
  /// set_elastic or before apply_gradients.
  operation set_replicas_op() const;
  output replicas_placeholder() const;

  /// One AccumulatorReplicas op per accumulator
  /// (conditional_accumulator::replicas): which replicas have sent
  /// gradients, and when. sync_replicas_waiting_for
  /// (client/sync_replicas_hook.hpp) reads them to name the replicas an
  /// update waits for.
  const std::vector<operation>& accumulator_replicas() const;

  int replicas_to_aggregate() const noexcept {
    return replicas_;
  }
  int total_num_replicas() const noexcept {
    return total_;
  }

private:
  void check_built(const char* what) const;
  void check_elastic(const char* what) const;

  optimizer* opt_;
  int replicas_;
  int total_;
  variable global_step_;
  variable local_step_;
  queue_base token_queue_;
  std::vector<conditional_accumulator> accumulators_;
  std::vector<operation> replicas_ops_;
  operation local_step_init_;
  operation chief_init_;
  queue_runner_def chief_runner_;
  bool elastic_ = false;
  variable replicas_var_;
  output replicas_feed_;
  operation set_replicas_;
};

} // namespace actorflow
