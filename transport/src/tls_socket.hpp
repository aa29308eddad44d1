#pragma once

// Private to transport/: TLS on one of the tensor channel's own connections
// (transport.cpp has CAF's), with the same certificates, identity checks
// and log lines as the actor system's TLS (transport.hpp).

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

struct ssl_st;

namespace actorflow {

class tls_socket {
public:
  /// The TLS of one actor system, opaque here.
  struct security;
  using security_ptr = std::shared_ptr<security>;

  /// The TLS of `sys`, or nullptr when it talks plain TCP. Never blocks.
  static security_ptr security_of(caf::actor_system& sys);

  /// A suffix that tells apart the channel's listeners and links of
  /// systems with different TLS (or none: ""). Never blocks.
  static std::string key_of(const security_ptr& sec);

  /// The client's handshake on connected socket `fd` (blocking or not) to
  /// `host`:`port`, whose certificate must be for `host`; done within
  /// `timeout`. nullptr if it failed (and said why, as a refused CAF
  /// connection does). Blocks up to `timeout`. Leaves `fd` as it was.
  static std::unique_ptr<tls_socket>
  connect(const security_ptr& sec, int fd, const std::string& host,
          const std::string& port, std::chrono::milliseconds timeout);

  /// The server's handshake on accepted socket `fd`, within the system's
  /// handshake timeout; the peer must be a host of the cluster or an
  /// allowed peer. nullptr if not (said why). Blocks up to the timeout.
  static std::unique_ptr<tls_socket> accept(const security_ptr& sec, int fd);

  ~tls_socket();
  tls_socket(const tls_socket&) = delete;
  tls_socket& operator=(const tls_socket&) = delete;

  /// Up to `n` bytes: > 0 read, 0 the peer closed, -1 broken, -2 nothing
  /// yet (a non-blocking socket). Blocks on a blocking socket.
  long read(void* buf, size_t n);

  /// Up to `n` bytes of `buf`: > 0 written, 0 the socket is full (call
  /// again with the same bytes, which may have moved), -1 broken. Blocks on
  /// a blocking socket.
  long write(const void* buf, size_t n);

  /// True if bytes are here (decrypted or received) that the socket's poll
  /// would not show.
  bool has_pending() const;

  /// Copies the next `n` decrypted bytes into `buf` without taking them, if
  /// they are here already; false if not. Never blocks.
  bool peek_buffered(void* buf, size_t n);

private:
  tls_socket() = default;
  bool handshake(int fd, bool incoming, const std::string& endpoint,
                 std::chrono::milliseconds timeout);

  security_ptr sec_;
  ssl_st* ssl_ = nullptr;
  std::string verify_error_;
};

} // namespace actorflow
