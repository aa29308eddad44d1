#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/graph/graph.hpp"

/// The graph-building API, mirroring TensorFlow 1.x's Python names:
///
/// ~~~
/// using namespace actorflow;
/// auto a = constant(1.0f);
/// auto b = a + 2.0f;
/// variable v{constant(0.0f), {.name = "v"}};
/// auto inc = v.assign_add(constant(1.0f));
/// ~~~
///
/// Ops without inputs are created in the thread's default graph; ops with
/// inputs in their inputs' graph. Builders throw op_error (InvalidArgument)
/// for arguments TensorFlow rejects at graph-building time (ValueError /
/// TypeError there), naming the node.
namespace actorflow {

// -- scopes (RAII guards; nest like Python's `with`) -------------------------

/// `with tf.device(spec):` — a partial spec merges field by field with the
/// enclosing ones (the inner wins); "" changes nothing.
class device_scope {
public:
  explicit device_scope(std::string_view spec);
  /// A device function; `std::nullopt` (TF's None, also what
  /// replica_device_setter returns without ps tasks) hides every outer
  /// device scope.
  explicit device_scope(std::optional<device_function> fn);
  explicit device_scope(std::nullptr_t);
  ~device_scope();
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

private:
  graph* graph_;
};

/// `with tf.control_dependencies([...]):` — ops created inside get control
/// inputs on these ops. `control_dependencies(nullptr)` clears the stack.
class control_dependencies {
public:
  control_dependencies(std::initializer_list<operation> ops);
  explicit control_dependencies(const std::vector<operation>& ops);
  control_dependencies(std::initializer_list<output> outputs);
  explicit control_dependencies(std::nullptr_t);
  ~control_dependencies();
  control_dependencies(const control_dependencies&) = delete;
  control_dependencies& operator=(const control_dependencies&) = delete;

private:
  void open(std::vector<operation> ops, bool clear);
  graph* graph_;
};

/// `with tf.name_scope(name):` — "" returns to the top level; a name
/// ending in '/' is reused verbatim; otherwise the scope is made unique.
class name_scope {
public:
  explicit name_scope(std::string_view name);
  ~name_scope();
  /// The scope prefix in force ("layer1/"), as `as scope` in Python.
  const std::string& prefix() const noexcept {
    return prefix_;
  }
  name_scope(const name_scope&) = delete;
  name_scope& operator=(const name_scope&) = delete;

private:
  graph* graph_;
  std::string prefix_;
};

/// `with tf.container(name):` — stateful ops created inside get
/// `container=name`; "" returns to the default container.
class container_scope {
public:
  explicit container_scope(std::string name);
  ~container_scope();
  container_scope(const container_scope&) = delete;
  container_scope& operator=(const container_scope&) = delete;

private:
  graph* graph_;
};

/// `with tf.colocate_with(op):` — ops created inside take `op`'s device
/// (ignoring device scopes) and join its colocation group.
class colocate_with {
public:
  explicit colocate_with(const operation& op);
  explicit colocate_with(const output& out) : colocate_with(out.op()) {
    // nop
  }
  ~colocate_with();
  colocate_with(const colocate_with&) = delete;
  colocate_with& operator=(const colocate_with&) = delete;

private:
  graph* graph_;
};

// -- constants, placeholders, identity ---------------------------------------

/// A Const node holding `value`.
output constant(const tensor& value, const std::string& name = "Const");
output constant(const char* value, const std::string& name = "Const");
output constant(const std::string& value, const std::string& name = "Const");

template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output constant(T value, const std::string& name = "Const") {
  return constant(tensor::scalar(value), name);
}

template <class T>
output constant(const std::vector<T>& values, tensor_shape shape,
                const std::string& name = "Const") {
  return constant(tensor::from_vector(values, std::move(shape)), name);
}

template <class T>
output constant(const std::vector<T>& values,
                const std::string& name = "Const") {
  return constant(tensor::vec(values), name);
}

/// A placeholder that must be fed; `shape` may have unknown dimensions
/// (-1) or be tensor_shape::unknown().
output placeholder(dtype type, tensor_shape shape = tensor_shape::unknown(),
                   const std::string& name = "Placeholder");

/// tf.placeholder_with_default: `input` unless a value is fed, which must
/// be of input's dtype and compatible with `shape` (default: input's
/// static shape). Throws op_error (InvalidArgument) when `shape` is not
/// compatible with input's.
output placeholder_with_default(const output& input,
                                std::optional<tensor_shape> shape = {},
                                const std::string& name
                                = "PlaceholderWithDefault");

output identity(const output& x, const std::string& name = "Identity");
/// A NoOp with the given control inputs.
operation no_op(const std::string& name = "NoOp");
/// tf.group: an op that runs every op in `ops`. As TensorFlow, when the
/// ops' requested devices differ it makes one NoOp per device (placed
/// there, depending on that device's ops) and a root NoOp `name`
/// depending on those, so that one control edge per device crosses
/// tasks; otherwise one NoOp `name` on their device.
operation group(const std::vector<operation>& ops,
                const std::string& name = "group_deps");
/// tf.Print: returns `input` and prints `message` plus `data` each time
/// it runs, the first `first_n` times only when `first_n` >= 0 (counted
/// per node and session on the task that runs it).
output print(const output& input, const std::vector<output>& data,
             const std::string& message = "", int64_t first_n = -1,
             int64_t summarize = 3, const std::string& name = "Print");
/// tf.Assert: an op that fails its step with InvalidArgument "assertion
/// failed: [d0] [d1] ..." (each of `data` summarized, its first
/// `summarize` elements) when the boolean scalar `condition` is false.
/// Run it (a target, or a control input of what depends on it). Throws
/// op_error (InvalidArgument) when `condition` is not a bool scalar.
operation assert_(const output& condition, const std::vector<output>& data,
                  int64_t summarize = 3, const std::string& name = "Assert");
/// tf.control_flow_ops.with_dependencies: `x` through an Identity
/// colocated with it that runs only after `dependencies`.
output with_dependencies(const std::vector<operation>& dependencies,
                         const output& x, const std::string& name = "");

// -- math ---------------------------------------------------------------------

output add(const output& x, const output& y, const std::string& name = "add");
output sub(const output& x, const output& y, const std::string& name = "sub");
output mul(const output& x, const output& y, const std::string& name = "mul");
/// Real division for floats (RealDiv, "truediv"); truncating for ints.
output div(const output& x, const output& y,
           const std::string& name = "truediv");
output neg(const output& x, const std::string& name = "Neg");
output square(const output& x, const std::string& name = "Square");
output exp(const output& x, const std::string& name = "Exp");
output log(const output& x, const std::string& name = "Log");
output relu(const output& x, const std::string& name = "Relu");
output sigmoid(const output& x, const std::string& name = "Sigmoid");
output tanh(const output& x, const std::string& name = "Tanh");
output matmul(const output& a, const output& b, bool transpose_a = false,
              bool transpose_b = false, const std::string& name = "MatMul");

/// Reductions; `axes` empty = all axes.
output reduce_sum(const output& x, std::vector<int> axes = {},
                  bool keep_dims = false, const std::string& name = "Sum");
output reduce_mean(const output& x, std::vector<int> axes = {},
                   bool keep_dims = false, const std::string& name = "Mean");
output reduce_max(const output& x, std::vector<int> axes = {},
                  bool keep_dims = false, const std::string& name = "Max");

// -- arrays -------------------------------------------------------------------

/// tf.split(value, num_split, axis): `num_split` equal parts.
std::vector<output> split(const output& value, int num_split, int axis = 0,
                          const std::string& name = "split");
output concat(const std::vector<output>& values, int axis,
              const std::string& name = "concat");
/// tf.stack (tf.pack in old releases).
output stack(const std::vector<output>& values, int axis = 0,
             const std::string& name = "stack");
inline output pack(const std::vector<output>& values, int axis = 0,
                   const std::string& name = "stack") {
  return stack(values, axis, name);
}
output reshape(const output& x, std::vector<int64_t> shape,
               const std::string& name = "Reshape");
output cast(const output& x, dtype to, const std::string& name = "Cast");
output fill(std::vector<int64_t> dims, const output& value,
            const std::string& name = "Fill");
output zeros(std::vector<int64_t> shape, dtype type = dtype::float32,
             const std::string& name = "zeros");
output ones(std::vector<int64_t> shape, dtype type = dtype::float32,
            const std::string& name = "ones");

// -- random -------------------------------------------------------------------

/// tf.random_normal: mean + stddev * N(0,1). Equal (graph seed, seed)
/// pairs give equal sequences in every session; seed 0 = none.
output random_normal(std::vector<int64_t> shape, double mean = 0.0,
                     double stddev = 1.0, dtype type = dtype::float32,
                     int64_t seed = 0,
                     const std::string& name = "random_normal");
/// tf.random_shuffle: `value` with its rows (dim 0) in a random order,
/// seeded as random_normal.
output random_shuffle(const output& value, int64_t seed = 0,
                      const std::string& name = "RandomShuffle");
output truncated_normal(std::vector<int64_t> shape, double mean = 0.0,
                        double stddev = 1.0, dtype type = dtype::float32,
                        int64_t seed = 0,
                        const std::string& name = "truncated_normal");
output random_uniform(std::vector<int64_t> shape, double minval = 0.0,
                      double maxval = 1.0, dtype type = dtype::float32,
                      int64_t seed = 0,
                      const std::string& name = "random_uniform");
/// random_uniform of a shape known when the step runs: `shape` an int32 or
/// int64 vector tensor (e.g. shape(x)). The step fails with
/// InvalidArgument when its value is not a shape.
output random_uniform(const output& shape, double minval = 0.0,
                      double maxval = 1.0, dtype type = dtype::float32,
                      int64_t seed = 0,
                      const std::string& name = "random_uniform");

// -- operator overloads --------------------------------------------------------

/// A scalar constant of `like`'s dtype, as Python converts `a + 2.0`.
output scalar_like(const output& like, double value, const std::string& name);

/// `x op value` (or `value op x` when `scalar_first`), with the scalar
/// converted to x's dtype and named "<name>/y" (or "/x") as TensorFlow
/// does. `op` is "Add", "Sub", "Mul" or "Div".
output binary_with_scalar(const std::string& op, const std::string& name,
                          const output& x, double value, bool scalar_first);

output operator+(const output& x, const output& y);
output operator-(const output& x, const output& y);
output operator*(const output& x, const output& y);
output operator/(const output& x, const output& y);
output operator-(const output& x);

template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator+(const output& x, T y) {
  return binary_with_scalar("Add", "add", x, static_cast<double>(y), false);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator+(T x, const output& y) {
  return binary_with_scalar("Add", "add", y, static_cast<double>(x), true);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator-(const output& x, T y) {
  return binary_with_scalar("Sub", "sub", x, static_cast<double>(y), false);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator-(T x, const output& y) {
  return binary_with_scalar("Sub", "sub", y, static_cast<double>(x), true);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator*(const output& x, T y) {
  return binary_with_scalar("Mul", "mul", x, static_cast<double>(y), false);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator*(T x, const output& y) {
  return binary_with_scalar("Mul", "mul", y, static_cast<double>(x), true);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator/(const output& x, T y) {
  return binary_with_scalar("Div", "truediv", x, static_cast<double>(y), false);
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
output operator/(T x, const output& y) {
  return binary_with_scalar("Div", "truediv", y, static_cast<double>(x), true);
}

// -- variables ----------------------------------------------------------------

/// Collection keys, as TensorFlow's GraphKeys.
inline constexpr const char* global_variables_key = "variables";
inline constexpr const char* trainable_variables_key = "trainable_variables";
inline constexpr const char* local_variables_key = "local_variables";

struct variable_options {
  std::string name = "Variable";
  bool trainable = true;
  /// Defaults to {global_variables_key}; trainable variables are also added
  /// to trainable_variables_key. An empty list given explicitly
  /// (`std::vector<std::string>{}`) puts the variable in no collection.
  std::optional<std::vector<std::string>> collections = std::nullopt;
  bool validate_shape = true;
};

/// TensorFlow's VariableDef, as `Variable.to_proto()` returns it.
struct variable_def {
  std::string variable_name;
  std::string initializer_name;
  std::string snapshot_name;
  std::string initial_value_name;
  bool trainable = true;
  /// The text-format proto, as Python prints it.
  std::string to_string() const;
};

/// A (ref) variable: nodes `name` (VariableV2), `name/initial_value`,
/// `name/Assign` (the initializer) and `name/read` (the snapshot), all
/// built without the enclosing control dependencies and colocated with the
/// variable. Same container and name on a task = the same variable for
/// every session.
class variable {
public:
  variable() = default;
  /// From an initial value tensor (a constant is created for it).
  variable(const tensor& initial_value, variable_options opts = {});
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  variable(T initial_value, variable_options opts = {})
    : variable(tensor::scalar(initial_value), std::move(opts)) {
    // nop
  }
  variable(const char* initial_value, variable_options opts = {})
    : variable(tensor::scalar(std::string{initial_value}), std::move(opts)) {
    // nop
  }
  /// From an initializer op's output (e.g. random_normal(...)).
  variable(const output& initial_value, variable_options opts = {});
  /// Rebuilds the handle for a variable already in `g` (by node name).
  static variable from_graph(graph& g, const std::string& var_node);

  bool valid() const noexcept {
    return graph_ != nullptr;
  }
  /// "v:0".
  std::string name() const;
  /// The VariableV2 node.
  operation op() const;
  /// The ref output "v:0" (what `sess.run(v)` fetches).
  output ref() const;
  /// The snapshot "v/read:0", used when the variable is an op input.
  output value() const;
  operator output() const {
    return value();
  }
  /// The initializer ("v/Assign").
  operation initializer() const;
  output initial_value() const;
  /// The read, after the initializer has run (identity with a control
  /// dependency on the initializer).
  output initialized_value() const;
  dtype type() const;
  tensor_shape shape() const;
  const std::string& device() const;
  bool trainable() const;

  output assign(const output& value, bool validate_shape = true,
                const std::string& name = "Assign") const;
  output assign_add(const output& value,
                    const std::string& name = "AssignAdd") const;
  output assign_sub(const output& value,
                    const std::string& name = "AssignSub") const;
  /// Scalars are converted to the variable's dtype ("AssignAdd/value").
  output assign(double value) const;
  output assign_add(double value) const;
  output assign_sub(double value) const;

  /// CountUpTo (tf.count_up_to): increments an int32 or int64 scalar
  /// variable atomically and gives its value before the increment; once
  /// the value has reached `limit`, fails with OutOfRange ("Reached limit
  /// of <limit>") and leaves it unchanged. InvalidArgument at build time
  /// for another dtype.
  output count_up_to(int64_t limit, const std::string& name = "CountUpTo") const;

  variable_def to_proto() const;

private:
  variable(graph* g, int index) : graph_(g), index_(index) {
    // nop
  }
  void build(const output& initial_value, variable_options opts);
  const variable_info& info() const;
  output assign_op(const std::string& op_type, const output& value,
                   const std::string& name, bool validate_shape) const;
  output assign_scalar(const std::string& op_type, double value,
                       const std::string& name) const;
  graph* graph_ = nullptr;
  int index_ = -1;
};

/// IsVariableInitialized: a bool scalar, never fails.
output is_variable_initialized(const variable& v,
                               const std::string& name
                               = "IsVariableInitialized");

/// The variables of a collection of the default graph.
std::vector<variable> global_variables();
std::vector<variable> trainable_variables();
std::vector<variable> local_variables();

/// A NoOp "init" that runs every global variable's initializer.
operation global_variables_initializer(const std::string& name = "init");
/// tf.local_variables_initializer: runs every local variable's
/// initializer (e.g. the epoch counters of string_input_producer).
operation local_variables_initializer(const std::string& name = "init");
operation variables_initializer(const std::vector<variable>& vars,
                                const std::string& name = "init");

} // namespace actorflow
