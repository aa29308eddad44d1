#pragma once

// The built-in kernels' one element-wise engine: numpy broadcasting of two
// operands walked row by row, each row one vectorizable loop, and the
// same-shape unary map. The arithmetic and comparison kernels, the
// activation gradients, BiasAdd and AddN all run on it.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "kernels_impl.hpp"

namespace actorflow::detail {

template <class T>
using array_t = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using const_map = Eigen::Map<const array_t<T>>;
template <class T>
using mut_map = Eigen::Map<array_t<T>>;

/// The typed buffer of `t`, viewed as C (T itself or its wrapping_t).
template <class C, class T>
const C* data_as(const tensor& t) {
  return reinterpret_cast<const C*>(t.flat<T>().data());
}
template <class C, class T>
C* data_as(tensor& t) {
  return reinterpret_cast<C*>(t.flat<T>().data());
}

/// How two operands broadcast against each other: the output shape, and a
/// walk over it with dimensions of size 1 dropped and neighbouring dimensions
/// merged when both operands either have or broadcast them alike. The last
/// walked dimension is contiguous (stride 1) in each operand that has it, so
/// the walk applies one loop to whole rows; operands of one shape are one
/// row.
struct broadcast_plan {
  std::vector<int64_t> out_dims;
  std::vector<int64_t> dims;
  std::vector<int64_t> x_strides; // 0 where x is broadcast
  std::vector<int64_t> y_strides; // 0 where y is broadcast
  int64_t count = 0;
};

/// The broadcast of shapes `xs` and `ys` (InvalidArgument "Incompatible
/// shapes: [2,3] vs. [4]").
status make_broadcast(const tensor_shape& xs, const tensor_shape& ys,
                      broadcast_plan& plan);

/// How an operation computes a row. `eigen`: f maps Eigen array
/// expressions to one (Eigen vectorizes it with its packet math). `each`:
/// f maps two elements to one, in plain loops the compiler vectorizes where
/// it can: for what Eigen's packets would compute differently (NaN in
/// Maximum, fast-math square roots), comparisons and strings.
enum class row_op { eigen, each };

/// out[0, n) = f(x, y), where an operand is a row of n elements (x_row,
/// y_row) or one element repeated. `out` may be `x` or `y`.
template <row_op M, class C, class R, class F>
void apply_row(const C* x, bool x_row, const C* y, bool y_row, R* out,
               int64_t n, const F& f) {
  if constexpr (M == row_op::eigen) {
    mut_map<R> o(out, n);
    if (x_row && y_row)
      o = f(const_map<C>(x, n), const_map<C>(y, n));
    else if (x_row)
      o = f(const_map<C>(x, n), array_t<C>::Constant(n, *y));
    else if (y_row)
      o = f(array_t<C>::Constant(n, *x), const_map<C>(y, n));
    else
      o = f(array_t<C>::Constant(n, *x), array_t<C>::Constant(n, *y));
  } else {
    // One loop per case, so that each is a plain vectorizable loop.
    if (x_row && y_row) {
      for (int64_t i = 0; i < n; ++i)
        out[i] = f(x[i], y[i]);
    } else if (x_row) {
      const C& b = *y;
      for (int64_t i = 0; i < n; ++i)
        out[i] = f(x[i], b);
    } else if (y_row) {
      const C& a = *x;
      for (int64_t i = 0; i < n; ++i)
        out[i] = f(a, y[i]);
    } else {
      std::fill_n(out, n, f(*x, *y));
    }
  }
}

/// Writes the plan.count elements of f applied to the broadcast of x and y
/// to `out`, row by row.
template <row_op M, class C, class R, class F>
void run_broadcast(const broadcast_plan& plan, const C* x, const C* y, R* out,
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
    apply_row<M>(x + xo, x_row, y + yo, y_row, out + r * inner, inner, f);
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

/// out[0, n) = f(x[0, n)); f as in row_op.
template <row_op M, class C, class R, class F>
void run_unary(const C* x, R* out, int64_t n, const F& f) {
  if constexpr (M == row_op::eigen) {
    mut_map<R>(out, n) = f(const_map<C>(x, n));
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(x[i]);
  }
}

} // namespace actorflow::detail
