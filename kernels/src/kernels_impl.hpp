#pragma once

// Private helpers shared by the built-in kernel translation units: dtype
// dispatch, input/attribute checks that report statuses instead of
// throwing, the contracts kernels declare at registration, and the guard
// every registered kernel runs under, which checks its contract.

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/graph/tensor_memory.hpp"
#include "actorflow/kernels/kernel.hpp"

namespace Eigen {
struct half;
} // namespace Eigen

namespace actorflow::detail {

/// Registers the element-wise math (arithmetic, comparisons, Maximum,
/// Minimum, unary math, Select, AddN), Cast, MatMul and the reductions.
void register_math_kernels(kernel_registry& registry);

/// Registers the array kernels: Const, Identity, NoOp, Split, ConcatV2,
/// Pack, Reshape, Fill, ZerosLike, OnesLike, Shape, Size, Rank, Tile,
/// Transpose, Slice, ExpandDims, Squeeze, Gather, GatherV2 and
/// BroadcastGradientArgs.
void register_array_kernels(kernel_registry& registry);

/// Registers Print and Assert.
void register_logging_kernels(kernel_registry& registry);

/// Registers RandomStandardNormal, TruncatedNormal and RandomUniform.
void register_random_kernels(kernel_registry& registry);

/// Registers the neural-network and gradient kernels (softmax and
/// cross-entropies, L2Loss, BiasAdd and its gradient, UnsortedSegmentSum,
/// activation gradients, ArgMax).
void register_nn_kernels(kernel_registry& registry);

/// Registers Conv2D, its two backprops, MaxPool and MaxPoolGrad.
void register_conv_kernels(kernel_registry& registry);

/// Carries an element type into a generic lambda: `[&]<class T>(type_tag<T>)`.
template <class T>
struct type_tag {
  using type = T;
};

/// Integer Add/Sub/Mul/Neg/Square/Sum/MatMul run on the unsigned
/// counterpart: two's complement arithmetic is bit-identical, and unsigned
/// overflow wraps (as TensorFlow's results do) instead of being undefined.
template <class T>
struct wrapping {
  using type = T;
};
template <>
struct wrapping<int32_t> {
  using type = uint32_t;
};
template <>
struct wrapping<int64_t> {
  using type = uint64_t;
};
template <>
struct wrapping<int16_t> {
  using type = uint16_t;
};
template <>
struct wrapping<int8_t> {
  using type = uint8_t;
};
/// A half computes as Eigen::half (same layout): Eigen's arrays and GEMM
/// know it.
template <>
struct wrapping<half> {
  using type = Eigen::half;
};
template <class T>
using wrapping_t = typename wrapping<T>::type;

/// The type a kernel computes a T in where integers need not wrap: T,
/// except Eigen::half for a half.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, half>, Eigen::half, T>;

/// InvalidArgument: the node's op has no kernel for `t`.
inline status unsupported_dtype(const kernel_context& ctx, dtype t) {
  return invalid_argument("Op '" + ctx.node.op + "' does not support dtype "
                          + std::string{to_string(t)});
}

/// Calls `f(type_tag<T>{})` for float32 and float64; InvalidArgument
/// naming the dtype otherwise.
template <class F>
status visit_float(const kernel_context& ctx, dtype t, F&& f) {
  switch (t) {
    case dtype::float32:
      return f(type_tag<float>{});
    case dtype::float64:
      return f(type_tag<double>{});
    default:
      return unsupported_dtype(ctx, t);
  }
}

/// As visit_float, plus int32 and int64.
template <class F>
status visit_numeric(const kernel_context& ctx, dtype t, F&& f) {
  switch (t) {
    case dtype::float32:
      return f(type_tag<float>{});
    case dtype::float64:
      return f(type_tag<double>{});
    case dtype::int32:
      return f(type_tag<int32_t>{});
    case dtype::int64:
      return f(type_tag<int64_t>{});
    default:
      return unsupported_dtype(ctx, t);
  }
}

/// As visit_numeric, plus float16 and the small integers: the ordered
/// types TensorFlow's CPU kernels for comparisons, Maximum, Minimum, Abs
/// and Sign take (TF_CALL_REAL_NUMBER_TYPES).
template <class F>
status visit_real(const kernel_context& ctx, dtype t, F&& f) {
  switch (t) {
    case dtype::float16:
      return f(type_tag<half>{});
    case dtype::int8:
      return f(type_tag<int8_t>{});
    case dtype::int16:
      return f(type_tag<int16_t>{});
    case dtype::uint8:
      return f(type_tag<uint8_t>{});
    case dtype::uint16:
      return f(type_tag<uint16_t>{});
    default:
      return visit_numeric(ctx, t, std::forward<F>(f));
  }
}

/// As visit_real, plus complex64 and complex128: the types of Add, Sub,
/// Mul, Div, Neg, Square, AddN and the Sum/Mean/Prod reductions.
template <class F>
status visit_arithmetic(const kernel_context& ctx, dtype t, F&& f) {
  if (t == dtype::complex64)
    return f(type_tag<std::complex<float>>{});
  if (t == dtype::complex128)
    return f(type_tag<std::complex<double>>{});
  return visit_real(ctx, t, std::forward<F>(f));
}

/// As visit_arithmetic, plus bool: the types Cast converts between.
template <class F>
status visit_castable(const kernel_context& ctx, dtype t, F&& f) {
  if (t == dtype::bool_)
    return f(type_tag<bool>{});
  return visit_arithmetic(ctx, t, std::forward<F>(f));
}

/// As visit_castable, plus string: every dtype a tensor can hold.
template <class F>
status visit_all(const kernel_context& ctx, dtype t, F&& f) {
  if (t == dtype::string)
    return f(type_tag<std::string>{});
  return visit_castable(ctx, t, std::forward<F>(f));
}

/// InvalidArgument "<op> expects [at least ]n input(s), got m"; the cold
/// half of expect_inputs and expect_min_inputs.
status arity_error(const kernel_context& ctx, size_t n, bool at_least);

/// InvalidArgument unless the node has exactly `n` data inputs.
inline status expect_inputs(const kernel_context& ctx, size_t n) {
  if (ctx.inputs.size() == n)
    return {};
  return arity_error(ctx, n, false);
}

/// InvalidArgument unless the node has at least `n` data inputs.
inline status expect_min_inputs(const kernel_context& ctx, size_t n) {
  if (ctx.inputs.size() >= n)
    return {};
  return arity_error(ctx, n, true);
}

/// Reads the optional attribute `key` into `out`, leaving `out` untouched
/// when absent; InvalidArgument if it has another kind. (node_def::attr_or
/// throws instead.)
template <class T>
status read_attr(const kernel_context& ctx, const std::string& key, T& out) {
  auto i = ctx.node.attrs.find(key);
  if (i == ctx.node.attrs.end())
    return {};
  if (auto p = std::get_if<T>(&i->second)) {
    out = *p;
    return {};
  }
  return invalid_argument("attribute '" + key + "' of node '" + ctx.node.name
                          + "' has the wrong kind");
}

/// As read_attr, but the attribute must be present.
template <class T>
status read_required_attr(const kernel_context& ctx, const std::string& key,
                          T& out) {
  if (!ctx.node.has_attr(key))
    return invalid_argument("node '" + ctx.node.name + "' lacks attribute '"
                            + key + "'");
  return read_attr(ctx, key, out);
}

/// InvalidArgument: the type attribute `key` declares `declared` but the
/// input is `actual`; the cold half of check_type_attr.
status type_attr_error(const kernel_context& ctx, const std::string& key,
                       dtype declared, dtype actual);

/// If the node carries the type attribute `key` (e.g. "T"), it must agree
/// with the dtype the inputs actually have.
inline status check_type_attr(const kernel_context& ctx,
                              const std::string& key, dtype actual) {
  auto declared = actual;
  if (auto st = read_attr(ctx, key, declared); !st.ok())
    return st;
  if (declared == actual)
    return {};
  return type_attr_error(ctx, key, declared, actual);
}

/// InvalidArgument "cannot compute <op> as input #i(zero-based) was
/// expected to be a <want> tensor but is a <got> tensor" (TensorFlow's
/// wording); the cold half of expect_input_type.
status input_type_error(const kernel_context& ctx, size_t i, dtype want);

/// InvalidArgument unless input `i` has dtype `want`.
inline status expect_input_type(const kernel_context& ctx, size_t i,
                                dtype want) {
  if (ctx.inputs[i].type() == want)
    return {};
  return input_type_error(ctx, i, want);
}

/// All inputs must share input 0's shape (TensorFlow's
/// OpKernelContext::ValidateInputsAreSameShape).
inline status expect_same_shapes(const kernel_context& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    if (!(ctx.inputs[i].shape() == ctx.inputs[0].shape()))
      return invalid_argument(
        "Inputs to operation " + ctx.node.name + " of type " + ctx.node.op
        + " must have the same size and shape.  Input 0: "
        + ctx.inputs[0].shape().to_string() + " != input "
        + std::to_string(i) + ": " + ctx.inputs[i].shape().to_string());
  }
  return {};
}

/// Reads an int32 or int64 tensor (of any shape) as int64 values.
inline status read_ints(const kernel_context& ctx, const tensor& t,
                        const char* what, std::vector<int64_t>& out) {
  out.clear();
  if (t.type() == dtype::int32) {
    for (auto v : t.flat<int32_t>())
      out.push_back(v);
    return {};
  }
  if (t.type() == dtype::int64) {
    auto xs = t.flat<int64_t>();
    out.assign(xs.begin(), xs.end());
    return {};
  }
  return invalid_argument(std::string{what} + " of " + ctx.node.op
                          + " must be int32 or int64, got "
                          + std::string{to_string(t.type())});
}

/// Reads a 1-D int32/int64 tensor (a shape or a list of axes).
inline status read_int_vector(const kernel_context& ctx, const tensor& t,
                              const char* what, std::vector<int64_t>& out) {
  if (t.shape().rank() != 1)
    return invalid_argument(std::string{what} + " must be a vector, got shape "
                            + t.shape().to_string());
  return read_ints(ctx, t, what, out);
}

/// Reads a scalar int32/int64 tensor (an axis).
inline status read_int_scalar(const kernel_context& ctx, const tensor& t,
                              const char* what, int64_t& out) {
  if (t.shape().rank() != 0)
    return invalid_argument(std::string{what}
                            + " must be a scalar but has rank "
                            + std::to_string(t.shape().rank()));
  std::vector<int64_t> xs;
  if (auto st = read_ints(ctx, t, what, xs); !st.ok())
    return st;
  out = xs.at(0);
  return {};
}

/// The product of dims[first, last); 0 as soon as one of them is 0, so it
/// never overflows where the product of the non-zero dims fits in int64
/// (every tensor's shape: checked_num_elements in graph/tensor.hpp).
inline int64_t product(const std::vector<int64_t>& dims, size_t first,
                       size_t last) {
  for (auto i = first; i < last; ++i)
    if (dims[i] == 0)
      return 0;
  int64_t n = 1;
  for (auto i = first; i < last; ++i)
    n *= dims[i];
  return n;
}

/// TensorFlow's SliceDebugString: "[1]" or "[1,2]" for the element at flat
/// position `i` of a tensor of `shape`; "" for a scalar.
std::string slice_debug_string(const tensor_shape& shape, int64_t i);

/// Reads the dtype attribute `key` (e.g. out_type) into `out`, `fallback`
/// if absent; InvalidArgument unless it is int32 or int64.
status read_index_type(const kernel_context& ctx, const std::string& key,
                       dtype fallback, dtype& out);

/// A 1-D int32 or int64 tensor holding `values`.
tensor int_vector(dtype type, const std::vector<int64_t>& values);

/// Builds a fully defined shape from requested dimensions (an input's
/// values: Fill's dims, a random op's shape, ...), checked as every
/// tensor's shape (checked_num_elements): InvalidArgument "Dimension -3
/// must be >= 0", or "Encountered overflow when multiplying ..." when the
/// element count exceeds int64. An element count that fits but whose
/// bytes do not is refused when the output is allocated (the tensor
/// constructor), also InvalidArgument.
inline status make_shape(const std::vector<int64_t>& dims,
                         tensor_shape& out) {
  int64_t n = 0;
  if (auto st = checked_num_elements(dims, n); !st.ok())
    return st;
  out = tensor_shape{dims};
  return {};
}

/// InvalidArgument "attribute N of <op> is n but it has <count> <noun>";
/// the cold half of a contract's list check.
status list_length_error(const kernel_context& ctx, int64_t n, size_t count,
                         const char* noun);

/// What a kernel requires of its node before its body runs: how many
/// inputs, which dtypes they have, and which type attributes must agree
/// with them. Declared where the kernel is registered (add_kernel) and
/// checked by the dispatcher (guarded), so a body starts at its math:
///
///   add_kernel<matmul_kernel, binary_contract>(registry, "MatMul");
///
/// A check fails with InvalidArgument in TensorFlow's words, in this
/// order: the number of inputs, each ruled input's dtype in input order,
/// the dtypes of a list of inputs, the type attributes, the list's
/// attribute N. Built by constexpr calls (inputs(2).same_dtype(1, 0)...),
/// each of which refuses to compile a rule about an input the count does
/// not guarantee. A template argument, so the check compiles to a few
/// compares: nothing is allocated unless it fails.
struct kernel_contract {
  static constexpr int max_rules = 3;
  static constexpr int max_attrs = 2;

  /// A type attribute (T, Tparams, SrcT, ...) and the input it describes.
  struct attr_rule {
    char name[9] = {};
    int8_t input = -1;
  };

  /// The number of data inputs (-1: unchecked), exact or a minimum.
  int8_t count = -1;
  bool at_least = false;
  /// Input i must have the dtype of input same[i] (if >= 0), else
  /// type[i] (unless invalid).
  std::array<int8_t, max_rules> same{-1, -1, -1};
  std::array<dtype, max_rules> type{};
  /// If >= 0: all inputs but the last list_tail form a list of one dtype
  /// (AddN's and Pack's inputs, ConcatV2's values before its axis), whose
  /// length the attribute N states; list_noun names its elements in the
  /// error.
  int8_t list_tail = -1;
  char list_noun[7] = {};
  std::array<attr_rule, max_attrs> attrs{};

  /// Input i must have the dtype of input j.
  constexpr kernel_contract same_dtype(int i, int j) const {
    require(guaranteed(i) && i < max_rules && guaranteed(j));
    auto c = *this;
    c.same[static_cast<size_t>(i)] = static_cast<int8_t>(j);
    return c;
  }

  /// Input i must have dtype t.
  constexpr kernel_contract input_dtype(int i, dtype t) const {
    require(guaranteed(i) && i < max_rules);
    auto c = *this;
    c.type[static_cast<size_t>(i)] = t;
    return c;
  }

  /// The type attribute `name`, if present, must be input i's dtype.
  template <size_t N>
  constexpr kernel_contract type_attr(const char (&name)[N], int i) const {
    require(guaranteed(i) && N <= sizeof(attr_rule::name));
    auto c = *this;
    for (auto& a : c.attrs) {
      if (a.input < 0) {
        std::copy_n(name, N, a.name);
        a.input = static_cast<int8_t>(i);
        return c;
      }
    }
    require(false); // more than max_attrs
    return c;
  }

  /// All inputs but the last `tail` share input 0's dtype, and the
  /// attribute N, if present, is their number.
  template <size_t N>
  constexpr kernel_contract list(int tail, const char (&noun)[N]) const {
    require(count >= tail + 1 && N <= sizeof(list_noun));
    auto c = *this;
    c.list_tail = static_cast<int8_t>(tail);
    std::copy_n(noun, N, c.list_noun);
    return c;
  }

private:
  // True if every node the count admits has input i.
  constexpr bool guaranteed(int i) const {
    return i >= 0 && i < count;
  }

  // A contract that breaks a rule is no constant expression: it does not
  // compile.
  static constexpr void require(bool ok) {
    if (!ok)
      throw std::logic_error{"malformed kernel_contract"};
  }
};

/// A contract for exactly `n` inputs.
constexpr kernel_contract inputs(int n) {
  kernel_contract c;
  c.count = static_cast<int8_t>(n);
  return c;
}

/// A contract for at least `n` inputs.
constexpr kernel_contract min_inputs(int n) {
  auto c = inputs(n);
  c.at_least = true;
  return c;
}

/// One input, typed by T (Neg, Softmax, ...).
inline constexpr kernel_contract unary_contract = inputs(1).type_attr("T", 0);

/// Two inputs of one dtype, typed by T (Add, MatMul, ReluGrad, ...).
inline constexpr kernel_contract binary_contract
  = inputs(2).same_dtype(1, 0).type_attr("T", 0);

/// Checks `ctx` against C; InvalidArgument on the first broken rule.
template <kernel_contract C>
status check_contract(const kernel_context& ctx) {
  if constexpr (C.count >= 0) {
    auto n = static_cast<size_t>(C.count);
    if (auto st = C.at_least ? expect_min_inputs(ctx, n)
                             : expect_inputs(ctx, n);
        !st.ok())
      return st;
  }
  for (size_t i = 0; i < C.same.size(); ++i) {
    if (C.same[i] >= 0) {
      auto want = ctx.inputs[static_cast<size_t>(C.same[i])].type();
      if (auto st = expect_input_type(ctx, i, want); !st.ok())
        return st;
    } else if (C.type[i] != dtype::invalid) {
      if (auto st = expect_input_type(ctx, i, C.type[i]); !st.ok())
        return st;
    }
  }
  // The list's length; the count guarantees that input 0 is in it.
  [[maybe_unused]] size_t list_size = 0;
  if constexpr (C.list_tail >= 0) {
    list_size = ctx.inputs.size() - static_cast<size_t>(C.list_tail);
    for (size_t i = 1; i < list_size; ++i)
      if (auto st = expect_input_type(ctx, i, ctx.inputs[0].type());
          !st.ok())
        return st;
  }
  for (auto& a : C.attrs) {
    if (a.input < 0)
      continue;
    auto actual = ctx.inputs[static_cast<size_t>(a.input)].type();
    if (auto st = check_type_attr(ctx, a.name, actual); !st.ok())
      return st;
  }
  if constexpr (C.list_tail >= 0) {
    auto n = static_cast<int64_t>(list_size);
    if (auto st = read_attr(ctx, "N", n); !st.ok())
      return st;
    if (n != static_cast<int64_t>(list_size))
      return list_length_error(ctx, n, list_size, C.list_noun);
  }
  return {};
}

/// Appends the node's name to a failed status, in run_kernel's format, so
/// that returned errors name their node just like thrown ones.
inline status name_node(status st, const kernel_context& ctx) {
  if (st.ok())
    return st;
  return {st.code(), st.message() + " [[node " + ctx.node.name + "]]"};
}

/// Runs kernel F under contract C so that it never throws: C's check runs
/// first, kernels report bad input as statuses themselves, and this
/// catches the rest (an attribute of the wrong kind, an allocation too
/// large to satisfy). The tensors F allocates are checked against the
/// process's tensor memory limit (tensor_memory.hpp): one past it is
/// ResourceExhausted naming the op, its shape and dtype and the device.
/// On failure no partial outputs are left behind.
template <status (*F)(kernel_context&), kernel_contract C>
status guarded(kernel_context& ctx) noexcept {
  status st;
  tensor_memory_check budget{ctx.node.op, ctx.node.device};
  try {
    ctx.outputs.clear();
    st = check_contract<C>(ctx);
    if (st.ok())
      st = F(ctx);
  } catch (const op_error& e) {
    st = e.get_status();
  } catch (const std::bad_alloc&) {
    st = {error_code::resource_exhausted,
          "OOM when allocating an output of " + ctx.node.op};
  } catch (const std::exception& e) {
    st = internal_error(e.what());
  }
  if (!st.ok())
    ctx.outputs.clear();
  return name_node(std::move(st), ctx);
}

/// Registers F under `op`, its inputs checked against C before it runs
/// (no contract: F checks everything itself).
template <status (*F)(kernel_context&), kernel_contract C = kernel_contract{}>
void add_kernel(kernel_registry& registry, const char* op) {
  registry.add(op, &guarded<F, C>);
}

} // namespace actorflow::detail
