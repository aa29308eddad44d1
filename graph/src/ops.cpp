#include "actorflow/graph/ops.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "actorflow/graph/device_name.hpp"
#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

namespace detail {

graph& graph_of(const output& x) {
  if (!x.valid())
    throw op_error(error_code::invalid_argument,
                   "an op input is an empty (default-constructed) output");
  return *x.owner();
}

bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float64;
}

bool is_numeric(dtype t) {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::int32
         || t == dtype::int64;
}

namespace {

// The dtypes the kernels of `op` take beyond the numeric four
// (kernels_impl.hpp's visit_arithmetic, visit_real), as TF registers its
// CPU kernels.
std::vector<dtype> more_dtypes(const std::string& op) {
  using d = dtype;
  static const std::set<std::string> arithmetic{
    "Add", "Sub", "Mul", "Div", "Neg", "Square", "AddN", "Sum", "Mean",
    "Prod"};
  static const std::set<std::string> real{
    "Maximum", "Minimum", "Greater", "GreaterEqual", "Less", "LessEqual",
    "Abs", "Sign", "Relu", "Max", "Min"};
  if (arithmetic.count(op) > 0)
    return {d::float16, d::int8, d::int16, d::uint8, d::uint16, d::complex64,
            d::complex128};
  if (real.count(op) > 0)
    return {d::float16, d::int8, d::int16, d::uint8, d::uint16};
  if (op == "MatMul")
    return {d::float16, d::complex64, d::complex128};
  if (op == "RealDiv")
    return {d::float16, d::complex64, d::complex128};
  return {};
}

} // namespace

void check_numeric(const std::string& op, const output& x) {
  auto more = more_dtypes(op);
  if (is_numeric(x.type())
      || std::find(more.begin(), more.end(), x.type()) != more.end())
    return;
  std::string allowed = "float32, float64, int32, int64";
  for (auto t : more)
    allowed += ", " + std::string{to_string(t)};
  fail("Value passed to parameter 'x' of op '" + op + "' has DataType "
       + std::string{to_string(x.type())}
       + " not in list of allowed values: " + allowed);
}

// Floating types and complex ones: "/" divides them exactly (RealDiv).
bool divides_exactly(dtype t) {
  return is_float(t) || t == dtype::float16 || t == dtype::complex64
         || t == dtype::complex128;
}

// numpy broadcasting on static shapes; unknown when either rank is.
tensor_shape broadcast_shape(const std::string& op, const tensor_shape& x,
                             const tensor_shape& y) {
  if (x.unknown_rank() || y.unknown_rank())
    return tensor_shape::unknown();
  auto& a = x.dims();
  auto& b = y.dims();
  auto n = std::max(a.size(), b.size());
  std::vector<int64_t> dims(n);
  for (size_t i = 0; i < n; ++i) {
    auto da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    auto db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == 1)
      dims[i] = db;
    else if (db == 1)
      dims[i] = da;
    else if (da < 0 || db < 0)
      dims[i] = std::max(da, db) < 0 ? -1 : std::max(da, db);
    else if (da == db)
      dims[i] = da;
    else
      fail("Dimensions must be equal, but are " + std::to_string(da) + " and "
           + std::to_string(db) + " for '" + op + "' with input shapes: "
           + x.to_string() + ", " + y.to_string() + ".");
  }
  return tensor_shape{dims};
}

// Converts a scalar to a Const of `type` named `name` in `g`.
output scalar_const(graph& g, dtype type, double value,
                    const std::string& name) {
  tensor t;
  switch (type) {
    case dtype::float32:
      t = tensor::scalar(static_cast<float>(value));
      break;
    case dtype::float64:
      t = tensor::scalar(value);
      break;
    case dtype::int32:
      t = tensor::scalar(static_cast<int32_t>(value));
      break;
    case dtype::int64:
      t = tensor::scalar(static_cast<int64_t>(value));
      break;
    case dtype::bool_:
      t = tensor::scalar(value != 0.0);
      break;
    case dtype::float16:
      t = tensor::scalar(half(static_cast<float>(value)));
      break;
    case dtype::int8:
      t = tensor::scalar(static_cast<int8_t>(value));
      break;
    case dtype::int16:
      t = tensor::scalar(static_cast<int16_t>(value));
      break;
    case dtype::uint8:
      t = tensor::scalar(static_cast<uint8_t>(value));
      break;
    case dtype::uint16:
      t = tensor::scalar(static_cast<uint16_t>(value));
      break;
    case dtype::complex64:
      t = tensor::scalar(std::complex<float>(static_cast<float>(value)));
      break;
    case dtype::complex128:
      t = tensor::scalar(std::complex<double>(value));
      break;
    default:
      fail("cannot convert a number to a tensor of type "
           + std::string{to_string(type)});
  }
  auto n = make_node(g.unique_name(name), "Const");
  n.attrs["value"] = t;
  n.attrs["dtype"] = t.type();
  return g.add_node(std::move(n), {}, {t.type()}, {t.shape()}).out(0);
}

dtype index_dtype(const std::vector<int64_t>& values) {
  for (auto v : values)
    if (v < std::numeric_limits<int32_t>::min()
        || v > std::numeric_limits<int32_t>::max())
      return dtype::int64;
  return dtype::int32;
}

output int_vector_const(graph& g, const std::vector<int64_t>& values,
                        const std::string& name, dtype type) {
  if (type == dtype::invalid)
    type = index_dtype(values);
  auto t = type == dtype::int64
             ? tensor::vec(values)
             : tensor::vec(std::vector<int32_t>(values.begin(), values.end()));
  auto n = make_node(g.unique_name(name), "Const");
  n.attrs["value"] = t;
  n.attrs["dtype"] = t.type();
  return g.add_node(std::move(n), {}, {t.type()}, {t.shape()}).out(0);
}

output unary(const std::string& op, const output& x, const std::string& name,
             bool float_only) {
  auto& g = graph_of(x);
  check_numeric(op, x);
  if (float_only && !is_float(x.type()))
    fail("Value passed to parameter 'x' of op '" + op + "' has DataType "
         + std::string{to_string(x.type())}
         + " not in list of allowed values: float32, float64");
  auto n = make_node(g.unique_name(name), op);
  n.attrs["T"] = x.type();
  return g.add_node(std::move(n), {x}, {x.type()}, {x.shape()}).out(0);
}

output binary(const std::string& op, const output& x, const output& y,
              const std::string& name) {
  auto& g = graph_of(x);
  if (&graph_of(y) != &g)
    fail("Tensors " + x.name() + " and " + y.name()
         + " must be from the same graph");
  check_numeric(op, x);
  if (x.type() != y.type())
    fail("Input 'y' of '" + op + "' Op has type "
         + std::string{to_string(y.type())}
         + " that does not match type " + std::string{to_string(x.type())}
         + " of argument 'x'.");
  auto shape = broadcast_shape(op, x.shape(), y.shape());
  auto n = make_node(g.unique_name(name), op);
  n.attrs["T"] = x.type();
  return g.add_node(std::move(n), {x, y}, {x.type()}, {shape}).out(0);
}


// TF's get_seed: an op seed without a graph seed uses the default graph
// seed; a graph seed without an op seed derives the op seed from the node
// count.
void set_seeds(const graph& g, node_def& n, int64_t seed) {
  int64_t seed1 = g.seed();
  int64_t seed2 = seed;
  if (seed1 == 0 && seed2 != 0)
    seed1 = 87654321;
  else if (seed1 != 0 && seed2 == 0)
    seed2 = g.num_nodes();
  n.attrs["seed"] = seed1;
  n.attrs["seed2"] = seed2;
}

void check_dims(const std::string& op, const std::string& name,
                const std::vector<int64_t>& dims) {
  int64_t n = 0;
  if (auto st = checked_num_elements(dims, n); !st.ok())
    fail(op + " '" + name + "': " + st.message());
}

// tf.zeros / tf.ones: Fill of a scalar, all under the op's own scope.
output fill_scalar(std::vector<int64_t> shape, dtype type, double value,
                   const std::string& name) {
  check_dims("Fill", name, shape);
  auto& g = default_graph();
  auto op_name = g.unique_name(name);
  output v;
  output dims_t;
  {
    exact_name_scope scope{g, op_name + "/"};
    dims_t = int_vector_const(g, shape, "shape");
    v = scalar_const(g, type, value, "Const");
  }
  auto n = make_node(op_name, "Fill");
  n.attrs["T"] = type;
  return g.add_node(std::move(n), {dims_t, v}, {type}, {tensor_shape{shape}})
    .out(0);
}

} // namespace detail

using namespace detail;

output binary_with_scalar(const std::string& op, const std::string& name,
                          const output& x, double value, bool scalar_first) {
  auto& g = graph_of(x);
  auto op_name = g.unique_name(name);
  output c;
  {
    exact_name_scope scope{g, op_name + "/"};
    c = scalar_const(g, x.type(), value, scalar_first ? "x" : "y");
  }
  auto real_op = op == "Div" && divides_exactly(x.type())
                   ? std::string{"RealDiv"}
                   : op;
  // binary() would make the name unique again; build the node directly.
  auto& lhs = scalar_first ? c : x;
  auto& rhs = scalar_first ? x : c;
  check_numeric(real_op, x);
  auto shape = broadcast_shape(real_op, lhs.shape(), rhs.shape());
  auto n = make_node(op_name, real_op);
  n.attrs["T"] = x.type();
  return g.add_node(std::move(n), {lhs, rhs}, {x.type()}, {shape}).out(0);
}

// -- scopes ---------------------------------------------------------------------

device_scope::device_scope(std::string_view spec)
  : graph_(&default_graph()) {
  // tf.device strings follow Python's DeviceSpec rules (not the C++
  // parser the placer uses): "*" stays literal, "/device:GPU" needs an id.
  auto parse = [](std::string_view text) {
    device_name d;
    throw_if_error(device_name::parse_spec(text, d));
    return d;
  };
  auto parsed = parse(spec);
  graph_->scopes().devices.emplace_back(
    device_function{[parsed, parse](const node_def& node) {
      auto result = parsed;
      if (!node.device.empty())
        result.merge_from(parse(node.device));
      return result.to_string();
    }});
}

device_scope::device_scope(std::optional<device_function> fn)
  : graph_(&default_graph()) {
  graph_->scopes().devices.push_back(std::move(fn));
}

device_scope::device_scope(std::nullptr_t) : graph_(&default_graph()) {
  graph_->scopes().devices.emplace_back(std::nullopt);
}

device_scope::~device_scope() {
  graph_->scopes().devices.pop_back();
}

control_dependencies::control_dependencies(
  std::initializer_list<operation> ops)
  : graph_(&default_graph()) {
  open(std::vector<operation>(ops), false);
}

control_dependencies::control_dependencies(const std::vector<operation>& ops)
  : graph_(&default_graph()) {
  open(ops, false);
}

control_dependencies::control_dependencies(
  std::initializer_list<output> outputs)
  : graph_(&default_graph()) {
  std::vector<operation> ops;
  for (auto& x : outputs)
    ops.push_back(x.op());
  open(std::move(ops), false);
}

control_dependencies::control_dependencies(std::nullptr_t)
  : graph_(&default_graph()) {
  open({}, true);
}

void control_dependencies::open(std::vector<operation> ops, bool clear) {
  graph::scope_state::control_frame frame;
  frame.clear = clear;
  for (auto& op : ops) {
    if (!op.valid())
      fail("Control input must be Operation or Tensor: <empty>");
    if (op.owner() != graph_)
      graph_ = op.owner();
  }
  auto& sc = graph_->scopes();
  std::set<int> active;
  if (!clear)
    for (size_t i = sc.first_active_frame(); i < sc.controls.size(); ++i)
      active.insert(sc.controls[i].ops.begin(), sc.controls[i].ops.end());
  for (auto& op : ops)
    if (active.insert(op.index()).second)
      frame.ops.push_back(op.index());
  sc.controls.push_back(std::move(frame));
}

control_dependencies::~control_dependencies() {
  graph_->scopes().controls.pop_back();
}

name_scope::name_scope(std::string_view name) : graph_(&default_graph()) {
  if (name.empty())
    prefix_.clear();
  else if (name.back() == '/')
    prefix_ = std::string{name};
  else
    prefix_ = graph_->unique_name(name) + "/";
  graph_->scopes().names.push_back(prefix_);
}

name_scope::~name_scope() {
  graph_->scopes().names.pop_back();
}

container_scope::container_scope(std::string name)
  : graph_(&default_graph()) {
  graph_->scopes().containers.push_back(std::move(name));
}

container_scope::~container_scope() {
  graph_->scopes().containers.pop_back();
}

colocate_with::colocate_with(const operation& op) : graph_(op.owner()) {
  if (!op.valid())
    fail("colocate_with needs an operation");
  auto& sc = graph_->scopes();
  sc.colocation.push_back(op);
  sc.saved_devices.push_back(std::move(sc.devices));
  sc.devices.clear();
}

colocate_with::~colocate_with() {
  auto& sc = graph_->scopes();
  sc.devices = std::move(sc.saved_devices.back());
  sc.saved_devices.pop_back();
  sc.colocation.pop_back();
}

// -- constants, placeholders, identity -----------------------------------------

output constant(const tensor& value, const std::string& name) {
  if (!value.valid())
    fail("constant '" + name + "' needs a valid tensor");
  auto& g = default_graph();
  auto n = make_node(g.unique_name(name), "Const");
  n.attrs["value"] = value;
  n.attrs["dtype"] = value.type();
  return g.add_node(std::move(n), {}, {value.type()}, {value.shape()}).out(0);
}

output constant(const char* value, const std::string& name) {
  return constant(tensor::scalar(std::string{value}), name);
}

output constant(const std::string& value, const std::string& name) {
  return constant(tensor::scalar(value), name);
}

output placeholder(dtype type, tensor_shape shape, const std::string& name) {
  if (type == dtype::invalid)
    fail("placeholder '" + name + "' needs a dtype");
  auto& g = default_graph();
  auto n = make_node(g.unique_name(name), "Placeholder");
  n.attrs["dtype"] = type;
  n.attrs["shape"] = shape;
  return g.add_node(std::move(n), {}, {type}, {shape}).out(0);
}

output placeholder_with_default(const output& input,
                                std::optional<tensor_shape> shape,
                                const std::string& name) {
  auto& g = graph_of(input);
  auto declared = shape.value_or(input.shape());
  if (!declared.is_compatible_with(input.shape()))
    fail("placeholder_with_default '" + name + "': the default "
         + input.name() + " has shape " + input.shape().to_string()
         + ", not compatible with the declared shape "
         + declared.to_string());
  auto n = make_node(g.unique_name(name), "PlaceholderWithDefault");
  n.attrs["dtype"] = input.type();
  n.attrs["shape"] = declared;
  return g.add_node(std::move(n), {input}, {input.type()}, {declared}).out(0);
}

output identity(const output& x, const std::string& name) {
  auto& g = graph_of(x);
  auto n = make_node(g.unique_name(name), "Identity");
  n.attrs["T"] = x.type();
  return g.add_node(std::move(n), {x}, {x.type()}, {x.shape()}).out(0);
}

operation no_op(const std::string& name) {
  auto& g = default_graph();
  return g.add_node(make_node(g.unique_name(name), "NoOp"), {}, {}, {});
}

// -- math -------------------------------------------------------------------------

output add(const output& x, const output& y, const std::string& name) {
  return binary("Add", x, y, name);
}

output sub(const output& x, const output& y, const std::string& name) {
  return binary("Sub", x, y, name);
}

output mul(const output& x, const output& y, const std::string& name) {
  return binary("Mul", x, y, name);
}

output div(const output& x, const output& y, const std::string& name) {
  return binary(divides_exactly(x.type()) ? "RealDiv" : "Div", x, y, name);
}

output neg(const output& x, const std::string& name) {
  return unary("Neg", x, name);
}

output square(const output& x, const std::string& name) {
  return unary("Square", x, name);
}

output exp(const output& x, const std::string& name) {
  return unary("Exp", x, name, true);
}

output log(const output& x, const std::string& name) {
  return unary("Log", x, name, true);
}

output relu(const output& x, const std::string& name) {
  return unary("Relu", x, name);
}

output sigmoid(const output& x, const std::string& name) {
  return unary("Sigmoid", x, name, true);
}

output tanh(const output& x, const std::string& name) {
  return unary("Tanh", x, name, true);
}

output matmul(const output& a, const output& b, bool transpose_a,
              bool transpose_b, const std::string& name) {
  auto& g = graph_of(a);
  check_numeric("MatMul", a);
  if (a.type() != b.type())
    fail("Input 'b' of 'MatMul' Op has type "
         + std::string{to_string(b.type())} + " that does not match type "
         + std::string{to_string(a.type())} + " of argument 'a'.");
  auto sa = a.shape();
  auto sb = b.shape();
  tensor_shape out{-1, -1};
  if (sa.rank() >= 0 && sa.rank() != 2)
    fail("Shape must be rank 2 but is rank " + std::to_string(sa.rank())
         + " for 'MatMul' (input a " + a.name() + ")");
  if (sb.rank() >= 0 && sb.rank() != 2)
    fail("Shape must be rank 2 but is rank " + std::to_string(sb.rank())
         + " for 'MatMul' (input b " + b.name() + ")");
  if (sa.rank() == 2 && sb.rank() == 2) {
    auto k1 = sa.dim(transpose_a ? 0 : 1);
    auto k2 = sb.dim(transpose_b ? 1 : 0);
    if (k1 >= 0 && k2 >= 0 && k1 != k2)
      fail("Dimensions must be equal, but are " + std::to_string(k1) + " and "
           + std::to_string(k2) + " for 'MatMul' with input shapes: "
           + sa.to_string() + ", " + sb.to_string() + ".");
    out = tensor_shape{sa.dim(transpose_a ? 1 : 0), sb.dim(transpose_b ? 0 : 1)};
  }
  auto n = make_node(g.unique_name(name), "MatMul");
  n.attrs["T"] = a.type();
  n.attrs["transpose_a"] = transpose_a;
  n.attrs["transpose_b"] = transpose_b;
  return g.add_node(std::move(n), {a, b}, {a.type()}, {out}).out(0);
}

// -- arrays -------------------------------------------------------------------------

std::vector<output> split(const output& value, int num_split, int axis,
                          const std::string& name) {
  auto& g = graph_of(value);
  if (num_split <= 0)
    fail("split '" + name + "': num_split must be positive, got "
         + std::to_string(num_split));
  auto in = value.shape();
  tensor_shape part = tensor_shape::unknown();
  if (in.rank() >= 0) {
    auto a = axis < 0 ? axis + in.rank() : axis;
    if (a < 0 || a >= in.rank())
      fail("split '" + name + "': axis " + std::to_string(axis)
           + " out of range for shape " + in.to_string());
    auto dims = in.dims();
    if (dims[static_cast<size_t>(a)] >= 0) {
      if (dims[static_cast<size_t>(a)] % num_split != 0)
        fail("Dimension " + std::to_string(a) + " in both shapes must be "
             "equal: number of ways to split should evenly divide the split "
             "dimension, but got split_dim " + std::to_string(a) + " (size = "
             + std::to_string(dims[static_cast<size_t>(a)])
             + ") and num_split " + std::to_string(num_split));
      dims[static_cast<size_t>(a)] /= num_split;
    }
    part = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output dim;
  {
    exact_name_scope scope{g, op_name + "/"};
    dim = scalar_const(g, dtype::int32, axis, "split_dim");
  }
  auto n = make_node(op_name, "Split");
  n.attrs["T"] = value.type();
  n.attrs["num_split"] = static_cast<int64_t>(num_split);
  std::vector<dtype> types(static_cast<size_t>(num_split), value.type());
  std::vector<tensor_shape> shapes(static_cast<size_t>(num_split), part);
  auto op = g.add_node(std::move(n), {dim, value}, types, shapes);
  std::vector<output> result;
  for (int i = 0; i < num_split; ++i)
    result.push_back(op.out(i));
  return result;
}

output concat(const std::vector<output>& values, int axis,
              const std::string& name) {
  if (values.empty())
    fail("concat '" + name + "' needs at least one input");
  auto& g = graph_of(values.front());
  auto type = values.front().type();
  tensor_shape out = values.front().shape();
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i].type() != type)
      fail("concat '" + name + "': all inputs must have type "
           + std::string{to_string(type)});
    auto s = values[i].shape();
    if (out.rank() < 0 || s.rank() < 0 || s.rank() != out.rank()) {
      out = tensor_shape::unknown();
      continue;
    }
    auto a = axis < 0 ? axis + out.rank() : axis;
    auto dims = out.dims();
    for (int d = 0; d < out.rank(); ++d) {
      if (d == a)
        dims[static_cast<size_t>(d)] = (dims[static_cast<size_t>(d)] < 0
                                        || s.dim(d) < 0)
                                         ? -1
                                         : dims[static_cast<size_t>(d)]
                                             + s.dim(d);
    }
    out = tensor_shape{dims};
  }
  auto op_name = g.unique_name(name);
  output ax;
  {
    exact_name_scope scope{g, op_name + "/"};
    ax = scalar_const(g, dtype::int32, axis, "axis");
  }
  auto n = make_node(op_name, "ConcatV2");
  n.attrs["T"] = type;
  n.attrs["N"] = static_cast<int64_t>(values.size());
  auto inputs = values;
  inputs.push_back(ax);
  return g.add_node(std::move(n), inputs, {type}, {out}).out(0);
}

output stack(const std::vector<output>& values, int axis,
             const std::string& name) {
  if (values.empty())
    fail("stack '" + name + "' needs at least one input");
  auto& g = graph_of(values.front());
  auto type = values.front().type();
  auto s = values.front().shape();
  for (auto& v : values)
    if (v.type() != type)
      fail("stack '" + name + "': all inputs must have type "
           + std::string{to_string(type)});
  tensor_shape out = tensor_shape::unknown();
  if (s.rank() >= 0) {
    auto a = axis < 0 ? axis + s.rank() + 1 : axis;
    if (a < 0 || a > s.rank())
      fail("stack '" + name + "': axis " + std::to_string(axis)
           + " out of range");
    auto dims = s.dims();
    dims.insert(dims.begin() + a, static_cast<int64_t>(values.size()));
    out = tensor_shape{dims};
  }
  auto n = make_node(g.unique_name(name), "Pack");
  n.attrs["T"] = type;
  n.attrs["N"] = static_cast<int64_t>(values.size());
  n.attrs["axis"] = static_cast<int64_t>(axis);
  return g.add_node(std::move(n), values, {type}, {out}).out(0);
}

output reshape(const output& x, std::vector<int64_t> shape,
               const std::string& name) {
  auto& g = graph_of(x);
  auto op_name = g.unique_name(name);
  output shape_t;
  {
    exact_name_scope scope{g, op_name + "/"};
    shape_t = int_vector_const(g, shape, "shape");
  }
  auto out = tensor_shape{shape};
  auto known = x.shape().num_elements();
  if (known >= 0) {
    int64_t product = 1;
    int unknown_at = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] < 0) {
        unknown_at = static_cast<int>(i);
      } else {
        product = multiply_without_overflow(product, shape[i]);
        if (product < 0)
          fail("Cannot reshape a tensor with " + std::to_string(known)
               + " elements to shape " + out.to_string() + " (node '"
               + op_name + "'): it has more than 2**63 - 1 elements");
      }
    }
    if (unknown_at >= 0 && product > 0 && known % product == 0)
      shape[static_cast<size_t>(unknown_at)] = known / product;
    else if (unknown_at < 0 && product != known)
      fail("Cannot reshape a tensor with " + std::to_string(known)
           + " elements to shape " + out.to_string() + " (node '" + op_name
           + "')");
    out = tensor_shape{shape};
  }
  auto n = make_node(op_name, "Reshape");
  n.attrs["T"] = x.type();
  return g.add_node(std::move(n), {x, shape_t}, {x.type()}, {out}).out(0);
}

output cast(const output& x, dtype to, const std::string& name) {
  auto& g = graph_of(x);
  if (to == dtype::string || x.type() == dtype::string)
    fail("Cast '" + name + "': string casts are not supported");
  auto n = make_node(g.unique_name(name), "Cast");
  n.attrs["SrcT"] = x.type();
  n.attrs["DstT"] = to;
  return g.add_node(std::move(n), {x}, {to}, {x.shape()}).out(0);
}

output fill(std::vector<int64_t> dims, const output& value,
            const std::string& name) {
  check_dims("Fill", name, dims);
  auto& g = graph_of(value);
  auto op_name = g.unique_name(name);
  output dims_t;
  {
    exact_name_scope scope{g, op_name + "/"};
    dims_t = int_vector_const(g, dims, "dims");
  }
  auto n = make_node(op_name, "Fill");
  n.attrs["T"] = value.type();
  return g.add_node(std::move(n), {dims_t, value}, {value.type()},
                    {tensor_shape{dims}})
    .out(0);
}

output zeros(std::vector<int64_t> shape, dtype type, const std::string& name) {
  return fill_scalar(std::move(shape), type, 0.0, name);
}

output ones(std::vector<int64_t> shape, dtype type, const std::string& name) {
  return fill_scalar(std::move(shape), type, 1.0, name);
}

// -- operators --------------------------------------------------------------------------

output scalar_like(const output& like, double value, const std::string& name) {
  return scalar_const(graph_of(like), like.type(), value, name);
}

output operator+(const output& x, const output& y) {
  return add(x, y);
}

output operator-(const output& x, const output& y) {
  return sub(x, y);
}

output operator*(const output& x, const output& y) {
  return mul(x, y);
}

output operator/(const output& x, const output& y) {
  return div(x, y);
}

output operator-(const output& x) {
  return neg(x);
}

} // namespace actorflow
