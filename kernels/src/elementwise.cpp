#include "elementwise.hpp"

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
  }
  // Two empty operands may broadcast to a shape whose non-zero dimensions
  // multiply past int64 ([2^62,1,0] and [1,2^62,0]): refused, as any
  // tensor of that shape; then no product below overflows.
  if (auto st = checked_num_elements(plan.out_dims, plan.count); !st.ok())
    return invalid_argument("Incompatible shapes: " + xs.to_string() + " vs. "
                            + ys.to_string() + ": " + st.message());
  for (size_t i = 0; i < rank; ++i) {
    auto d = plan.out_dims[i];
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

} // namespace actorflow::detail
