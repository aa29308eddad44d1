// The random ops (tf.random_normal, truncated_normal, random_uniform,
// random_shuffle): a seeded random node scaled and shifted under the op's
// own name scope, as TF builds them.

#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph/ops.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

using namespace detail;

namespace {

// The random node of `op` drawing a tensor of shape `shape_t` (static
// shape `static_shape`), scaled and shifted, inside the open scope `full`.
output random_node(graph& g, const std::string& op, const std::string& full,
                   const output& shape_t, const tensor_shape& static_shape,
                   dtype type, int64_t seed, double scale, double shift) {
  auto n = make_node(g.unique_name(op), op);
  n.attrs["dtype"] = type;
  n.attrs["T"] = shape_t.type();
  set_seeds(g, n, seed);
  auto raw = g.add_node(std::move(n), {shape_t}, {type}, {static_shape}, true)
               .out(0);
  auto mul_c = scalar_const(g, type, scale,
                            op == "RandomUniform" ? "range" : "stddev");
  auto scaled = binary("Mul", raw, mul_c, "mul");
  auto shift_c = scalar_const(g, type, shift,
                              op == "RandomUniform" ? "min" : "mean");
  // The outermost op carries the scope's own name, as in TensorFlow.
  auto add_node = make_node(full, "Add");
  add_node.attrs["T"] = type;
  return g.add_node(std::move(add_node), {scaled, shift_c}, {type},
                    {static_shape})
    .out(0);
}

void check_random_type(dtype type) {
  if (!is_float(type))
    fail("random ops need a float type, got " + std::string{to_string(type)});
}

output random_op(const std::string& op, std::vector<int64_t> shape,
                 dtype type, int64_t seed, const std::string& scope_name,
                 double scale, double shift) {
  check_random_type(type);
  check_dims(op, scope_name, shape);
  auto& g = default_graph();
  auto full = g.unique_name(scope_name);
  exact_name_scope scope{g, full + "/"};
  auto shape_t = int_vector_const(g, shape, "shape");
  return random_node(g, op, full, shape_t, tensor_shape{shape}, type, seed,
                     scale, shift);
}

} // namespace

// -- random ---------------------------------------------------------------------------

output random_normal(std::vector<int64_t> shape, double mean, double stddev,
                     dtype type, int64_t seed, const std::string& name) {
  return random_op("RandomStandardNormal", std::move(shape), type, seed, name,
                   stddev, mean);
}

output truncated_normal(std::vector<int64_t> shape, double mean,
                        double stddev, dtype type, int64_t seed,
                        const std::string& name) {
  return random_op("TruncatedNormal", std::move(shape), type, seed, name,
                   stddev, mean);
}

output random_uniform(std::vector<int64_t> shape, double minval,
                      double maxval, dtype type, int64_t seed,
                      const std::string& name) {
  return random_op("RandomUniform", std::move(shape), type, seed, name,
                   maxval - minval, minval);
}

output random_uniform(const output& shape, double minval, double maxval,
                      dtype type, int64_t seed, const std::string& name) {
  check_random_type(type);
  if (shape.type() != dtype::int32 && shape.type() != dtype::int64)
    fail("random_uniform '" + name + "': its shape " + shape.name()
         + " has type " + std::string{to_string(shape.type())}
         + ", not int32 or int64");
  auto s = shape.shape();
  if (!s.unknown_rank() && s.rank() != 1)
    fail("random_uniform '" + name + "': its shape " + shape.name()
         + " must be a vector, got shape " + s.to_string());
  // The rank is known when the shape vector's length is.
  auto static_shape = !s.unknown_rank() && s.dim(0) >= 0
                        ? tensor_shape{std::vector<int64_t>(
                          static_cast<size_t>(s.dim(0)), -1)}
                        : tensor_shape::unknown();
  auto& g = graph_of(shape);
  auto full = g.unique_name(name);
  exact_name_scope scope{g, full + "/"};
  return random_node(g, "RandomUniform", full, shape, static_shape, type,
                     seed, maxval - minval, minval);
}

output random_shuffle(const output& value, int64_t seed,
                      const std::string& name) {
  auto& g = graph_of(value);
  auto n = make_node(g.unique_name(name), "RandomShuffle");
  n.attrs["T"] = value.type();
  set_seeds(g, n, seed);
  return g.add_node(std::move(n), {value}, {value.type()}, {value.shape()},
                    true)
    .out(0);
}

} // namespace actorflow
