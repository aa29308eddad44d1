#pragma once

// Private to actors/: what the executor does with each node of its
// partition, decided once when the partition is registered, so that a
// step dispatches on a kind instead of comparing op names (TF's executor
// likewise resolves each node's kernel once, in its NodeItem). No CAF.

#include <cstdint>
#include <string>
#include <variant>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/kernels/kernel.hpp"

namespace actorflow {

enum class node_kind : uint8_t {
  /// A fed value (`_Arg`, index) and a fetched one (`_Retval`, index).
  arg,
  retval,
  /// The ends of a cut edge (`_Send` to recv_device, `_Recv`).
  send,
  recv,
  /// A placeholder nobody fed: every step fails naming it.
  placeholder,
  no_op,
  /// Handles to resources of the task, looked up once (resource_info).
  variable,
  queue,
  reader,
  accumulator,
  /// Operations on a resource whose handle is input 0.
  queue_op,
  reader_op,
  accumulator_op,
  /// Training ops (ApplyAdam, ...) on variable refs (apply_info).
  apply,
  /// Variable ops: CountUpTo (limit), IsVariableInitialized, Assign
  /// (validate_shape), AssignAdd, AssignSub.
  count_up_to,
  is_initialized,
  assign,
  assign_add,
  assign_sub,
  /// A synchronous kernel (kernel_info).
  kernel,
  /// A node that cannot run (an attribute of the wrong kind, an op
  /// without a kernel): every step that reaches it fails with its status.
  invalid,
};

struct index_info {
  int64_t index = 0;
};

struct send_info {
  std::string recv_device;
};

/// Where a resource node's actor is found: its container (the node's, or
/// the task's default), its name (the shared name, a variable's node name,
/// or a session-private name for an unshared queue, reader or
/// accumulator) and what the worker's lookup takes.
struct resource_info {
  std::string container;
  std::string name;
  /// The node, encoded (queue, reader, accumulator lookups).
  std::string node_bytes;
  /// A variable's dtype and encoded shape.
  dtype type = dtype::invalid;
  std::string shape_bytes;
};

/// TF's QueueBase operations (each a message of its own to the queue
/// actor, type_ids.hpp).
enum class queue_op : uint8_t {
  enqueue,
  enqueue_many,
  dequeue,
  dequeue_many,
  dequeue_up_to,
  close,
  size,
  is_closed,
};

/// TF's ReaderBase operations (messages to the reader actor).
enum class reader_op : uint8_t {
  read,
  read_up_to,
  num_records_produced,
  num_work_units_completed,
  reset,
};

/// A ConditionalAccumulator's operations (messages to its actor).
enum class accumulator_op : uint8_t {
  apply,
  take,
  num_accumulated,
  set_global_step,
  set_num_required,
  replicas,
};

struct queue_call {
  queue_op op = queue_op::enqueue;
  bool cancel_pending_enqueues = false;
};

struct reader_call {
  reader_op op = reader_op::read;
};

struct accumulator_call {
  accumulator_op op = accumulator_op::apply;
};

/// A training op: which, how many leading inputs are variable refs,
/// Nesterov momentum, and the first row of a row-block update (-1: whole).
struct apply_info {
  enum class training { gradient_descent, momentum, adagrad, adam };
  training op = training::gradient_descent;
  int refs = 0;
  bool use_nesterov = false;
  int64_t row_begin = -1;
};

struct variable_call {
  /// CountUpTo's limit.
  int64_t limit = 0;
  /// Assign's validate_shape.
  bool validate_shape = true;
};

struct kernel_info {
  compute_fn fn = nullptr;
};

/// A node's kind and what that kind needs; `status` for placeholder and
/// invalid (the error a step fails with).
struct node_class {
  node_kind kind = node_kind::kernel;
  std::variant<std::monostate, index_info, send_info, resource_info,
               queue_call, reader_call, accumulator_call, apply_info,
               variable_call, kernel_info, status>
    detail;
  /// Takes a resource handle (input 0, and the leading refs of a training
  /// op) rather than a value.
  bool ref_consumer = false;
  /// Leading inputs taken as refs (1 for ref consumers; the variable and
  /// its slots for training ops).
  size_t ref_inputs = 0;
  /// Produces a resource handle (a ref).
  bool ref_output = false;
  /// `_Send`, `_Recv`, `_Arg`, `_Retval`: not traced as nodes.
  bool plumbing = false;
  /// A kernel that takes long (a GEMM or a convolution).
  bool heavy = false;
  /// `_Send`, `_Recv`: the edge's key in the step's rendezvous.
  std::string rendezvous_key;
};

/// Classifies `node` of a partition of `session`, whose resources without
/// a container go to `default_container`. Never throws: what cannot run
/// is node_kind::invalid, with InvalidArgument naming the node.
node_class classify(const node_def& node, const std::string& session,
                    const std::string& default_container);

} // namespace actorflow
