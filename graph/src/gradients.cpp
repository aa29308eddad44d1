// tf.gradients: TF's _GradientsHelper (reverse accumulation over the ops
// between xs and ys) and the gradient function of every differentiable op
// we have, each built from other ops as TF's math_grad.py, nn_grad.py and
// array_grad.py do.

#include "actorflow/graph/gradients.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

using namespace detail;

namespace {

using grads_t = std::vector<output>;

// -- builders the gradient functions share ------------------------------------

output reshape_to(const output& x, const output& shape_t,
                  const std::string& name = "Reshape") {
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Reshape");
  n.attrs["T"] = x.type();
  n.attrs["Tshape"] = shape_t.type();
  return g.add_node(std::move(n), {x, shape_t}, {x.type()},
                    {tensor_shape::unknown()})
    .out(0);
}

std::pair<output, output> broadcast_gradient_args(const output& s0,
                                                  const output& s1) {
  auto& g = graph_of(s0);
  auto n = make_node(g.unique_name("BroadcastGradientArgs"),
                     "BroadcastGradientArgs");
  n.attrs["T"] = dtype::int32;
  auto op = g.add_node(std::move(n), {s0, s1}, {dtype::int32, dtype::int32},
                       {tensor_shape{{-1}}, tensor_shape{{-1}}});
  return {op.out(0), op.out(1)};
}

// The value of a Const that feeds `op` at `index`, as ints (reduction
// axes, split dims, permutations). InvalidArgument if it is not a Const.
std::vector<int64_t> const_ints(const operation& op, int index) {
  auto in = op.inputs().at(static_cast<size_t>(index));
  auto& def = in.op().def();
  if (def.op != "Const")
    fail("the gradient of '" + op.name() + "' needs input "
         + std::to_string(index) + " to be a constant, got " + def.op);
  auto& t = def.attr<tensor>("value");
  std::vector<int64_t> result;
  if (t.type() == dtype::int32)
    for (auto v : t.flat<int32_t>())
      result.push_back(v);
  else if (t.type() == dtype::int64)
    for (auto v : t.flat<int64_t>())
      result.push_back(v);
  else
    fail("the gradient of '" + op.name() + "' needs integer input "
         + std::to_string(index));
  return result;
}

// Reduction axes in [0, rank), ascending; all axes for an empty list.
std::vector<int> normalized_axes(std::vector<int64_t> axes, int rank) {
  std::set<int> result;
  if (axes.empty())
    for (int i = 0; i < rank; ++i)
      result.insert(i);
  for (auto a : axes)
    result.insert(static_cast<int>(a < 0 ? a + rank : a));
  return {result.begin(), result.end()};
}

bool same_static_shape(const output& x, const output& y) {
  return x.shape().fully_defined() && x.shape() == y.shape();
}

// The axes numpy broadcasting stretched to make `from` into `to` (static).
std::vector<int> broadcast_axes(const tensor_shape& from,
                                const tensor_shape& to) {
  std::vector<int> axes;
  auto offset = to.rank() - from.rank();
  for (int i = 0; i < to.rank(); ++i)
    if (i < offset || (from.dim(i - offset) == 1 && to.dim(i) != 1))
      axes.push_back(i);
  return axes;
}

// Sums `g` (of the broadcast shape of x and y) back to the shape of `x`
// (`to_y`: of `y`), as TF's BroadcastGradientArgs + Sum + Reshape.
output sum_to(const output& g, const output& x, const output& y,
              bool to_y = false) {
  auto& target = to_y ? y : x;
  if (same_static_shape(g, target))
    return g;
  if (target.shape().fully_defined() && g.shape().fully_defined()) {
    auto axes = broadcast_axes(target.shape(), g.shape());
    auto summed = axes.empty() ? g : reduce_sum(g, axes);
    return reshape(summed, target.shape().dims());
  }
  auto sx = shape(x);
  auto sy = shape(y);
  auto [rx, ry] = broadcast_gradient_args(sx, sy);
  return reshape_to(reduce_sum(g, to_y ? ry : rx), to_y ? sy : sx);
}

output scalar_of(const output& like, double v, const std::string& name) {
  return scalar_like(like, v, name);
}

// g reshaped to the input's rank with 1s at the reduced axes.
output kept_dims(output g, const std::vector<int>& axes, bool keep_dims) {
  if (keep_dims)
    return g;
  for (auto a : axes)
    g = expand_dims(g, a);
  return g;
}

// -- gradient functions -----------------------------------------------------------

grads_t identity_grad(const operation& op, const grads_t& g) {
  grads_t result(op.inputs().size());
  result[0] = g[0];
  return result;
}

grads_t add_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  return {sum_to(g[0], in[0], in[1]), sum_to(g[0], in[0], in[1], true)};
}

grads_t sub_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  return {sum_to(g[0], in[0], in[1]), sum_to(neg(g[0]), in[0], in[1], true)};
}

grads_t mul_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  return {sum_to(mul(g[0], in[1]), in[0], in[1]),
          sum_to(mul(in[0], g[0]), in[0], in[1], true)};
}

grads_t div_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto& x = in[0];
  auto& y = in[1];
  auto gx = binary("RealDiv", g[0], y, "RealDiv");
  auto gy = mul(g[0], binary("RealDiv", binary("RealDiv", neg(x), y, "RealDiv"),
                             y, "RealDiv"));
  return {sum_to(gx, x, y), sum_to(gy, x, y, true)};
}

// d(x^y)/dx = y x^(y-1); d(x^y)/dy = x^y log x, taken as 0 where x <= 0
// (TF's _PowGrad: log of a safe x, so no NaN leaks through the select).
grads_t pow_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto& x = in[0];
  auto& y = in[1];
  auto z = op.out(0);
  auto gx = mul(mul(g[0], y), pow(x, sub(y, scalar_of(y, 1.0, "one"))));
  auto positive = greater(x, zeros_like(x));
  auto safe_x = select(positive, x, ones_like(x));
  auto log_x = select(positive, log(safe_x), zeros_like(x));
  auto gy = mul(mul(g[0], z), log_x);
  return {sum_to(gx, x, y), sum_to(gy, x, y, true)};
}

grads_t add_n_grad(const operation& op, const grads_t& g) {
  return grads_t(op.inputs().size(), g[0]);
}

grads_t neg_grad(const operation&, const grads_t& g) {
  return {neg(g[0])};
}

grads_t square_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  return {mul(g[0], mul(x, scalar_of(x, 2.0, "y")))};
}

grads_t exp_grad(const operation& op, const grads_t& g) {
  return {mul(g[0], op.out(0))};
}

grads_t log_grad(const operation& op, const grads_t& g) {
  return {mul(g[0], reciprocal(op.inputs()[0]))};
}

grads_t log1p_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  return {mul(g[0], reciprocal(add(scalar_of(x, 1.0, "x"), x)))};
}

grads_t sqrt_grad(const operation& op, const grads_t& g) {
  auto y = op.out(0);
  return {mul(g[0], mul(scalar_of(y, 0.5, "half"), reciprocal(y)))};
}

grads_t reciprocal_grad(const operation& op, const grads_t& g) {
  auto y = op.out(0);
  return {neg(mul(g[0], mul(y, y)))};
}

grads_t abs_grad(const operation& op, const grads_t& g) {
  return {mul(g[0], sign(op.inputs()[0]))};
}

// ReluGrad(gradients, features), SigmoidGrad(y, dy), TanhGrad(y, dy).
output activation_grad(const std::string& op_type, const output& a,
                       const output& b) {
  auto& g = graph_of(a);
  auto n = make_node(g.unique_name(op_type), op_type);
  n.attrs["T"] = a.type();
  return g.add_node(std::move(n), {a, b}, {a.type()}, {a.shape()}).out(0);
}

grads_t relu_grad(const operation& op, const grads_t& g) {
  return {activation_grad("ReluGrad", g[0], op.out(0))};
}

grads_t sigmoid_grad(const operation& op, const grads_t& g) {
  return {activation_grad("SigmoidGrad", op.out(0), g[0])};
}

grads_t tanh_grad(const operation& op, const grads_t& g) {
  return {activation_grad("TanhGrad", op.out(0), g[0])};
}

grads_t maximum_minimum_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto mask = op.type() == "Maximum" ? greater_equal(in[0], in[1])
                                     : less(in[0], in[1]);
  // A mask of the broadcast shape needs operands of that shape.
  auto zeros = zeros_like(g[0]);
  auto gx = select(mask, g[0], zeros);
  auto gy = select(mask, zeros, g[0]);
  return {sum_to(gx, in[0], in[1]), sum_to(gy, in[0], in[1], true)};
}

grads_t select_grad(const operation& op, const grads_t& g) {
  auto cond = op.inputs()[0];
  auto zeros = zeros_like(g[0]);
  return {output{}, select(cond, g[0], zeros), select(cond, zeros, g[0])};
}

grads_t matmul_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto& a = in[0];
  auto& b = in[1];
  auto ta = op.def().attr_or<bool>("transpose_a", false);
  auto tb = op.def().attr_or<bool>("transpose_b", false);
  auto& dy = g[0];
  if (!ta && !tb)
    return {matmul(dy, b, false, true), matmul(a, dy, true, false)};
  if (!ta && tb)
    return {matmul(dy, b, false, false), matmul(dy, a, true, false)};
  if (ta && !tb)
    return {matmul(b, dy, false, true), matmul(a, dy, false, false)};
  return {matmul(b, dy, true, true), matmul(dy, a, true, true)};
}

grads_t sum_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  if (x.shape().unknown_rank())
    fail("the gradient of '" + op.name() + "' needs the input's rank");
  auto axes = normalized_axes(const_ints(op, 1), x.shape().rank());
  auto keep = op.def().attr_or<bool>("keep_dims", false);
  return {mul(kept_dims(g[0], axes, keep), ones_like(x)), output{}};
}

grads_t mean_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  auto y = op.out(0);
  auto sum = sum_grad(op, g)[0];
  output count;
  if (x.shape().fully_defined() && y.shape().fully_defined()) {
    auto n = x.shape().num_elements() / std::max<int64_t>(
                                          1, y.shape().num_elements());
    count = scalar_of(x, static_cast<double>(n), "count");
  } else {
    count = binary("RealDiv", cast(size(x), x.type()),
                   cast(size(y), x.type()), "count");
  }
  return {binary("RealDiv", sum, count, "truediv"), output{}};
}

// TF's _MinOrMaxGrad: the gradient goes to the extreme elements, shared
// equally among ties.
grads_t min_or_max_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  if (x.shape().unknown_rank())
    fail("the gradient of '" + op.name() + "' needs the input's rank");
  auto axes = normalized_axes(const_ints(op, 1), x.shape().rank());
  auto keep = op.def().attr_or<bool>("keep_dims", false);
  auto y = kept_dims(op.out(0), axes, keep);
  auto indicators = cast(equal(y, x), x.type());
  std::vector<int> raw(axes.begin(), axes.end());
  auto selected = kept_dims(reduce_sum(indicators, raw), axes, false);
  auto dy = kept_dims(g[0], axes, keep);
  return {mul(binary("RealDiv", indicators, selected, "truediv"), dy),
          output{}};
}

grads_t reshape_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  if (x.shape().fully_defined())
    return {reshape(g[0], x.shape().dims()), output{}};
  return {reshape_to(g[0], shape(x)), output{}};
}

grads_t expand_squeeze_grad(const operation& op, const grads_t& g) {
  auto result = reshape_grad(op, g);
  result.resize(op.inputs().size());
  return result;
}

grads_t transpose_grad(const operation& op, const grads_t& g) {
  auto perm = const_ints(op, 1);
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<size_t>(perm[i])] = static_cast<int>(i);
  return {transpose(g[0], inverse), output{}};
}

grads_t cast_grad(const operation& op, const grads_t& g) {
  auto src = op.def().attr<dtype>("SrcT");
  if (!is_float(src) || !is_float(g[0].type()))
    return {output{}};
  return {cast(g[0], src)};
}

grads_t concat_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto n = in.size() - 1;
  auto rank = in[0].shape().rank();
  if (in[0].shape().unknown_rank())
    fail("the gradient of '" + op.name() + "' needs the inputs' ranks");
  auto axis = static_cast<int>(const_ints(op, static_cast<int>(n)).at(0));
  if (axis < 0)
    axis += rank;
  grads_t result;
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    auto width = in[i].shape().dim(axis);
    if (width < 0)
      fail("the gradient of '" + op.name() + "' needs static sizes along "
           "the concat axis");
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0);
    std::vector<int64_t> size(static_cast<size_t>(rank), -1);
    begin[static_cast<size_t>(axis)] = offset;
    size[static_cast<size_t>(axis)] = width;
    result.push_back(slice(g[0], begin, size));
    offset += width;
  }
  result.emplace_back();
  return result;
}

grads_t pack_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto axis = static_cast<int>(op.def().attr_or<int64_t>("axis", 0));
  auto rank = g[0].shape().rank();
  if (g[0].shape().unknown_rank())
    fail("the gradient of '" + op.name() + "' needs the output's rank");
  if (axis < 0)
    axis += rank;
  grads_t result;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0);
    std::vector<int64_t> size(static_cast<size_t>(rank), -1);
    begin[static_cast<size_t>(axis)] = static_cast<int64_t>(i);
    size[static_cast<size_t>(axis)] = 1;
    result.push_back(squeeze(slice(g[0], begin, size), {axis}));
  }
  return result;
}

grads_t split_grad(const operation& op, const grads_t& g) {
  auto axis = static_cast<int>(const_ints(op, 0).at(0));
  grads_t parts;
  for (int i = 0; i < op.num_outputs(); ++i)
    parts.push_back(g[static_cast<size_t>(i)]);
  return {output{}, concat(parts, axis)};
}

grads_t softmax_grad(const operation& op, const grads_t& g) {
  auto y = op.out(0);
  auto dot = reduce_sum(mul(g[0], y), {-1}, true);
  return {mul(sub(g[0], dot), y)};
}

grads_t log_softmax_grad(const operation& op, const grads_t& g) {
  auto y = op.out(0);
  return {sub(g[0], mul(reduce_sum(g[0], {-1}, true), exp(y)))};
}

grads_t softmax_xent_grad(const operation& op, const grads_t& g) {
  // Only the loss (output 0) has a gradient worth following.
  auto dloss = expand_dims(g[0], -1);
  auto in = op.inputs();
  auto logits_grad = mul(dloss, op.out(1));
  auto labels_grad = mul(dloss, neg(log_softmax(in[0])));
  return {logits_grad, labels_grad};
}

grads_t sparse_xent_grad(const operation& op, const grads_t& g) {
  return {mul(expand_dims(g[0], -1), op.out(1)), output{}};
}

grads_t l2_loss_grad(const operation& op, const grads_t& g) {
  return {mul(op.inputs()[0], g[0])};
}

grads_t bias_add_grad(const operation& op, const grads_t& g) {
  auto& gr = graph_of(g[0]);
  auto n = make_node(gr.unique_name("BiasAddGrad"), "BiasAddGrad");
  n.attrs["T"] = g[0].type();
  n.attrs["data_format"] = std::string{"NHWC"};
  auto bias = op.inputs()[1];
  auto db = gr.add_node(std::move(n), {g[0]}, {g[0].type()}, {bias.shape()})
              .out(0);
  return {g[0], db};
}

grads_t gather_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  auto& params = in[0];
  auto& indices = in[1];
  if (op.type() == "GatherV2" && const_ints(op, 2).at(0) != 0)
    fail("the gradient of '" + op.name() + "' supports axis 0 only");
  if (!params.shape().fully_defined())
    fail("the gradient of '" + op.name()
         + "' needs params of a static shape");
  auto dims = params.shape().dims();
  std::vector<int64_t> rows{-1};
  rows.insert(rows.end(), dims.begin() + 1, dims.end());
  auto values = reshape(g[0], rows);
  auto ids = reshape(indices, {-1});
  auto count = constant(tensor::scalar(static_cast<int32_t>(dims[0])),
                        "num_segments");
  grads_t result(in.size());
  result[0] = unsorted_segment_sum(values, ids, count);
  return result;
}

// Conv2DBackpropInput / Conv2DBackpropFilter with the forward op's attrs.
output conv_backprop(const operation& op, const std::string& type,
                     const std::vector<output>& inputs, const output& like) {
  auto& g = graph_of(like);
  auto n = make_node(g.unique_name(type), type);
  for (auto key : {"T", "strides", "padding", "data_format",
                   "use_cudnn_on_gpu", "dilations"})
    if (auto i = op.def().attrs.find(key); i != op.def().attrs.end())
      n.attrs[key] = i->second;
  return g.add_node(std::move(n), inputs, {like.type()}, {like.shape()})
    .out(0);
}

grads_t conv2d_grad(const operation& op, const grads_t& g) {
  auto in = op.inputs();
  return {conv_backprop(op, "Conv2DBackpropInput",
                        {shape(in[0]), in[1], g[0]}, in[0]),
          conv_backprop(op, "Conv2DBackpropFilter",
                        {in[0], shape(in[1]), g[0]}, in[1])};
}

grads_t max_pool_grad(const operation& op, const grads_t& g) {
  auto x = op.inputs()[0];
  auto& gr = graph_of(x);
  auto n = make_node(gr.unique_name("MaxPoolGrad"), "MaxPoolGrad");
  for (auto key : {"T", "ksize", "strides", "padding", "data_format"})
    if (auto i = op.def().attrs.find(key); i != op.def().attrs.end())
      n.attrs[key] = i->second;
  return {gr.add_node(std::move(n), {x, op.out(0), g[0]}, {x.type()},
                      {x.shape()})
            .out(0)};
}

// -- the registry -----------------------------------------------------------------

struct registry {
  std::mutex mtx;
  std::unordered_map<std::string, gradient_fn> fns;
  std::unordered_set<std::string> none;
};

registry& gradient_registry() {
  static registry* r = [] {
    auto* r = new registry;
    auto& f = r->fns;
    for (auto op : {"Identity", "Print", "StopGradient_",
                    "PlaceholderWithDefault"})
      f[op] = identity_grad;
    f["Add"] = add_grad;
    f["Sub"] = sub_grad;
    f["Mul"] = mul_grad;
    f["RealDiv"] = div_grad;
    f["Div"] = div_grad;
    f["AddN"] = add_n_grad;
    f["Neg"] = neg_grad;
    f["Square"] = square_grad;
    f["Exp"] = exp_grad;
    f["Log"] = log_grad;
    f["Log1p"] = log1p_grad;
    f["Sqrt"] = sqrt_grad;
    f["Pow"] = pow_grad;
    f["Reciprocal"] = reciprocal_grad;
    f["Abs"] = abs_grad;
    f["Relu"] = relu_grad;
    f["Sigmoid"] = sigmoid_grad;
    f["Tanh"] = tanh_grad;
    f["Maximum"] = maximum_minimum_grad;
    f["Minimum"] = maximum_minimum_grad;
    f["Select"] = select_grad;
    f["MatMul"] = matmul_grad;
    f["Sum"] = sum_grad;
    f["Mean"] = mean_grad;
    f["Max"] = min_or_max_grad;
    f["Min"] = min_or_max_grad;
    f["Reshape"] = reshape_grad;
    f["ExpandDims"] = expand_squeeze_grad;
    f["Squeeze"] = expand_squeeze_grad;
    f["Transpose"] = transpose_grad;
    f["Cast"] = cast_grad;
    f["ConcatV2"] = concat_grad;
    f["Pack"] = pack_grad;
    f["Split"] = split_grad;
    f["Softmax"] = softmax_grad;
    f["LogSoftmax"] = log_softmax_grad;
    f["SoftmaxCrossEntropyWithLogits"] = softmax_xent_grad;
    f["SparseSoftmaxCrossEntropyWithLogits"] = sparse_xent_grad;
    f["L2Loss"] = l2_loss_grad;
    f["BiasAdd"] = bias_add_grad;
    f["GatherV2"] = gather_grad;
    f["Gather"] = gather_grad;
    f["Conv2D"] = conv2d_grad;
    f["MaxPool"] = max_pool_grad;
    for (auto op : {"Const", "Placeholder", "VariableV2", "Variable", "Shape",
                    "Size", "Rank", "ZerosLike", "OnesLike", "Fill", "Equal",
                    "Greater", "GreaterEqual", "Less", "ArgMax", "Sign", "Floor",
                    "BroadcastGradientArgs", "RandomUniform",
                    "RandomStandardNormal", "TruncatedNormal",
                    "RandomShuffle", "DecodeCSV", "DecodeRaw",
                    "QueueDequeueV2", "QueueDequeueManyV2",
                    "QueueDequeueUpToV2", "ReaderReadV2", "ReaderReadUpToV2",
                    "_Recv", "_Arg", "Assign", "AssignAdd", "AssignSub",
                    "CountUpTo", "NoOp"})
      r->none.insert(op);
    return r;
  }();
  return *r;
}

std::optional<gradient_fn> find_gradient(const std::string& op,
                                         bool& differentiable) {
  auto& r = gradient_registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  differentiable = r.none.count(op) == 0;
  if (auto i = r.fns.find(op); i != r.fns.end())
    return i->second;
  return std::nullopt;
}

// -- the backward pass ----------------------------------------------------------

using key_t = std::pair<int, int>; // (node, output)

struct key_hash {
  size_t operator()(const key_t& k) const noexcept {
    return std::hash<int64_t>{}((int64_t{k.first} << 20) ^ k.second);
  }
};

output aggregate(std::vector<output>& xs) {
  if (xs.empty())
    return {};
  if (xs.size() > 1) {
    auto sum = add_n(xs);
    xs.assign(1, sum);
  }
  return xs.front();
}

} // namespace

void register_gradient(const std::string& op_type, gradient_fn fn) {
  auto& r = gradient_registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  r.none.erase(op_type);
  r.fns[op_type] = std::move(fn);
}

void not_differentiable(const std::string& op_type) {
  auto& r = gradient_registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  r.fns.erase(op_type);
  r.none.insert(op_type);
}

std::vector<output> gradients(const std::vector<output>& ys,
                              const std::vector<output>& xs,
                              const std::vector<output>& grad_ys,
                              const std::string& name) {
  if (ys.empty() || xs.empty())
    fail("gradients needs at least one y and one x");
  auto& g = graph_of(ys.front());
  for (auto& t : ys)
    if (&graph_of(t) != &g)
      fail("ys and xs of gradients must be from the same graph: " + t.name());
  for (auto& t : xs)
    if (&graph_of(t) != &g)
      fail("ys and xs of gradients must be from the same graph: " + t.name());
  if (!grad_ys.empty() && grad_ys.size() != ys.size())
    fail("Passed " + std::to_string(grad_ys.size())
         + " grad_ys for " + std::to_string(ys.size()) + " ys");
  graph::default_guard as_default{g};
  auto n = g.num_nodes();
  // Data edges of the graph as it is now (gradient nodes come later).
  std::vector<std::vector<int>> consumers(static_cast<size_t>(n));
  std::vector<std::vector<output>> inputs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    inputs[static_cast<size_t>(i)] = operation{&g, i}.inputs();
    for (auto& in : inputs[static_cast<size_t>(i)])
      consumers[static_cast<size_t>(in.node_index())].push_back(i);
  }
  // Ops between xs and ys: reachable forward from xs and backward from ys.
  std::vector<char> from_xs(static_cast<size_t>(n), 0);
  std::deque<int> work;
  for (auto& x : xs)
    work.push_back(x.node_index());
  while (!work.empty()) {
    auto i = work.front();
    work.pop_front();
    if (from_xs[static_cast<size_t>(i)])
      continue;
    from_xs[static_cast<size_t>(i)] = 1;
    for (auto c : consumers[static_cast<size_t>(i)])
      work.push_back(c);
  }
  std::vector<char> between(static_cast<size_t>(n), 0);
  for (auto& y : ys)
    work.push_back(y.node_index());
  while (!work.empty()) {
    auto i = work.front();
    work.pop_front();
    if (between[static_cast<size_t>(i)] || !from_xs[static_cast<size_t>(i)])
      continue;
    between[static_cast<size_t>(i)] = 1;
    for (auto& in : inputs[static_cast<size_t>(i)])
      work.push_back(in.node_index());
  }
  std::vector<int> pending(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    if (between[static_cast<size_t>(i)])
      for (auto& in : inputs[static_cast<size_t>(i)])
        if (between[static_cast<size_t>(in.node_index())])
          ++pending[static_cast<size_t>(in.node_index())];
  name_scope scope{name};
  std::unordered_map<key_t, std::vector<output>, key_hash> grads;
  for (size_t i = 0; i < ys.size(); ++i) {
    auto& y = ys[i];
    output dy;
    if (!grad_ys.empty() && grad_ys[i].valid()) {
      if (grad_ys[i].type() != y.type())
        fail("grad_ys[" + std::to_string(i) + "] has dtype "
             + std::string{to_string(grad_ys[i].type())} + ", " + y.name()
             + " has " + std::string{to_string(y.type())});
      dy = grad_ys[i];
    } else {
      dy = ones_like(y, "grad_ys_" + std::to_string(i));
    }
    grads[{y.node_index(), y.index()}].push_back(dy);
  }
  std::set<int> queued;
  for (auto& y : ys)
    if (pending[static_cast<size_t>(y.node_index())] == 0
        && queued.insert(y.node_index()).second)
      work.push_back(y.node_index());
  while (!work.empty()) {
    auto i = work.front();
    work.pop_front();
    operation op{&g, i};
    auto& ins = inputs[static_cast<size_t>(i)];
    bool any = false;
    for (int k = 0; k < op.num_outputs(); ++k)
      any = any || !grads[{i, k}].empty();
    if (any && between[static_cast<size_t>(i)]) {
      // Aggregation and the op's gradient share its scope, as in TF:
      // "gradients/<op>_grad/...".
      name_scope grad_scope{op.name() + "_grad"};
      grads_t out_grads(static_cast<size_t>(op.num_outputs()));
      for (int k = 0; k < op.num_outputs(); ++k)
        out_grads[static_cast<size_t>(k)] = aggregate(grads[{i, k}]);
      bool differentiable = true;
      auto fn = find_gradient(op.type(), differentiable);
      if (!fn && differentiable)
        fail("No gradient defined for operation '" + op.name()
             + "' (op type: " + op.type() + ")");
      if (fn) {
        for (int k = 0; k < op.num_outputs(); ++k)
          if (!out_grads[static_cast<size_t>(k)].valid()
              && is_float(op.out(k).type()))
            out_grads[static_cast<size_t>(k)] = zeros_like(op.out(k));
        auto in_grads = (*fn)(op, out_grads);
        for (size_t j = 0; j < ins.size() && j < in_grads.size(); ++j)
          if (in_grads[j].valid() && is_float(ins[j].type()))
            grads[{ins[j].node_index(), ins[j].index()}].push_back(
              in_grads[j]);
      }
    }
    for (auto& in : ins) {
      auto p = in.node_index();
      if (!between[static_cast<size_t>(p)])
        continue;
      if (--pending[static_cast<size_t>(p)] == 0 && queued.insert(p).second)
        work.push_back(p);
    }
  }
  std::vector<output> result;
  for (auto& x : xs) {
    auto& list = grads[{x.node_index(), x.index()}];
    result.push_back(aggregate(list));
  }
  return result;
}

} // namespace actorflow
