#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

/// Plain data exchanged between the client API and the runtime actors
/// (no CAF here: type_ids.hpp registers them with CAF).
namespace actorflow {

/// TensorFlow's ConfigProto, the parts a session uses.
struct session_config {
  bool allow_soft_placement = false;
  bool log_device_placement = false;
  /// Default deadline of every run (0 = none).
  int64_t operation_timeout_in_ms = 0;
  /// TensorFlow's device_filters: when not empty, the session uses only
  /// the tasks matching one of these (partial) device names
  /// ("/job:ps", "/job:worker/task:1"); a node placed elsewhere fails
  /// with InvalidArgument "Cannot assign a device for operation ...".
  std::vector<std::string> device_filters;
  /// actorflow's own graph rewrite (no TensorFlow counterpart): a large
  /// MatMul operand or result crossing between tasks travels in row
  /// blocks that overlap the GEMM (graph/matmul_pipelining.hpp).
  bool matmul_pipelining = true;
};

/// TensorFlow's RunOptions.
struct run_options {
  enum trace_level_t : int32_t {
    no_trace = 0,
    software_trace = 1,
    hardware_trace = 2,
    full_trace = 3,
  };
  int32_t trace_level = no_trace;
  /// Deadline of this run (0 = the session's default).
  int64_t timeout_in_ms = 0;
  /// Return the graph each task ran (run_metadata::partition_graphs).
  bool output_partition_graphs = false;
};

/// TensorFlow's NodeExecStats (times in microseconds since the epoch).
struct node_exec_stats {
  std::string node_name;
  int64_t all_start_micros = 0;
  int64_t op_start_rel_micros = 0;
  int64_t op_end_rel_micros = 0;
  int64_t all_end_rel_micros = 0;
  std::string timeline_label;
};

/// TensorFlow's DeviceStepStats.
struct device_step_stats {
  std::string device;
  std::vector<node_exec_stats> node_stats;
};

/// TensorFlow's StepStats.
struct step_stats {
  std::vector<device_step_stats> dev_stats;
};

/// TensorFlow's RunMetadata.
struct run_metadata {
  bool has_step_stats = false;
  step_stats stats;
  /// With run_options::output_partition_graphs: the graph each device
  /// ran, its `_Send`/`_Recv` nodes included, one per partition.
  std::vector<graph_def> partition_graphs;
  /// The step as Chrome trace-event JSON (chrome://tracing, Perfetto).
  std::string to_chrome_trace() const;
};

/// Client -> master: one `Session::run`.
struct run_step_request {
  std::string session_handle;
  /// Encoded graph_def holding the nodes the master has not seen yet.
  std::string graph_delta;
  /// How many nodes the client had sent before this delta.
  int64_t graph_base = 0;
  std::vector<std::string> feed_names;
  std::vector<tensor> feed_values;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
  run_options options;
  /// The client's own number for this call (per client actor), by which
  /// it may cancel the step (cancel_step to the master).
  int64_t client_step = 0;
};

/// Master -> client.
struct run_step_response {
  status result;
  std::vector<tensor> outputs;
  step_stats stats;
  bool has_stats = false;
  /// run_options::output_partition_graphs: each partition's graph_def,
  /// encoded (encode_graph_def).
  std::vector<std::string> partition_graphs;
};

/// Master -> worker executor: run one step of a registered partition,
/// with the executors of all the plan's partitions (a vector of actors
/// beside it). Those, `peer_devices`, `sink_devices`, `peer_inboxes`,
/// `reply_inbox` and `part` never change for a registered partition: they
/// come with its first step only (a CAF request), and later requests leave
/// them empty (each handle costs a registry update to send and a proxy
/// lookup to receive). A later request to an executor in another process
/// goes over the tensor channel when both ends have one and the executor
/// has answered a request that brought them (until then CAF keeps the
/// requests in order behind the first), and the executor answers there
/// (tensor_channel::send_run_graph, send_step_reply).
struct run_graph_request {
  int64_t step_id = 0;
  /// Feeds by `_Arg` index.
  std::vector<std::pair<int64_t, tensor>> feeds;
  /// Full device name -> executor of that partition, for `_Send`.
  std::vector<std::string> peer_devices;
  bool trace = false;
  /// Devices whose partitions only receive fetches (`_Recv` -> `_Retval`):
  /// a `_Send` of at most one chunk to one of them in another process
  /// goes back inside this partition's reply (run_graph_response::held)
  /// and the master passes it on. Nothing there waits for it earlier, and
  /// the master's process then takes one message for the step instead of
  /// two (each a wake-up of a thread).
  std::vector<std::string> sink_devices;
  /// Per peer device, the tensor channel inbox of its executor
  /// ("host:port/id", register_graph's reply; "" for none): a `_Send` to
  /// another process goes there instead of through CAF.
  std::vector<std::string> peer_inboxes;
  /// The master's tensor channel inbox ("" for none), where the executor
  /// answers the requests that come over the channel.
  std::string reply_inbox;
  /// This partition's position in the master's plan, which such an answer
  /// names.
  int64_t part = 0;
  /// The step's identity across retries (a step retried after a failover
  /// keeps it while its id changes): with a node's name it tags the node's
  /// variable writes, which a variable applies once.
  int64_t tag = 0;
};

/// A `_Send`'s value held for the master to pass on (see
/// run_graph_request::sink_devices).
struct held_tensor {
  std::string device;
  std::string key;
  tensor value;
};

/// Worker executor -> master.
struct run_graph_response {
  status result;
  /// Fetched values by `_Retval` index.
  std::vector<std::pair<int64_t, tensor>> outputs;
  std::vector<node_exec_stats> node_stats;
  std::vector<node_exec_stats> recv_stats;
  /// Values for sink partitions, by device and rendezvous key.
  std::vector<held_tensor> held;
  /// The partition dequeued for the step: the elements stay leased in
  /// their queues until the master commits the step (commit_step), and go
  /// back to the queue's head if it aborts it or is lost.
  bool leased = false;
};

/// One chunk of a large tensor's wire encoding ([header | element bytes]):
/// bytes [offset, offset + size()) of the `total` bytes that step `step`
/// sends under rendezvous `key`. The sender builds it as a view (the
/// header's part of the chunk, and the tensor its element bytes are cut
/// from), so nothing is copied until the serializer writes it out. The
/// receiver's deserializer writes the bytes straight into the destination
/// tensor where it can (chunk 0 creates it from the header; see
/// chunk_landing in type_ids.hpp): then `landed` is that tensor. Otherwise
/// `received` holds the chunk's bytes (dtype uint8).
struct wire_chunk {
  int64_t step = 0;
  std::string key;
  uint64_t total = 0;
  uint64_t offset = 0;
  /// Sending: the header bytes at the start of this chunk (may be empty).
  std::string prefix;
  /// Sending: element bytes [data_begin, data_begin + data_size) of it.
  tensor source;
  uint64_t data_begin = 0;
  uint64_t data_size = 0;
  /// Received: the destination the bytes were written into, the length
  /// of the chunk and of the encoding's header.
  tensor landed;
  uint64_t landed_size = 0;
  uint64_t header_size = 0;
  /// Received and not landed: all bytes of the chunk.
  tensor received;

  /// The chunk's length in bytes.
  uint64_t size() const noexcept {
    if (landed.valid())
      return landed_size;
    return received.valid() ? received.byte_size()
                            : prefix.size() + data_size;
  }
  /// Received bytes (only valid when `received` is).
  const char* data() const noexcept {
    return static_cast<const char*>(received.raw());
  }
};

/// The counters every task actor keeps (read by the monitoring console).
struct task_stats {
  std::string task;
  uint64_t messages_handled = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t mailbox_depth = 0;
  uint64_t steps_run = 0;
  uint64_t sessions = 0;
  uint64_t variables = 0;
  uint64_t partitions = 0;
};

} // namespace actorflow
