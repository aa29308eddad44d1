// Kernels that produce, forward, rearrange or convert tensors without
// arithmetic: Const, Identity, NoOp, Print, Split, ConcatV2, Pack, Reshape,
// Cast and Fill. All but Cast work for every dtype, strings included.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/graph/text_util.hpp"
#include "kernels_impl.hpp"

namespace actorflow::detail {

namespace {

// -- Const, Identity, NoOp --------------------------------------------------

status const_kernel(kernel_context& ctx) {
  tensor value;
  if (auto st = read_required_attr(ctx, "value", value); !st.ok())
    return st;
  if (!value.valid())
    return invalid_argument("Const has an invalid value");
  auto declared = value.type();
  if (auto st = read_attr(ctx, "dtype", declared); !st.ok())
    return st;
  if (declared != value.type())
    return invalid_argument("Type mismatch between value ("
                            + std::string{to_string(value.type())}
                            + ") and dtype ("
                            + std::string{to_string(declared)} + ")");
  // Tensors are immutable once shared, so the attribute's buffer is the
  // output.
  ctx.outputs.push_back(std::move(value));
  return {};
}

status identity_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", ctx.inputs[0].type()); !st.ok())
    return st;
  ctx.outputs.push_back(ctx.inputs[0]);
  return {};
}

status no_op_kernel(kernel_context&) {
  return {};
}

// -- Print ------------------------------------------------------------------

// TensorFlow's StrCat of a float: %g with FLT_DIG (DBL_DIG) digits, or
// FLT_DIG + 3 (DBL_DIG + 2) when that does not read back exactly.
template <class T>
std::string format_float(T x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x < 0 ? "-inf" : "inf";
  constexpr bool is_float = std::is_same_v<T, float>;
  constexpr int digits = is_float ? FLT_DIG : DBL_DIG;
  constexpr int more_digits = is_float ? FLT_DIG + 3 : DBL_DIG + 2;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(x));
  if (static_cast<T>(std::strtod(buf, nullptr)) != x)
    std::snprintf(buf, sizeof(buf), "%.*g", more_digits,
                  static_cast<double>(x));
  return buf;
}

template <class T>
std::string format_element(const T& x) {
  if constexpr (std::is_floating_point_v<T>)
    return format_float(x);
  else if constexpr (std::is_same_v<T, std::string>)
    return c_escape(x);
  else if constexpr (std::is_same_v<T, bool>)
    return x ? "1" : "0"; // TF 1.x prints bools as numbers
  else
    return std::to_string(x);
}

// TensorFlow 1.x's Tensor::SummarizeValue: the first `limit` elements in
// row-major order, separated by spaces, "..." if some were left out.
status summarize(const kernel_context& ctx, const tensor& t, int64_t limit,
                 std::string& out) {
  return visit_all(ctx, t.type(), [&]<class T>(type_tag<T>) -> status {
    auto xs = t.flat<T>();
    auto n = static_cast<int64_t>(xs.size());
    auto shown = limit < 0 ? n : std::min(limit, n);
    for (int64_t i = 0; i < shown; ++i) {
      if (i > 0)
        out += ' ';
      out += format_element(xs[static_cast<size_t>(i)]);
    }
    if (shown < n)
      out += "...";
    return {};
  });
}

status print_kernel(kernel_context& ctx) {
  if (auto st = expect_min_inputs(ctx, 1); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", ctx.inputs[0].type()); !st.ok())
    return st;
  std::string message;
  int64_t summarize_n = 3;
  if (auto st = read_attr(ctx, "message", message); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "summarize", summarize_n); !st.ok())
    return st;
  // `first_n` is accepted but not honoured: kernels keep no state between
  // runs, so every run prints (documented in docs/OPS.md).
  int64_t first_n = -1;
  if (auto st = read_attr(ctx, "first_n", first_n); !st.ok())
    return st;
  auto line = message;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    line += '[';
    if (auto st = summarize(ctx, ctx.inputs[i], summarize_n, line); !st.ok())
      return st;
    line += ']';
  }
  if (ctx.print)
    ctx.print(line);
  else
    std::cerr << line << std::endl;
  ctx.outputs.push_back(ctx.inputs[0]);
  return {};
}

// -- Split, ConcatV2, Pack --------------------------------------------------

int64_t product(const std::vector<int64_t>& dims, size_t first, size_t last) {
  int64_t n = 1;
  for (auto i = first; i < last; ++i)
    n *= dims[i];
  return n;
}

// Interleaves blocks: for each of `outer` rounds, copies the next
// block_sizes[k] elements of each input k, in order, to the output.
template <class T>
void interleave(const std::vector<const tensor*>& inputs,
                const std::vector<int64_t>& block_sizes, int64_t outer,
                tensor& out) {
  auto dst = out.flat<T>().data();
  std::vector<const T*> srcs;
  for (auto in : inputs)
    srcs.push_back(in->flat<T>().data());
  for (int64_t i = 0; i < outer; ++i) {
    for (size_t k = 0; k < srcs.size(); ++k) {
      dst = std::copy_n(srcs[k], block_sizes[k], dst);
      srcs[k] += block_sizes[k];
    }
  }
}

status split_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& value = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", value.type()); !st.ok())
    return st;
  int64_t num_split = 0;
  if (auto st = read_required_attr(ctx, "num_split", num_split); !st.ok())
    return st;
  if (num_split < 1)
    return invalid_argument("num_split must be at least 1, got "
                            + std::to_string(num_split));
  int64_t axis = 0;
  if (auto st = read_int_scalar(ctx, ctx.inputs[0], "split_dim", axis);
      !st.ok())
    return st;
  auto rank = static_cast<int64_t>(value.shape().rank());
  if (axis < -rank || axis >= rank)
    return invalid_argument("-input rank(-" + std::to_string(rank)
                            + ") <= split_dim < input rank ("
                            + std::to_string(rank) + "), but got "
                            + std::to_string(axis));
  if (axis < 0)
    axis += rank;
  auto dims = value.shape().dims();
  auto a = static_cast<size_t>(axis);
  if (dims[a] % num_split != 0)
    return invalid_argument(
      "Number of ways to split should evenly divide the split dimension, "
      "but got split_dim "
      + std::to_string(axis) + " (size = " + std::to_string(dims[a])
      + ") and num_split " + std::to_string(num_split));
  if (num_split == 1) {
    ctx.outputs.push_back(value);
    return {};
  }
  auto rows = dims[a] / num_split;
  if (product(dims, 0, a) == 1 && dims[a] > 0
      && value.type() != dtype::string) {
    // Row blocks are contiguous: views of the input, nothing copied.
    auto lead = dims;
    lead.erase(lead.begin(), lead.begin() + static_cast<std::ptrdiff_t>(a));
    auto whole = value.reshaped(tensor_shape{lead});
    auto part_dims = dims;
    part_dims[a] = rows;
    for (int64_t k = 0; k < num_split; ++k)
      ctx.outputs.push_back(whole.slice(k * rows, (k + 1) * rows)
                              .reshaped(tensor_shape{part_dims}));
    return {};
  }
  return visit_all(ctx, value.type(), [&]<class T>(type_tag<T>) -> status {
    auto outer = product(dims, 0, a);
    auto part = rows * product(dims, a + 1, dims.size());
    auto part_dims = dims;
    part_dims[a] /= num_split;
    auto src = value.flat<T>().data();
    // Every element is copied in below: no zero fill first.
    for (int64_t k = 0; k < num_split; ++k)
      ctx.outputs.push_back(
        tensor::uninitialized(value.type(), tensor_shape{part_dims}));
    std::vector<T*> dsts;
    for (auto& out : ctx.outputs)
      dsts.push_back(out.flat<T>().data());
    for (int64_t i = 0; i < outer; ++i) {
      for (auto& dst : dsts) {
        dst = std::copy_n(src, part, dst);
        src += part;
      }
    }
    return {};
  });
}

// Checks that all `values` share the first one's dtype (and the T attr).
status check_same_types(const kernel_context& ctx,
                        const std::vector<const tensor*>& values) {
  for (size_t i = 1; i < values.size(); ++i)
    if (auto st = expect_input_type(ctx, i, values[0]->type()); !st.ok())
      return st;
  if (auto st = check_type_attr(ctx, "T", values[0]->type()); !st.ok())
    return st;
  int64_t n = static_cast<int64_t>(values.size());
  if (auto st = read_attr(ctx, "N", n); !st.ok())
    return st;
  if (n != static_cast<int64_t>(values.size()))
    return invalid_argument("attribute N of " + ctx.node.op + " is "
                            + std::to_string(n) + " but it has "
                            + std::to_string(values.size()) + " values");
  return {};
}

// The output of ConcatV2 and Pack: `outer` rounds of one block from each
// value in turn, shaped `out_dims`.
status emit_interleaved(kernel_context& ctx,
                        const std::vector<const tensor*>& values,
                        const std::vector<int64_t>& blocks, int64_t outer,
                        const std::vector<int64_t>& out_dims) {
  auto type = values[0]->type();
  return visit_all(ctx, type, [&]<class T>(type_tag<T>) -> status {
    tensor out{type, tensor_shape{out_dims}};
    interleave<T>(values, blocks, outer, out);
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

status concat_kernel(kernel_context& ctx) {
  if (auto st = expect_min_inputs(ctx, 2); !st.ok())
    return st;
  std::vector<const tensor*> values;
  for (size_t i = 0; i + 1 < ctx.inputs.size(); ++i)
    values.push_back(&ctx.inputs[i]);
  if (auto st = check_same_types(ctx, values); !st.ok())
    return st;
  int64_t axis = 0;
  if (auto st = read_int_scalar(ctx, ctx.inputs.back(), "axis", axis);
      !st.ok())
    return st;
  auto& first = values[0]->shape();
  auto rank = static_cast<int64_t>(first.rank());
  if (rank == 0)
    return invalid_argument(
      "ConcatOp : Can't concatenate scalars (use tf.stack instead)");
  if (axis < -rank || axis >= rank)
    return invalid_argument(
      "ConcatOp : Expected concatenating dimensions in the range ["
      + std::to_string(-rank) + ", " + std::to_string(rank) + "), but got "
      + std::to_string(axis));
  if (axis < 0)
    axis += rank;
  auto a = static_cast<size_t>(axis);
  auto out_dims = first.dims();
  out_dims[a] = 0;
  std::vector<int64_t> blocks;
  for (size_t k = 0; k < values.size(); ++k) {
    auto& s = values[k]->shape();
    if (s.rank() != first.rank())
      return invalid_argument(
        "ConcatOp : Ranks of all input tensors should match: shape[0] = "
        + first.to_string() + " vs. shape[" + std::to_string(k)
        + "] = " + s.to_string());
    for (size_t d = 0; d < out_dims.size(); ++d)
      if (d != a && s.dims()[d] != first.dims()[d])
        return invalid_argument(
          "ConcatOp : Dimensions of inputs should match: shape[0] = "
          + first.to_string() + " vs. shape[" + std::to_string(k)
          + "] = " + s.to_string());
    out_dims[a] += s.dims()[a];
    blocks.push_back(product(s.dims(), a, s.dims().size()));
  }
  auto outer = product(first.dims(), 0, a);
  return emit_interleaved(ctx, values, blocks, outer, out_dims);
}

status pack_kernel(kernel_context& ctx) {
  if (auto st = expect_min_inputs(ctx, 1); !st.ok())
    return st;
  std::vector<const tensor*> values;
  for (auto& in : ctx.inputs)
    values.push_back(&in);
  if (auto st = check_same_types(ctx, values); !st.ok())
    return st;
  int64_t axis = 0;
  if (auto st = read_attr(ctx, "axis", axis); !st.ok())
    return st;
  auto& first = values[0]->shape();
  auto out_rank = static_cast<int64_t>(first.rank()) + 1;
  if (axis < -out_rank || axis >= out_rank)
    return invalid_argument("axis = " + std::to_string(axis) + " not in ["
                            + std::to_string(-out_rank) + ", "
                            + std::to_string(out_rank) + ")");
  if (axis < 0)
    axis += out_rank;
  for (size_t k = 1; k < values.size(); ++k)
    if (!(values[k]->shape() == first))
      return invalid_argument(
        "Shapes of all inputs must match: values[0].shape = "
        + first.to_string() + " != values[" + std::to_string(k)
        + "].shape = " + values[k]->shape().to_string());
  auto a = static_cast<size_t>(axis);
  auto out_dims = first.dims();
  out_dims.insert(out_dims.begin() + axis,
                  static_cast<int64_t>(values.size()));
  auto outer = product(first.dims(), 0, a);
  std::vector<int64_t> blocks(values.size(),
                              product(first.dims(), a, first.dims().size()));
  return emit_interleaved(ctx, values, blocks, outer, out_dims);
}

// -- Reshape, Fill ----------------------------------------------------------

status reshape_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& in = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", in.type()); !st.ok())
    return st;
  auto& sizes = ctx.inputs[1];
  if (sizes.shape().rank() != 1)
    return invalid_argument("sizes input must be 1-D, not shape "
                            + sizes.shape().to_string());
  std::vector<int64_t> dims;
  if (auto st = read_ints(ctx, sizes, "shape", dims); !st.ok())
    return st;
  int64_t unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    auto d = dims[i];
    if (d == -1) {
      if (unknown >= 0)
        return invalid_argument("Only one input size may be -1, not both "
                                + std::to_string(unknown) + " and "
                                + std::to_string(i));
      unknown = static_cast<int64_t>(i);
    } else if (d < 0) {
      return invalid_argument("Size " + std::to_string(i)
                              + " must be non-negative, not "
                              + std::to_string(d));
    } else {
      if (d > 0 && known > std::numeric_limits<int64_t>::max() / d)
        return invalid_argument("Requested shape "
                                + tensor_shape{dims}.to_string()
                                + " has too many elements");
      known *= d;
    }
  }
  auto n = in.num_elements();
  if (unknown >= 0) {
    if (known == 0) {
      if (n != 0)
        return invalid_argument(
          "Input to reshape is a tensor with " + std::to_string(n)
          + " values, but the requested shape has 0");
      return invalid_argument(
        "Reshape cannot infer the missing input size for an empty tensor "
        "unless all specified input sizes are non-zero");
    }
    if (n % known != 0)
      return invalid_argument("Input to reshape is a tensor with "
                              + std::to_string(n)
                              + " values, but the requested shape requires "
                                "a multiple of "
                              + std::to_string(known));
    dims[static_cast<size_t>(unknown)] = n / known;
  } else if (known != n) {
    return invalid_argument("Input to reshape is a tensor with "
                            + std::to_string(n)
                            + " values, but the requested shape has "
                            + std::to_string(known));
  }
  ctx.outputs.push_back(in.reshaped(tensor_shape{std::move(dims)}));
  return {};
}

status fill_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& value = ctx.inputs[1];
  if (auto st = check_type_attr(ctx, "T", value.type()); !st.ok())
    return st;
  std::vector<int64_t> dims;
  if (auto st = read_int_vector(ctx, ctx.inputs[0], "dims", dims); !st.ok())
    return st;
  if (value.shape().rank() != 0)
    return invalid_argument("value must be a scalar, got shape "
                            + value.shape().to_string());
  tensor_shape shape;
  if (auto st = make_shape(dims, shape); !st.ok())
    return st;
  return visit_all(ctx, value.type(), [&]<class T>(type_tag<T>) -> status {
    tensor out{value.type(), std::move(shape)};
    auto xs = out.flat<T>();
    std::fill(xs.begin(), xs.end(), value.flat<T>()[0]);
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- Cast -------------------------------------------------------------------

// One element converted as TensorFlow does, except that conversions C++
// leaves undefined are defined here: float-to-integer maps NaN to 0 and
// saturates out-of-range values; double-to-float overflows to infinity.
template <class D, class S>
D convert(S x) {
  if constexpr (std::is_same_v<D, bool>) {
    return x != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (std::isnan(x))
      return D(0);
    // Both bounds are powers of two, so exactly representable in S.
    constexpr auto lo = static_cast<S>(std::numeric_limits<D>::min());
    constexpr auto hi = static_cast<S>(std::numeric_limits<D>::max());
    if (x <= lo)
      return std::numeric_limits<D>::min();
    if (x >= hi)
      return std::numeric_limits<D>::max();
    return static_cast<D>(x);
  } else if constexpr (std::is_same_v<S, double> && std::is_same_v<D, float>) {
    // From FLT_MAX + half an ulp on, IEEE rounding gives infinity; spelled
    // out because C++ leaves the conversion of such values undefined.
    if (std::fabs(x) >= 0x1.ffffffp127)
      return x < 0 ? -std::numeric_limits<float>::infinity()
                   : std::numeric_limits<float>::infinity();
    return static_cast<float>(x);
  } else {
    return static_cast<D>(x);
  }
}

status cast_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "SrcT", x.type()); !st.ok())
    return st;
  dtype dst = dtype::invalid;
  if (auto st = read_required_attr(ctx, "DstT", dst); !st.ok())
    return st;
  if (dst == x.type() && dst != dtype::invalid) {
    ctx.outputs.push_back(x);
    return {};
  }
  if (x.type() == dtype::string || dst == dtype::string)
    return invalid_argument("Unsupported cast from "
                            + std::string{to_string(x.type())} + " to "
                            + std::string{to_string(dst)});
  return visit_castable(ctx, x.type(), [&]<class S>(type_tag<S>) -> status {
    return visit_castable(ctx, dst, [&]<class D>(type_tag<D>) -> status {
      tensor out{dst, x.shape()};
      auto src = x.flat<S>();
      auto res = out.flat<D>();
      for (size_t i = 0; i < src.size(); ++i)
        res[i] = convert<D>(src[i]);
      ctx.outputs.push_back(std::move(out));
      return {};
    });
  });
}

} // namespace

void register_array_kernels(kernel_registry& registry) {
  add_kernel<const_kernel>(registry, "Const");
  add_kernel<identity_kernel>(registry, "Identity");
  add_kernel<no_op_kernel>(registry, "NoOp");
  add_kernel<print_kernel>(registry, "Print");
  add_kernel<split_kernel>(registry, "Split");
  add_kernel<concat_kernel>(registry, "ConcatV2");
  add_kernel<pack_kernel>(registry, "Pack");
  add_kernel<reshape_kernel>(registry, "Reshape");
  add_kernel<fill_kernel>(registry, "Fill");
  add_kernel<cast_kernel>(registry, "Cast");
}

} // namespace actorflow::detail
