#include "actorflow/graph/training.hpp"

#include "actorflow/graph/gradients.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

using namespace detail;

// -- global step -------------------------------------------------------------

variable create_global_step() {
  auto& g = default_graph();
  if (!g.collection(global_step_key).empty())
    fail("\"global_step\" already exists.");
  name_scope root{""};
  variable_options opts;
  opts.name = "global_step";
  opts.trainable = false;
  opts.collections = std::vector<std::string>{global_variables_key,
                                              global_step_key};
  return variable{tensor::scalar(int64_t{0}), opts};
}

variable get_global_step() {
  auto& g = default_graph();
  auto& names = g.collection(global_step_key);
  if (names.empty())
    return {};
  return variable::from_graph(g, names.front());
}

variable get_or_create_global_step() {
  auto step = get_global_step();
  return step.valid() ? step : create_global_step();
}

// -- optimizer ---------------------------------------------------------------

grads_and_vars optimizer::compute_gradients(const output& loss,
                                            std::vector<variable> var_list) {
  auto& g = graph_of(loss);
  if (!is_float(loss.type()))
    fail("Invalid type " + std::string{to_string(loss.type())} + " for "
         + loss.name() + ", expected: [float32, float64].");
  graph::default_guard guard{g};
  if (var_list.empty())
    var_list = trainable_variables();
  if (var_list.empty())
    fail("No variables to optimize.");
  std::vector<output> xs;
  for (auto& v : var_list)
    xs.push_back(v.value());
  auto gs = gradients({loss}, xs);
  grads_and_vars result;
  for (size_t i = 0; i < var_list.size(); ++i)
    result.emplace_back(gs[i], var_list[i]);
  return result;
}

operation optimizer::apply_gradients(const grads_and_vars& gv,
                                     const variable* global_step,
                                     const std::string& name) {
  std::vector<variable> vars;
  for (auto& [grad, var] : gv) {
    if (!grad.valid())
      continue;
    if (grad.type() != var.type())
      fail("Gradient " + grad.name() + " has dtype "
           + std::string{to_string(grad.type())} + ", variable "
           + var.name() + " has " + std::string{to_string(var.type())});
    vars.push_back(var);
  }
  if (vars.empty()) {
    std::string names;
    for (auto& [grad, var] : gv)
      names += (names.empty() ? "" : ", ") + var.name();
    fail("No gradients provided for any variable, check your graph for ops "
         "that do not support gradients, between variables [" + names
         + "] and loss.");
  }
  auto& g = *vars.front().op().owner();
  graph::default_guard guard{g};
  create_slots(vars);
  name_scope scope{name.empty() ? name_ : name};
  std::vector<operation> updates;
  for (auto& [grad, var] : gv) {
    if (!grad.valid())
      continue;
    name_scope update{"update_" + var.op().name()};
    colocate_with near{var.op()};
    updates.push_back(apply_dense(grad, var));
  }
  auto op_name = scope.prefix();
  if (global_step == nullptr)
    return finish(updates, op_name);
  control_dependencies after{finish(updates, "update")};
  colocate_with near{global_step->op()};
  auto n = make_node(op_name.substr(0, op_name.size() - 1), "AssignAdd");
  n.attrs["T"] = global_step->type();
  n.attrs["use_locking"] = false;
  auto one = scalar_like(global_step->ref(), 1, "value");
  return g
    .add_node(std::move(n), {global_step->ref(), one}, {global_step->type()},
              {tensor_shape{}});
}

operation optimizer::minimize(const output& loss, const variable* global_step,
                              std::vector<variable> var_list,
                              const std::string& name) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)),
                         global_step, name);
}

variable optimizer::get_slot(const variable& var,
                             const std::string& slot) const {
  auto i = slots_.find(slot);
  if (i == slots_.end())
    return {};
  auto j = i->second.find(var.op().name());
  return j == i->second.end() ? variable{} : j->second;
}

void optimizer::create_slots(const std::vector<variable>&) {
  // no slots
}

operation optimizer::finish(const std::vector<operation>& updates,
                            const std::string& name) {
  return group(updates, name);
}

variable optimizer::make_slot(const variable& var, const std::string& slot,
                              const std::string& slot_name, double value) {
  if (auto existing = get_slot(var, slot); existing.valid())
    return existing;
  auto shape = var.shape();
  if (!shape.fully_defined())
    fail("slot " + slot_name + " of " + var.name()
         + " needs a variable of a static shape");
  auto& g = *var.op().owner();
  graph::default_guard guard{g};
  // Slot names are absolute ("w/Momentum"), whatever scope is open.
  name_scope root{""};
  colocate_with near{var.op()};
  auto full = var.op().name() + "/" + slot_name;
  output init;
  {
    exact_name_scope init_scope{g, full + "/Initializer/"};
    init = fill(shape.dims(), scalar_like(var.ref(), value, "Const"),
                value == 0 ? "zeros" : "Fill");
  }
  variable_options opts;
  opts.name = full;
  opts.trainable = false;
  auto v = variable{init, opts};
  slots_[slot][var.op().name()] = v;
  return v;
}

output optimizer::hyper(const variable& var, double value,
                        const std::string& name) {
  return scalar_like(var.ref(), value, name);
}

output optimizer::hyper(const variable& var, const hyperparameter& value,
                        const std::string& name) {
  auto& t = value.tensor();
  if (!t.valid())
    return hyper(var, value.value(), name);
  if (!t.shape().unknown_rank() && t.shape().rank() != 0)
    fail("optimizer " + name_ + ": " + name + " " + t.name()
         + " must be a scalar, got shape " + t.shape().to_string());
  return t.type() == var.type() ? t : cast(t, var.type(), name);
}

output exponential_decay(double learning_rate, const variable& global_step,
                         int64_t decay_steps, double decay_rate,
                         bool staircase, const std::string& name) {
  if (!global_step.valid())
    fail("global_step is required for exponential_decay.");
  if (decay_steps <= 0)
    fail("exponential_decay '" + name + "': decay_steps must be positive, "
         "got " + std::to_string(decay_steps));
  name_scope scope{name};
  auto rate = constant(static_cast<float>(learning_rate), "learning_rate");
  auto step = cast(global_step.value(), dtype::float32);
  auto p = div(step, constant(static_cast<float>(decay_steps)));
  if (staircase)
    p = floor(p);
  return mul(rate, pow(constant(static_cast<float>(decay_rate)), p),
             "decayed");
}

namespace {

// An Apply* node updating `refs` (the variable first) in place.
operation apply_node(const std::string& op, const std::vector<output>& inputs,
                     const variable& var,
                     std::vector<std::pair<std::string, bool>> flags = {}) {
  auto& g = *var.op().owner();
  auto n = make_node(g.unique_name(op), op);
  n.attrs["T"] = var.type();
  n.attrs["use_locking"] = false;
  for (auto& [key, value] : flags)
    n.attrs[key] = value;
  return g.add_node(std::move(n), inputs, {var.type()}, {var.shape()});
}

} // namespace

gradient_descent_optimizer::gradient_descent_optimizer(
  hyperparameter learning_rate, const std::string& name)
  : optimizer(name), lr_(std::move(learning_rate)) {
}

operation gradient_descent_optimizer::apply_dense(const output& grad,
                                                  const variable& var) {
  return apply_node("ApplyGradientDescent",
                    {var.ref(), hyper(var, lr_, "learning_rate"), grad}, var);
}

momentum_optimizer::momentum_optimizer(hyperparameter learning_rate,
                                       double momentum, bool use_nesterov,
                                       const std::string& name)
  : optimizer(name),
    lr_(std::move(learning_rate)),
    momentum_(momentum),
    nesterov_(use_nesterov) {
}

void momentum_optimizer::create_slots(const std::vector<variable>& vars) {
  for (auto& v : vars)
    make_slot(v, "momentum", name_, 0.0);
}

operation momentum_optimizer::apply_dense(const output& grad,
                                          const variable& var) {
  auto accum = get_slot(var, "momentum");
  return apply_node("ApplyMomentum",
                    {var.ref(), accum.ref(), hyper(var, lr_, "learning_rate"),
                     grad, hyper(var, momentum_, "momentum")},
                    var, {{"use_nesterov", nesterov_}});
}

adagrad_optimizer::adagrad_optimizer(hyperparameter learning_rate,
                                     double initial_accumulator_value,
                                     const std::string& name)
  : optimizer(name),
    lr_(std::move(learning_rate)),
    initial_(initial_accumulator_value) {
  if (initial_accumulator_value <= 0)
    fail("initial_accumulator_value must be positive: "
         + std::to_string(initial_accumulator_value));
}

void adagrad_optimizer::create_slots(const std::vector<variable>& vars) {
  for (auto& v : vars)
    make_slot(v, "accumulator", name_, initial_);
}

operation adagrad_optimizer::apply_dense(const output& grad,
                                         const variable& var) {
  auto accum = get_slot(var, "accumulator");
  return apply_node("ApplyAdagrad",
                    {var.ref(), accum.ref(), hyper(var, lr_, "learning_rate"),
                     grad},
                    var);
}

adam_optimizer::adam_optimizer(hyperparameter learning_rate, double beta1,
                               double beta2, double epsilon,
                               const std::string& name)
  : optimizer(name),
    lr_(std::move(learning_rate)),
    beta1_(beta1),
    beta2_(beta2),
    epsilon_(epsilon) {
}

void adam_optimizer::create_slots(const std::vector<variable>& vars) {
  if (!beta1_power_.valid()) {
    // Non-slot accumulators, colocated with the first variable (TF sorts
    // by name; the first given is as good a home).
    auto& first = vars.front();
    graph::default_guard guard{*first.op().owner()};
    name_scope root{""};
    colocate_with near{first.op()};
    variable_options opts;
    opts.trainable = false;
    opts.name = "beta1_power";
    beta1_power_ = variable{scalar_like(first.ref(), beta1_, "beta1_power/init"),
                            opts};
    opts.name = "beta2_power";
    beta2_power_ = variable{scalar_like(first.ref(), beta2_, "beta2_power/init"),
                            opts};
  }
  for (auto& v : vars) {
    make_slot(v, "m", name_, 0.0);
    make_slot(v, "v", name_ + "_1", 0.0);
  }
}

operation adam_optimizer::apply_dense(const output& grad,
                                      const variable& var) {
  auto power = [&](const variable& p) {
    return p.type() == var.type() ? p.value() : cast(p.value(), var.type());
  };
  return apply_node(
    "ApplyAdam",
    {var.ref(), get_slot(var, "m").ref(), get_slot(var, "v").ref(),
     power(beta1_power_), power(beta2_power_),
     hyper(var, lr_, "learning_rate"),
     hyper(var, beta1_, "beta1"), hyper(var, beta2_, "beta2"),
     hyper(var, epsilon_, "epsilon"), grad},
    var, {{"use_nesterov", false}});
}

operation adam_optimizer::finish(const std::vector<operation>& updates,
                                 const std::string& name) {
  control_dependencies after{updates};
  colocate_with near{beta1_power_.op()};
  auto b1 = beta1_power_.assign(mul(beta1_power_.value(),
                                    hyper(beta1_power_, beta1_, "beta1")),
                                true, "update_beta1");
  auto b2 = beta2_power_.assign(mul(beta2_power_.value(),
                                    hyper(beta2_power_, beta2_, "beta2")),
                                true, "update_beta2");
  auto all = updates;
  all.push_back(b1.op());
  all.push_back(b2.op());
  return group(all, name);
}

// -- synchronous replication ------------------------------------------------

sync_replicas_optimizer::sync_replicas_optimizer(optimizer& opt,
                                                 int replicas_to_aggregate,
                                                 int total_num_replicas)
  : opt_(&opt),
    replicas_(replicas_to_aggregate),
    total_(total_num_replicas < 1 ? replicas_to_aggregate
                                  : total_num_replicas) {
  if (replicas_to_aggregate < 1)
    fail("replicas_to_aggregate must be >= 1, not "
         + std::to_string(replicas_to_aggregate));
}

void sync_replicas_optimizer::check_built(const char* what) const {
  if (!local_step_.valid())
    fail(std::string{what} + " needs apply_gradients (or minimize) first");
}

operation sync_replicas_optimizer::apply_gradients(const grads_and_vars& gv,
                                                   const variable& global_step,
                                                   const std::string& name) {
  if (local_step_.valid())
    fail("apply_gradients was already called on this SyncReplicasOptimizer");
  if (!global_step.valid())
    fail("SyncReplicasOptimizer needs a global step");
  auto& g = *global_step.op().owner();
  graph::default_guard guard{g};
  global_step_ = global_step;
  // The local step lives on this worker: colocated with a NoOp that the
  // device setter leaves on the worker, as TF's local_anchor.
  {
    auto anchor = no_op("local_anchor");
    colocate_with near{anchor};
    variable_options opts;
    opts.name = "sync_rep_local_step";
    opts.trainable = false;
    opts.collections = std::vector<std::string>{local_variables_key};
    local_step_ = variable{constant(tensor::scalar(int64_t{0})), opts};
  }
  // Elastic: how many replicas an update waits for, beside the global
  // step, read by every take and by the token fill.
  if (elastic_) {
    colocate_with on_ps{global_step.op()};
    variable_options vo;
    vo.name = "sync_rep_replicas";
    vo.trainable = false;
    replicas_var_ = variable{constant(tensor::scalar(int32_t{replicas_})),
                             vo};
  }
  std::vector<operation> pushes;
  grads_and_vars aggregated;
  {
    name_scope scope{name};
    for (auto& [grad, var] : gv) {
      if (!grad.valid()) {
        aggregated.emplace_back(grad, var);
        continue;
      }
      colocate_with near{var.op()};
      conditional_accumulator acc{grad.type(), var.shape(),
                                  var.op().name() + "/grad_accum"};
      pushes.push_back(acc.apply_grad(grad, local_step_.value()));
      aggregated.emplace_back(elastic_
                                ? acc.take_grad(replicas_var_.value())
                                : acc.take_grad(replicas_),
                              var);
      replicas_ops_.push_back(acc.replicas());
      accumulators_.push_back(acc);
    }
  }
  if (pushes.empty())
    fail("No gradients provided for any variable.");
  // The chief's update and tokens sit with the global step (the ps).
  colocate_with on_ps{global_step.op()};
  auto update = opt_->apply_gradients(aggregated, &global_step);
  fifo_queue tokens{-1, {global_step.type()}, {tensor_shape{}},
                    "sync_token_q", "sync_token_q"};
  token_queue_ = tokens;
  fifo_queue dummy{1, {dtype::int32}, {tensor_shape{}}, "dummy_queue",
                   "dummy_queue"};
  operation sync_op;
  {
    control_dependencies after{update};
    // Read the step after the update: an Identity of the ref runs (and
    // reads) only once its control input is done.
    auto step_now = identity(global_step.ref(), "global_step_now");
    auto fill_tokens
      = elastic_ ? tile(reshape(step_now, {1}),
                        reshape(identity(replicas_var_.ref(),
                                         "replicas_now"),
                                {1}),
                        "tokens")
                 : fill({total_ > replicas_ ? total_ : replicas_}, step_now,
                        "tokens");
    sync_op = tokens.enqueue_many({fill_tokens});
  }
  chief_runner_.queue_name = dummy.name();
  chief_runner_.enqueue_op_names = {sync_op.name()};
  chief_runner_.close_op_name = dummy.close(false).name();
  chief_runner_.cancel_op_name = dummy.close(true).name();
  std::vector<operation> inits;
  for (auto& acc : accumulators_)
    inits.push_back(acc.set_global_step(global_step.value()));
  chief_init_ = group(inits, "chief_init");
  if (elastic_) {
    replicas_feed_ = placeholder(dtype::int32, tensor_shape{}, "replicas_feed");
    // A raise also adds the difference in tokens: the update that ran
    // before it filled tokens for the old count, and the next one waits
    // for the new count's gradients; without them every worker would wait
    // for a token and the update for their gradients. (A token too many
    // is harmless: it is spent on one stale gradient.)
    auto before = identity(replicas_var_.ref(), "set_replicas/before");
    operation assign;
    {
      control_dependencies after_read{before};
      assign = replicas_var_.assign(replicas_feed_, true, "set_replicas/assign")
                 .op();
    }
    auto raise = maximum(sub(replicas_feed_, before, "set_replicas/delta"),
                         constant(tensor::scalar(int32_t{0})),
                         "set_replicas/raise");
    auto extra = tile(reshape(identity(global_step.ref(),
                                       "set_replicas/step_now"),
                              {1}),
                      reshape(raise, {1}), "set_replicas/tokens");
    std::vector<operation> sets{assign, tokens.enqueue_many({extra})};
    {
      // The count a pending update's take waits for changes only once the
      // variable holds it: that update fills tokens for the count it reads
      // from the variable, and read before the assign it filled the old
      // count's (a spare token let a worker run ahead of its update).
      control_dependencies after_assign{assign};
      for (auto& acc : accumulators_)
        sets.push_back(acc.set_num_required(replicas_feed_));
    }
    set_replicas_ = group(sets, "set_replicas");
  }
  local_step_init_ = local_step_.assign(global_step.value(), true,
                                        "local_step_init")
                       .op();
  // The worker's step: push every gradient, then wait for a token.
  control_dependencies after_pushes{pushes};
  auto token = tokens.dequeue().front();
  return local_step_.assign(token, true, "train_op").op();
}

operation sync_replicas_optimizer::minimize(const output& loss,
                                            const variable& global_step,
                                            std::vector<variable> var_list) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)),
                         global_step);
}

operation sync_replicas_optimizer::local_step_init_op() const {
  check_built("local_step_init_op");
  return local_step_init_;
}

operation sync_replicas_optimizer::chief_init_op() const {
  check_built("chief_init_op");
  return chief_init_;
}

operation sync_replicas_optimizer::get_init_tokens_op(int num_tokens) {
  check_built("get_init_tokens_op");
  auto needed = replicas_ - total_;
  if (num_tokens == -1)
    num_tokens = replicas_;
  else if (num_tokens < needed)
    fail("Too few tokens to finish the first step: "
         + std::to_string(num_tokens) + " (given) vs " + std::to_string(needed)
         + " (needed)");
  auto& g = *global_step_.op().owner();
  graph::default_guard guard{g};
  if (num_tokens <= 0)
    return no_op("no_init_tokens");
  colocate_with on_ps{global_step_.op()};
  auto tokens = fill({num_tokens}, global_step_.value(), "init_tokens");
  return token_queue_.enqueue_many({tokens});
}

void sync_replicas_optimizer::set_elastic(bool elastic) {
  if (local_step_.valid())
    fail("set_elastic must come before apply_gradients (or minimize)");
  elastic_ = elastic;
}

void sync_replicas_optimizer::check_elastic(const char* what) const {
  check_built(what);
  if (!elastic_)
    fail(std::string{what} + " needs set_elastic(true) before "
                             "apply_gradients");
}

operation sync_replicas_optimizer::set_replicas_op() const {
  check_elastic("set_replicas_op");
  return set_replicas_;
}

output sync_replicas_optimizer::replicas_placeholder() const {
  check_elastic("replicas_placeholder");
  return replicas_feed_;
}

const queue_runner_def& sync_replicas_optimizer::chief_queue_runner() const {
  check_built("chief_queue_runner");
  return chief_runner_;
}

const std::vector<operation>&
sync_replicas_optimizer::accumulator_replicas() const {
  check_built("accumulator_replicas");
  return replicas_ops_;
}

} // namespace actorflow
