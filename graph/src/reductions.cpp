// The reductions over constant axes (tf.reduce_*): their node, its shape
// and dtype checks, and the ops built on them (reduce_logsumexp). The
// reduction over axes given as a tensor is nn_ops.cpp's reduce_sum.

#include <algorithm>
#include <set>

#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

namespace detail {

output reduction(const std::string& op, const output& x,
                 std::vector<int> axes, bool keep_dims,
                 const std::string& name) {
  auto& g = graph_of(x);
  // TF's Any and All take bool only, and have no type attribute.
  bool logical = op == "Any" || op == "All";
  if (logical) {
    if (x.type() != dtype::bool_)
      fail("Value passed to parameter 'input' of op '" + op
           + "' has DataType " + std::string{to_string(x.type())}
           + " not in list of allowed values: bool");
  } else {
    check_numeric(op, x);
  }
  auto in = x.shape();
  if (axes.empty() && in.rank() >= 0)
    for (int i = 0; i < in.rank(); ++i)
      axes.push_back(i);
  tensor_shape out = tensor_shape::unknown();
  if (in.rank() >= 0) {
    std::set<int> reduced;
    for (auto a : axes) {
      auto axis = a < 0 ? a + in.rank() : a;
      if (axis < 0 || axis >= std::max(in.rank(), 1))
        fail("Invalid reduction dimension " + std::to_string(a) + " for input "
             "with " + std::to_string(in.rank()) + " dimensions (node '"
             + name + "')");
      reduced.insert(axis);
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < in.rank(); ++i) {
      if (reduced.count(i) == 0)
        dims.push_back(in.dim(i));
      else if (keep_dims)
        dims.push_back(1);
    }
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output indices;
  {
    exact_name_scope scope{g, op_name + "/"};
    std::vector<int64_t> xs(axes.begin(), axes.end());
    indices = int_vector_const(g, xs, "reduction_indices");
  }
  auto n = make_node(op_name, op);
  if (!logical)
    n.attrs["T"] = x.type();
  n.attrs["keep_dims"] = keep_dims;
  return g.add_node(std::move(n), {x, indices}, {x.type()}, {out}).out(0);
}

} // namespace detail

using namespace detail;

output reduce_sum(const output& x, std::vector<int> axes, bool keep_dims,
                  const std::string& name) {
  return reduction("Sum", x, std::move(axes), keep_dims, name);
}

output reduce_mean(const output& x, std::vector<int> axes, bool keep_dims,
                   const std::string& name) {
  return reduction("Mean", x, std::move(axes), keep_dims, name);
}

output reduce_max(const output& x, std::vector<int> axes, bool keep_dims,
                  const std::string& name) {
  return reduction("Max", x, std::move(axes), keep_dims, name);
}

output reduce_prod(const output& x, std::vector<int> axes, bool keep_dims,
                   const std::string& name) {
  return reduction("Prod", x, std::move(axes), keep_dims, name);
}

output reduce_min(const output& x, std::vector<int> axes, bool keep_dims,
                  const std::string& name) {
  return reduction("Min", x, std::move(axes), keep_dims, name);
}

output reduce_any(const output& x, std::vector<int> axes, bool keep_dims,
                  const std::string& name) {
  return reduction("Any", x, std::move(axes), keep_dims, name);
}

output reduce_all(const output& x, std::vector<int> axes, bool keep_dims,
                  const std::string& name) {
  return reduction("All", x, std::move(axes), keep_dims, name);
}

output reduce_logsumexp(const output& x, std::vector<int> axes,
                        bool keep_dims, const std::string& name) {
  check_numeric("Max", x);
  name_scope scope{name};
  // TF's: the maximum, taken out before exp, and 0 instead where it is
  // not finite (an all -inf slice: log(0) + 0 = -inf, not NaN). Its
  // gradient cancels: d/dm (log sum exp(x - m) + m) = 0.
  auto raw_max = reduce_max(x, axes, true);
  auto finite = equal(sub(raw_max, raw_max), zeros_like(raw_max));
  auto m = select(finite, raw_max, zeros_like(raw_max));
  auto sum = reduce_sum(exp(sub(x, m)), axes, keep_dims);
  return add(log(sum), reduce_max(m, axes, keep_dims));
}

} // namespace actorflow
