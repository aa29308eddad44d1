#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/tensor.hpp"

namespace actorflow {

class graph;

/// A device function, as passed to `tf.device(fn)`: given the node being
/// created (its `device` holds what inner scopes produced so far), returns
/// the device to set.
using device_function = std::function<std::string(const node_def&)>;

class operation;

/// One output of a node (TensorFlow's `Tensor` in a graph): `node:index`.
class output {
public:
  output() = default;
  output(graph* g, int node, int index) : graph_(g), node_(node), index_(index) {
    // nop
  }
  bool valid() const noexcept {
    return graph_ != nullptr;
  }
  graph* owner() const noexcept {
    return graph_;
  }
  int node_index() const noexcept {
    return node_;
  }
  int index() const noexcept {
    return index_;
  }
  operation op() const;
  /// "name:index", e.g. "var:0".
  std::string name() const;
  dtype type() const;
  /// The statically known shape (possibly partial or unknown).
  tensor_shape shape() const;
  const std::string& device() const;

  friend bool operator==(const output& x, const output& y) {
    return x.graph_ == y.graph_ && x.node_ == y.node_ && x.index_ == y.index_;
  }

private:
  graph* graph_ = nullptr;
  int node_ = -1;
  int index_ = 0;
};

/// Handle to a node of a graph (TensorFlow's `Operation`).
class operation {
public:
  operation() = default;
  operation(graph* g, int index) : graph_(g), index_(index) {
    // nop
  }
  bool valid() const noexcept {
    return graph_ != nullptr;
  }
  graph* owner() const noexcept {
    return graph_;
  }
  int index() const noexcept {
    return index_;
  }
  const node_def& def() const;
  const std::string& name() const;
  const std::string& type() const;
  /// The requested device ("" if none).
  const std::string& device() const;
  int num_outputs() const;
  /// The control inputs, by name.
  std::vector<std::string> control_inputs() const;
  /// The data inputs, in order (TF's `op.inputs`).
  std::vector<output> inputs() const;
  /// The `loc:@x` colocation groups ("loc:@self" when none is set).
  std::vector<std::string> colocation_groups() const;
  /// The output `i` ("name:i").
  output out(int i = 0) const;

  friend bool operator==(const operation& x, const operation& y) {
    return x.graph_ == y.graph_ && x.index_ == y.index_;
  }

private:
  graph* graph_ = nullptr;
  int index_ = -1;
};

/// What a graph remembers about a variable (TensorFlow's VariableDef).
struct variable_info {
  std::string var_node;         // "v"
  std::string initializer_node; // "v/Assign"
  std::string snapshot_node;    // "v/read"
  std::string initial_value;    // "v/initial_value:0"
  bool trainable = true;
};

/// What a graph remembers about a queue runner (TensorFlow's
/// QueueRunnerDef): the queue it feeds, one enqueue op per thread, the op
/// that closes the queue once every thread saw it closed (OutOfRange), and
/// the op that closes it cancelling pending enqueues when the coordinator
/// stops. Names of operations of the same graph.
struct queue_runner_def {
  std::string queue_name;
  std::vector<std::string> enqueue_op_names;
  std::string close_op_name;
  std::string cancel_op_name;
};

/// A dataflow graph under construction (TensorFlow's `tf.Graph`). Nodes are
/// only appended; `def()` is the GraphDef a session runs. Scopes (device,
/// control dependencies, name scope, container, colocation) are kept per
/// graph and applied to every node created while they are open.
class graph {
public:
  graph();
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  /// The nodes created so far, in creation order.
  const graph_def& def() const noexcept {
    return def_;
  }
  int num_nodes() const noexcept {
    return static_cast<int>(def_.nodes.size());
  }
  /// Graph-level random seed (tf.set_random_seed); 0 = none.
  void set_seed(int64_t seed) {
    def_.seed = seed;
  }
  int64_t seed() const noexcept {
    return def_.seed;
  }

  /// The node called `name`; invalid operation if none.
  operation find_operation(std::string_view name) const;
  /// The output called "node:i" or "node"; throws op_error (NotFound)
  /// naming it if absent.
  output tensor_by_name(std::string_view name) const;

  /// A node name not yet used, as TensorFlow's unique_name: the current
  /// name scope plus `base`, suffixed `_1`, `_2`, ... when taken. A `base`
  /// ending in '/' (a name_scope's prefix) is returned without the slash,
  /// as is: TF names the op that represents a scope that way.
  std::string unique_name(std::string_view base);

  /// The node-creation primitive every op builder uses. Applies the open
  /// scopes (name is taken verbatim and must be unique; devices,
  /// colocation, control dependencies, container for stateful ops) and
  /// records output types and static shapes. Throws op_error
  /// (InvalidArgument) for a duplicate name or an input from another graph.
  operation add_node(node_def node, const std::vector<output>& inputs,
                     std::vector<dtype> output_types,
                     std::vector<tensor_shape> output_shapes,
                     bool stateful = false);

  dtype output_type(int node, int index) const;
  tensor_shape output_shape(int node, int index) const;

  /// Collections (tf.add_to_collection / get_collection), holding names.
  void add_to_collection(const std::string& key, std::string value);
  const std::vector<std::string>& collection(const std::string& key) const;

  /// tf.train.add_queue_runner: the graph's QUEUE_RUNNERS collection, which
  /// start_queue_runners (client/queue_runner.hpp) starts.
  void add_queue_runner(queue_runner_def def) {
    queue_runners_.push_back(std::move(def));
  }
  const std::vector<queue_runner_def>& queue_runners() const noexcept {
    return queue_runners_;
  }

  /// Variables registered by `variable`, in creation order.
  const std::vector<variable_info>& variables() const noexcept {
    return variables_;
  }
  int add_variable(variable_info info);

  /// A readable dump: one line per node, "name = Op(inputs) @device
  /// {attrs}".
  std::string to_text() const;
  /// Graphviz DOT (data edges solid, control edges dashed).
  std::string to_dot() const;

  // -- scope stacks, used by the RAII guards in ops.hpp -----------------------

  struct scope_state;
  scope_state& scopes() {
    return *scopes_;
  }

  /// Makes this graph the thread's default graph until the guard dies.
  class default_guard {
  public:
    explicit default_guard(graph& g);
    ~default_guard();
    default_guard(const default_guard&) = delete;
    default_guard& operator=(const default_guard&) = delete;

  private:
    graph* prev_;
  };
  /// `with graph.as_default():`
  [[nodiscard]] default_guard as_default() {
    return default_guard{*this};
  }

private:
  struct node_meta {
    std::vector<dtype> types;
    std::vector<tensor_shape> shapes;
  };
  graph_def def_;
  std::vector<node_meta> meta_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, int> name_counts_;
  std::map<std::string, std::vector<std::string>> collections_;
  std::vector<variable_info> variables_;
  std::vector<queue_runner_def> queue_runners_;
  std::unique_ptr<scope_state> scopes_;

public:
  ~graph();
};

/// The thread's default graph (created on first use).
graph& default_graph();

/// tf.reset_default_graph(): replaces the thread's default graph with a
/// new, empty one. The old graph is kept alive until the thread ends, so
/// outputs and variables built in it stay valid.
void reset_default_graph();

} // namespace actorflow
