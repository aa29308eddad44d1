#include "actorflow/graph/nn_ops.hpp"

#include <algorithm>
#include <numeric>

#include "actorflow/graph/ops.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

using namespace detail;

namespace {

void check_float(const std::string& op, const output& x) {
  if (!is_float(x.type()))
    fail("Value passed to parameter '" + x.name() + "' of op '" + op
         + "' has DataType " + std::string{to_string(x.type())}
         + " not in list of allowed values: float32, float64");
}

bool is_index(dtype t) {
  return t == dtype::int32 || t == dtype::int64;
}

void check_index(const std::string& op, const std::string& what,
                 const output& x) {
  if (!is_index(x.type()))
    fail("Input '" + what + "' of '" + op + "' Op has type "
         + std::string{to_string(x.type())}
         + " that is not in the list of allowed values: int32, int64");
}

int normalized_axis(int axis, int rank, const std::string& op) {
  auto a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail("axis " + std::to_string(axis) + " is out of range for a tensor of "
         "rank " + std::to_string(rank) + " (" + op + ")");
  return a;
}

// One node of `op` with attr T = type of the first input.
output simple(const std::string& op, const std::string& name,
              const std::vector<output>& inputs, dtype out_type,
              tensor_shape shape) {
  auto& g = graph_of(inputs.front());
  auto n = make_node(g.unique_name(name), op);
  n.attrs["T"] = inputs.front().type();
  return g.add_node(std::move(n), inputs, {out_type}, {std::move(shape)})
    .out(0);
}

output comparison(const std::string& op, const output& x, const output& y,
                  const std::string& name) {
  check_numeric(op, x);
  if (x.type() != y.type())
    fail("Input 'y' of '" + op + "' Op has type "
         + std::string{to_string(y.type())} + " that does not match type "
         + std::string{to_string(x.type())} + " of argument 'x'.");
  return simple(op, name, {x, y}, dtype::bool_,
                broadcast_shape(op, x.shape(), y.shape()));
}

// GetWindowedOutputSize for one spatial dimension.
int64_t windowed(int64_t in, int64_t k, int64_t s, const std::string& pad) {
  if (in < 0)
    return -1;
  if (pad == "VALID")
    return (in - k + s) / s;
  return (in + s - 1) / s;
}

void check_window(const std::string& op, const std::vector<int64_t>& strides,
                  const std::string& padding, const char* what) {
  if (strides.size() != 4)
    fail(op + " requires " + what + " to have 4 elements, got "
         + std::to_string(strides.size()));
  if (strides[0] != 1 || strides[3] != 1)
    fail(op + ": " + what + " in the batch and depth dimensions must be 1");
  for (auto s : strides)
    if (s < 1)
      fail(op + ": " + what + " must be positive");
  if (padding != "SAME" && padding != "VALID")
    fail(op + ": padding must be SAME or VALID, not " + padding);
}

tensor_shape windowed_shape(const tensor_shape& in, int64_t kh, int64_t kw,
                            const std::vector<int64_t>& strides,
                            const std::string& padding, int64_t depth) {
  if (in.unknown_rank())
    return tensor_shape{{-1, -1, -1, depth}};
  return tensor_shape{{in.dim(0), windowed(in.dim(1), kh, strides[1], padding),
                       windowed(in.dim(2), kw, strides[2], padding), depth}};
}

} // namespace

// -- array helpers -----------------------------------------------------------

output shape(const output& x, dtype out_type, const std::string& name) {
  if (!is_index(out_type))
    fail("shape's out_type must be int32 or int64");
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Shape");
  n.attrs["T"] = x.type();
  n.attrs["out_type"] = out_type;
  auto rank = x.shape().unknown_rank() ? -1 : x.shape().rank();
  return g.add_node(std::move(n), {x}, {out_type}, {tensor_shape{{rank}}})
    .out(0);
}

output size(const output& x, const std::string& name) {
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Size");
  n.attrs["T"] = x.type();
  n.attrs["out_type"] = dtype::int32;
  return g.add_node(std::move(n), {x}, {dtype::int32}, {tensor_shape{}}).out(0);
}

output zeros_like(const output& x, const std::string& name) {
  return simple("ZerosLike", name, {x}, x.type(), x.shape());
}

output ones_like(const output& x, const std::string& name) {
  return simple("OnesLike", name, {x}, x.type(), x.shape());
}

output add_n(const std::vector<output>& xs, const std::string& name) {
  if (xs.empty())
    fail("AddN needs at least one input");
  if (xs.size() == 1)
    return xs.front();
  for (auto& x : xs)
    if (x.type() != xs.front().type())
      fail("AddN inputs must share one dtype: " + x.name() + " is "
           + std::string{to_string(x.type())});
  auto& g = graph_of(xs.front());
  auto n = make_node(g.unique_name(name), "AddN");
  n.attrs["T"] = xs.front().type();
  n.attrs["N"] = static_cast<int64_t>(xs.size());
  return g.add_node(std::move(n), xs, {xs.front().type()},
                    {xs.front().shape()})
    .out(0);
}

output expand_dims(const output& x, int axis, const std::string& name) {
  auto& g = graph_of(x);
  auto in = x.shape();
  tensor_shape out = tensor_shape::unknown();
  if (!in.unknown_rank()) {
    // The new dimension may go anywhere in [0, rank]; -1 appends.
    auto a = axis < 0 ? axis + in.rank() + 1 : axis;
    if (a < 0 || a > in.rank())
      fail("ExpandDims: axis " + std::to_string(axis)
           + " is out of range for a tensor of rank "
           + std::to_string(in.rank()));
    auto dims = in.dims();
    dims.insert(dims.begin() + a, 1);
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output dim;
  {
    exact_name_scope scope{g, op_name + "/"};
    dim = scalar_const(g, dtype::int32, axis, "dim");
  }
  auto n = make_node(op_name, "ExpandDims");
  n.attrs["T"] = x.type();
  n.attrs["Tdim"] = dtype::int32;
  return g.add_node(std::move(n), {x, dim}, {x.type()}, {out}).out(0);
}

output squeeze(const output& x, std::vector<int> axes,
               const std::string& name) {
  auto& g = graph_of(x);
  auto in = x.shape();
  tensor_shape out = tensor_shape::unknown();
  if (!in.unknown_rank()) {
    std::vector<int64_t> dims;
    for (int i = 0; i < in.rank(); ++i) {
      bool listed = axes.empty();
      for (auto a : axes)
        listed = listed || normalized_axis(a, in.rank(), "Squeeze") == i;
      if (listed && in.dim(i) == 1)
        continue;
      if (listed && !axes.empty() && in.dim(i) > 1)
        fail("Can not squeeze dim[" + std::to_string(i)
             + "], expected a dimension of 1, got " + std::to_string(in.dim(i))
             + " for '" + name + "'");
      dims.push_back(in.dim(i));
    }
    if (axes.empty() && std::find(dims.begin(), dims.end(), -1) == dims.end())
      out = tensor_shape{dims};
    else if (!axes.empty())
      out = tensor_shape{dims};
  }
  auto n = make_node(g.unique_name(name), "Squeeze");
  n.attrs["T"] = x.type();
  n.attrs["squeeze_dims"] = std::vector<int64_t>(axes.begin(), axes.end());
  return g.add_node(std::move(n), {x}, {x.type()}, {out}).out(0);
}

output tile(const output& x, const output& multiples,
            const std::string& name) {
  check_index("Tile", "multiples", multiples);
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Tile");
  n.attrs["T"] = x.type();
  n.attrs["Tmultiples"] = multiples.type();
  auto out = x.shape().unknown_rank()
               ? tensor_shape::unknown()
               : tensor_shape{std::vector<int64_t>(
                 static_cast<size_t>(x.shape().rank()), -1)};
  return g.add_node(std::move(n), {x, multiples}, {x.type()}, {out}).out(0);
}

output transpose(const output& x, std::vector<int> perm,
                 const std::string& name) {
  auto& g = graph_of(x);
  auto in = x.shape();
  if (perm.empty()) {
    if (in.unknown_rank())
      fail("transpose without perm needs a known rank: " + x.name());
    for (int i = in.rank() - 1; i >= 0; --i)
      perm.push_back(i);
  }
  tensor_shape out = tensor_shape::unknown();
  if (!in.unknown_rank()) {
    if (static_cast<int>(perm.size()) != in.rank())
      fail("transpose expects a vector of size " + std::to_string(in.rank())
           + ". But input(1) is a vector of size "
           + std::to_string(perm.size()));
    std::vector<int64_t> dims;
    for (auto p : perm)
      dims.push_back(in.dim(normalized_axis(p, in.rank(), "Transpose")));
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output perm_t;
  {
    exact_name_scope scope{g, op_name + "/"};
    perm_t = int_vector_const(g, {perm.begin(), perm.end()}, "perm");
  }
  auto n = make_node(op_name, "Transpose");
  n.attrs["T"] = x.type();
  n.attrs["Tperm"] = perm_t.type();
  return g.add_node(std::move(n), {x, perm_t}, {x.type()}, {out}).out(0);
}

output slice(const output& x, std::vector<int64_t> begin,
             std::vector<int64_t> size, const std::string& name) {
  auto& g = graph_of(x);
  if (begin.size() != size.size())
    fail("slice's begin and size must have the same length");
  auto in = x.shape();
  tensor_shape out = tensor_shape::unknown();
  if (!in.unknown_rank()) {
    if (static_cast<int>(begin.size()) != in.rank())
      fail("Length of begin must equal the rank of " + x.name());
    std::vector<int64_t> dims;
    for (size_t i = 0; i < size.size(); ++i)
      dims.push_back(size[i] >= 0 ? size[i]
                     : in.dim(static_cast<int>(i)) < 0
                       ? -1
                       : in.dim(static_cast<int>(i)) - begin[i]);
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output b;
  output s;
  {
    exact_name_scope scope{g, op_name + "/"};
    // One index dtype for both, int64 if either needs it.
    auto index = index_dtype(begin) == dtype::int64 ? dtype::int64
                                                     : index_dtype(size);
    b = int_vector_const(g, begin, "begin", index);
    s = int_vector_const(g, size, "size", index);
  }
  auto n = make_node(op_name, "Slice");
  n.attrs["T"] = x.type();
  n.attrs["Index"] = b.type();
  return g.add_node(std::move(n), {x, b, s}, {x.type()}, {out}).out(0);
}

output gather(const output& params, const output& indices,
              const std::string& name) {
  check_index("GatherV2", "indices", indices);
  auto& g = graph_of(params);
  auto op_name = g.unique_name(name);
  output axis;
  {
    exact_name_scope scope{g, op_name + "/"};
    axis = scalar_const(g, dtype::int32, 0, "axis");
  }
  tensor_shape out = tensor_shape::unknown();
  auto p = params.shape();
  auto i = indices.shape();
  if (!p.unknown_rank() && !i.unknown_rank()) {
    if (p.rank() < 1)
      fail("Shape must be at least rank 1 but is rank 0 for '" + op_name
           + "'");
    auto dims = i.dims();
    dims.insert(dims.end(), p.dims().begin() + 1, p.dims().end());
    out = tensor_shape{dims};
  }
  auto n = make_node(op_name, "GatherV2");
  n.attrs["Tparams"] = params.type();
  n.attrs["Tindices"] = indices.type();
  n.attrs["Taxis"] = dtype::int32;
  return g.add_node(std::move(n), {params, indices, axis}, {params.type()},
                    {out})
    .out(0);
}

output embedding_lookup(const output& params, const output& ids,
                        const std::string& name) {
  graph::default_guard guard{graph_of(params)};
  name_scope scope{name};
  return gather(params, ids, "embedding_lookup");
}

output unsorted_segment_sum(const output& data, const output& segment_ids,
                            const output& num_segments,
                            const std::string& name) {
  check_numeric("UnsortedSegmentSum", data);
  check_index("UnsortedSegmentSum", "segment_ids", segment_ids);
  check_index("UnsortedSegmentSum", "num_segments", num_segments);
  auto& g = graph_of(data);
  auto n = make_node(g.unique_name(name), "UnsortedSegmentSum");
  n.attrs["T"] = data.type();
  n.attrs["Tindices"] = segment_ids.type();
  n.attrs["Tnumsegments"] = num_segments.type();
  tensor_shape out = tensor_shape::unknown();
  auto d = data.shape();
  auto s = segment_ids.shape();
  if (!d.unknown_rank() && !s.unknown_rank()) {
    std::vector<int64_t> dims{-1};
    dims.insert(dims.end(), d.dims().begin() + s.rank(), d.dims().end());
    out = tensor_shape{dims};
  }
  return g.add_node(std::move(n), {data, segment_ids, num_segments},
                    {data.type()}, {out})
    .out(0);
}

output argmax(const output& x, int axis, const std::string& name) {
  check_numeric("ArgMax", x);
  auto& g = graph_of(x);
  auto in = x.shape();
  tensor_shape out = tensor_shape::unknown();
  if (!in.unknown_rank()) {
    auto a = normalized_axis(axis, in.rank(), "ArgMax");
    auto dims = in.dims();
    dims.erase(dims.begin() + a);
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output dim;
  {
    exact_name_scope scope{g, op_name + "/"};
    dim = scalar_const(g, dtype::int32, axis, "dimension");
  }
  auto n = make_node(op_name, "ArgMax");
  n.attrs["T"] = x.type();
  n.attrs["Tidx"] = dtype::int32;
  n.attrs["output_type"] = dtype::int64;
  return g.add_node(std::move(n), {x, dim}, {dtype::int64}, {out}).out(0);
}

output reduce_sum(const output& x, const output& axes, bool keep_dims,
                  const std::string& name) {
  check_numeric("Sum", x);
  check_index("Sum", "reduction_indices", axes);
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Sum");
  n.attrs["T"] = x.type();
  n.attrs["Tidx"] = axes.type();
  n.attrs["keep_dims"] = keep_dims;
  auto out = keep_dims && !x.shape().unknown_rank()
               ? tensor_shape{std::vector<int64_t>(
                 static_cast<size_t>(x.shape().rank()), -1)}
               : tensor_shape::unknown();
  return g.add_node(std::move(n), {x, axes}, {x.type()}, {out}).out(0);
}


// -- element-wise ------------------------------------------------------------

output abs(const output& x, const std::string& name) {
  return unary("Abs", x, name);
}

output sign(const output& x, const std::string& name) {
  return unary("Sign", x, name);
}

output reciprocal(const output& x, const std::string& name) {
  return unary("Reciprocal", x, name, true);
}

output log1p(const output& x, const std::string& name) {
  return unary("Log1p", x, name, true);
}

output sqrt(const output& x, const std::string& name) {
  return unary("Sqrt", x, name, true);
}

output floor(const output& x, const std::string& name) {
  return unary("Floor", x, name, true);
}

output pow(const output& x, const output& y, const std::string& name) {
  check_float("Pow", x);
  return binary("Pow", x, y, name);
}

output maximum(const output& x, const output& y, const std::string& name) {
  return binary("Maximum", x, y, name);
}

output minimum(const output& x, const output& y, const std::string& name) {
  return binary("Minimum", x, y, name);
}

output equal(const output& x, const output& y, const std::string& name) {
  return comparison("Equal", x, y, name);
}

output greater(const output& x, const output& y, const std::string& name) {
  return comparison("Greater", x, y, name);
}

output greater_equal(const output& x, const output& y,
                     const std::string& name) {
  return comparison("GreaterEqual", x, y, name);
}

output less(const output& x, const output& y, const std::string& name) {
  return comparison("Less", x, y, name);
}

output select(const output& cond, const output& t, const output& e,
              const std::string& name) {
  if (cond.type() != dtype::bool_)
    fail("Select's condition must be bool, got "
         + std::string{to_string(cond.type())} + ": " + cond.name());
  if (t.type() != e.type())
    fail("Select's t and e must share a dtype: " + t.name() + ", " + e.name());
  auto& g = graph_of(t);
  auto n = make_node(g.unique_name(name), "Select");
  n.attrs["T"] = t.type();
  return g.add_node(std::move(n), {cond, t, e}, {t.type()}, {t.shape()})
    .out(0);
}

// -- tf.nn -------------------------------------------------------------------

output softmax(const output& logits, const std::string& name) {
  check_float("Softmax", logits);
  return simple("Softmax", name, {logits}, logits.type(), logits.shape());
}

output log_softmax(const output& logits, const std::string& name) {
  check_float("LogSoftmax", logits);
  return simple("LogSoftmax", name, {logits}, logits.type(), logits.shape());
}

output softmax_cross_entropy_with_logits(const output& labels,
                                         const output& logits,
                                         const std::string& name) {
  check_float("SoftmaxCrossEntropyWithLogits", logits);
  if (labels.type() != logits.type())
    fail("labels and logits of " + name + " must share a dtype");
  if (!labels.shape().is_compatible_with(logits.shape()))
    fail("logits and labels must be same size: logits_size="
         + logits.shape().to_string()
         + " labels_size=" + labels.shape().to_string());
  auto& g = graph_of(logits);
  auto n = make_node(g.unique_name(name), "SoftmaxCrossEntropyWithLogits");
  n.attrs["T"] = logits.type();
  auto batch = logits.shape().unknown_rank() ? -1 : logits.shape().dim(0);
  return g
    .add_node(std::move(n), {logits, labels}, {logits.type(), logits.type()},
              {tensor_shape{{batch}}, logits.shape()})
    .out(0);
}

output sparse_softmax_cross_entropy_with_logits(const output& labels,
                                                const output& logits,
                                                const std::string& name) {
  check_float("SparseSoftmaxCrossEntropyWithLogits", logits);
  check_index("SparseSoftmaxCrossEntropyWithLogits", "labels", labels);
  auto l = labels.shape();
  auto f = logits.shape();
  if (!l.unknown_rank() && l.rank() != 1)
    fail("Shape mismatch: The shape of labels (received " + l.to_string()
         + ") should equal the shape of logits except for the last dimension "
           "(received " + f.to_string() + ").");
  if (!f.unknown_rank() && f.rank() != 2)
    fail("logits must be 2-D, but got shape " + f.to_string());
  auto& g = graph_of(logits);
  auto n = make_node(g.unique_name(name),
                     "SparseSoftmaxCrossEntropyWithLogits");
  n.attrs["T"] = logits.type();
  n.attrs["Tlabels"] = labels.type();
  auto batch = f.unknown_rank() ? -1 : f.dim(0);
  return g
    .add_node(std::move(n), {logits, labels}, {logits.type(), logits.type()},
              {tensor_shape{{batch}}, f})
    .out(0);
}

output sigmoid_cross_entropy_with_logits(const output& labels,
                                         const output& logits,
                                         const std::string& name) {
  check_float("logistic_loss", logits);
  if (labels.type() != logits.type())
    fail("logits and labels must have the same type: " + labels.name());
  if (!labels.shape().is_compatible_with(logits.shape()))
    fail("logits and labels must have the same shape ("
         + logits.shape().to_string() + " vs " + labels.shape().to_string()
         + ")");
  auto& g = graph_of(logits);
  name_scope scope{name};
  // relu(x) - x * z + log1p(exp(-|x|)): stable for large |x|.
  auto relu_logits = relu(logits, "Relu");
  auto xz = mul(logits, labels, "mul");
  auto stable = log1p(exp(neg(abs(logits, "Abs"), "Neg"), "Exp"), "Log1p");
  auto sub_node = sub(relu_logits, xz, "sub");
  auto n = make_node(scope.prefix().substr(0, scope.prefix().size() - 1),
                     "Add");
  n.attrs["T"] = logits.type();
  return g.add_node(std::move(n), {sub_node, stable}, {logits.type()},
                    {logits.shape()})
    .out(0);
}

output l2_loss(const output& t, const std::string& name) {
  check_float("L2Loss", t);
  return simple("L2Loss", name, {t}, t.type(), tensor_shape{});
}

output bias_add(const output& value, const output& bias,
                const std::string& name) {
  check_numeric("BiasAdd", value);
  if (bias.type() != value.type())
    fail("BiasAdd's bias must have value's dtype: " + bias.name());
  auto v = value.shape();
  auto b = bias.shape();
  if (!b.unknown_rank() && b.rank() != 1)
    fail("Shape must be rank 1 but is rank " + std::to_string(b.rank())
         + " for '" + name + "' (bias)");
  if (!v.unknown_rank() && v.rank() < 2)
    fail("Shape must be at least rank 2 but is rank "
         + std::to_string(v.rank()) + " for '" + name + "' (value)");
  if (!v.unknown_rank() && !b.unknown_rank() && v.dim(v.rank() - 1) >= 0
      && b.dim(0) >= 0 && v.dim(v.rank() - 1) != b.dim(0))
    fail("Dimensions must be equal, but are "
         + std::to_string(v.dim(v.rank() - 1)) + " and "
         + std::to_string(b.dim(0)) + " for '" + name + "'");
  auto& g = graph_of(value);
  auto n = make_node(g.unique_name(name), "BiasAdd");
  n.attrs["T"] = value.type();
  n.attrs["data_format"] = std::string{"NHWC"};
  return g.add_node(std::move(n), {value, bias}, {value.type()}, {v}).out(0);
}

output conv2d(const output& input, const output& filter,
              std::vector<int64_t> strides, const std::string& padding,
              const std::string& name) {
  check_float("Conv2D", input);
  if (filter.type() != input.type())
    fail("Conv2D's filter must have input's dtype: " + filter.name());
  check_window("Conv2D", strides, padding, "strides");
  auto in = input.shape();
  auto f = filter.shape();
  if (!in.unknown_rank() && in.rank() != 4)
    fail("input must be 4-dimensional " + in.to_string());
  if (!f.unknown_rank() && f.rank() != 4)
    fail("filter must be 4-dimensional: " + f.to_string());
  auto known_f = !f.unknown_rank();
  if (known_f && !in.unknown_rank() && in.dim(3) >= 0 && f.dim(2) >= 0
      && in.dim(3) != f.dim(2))
    fail("input depth must be evenly divisible by filter depth: "
         + std::to_string(in.dim(3)) + " vs " + std::to_string(f.dim(2)));
  auto& g = graph_of(input);
  auto n = make_node(g.unique_name(name), "Conv2D");
  n.attrs["T"] = input.type();
  n.attrs["strides"] = strides;
  n.attrs["padding"] = padding;
  n.attrs["data_format"] = std::string{"NHWC"};
  n.attrs["use_cudnn_on_gpu"] = true;
  n.attrs["dilations"] = std::vector<int64_t>{1, 1, 1, 1};
  auto out = windowed_shape(in, known_f ? f.dim(0) : -1,
                            known_f ? f.dim(1) : -1, strides, padding,
                            known_f ? f.dim(3) : -1);
  if (!known_f || f.dim(0) < 0 || f.dim(1) < 0)
    out = tensor_shape{{in.unknown_rank() ? -1 : in.dim(0), -1, -1,
                        known_f ? f.dim(3) : -1}};
  return g.add_node(std::move(n), {input, filter}, {input.type()}, {out})
    .out(0);
}

output dropout(const output& x, const output& keep_prob, int64_t seed,
               const std::string& name) {
  check_float("dropout", x);
  if (keep_prob.type() != x.type())
    fail("dropout '" + name + "': keep_prob " + keep_prob.name()
         + " has type " + std::string{to_string(keep_prob.type())}
         + ", not x's " + std::string{to_string(x.type())});
  if (!keep_prob.shape().unknown_rank() && keep_prob.shape().rank() != 0)
    fail("dropout '" + name + "': keep_prob " + keep_prob.name()
         + " must be a scalar, got shape " + keep_prob.shape().to_string());
  auto& g = graph_of(x);
  exact_name_scope scope{g, g.unique_name(name) + "/"};
  // TF's formulation: floor(keep_prob + U[0, 1)) is 1 with probability
  // keep_prob, 0 otherwise.
  auto noise = random_uniform(shape(x), 0.0, 1.0, x.type(), seed);
  auto mask = floor(add(keep_prob, noise, "add"));
  return mul(div(x, keep_prob, "div"), mask, "mul");
}

output dropout(const output& x, double keep_prob, int64_t seed,
               const std::string& name) {
  if (!(keep_prob > 0 && keep_prob <= 1))
    fail("dropout '" + name + "': keep_prob must be a scalar tensor or a "
         "float in the range (0, 1], got " + std::to_string(keep_prob));
  check_float("dropout", x);
  if (keep_prob == 1)
    return x;
  auto& g = graph_of(x);
  return dropout(x, scalar_const(g, x.type(), keep_prob, "keep_prob"), seed,
                 name);
}

output max_pool(const output& value, std::vector<int64_t> ksize,
                std::vector<int64_t> strides, const std::string& padding,
                const std::string& name) {
  check_float("MaxPool", value);
  check_window("MaxPool", ksize, padding, "ksize");
  check_window("MaxPool", strides, padding, "strides");
  auto in = value.shape();
  if (!in.unknown_rank() && in.rank() != 4)
    fail("input must be 4-dimensional " + in.to_string());
  auto& g = graph_of(value);
  auto n = make_node(g.unique_name(name), "MaxPool");
  n.attrs["T"] = value.type();
  n.attrs["ksize"] = ksize;
  n.attrs["strides"] = strides;
  n.attrs["padding"] = padding;
  n.attrs["data_format"] = std::string{"NHWC"};
  auto out = windowed_shape(in, ksize[1], ksize[2], strides, padding,
                            in.unknown_rank() ? -1 : in.dim(3));
  return g.add_node(std::move(n), {value}, {value.type()}, {out}).out(0);
}

} // namespace actorflow
