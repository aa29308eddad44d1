// Element-wise math on the element-wise engine (elementwise.hpp):
// arithmetic, comparisons, Maximum and Minimum with numpy broadcasting,
// unary math, Select and AddN; then MatMul and the Sum/Mean/Max/Prod
// reductions over Eigen maps of the tensors' buffers.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "elementwise.hpp"

namespace actorflow::detail {

namespace {

// -- binary element-wise ops with broadcasting -----------------------------

/// Calls `f(type_tag<T>{})` for the floating and complex types (RealDiv's);
/// InvalidArgument naming the dtype otherwise.
template <class F>
status visit_inexact(const kernel_context& ctx, dtype t, F&& f) {
  switch (t) {
    case dtype::float16:
      return f(type_tag<half>{});
    case dtype::complex64:
      return f(type_tag<std::complex<float>>{});
    case dtype::complex128:
      return f(type_tag<std::complex<double>>{});
    default:
      return visit_float(ctx, t, std::forward<F>(f));
  }
}

// Truncating integer division; the caller rules out division by zero, and
// min / -1 wraps to min instead of trapping.
template <class T>
struct int_div {
  T operator()(T x, T y) const {
    if (y == T(-1))
      return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(x));
    return x / y;
  }
};

enum class binop { add, sub, mul, real_div, div, pow };

template <binop Op>
status binary_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  auto& y = ctx.inputs[1];
  broadcast_plan plan;
  auto body = [&]<class T>(type_tag<T>) -> status {
    // Wrapping arithmetic for integer add/sub/mul; T itself otherwise.
    using C = std::conditional_t<Op == binop::add || Op == binop::sub
                                   || Op == binop::mul,
                                 wrapping_t<T>, compute_t<T>>;
    if (auto st = make_broadcast(x.shape(), y.shape(), plan); !st.ok())
      return st;
    // Every element is written below: no zero-fill first.
    auto out = tensor::uninitialized(x.type(), tensor_shape{plan.out_dims});
    auto xp = data_as<C, T>(x);
    auto yp = data_as<C, T>(y);
    auto op = data_as<C, T>(out);
    if constexpr (Op == binop::add) {
      run_broadcast<row_op::eigen>(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a + b; });
    } else if constexpr (Op == binop::sub) {
      run_broadcast<row_op::eigen>(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a - b; });
    } else if constexpr (Op == binop::mul) {
      run_broadcast<row_op::eigen>(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a * b; });
    } else if constexpr (Op == binop::pow) {
      run_broadcast<row_op::each>(plan, xp, yp, op,
                                  [](C a, C b) { return C(std::pow(a, b)); });
    } else if constexpr (std::is_integral_v<T>) {
      if (plan.count > 0) {
        auto ys = y.flat<T>();
        if (std::find(ys.begin(), ys.end(), T(0)) != ys.end())
          return invalid_argument("Integer division by zero");
      }
      run_broadcast<row_op::eigen>(plan, xp, yp, op, [](const auto& a, const auto& b) {
        return a.binaryExpr(b, int_div<T>{});
      });
    } else {
      run_broadcast<row_op::eigen>(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a / b; });
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == binop::real_div)
    return visit_inexact(ctx, x.type(), body);
  else if constexpr (Op == binop::pow)
    return visit_float(ctx, x.type(), body);
  else
    return visit_arithmetic(ctx, x.type(), body);
}

// -- comparisons, Maximum, Minimum ----------------------------------------------

enum class cmpop {
  maximum,
  minimum,
  equal,
  not_equal,
  greater,
  greater_equal,
  less,
  less_equal
};

// The element functor of a comparison, Maximum or Minimum. Maximum and
// Minimum pick as TensorFlow's scalar functors do (a NaN operand decides
// by its position), which Eigen's packet max/min would not.
template <cmpop Op>
struct compare {
  template <class T>
  auto operator()(const T& a, const T& b) const {
    if constexpr (Op == cmpop::maximum)
      return a < b ? b : a;
    else if constexpr (Op == cmpop::minimum)
      return b < a ? b : a;
    else if constexpr (Op == cmpop::equal)
      return a == b;
    else if constexpr (Op == cmpop::not_equal)
      return a != b;
    else if constexpr (Op == cmpop::greater)
      return a > b;
    else if constexpr (Op == cmpop::greater_equal)
      return a >= b;
    else if constexpr (Op == cmpop::less)
      return a < b;
    else
      return a <= b;
  }
};

template <cmpop Op>
status compare_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  auto& y = ctx.inputs[1];
  broadcast_plan plan;
  if (auto st = make_broadcast(x.shape(), y.shape(), plan); !st.ok())
    return st;
  constexpr bool to_bool = Op != cmpop::maximum && Op != cmpop::minimum;
  auto body = [&]<class T>(type_tag<T>) -> status {
    using C = compute_t<T>;
    using R = std::conditional_t<to_bool, bool, C>;
    auto out = tensor::uninitialized(to_bool ? dtype::bool_ : x.type(),
                                     tensor_shape{plan.out_dims});
    auto o = reinterpret_cast<R*>(out.raw());
    run_broadcast<row_op::each>(plan, data_as<C, T>(x), data_as<C, T>(y), o,
                                compare<Op>{});
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == cmpop::equal || Op == cmpop::not_equal)
    return visit_all(ctx, x.type(), body);
  else
    return visit_real(ctx, x.type(), body);
}

// -- unary element-wise ops -------------------------------------------------

// Eigen's expressions where its packet math is exact; element functors for
// the rest (its fast-math sqrt and rsqrt round differently from std::sqrt).
enum class unop {
  neg,
  square,
  exp,
  log,
  relu,
  sigmoid,
  tanh,
  reciprocal,
  abs,
  sign,
  log1p,
  sqrt,
  rsqrt,
  floor
};

template <unop Op>
status unary_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  auto body = [&]<class T>(type_tag<T>) -> status {
    using C = std::conditional_t<Op == unop::neg || Op == unop::square,
                                 wrapping_t<T>, compute_t<T>>;
    auto out = tensor::uninitialized(x.type(), x.shape());
    auto n = x.num_elements();
    auto in = data_as<C, T>(x);
    auto o = data_as<C, T>(out);
    constexpr auto eigen = row_op::eigen;
    constexpr auto each = row_op::each;
    if constexpr (Op == unop::neg)
      run_unary<eigen>(in, o, n, [](const auto& a) { return C(0) - a; });
    else if constexpr (Op == unop::square)
      run_unary<eigen>(in, o, n, [](const auto& a) { return a.square(); });
    else if constexpr (Op == unop::exp)
      run_unary<eigen>(in, o, n, [](const auto& a) { return a.exp(); });
    else if constexpr (Op == unop::log)
      run_unary<eigen>(in, o, n, [](const auto& a) { return a.log(); });
    else if constexpr (Op == unop::relu)
      run_unary<eigen>(in, o, n, [](const auto& a) { return a.max(C(0)); });
    else if constexpr (Op == unop::sigmoid)
      run_unary<eigen>(in, o, n, [](const auto& a) {
        return (C(1) + (-a).exp()).inverse();
      });
    else if constexpr (Op == unop::tanh)
      run_unary<eigen>(in, o, n, [](const auto& a) { return a.tanh(); });
    else if constexpr (Op == unop::reciprocal)
      run_unary<each>(in, o, n, [](C v) { return C(1) / v; });
    else if constexpr (Op == unop::abs)
      run_unary<each>(in, o, n, [](C v) -> C {
        if constexpr (!std::numeric_limits<C>::is_integer)
          return Eigen::numext::abs(v);
        else // wraps for the minimum
          return v < C(0) ? static_cast<C>(wrapping_t<C>(0)
                                           - static_cast<wrapping_t<C>>(v))
                          : v;
      });
    else if constexpr (Op == unop::sign)
      run_unary<each>(in, o, n, [](C v) -> C {
        if constexpr (!std::numeric_limits<C>::is_integer)
          return Eigen::numext::isnan(v) ? v : C((v > C(0)) - (v < C(0)));
        else
          return C((v > C(0)) - (v < C(0)));
      });
    else if constexpr (Op == unop::log1p)
      run_unary<each>(in, o, n, [](C v) { return std::log1p(v); });
    else if constexpr (Op == unop::sqrt)
      run_unary<each>(in, o, n, [](C v) { return std::sqrt(v); });
    else if constexpr (Op == unop::floor)
      run_unary<each>(in, o, n, [](C v) { return std::floor(v); });
    else
      run_unary<each>(in, o, n, [](C v) { return C(1) / std::sqrt(v); });
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == unop::neg || Op == unop::square)
    return visit_arithmetic(ctx, x.type(), body);
  else if constexpr (Op == unop::relu || Op == unop::abs || Op == unop::sign)
    return visit_real(ctx, x.type(), body);
  else
    return visit_float(ctx, x.type(), body);
}

// -- Select ---------------------------------------------------------------------

status select_kernel(kernel_context& ctx) {
  auto& cond = ctx.inputs[0];
  auto& then = ctx.inputs[1];
  auto& else_ = ctx.inputs[2];
  auto same_then_else = [&]() -> status {
    if (then.shape() == else_.shape())
      return {};
    return invalid_argument(
      "'then' and 'else' must have the same size.  but received: "
      + then.shape().to_string() + " vs. " + else_.shape().to_string());
  };
  auto c = cond.flat<bool>();
  // How many consecutive output elements each condition value decides.
  int64_t block = 1;
  if (cond.shape().rank() == 0) {
    if (auto st = same_then_else(); !st.ok())
      return st;
    block = then.num_elements();
  } else if (cond.shape().rank() == 1 && then.shape().rank() != 1) {
    if (then.shape().rank() < 1)
      return invalid_argument(
        "'then' must be at least a vector, but saw shape: "
        + then.shape().to_string());
    if (then.shape().dim(0) != cond.num_elements())
      return invalid_argument(
        "Number of batches of 'then' must match size of 'cond', but saw: "
        + std::to_string(then.shape().dim(0)) + " vs. "
        + std::to_string(cond.num_elements()));
    if (auto st = same_then_else(); !st.ok())
      return st;
    block = cond.num_elements() == 0 ? 0
                                     : then.num_elements()
                                         / cond.num_elements();
  } else {
    if (auto st = expect_same_shapes(ctx); !st.ok())
      return st;
  }
  return visit_all(ctx, then.type(), [&]<class T>(type_tag<T>) -> status {
    auto out = tensor::uninitialized(then.type(), then.shape());
    auto t = then.flat<T>().data();
    auto e = else_.flat<T>().data();
    auto o = out.flat<T>().data();
    if (block == 1) {
      for (size_t i = 0; i < c.size(); ++i)
        o[i] = c[i] ? t[i] : e[i];
    } else if (block > 0) {
      for (size_t b = 0; b < c.size(); ++b) {
        auto at = static_cast<int64_t>(b) * block;
        std::copy_n((c[b] ? t : e) + at, block, o + at);
      }
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- AddN -----------------------------------------------------------------

status add_n_kernel(kernel_context& ctx) {
  auto& first = ctx.inputs[0];
  if (auto st = expect_same_shapes(ctx); !st.ok())
    return st;
  return visit_arithmetic(ctx, first.type(), [&]<class T>(type_tag<T>) -> status {
    using C = wrapping_t<T>;
    if (ctx.inputs.size() == 1) {
      ctx.outputs.push_back(first);
      return {};
    }
    // The first input's buffer when nothing else holds it (TF forwards it
    // too): one pass less, nothing allocated.
    auto out = first.unique()
                 ? first
                 : tensor::uninitialized(first.type(), first.shape());
    auto o = data_as<C, T>(out);
    auto n = first.num_elements();
    const C* sum = data_as<C, T>(first);
    for (size_t k = 1; k < ctx.inputs.size(); ++k) {
      apply_row<row_op::eigen>(sum, true, data_as<C, T>(ctx.inputs[k]), true,
                               o, n,
                               [](const auto& a, const auto& b) {
                                 return a + b;
                               });
      sum = o;
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

// -- Cast -------------------------------------------------------------------

// One element converted as TensorFlow does, except that conversions C++
// leaves undefined are defined here: float-to-integer maps NaN to 0 and
// saturates out-of-range values; double-to-float overflows to infinity.
template <class T>
constexpr bool is_complex_v = std::is_same_v<T, std::complex<float>>
                              || std::is_same_v<T, std::complex<double>>;

template <class D, class S>
D convert(S x) {
  if constexpr (std::is_same_v<S, half>) {
    return convert<D>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, half>) {
    // Through float, as Eigen::half converts (a double rounds twice).
    if constexpr (is_complex_v<S>)
      return half(static_cast<float>(x.real()));
    else
      return half(convert<float>(x));
  } else if constexpr (is_complex_v<D>) {
    // Real to complex: the imaginary part is 0.
    using R = typename D::value_type;
    if constexpr (is_complex_v<S>)
      return D(convert<R>(x.real()), convert<R>(x.imag()));
    else
      return D(convert<R>(x), R(0));
  } else if constexpr (std::is_same_v<D, bool>) {
    return x != S(0);
  } else if constexpr (is_complex_v<S>) {
    // Complex to real keeps the real part, as TensorFlow's Cast does.
    return convert<D>(x.real());
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
  auto& x = ctx.inputs[0];
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

// -- MatMul -----------------------------------------------------------------

status matmul_kernel(kernel_context& ctx) {
  auto& a = ctx.inputs[0];
  auto& b = ctx.inputs[1];
  bool ta = false;
  bool tb = false;
  if (auto st = read_attr(ctx, "transpose_a", ta); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "transpose_b", tb); !st.ok())
    return st;
  if (a.shape().rank() != 2)
    return invalid_argument("In[0] is not a matrix. Instead it has shape "
                            + a.shape().to_string());
  if (b.shape().rank() != 2)
    return invalid_argument("In[1] is not a matrix. Instead it has shape "
                            + b.shape().to_string());
  // actorflow's own: columns [_a_col_begin, +_a_col_count) of a stand for
  // a (a pipelined MatMul's block, graph/matmul_pipelining.hpp), read in
  // place where a Split would copy them.
  int64_t col_begin = -1;
  int64_t col_count = -1;
  if (auto st = read_attr(ctx, "_a_col_begin", col_begin); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "_a_col_count", col_count); !st.ok())
    return st;
  auto a_rows = a.shape().dim(0);
  auto a_cols = a.shape().dim(1);
  auto a_stride = a_cols;
  if (col_begin >= 0 || col_count >= 0) {
    if (col_begin < 0 || col_count < 0 || col_begin + col_count > a_cols)
      return invalid_argument(
        "columns [" + std::to_string(col_begin) + ", "
        + std::to_string(col_begin + col_count) + ") of In[0] of node '"
        + ctx.node.name + "' are not within its shape "
        + a.shape().to_string());
    a_cols = col_count;
  } else {
    col_begin = 0;
  }
  auto m = ta ? a_cols : a_rows;
  auto k = ta ? a_rows : a_cols;
  auto kb = b.shape().dim(tb ? 1 : 0);
  auto n = b.shape().dim(tb ? 0 : 1);
  if (k != kb)
    return invalid_argument("Matrix size-incompatible: In[0]: "
                            + a.shape().to_string()
                            + ", In[1]: " + b.shape().to_string());
  auto body = [&]<class T>(type_tag<T>) -> status {
    using C = wrapping_t<T>;
    using matrix
      = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    // Zero-filled only when k == 0 (then zero is the product); otherwise
    // the GEMM writes every element.
    auto out = k > 0 ? tensor::uninitialized(a.type(), tensor_shape{m, n})
                     : tensor{a.type(), tensor_shape{m, n}};
    if (m > 0 && n > 0 && k > 0) {
      Eigen::Map<const matrix> bm(data_as<C, T>(b), b.shape().dim(0),
                                  b.shape().dim(1));
      Eigen::Map<matrix> om(data_as<C, T>(out), m, n);
      // Transposed maps are views: Eigen's GEMM packs straight from the
      // input buffers.
      auto product = [&](const auto& am) {
        if (ta && tb)
          om.noalias() = am.transpose() * bm.transpose();
        else if (ta)
          om.noalias() = am.transpose() * bm;
        else if (tb)
          om.noalias() = am * bm.transpose();
        else
          om.noalias() = am * bm;
      };
      // A column range reads a through its row stride; a whole a keeps
      // the plain map (the stride's map measured the same, but the
      // common path stays as it was).
      if (a_cols != a_stride)
        product(Eigen::Map<const matrix, 0, Eigen::OuterStride<>>(
          data_as<C, T>(a) + col_begin, a_rows, a_cols,
          Eigen::OuterStride<>(a_stride)));
      else
        product(Eigen::Map<const matrix>(data_as<C, T>(a), a_rows, a_cols));
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  // TensorFlow's CPU MatMul takes half and the complex types besides the
  // numeric ones (not the small integers).
  switch (a.type()) {
    case dtype::float16:
      return body(type_tag<half>{});
    case dtype::complex64:
      return body(type_tag<std::complex<float>>{});
    case dtype::complex128:
      return body(type_tag<std::complex<double>>{});
    default:
      return visit_numeric(ctx, a.type(), body);
  }
}

// -- reductions -------------------------------------------------------------

enum class redop { sum, mean, max, min, prod };

// A walk over the input in row-major order with size-1 dimensions dropped
// and neighbouring dimensions merged when both are reduced or both kept.
// Output offsets advance only along kept dimensions.
struct reduce_plan {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
  std::vector<int64_t> out_strides; // 0 along reduced dimensions
  tensor_shape out_shape;
  int64_t reduce_count = 1; // input elements per output element
};

status make_reduce(const kernel_context& ctx, const tensor_shape& in,
                   const tensor& indices, bool keep_dims, reduce_plan& plan) {
  std::vector<int64_t> axes;
  if (auto st = read_ints(ctx, indices, "reduction_indices", axes); !st.ok())
    return st;
  auto rank = in.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (auto axis : axes) {
    if (axis < -rank || axis >= rank)
      return invalid_argument("Invalid reduction dimension ("
                              + std::to_string(axis) + " for input with "
                              + std::to_string(rank) + " dimension(s)");
    auto i = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    if (reduced[i])
      return invalid_argument("Invalid reduction arguments: Axes contains "
                              "duplicate dimension: "
                              + std::to_string(i));
    reduced[i] = true;
  }
  std::vector<int64_t> out_dims;
  std::vector<bool> merged_reduced;
  plan.dims.clear();
  for (size_t i = 0; i < reduced.size(); ++i) {
    auto d = in.dim(static_cast<int>(i));
    if (reduced[i]) {
      plan.reduce_count *= d;
      if (keep_dims)
        out_dims.push_back(1);
    } else {
      out_dims.push_back(d);
    }
    if (d == 1)
      continue;
    if (!plan.dims.empty() && merged_reduced.back() == reduced[i]) {
      plan.dims.back() *= d;
    } else {
      plan.dims.push_back(d);
      merged_reduced.push_back(reduced[i]);
    }
  }
  if (plan.dims.empty()) {
    plan.dims.push_back(1);
    merged_reduced.push_back(false);
  }
  plan.reduced = merged_reduced;
  plan.out_strides.assign(plan.dims.size(), 0);
  int64_t stride = 1;
  for (size_t i = plan.dims.size(); i-- > 0;) {
    if (!plan.reduced[i]) {
      plan.out_strides[i] = stride;
      stride *= plan.dims[i];
    }
  }
  plan.out_shape = tensor_shape{std::move(out_dims)};
  return {};
}

template <redop Op, class C>
void run_reduce(const reduce_plan& plan, const C* in, int64_t in_count,
                C* out, int64_t out_count) {
  // Start from the reduction's identity; an empty reduction keeps it.
  C init = C(0);
  if constexpr (Op == redop::prod)
    init = C(1);
  if constexpr (Op == redop::max)
    init = std::numeric_limits<C>::has_infinity
             ? -std::numeric_limits<C>::infinity()
             : std::numeric_limits<C>::lowest();
  if constexpr (Op == redop::min)
    init = std::numeric_limits<C>::has_infinity
             ? std::numeric_limits<C>::infinity()
             : std::numeric_limits<C>::max();
  std::fill(out, out + out_count, init);
  if (in_count == 0)
    return;
  auto rank = plan.dims.size();
  auto inner = plan.dims.back();
  bool inner_reduced = plan.reduced.back();
  auto rows = in_count / inner;
  std::vector<int64_t> index(rank - 1, 0);
  int64_t oo = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const_map<C> row(in + r * inner, inner);
    if (inner_reduced) {
      if constexpr (Op == redop::max)
        out[oo] = std::max(out[oo], row.maxCoeff());
      else if constexpr (Op == redop::min)
        out[oo] = std::min(out[oo], row.minCoeff());
      else if constexpr (Op == redop::prod)
        out[oo] *= row.prod();
      else
        out[oo] += row.sum();
    } else {
      mut_map<C> o(out + oo, inner);
      if constexpr (Op == redop::max)
        o = o.max(row);
      else if constexpr (Op == redop::min)
        o = o.min(row);
      else if constexpr (Op == redop::prod)
        o *= row;
      else
        o += row;
    }
    for (size_t d = rank - 1; d-- > 0;) {
      oo += plan.out_strides[d];
      if (++index[d] < plan.dims[d])
        break;
      oo -= plan.out_strides[d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

// A reduction node's walk: its input, reduction_indices and keep_dims.
status plan_reduction(const kernel_context& ctx, reduce_plan& plan) {
  bool keep_dims = false;
  if (auto st = read_attr(ctx, "keep_dims", keep_dims); !st.ok())
    return st;
  return make_reduce(ctx, ctx.inputs[0].shape(), ctx.inputs[1], keep_dims,
                     plan);
}

template <redop Op>
status reduce_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  reduce_plan plan;
  if (auto st = plan_reduction(ctx, plan); !st.ok())
    return st;
  auto body = [&]<class T>(type_tag<T>) -> status {
    using C = std::conditional_t<Op == redop::max || Op == redop::min,
                                 compute_t<T>, wrapping_t<T>>;
    tensor out{x.type(), plan.out_shape};
    auto o = data_as<C, T>(out);
    run_reduce<Op>(plan, data_as<C, T>(x), x.num_elements(), o,
                   out.num_elements());
    if constexpr (Op == redop::mean) {
      auto count = plan.reduce_count;
      if constexpr (!std::numeric_limits<T>::is_integer) {
        // An empty mean is 0/0 = NaN, as in TensorFlow.
        for (int64_t i = 0; i < out.num_elements(); ++i)
          o[i] = o[i] / static_cast<C>(count);
      } else if (count > 0) {
        // An empty integer mean stays 0 rather than dividing by zero.
        auto res = out.flat<T>();
        for (auto& v : res)
          v = static_cast<T>(static_cast<int64_t>(v) / count);
      }
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == redop::max || Op == redop::min)
    return visit_real(ctx, x.type(), body);
  else
    return visit_arithmetic(ctx, x.type(), body);
}

// Any and All: over bools as bytes, the maximum and the minimum of 0 and
// 1 (an empty All starts from the byte's maximum, made true).
template <bool Any>
status logical_reduce_kernel(kernel_context& ctx) {
  auto& x = ctx.inputs[0];
  reduce_plan plan;
  if (auto st = plan_reduction(ctx, plan); !st.ok())
    return st;
  tensor out{dtype::bool_, plan.out_shape};
  auto* o = reinterpret_cast<uint8_t*>(out.flat<bool>().data());
  run_reduce<Any ? redop::max : redop::min>(
    plan, reinterpret_cast<const uint8_t*>(x.flat<bool>().data()),
    x.num_elements(), o, out.num_elements());
  for (int64_t i = 0; i < out.num_elements(); ++i)
    o[i] = o[i] != 0 ? 1 : 0;
  ctx.outputs.push_back(std::move(out));
  return {};
}

} // namespace

void register_math_kernels(kernel_registry& registry) {
  constexpr auto unary = unary_contract;
  constexpr auto binary = binary_contract;
  add_kernel<binary_kernel<binop::add>, binary>(registry, "Add");
  add_kernel<binary_kernel<binop::sub>, binary>(registry, "Sub");
  add_kernel<binary_kernel<binop::mul>, binary>(registry, "Mul");
  add_kernel<binary_kernel<binop::real_div>, binary>(registry, "RealDiv");
  add_kernel<binary_kernel<binop::div>, binary>(registry, "Div");
  add_kernel<unary_kernel<unop::neg>, unary>(registry, "Neg");
  add_kernel<unary_kernel<unop::square>, unary>(registry, "Square");
  add_kernel<unary_kernel<unop::exp>, unary>(registry, "Exp");
  add_kernel<unary_kernel<unop::log>, unary>(registry, "Log");
  add_kernel<unary_kernel<unop::relu>, unary>(registry, "Relu");
  add_kernel<unary_kernel<unop::sigmoid>, unary>(registry, "Sigmoid");
  add_kernel<unary_kernel<unop::tanh>, unary>(registry, "Tanh");
  add_kernel<unary_kernel<unop::reciprocal>, unary>(registry, "Reciprocal");
  add_kernel<unary_kernel<unop::abs>, unary>(registry, "Abs");
  add_kernel<unary_kernel<unop::sign>, unary>(registry, "Sign");
  add_kernel<unary_kernel<unop::log1p>, unary>(registry, "Log1p");
  add_kernel<unary_kernel<unop::sqrt>, unary>(registry, "Sqrt");
  add_kernel<unary_kernel<unop::rsqrt>, unary>(registry, "Rsqrt");
  add_kernel<unary_kernel<unop::floor>, unary>(registry, "Floor");
  add_kernel<binary_kernel<binop::pow>, binary>(registry, "Pow");
  add_kernel<compare_kernel<cmpop::maximum>, binary>(registry, "Maximum");
  add_kernel<compare_kernel<cmpop::minimum>, binary>(registry, "Minimum");
  add_kernel<compare_kernel<cmpop::equal>, binary>(registry, "Equal");
  add_kernel<compare_kernel<cmpop::not_equal>, binary>(registry, "NotEqual");
  add_kernel<compare_kernel<cmpop::greater>, binary>(registry, "Greater");
  add_kernel<compare_kernel<cmpop::greater_equal>, binary>(registry,
                                                          "GreaterEqual");
  add_kernel<compare_kernel<cmpop::less>, binary>(registry, "Less");
  add_kernel<compare_kernel<cmpop::less_equal>, binary>(registry,
                                                       "LessEqual");
  add_kernel<select_kernel, inputs(3)
                              .input_dtype(0, dtype::bool_)
                              .same_dtype(2, 1)
                              .type_attr("T", 1)>(registry, "Select");
  add_kernel<add_n_kernel,
             min_inputs(1).list(0, "inputs").type_attr("T", 0)>(registry,
                                                                 "AddN");
  add_kernel<cast_kernel, inputs(1).type_attr("SrcT", 0)>(registry, "Cast");
  add_kernel<matmul_kernel, binary>(registry, "MatMul");
  constexpr auto reduce = inputs(2).type_attr("T", 0);
  add_kernel<reduce_kernel<redop::sum>, reduce>(registry, "Sum");
  add_kernel<reduce_kernel<redop::mean>, reduce>(registry, "Mean");
  add_kernel<reduce_kernel<redop::max>, reduce>(registry, "Max");
  add_kernel<reduce_kernel<redop::prod>, reduce>(registry, "Prod");
  add_kernel<reduce_kernel<redop::min>, reduce>(registry, "Min");
  constexpr auto logical = inputs(2).input_dtype(0, dtype::bool_);
  add_kernel<logical_reduce_kernel<true>, logical>(registry, "Any");
  add_kernel<logical_reduce_kernel<false>, logical>(registry, "All");
}

} // namespace actorflow::detail
