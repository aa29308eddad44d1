// Element-wise math with numpy broadcasting, MatMul and the Sum/Mean/Max
// reductions, all over Eigen maps of the tensors' buffers.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "kernels_impl.hpp"

namespace actorflow::detail {

status make_broadcast(const tensor_shape& xs, const tensor_shape& ys,
                      broadcast_plan& plan) {
  auto& xd = xs.dims();
  auto& yd = ys.dims();
  auto rank = std::max(xd.size(), yd.size());
  std::vector<int64_t> xe(rank, 1);
  std::vector<int64_t> ye(rank, 1);
  std::copy(xd.begin(), xd.end(), xe.begin() + (rank - xd.size()));
  std::copy(yd.begin(), yd.end(), ye.begin() + (rank - yd.size()));
  plan.out_dims.assign(rank, 1);
  plan.count = 1;
  std::vector<bool> x_has;
  std::vector<bool> y_has;
  plan.dims.clear();
  for (size_t i = 0; i < rank; ++i) {
    int64_t d;
    if (xe[i] == ye[i])
      d = xe[i];
    else if (xe[i] == 1)
      d = ye[i];
    else if (ye[i] == 1)
      d = xe[i];
    else
      return invalid_argument("Incompatible shapes: " + xs.to_string()
                              + " vs. " + ys.to_string());
    plan.out_dims[i] = d;
    plan.count *= d;
    if (d == 1)
      continue;
    bool xh = xe[i] == d;
    bool yh = ye[i] == d;
    if (!plan.dims.empty() && x_has.back() == xh && y_has.back() == yh) {
      plan.dims.back() *= d;
    } else {
      plan.dims.push_back(d);
      x_has.push_back(xh);
      y_has.push_back(yh);
    }
  }
  if (plan.dims.empty()) {
    // Every operand holds one element.
    plan.dims.push_back(1);
    x_has.push_back(true);
    y_has.push_back(true);
  }
  auto n = plan.dims.size();
  plan.x_strides.assign(n, 0);
  plan.y_strides.assign(n, 0);
  int64_t xstride = 1;
  int64_t ystride = 1;
  for (size_t i = n; i-- > 0;) {
    if (x_has[i]) {
      plan.x_strides[i] = xstride;
      xstride *= plan.dims[i];
    }
    if (y_has[i]) {
      plan.y_strides[i] = ystride;
      ystride *= plan.dims[i];
    }
  }
  return {};
}

namespace {

template <class T>
using array_t = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using const_map = Eigen::Map<const array_t<T>>;
template <class T>
using mut_map = Eigen::Map<array_t<T>>;

// The typed buffer of `t`, viewed as C (T itself or its wrapping_t).
template <class C, class T>
const C* data_as(const tensor& t) {
  return reinterpret_cast<const C*>(t.flat<T>().data());
}
template <class C, class T>
C* data_as(tensor& t) {
  return reinterpret_cast<C*>(t.flat<T>().data());
}

// -- binary element-wise ops with broadcasting -----------------------------


// out[0..n) = f(x row or scalar, y row or scalar).
template <class C, class F>
void apply_row(const C* x, bool x_row, const C* y, bool y_row, C* out,
               int64_t n, const F& f) {
  mut_map<C> o(out, n);
  if (x_row && y_row)
    o = f(const_map<C>(x, n), const_map<C>(y, n));
  else if (x_row)
    o = f(const_map<C>(x, n), array_t<C>::Constant(n, *y));
  else if (y_row)
    o = f(array_t<C>::Constant(n, *x), const_map<C>(y, n));
  else
    o = f(array_t<C>::Constant(n, *x), array_t<C>::Constant(n, *y));
}

template <class C, class F>
void run_broadcast(const broadcast_plan& plan, const C* x, const C* y, C* out,
                   const F& f) {
  if (plan.count == 0)
    return;
  auto rank = plan.dims.size();
  auto inner = plan.dims.back();
  bool x_row = plan.x_strides.back() != 0;
  bool y_row = plan.y_strides.back() != 0;
  auto rows = plan.count / inner;
  std::vector<int64_t> index(rank - 1, 0);
  int64_t xo = 0;
  int64_t yo = 0;
  for (int64_t r = 0; r < rows; ++r) {
    apply_row(x + xo, x_row, y + yo, y_row, out + r * inner, inner, f);
    for (size_t d = rank - 1; d-- > 0;) {
      xo += plan.x_strides[d];
      yo += plan.y_strides[d];
      if (++index[d] < plan.dims[d])
        break;
      xo -= plan.x_strides[d] * plan.dims[d];
      yo -= plan.y_strides[d] * plan.dims[d];
      index[d] = 0;
    }
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

enum class binop { add, sub, mul, real_div, div };

template <binop Op>
status binary_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  auto& y = ctx.inputs[1];
  if (auto st = expect_input_type(ctx, 1, x.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  broadcast_plan plan;
  auto body = [&]<class T>(type_tag<T>) -> status {
    // Wrapping arithmetic for integer add/sub/mul; T itself otherwise.
    using C = std::conditional_t<Op == binop::add || Op == binop::sub
                                   || Op == binop::mul,
                                 wrapping_t<T>, T>;
    if (auto st = make_broadcast(x.shape(), y.shape(), plan); !st.ok())
      return st;
    // Every element is written below: no zero-fill first.
    auto out = tensor::uninitialized(x.type(), tensor_shape{plan.out_dims});
    auto xp = data_as<C, T>(x);
    auto yp = data_as<C, T>(y);
    auto op = data_as<C, T>(out);
    if constexpr (Op == binop::add) {
      run_broadcast(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a + b; });
    } else if constexpr (Op == binop::sub) {
      run_broadcast(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a - b; });
    } else if constexpr (Op == binop::mul) {
      run_broadcast(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a * b; });
    } else if constexpr (std::is_integral_v<T>) {
      if (plan.count > 0) {
        auto ys = y.flat<T>();
        if (std::find(ys.begin(), ys.end(), T(0)) != ys.end())
          return invalid_argument("Integer division by zero");
      }
      run_broadcast(plan, xp, yp, op, [](const auto& a, const auto& b) {
        return a.binaryExpr(b, int_div<T>{});
      });
    } else {
      run_broadcast(plan, xp, yp, op,
                    [](const auto& a, const auto& b) { return a / b; });
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  if constexpr (Op == binop::real_div)
    return visit_float(ctx, x.type(), body);
  else
    return visit_numeric(ctx, x.type(), body);
}

// -- unary element-wise ops -------------------------------------------------

enum class unop { neg, square, exp, log, relu, sigmoid, tanh };

template <unop Op>
status unary_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 1); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  auto body = [&]<class T>(type_tag<T>) -> status {
    using C = std::conditional_t<Op == unop::neg || Op == unop::square,
                                 wrapping_t<T>, T>;
    auto out = tensor::uninitialized(x.type(), x.shape());
    auto n = x.num_elements();
    const_map<C> in(data_as<C, T>(x), n);
    mut_map<C> o(data_as<C, T>(out), n);
    if constexpr (Op == unop::neg)
      o = C(0) - in;
    else if constexpr (Op == unop::square)
      o = in.square();
    else if constexpr (Op == unop::exp)
      o = in.exp();
    else if constexpr (Op == unop::log)
      o = in.log();
    else if constexpr (Op == unop::relu)
      o = in.max(C(0));
    else if constexpr (Op == unop::sigmoid)
      o = (C(1) + (-in).exp()).inverse();
    else
      o = in.tanh();
    ctx.outputs.push_back(std::move(out));
    return {};
  };
  constexpr bool float_only = Op == unop::exp || Op == unop::log
                              || Op == unop::sigmoid || Op == unop::tanh;
  if constexpr (float_only)
    return visit_float(ctx, x.type(), body);
  else
    return visit_numeric(ctx, x.type(), body);
}

// -- MatMul -----------------------------------------------------------------

status matmul_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& a = ctx.inputs[0];
  auto& b = ctx.inputs[1];
  if (auto st = expect_input_type(ctx, 1, a.type()); !st.ok())
    return st;
  if (auto st = check_type_attr(ctx, "T", a.type()); !st.ok())
    return st;
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
  return visit_numeric(ctx, a.type(), [&]<class T>(type_tag<T>) -> status {
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
  });
}

// -- reductions -------------------------------------------------------------

enum class redop { sum, mean, max, prod };

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
      else if constexpr (Op == redop::prod)
        out[oo] *= row.prod();
      else
        out[oo] += row.sum();
    } else {
      mut_map<C> o(out + oo, inner);
      if constexpr (Op == redop::max)
        o = o.max(row);
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

template <redop Op>
status reduce_kernel(kernel_context& ctx) {
  if (auto st = expect_inputs(ctx, 2); !st.ok())
    return st;
  auto& x = ctx.inputs[0];
  if (auto st = check_type_attr(ctx, "T", x.type()); !st.ok())
    return st;
  bool keep_dims = false;
  if (auto st = read_attr(ctx, "keep_dims", keep_dims); !st.ok())
    return st;
  reduce_plan plan;
  if (auto st = make_reduce(ctx, x.shape(), ctx.inputs[1], keep_dims, plan);
      !st.ok())
    return st;
  return visit_numeric(ctx, x.type(), [&]<class T>(type_tag<T>) -> status {
    using C = std::conditional_t<Op == redop::max, T, wrapping_t<T>>;
    tensor out{x.type(), plan.out_shape};
    auto o = data_as<C, T>(out);
    run_reduce<Op>(plan, data_as<C, T>(x), x.num_elements(), o,
                   out.num_elements());
    if constexpr (Op == redop::mean) {
      auto count = plan.reduce_count;
      auto res = out.flat<T>();
      if constexpr (std::is_floating_point_v<T>) {
        // An empty mean is 0/0 = NaN, as in TensorFlow.
        for (auto& v : res)
          v /= static_cast<T>(count);
      } else if (count > 0) {
        // An empty integer mean stays 0 rather than dividing by zero.
        for (auto& v : res)
          v = static_cast<T>(static_cast<int64_t>(v) / count);
      }
    }
    ctx.outputs.push_back(std::move(out));
    return {};
  });
}

} // namespace

void register_math_kernels(kernel_registry& registry) {
  add_kernel<binary_kernel<binop::add>>(registry, "Add");
  add_kernel<binary_kernel<binop::sub>>(registry, "Sub");
  add_kernel<binary_kernel<binop::mul>>(registry, "Mul");
  add_kernel<binary_kernel<binop::real_div>>(registry, "RealDiv");
  add_kernel<binary_kernel<binop::div>>(registry, "Div");
  add_kernel<unary_kernel<unop::neg>>(registry, "Neg");
  add_kernel<unary_kernel<unop::square>>(registry, "Square");
  add_kernel<unary_kernel<unop::exp>>(registry, "Exp");
  add_kernel<unary_kernel<unop::log>>(registry, "Log");
  add_kernel<unary_kernel<unop::relu>>(registry, "Relu");
  add_kernel<unary_kernel<unop::sigmoid>>(registry, "Sigmoid");
  add_kernel<unary_kernel<unop::tanh>>(registry, "Tanh");
  add_kernel<matmul_kernel>(registry, "MatMul");
  add_kernel<reduce_kernel<redop::sum>>(registry, "Sum");
  add_kernel<reduce_kernel<redop::mean>>(registry, "Mean");
  add_kernel<reduce_kernel<redop::max>>(registry, "Max");
  add_kernel<reduce_kernel<redop::prod>>(registry, "Prod");
}

} // namespace actorflow::detail
