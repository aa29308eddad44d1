#pragma once

// CAF registration of every type that crosses an actor boundary. This
// header pulls in CAF: include it only from .cpp files.

#include <caf/all.hpp>

#include "actorflow/actors/messages.hpp"
#include "actorflow/graph/wire.hpp"

namespace actorflow {

// A tensor crosses the wire as one raw byte block (CAF would otherwise
// serialize element by element); inside a process the message shares it.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  if constexpr (Inspector::reads_state) {
    std::string bytes = to_bytes(x);
    return f(caf::meta::type_name("actorflow::tensor"), bytes);
  } else {
    std::string bytes;
    auto load = caf::meta::load_callback([&]() -> caf::error {
      if (auto st = from_bytes(bytes, x); !st.ok())
        return caf::make_error(caf::sec::invalid_argument, st.message());
      return caf::none;
    });
    return f(caf::meta::type_name("actorflow::tensor"), bytes, load);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status& x) {
  if constexpr (Inspector::reads_state) {
    auto code = static_cast<int32_t>(x.code());
    auto msg = x.message();
    return f(caf::meta::type_name("actorflow::status"), code, msg);
  } else {
    int32_t code = 0;
    std::string msg;
    auto load = caf::meta::load_callback([&]() -> caf::error {
      x = status{static_cast<error_code>(code), std::move(msg)};
      return caf::none;
    });
    return f(caf::meta::type_name("actorflow::status"), code, msg, load);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_config& x) {
  return f(caf::meta::type_name("actorflow::session_config"),
           x.allow_soft_placement, x.log_device_placement,
           x.operation_timeout_in_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_options& x) {
  return f(caf::meta::type_name("actorflow::run_options"), x.trace_level,
           x.timeout_in_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_exec_stats& x) {
  return f(caf::meta::type_name("actorflow::node_exec_stats"), x.node_name,
           x.all_start_micros, x.op_start_rel_micros, x.op_end_rel_micros,
           x.all_end_rel_micros, x.timeline_label);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_step_stats& x) {
  return f(caf::meta::type_name("actorflow::device_step_stats"), x.device,
           x.node_stats);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_stats& x) {
  return f(caf::meta::type_name("actorflow::step_stats"), x.dev_stats);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_step_request& x) {
  return f(caf::meta::type_name("actorflow::run_step_request"),
           x.session_handle, x.graph_delta, x.graph_base, x.feed_names,
           x.feed_values, x.fetches, x.targets, x.options);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_step_response& x) {
  return f(caf::meta::type_name("actorflow::run_step_response"), x.result,
           x.outputs, x.stats, x.has_stats);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_graph_request& x) {
  return f(caf::meta::type_name("actorflow::run_graph_request"), x.step_id,
           x.feeds, x.peer_devices, x.trace);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_graph_response& x) {
  return f(caf::meta::type_name("actorflow::run_graph_response"), x.result,
           x.outputs, x.node_stats, x.recv_stats);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_stats& x) {
  return f(caf::meta::type_name("actorflow::task_stats"), x.task,
           x.messages_handled, x.bytes_in, x.bytes_out, x.mailbox_depth,
           x.steps_run, x.sessions, x.variables, x.partitions);
}

/// Registers actorflow's message types and loads the middleman (public
/// entry point: actorflow::add_types in net/runtime.hpp).
void add_types_impl(caf::actor_system_config& cfg);

/// Sets actorflow's CAF defaults unless already set (public entry point:
/// actorflow::add_options in net/runtime.hpp).
void add_options_impl(caf::actor_system_config& cfg);

/// caf::error <-> status. Errors of other categories map to TensorFlow
/// codes: request timeouts to DeadlineExceeded, lost peers to
/// Unavailable, everything else to Internal; `what` names the peer.
status to_status(const caf::error& err, const std::string& what = "");

} // namespace actorflow

CAF_BEGIN_TYPE_ID_BLOCK(actorflow, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(actorflow, (actorflow::tensor))
  CAF_ADD_TYPE_ID(actorflow, (std::vector<actorflow::tensor>))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::status))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::session_config))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::run_step_request))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::run_step_response))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::run_graph_request))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::run_graph_response))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::task_stats))
  CAF_ADD_TYPE_ID(actorflow, (std::vector<std::pair<int64_t, actorflow::tensor>>))

  CAF_ADD_ATOM(actorflow, actorflow, create_session_atom, "new_sess")
  CAF_ADD_ATOM(actorflow, actorflow, close_session_atom, "close_sess")
  CAF_ADD_ATOM(actorflow, actorflow, run_step_atom, "run_step")
  CAF_ADD_ATOM(actorflow, actorflow, register_graph_atom, "reg_graph")
  CAF_ADD_ATOM(actorflow, actorflow, run_graph_atom, "run_graph")
  CAF_ADD_ATOM(actorflow, actorflow, abort_step_atom, "abort_step")
  CAF_ADD_ATOM(actorflow, actorflow, recv_tensor_atom, "recv_tens")
  CAF_ADD_ATOM(actorflow, actorflow, get_variable_atom, "get_var")
  CAF_ADD_ATOM(actorflow, actorflow, read_atom, "read")
  CAF_ADD_ATOM(actorflow, actorflow, assign_atom, "assign")
  CAF_ADD_ATOM(actorflow, actorflow, assign_add_atom, "assign_add")
  CAF_ADD_ATOM(actorflow, actorflow, assign_sub_atom, "assign_sub")
  CAF_ADD_ATOM(actorflow, actorflow, is_initialized_atom, "is_init")
  CAF_ADD_ATOM(actorflow, actorflow, get_stats_atom, "get_stats")

CAF_END_TYPE_ID_BLOCK(actorflow)
