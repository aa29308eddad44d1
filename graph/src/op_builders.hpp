#pragma once

// Private to graph/: the node-building helpers every op family shares
// (ops, nn_ops, gradients). Definitions in ops.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"

namespace actorflow::detail {

/// The graph of `x`; InvalidArgument for an empty output.
graph& graph_of(const output& x);

bool is_float(dtype t);
bool is_numeric(dtype t);

/// InvalidArgument ("Value passed to parameter 'x' of op 'Add' has
/// DataType string not in list of allowed values: ...") unless `op`'s
/// kernel takes `x`'s dtype: the numeric four (float32, float64, int32,
/// int64), for arithmetic ops (Add, Sub, Mul, Div, Neg, Square, AddN,
/// Sum, Mean, Prod) also float16, complex and the small integers, for the
/// ordered ones (comparisons, Maximum, Minimum, Abs, Sign, Relu, Max, Min)
/// float16 and the small integers, for MatMul float16 and complex, for
/// RealDiv the floating and complex types.
void check_numeric(const std::string& op, const output& x);

/// numpy broadcasting of static shapes; unknown when either rank is.
tensor_shape broadcast_shape(const std::string& op, const tensor_shape& x,
                             const tensor_shape& y);

/// A Const of `type` holding `value`, named `name` (made unique).
output scalar_const(graph& g, dtype type, double value,
                    const std::string& name);

/// int32, or int64 when one of `values` does not fit in int32 (as
/// Python's convert_to_tensor picks a list's dtype): a shape of 2^32 + 5
/// elements stays 2^32 + 5.
dtype index_dtype(const std::vector<int64_t>& values);

/// A vector Const of `values`, of `type` (int32 or int64; invalid:
/// index_dtype(values)).
output int_vector_const(graph& g, const std::vector<int64_t>& values,
                        const std::string& name,
                        dtype type = dtype::invalid);

/// InvalidArgument (op_error) naming `op` and `name` unless `dims` are a
/// shape a tensor can have (checked_num_elements): what fill, zeros, ones
/// and the random ops are given.
void check_dims(const std::string& op, const std::string& name,
                const std::vector<int64_t>& dims);

/// An element-wise op of one input with attr T.
output unary(const std::string& op, const output& x, const std::string& name,
             bool float_only = false);

/// An element-wise op of two inputs of one dtype, broadcasting.
output binary(const std::string& op, const output& x, const output& y,
              const std::string& name);

/// A reduction node (Sum, Mean, Max, Min, Prod, Any, All) over constant
/// `axes` (all when empty); reductions.cpp.
output reduction(const std::string& op, const output& x,
                 std::vector<int> axes, bool keep_dims,
                 const std::string& name);

/// `seed`/`seed2` of a random node, as TF's get_seed.
void set_seeds(const graph& g, node_def& n, int64_t seed);

} // namespace actorflow::detail
