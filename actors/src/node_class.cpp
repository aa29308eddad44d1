#include "node_class.hpp"

#include <unordered_map>

#include "actorflow/graph/wire.hpp"

namespace actorflow {

namespace {

// Every op the executor runs itself (not by a kernel), with its kind.
const std::unordered_map<std::string, node_kind>& own_kinds() {
  using k = node_kind;
  static const std::unordered_map<std::string, node_kind> kinds{
    {"_Arg", k::arg},
    {"_Retval", k::retval},
    {"_Send", k::send},
    {"_Recv", k::recv},
    {"Placeholder", k::placeholder},
    {"NoOp", k::no_op},
    {"VariableV2", k::variable},
    {"Variable", k::variable},
    {"FIFOQueueV2", k::queue},
    {"PaddingFIFOQueueV2", k::queue},
    {"RandomShuffleQueueV2", k::queue},
    {"TextLineReaderV2", k::reader},
    {"FixedLengthRecordReaderV2", k::reader},
    {"WholeFileReaderV2", k::reader},
    {"ConditionalAccumulator", k::accumulator},
    {"QueueEnqueueV2", k::queue_op},
    {"QueueEnqueueManyV2", k::queue_op},
    {"QueueDequeueV2", k::queue_op},
    {"QueueDequeueManyV2", k::queue_op},
    {"QueueDequeueUpToV2", k::queue_op},
    {"QueueCloseV2", k::queue_op},
    {"QueueSizeV2", k::queue_op},
    {"QueueIsClosedV2", k::queue_op},
    {"ReaderReadV2", k::reader_op},
    {"ReaderReadUpToV2", k::reader_op},
    {"ReaderNumRecordsProducedV2", k::reader_op},
    {"ReaderNumWorkUnitsCompletedV2", k::reader_op},
    {"ReaderResetV2", k::reader_op},
    {"AccumulatorApplyGradient", k::accumulator_op},
    {"AccumulatorTakeGradient", k::accumulator_op},
    {"AccumulatorNumAccumulated", k::accumulator_op},
    {"AccumulatorSetGlobalStep", k::accumulator_op},
    {"ApplyGradientDescent", k::apply},
    {"ApplyMomentum", k::apply},
    {"ApplyAdagrad", k::apply},
    {"ApplyAdam", k::apply},
    {"CountUpTo", k::count_up_to},
    {"IsVariableInitialized", k::is_initialized},
    {"Assign", k::assign},
    {"AssignAdd", k::assign_add},
    {"AssignSub", k::assign_sub},
  };
  return kinds;
}

queue_op queue_op_of(const std::string& op) {
  static const std::unordered_map<std::string, queue_op> ops{
    {"QueueEnqueueV2", queue_op::enqueue},
    {"QueueEnqueueManyV2", queue_op::enqueue_many},
    {"QueueDequeueV2", queue_op::dequeue},
    {"QueueDequeueManyV2", queue_op::dequeue_many},
    {"QueueDequeueUpToV2", queue_op::dequeue_up_to},
    {"QueueCloseV2", queue_op::close},
    {"QueueSizeV2", queue_op::size},
    {"QueueIsClosedV2", queue_op::is_closed}};
  return ops.at(op);
}

reader_op reader_op_of(const std::string& op) {
  static const std::unordered_map<std::string, reader_op> ops{
    {"ReaderReadV2", reader_op::read},
    {"ReaderReadUpToV2", reader_op::read_up_to},
    {"ReaderNumRecordsProducedV2", reader_op::num_records_produced},
    {"ReaderNumWorkUnitsCompletedV2", reader_op::num_work_units_completed},
    {"ReaderResetV2", reader_op::reset}};
  return ops.at(op);
}

accumulator_op accumulator_op_of(const std::string& op) {
  static const std::unordered_map<std::string, accumulator_op> ops{
    {"AccumulatorApplyGradient", accumulator_op::apply},
    {"AccumulatorTakeGradient", accumulator_op::take},
    {"AccumulatorNumAccumulated", accumulator_op::num_accumulated},
    {"AccumulatorSetGlobalStep", accumulator_op::set_global_step}};
  return ops.at(op);
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
  auto own = own_kinds().find(op);
  if (own == own_kinds().end()) {
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
  out.kind = own->second;
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
      out.detail = queue_call{queue_op_of(op),
                              node.attr_or<bool>("cancel_pending_enqueues",
                                                 false)};
      break;
    case k::reader_op:
      out.detail = reader_call{reader_op_of(op)};
      break;
    case k::accumulator_op:
      out.detail = accumulator_call{accumulator_op_of(op)};
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
