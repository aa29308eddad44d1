#pragma once

// CAF registration of every type that crosses an actor boundary. This
// header pulls in CAF: include it only from .cpp files.

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#include <caf/all.hpp>

#include "actorflow/transport/messages.hpp"
#include "actorflow/graph/wire.hpp"

namespace actorflow {

// A tensor crosses the wire as one raw byte block (CAF would otherwise
// serialize element by element); inside a process the message shares it.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor& x) {
  // On the wire: the header, then the raw element bytes written from and
  // read into the tensor itself (no whole-tensor copy on either side).
  // String tensors (and big-endian hosts) send their whole encoding as the
  // first string instead.
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    auto header = tensor_header_bytes(x);
    if (header.empty()) {
      std::string bytes = to_bytes(x);
      return f(caf::meta::type_name("actorflow::tensor"), bytes);
    }
    if (auto err = f(caf::meta::type_name("actorflow::tensor"), header))
      return err;
    return x.byte_size() > 0 ? f.apply_raw(x.byte_size(), x.raw())
                             : caf::error{};
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    std::string bytes;
    if (auto err = f(caf::meta::type_name("actorflow::tensor"), bytes))
      return err;
    // What may follow bounds the allocation (a bad header must not make
    // a task allocate what the message cannot hold).
    uint64_t available = 0;
    if constexpr (std::is_same_v<Inspector, caf::binary_deserializer>)
      available = f.remaining();
    else
      available = uint64_t{1} << 32;
    tensor value;
    size_t header = 0;
    if (tensor_from_header(bytes, value, header, available).ok()
        && header == bytes.size()) {
      if (value.byte_size() > 0)
        if (auto err = f.apply_raw(value.byte_size(), value.raw()))
          return err;
      if (auto st = check_received_data(value); !st.ok())
        return caf::make_error(caf::sec::invalid_argument, st.message());
      x = std::move(value);
      return caf::none;
    }
    if (auto st = from_bytes(bytes, x); !st.ok())
      return caf::make_error(caf::sec::invalid_argument, st.message());
    return caf::none;
  } else if constexpr (Inspector::reads_state) {
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

/// Where the chunks of a tensor land on the receiving side (the middleman
/// thread's deserializer): the destination tensors of an actor system by
/// (step, rendezvous key), created when chunk 0 arrives and dropped when
/// the last byte has landed, when the step ends here (forget), or a minute
/// after they were created. Thread-safe; never blocks beyond a short lock.
/// (chunk_landing.cpp)
class chunk_landing {
public:
  /// The destinations of `sys` (each actor system has its own,
  /// system_data.hpp). Keep it on a per-step path.
  static std::shared_ptr<chunk_landing> of(caf::actor_system& sys);
  /// Registers `dest`, whose encoding has `header` bytes of `total`, of
  /// which the first `landed` have arrived.
  void add(int64_t step, const std::string& key, tensor dest,
           uint64_t header, uint64_t total, uint64_t landed);
  /// The destination of bytes [offset, offset + n) of (step, key) and its
  /// header size, counted as landed; an invalid tensor when there is none
  /// or the range does not fit it.
  tensor take(int64_t step, const std::string& key, uint64_t offset,
              uint64_t n, uint64_t& header);
  /// Forgets the destinations of `step` (it ended here).
  void forget(int64_t step);

private:
  struct landing {
    tensor dest;
    uint64_t header = 0;
    uint64_t total = 0;
    uint64_t landed = 0;
    std::chrono::steady_clock::time_point created;
  };
  void drop_old();
  std::mutex mtx_;
  std::map<std::pair<int64_t, std::string>, landing> by_key_;
};

// A chunk on the wire: step, key, total, offset, a u64 length, then the
// bytes, written from the sender's header and tensor and read straight
// into the destination tensor where possible (chunk_landing), else into a
// buffer of the tensor allocator. The length is checked against the
// message before anything is allocated.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_chunk& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    uint64_t n = x.size();
    if (auto err = f(caf::meta::type_name("actorflow::wire_chunk"), x.step,
                     x.key, x.total, x.offset, n))
      return err;
    if (x.landed.valid())
      return caf::make_error(caf::sec::invalid_argument,
                             "a landed wire_chunk cannot be sent on");
    if (x.received.valid())
      return n > 0 ? f.apply_raw(n, x.received.raw()) : caf::error{};
    if (!x.prefix.empty())
      if (auto err = f.apply_raw(x.prefix.size(), x.prefix.data()))
        return err;
    if (x.data_size == 0)
      return caf::error{};
    if (!x.source.valid() || x.data_begin > x.source.byte_size()
        || x.data_size > x.source.byte_size() - x.data_begin)
      return caf::make_error(caf::sec::invalid_argument,
                             "wire_chunk out of its tensor's range");
    auto* data = static_cast<char*>(const_cast<void*>(x.source.raw()));
    return f.apply_raw(x.data_size, data + x.data_begin);
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    wire_chunk in;
    uint64_t n = 0;
    if (auto err = f(caf::meta::type_name("actorflow::wire_chunk"), in.step,
                     in.key, in.total, in.offset, n))
      return err;
    uint64_t available = uint64_t{1} << 32;
    if constexpr (std::is_same_v<Inspector, caf::binary_deserializer>)
      available = f.remaining();
    if (n > available)
      return caf::make_error(caf::sec::invalid_argument,
                             "wire_chunk longer than its message");
    // The system whose middleman deserializes (none: nothing lands, and
    // each chunk comes in a buffer of its own).
    auto landing = f.context() != nullptr
                     ? chunk_landing::of(f.context()->system())
                     : nullptr;
    if (in.offset > 0 && n > 0 && landing != nullptr) {
      uint64_t header = 0;
      if (auto dest = landing->take(in.step, in.key, in.offset, n, header);
          dest.valid()) {
        auto* at = static_cast<char*>(dest.raw()) + (in.offset - header);
        if (auto err = f.apply_raw(n, at))
          return err;
        in.landed = std::move(dest);
        in.landed_size = n;
        in.header_size = header;
        x = std::move(in);
        return caf::none;
      }
    }
    in.received = tensor::uninitialized(
      dtype::uint8, tensor_shape{static_cast<int64_t>(n)});
    if (n > 0)
      if (auto err = f.apply_raw(n, in.received.raw()))
        return err;
    if (in.offset == 0 && n < in.total && landing != nullptr) {
      // Chunk 0: the header says what the destination is; its data part
      // goes there, and so will the later chunks'.
      tensor dest;
      size_t header = 0;
      std::string_view bytes{in.data(), n};
      if (tensor_from_header(bytes, dest, header, in.total).ok()
          && header <= n && header + dest.byte_size() == in.total) {
        std::memcpy(dest.raw(), in.data() + header, n - header);
        landing->add(in.step, in.key, dest, header, in.total, n);
        in.landed = std::move(dest);
        in.landed_size = n;
        in.header_size = header;
        in.received = tensor{};
      }
    }
    x = std::move(in);
    return caf::none;
  } else {
    // Other inspectors (printing, comparing): what the chunk is of.
    uint64_t n = x.size();
    return f(caf::meta::type_name("actorflow::wire_chunk"), x.step, x.key,
             x.total, x.offset, n);
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
           x.operation_timeout_in_ms, x.device_filters, x.matmul_pipelining);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_options& x) {
  return f(caf::meta::type_name("actorflow::run_options"), x.trace_level,
           x.timeout_in_ms, x.output_partition_graphs);
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
           x.feed_values, x.fetches, x.targets, x.options,
           x.client_step);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_step_response& x) {
  return f(caf::meta::type_name("actorflow::run_step_response"), x.result,
           x.outputs, x.stats, x.has_stats, x.partition_graphs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_graph_request& x) {
  return f(caf::meta::type_name("actorflow::run_graph_request"), x.step_id,
           x.feeds, x.peer_devices, x.trace, x.sink_devices, x.peer_inboxes,
           x.reply_inbox, x.part, x.tag);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, held_tensor& x) {
  return f(caf::meta::type_name("actorflow::held_tensor"), x.device, x.key,
           x.value);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_graph_response& x) {
  return f(caf::meta::type_name("actorflow::run_graph_response"), x.result,
           x.outputs, x.node_stats, x.recv_stats, x.held, x.leased);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, task_stats& x) {
  return f(caf::meta::type_name("actorflow::task_stats"), x.task,
           x.messages_handled, x.bytes_in, x.bytes_out, x.mailbox_depth,
           x.steps_run, x.sessions, x.variables, x.partitions);
}

/// Registers actorflow's message types and loads the middleman (public
/// entry point: actorflow::add_types in client/runtime.hpp).
void add_types_impl(caf::actor_system_config& cfg);

/// Sets actorflow's CAF defaults unless already set (public entry point:
/// actorflow::add_options in client/runtime.hpp).
void add_options_impl(caf::actor_system_config& cfg);

// -- atoms and the typed interfaces of the runtime's actors ----------------

using create_session_atom = caf::atom_constant<caf::atom("new_sess")>;
inline constexpr create_session_atom create_session_atom_v = create_session_atom{};
using close_session_atom = caf::atom_constant<caf::atom("close_sess")>;
inline constexpr close_session_atom close_session_atom_v = close_session_atom{};
using run_step_atom = caf::atom_constant<caf::atom("run_step")>;
inline constexpr run_step_atom run_step_atom_v = run_step_atom{};
using register_graph_atom = caf::atom_constant<caf::atom("reg_graph")>;
inline constexpr register_graph_atom register_graph_atom_v = register_graph_atom{};
using run_graph_atom = caf::atom_constant<caf::atom("run_graph")>;
inline constexpr run_graph_atom run_graph_atom_v = run_graph_atom{};
using abort_step_atom = caf::atom_constant<caf::atom("abort_step")>;
inline constexpr abort_step_atom abort_step_atom_v = abort_step_atom{};
using step_alive_atom = caf::atom_constant<caf::atom("step_alive")>;
inline constexpr step_alive_atom step_alive_atom_v = step_alive_atom{};
using check_deadlines_atom = caf::atom_constant<caf::atom("deadlines")>;
inline constexpr check_deadlines_atom check_deadlines_atom_v
  = check_deadlines_atom{};
using recv_tensor_atom = caf::atom_constant<caf::atom("recv_tens")>;
inline constexpr recv_tensor_atom recv_tensor_atom_v = recv_tensor_atom{};
using step_reply_atom = caf::atom_constant<caf::atom("step_reply")>;
inline constexpr step_reply_atom step_reply_atom_v = step_reply_atom{};
using get_variable_atom = caf::atom_constant<caf::atom("get_var")>;
inline constexpr get_variable_atom get_variable_atom_v = get_variable_atom{};
using read_atom = caf::atom_constant<caf::atom("read")>;
inline constexpr read_atom read_atom_v = read_atom{};
using assign_atom = caf::atom_constant<caf::atom("assign")>;
inline constexpr assign_atom assign_atom_v = assign_atom{};
using assign_add_atom = caf::atom_constant<caf::atom("assign_add")>;
inline constexpr assign_add_atom assign_add_atom_v = assign_add_atom{};
using assign_sub_atom = caf::atom_constant<caf::atom("assign_sub")>;
inline constexpr assign_sub_atom assign_sub_atom_v = assign_sub_atom{};
using is_initialized_atom = caf::atom_constant<caf::atom("is_init")>;
inline constexpr is_initialized_atom is_initialized_atom_v = is_initialized_atom{};
using get_stats_atom = caf::atom_constant<caf::atom("get_stats")>;
inline constexpr get_stats_atom get_stats_atom_v = get_stats_atom{};
using reset_atom = caf::atom_constant<caf::atom("sess_reset")>;
inline constexpr reset_atom reset_atom_v = reset_atom{};
using cleanup_atom = caf::atom_constant<caf::atom("cleanup")>;
inline constexpr cleanup_atom cleanup_atom_v = cleanup_atom{};
// A queue's operations (queue_actor below).
using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
inline constexpr enqueue_atom enqueue_atom_v = enqueue_atom{};
using enqueue_many_atom = caf::atom_constant<caf::atom("enq_many")>;
inline constexpr enqueue_many_atom enqueue_many_atom_v = enqueue_many_atom{};
using dequeue_atom = caf::atom_constant<caf::atom("dequeue")>;
inline constexpr dequeue_atom dequeue_atom_v = dequeue_atom{};
using dequeue_many_atom = caf::atom_constant<caf::atom("deq_many")>;
inline constexpr dequeue_many_atom dequeue_many_atom_v = dequeue_many_atom{};
using dequeue_up_to_atom = caf::atom_constant<caf::atom("deq_up_to")>;
inline constexpr dequeue_up_to_atom dequeue_up_to_atom_v = dequeue_up_to_atom{};
using close_queue_atom = caf::atom_constant<caf::atom("close_q")>;
inline constexpr close_queue_atom close_queue_atom_v = close_queue_atom{};
using queue_size_atom = caf::atom_constant<caf::atom("q_size")>;
inline constexpr queue_size_atom queue_size_atom_v = queue_size_atom{};
using queue_closed_atom = caf::atom_constant<caf::atom("q_closed")>;
inline constexpr queue_closed_atom queue_closed_atom_v = queue_closed_atom{};
using commit_step_atom = caf::atom_constant<caf::atom("commit_stp")>;
inline constexpr commit_step_atom commit_step_atom_v = commit_step_atom{};
using cancel_step_atom = caf::atom_constant<caf::atom("cancel_stp")>;
inline constexpr cancel_step_atom cancel_step_atom_v = cancel_step_atom{};
using get_queue_atom = caf::atom_constant<caf::atom("get_queue")>;
inline constexpr get_queue_atom get_queue_atom_v = get_queue_atom{};

using get_reader_atom = caf::atom_constant<caf::atom("get_reader")>;
inline constexpr get_reader_atom get_reader_atom_v = get_reader_atom{};
// A reader's operations (reader_actor below).
using read_record_atom = caf::atom_constant<caf::atom("rd_read")>;
inline constexpr read_record_atom read_record_atom_v = read_record_atom{};
using read_up_to_atom = caf::atom_constant<caf::atom("rd_up_to")>;
inline constexpr read_up_to_atom read_up_to_atom_v = read_up_to_atom{};
using records_produced_atom = caf::atom_constant<caf::atom("rd_nrec")>;
inline constexpr records_produced_atom records_produced_atom_v = records_produced_atom{};
using work_units_completed_atom = caf::atom_constant<caf::atom("rd_nwork")>;
inline constexpr work_units_completed_atom work_units_completed_atom_v = work_units_completed_atom{};
using reset_reader_atom = caf::atom_constant<caf::atom("rd_reset")>;
inline constexpr reset_reader_atom reset_reader_atom_v = reset_reader_atom{};
using count_up_to_atom = caf::atom_constant<caf::atom("count_up")>;
inline constexpr count_up_to_atom count_up_to_atom_v = count_up_to_atom{};
using apply_atom = caf::atom_constant<caf::atom("apply")>;
inline constexpr apply_atom apply_atom_v = apply_atom{};
// Replicated variables (docs/DESIGN.md, "Replicated variables").
using replicate_atom = caf::atom_constant<caf::atom("rep_write")>;
inline constexpr replicate_atom replicate_atom_v = replicate_atom{};
using replica_sync_atom = caf::atom_constant<caf::atom("rep_sync")>;
inline constexpr replica_sync_atom replica_sync_atom_v = replica_sync_atom{};
using promote_atom = caf::atom_constant<caf::atom("rep_promo")>;
inline constexpr promote_atom promote_atom_v = promote_atom{};
using set_backup_atom = caf::atom_constant<caf::atom("rep_backup")>;
inline constexpr set_backup_atom set_backup_atom_v = set_backup_atom{};
using depose_atom = caf::atom_constant<caf::atom("rep_depose")>;
inline constexpr depose_atom depose_atom_v = depose_atom{};
using attach_replica_atom = caf::atom_constant<caf::atom("rep_attach")>;
inline constexpr attach_replica_atom attach_replica_atom_v = attach_replica_atom{};
using get_replica_atom = caf::atom_constant<caf::atom("rep_get")>;
inline constexpr get_replica_atom get_replica_atom_v = get_replica_atom{};
using serving_atom = caf::atom_constant<caf::atom("rep_where")>;
inline constexpr serving_atom serving_atom_v = serving_atom{};
using replica_lost_atom = caf::atom_constant<caf::atom("rep_lost")>;
inline constexpr replica_lost_atom replica_lost_atom_v = replica_lost_atom{};
using replica_tick_atom = caf::atom_constant<caf::atom("rep_tick")>;
inline constexpr replica_tick_atom replica_tick_atom_v = replica_tick_atom{};
using find_peer_atom = caf::atom_constant<caf::atom("find_peer")>;
inline constexpr find_peer_atom find_peer_atom_v = find_peer_atom{};
using retry_step_atom = caf::atom_constant<caf::atom("retry_step")>;
inline constexpr retry_step_atom retry_step_atom_v = retry_step_atom{};
using get_accumulator_atom = caf::atom_constant<caf::atom("get_accum")>;
inline constexpr get_accumulator_atom get_accumulator_atom_v = get_accumulator_atom{};
// An accumulator's operations (accumulator_actor below).
using apply_gradient_atom = caf::atom_constant<caf::atom("acc_apply")>;
inline constexpr apply_gradient_atom apply_gradient_atom_v = apply_gradient_atom{};
using take_gradient_atom = caf::atom_constant<caf::atom("acc_take")>;
inline constexpr take_gradient_atom take_gradient_atom_v = take_gradient_atom{};
using num_accumulated_atom = caf::atom_constant<caf::atom("acc_num")>;
inline constexpr num_accumulated_atom num_accumulated_atom_v = num_accumulated_atom{};
using set_global_step_atom = caf::atom_constant<caf::atom("acc_gstep")>;
inline constexpr set_global_step_atom set_global_step_atom_v = set_global_step_atom{};
using set_num_required_atom = caf::atom_constant<caf::atom("acc_needs")>;
inline constexpr set_num_required_atom set_num_required_atom_v = set_num_required_atom{};
using accumulator_replicas_atom = caf::atom_constant<caf::atom("acc_who")>;
inline constexpr accumulator_replicas_atom accumulator_replicas_atom_v = accumulator_replicas_atom{};

// Elastic membership (the master's; actors/src/membership.cpp).
using membership_atom = caf::atom_constant<caf::atom("mbr_get")>;
inline constexpr membership_atom membership_atom_v = membership_atom{};
using join_atom = caf::atom_constant<caf::atom("mbr_join")>;
inline constexpr join_atom join_atom_v = join_atom{};
using leave_atom = caf::atom_constant<caf::atom("mbr_leave")>;
inline constexpr leave_atom leave_atom_v = leave_atom{};
using membership_update_atom = caf::atom_constant<caf::atom("mbr_upd")>;
inline constexpr membership_update_atom membership_update_atom_v
  = membership_update_atom{};
using member_check_atom = caf::atom_constant<caf::atom("mbr_chk")>;
inline constexpr member_check_atom member_check_atom_v = member_check_atom{};

// The monitor actor (monitor_actor below, actors/src/monitor_actor.cpp).
using get_worker_atom = caf::atom_constant<caf::atom("get_worker")>;
inline constexpr get_worker_atom get_worker_atom_v = get_worker_atom{};
using get_monitor_atom = caf::atom_constant<caf::atom("get_mon")>;
inline constexpr get_monitor_atom get_monitor_atom_v = get_monitor_atom{};
using monitor_snapshot_atom = caf::atom_constant<caf::atom("mon_snap")>;
inline constexpr monitor_snapshot_atom monitor_snapshot_atom_v
  = monitor_snapshot_atom{};
using monitor_subscribe_atom = caf::atom_constant<caf::atom("mon_sub")>;
inline constexpr monitor_subscribe_atom monitor_subscribe_atom_v
  = monitor_subscribe_atom{};
using monitor_update_atom = caf::atom_constant<caf::atom("mon_upd")>;
inline constexpr monitor_update_atom monitor_update_atom_v
  = monitor_update_atom{};
using monitor_ping_atom = caf::atom_constant<caf::atom("mon_ping")>;
inline constexpr monitor_ping_atom monitor_ping_atom_v = monitor_ping_atom{};
using monitor_tick_atom = caf::atom_constant<caf::atom("mon_tick")>;
inline constexpr monitor_tick_atom monitor_tick_atom_v = monitor_tick_atom{};
using monitor_trace_atom = caf::atom_constant<caf::atom("mon_trace")>;
inline constexpr monitor_trace_atom monitor_trace_atom_v
  = monitor_trace_atom{};
using monitor_get_trace_atom = caf::atom_constant<caf::atom("mon_gtrace")>;
inline constexpr monitor_get_trace_atom monitor_get_trace_atom_v
  = monitor_get_trace_atom{};

/// In-place updates a variable actor applies atomically (the `kind` of an
/// apply message), the pieces of TF's training ops (ApplyGradientDescent,
/// ApplyMomentum, ApplyAdagrad, ApplyAdam). Scalars are 0-d tensors. The
/// message's last field is the first row to update: -1 updates the whole
/// variable and replies with its new value; a row r >= 0 takes element-wise
/// arguments of rows [r, r + n) only (a row block of a pipelined gradient,
/// graph/matmul_pipelining.hpp) and replies with those rows' new values.
enum class apply_kind : int32_t {
  /// var -= alpha * delta; args: alpha, delta.
  gradient_descent = 0,
  /// var = var * momentum + grad; args: grad, momentum.
  momentum = 1,
  /// var += grad^2; args: grad.
  square_sum = 2,
  /// var = var * beta + (1 - beta) * x; args: x, beta.
  moving_average = 3,
  /// var = var * beta + (1 - beta) * x^2; args: x, beta.
  moving_square = 4,
  /// var -= alpha * a / (sqrt(b) + epsilon); args: alpha, a, b, epsilon.
  scaled_sqrt = 5,
  /// var -= alpha * (grad + momentum * accum); args: alpha, grad,
  /// momentum, accum (Nesterov momentum).
  nesterov = 6,
};

/// A variable (one tensor in a container of its task). Every write ends
/// with its tag: the step that writes and the node (0 for none), so that a
/// step retried after a failover is applied once (a write whose tag the
/// variable has seen answers its current value and changes nothing).
/// Replication (docs/DESIGN.md, "Replicated variables"): a primary
/// forwards each write to its backup as `rep_write` (epoch, sequence
/// number, tag, first row or -1, the new value or rows) and answers the
/// writer once the backup holds it; with both ends on the tensor channel
/// the write and its acknowledgement are tensor frames instead
/// (`recv_tens`, the sequence number as the step, what the write or the
/// acknowledgement says in the key); `rep_sync` (epoch, sequence
/// number, value, tags, the primary's inbox) hands a new backup the whole
/// state and answers with the backup's inbox; `rep_promo` (epoch)
/// makes a backup the primary of a new epoch, after which writes of older
/// epochs are refused (fenced); `rep_backup` gives a primary its backup
/// (and the epoch), `rep_depose` ends a primary that was superseded.
using variable_actor = caf::typed_actor<
  caf::replies_to<read_atom>::with<status, tensor>,
  caf::replies_to<assign_atom, tensor, bool, int64_t>::with<status, tensor>,
  caf::replies_to<assign_add_atom, tensor, int64_t>::with<status, tensor>,
  caf::replies_to<assign_sub_atom, tensor, int64_t>::with<status, tensor>,
  caf::replies_to<is_initialized_atom>::with<bool>,
  caf::replies_to<count_up_to_atom, int64_t, int64_t>::with<status, tensor>,
  caf::replies_to<apply_atom, int32_t, std::vector<tensor>, int64_t,
                  int64_t>::with<status, tensor>,
  caf::replies_to<replicate_atom, int64_t, int64_t, int64_t, int64_t,
                  tensor>::with<status>,
  caf::replies_to<replica_sync_atom, int64_t, int64_t, tensor,
                  std::vector<int64_t>, std::string>::with<status,
                                                          std::string>,
  caf::replies_to<promote_atom, int64_t>::with<status>,
  caf::reacts_to<set_backup_atom, caf::actor, int64_t>,
  caf::reacts_to<depose_atom, std::string>,
  caf::reacts_to<recv_tensor_atom, int64_t, std::string, tensor>>;

/// What a resource's operation answers: its status and its outputs.
template <class... Ts>
using replies_outputs
  = typename caf::replies_to<Ts...>::template with<status,
                                                   std::vector<tensor>>;

/// A queue on its task, one message per operation of TF's QueueBase:
/// enqueue (a tuple) and enqueue_many (a batch), dequeue, dequeue_many
/// and dequeue_up_to (n), close (cancel_pending_enqueues), size and
/// is_closed, each with the step it belongs to (for cancellation) where
/// it may wait. The reply comes when the operation completes, which may
/// be much later (a pending request, never a blocked thread). A dequeue's
/// elements stay leased to its step: `commit_stp` drops the step's leases
/// (its master has the elements), `cancel_stp` fails the step's pending
/// operations with Cancelled and returns its leased elements to the
/// front, in order: a step that dies loses no element. Enqueues and
/// closes carry a tag (the node's in its step, the same when the step is
/// retried; 0 for none): a replicated queue applies a tag once.
using queue_actor = caf::typed_actor<
  replies_outputs<enqueue_atom, std::vector<tensor>, int64_t, int64_t>,
  replies_outputs<enqueue_many_atom, std::vector<tensor>, int64_t, int64_t>,
  replies_outputs<dequeue_atom, int64_t>,
  replies_outputs<dequeue_many_atom, int64_t, int64_t>,
  replies_outputs<dequeue_up_to_atom, int64_t, int64_t>,
  replies_outputs<close_queue_atom, bool, int64_t, int64_t>,
  replies_outputs<queue_size_atom>,
  replies_outputs<queue_closed_atom>,
  caf::reacts_to<commit_step_atom, int64_t>,
  caf::reacts_to<cancel_step_atom, int64_t>>;

/// A reader on its task (kernels/reader_core.hpp), one message per
/// operation of TF's ReaderBase: read (the filename queue to pull work
/// from, the step) and read_up_to (the queue, n, the step),
/// num_records_produced, num_work_units_completed and reset (the step).
/// Requests run one after another in arrival order, and a read waiting
/// for a file name is a pending dequeue on the queue, cancelled with its
/// step. `cancel_stp` fails the step's queued requests with Cancelled.
using reader_actor = caf::typed_actor<
  replies_outputs<read_record_atom, queue_actor, int64_t>,
  replies_outputs<read_up_to_atom, queue_actor, int64_t, int64_t>,
  replies_outputs<records_produced_atom, int64_t>,
  replies_outputs<work_units_completed_atom, int64_t>,
  replies_outputs<reset_reader_atom, int64_t>,
  caf::reacts_to<cancel_step_atom, int64_t>>;

/// A conditional accumulator on its task (kernels/accumulator_core.hpp),
/// one message per operation: apply_gradient (the gradient, its local
/// step, the replica that sent it or ""), take_gradient (the number
/// required, the step; waits as a pending request), num_accumulated,
/// set_global_step (the new global step), accumulator_replicas (the named
/// senders' last local steps and seconds since, the global step, the
/// number accumulated). `cancel_stp` fails the step's waiting takes with
/// Cancelled. apply_gradient and take_gradient end with a tag, as a
/// queue's enqueue (a retried take gets the gradient the first got).
using accumulator_actor = caf::typed_actor<
  replies_outputs<apply_gradient_atom, tensor, int64_t, std::string,
                  int64_t>,
  replies_outputs<take_gradient_atom, int64_t, int64_t, int64_t>,
  replies_outputs<num_accumulated_atom>,
  replies_outputs<set_global_step_atom, int64_t>,
  replies_outputs<set_num_required_atom, int64_t>,
  replies_outputs<accumulator_replicas_atom>,
  caf::reacts_to<cancel_step_atom, int64_t>>;

/// The executor of one registered partition. `run_graph` carries the
/// executors of the step's other partitions (untyped: the interface cannot
/// name itself); without them it is a request that came over the tensor
/// channel (or CAF, when the channel's link went down), answered with a
/// `step_reply` to the master; `recv_tensor` delivers a tensor whole (from
/// a peer's message or the tensor channel), or one chunk of it (total
/// size, offset, bytes); `commit_stp` commits the queue leases of a step
/// that succeeded (run_graph_response::leased).
using executor_actor = caf::typed_actor<
  caf::replies_to<run_graph_atom, run_graph_request,
                  std::vector<caf::actor>>::with<run_graph_response>,
  caf::reacts_to<run_graph_atom, run_graph_request>,
  caf::reacts_to<recv_tensor_atom, int64_t, std::string, tensor>,
  caf::reacts_to<recv_tensor_atom, wire_chunk>,
  caf::reacts_to<abort_step_atom, int64_t, status>,
  caf::reacts_to<commit_step_atom, int64_t>>;

/// A task's monitor (read-only: nothing it answers changes the task).
/// `mon_snap`: the task's actors, steps, peers, process and training
/// progress as one JSON document (docs/DESIGN.md, "Monitoring").
/// `mon_sub` (interval in ms, subscriber): from now on the subscriber gets
/// `(mon_upd, json)` every interval, the first whole, later ones with only
/// the actors that changed ("delta": true, "removed": ids), until it goes
/// down; InvalidArgument for an interval outside [50 ms, 60 s],
/// ResourceExhausted beyond 32 subscribers. `mon_ping` -> the task's clock
/// in microseconds (round trips). `mon_trace` asks the master to trace
/// its next step that succeeds (FULL_TRACE; the values and the variables
/// are not touched); `mon_gtrace` -> (when it was traced in us since the
/// epoch, 0 for never; its Chrome trace-event JSON). `mon_tick` is the
/// actor's own timer.
using monitor_actor = caf::typed_actor<
  caf::replies_to<monitor_snapshot_atom>::with<std::string>,
  caf::replies_to<monitor_subscribe_atom, int64_t, caf::actor>::with<status>,
  caf::replies_to<monitor_ping_atom>::with<int64_t>,
  caf::replies_to<monitor_trace_atom>::with<status>,
  caf::replies_to<monitor_get_trace_atom>::with<int64_t, std::string>,
  caf::reacts_to<monitor_tick_atom, uint64_t>>;

/// A task's worker service (TF's Worker): partition registration (the
/// executor and its tensor channel inbox, "" for none) and the task's
/// resource manager (variables, queues, readers and accumulators by
/// container and name, created on first lookup; variables, queues and
/// accumulators of a task's store: the last string names the task, ""
/// for this one); `cleanup` frees containers (TF's ClearContainers).
using worker_actor = caf::typed_actor<
  caf::replies_to<register_graph_atom, std::string, std::string,
                  std::string>::with<status, executor_actor, std::string>,
  caf::replies_to<get_variable_atom, std::string, std::string, int32_t,
                  std::string, std::string>::with<status, variable_actor>,
  caf::replies_to<get_queue_atom, std::string, std::string, std::string,
                  std::string>::with<status, queue_actor>,
  caf::replies_to<get_reader_atom, std::string, std::string,
                  std::string>::with<status, reader_actor>,
  caf::replies_to<get_accumulator_atom, std::string, std::string,
                  std::string, std::string>::with<status, accumulator_actor>,
  caf::replies_to<cleanup_atom, std::vector<std::string>>::with<status>,
  caf::replies_to<attach_replica_atom, std::string, int64_t, std::string,
                  bool>::with<status>,
  caf::reacts_to<find_peer_atom, caf::actor>,
  caf::replies_to<get_replica_atom, std::string, std::string, std::string,
                  int32_t, std::string, int64_t>::with<status, caf::actor>,
  caf::replies_to<promote_atom, std::string>::with<status, int64_t>,
  caf::replies_to<serving_atom, std::string>::with<std::string, int64_t>,
  caf::reacts_to<replica_lost_atom, std::string, bool>,
  caf::reacts_to<replica_tick_atom>>;

/// A task's master service (TF's Master), the actor a task publishes:
/// sessions and their steps, `reset` of containers on every task, the
/// task's statistics and monitor, and its worker (`get_worker`, how other
/// masters reach it). The connect message is its own retry timer for
/// reaching other tasks, check_deadlines its timer for step deadlines
/// (deadline_table.hpp), and step_reply an executor's answer (step, part,
/// response) to a request that went over the tensor channel.
using master_actor = caf::typed_actor<
  caf::replies_to<create_session_atom, session_config>::with<std::string>,
  caf::replies_to<close_session_atom, std::string>::with<status>,
  caf::replies_to<run_step_atom, run_step_request>::with<run_step_response>,
  caf::replies_to<reset_atom, std::vector<std::string>>::with<status>,
  caf::replies_to<get_worker_atom>::with<worker_actor>,
  caf::replies_to<get_stats_atom>::with<task_stats>,
  caf::replies_to<get_monitor_atom>::with<monitor_actor>,
  caf::replies_to<step_alive_atom, int64_t>::with<bool>,
  caf::replies_to<find_peer_atom, std::string, int64_t>::with<status,
                                                                worker_actor>,
  caf::reacts_to<retry_step_atom, int64_t>,
  // The requester cancels its step of that client_step (run_step_request).
  caf::reacts_to<cancel_step_atom, int64_t>,
  // Elastic membership: the current (version, name, address, name, ...);
  // a join (job, address: status, the new member's name, version,
  // members); a leave (task); a newer membership to adopt; a task's view
  // with its name (it reached the authority: the authority watches it
  // through that connection); the authority's timer for a member it has
  // not heard from.
  caf::replies_to<membership_atom>::with<int64_t, std::vector<std::string>>,
  caf::replies_to<join_atom, std::string, std::string>::with<
    status, std::string, int64_t, std::vector<std::string>>,
  caf::replies_to<leave_atom, std::string>::with<status>,
  caf::reacts_to<membership_update_atom, int64_t, std::vector<std::string>>,
  caf::reacts_to<membership_update_atom, int64_t, std::vector<std::string>,
                 std::string>,
  caf::reacts_to<member_check_atom, std::string>,
  caf::reacts_to<caf::connect_atom, std::string, int64_t, int>,
  caf::reacts_to<check_deadlines_atom>,
  caf::reacts_to<step_reply_atom, int64_t, int64_t, run_graph_response>>;

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
  CAF_ADD_TYPE_ID(actorflow, (actorflow::variable_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::queue_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::executor_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::master_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::reader_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::accumulator_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::wire_chunk))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::monitor_actor))
  CAF_ADD_TYPE_ID(actorflow, (actorflow::worker_actor))
  CAF_ADD_TYPE_ID(actorflow, (std::vector<int64_t>))

CAF_END_TYPE_ID_BLOCK(actorflow)
