// Kernels for training, as TensorFlow 1.x defines them: softmax and the
// cross-entropies, L2Loss, BiasAdd and its gradient, segment sums,
// activation gradients and ArgMax.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "elementwise.hpp"

namespace actorflow::detail {

namespace {

// -- Softmax, LogSoftmax --------------------------------------------------------

// Writes softmax (or log-softmax) of each row of `n` values; subtracting
// the row's maximum keeps exp from overflowing.
template <class T, bool Log>
void softmax_rows(const T* in, T* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * n;
    T* y = out + r * n;
    T max = *std::max_element(x, x + n);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += std::exp(x[i] - max);
    if constexpr (Log) {
      T log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i)
        y[i] = (x[i] - max) - log_sum;
    } else {
      for (int64_t i = 0; i < n; ++i)
        y[i] = std::exp(x[i] - max) / sum;
    }
  }
}

template <bool Log>
status softmax_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  if (x.shape().rank() < 1)
    return invalid_argument("logits must have >= 1 dimension, got "
                            + x.shape().to_string());
  return visit_float(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{x.type(), x.shape()};
    auto n = x.shape().dims().back();
    if (n > 0)
      softmax_rows<T, Log>(x.flat<T>().data(), out.flat<T>().data(),
                           x.num_elements() / n, n);
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- cross-entropies ------------------------------------------------------------

// For one row of logits `z`: writes softmax(z) to `p` and returns
// log(sum(exp(z - max))) with `max` the row's maximum.
template <class T>
T row_log_sum_exp(const T* z, int64_t n, T* p, T& max) {
  max = *std::max_element(z, z + n);
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(z[i] - max);
    sum += p[i];
  }
  for (int64_t i = 0; i < n; ++i)
    p[i] /= sum;
  return std::log(sum);
}

status softmax_xent_kernel(kernel_context& ctx) {
  auto& logits = ctx.inputs[0];
  auto& labels = ctx.inputs[1];
  if (!(logits.shape() == labels.shape()))
    return invalid_argument("logits and labels must be same size: logits_size="
                            + logits.shape().to_string()
                            + " labels_size=" + labels.shape().to_string());
  if (logits.shape().rank() != 2)
    return invalid_argument("logits must be 2-dimensional");
  return visit_float(ctx, logits.type(), [&]<class T>(type_tag<T>) -> status {
    auto batch = logits.shape().dim(0);
    auto classes = logits.shape().dim(1);
    tensor loss{logits.type(), tensor_shape{batch}};
    tensor backprop{logits.type(), logits.shape()};
    auto z = logits.flat<T>().data();
    auto y = labels.flat<T>().data();
    auto l = loss.flat<T>().data();
    auto b = backprop.flat<T>().data();
    if (classes > 0) {
      for (int64_t r = 0; r < batch; ++r) {
        auto zr = z + r * classes;
        auto yr = y + r * classes;
        auto br = b + r * classes;
        T max;
        T lse = row_log_sum_exp(zr, classes, br, max);
        // loss = sum(labels * (log(sum(exp(z - max))) - (z - max))).
        T sum = 0;
        for (int64_t i = 0; i < classes; ++i) {
          sum += yr[i] * (lse - (zr[i] - max));
          br[i] -= yr[i];
        }
        l[r] = sum;
      }
    }
    ctx.outputs.push_back(std::move(loss));
    ctx.outputs.push_back(std::move(backprop));
    return {};
  });
}

status sparse_softmax_xent_kernel(kernel_context& ctx) {
  auto& logits = ctx.inputs[0];
  auto& labels = ctx.inputs[1];
  if (logits.shape().rank() != 2)
    return invalid_argument("logits must be 2-D, but got shape "
                            + logits.shape().to_string());
  if (labels.shape().rank() != 1)
    return invalid_argument("labels must be 1-D, but got shape "
                            + labels.shape().to_string());
  if (logits.shape().dim(0) != labels.shape().dim(0))
    return invalid_argument(
      "logits and labels must have the same first dimension, got logits "
      "shape "
      + logits.shape().to_string() + " and labels shape "
      + labels.shape().to_string());
  if (logits.shape().dim(1) <= 0)
    return invalid_argument(
      "Must have at least one class, but got logits shape "
      + logits.shape().to_string());
  std::vector<int64_t> ids;
  if (auto st = read_ints(ctx, labels, "labels", ids); !st.ok())
    return st;
  auto classes = logits.shape().dim(1);
  if (!ids.empty()) {
    auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
    if (*lo < 0 || *hi >= classes) {
      auto bad = *lo < 0 ? *lo : *hi;
      std::string values;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i > 0)
          values += ' ';
        values += std::to_string(ids[i]);
      }
      return invalid_argument("Received a label value of "
                              + std::to_string(bad)
                              + " which is outside the valid range of [0, "
                              + std::to_string(classes)
                              + ").  Label values: " + values);
    }
  }
  return visit_float(ctx, logits.type(), [&]<class T>(type_tag<T>) -> status {
    auto batch = logits.shape().dim(0);
    tensor loss{logits.type(), tensor_shape{batch}};
    tensor backprop{logits.type(), logits.shape()};
    auto z = logits.flat<T>().data();
    auto l = loss.flat<T>().data();
    auto b = backprop.flat<T>().data();
    for (int64_t r = 0; r < batch; ++r) {
      auto zr = z + r * classes;
      auto br = b + r * classes;
      auto label = ids[static_cast<size_t>(r)];
      T max;
      T lse = row_log_sum_exp(zr, classes, br, max);
      l[r] = lse - (zr[label] - max);
      br[label] -= T(1);
    }
    ctx.outputs.push_back(std::move(loss));
    ctx.outputs.push_back(std::move(backprop));
    return {};
  });
}

// -- L2Loss ---------------------------------------------------------------------

status l2_loss_kernel(kernel_context& ctx) {
  auto& t = ctx.inputs[0];
  return visit_float(ctx, t.type(), [&]<class T>(type_tag<T>) -> status {
    T sum = 0;
    for (auto v : t.flat<T>())
      sum += v * v;
    ctx.outputs.push_back(tensor::scalar<T>(sum / T(2)));
    return {};
  });
}

// -- BiasAdd, BiasAddGrad -------------------------------------------------------

status check_data_format(const kernel_context& ctx) {
  std::string format = "NHWC";
  if (auto st = read_attr(ctx, "data_format", format); !st.ok())
    return st;
  if (format == "NHWC")
    return {};
  if (format == "NCHW")
    return invalid_argument("CPU BiasOp only supports NHWC.");
  return invalid_argument("Invalid data format");
}

status bias_add_kernel(kernel_context& ctx) {
  auto& value = ctx.inputs[0];
  auto& bias = ctx.inputs[1];
  if (auto st = check_data_format(ctx); !st.ok())
    return st;
  if (value.shape().rank() < 2)
    return invalid_argument("Input tensor must be at least 2D: "
                            + value.shape().to_string());
  if (bias.shape().rank() != 1)
    return invalid_argument("Biases must be 1D: " + bias.shape().to_string());
  auto channels = value.shape().dims().back();
  if (bias.shape().dim(0) != channels)
    return invalid_argument(
      "Must provide as many biases as the last dimension of the input "
      "tensor: "
      + bias.shape().to_string() + " vs. " + value.shape().to_string());
  return visit_numeric(ctx, value.type(), [&]<class T>(type_tag<T>) -> status {
    using C = wrapping_t<T>;
    auto out = tensor::uninitialized(value.type(), value.shape());
    auto x = data_as<C, T>(value);
    auto b = data_as<C, T>(bias);
    auto o = data_as<C, T>(out);
    auto n = value.num_elements();
    for (int64_t row = 0; row < n; row += channels)
      apply_row<row_op::eigen>(x + row, true, b, true, o + row, channels,
                               [](const auto& u, const auto& v) {
                                 return u + v;
                               });
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

status bias_add_grad_kernel(kernel_context& ctx) {
  auto& grad = ctx.inputs[0];
  if (auto st = check_data_format(ctx); !st.ok())
    return st;
  if (grad.shape().rank() < 2)
    return invalid_argument("Input tensor must be at least 2D: "
                            + grad.shape().to_string());
  auto channels = grad.shape().dims().back();
  return visit_numeric(ctx, grad.type(), [&]<class T>(type_tag<T>) -> status {
    using C = wrapping_t<T>;
    tensor out{grad.type(), tensor_shape{channels}};
    auto g = grad.flat<T>().data();
    auto o = out.flat<T>().data();
    auto n = grad.num_elements();
    std::vector<C> acc(static_cast<size_t>(channels), C(0));
    for (int64_t row = 0; row < n; row += channels)
      for (int64_t c = 0; c < channels; ++c)
        acc[static_cast<size_t>(c)] += static_cast<C>(g[row + c]);
    for (int64_t c = 0; c < channels; ++c)
      o[c] = static_cast<T>(acc[static_cast<size_t>(c)]);
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- UnsortedSegmentSum -----------------------------------------------------------

status unsorted_segment_sum_kernel(kernel_context& ctx) {
  auto& data = ctx.inputs[0];
  auto& ids_t = ctx.inputs[1];
  auto& num_t = ctx.inputs[2];
  if (num_t.shape().rank() != 0)
    return invalid_argument("num_segments should be a scalar, not shape "
                            + num_t.shape().to_string());
  auto& dd = data.shape().dims();
  auto& sd = ids_t.shape().dims();
  if (sd.size() > dd.size() || !std::equal(sd.begin(), sd.end(), dd.begin()))
    return invalid_argument("data.shape = " + data.shape().to_string()
                            + " does not start with segment_ids.shape = "
                            + ids_t.shape().to_string());
  int64_t num_segments = 0;
  if (auto st = read_int_scalar(ctx, num_t, "num_segments", num_segments);
      !st.ok())
    return st;
  if (num_segments < 0)
    return invalid_argument("Input num_segments == "
                            + std::to_string(num_segments)
                            + " must not be negative.");
  std::vector<int64_t> ids;
  if (auto st = read_ints(ctx, ids_t, "segment_ids", ids); !st.ok())
    return st;
  // Negative ids drop their rows (TensorFlow 1.9 on); too large ones fail.
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= num_segments)
      return invalid_argument(
        "segment_ids"
        + slice_debug_string(ids_t.shape(), static_cast<int64_t>(i)) + " = "
        + std::to_string(ids[i]) + " is out of range [0, "
        + std::to_string(num_segments) + ")");
  std::vector<int64_t> out_dims{num_segments};
  out_dims.insert(out_dims.end(), dd.begin() + static_cast<int64_t>(sd.size()),
                  dd.end());
  tensor_shape out_shape;
  if (auto st = make_shape(out_dims, out_shape); !st.ok())
    return st;
  auto inner = product(dd, sd.size(), dd.size());
  return visit_numeric(ctx, data.type(), [&]<class T>(type_tag<T>) -> status {
    using C = wrapping_t<T>;
    tensor out{data.type(), out_shape};
    auto src = reinterpret_cast<const C*>(data.flat<T>().data());
    auto dst = reinterpret_cast<C*>(out.flat<T>().data());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0)
        continue;
      auto s = src + static_cast<int64_t>(i) * inner;
      auto d = dst + ids[i] * inner;
      for (int64_t k = 0; k < inner; ++k)
        d[k] += s[k];
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- element-wise gradients -----------------------------------------------------

enum class gradop { relu, sigmoid, tanh };

template <gradop Op>
status activation_grad_kernel(kernel_context& ctx) {
  auto& a = ctx.inputs[0];
  auto& b = ctx.inputs[1];
  if constexpr (Op == gradop::relu) {
    if (!(a.shape() == b.shape()))
      return invalid_argument("g and a must be the same size");
  } else {
    if (auto st = expect_same_shapes(ctx); !st.ok())
      return st;
  }
  auto body = [&]<class T>(type_tag<T>) -> status {
    auto out = tensor::uninitialized(a.type(), a.shape());
    apply_row<row_op::each>(a.flat<T>().data(), true, b.flat<T>().data(),
                            true, out.flat<T>().data(), out.num_elements(),
                            [](T x, T y) -> T {
                              if constexpr (Op == gradop::relu) // (dy, x)
                                return y > T(0) ? x : T(0);
                              else if constexpr (Op == gradop::sigmoid)
                                return y * x * (T(1) - x); // (y, dy)
                              else
                                return y * (T(1) - x * x); // (y, dy)
                            });
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == gradop::relu)
    return visit_numeric(ctx, a.type(), body);
  else
    return visit_float(ctx, a.type(), body);
}

// -- ArgMax -----------------------------------------------------------------------

status arg_max_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  auto& dim_t = ctx.inputs[1];
  dtype out_type;
  if (auto st = read_index_type(ctx, "output_type", dtype::int64, out_type);
      !st.ok())
    return st;
  if (dim_t.shape().rank() != 0)
    return invalid_argument(
      "dim must be a scalar, but received tensor of shape: "
      + dim_t.shape().to_string());
  int64_t dim = 0;
  if (auto st = read_int_scalar(ctx, dim_t, "dimension", dim); !st.ok())
    return st;
  auto& dims = x.shape().dims();
  auto rank = static_cast<int64_t>(dims.size());
  auto axis = dim < 0 ? dim + rank : dim;
  if (axis < 0 || axis >= rank)
    return invalid_argument("Expected dimension in the range ["
                            + std::to_string(-rank) + ", "
                            + std::to_string(rank) + "), but got "
                            + std::to_string(dim));
  auto a = static_cast<size_t>(axis);
  if (dims[a] == 0)
    return invalid_argument("Reduction axis " + std::to_string(dim)
                            + " is empty in shape " + x.shape().to_string());
  auto outer = product(dims, 0, a);
  auto n = dims[a];
  auto inner = product(dims, a + 1, dims.size());
  std::vector<int64_t> out_dims(dims.begin(), dims.begin() + axis);
  out_dims.insert(out_dims.end(), dims.begin() + axis + 1, dims.end());
  return visit_numeric(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    auto src = x.flat<T>().data();
    std::vector<int64_t> result(static_cast<size_t>(outer * inner), 0);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto base = src + o * n * inner + i;
        int64_t best = 0;
        // The first maximum wins, as in Eigen's argmax.
        for (int64_t k = 1; k < n; ++k)
          if (base[k * inner] > base[best * inner])
            best = k;
        result[static_cast<size_t>(o * inner + i)] = best;
      }
    }
    auto out = int_vector(out_type, result);
    ctx.outputs.push_back(out.reshaped(tensor_shape{out_dims}));
    return {};
  });
}

} // namespace

void register_nn_kernels(kernel_registry& registry) {
  constexpr auto unary = unary_contract;
  constexpr auto binary = binary_contract;
  add_kernel<softmax_kernel<false>, unary>(registry, "Softmax");
  add_kernel<softmax_kernel<true>, unary>(registry, "LogSoftmax");
  add_kernel<softmax_xent_kernel, binary>(registry,
                                          "SoftmaxCrossEntropyWithLogits");
  add_kernel<sparse_softmax_xent_kernel,
             inputs(2).type_attr("T", 0).type_attr("Tlabels", 1)>(
    registry, "SparseSoftmaxCrossEntropyWithLogits");
  add_kernel<l2_loss_kernel, unary>(registry, "L2Loss");
  add_kernel<bias_add_kernel, binary>(registry, "BiasAdd");
  add_kernel<bias_add_kernel, binary>(registry, "BiasAddV1");
  add_kernel<bias_add_grad_kernel, unary>(registry, "BiasAddGrad");
  add_kernel<unsorted_segment_sum_kernel, inputs(3).type_attr("T", 0)>(
    registry, "UnsortedSegmentSum");
  add_kernel<activation_grad_kernel<gradop::relu>, binary>(registry,
                                                           "ReluGrad");
  add_kernel<activation_grad_kernel<gradop::sigmoid>, binary>(registry,
                                                              "SigmoidGrad");
  add_kernel<activation_grad_kernel<gradop::tanh>, binary>(registry,
                                                           "TanhGrad");
  add_kernel<arg_max_kernel, inputs(2).type_attr("T", 0)>(registry, "ArgMax");
}

} // namespace actorflow::detail
