#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"

/// Graph builders for training: array helpers (tf.shape, tf.gather, ...),
/// comparisons, and tf.nn's losses and layers. Each adds one node (named as
/// TF Python names it, made unique in the current name scope) with TF's
/// attributes and the static shape TF infers, and throws op_error
/// (InvalidArgument) for what TF rejects at graph-building time.
///
/// ~~~
/// auto logits = bias_add(matmul(x, w), b);
/// auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(y, logits));
/// auto correct = equal(argmax(logits, 1), cast(y, dtype::int64));
/// ~~~
namespace actorflow {

// -- array helpers -----------------------------------------------------------

/// tf.shape: the shape of `x` as a vector (int32 or int64).
output shape(const output& x, dtype out_type = dtype::int32,
             const std::string& name = "Shape");
/// tf.size: the number of elements (int32).
output size(const output& x, const std::string& name = "Size");
output zeros_like(const output& x, const std::string& name = "zeros_like");
output ones_like(const output& x, const std::string& name = "ones_like");
/// tf.add_n: the sum of same-shaped tensors (one input is returned as is).
output add_n(const std::vector<output>& xs, const std::string& name = "AddN");
/// tf.expand_dims: a 1 inserted at `axis` (negative counts from the end).
output expand_dims(const output& x, int axis,
                   const std::string& name = "ExpandDims");
/// tf.squeeze: removes the given size-1 dimensions (all if none given).
output squeeze(const output& x, std::vector<int> axes = {},
               const std::string& name = "Squeeze");
/// tf.tile with multiples as a tensor (int32 vector).
output tile(const output& x, const output& multiples,
            const std::string& name = "Tile");
/// tf.transpose (reverses the dimensions when `perm` is empty).
output transpose(const output& x, std::vector<int> perm = {},
                 const std::string& name = "transpose");
/// tf.slice: `size` -1 takes the rest of a dimension.
output slice(const output& x, std::vector<int64_t> begin,
             std::vector<int64_t> size, const std::string& name = "Slice");
/// tf.gather (GatherV2, axis 0): rows of `params` at `indices` (int32 or
/// int64).
output gather(const output& params, const output& indices,
              const std::string& name = "GatherV2");
/// tf.nn.embedding_lookup for one partition: gather of `ids`.
output embedding_lookup(const output& params, const output& ids,
                        const std::string& name = "embedding_lookup");
/// tf.unsorted_segment_sum.
output unsorted_segment_sum(const output& data, const output& segment_ids,
                            const output& num_segments,
                            const std::string& name = "UnsortedSegmentSum");
/// tf.argmax along `axis` (int64 result).
output argmax(const output& x, int axis, const std::string& name = "ArgMax");
/// tf.reduce_sum / reduce_prod with the axes as a tensor (int32 vector).
output reduce_sum(const output& x, const output& axes, bool keep_dims = false,
                  const std::string& name = "Sum");
output reduce_prod(const output& x, std::vector<int> axes = {},
                   bool keep_dims = false, const std::string& name = "Prod");
/// tf.reduce_min; `axes` empty = all axes (an empty reduction is the
/// type's largest value, +inf for floats, as TF's).
output reduce_min(const output& x, std::vector<int> axes = {},
                  bool keep_dims = false, const std::string& name = "Min");
/// tf.reduce_any / reduce_all of a bool tensor (InvalidArgument for
/// another dtype); empty: false / true.
output reduce_any(const output& x, std::vector<int> axes = {},
                  bool keep_dims = false, const std::string& name = "Any");
output reduce_all(const output& x, std::vector<int> axes = {},
                  bool keep_dims = false, const std::string& name = "All");
/// tf.reduce_logsumexp: log(sum(exp(x))) computed as TF does, stably
/// (the maximum taken out first; an all -inf slice gives -inf), under
/// name scope `name`.
output reduce_logsumexp(const output& x, std::vector<int> axes = {},
                        bool keep_dims = false,
                        const std::string& name = "ReduceLogSumExp");

// -- element-wise ------------------------------------------------------------

output abs(const output& x, const std::string& name = "Abs");
output sign(const output& x, const std::string& name = "Sign");
output reciprocal(const output& x, const std::string& name = "Reciprocal");
output log1p(const output& x, const std::string& name = "Log1p");
output sqrt(const output& x, const std::string& name = "Sqrt");
/// The largest integer not above x, element-wise (float types); no
/// gradient flows through it.
output floor(const output& x, const std::string& name = "Floor");
/// x ** y element-wise, broadcasting (float types: InvalidArgument for
/// others).
output pow(const output& x, const output& y, const std::string& name = "Pow");
output maximum(const output& x, const output& y,
               const std::string& name = "Maximum");
output minimum(const output& x, const output& y,
               const std::string& name = "Minimum");
/// Comparisons give bool tensors (broadcasting).
output equal(const output& x, const output& y,
             const std::string& name = "Equal");
output greater(const output& x, const output& y,
               const std::string& name = "Greater");
output greater_equal(const output& x, const output& y,
                     const std::string& name = "GreaterEqual");
output less(const output& x, const output& y, const std::string& name = "Less");
/// tf.where(cond, t, e) (Select): `cond` of t's shape, or a vector over
/// t's first dimension.
output select(const output& cond, const output& t, const output& e,
              const std::string& name = "Select");

// -- tf.nn -------------------------------------------------------------------

output softmax(const output& logits, const std::string& name = "Softmax");
output log_softmax(const output& logits,
                   const std::string& name = "LogSoftmax");
/// The per-example loss [batch] of SoftmaxCrossEntropyWithLogits (labels
/// a probability distribution per row of `logits`).
output softmax_cross_entropy_with_logits(
  const output& labels, const output& logits,
  const std::string& name = "SoftmaxCrossEntropyWithLogits");
/// The per-example loss [batch] for class indices `labels` (int32/int64).
output sparse_softmax_cross_entropy_with_logits(
  const output& labels, const output& logits,
  const std::string& name = "SparseSoftmaxCrossEntropyWithLogits");
/// max(x, 0) - x * z + log(1 + exp(-|x|)), element-wise, as TF.
output sigmoid_cross_entropy_with_logits(
  const output& labels, const output& logits,
  const std::string& name = "logistic_loss");
/// sum(t ** 2) / 2.
output l2_loss(const output& t, const std::string& name = "L2Loss");
/// value + bias along the last dimension (NHWC).
output bias_add(const output& value, const output& bias,
                const std::string& name = "BiasAdd");
/// 2-D convolution, NHWC input, [kh, kw, in, out] filter; `strides`
/// {1, sh, sw, 1}; padding "SAME" or "VALID".
output conv2d(const output& input, const output& filter,
              std::vector<int64_t> strides, const std::string& padding,
              const std::string& name = "Conv2D");
/// tf.nn.dropout: each element of `x` kept with probability `keep_prob`
/// (a float scalar tensor of x's dtype, e.g. a placeholder_with_default
/// fed 0.5 while training) and scaled by 1 / keep_prob, zeroed otherwise,
/// so that the expected sum is unchanged. A new mask each run. Throws
/// op_error (InvalidArgument) for a non-float `x` or a keep_prob of
/// another dtype.
output dropout(const output& x, const output& keep_prob, int64_t seed = 0,
               const std::string& name = "dropout");
/// As above with a constant keep_prob, which must lie in (0, 1]
/// (InvalidArgument otherwise); 1 returns `x` itself, as TF.
output dropout(const output& x, double keep_prob, int64_t seed = 0,
               const std::string& name = "dropout");
/// Max pooling, NHWC; `ksize` and `strides` {1, h, w, 1}.
output max_pool(const output& value, std::vector<int64_t> ksize,
                std::vector<int64_t> strides, const std::string& padding,
                const std::string& name = "MaxPool");

} // namespace actorflow
