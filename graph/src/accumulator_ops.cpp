#include "actorflow/graph/accumulator_ops.hpp"

#include "actorflow/graph/ops.hpp"
#include "graph_scopes.hpp"

namespace actorflow {

namespace {

output as_int64(const output& x) {
  if (x.type() == dtype::int64)
    return x;
  if (x.type() != dtype::int32)
    fail("a step must be an integer scalar, got "
         + std::string{to_string(x.type())} + ": " + x.name());
  return cast(x, dtype::int64);
}

} // namespace

conditional_accumulator::conditional_accumulator(
  dtype type, tensor_shape shape, const std::string& shared_name,
  const std::string& name, const std::string& reduction_type)
  : type_(type), shape_(std::move(shape)) {
  if (type != dtype::float32 && type != dtype::float64)
    fail("Value for attr 'dtype' of " + std::string{to_string(type)}
         + " is not in the list of allowed values: float32, float64 ("
         + name + ")");
  if (reduction_type != "MEAN" && reduction_type != "SUM")
    fail("reduction_type must be MEAN or SUM, not " + reduction_type);
  auto& g = default_graph();
  auto n = make_node(g.unique_name(name), "ConditionalAccumulator");
  n.attrs["dtype"] = type;
  n.attrs["shape"] = shape_;
  n.attrs["container"] = std::string{};
  n.attrs["shared_name"] = shared_name;
  n.attrs["reduction_type"] = reduction_type;
  auto op = g.add_node(std::move(n), {}, {dtype::string}, {tensor_shape{}},
                       true);
  graph_ = &g;
  node_ = op.index();
}

operation conditional_accumulator::op() const {
  if (graph_ == nullptr)
    fail("use of an empty accumulator handle");
  return operation{graph_, node_};
}

output conditional_accumulator::handle() const {
  return op().out(0);
}

const std::string& conditional_accumulator::name() const {
  return op().name();
}

operation conditional_accumulator::add_op(const std::string& op_type,
                                          const std::string& name,
                                          std::vector<output> inputs,
                                          std::vector<dtype> types,
                                          std::vector<tensor_shape> shapes) {
  auto acc = op();
  auto guard = graph::default_guard{*graph_};
  // With its accumulator, whatever scope the caller is in (TF places
  // them by the accumulator's ref input; SyncReplicasOptimizer builds
  // the chief's ops beside the global step, maybe on another ps task).
  colocate_with near{acc};
  auto n = make_node(graph_->unique_name(name.empty() ? op_type : name),
                     op_type);
  n.attrs["dtype"] = type_;
  inputs.insert(inputs.begin(), acc.out(0));
  return graph_->add_node(std::move(n), inputs, std::move(types),
                          std::move(shapes), true);
}

operation conditional_accumulator::apply_grad(const output& grad,
                                              const output& local_step,
                                              const std::string& name) {
  if (grad.type() != type_)
    fail("Cannot apply a " + std::string{to_string(grad.type())}
         + " gradient to accumulator " + this->name() + " of "
         + std::string{to_string(type_)});
  if (!grad.shape().is_compatible_with(shape_))
    fail("Shapes " + grad.shape().to_string() + " and " + shape_.to_string()
         + " are incompatible (" + this->name() + ")");
  auto guard = graph::default_guard{*graph_};
  return add_op("AccumulatorApplyGradient", name,
                {as_int64(local_step), grad}, {}, {});
}

output conditional_accumulator::take_grad(int32_t num_required,
                                          const std::string& name) {
  auto guard = graph::default_guard{*graph_};
  return take_grad(constant(num_required, "num_required"), name);
}

output conditional_accumulator::take_grad(const output& num_required,
                                          const std::string& name) {
  auto guard = graph::default_guard{*graph_};
  return add_op("AccumulatorTakeGradient", name, {num_required}, {type_},
                {shape_})
    .out(0);
}

operation conditional_accumulator::set_num_required(const output& n,
                                                    const std::string& name) {
  auto guard = graph::default_guard{*graph_};
  return add_op("AccumulatorSetNumRequired", name, {as_int64(n)}, {}, {});
}

output conditional_accumulator::num_accumulated(const std::string& name) {
  return add_op("AccumulatorNumAccumulated", name, {}, {dtype::int32},
                {tensor_shape{}})
    .out(0);
}

operation conditional_accumulator::replicas(const std::string& name) {
  return add_op("AccumulatorReplicas", name, {},
                {dtype::string, dtype::int64, dtype::float64, dtype::int64,
                 dtype::int32},
                {tensor_shape{{-1}}, tensor_shape{{-1}}, tensor_shape{{-1}},
                 tensor_shape{}, tensor_shape{}});
}

operation conditional_accumulator::set_global_step(const output& step,
                                                   const std::string& name) {
  auto guard = graph::default_guard{*graph_};
  return add_op("AccumulatorSetGlobalStep", name, {as_int64(step)}, {}, {});
}

} // namespace actorflow
