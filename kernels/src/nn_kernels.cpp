// Kernels for training, as TensorFlow 1.x defines them: softmax and the
// cross-entropies, L2Loss, BiasAdd and its gradient, Gather, segment sums,
// activation gradients, ZerosLike/OnesLike, and the shape helpers gradient
// graphs are built from (Shape, Size, Rank, Tile, Transpose, ExpandDims,
// Squeeze, Slice, BroadcastGradientArgs, ArgMax, ...).

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

// -- shared helpers -----------------------------------------------------------

int64_t product(const std::vector<int64_t>& dims, size_t first, size_t last) {
  int64_t n = 1;
  for (auto i = first; i < last; ++i)
    n *= dims[i];
  return n;
}

// Row-major strides of `dims`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    s[i - 1] = s[i] * dims[i];
  return s;
}

// Copies the elements of `src` at `base + sum(index[i] * strides[i])`, for
// every index over `dims` in row-major order, to consecutive `dst`
// elements. Transpose, Slice and Tile are each one such walk.
template <class T>
void strided_copy(const T* src, int64_t base, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& strides, T* dst) {
  auto count = product(dims, 0, dims.size());
  if (count == 0)
    return;
  if (dims.empty()) {
    *dst = src[base];
    return;
  }
  auto rank = dims.size();
  auto inner = dims.back();
  auto inner_stride = strides.back();
  std::vector<int64_t> index(rank - 1, 0);
  int64_t off = base;
  for (int64_t r = 0; r < count / inner; ++r) {
    const T* s = src + off;
    if (inner_stride == 1) {
      dst = std::copy_n(s, inner, dst);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        *dst++ = s[i * inner_stride];
    }
    for (size_t d = rank - 1; d-- > 0;) {
      off += strides[d];
      if (++index[d] < dims[d])
        break;
      off -= strides[d] * dims[d];
      index[d] = 0;
    }
  }
}

// TensorFlow's SliceDebugString: "[1]" or "[1,2]" for the element at flat
// position `i` of a tensor of `shape`; "" for a scalar.
std::string slice_debug_string(const tensor_shape& shape, int64_t i) {
  auto& dims = shape.dims();
  if (dims.empty())
    return "";
  std::vector<int64_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = dims[d] == 0 ? 0 : i % dims[d];
    i = dims[d] == 0 ? 0 : i / dims[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d > 0)
      s += ',';
    s += std::to_string(index[d]);
  }
  return s + "]";
}

// The dtype attribute `key` (e.g. out_type), `fallback` if absent; only
// int32 and int64 are allowed.
status read_index_type(const kernel_context& ctx, const std::string& key,
                       dtype fallback, dtype& out) {
  out = fallback;
  if (auto st = read_attr(ctx, key, out); !st.ok())
    return st;
  if (out != dtype::int32 && out != dtype::int64)
    return invalid_argument("attribute " + key + " of " + ctx.node.op
                            + " must be int32 or int64, got "
                            + std::string{to_string(out)});
  return {};
}

// A 1-D int32 or int64 tensor holding `values`.
tensor int_vector(dtype type, const std::vector<int64_t>& values) {
  tensor out{type, tensor_shape{static_cast<int64_t>(values.size())}};
  if (type == dtype::int32) {
    auto xs = out.flat<int32_t>();
    for (size_t i = 0; i < values.size(); ++i)
      xs[i] = static_cast<int32_t>(values[i]);
  } else {
    auto xs = out.flat<int64_t>();
    std::copy(values.begin(), values.end(), xs.begin());
  }
  return out;
}

tensor int_scalar(dtype type, int64_t value) {
  if (type == dtype::int32)
    return tensor::scalar<int32_t>(static_cast<int32_t>(value));
  return tensor::scalar<int64_t>(value);
}

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
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& logits = ctx.inputs[0];
  auto& labels = ctx.inputs[1];
  if (auto st = expect_input_type(ctx, 1, logits.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", logits.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& logits = ctx.inputs[0];
  auto& labels = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", logits.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "Tlabels", labels.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& t = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", t.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& value = ctx.inputs[0];
  auto& bias = ctx.inputs[1];
  if (auto st = expect_input_type(ctx, 1, value.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", value.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& grad = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", grad.type()); !st.ok())
    return st;
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

// -- Gather, GatherV2 -------------------------------------------------------------

template <bool HasAxis>
status gather_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, HasAxis ? 3 : 2); !st.ok())
    return st;
  auto& params = ctx.inputs[0];
  auto& indices = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "Tparams", params.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "Tindices", indices.type()); !st.ok())
    return st;
  if (params.shape().rank() < 1)
    return invalid_argument("params must be at least 1 dimensional");
  int64_t axis = 0;
  if constexpr (HasAxis) {
    auto& axis_t = ctx.inputs[2];
    if (axis_t.shape().rank() != 0)
      return invalid_argument("axis must be scalar");
    if (axis_t.type() != dtype::int32 && axis_t.type() != dtype::int64)
      return invalid_argument("axis must be int32 or int64.");
    if (auto st = read_int_scalar(ctx, axis_t, "axis", axis); !st.ok())
      return st;
  }
  std::vector<int64_t> idx;
  if (auto st = read_ints(ctx, indices, "indices", idx); !st.ok())
    return st;
  auto& pd = params.shape().dims();
  auto rank = static_cast<int64_t>(pd.size());
  if (axis < -rank || axis >= rank)
    return invalid_argument("Expected axis in the range ["
                            + std::to_string(-rank) + ", "
                            + std::to_string(rank) + "), but got "
                            + std::to_string(axis));
  if (axis < 0)
    axis += rank;
  auto a = static_cast<size_t>(axis);
  auto limit = pd[a];
  auto outer = product(pd, 0, a);
  auto inner = product(pd, a + 1, pd.size());
  std::vector<int64_t> out_dims(pd.begin(), pd.begin() + axis);
  auto& id = indices.shape().dims();
  out_dims.insert(out_dims.end(), id.begin(), id.end());
  out_dims.insert(out_dims.end(), pd.begin() + axis + 1, pd.end());
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] < 0 || idx[i] >= limit)
      return invalid_argument(
        "indices"
        + slice_debug_string(indices.shape(), static_cast<int64_t>(i))
        + " = " + std::to_string(idx[i]) + " is not in [0, "
        + std::to_string(limit) + ")");
  return visit_all(ctx, params.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{params.type(), tensor_shape{out_dims}};
    auto src = params.flat<T>().data();
    auto dst = out.flat<T>().data();
    if (inner > 0) {
      for (int64_t o = 0; o < outer; ++o)
        for (auto i : idx)
          dst = std::copy_n(src + (o * limit + i) * inner, inner, dst);
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- UnsortedSegmentSum -----------------------------------------------------------

status unsorted_segment_sum_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 3); !st.ok())
    return st;
  auto& data = ctx.inputs[0];
  auto& ids_t = ctx.inputs[1];
  auto& num_t = ctx.inputs[2];
  if (auto st = check_type_attr(ctx, "T", data.type()); !st.ok())
    return st;
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
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& a = ctx.inputs[0];
  auto& b = ctx.inputs[1];
  if (auto st = expect_input_type(ctx, 1, a.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", a.type()); !st.ok())
    return st;
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

// -- ZerosLike, OnesLike ----------------------------------------------------

template <int Value>
status fill_like_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  return visit_castable(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{x.type(), x.shape()};
    if constexpr (Value != 0) {
      auto o = out.flat<T>();
      std::fill(o.begin(), o.end(), static_cast<T>(Value));
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- Shape, Size, Rank ----------------------------------------------------------

status shape_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  dtype out_type;
  if (auto st = read_index_type(ctx, "out_type", dtype::int32, out_type);
      !st.ok())
    return st;
  auto& dims = ctx.inputs[0].shape().dims();
  if (out_type == dtype::int32) {
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] > std::numeric_limits<int32_t>::max())
        return invalid_argument("Shape output type is 32-bit  but dim "
                                + std::to_string(i) + " is "
                                + std::to_string(dims[i]));
  }
  ctx.outputs.push_back(int_vector(out_type, dims));
  return {};
}

status size_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  dtype out_type;
  if (auto st = read_index_type(ctx, "out_type", dtype::int32, out_type);
      !st.ok())
    return st;
  auto n = ctx.inputs[0].num_elements();
  if (out_type == dtype::int32 && n > std::numeric_limits<int32_t>::max())
    return invalid_argument("Number of elements was larger than representable "
                            "by 32-bit output type");
  ctx.outputs.push_back(int_scalar(out_type, n));
  return {};
}

status rank_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  ctx.outputs.push_back(
    tensor::scalar<int32_t>(ctx.inputs[0].shape().rank()));
  return {};
}

// -- Tile, Transpose, Slice -----------------------------------------------------

status tile_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& multiples_t = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  if (multiples_t.shape().rank() != 1)
    return invalid_argument("Expected multiples to be 1-D, but got shape "
                            + multiples_t.shape().to_string());
  auto& dims = x.shape().dims();
  if (static_cast<int64_t>(dims.size()) != multiples_t.num_elements())
    return invalid_argument(
      "Expected multiples argument to be a vector of length "
      + std::to_string(dims.size()) + " but got length "
      + std::to_string(multiples_t.shape().dim(0)));
  std::vector<int64_t> multiples;
  if (auto st = read_ints(ctx, multiples_t, "multiples", multiples); !st.ok())
    return st;
  std::vector<int64_t> out_dims;
  // The output in row-major order walks (multiple, dimension) pairs: the
  // copy of a dimension repeats it with stride 0.
  std::vector<int64_t> walk_dims;
  std::vector<int64_t> walk_strides;
  auto in_strides = strides_of(dims);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (multiples[i] < 0)
      return invalid_argument("Expected multiples[" + std::to_string(i)
                              + "] >= 0, but got "
                              + std::to_string(multiples[i]));
    out_dims.push_back(dims[i] * multiples[i]);
    walk_dims.push_back(multiples[i]);
    walk_strides.push_back(0);
    walk_dims.push_back(dims[i]);
    walk_strides.push_back(in_strides[i]);
  }
  tensor_shape out_shape;
  if (auto st = make_shape(out_dims, out_shape); !st.ok())
    return st;
  return visit_all(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{x.type(), out_shape};
    strided_copy(x.flat<T>().data(), 0, walk_dims, walk_strides,
                 out.flat<T>().data());
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

status transpose_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& perm_t = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  if (perm_t.shape().rank() != 1)
    return invalid_argument("perm must be a vector, not "
                            + perm_t.shape().to_string());
  std::vector<int64_t> perm;
  if (auto st = read_ints(ctx, perm_t, "perm", perm); !st.ok())
    return st;
  auto& dims = x.shape().dims();
  auto rank = static_cast<int64_t>(dims.size());
  if (static_cast<int64_t>(perm.size()) != rank)
    return invalid_argument("transpose expects a vector of size "
                            + std::to_string(rank)
                            + ". But input(1) is a vector of size "
                            + std::to_string(perm.size()));
  std::vector<bool> seen(dims.size(), false);
  for (auto d : perm) {
    if (d < 0 || d >= rank)
      return invalid_argument(std::to_string(d) + " is out of range [0 .. "
                              + std::to_string(rank) + ")");
    seen[static_cast<size_t>(d)] = true;
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      std::string joined;
      for (size_t k = 0; k < perm.size(); ++k)
        joined += (k > 0 ? "," : "") + std::to_string(perm[k]);
      return invalid_argument(std::to_string(i) + " is missing from {"
                              + joined + "}.");
    }
  }
  auto in_strides = strides_of(dims);
  std::vector<int64_t> out_dims;
  std::vector<int64_t> walk_strides;
  for (auto d : perm) {
    out_dims.push_back(dims[static_cast<size_t>(d)]);
    walk_strides.push_back(in_strides[static_cast<size_t>(d)]);
  }
  return visit_all(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{x.type(), tensor_shape{out_dims}};
    strided_copy(x.flat<T>().data(), 0, out_dims, walk_strides,
                 out.flat<T>().data());
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

status slice_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 3); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& begin_t = ctx.inputs[1];
  auto& size_in = ctx.inputs[2];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  auto& dims = x.shape().dims();
  auto rank = static_cast<int64_t>(dims.size());
  if (begin_t.shape().rank() != 1 || size_in.shape().rank() != 1
      || begin_t.num_elements() != rank || size_in.num_elements() != rank)
    return invalid_argument(
      "Expected begin and size arguments to be 1-D tensors of size "
      + std::to_string(rank) + ", but got shapes "
      + begin_t.shape().to_string() + " and " + size_in.shape().to_string()
      + " instead.");
  std::vector<int64_t> begin;
  std::vector<int64_t> size;
  if (auto st = read_ints(ctx, begin_t, "begin", begin); !st.ok())
    return st;
  if (auto st = read_ints(ctx, size_in, "size", size); !st.ok())
    return st;
  auto in_strides = strides_of(dims);
  int64_t base = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    auto b = begin[i];
    auto s = size[i];
    if (s == -1)
      s = dims[i] - b;
    if (b < 0 || b > dims[i])
      return invalid_argument("Expected begin[" + std::to_string(i)
                              + "] in [0, " + std::to_string(dims[i])
                              + "], but got " + std::to_string(b));
    if (s < 0 || b + s > dims[i])
      return invalid_argument("Expected size[" + std::to_string(i)
                              + "] in [0, " + std::to_string(dims[i] - b)
                              + "], but got " + std::to_string(s));
    size[i] = s;
    base += b * in_strides[i];
  }
  return visit_all(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{x.type(), tensor_shape{size}};
    if (out.num_elements() > 0)
      strided_copy(x.flat<T>().data(), base, size, in_strides,
                   out.flat<T>().data());
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- ExpandDims, Squeeze --------------------------------------------------------

status expand_dims_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& dim_t = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  if (dim_t.num_elements() != 1)
    return invalid_argument("'dim' must be a tensor with a single value");
  std::vector<int64_t> dim_v;
  if (auto st = read_ints(ctx, dim_t, "dim", dim_v); !st.ok())
    return st;
  auto dim = dim_v[0];
  auto rank = static_cast<int64_t>(x.shape().rank());
  if (dim < -1 - rank || dim > rank)
    return invalid_argument("Tried to expand dim index " + std::to_string(dim)
                            + " for tensor with " + std::to_string(rank)
                            + " dimensions.");
  if (dim < 0)
    dim += rank + 1;
  auto dims = x.shape().dims();
  dims.insert(dims.begin() + dim, 1);
  ctx.outputs.push_back(x.reshaped(tensor_shape{std::move(dims)}));
  return {};
}

status squeeze_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  std::vector<int64_t> squeeze_dims;
  if (auto st = read_attr(ctx, "squeeze_dims", squeeze_dims); !st.ok())
    return st;
  auto& dims = x.shape().dims();
  auto rank = static_cast<int64_t>(dims.size());
  std::vector<bool> chosen(dims.size(), false);
  for (auto d : squeeze_dims) {
    if (d < -rank || d >= rank)
      return invalid_argument("Tried to squeeze dim index "
                              + std::to_string(d) + " for tensor with "
                              + std::to_string(rank) + " dimensions.");
    chosen[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  }
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (squeeze_dims.empty()) {
      if (dims[i] != 1)
        out_dims.push_back(dims[i]);
    } else if (chosen[i]) {
      if (dims[i] != 1)
        return invalid_argument("Can not squeeze dim[" + std::to_string(i)
                                + "], expected a dimension of 1, got "
                                + std::to_string(dims[i]));
    } else {
      out_dims.push_back(dims[i]);
    }
  }
  ctx.outputs.push_back(x.reshaped(tensor_shape{std::move(out_dims)}));
  return {};
}

// -- ArgMax -----------------------------------------------------------------------

status arg_max_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& dim_t = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
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

// -- BroadcastGradientArgs ------------------------------------------------------

// TensorFlow's BCast::grad_x_reduce_idx and grad_y_reduce_idx: the output
// dimensions each operand was broadcast along (including those where both
// are 1), none when the shapes are identical.
status broadcast_gradient_args_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto type = ctx.inputs[0].type();
  if (auto st = expect_input_type(ctx, 1, type); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", type); !st.ok())
    return st;
  std::vector<std::vector<int64_t>> shapes(2);
  for (size_t i = 0; i < 2; ++i) {
    auto& in = ctx.inputs[i];
    if (in.shape().rank() != 1)
      return invalid_argument("In[" + std::to_string(i)
                              + "] must be a vector." + in.shape().to_string());
    if (auto st = read_ints(ctx, in, "shape", shapes[i]); !st.ok())
      return st;
  }
  auto& sx = shapes[0];
  auto& sy = shapes[1];
  std::vector<int64_t> rx;
  std::vector<int64_t> ry;
  if (sx != sy) {
    auto n = std::max(sx.size(), sy.size());
    for (size_t i = 0; i < n; ++i) {
      // Dimension i of the output, aligned from the right.
      int64_t xi = i + sx.size() >= n ? sx[i + sx.size() - n] : 1;
      int64_t yi = i + sy.size() >= n ? sy[i + sy.size() - n] : 1;
      auto d = static_cast<int64_t>(i);
      if (xi == yi) {
        if (xi == 1) {
          rx.push_back(d);
          ry.push_back(d);
        }
      } else if (xi == 1) {
        rx.push_back(d);
      } else if (yi == 1) {
        ry.push_back(d);
      } else {
        auto join = [](const std::vector<int64_t>& v) {
          std::string s;
          for (size_t k = 0; k < v.size(); ++k)
            s += (k > 0 ? "," : "") + std::to_string(v[k]);
          return s;
        };
        return invalid_argument("Incompatible shapes: [" + join(sx)
                                + "] vs. [" + join(sy) + "]");
      }
    }
  }
  ctx.outputs.push_back(int_vector(type, rx));
  ctx.outputs.push_back(int_vector(type, ry));
  return {};
}

} // namespace

void register_nn_kernels(kernel_registry& registry) {
  add_kernel<softmax_kernel<false>>(registry, "Softmax");
  add_kernel<softmax_kernel<true>>(registry, "LogSoftmax");
  add_kernel<softmax_xent_kernel>(registry, "SoftmaxCrossEntropyWithLogits");
  add_kernel<sparse_softmax_xent_kernel>(registry,
                                         "SparseSoftmaxCrossEntropyWithLogits");
  add_kernel<l2_loss_kernel>(registry, "L2Loss");
  add_kernel<bias_add_kernel>(registry, "BiasAdd");
  add_kernel<bias_add_kernel>(registry, "BiasAddV1");
  add_kernel<bias_add_grad_kernel>(registry, "BiasAddGrad");
  add_kernel<gather_kernel<false>>(registry, "Gather");
  add_kernel<gather_kernel<true>>(registry, "GatherV2");
  add_kernel<unsorted_segment_sum_kernel>(registry, "UnsortedSegmentSum");
  add_kernel<activation_grad_kernel<gradop::relu>>(registry, "ReluGrad");
  add_kernel<activation_grad_kernel<gradop::sigmoid>>(registry, "SigmoidGrad");
  add_kernel<activation_grad_kernel<gradop::tanh>>(registry, "TanhGrad");
  add_kernel<fill_like_kernel<0>>(registry, "ZerosLike");
  add_kernel<fill_like_kernel<1>>(registry, "OnesLike");
  add_kernel<shape_kernel>(registry, "Shape");
  add_kernel<size_kernel>(registry, "Size");
  add_kernel<rank_kernel>(registry, "Rank");
  add_kernel<tile_kernel>(registry, "Tile");
  add_kernel<transpose_kernel>(registry, "Transpose");
  add_kernel<slice_kernel>(registry, "Slice");
  add_kernel<expand_dims_kernel>(registry, "ExpandDims");
  add_kernel<squeeze_kernel>(registry, "Squeeze");
  add_kernel<arg_max_kernel>(registry, "ArgMax");
  add_kernel<broadcast_gradient_args_kernel>(registry,
                                             "BroadcastGradientArgs");
}

} // namespace actorflow::detail
