// Kernels that produce, forward or rearrange tensors without arithmetic
// (TensorFlow's array_ops): Const, Identity, NoOp, Split, ConcatV2, Pack,
// Reshape, Fill, ZerosLike, OnesLike, the shape helpers gradient graphs are
// built from (Shape, Size, Rank, ExpandDims, Squeeze,
// BroadcastGradientArgs), Tile, Transpose, Slice and Gather. All work for
// every dtype they move, strings included.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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
  ctx.outputs.push_back(ctx.inputs[0]);
  return {};
}

status no_op_kernel(kernel_context&) {
  return {};
}

// -- Split, ConcatV2, Pack --------------------------------------------------

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
  auto& value = ctx.inputs[1];
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
  std::vector<const tensor*> values;
  for (size_t i = 0; i + 1 < ctx.inputs.size(); ++i)
    values.push_back(&ctx.inputs[i]);
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
    out_dims[a] = add_without_overflow(out_dims[a], s.dims()[a]);
    if (out_dims[a] < 0)
      return invalid_argument("ConcatOp : the output's dimension "
                              + std::to_string(a)
                              + " overflows int64 at shape["
                              + std::to_string(k) + "] = " + s.to_string());
    blocks.push_back(product(s.dims(), a, s.dims().size()));
  }
  auto outer = product(first.dims(), 0, a);
  return emit_interleaved(ctx, values, blocks, outer, out_dims);
}

status pack_kernel(kernel_context& ctx) {
  std::vector<const tensor*> values;
  for (auto& in : ctx.inputs)
    values.push_back(&in);
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
  auto& in = ctx.inputs[0];
  auto& sizes = ctx.inputs[1];
  if (sizes.shape().rank() != 1)
    return invalid_argument("sizes input must be 1-D, not shape "
                            + sizes.shape().to_string());
  std::vector<int64_t> dims;
  if (auto st = read_ints(ctx, sizes, "shape", dims); !st.ok())
    return st;
  int64_t unknown = -1;
  // The requested dims with the unknown one as 1: their element count,
  // checked as every shape's (checked_num_elements).
  auto known_dims = dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    auto d = dims[i];
    if (d == -1) {
      if (unknown >= 0)
        return invalid_argument("Only one input size may be -1, not both "
                                + std::to_string(unknown) + " and "
                                + std::to_string(i));
      unknown = static_cast<int64_t>(i);
      known_dims[i] = 1;
    } else if (d < 0) {
      return invalid_argument("Size " + std::to_string(i)
                              + " must be non-negative, not "
                              + std::to_string(d));
    }
  }
  int64_t known = 0;
  if (auto st = checked_num_elements(known_dims, known); !st.ok())
    return invalid_argument("Requested shape " + tensor_shape{dims}.to_string()
                            + ": " + st.message());
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
  auto& value = ctx.inputs[1];
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
    // Throws InvalidArgument (guarded) when the bytes overflow; every
    // element is written below: no zero fill first.
    auto out = tensor::uninitialized(value.type(), std::move(shape));
    auto xs = out.flat<T>();
    std::fill(xs.begin(), xs.end(), value.flat<T>()[0]);
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- strided walks ------------------------------------------------------------

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

tensor int_scalar(dtype type, int64_t value) {
  if (type == dtype::int32)
    return tensor::scalar<int32_t>(static_cast<int32_t>(value));
  return tensor::scalar<int64_t>(value);
}

// -- ZerosLike, OnesLike ----------------------------------------------------

template <int Value>
status fill_like_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
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
  ctx.outputs.push_back(
    tensor::scalar<int32_t>(ctx.inputs[0].shape().rank()));
  return {};
}

// -- Tile, Transpose, Slice -----------------------------------------------------

status tile_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  auto& multiples_t = ctx.inputs[1];
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
    auto d = multiply_without_overflow(dims[i], multiples[i]);
    if (d < 0)
      return invalid_argument(
        "Encountered overflow when multiplying " + std::to_string(dims[i])
        + " with " + std::to_string(multiples[i])
        + ", result: -1 (Tile's output dimension " + std::to_string(i)
        + ")");
    out_dims.push_back(d);
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
  auto& x = ctx.inputs[0];
  auto& perm_t = ctx.inputs[1];
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
  auto& x = ctx.inputs[0];
  auto& begin_t = ctx.inputs[1];
  auto& size_in = ctx.inputs[2];
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
  auto& x = ctx.inputs[0];
  auto& dim_t = ctx.inputs[1];
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
  auto& x = ctx.inputs[0];
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

// -- Gather, GatherV2 -------------------------------------------------------------

template <bool HasAxis>
status gather_kernel(kernel_context& ctx) {
  auto& params = ctx.inputs[0];
  auto& indices = ctx.inputs[1];
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

// -- BroadcastGradientArgs ------------------------------------------------------

// TensorFlow's BCast::grad_x_reduce_idx and grad_y_reduce_idx: the output
// dimensions each operand was broadcast along (including those where both
// are 1), none when the shapes are identical.
status broadcast_gradient_args_kernel(kernel_context& ctx) {
  auto type = ctx.inputs[0].type();
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

void register_array_kernels(kernel_registry& registry) {
  constexpr auto unary = unary_contract;
  // Two inputs, T naming the first's or the second's dtype.
  constexpr auto first_of_2 = inputs(2).type_attr("T", 0);
  constexpr auto second_of_2 = inputs(2).type_attr("T", 1);
  constexpr auto gather = inputs(2).type_attr("Tparams", 0).type_attr(
    "Tindices", 1);
  constexpr auto gather_v2 = inputs(3).type_attr("Tparams", 0).type_attr(
    "Tindices", 1);
  add_kernel<const_kernel>(registry, "Const");
  add_kernel<identity_kernel, unary>(registry, "Identity");
  // The default flows through unless fed (a fed tensor is an _Arg).
  add_kernel<identity_kernel, inputs(1).type_attr("dtype", 0)>(
    registry, "PlaceholderWithDefault");
  add_kernel<no_op_kernel>(registry, "NoOp");
  add_kernel<split_kernel, second_of_2>(registry, "Split");
  add_kernel<concat_kernel,
             min_inputs(2).list(1, "values").type_attr("T", 0)>(registry,
                                                                 "ConcatV2");
  add_kernel<pack_kernel, min_inputs(1).list(0, "values").type_attr("T", 0)>(
    registry, "Pack");
  add_kernel<reshape_kernel, first_of_2>(registry, "Reshape");
  add_kernel<fill_kernel, second_of_2>(registry, "Fill");
  add_kernel<gather_kernel<false>, gather>(registry, "Gather");
  add_kernel<gather_kernel<true>, gather_v2>(registry, "GatherV2");
  add_kernel<fill_like_kernel<0>, unary>(registry, "ZerosLike");
  add_kernel<fill_like_kernel<1>, unary>(registry, "OnesLike");
  add_kernel<shape_kernel, inputs(1)>(registry, "Shape");
  add_kernel<size_kernel, inputs(1)>(registry, "Size");
  add_kernel<rank_kernel, inputs(1)>(registry, "Rank");
  add_kernel<tile_kernel, first_of_2>(registry, "Tile");
  add_kernel<transpose_kernel, first_of_2>(registry, "Transpose");
  add_kernel<slice_kernel, inputs(3).type_attr("T", 0)>(registry, "Slice");
  add_kernel<expand_dims_kernel, first_of_2>(registry, "ExpandDims");
  add_kernel<squeeze_kernel, unary>(registry, "Squeeze");
  add_kernel<broadcast_gradient_args_kernel, binary_contract>(
    registry, "BroadcastGradientArgs");
}

} // namespace actorflow::detail
