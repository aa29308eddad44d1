#include "actorflow/graph/device_setter.hpp"

#include <algorithm>
#include <memory>
#include <mutex>

#include "actorflow/graph/device_name.hpp"

namespace actorflow {

namespace {

void require_positive(int num_tasks, const char* who) {
  if (num_tasks <= 0)
    throw op_error(error_code::invalid_argument,
                   std::string{who} + " needs a positive number of tasks, got "
                     + std::to_string(num_tasks));
}

device_name parse_spec_or_throw(std::string_view text) {
  device_name result;
  throw_if_error(device_name::parse_spec(text, result));
  return result;
}

} // namespace

ps_strategy round_robin_strategy(int num_tasks) {
  require_positive(num_tasks, "round_robin_strategy");
  // The state lives behind a shared_ptr so that copies of the std::function
  // advance one counter, as the single Python strategy object does. The
  // mutex keeps it consistent if graphs are built from several threads.
  struct state {
    std::mutex mtx;
    int next = 0;
  };
  auto st = std::make_shared<state>();
  return [st, num_tasks](const node_def&) {
    std::lock_guard<std::mutex> guard{st->mtx};
    auto task = st->next;
    st->next = (st->next + 1) % num_tasks;
    return task;
  };
}

ps_strategy
greedy_load_balancing_strategy(int num_tasks,
                               std::function<int64_t(const node_def&)> load_fn) {
  require_positive(num_tasks, "greedy_load_balancing_strategy");
  if (!load_fn)
    throw op_error(error_code::invalid_argument,
                   "greedy_load_balancing_strategy needs a load function");
  struct state {
    std::mutex mtx;
    std::vector<int64_t> loads;
  };
  auto st = std::make_shared<state>();
  st->loads.resize(static_cast<size_t>(num_tasks), 0);
  return [st, load_fn = std::move(load_fn)](const node_def& node) {
    // load_fn is user code: run it outside the lock. If it throws, no load
    // is recorded, as in TF where the update follows load_fn's return.
    auto load = load_fn(node);
    std::lock_guard<std::mutex> guard{st->mtx};
    // np.argmin: the first minimum, i.e. the lowest index on ties.
    auto i = std::min_element(st->loads.begin(), st->loads.end());
    *i += load;
    return static_cast<int>(i - st->loads.begin());
  };
}

int64_t byte_size_load_fn(const node_def& node) {
  const auto& shape = node.attr<tensor_shape>("shape");
  if (!shape.fully_defined())
    throw op_error(error_code::invalid_argument,
                   "byte_size_load_fn: shape " + shape.to_string()
                     + " of node '" + node.name
                     + "' is not fully defined");
  auto type = node.attr<dtype>("dtype");
  if (type == dtype::invalid)
    throw op_error(error_code::invalid_argument,
                   "byte_size_load_fn: node '" + node.name
                     + "' has an invalid dtype");
  // TF's DType.size is numpy's itemsize; strings are numpy objects, i.e.
  // one 8-byte pointer each.
  auto elem_size = type == dtype::string ? int64_t{8}
                                         : static_cast<int64_t>(dtype_size(type));
  int64_t n = 0;
  if (auto st = checked_num_elements(shape, n); !st.ok())
    throw op_error(error_code::invalid_argument,
                   "byte_size_load_fn: node '" + node.name
                     + "': " + st.message());
  auto bytes = multiply_without_overflow(n, elem_size);
  if (bytes < 0)
    throw op_error(error_code::invalid_argument,
                   "byte_size_load_fn: node '" + node.name + "' of shape "
                     + shape.to_string() + " has more than 2**63 - 1 bytes");
  return bytes;
}

std::vector<std::string> standard_ps_ops() {
  return {"Variable",
          "VariableV2",
          "AutoReloadVariable",
          "MutableHashTable",
          "MutableHashTableV2",
          "MutableHashTableOfTensors",
          "MutableHashTableOfTensorsV2",
          "MutableDenseHashTable",
          "MutableDenseHashTableV2",
          "VarHandleOp"};
}

std::optional<device_function>
replica_device_setter(replica_device_setter_options opts) {
  if (opts.ps_tasks < 0)
    throw op_error(error_code::invalid_argument,
                   "replica_device_setter: ps_tasks must not be negative, got "
                     + std::to_string(opts.ps_tasks));
  if (opts.ps_tasks == 0)
    return std::nullopt;
  // TF parses both device strings on every call; parsing them once here
  // reports a malformed one when the setter is built instead of at the
  // first op, and is otherwise the same.
  auto ps_spec = parse_spec_or_throw(opts.ps_device);
  auto worker_spec = parse_spec_or_throw(opts.worker_device);
  auto strategy = opts.strategy ? std::move(opts.strategy)
                                : round_robin_strategy(opts.ps_tasks);
  // A DeviceSpec job of "" is falsy in Python.
  auto ps_job = ps_spec.job && !ps_spec.job->empty() ? ps_spec.job
                                                     : std::nullopt;
  bool has_ps_device = !opts.ps_device.empty();
  return device_function{
    [ps_spec, worker_spec, ps_job, has_ps_device, strategy,
     merge = opts.merge_devices,
     ps_ops = std::move(opts.ps_ops)](const node_def& node) -> std::string {
      if (!merge && !node.device.empty())
        return node.device;
      auto current = parse_spec_or_throw(node.device);
      bool is_ps_op = std::find(ps_ops.begin(), ps_ops.end(), node.op)
                      != ps_ops.end();
      if (has_ps_device && is_ps_op) {
        auto ps = ps_spec;
        // Only pick a task when the ps job survives the merge below;
        // otherwise the strategy would advance for a node that does not
        // land on the ps job.
        auto cur_job = current.job && !current.job->empty() ? current.job
                                                            : std::nullopt;
        if (ps_job && (!cur_job || cur_job == ps_job))
          ps.task = strategy(node);
        ps.merge_from(current);
        return ps.to_string();
      }
      auto worker = worker_spec;
      worker.merge_from(current);
      return worker.to_string();
    }};
}

} // namespace actorflow
