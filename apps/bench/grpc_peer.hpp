#pragma once

// The gRPC peer of actorflow-bench: a minimal TensorFlow-style tensor
// service (grpc_peer/tensor_service.proto, TF's WorkerService.RecvTensor
// reduced) on Debian's grpc++, so that actorflow's transport is set
// against TF's gRPC transport in the same run, as against raw TCP.
//
// As with the raw TCP baseline (raw_tcp.hpp), the server is the bench
// started again in a hidden mode: serve_grpc_peer() prints its port on
// stdout and serves until it is told to stop or its parent dies; the
// bench talks to it through one grpc_peer_client.
//
// This header includes nothing of grpc or protobuf: the bench's
// translation unit stays free of them; grpc_peer.cpp (a library of its
// own, see grpc_peer/grpc_peer.cmake) holds all of it.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace actorflow::bench {

/// What the server prints once it listens, followed by the port.
constexpr const char* grpc_peer_marker = "grpc-peer-server listening on port ";

/// Seconds any one call of grpc_peer_client may take before it fails.
constexpr int grpc_peer_call_timeout_s = 60;

/// Seconds grpc_peer_client's constructor waits for a connection.
constexpr int grpc_peer_connect_timeout_s = 10;

/// The largest tensor a fetch may ask for (the biggest figure moves
/// 64 MiB).
constexpr uint64_t grpc_peer_max_bytes = uint64_t{256} << 20;

/// The server side (the bench's hidden gRPC server mode). Listens on a
/// free port of `ip` (IPv4; loopback unless the bench runs --netsim), then prints `grpc_peer_marker`, the port and
/// a newline to stdout, and serves any number of clients until SIGTERM or
/// SIGINT arrives or `parent` (if > 0) dies (it is then killed by
/// PR_SET_PDEATHSIG; it also checks getppid() == parent once a second).
/// A fetch of `n` bytes answers with a float32 tensor of shape [n / 4]
/// built once per size: the first fetch of a size includes building it,
/// so a caller warms up each size with one fetch. Blocks until then;
/// returns the exit status (0 after a signal, 1 when it cannot listen,
/// write its port, or its parent is already gone). Call it before any
/// other thread is started: it blocks SIGTERM and SIGINT in the calling
/// thread so that grpc's threads inherit the mask and the signal is
/// taken by this thread.
int serve_grpc_peer(pid_t parent, const std::string& ip = "127.0.0.1");

/// The client side: one channel to the server at `ip`:`port`, reused
/// for every call, as a TF worker keeps one channel per peer task. Every
/// call blocks until its reply arrives, and fails after
/// grpc_peer_call_timeout_s at most; a failed call throws
/// std::runtime_error naming the call and grpc's status code and message
/// (a dead server fails at once with UNAVAILABLE). A size that is not a
/// multiple of 4 or exceeds grpc_peer_max_bytes throws
/// std::invalid_argument without a call. Not thread-safe: one caller at a
/// time.
class grpc_peer_client {
public:
  /// Opens the channel and waits until it is connected; throws
  /// std::runtime_error when it is not within grpc_peer_connect_timeout_s.
  explicit grpc_peer_client(uint16_t port,
                            const std::string& ip = "127.0.0.1");

  /// Closes the stream if open (WritesDone and Finish, waiting
  /// grpc_peer_call_timeout_s at most, errors ignored), then the channel.
  ~grpc_peer_client();

  grpc_peer_client(const grpc_peer_client&) = delete;
  grpc_peer_client& operator=(const grpc_peer_client&) = delete;

  /// One unary RecvTensor of a `bytes`-byte tensor; throws
  /// std::runtime_error when the reply's tensor_content is not `bytes`
  /// long.
  void recv_tensor(uint64_t bytes);

  /// The same fetch on the RecvTensorStream stream, which the first call
  /// opens and later calls reuse (one request, then its one response).
  /// After a failed call the stream is dropped; the next call opens a new
  /// one.
  void recv_tensor_streaming(uint64_t bytes);

  /// One unary Ping: 48 bytes of payload up, 64 back (throws
  /// std::runtime_error when the reply's payload is not 64 bytes).
  void ping();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace actorflow::bench
