#pragma once

#include <cstdint>
#include <string>

#include "actorflow/graph/graph.hpp"

/// tf.ConditionalAccumulator: gradients from many replicas are averaged on
/// the task that holds the accumulator; a gradient computed for an older
/// step than the accumulator's is dropped (stale).
///
/// ~~~
/// conditional_accumulator acc{dtype::float32, tensor_shape{10}, "w/grad_accum"};
/// auto push = acc.apply_grad(grad, local_step);   // each worker
/// auto mean = acc.take_grad(2);                   // the chief; waits for 2
/// ~~~
///
/// The node (ConditionalAccumulator) is a stateful resource like a queue:
/// same container and shared_name = one accumulator for every session;
/// without a shared_name it is private to the session. Its ops take the
/// handle and are placed with it. Builders throw op_error
/// (InvalidArgument) for a dtype other than float32/float64.
namespace actorflow {

class conditional_accumulator {
public:
  conditional_accumulator() = default;
  conditional_accumulator(dtype type,
                          tensor_shape shape = tensor_shape::unknown(),
                          const std::string& shared_name = "",
                          const std::string& name = "conditional_accumulator",
                          const std::string& reduction_type = "MEAN");

  operation op() const;
  output handle() const;
  const std::string& name() const;
  dtype type() const noexcept {
    return type_;
  }

  /// AccumulatorApplyGradient: adds `grad` (the accumulator's dtype and a
  /// compatible shape) unless `local_step` (an integer scalar, cast to
  /// int64) is older than the accumulator's global step.
  operation apply_grad(const output& grad, const output& local_step,
                       const std::string& name = "");
  /// AccumulatorTakeGradient: waits for `num_required` gradients, gives
  /// their mean and advances the accumulator's global step.
  output take_grad(int32_t num_required, const std::string& name = "");
  /// The same with the count read when the take runs (an int32 scalar:
  /// a variable, for elastic synchronous training).
  output take_grad(const output& num_required, const std::string& name = "");
  /// AccumulatorSetNumRequired (actorflow's own; TF has none): takes that
  /// wait for more than `n` gradients (an integer scalar, cast to int64)
  /// wait for `n` from now on, and are served if they have that many.
  /// InvalidArgument for n < 1.
  operation set_num_required(const output& n, const std::string& name = "");
  /// AccumulatorNumAccumulated: an int32 scalar.
  output num_accumulated(const std::string& name = "");
  /// AccumulatorSetGlobalStep (an integer scalar, cast to int64).
  operation set_global_step(const output& new_global_step,
                            const std::string& name = "");
  /// AccumulatorReplicas (actorflow's own; TF has none): who has sent
  /// gradients, for telling which replicas a take waits for. Outputs: 0,
  /// the senders (string [k], "/job:worker/replica:0/task:1": the task
  /// whose gradient reached the accumulator's task, known when it came
  /// from another task); 1, each one's last local step (int64 [k]: below
  /// output 3, none for the update the takes wait for); 2, the seconds
  /// since its last gradient (float64 [k]); 3, the accumulator's global
  /// step (int64); 4, the number accumulated (int32).
  operation replicas(const std::string& name = "");

private:
  operation add_op(const std::string& op_type, const std::string& name,
                   std::vector<output> inputs, std::vector<dtype> types,
                   std::vector<tensor_shape> shapes);

  graph* graph_ = nullptr;
  int node_ = -1;
  dtype type_ = dtype::invalid;
  tensor_shape shape_ = tensor_shape::unknown();
};

} // namespace actorflow
