#pragma once

// What this process's tensor channel (the connections beside CAF's that
// carry tensors between executors, docs/DESIGN.md "Tensor channel") has
// read so far, and the size of its rings: which path a tensor's bytes
// took, for the bench and for anyone checking where a transfer went.

#include <cstdint>

namespace actorflow::tensor_channel {

/// Totals since the process started; they only grow.
struct received_totals {
  /// Tensor frames read (each one `_Send` value of a step).
  uint64_t tensor_frames = 0;
  /// Numeric tensors' data bytes read from the frames' sockets (TCP, or
  /// TLS records); string tensors travel encoded and are not counted.
  uint64_t socket_bytes = 0;
  /// Tensor data bytes taken from rings of shared memory (a peer process
  /// on this host), which the socket then did not carry.
  uint64_t ring_bytes = 0;
  /// Later-step requests and step replies read (run_graph and answers).
  uint64_t messages = 0;
};

/// The totals now. Never blocks (relaxed atomic loads).
received_totals totals_received();

/// The bytes of the ring of shared memory a link offers a peer process on
/// this host (ACTORFLOW_CHANNEL_RING_MIB, 4 MiB by default; 0: none).
/// Tensor data from 16 KiB up to half of it takes the ring. Never blocks.
uint64_t ring_capacity();

} // namespace actorflow::tensor_channel
