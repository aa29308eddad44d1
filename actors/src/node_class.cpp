#include "node_class.hpp"

#include <unordered_map>

#include "actorflow/graph/wire.hpp"

namespace actorflow {

namespace {

// An op the executor runs itself (not by a kernel): its kind and, for an
// operation on a queue, reader or accumulator, which one (the value of
// its queue_op, reader_op or accumulator_op).
struct own_op {
  node_kind kind;
  uint8_t operation = 0;
};

template <class E>
own_op op_of(node_kind kind, E operation) {
  return {kind, static_cast<uint8_t>(operation)};
}

// Every op the executor runs itself, by name.
const std::unordered_map<std::string, own_op>& own_ops() {
  using k = node_kind;
  using q = queue_op;
  using r = reader_op;
  using a = accumulator_op;
  static const std::unordered_map<std::string, own_op> ops{
    {"_Arg", {k::arg}},
    {"_Retval", {k::retval}},
    {"_Send", {k::send}},
    {"_Recv", {k::recv}},
    {"Placeholder", {k::placeholder}},
    {"NoOp", {k::no_op}},
    {"VariableV2", {k::variable}},
    {"Variable", {k::variable}},
    {"FIFOQueueV2", {k::queue}},
    {"PaddingFIFOQueueV2", {k::queue}},
    {"RandomShuffleQueueV2", {k::queue}},
    {"TextLineReaderV2", {k::reader}},
    {"FixedLengthRecordReaderV2", {k::reader}},
    {"WholeFileReaderV2", {k::reader}},
    {"ConditionalAccumulator", {k::accumulator}},
    {"QueueEnqueueV2", op_of(k::queue_op, q::enqueue)},
    {"QueueEnqueueManyV2", op_of(k::queue_op, q::enqueue_many)},
    {"QueueDequeueV2", op_of(k::queue_op, q::dequeue)},
    {"QueueDequeueManyV2", op_of(k::queue_op, q::dequeue_many)},
    {"QueueDequeueUpToV2", op_of(k::queue_op, q::dequeue_up_to)},
    {"QueueCloseV2", op_of(k::queue_op, q::close)},
    {"QueueSizeV2", op_of(k::queue_op, q::size)},
    {"QueueIsClosedV2", op_of(k::queue_op, q::is_closed)},
    {"ReaderReadV2", op_of(k::reader_op, r::read)},
    {"ReaderReadUpToV2", op_of(k::reader_op, r::read_up_to)},
    {"ReaderNumRecordsProducedV2",
     op_of(k::reader_op, r::num_records_produced)},
    {"ReaderNumWorkUnitsCompletedV2",
     op_of(k::reader_op, r::num_work_units_completed)},
    {"ReaderResetV2", op_of(k::reader_op, r::reset)},
    {"AccumulatorApplyGradient", op_of(k::accumulator_op, a::apply)},
    {"AccumulatorTakeGradient", op_of(k::accumulator_op, a::take)},
    {"AccumulatorNumAccumulated",
     op_of(k::accumulator_op, a::num_accumulated)},
    {"AccumulatorSetGlobalStep",
     op_of(k::accumulator_op, a::set_global_step)},
    {"AccumulatorReplicas", op_of(k::accumulator_op, a::replicas)},
    {"AccumulatorSetNumRequired",
     op_of(k::accumulator_op, a::set_num_required)},
    {"ApplyGradientDescent", {k::apply}},
    {"ApplyMomentum", {k::apply}},
    {"ApplyAdagrad", {k::apply}},
    {"ApplyAdam", {k::apply}},
    {"CountUpTo", {k::count_up_to}},
    {"IsVariableInitialized", {k::is_initialized}},
    {"Assign", {k::assign}},
    {"AssignAdd", {k::assign_add}},
    {"AssignSub", {k::assign_sub}},
  };
  return ops;
}

// A training op, with how many leading inputs are variable refs (the
// variable and its slots).
apply_info apply_of(const node_def& node) {
  using t = apply_info::training;
  apply_info a;
  if (node.op == "ApplyGradientDescent")
    a = {t::gradient_descent, 1};
  else if (node.op == "ApplyMomentum")
    a = {t::momentum, 2};
  else if (node.op == "ApplyAdagrad")
    a = {t::adagrad, 2};
  else
    a = {t::adam, 3};
  a.use_nesterov = node.attr_or<bool>("use_nesterov", false);
  a.row_begin = node.attr_or<int64_t>("_row_begin", -1);
  return a;
}

// The resource a handle node names (see resource_info).
resource_info resource_of(const node_def& node, node_kind kind,
                          const std::string& session,
                          const std::string& default_container) {
  resource_info r;
  r.container = node.attr_or<std::string>("container", "");
  if (r.container.empty())
    r.container = default_container;
  auto shared = node.attr_or<std::string>("shared_name", "");
  if (kind == node_kind::variable) {
    r.name = shared.empty() ? node.name : shared;
    r.type = node.attr_or<dtype>("dtype", dtype::invalid);
    byte_writer w{r.shape_bytes};
    encode(w, node.attr_or<tensor_shape>("shape", tensor_shape::unknown()));
    return r;
  }
  // Without a shared_name a queue, reader or accumulator is private to
  // its session (TF's "_<n>_<node>" names); such names start with '_',
  // which a shared_name may not.
  r.name = shared.empty() ? "_" + session + "_" + node.name : shared;
  graph_def one;
  one.nodes.push_back(node);
  r.node_bytes = to_bytes(one);
  return r;
}

void classify_unchecked(const node_def& node, const std::string& session,
                        const std::string& default_container,
                        node_class& out) {
  using k = node_kind;
  auto& op = node.op;
  auto own = own_ops().find(op);
  if (own == own_ops().end()) {
    auto fn = builtin_kernels().find(op);
    if (fn == nullptr) {
      out.kind = k::invalid;
      out.detail = status{error_code::unimplemented,
                          "No kernel registered for op '" + op + "' (node '"
                            + node.name + "')"};
      return;
    }
    out.kind = k::kernel;
    out.detail = kernel_info{fn};
    out.heavy = op == "MatMul" || op == "BatchMatMul"
                || op.rfind("Conv2D", 0) == 0;
    return;
  }
  out.kind = own->second.kind;
  auto operation = own->second.operation;
  switch (out.kind) {
    case k::arg:
    case k::retval:
      out.plumbing = true;
      out.detail = index_info{node.attr_or<int64_t>("index", -1)};
      return;
    case k::send:
      out.plumbing = true;
      out.rendezvous_key = node.attr_or<std::string>("tensor_name", "");
      out.detail = send_info{node.attr_or<std::string>("recv_device", "")};
      return;
    case k::recv:
      out.plumbing = true;
      out.rendezvous_key = node.attr_or<std::string>("tensor_name", "");
      return;
    case k::no_op:
      return;
    case k::placeholder: {
      auto type = node.attr_or<dtype>("dtype", dtype::invalid);
      auto shape = node.attr_or<tensor_shape>("shape",
                                              tensor_shape::unknown());
      out.detail = invalid_argument(
        "You must feed a value for placeholder tensor '" + node.name
        + "' with dtype " + std::string{to_string(type)} + " and shape "
        + shape.to_string());
      return;
    }
    case k::variable:
    case k::queue:
    case k::reader:
    case k::accumulator:
      out.ref_output = true;
      out.detail = resource_of(node, out.kind, session, default_container);
      return;
    case k::queue_op:
      out.detail = queue_call{static_cast<queue_op>(operation),
                              node.attr_or<bool>("cancel_pending_enqueues",
                                                 false)};
      break;
    case k::reader_op:
      out.detail = reader_call{static_cast<reader_op>(operation)};
      break;
    case k::accumulator_op:
      out.detail = accumulator_call{static_cast<accumulator_op>(operation)};
      break;
    case k::apply: {
      auto a = apply_of(node);
      out.ref_consumer = true;
      out.ref_inputs = static_cast<size_t>(a.refs);
      out.detail = a;
      return;
    }
    case k::count_up_to:
      out.detail = variable_call{node.attr_or<int64_t>("limit", 0), true};
      break;
    case k::assign:
      out.detail = variable_call{0, node.attr_or<bool>("validate_shape",
                                                       true)};
      break;
    default:
      break;
  }
  // Operations on the resource whose handle is input 0.
  out.ref_consumer = true;
  out.ref_inputs = 1;
}

} // namespace

node_class classify(const node_def& node, const std::string& session,
                    const std::string& default_container) {
  node_class out;
  try {
    classify_unchecked(node, session, default_container, out);
  } catch (const op_error& e) {
    out = {};
    out.kind = node_kind::invalid;
    out.detail = status{e.code(), e.get_status().message()};
  } catch (const std::exception& e) {
    out = {};
    out.kind = node_kind::invalid;
    out.detail = internal_error(e.what());
  }
  return out;
}

} // namespace actorflow
