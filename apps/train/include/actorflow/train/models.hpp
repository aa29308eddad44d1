#pragma once

// The models actorflow-train trains on Fashion-MNIST (installed for
// programs of your own: CMake target actorflow::train), built into the
// default graph (under whatever device scope the caller opened: with
// replica_device_setter the variables go to the ps tasks and the rest to
// the worker):
//
//   softmax  logits = x W + b
//   mlp      784 -> hidden... (ReLU) -> 10, e.g. hidden {256, 128}
//   cnn      conv 5x5 (filters[0]) -> max pool 2x2 -> conv 5x5 (filters[1])
//            -> max pool 2x2 -> fully connected (hidden..., ReLU) -> 10
//
// With model_options::keep_prob < 1, each hidden fully connected layer is
// followed by tf.nn.dropout (TF's MNIST tutorials' regularization).
//
// Weights start Glorot-uniform (Keras' default; He-like scale for the ReLU
// layers is not needed at these depths), biases at zero, softmax weights at
// zero as in TF's MNIST tutorial.

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"

namespace actorflow::train {

struct model_options {
  /// "softmax", "mlp" or "cnn".
  std::string kind = "mlp";
  /// Widths of the hidden fully connected layers (mlp; cnn: after the
  /// convolutions).
  std::vector<int64_t> hidden = {256, 128};
  /// Output channels of the two convolutions (cnn).
  std::vector<int64_t> filters = {16, 32};
  /// Op seed base for the initializers (0: none).
  int64_t seed = 1;
  /// Dropout after each hidden fully connected layer (mlp, cnn) when
  /// below 1: the model gets a `keep_prob` input, 1 unless fed, which
  /// training feeds with this value (TF's MNIST tutorials' way).
  double keep_prob = 1;
  /// Op seed of the dropout masks (0: derived from the graph seed); give
  /// each worker its own, or all draw the same masks.
  int64_t dropout_seed = 0;
};

/// The placeholders and outputs of a built model.
struct model {
  /// Images: [None, 784] float32, or [None, 28, 28, 1] for the cnn.
  output x;
  /// Class indices [None] int32.
  output y;
  output logits;
  /// Mean cross-entropy over the batch.
  output loss;
  /// The number of correct predictions in the batch (float32 scalar).
  output num_correct;
  /// With dropout (model_options::keep_prob < 1): the probability of
  /// keeping a hidden unit, a float32 scalar that is 1 unless fed.
  output keep_prob;
  /// What one fed image looks like (the batch dimension in front).
  std::vector<int64_t> image_shape;
  /// Number of trainable parameters.
  int64_t parameters = 0;
};

namespace detail {

inline variable weights(std::vector<int64_t> shape, int64_t fan_in,
                        int64_t fan_out, int64_t seed, bool zero = false) {
  variable_options opts;
  opts.name = "weights";
  if (zero)
    return variable{zeros(shape), opts};
  auto limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return variable{random_uniform(shape, -limit, limit, dtype::float32, seed),
                  opts};
}

inline variable biases(int64_t n) {
  variable_options opts;
  opts.name = "biases";
  return variable{zeros({n}), opts};
}

inline int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

/// x [batch, in] -> [batch, out], in name scope `scope`.
inline output dense(const std::string& scope, const output& x, int64_t in,
                    int64_t out, bool relu_after, int64_t seed,
                    int64_t& parameters, bool zero_init = false) {
  name_scope ns{scope};
  auto w = weights({in, out}, in, out, seed, zero_init);
  auto b = biases(out);
  parameters += in * out + out;
  auto h = bias_add(matmul(x, w), b);
  return relu_after ? relu(h) : h;
}

inline output conv_pool(const std::string& scope, const output& x,
                        int64_t in, int64_t out, int64_t seed,
                        int64_t& parameters) {
  name_scope ns{scope};
  auto w = weights({5, 5, in, out}, 25 * in, 25 * out, seed);
  auto b = biases(out);
  parameters += 25 * in * out + out;
  auto h = relu(bias_add(conv2d(x, w, {1, 1, 1, 1}, "SAME"), b));
  return max_pool(h, {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME");
}

} // namespace detail

/// Builds `opts.kind` into the default graph. std::invalid_argument for an
/// unknown kind or a non-positive width.
inline model build_model(const model_options& opts) {
  for (auto w : opts.hidden)
    if (w <= 0)
      throw std::invalid_argument("layer widths must be positive");
  for (auto f : opts.filters)
    if (f <= 0)
      throw std::invalid_argument("filter counts must be positive");
  model m;
  auto seed = [&, next = int64_t{0}]() mutable {
    return opts.seed == 0 ? int64_t{0} : opts.seed * 1000 + ++next;
  };
  output features;
  int64_t width = 0;
  if (opts.kind == "cnn") {
    if (opts.filters.size() != 2)
      throw std::invalid_argument("the cnn takes two filter counts");
    m.image_shape = {28, 28, 1};
    m.x = placeholder(dtype::float32, tensor_shape{-1, 28, 28, 1}, "x");
    auto h1 = detail::conv_pool("conv1", m.x, 1, opts.filters[0], seed(),
                                m.parameters);
    auto h2 = detail::conv_pool("conv2", h1, opts.filters[0],
                                opts.filters[1], seed(), m.parameters);
    width = 7 * 7 * opts.filters[1];
    features = reshape(h2, {-1, width});
  } else if (opts.kind == "mlp" || opts.kind == "softmax") {
    m.image_shape = {28 * 28};
    m.x = placeholder(dtype::float32, tensor_shape{-1, 28 * 28}, "x");
    features = m.x;
    width = 28 * 28;
  } else {
    throw std::invalid_argument("unknown model '" + opts.kind + "'");
  }
  m.y = placeholder(dtype::int32, tensor_shape{-1}, "y");
  if (!(opts.keep_prob > 0 && opts.keep_prob <= 1))
    throw std::invalid_argument("keep_prob must lie in (0, 1]");
  if (opts.keep_prob < 1)
    m.keep_prob = placeholder_with_default(constant(1.0f, "keep_prob/default"),
                                           tensor_shape{}, "keep_prob");
  if (opts.kind != "softmax") {
    int layer = 0;
    for (auto n : opts.hidden) {
      auto scope = "hidden" + std::to_string(++layer);
      features = detail::dense(scope, features, width, n, true, seed(),
                               m.parameters);
      if (m.keep_prob.valid()) {
        name_scope ns{scope};
        features = dropout(features, m.keep_prob,
                           opts.dropout_seed == 0
                             ? 0
                             : opts.dropout_seed * 100 + layer);
      }
      width = n;
    }
  }
  m.logits = detail::dense(opts.kind == "softmax" ? "softmax" : "logits",
                           features, width, 10, false, seed(), m.parameters,
                           opts.kind == "softmax");
  {
    name_scope ns{"loss"};
    m.loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(m.y,
                                                                  m.logits));
  }
  {
    name_scope ns{"accuracy"};
    auto correct = equal(argmax(m.logits, 1), cast(m.y, dtype::int64));
    m.num_correct = reduce_sum(cast(correct, dtype::float32));
  }
  return m;
}

} // namespace actorflow::train
