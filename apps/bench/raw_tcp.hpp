#pragma once

// The raw TCP baseline of actorflow-bench: a plain TCP_NODELAY socket pair
// on loopback between two processes, request/reply, so that actorflow's
// remote figures can be set against what the kernel alone does with the
// same bytes.
//
// The server is this same program started again with a hidden mode flag
// (see serve_raw_tcp): a fork() of a process that runs CAF's threads
// would inherit locks held by threads that do not exist in the child. It
// prints its port on stdout, serves one connection, and ends when the
// client hangs up or its parent dies.
//
// Wire format of one request: a 16-byte header (request payload bytes,
// reply bytes; both uint64, host order, since both ends are this program
// on this host), the payload, then the server answers with exactly "reply
// bytes" bytes. Both ends keep their buffers across requests: the baseline
// is the transport alone, with no allocation per message. A request whose
// reply count has raw_tcp_poll_flag set asks the server to poll its
// socket (for the payload, while its reply does not fit the socket, and
// for the next request) instead of blocking, as the client then does:
// the round trip without a blocked thread's wake-up (on VMs that
// halt an idle vCPU at once, that wake-up is most of a small round trip).
//
// Blocking calls: serve_raw_tcp (until EOF), raw_tcp_client's constructor
// (connect) and round_trip (one send and one full reply). Every wait has a
// deadline (poll on accept, SO_RCVTIMEO/SO_SNDTIMEO on the data socket).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstring>
#include <memory>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorflow::bench {

/// The largest reply or request payload either side accepts (the biggest
/// figure moves 64 MiB; a little slack for the header).
constexpr uint64_t raw_tcp_max_bytes = uint64_t{256} << 20;

/// What the server prints once it listens, followed by the port.
constexpr const char* raw_tcp_marker = "raw-tcp-server listening on port ";

/// Seconds any single send or receive may block before the peer counts as
/// lost (a stuck baseline must not hang the bench).
constexpr int raw_tcp_io_timeout_s = 60;

/// Set in a request's reply count: both ends poll (see the top).
constexpr uint64_t raw_tcp_poll_flag = uint64_t{1} << 63;

/// Set in a request's reply count: the server keeps the request's payload
/// in memory allocated for it (and freed after the reply), as a receiver
/// that stores each message in a fresh tensor must; without it the
/// server reads every request into one reused buffer.
constexpr uint64_t raw_tcp_fresh_flag = uint64_t{1} << 62;

/// Set in a request's reply count: the server sends the reply as a stream
/// of raw_tcp_stream_chunk writes from one buffer and the client reads it
/// into one buffer of that size, overwriting it (what iperf3 does): the
/// socket's streaming ceiling, with no copy beyond the kernel's.
constexpr uint64_t raw_tcp_stream_flag = uint64_t{1} << 61;

constexpr uint64_t raw_tcp_flags =
  raw_tcp_poll_flag | raw_tcp_fresh_flag | raw_tcp_stream_flag;

/// The write and read size of a streamed reply.
constexpr uint64_t raw_tcp_stream_chunk = uint64_t{1} << 20;

/// How a raw round trip is done (see the flags above).
struct raw_mode {
  /// Both ends poll their socket instead of blocking.
  bool poll = false;
  /// The receiver of the payload (server for a request, client for a
  /// reply) puts it in freshly allocated memory each time.
  bool fresh = false;
  /// The reply is streamed in raw_tcp_stream_chunk pieces into one
  /// buffer.
  bool stream = false;
};

namespace detail {

inline std::runtime_error tcp_error(const std::string& what, int err = errno) {
  return std::runtime_error("raw tcp: " + what + ": " + std::strerror(err));
}

inline void set_nodelay_and_timeouts(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{raw_tcp_io_timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/// Sends all `n` bytes; false on error or timeout.
inline bool send_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    auto sent = ::send(fd, data, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0)
      return false;
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

/// Receives exactly `n` bytes; false on EOF, error or timeout.
inline bool recv_all(int fd, char* data, size_t n) {
  while (n > 0) {
    auto got = ::recv(fd, data, n, MSG_WAITALL);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    data += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

/// Sends all `n` bytes, polling the socket (yielding the core between
/// tries) when it is full instead of blocking; false on error, or
/// raw_tcp_io_timeout_s without progress.
inline bool send_all_polling(int fd, const char* data, size_t n) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds(raw_tcp_io_timeout_s);
  while (n > 0) {
    auto sent = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      data += sent;
      n -= static_cast<size_t>(sent);
      deadline = std::chrono::steady_clock::now()
                 + std::chrono::seconds(raw_tcp_io_timeout_s);
    } else if ((sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                && errno != EINTR)
               || std::chrono::steady_clock::now() > deadline) {
      return false;
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

/// Receives exactly `n` bytes, polling the socket (yielding the core
/// between polls) instead of blocking; false on EOF, error, or
/// raw_tcp_io_timeout_s without all of them.
inline bool recv_all_polling(int fd, char* data, size_t n) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::seconds(raw_tcp_io_timeout_s);
  while (n > 0) {
    auto got = ::recv(fd, data, n, MSG_DONTWAIT);
    if (got > 0) {
      data += got;
      n -= static_cast<size_t>(got);
    } else if (got == 0
               || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
               || std::chrono::steady_clock::now() > deadline) {
      return false;
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

/// send_all or send_all_polling, by `poll`.
inline bool send_all(int fd, const char* data, size_t n, bool poll) {
  return poll ? send_all_polling(fd, data, n) : send_all(fd, data, n);
}

/// `ip` (dotted IPv4) and `port` as a socket address; std::invalid_argument
/// for another form.
inline sockaddr_in ipv4(const std::string& ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1)
    throw std::invalid_argument("not an IPv4 address: '" + ip + "'");
  return addr;
}

/// recv_all or recv_all_polling, by `poll`.
inline bool recv_all(int fd, char* data, size_t n, bool poll) {
  return poll ? recv_all_polling(fd, data, n) : recv_all(fd, data, n);
}

} // namespace detail

/// The server side (the hidden `--raw-tcp-server` mode). Listens on a free
/// port of `ip` (IPv4, loopback by default), prints `raw_tcp_marker` and
/// the port, accepts one client within `accept_timeout_s`, and answers its
/// requests until it hangs up. Exits (PR_SET_PDEATHSIG) when `parent`
/// dies. Returns the exit status.
inline int serve_raw_tcp(pid_t parent, const std::string& ip = "127.0.0.1",
                         int accept_timeout_s = 60) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0)
    throw detail::tcp_error("socket");
  auto addr = detail::ipv4(ip, 0);
  socklen_t len = sizeof addr;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || ::listen(lfd, 1) != 0
      || ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw detail::tcp_error("bind/listen on " + ip + ":0");
  auto line = std::string{raw_tcp_marker} + std::to_string(ntohs(addr.sin_port))
              + "\n";
  // stdout is a pipe to the parent, not a socket: write(), not send().
  if (::write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return 1;
  pollfd p{lfd, POLLIN, 0};
  if (::poll(&p, 1, accept_timeout_s * 1000) != 1)
    return 1;
  int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(lfd);
  if (fd < 0)
    throw detail::tcp_error("accept");
  detail::set_nodelay_and_timeouts(fd);
  // Lazily grown so that a small figure does not touch 64 MiB of pages.
  std::vector<char> in;
  std::vector<char> out;
  bool polling = false;
  for (;;) {
    uint64_t header[2];
    auto* h = reinterpret_cast<char*>(header);
    if (!detail::recv_all(fd, h, sizeof header, polling))
      break; // the client hung up: done
    auto request = header[0];
    polling = (header[1] & raw_tcp_poll_flag) != 0;
    bool fresh = (header[1] & raw_tcp_fresh_flag) != 0;
    bool stream = (header[1] & raw_tcp_stream_flag) != 0;
    auto reply = header[1] & ~raw_tcp_flags;
    if (request > raw_tcp_max_bytes
        || (!stream && reply > raw_tcp_max_bytes))
      return 1;
    if (fresh) {
      // Not zero-filled first: recv writes every byte, as it would into
      // a fresh tensor.
      std::unique_ptr<char[]> body{new char[request]};
      if (!detail::recv_all(fd, body.get(), request, polling))
        return 1;
    } else {
      if (in.size() < request)
        in.resize(request, 1);
      if (!detail::recv_all(fd, in.data(), request, polling))
        return 1;
    }
    if (stream) {
      if (out.size() < raw_tcp_stream_chunk)
        out.resize(raw_tcp_stream_chunk, 2);
      for (uint64_t left = reply; left > 0;) {
        auto n = std::min(left, raw_tcp_stream_chunk);
        if (!detail::send_all(fd, out.data(), n))
          return 1;
        left -= n;
      }
      continue;
    }
    if (out.size() < reply)
      out.resize(reply, 2);
    if (!detail::send_all(fd, out.data(), reply, polling))
      return 1;
  }
  ::close(fd);
  return 0;
}

/// The client side: one connection to the server, reused for every
/// request.
class raw_tcp_client {
public:
  /// Connects to `ip` (IPv4) at `port`. Blocks until connected.
  explicit raw_tcp_client(uint16_t port, const std::string& ip = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0)
      throw detail::tcp_error("socket");
    auto addr = detail::ipv4(ip, port);
    // A connect to loopback or the simulated network's hosts either
    // succeeds or is refused within a round trip.
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      auto err = errno;
      ::close(fd_);
      throw detail::tcp_error("connect " + ip + ":" + std::to_string(port),
                              err);
    }
    detail::set_nodelay_and_timeouts(fd_);
  }

  raw_tcp_client(const raw_tcp_client&) = delete;
  raw_tcp_client& operator=(const raw_tcp_client&) = delete;

  ~raw_tcp_client() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  /// Sends `request_bytes` of payload and waits for `reply_bytes` back.
  /// The header travels in the same send as the payload, so a request is
  /// one write as a tensor's message would be. `mode`: see raw_mode (a
  /// polling request also leaves the server polling for the next one:
  /// end a polling phase with a blocking request). Throws on a lost peer
  /// or after raw_tcp_io_timeout_s without progress.
  void round_trip(uint64_t request_bytes, uint64_t reply_bytes,
                  raw_mode mode = {}) {
    if (request_bytes > raw_tcp_max_bytes
        || (!mode.stream && reply_bytes > raw_tcp_max_bytes)
        || (reply_bytes & raw_tcp_flags) != 0)
      throw std::invalid_argument("raw tcp: request or reply too large");
    if (out_.size() < request_bytes + 16)
      out_.resize(request_bytes + 16, 3);
    uint64_t header[2] = {request_bytes,
                          reply_bytes | (mode.poll ? raw_tcp_poll_flag : 0)
                            | (mode.fresh ? raw_tcp_fresh_flag : 0)
                            | (mode.stream ? raw_tcp_stream_flag : 0)};
    std::memcpy(out_.data(), header, sizeof header);
    if (!detail::send_all(fd_, out_.data(), request_bytes + 16, mode.poll))
      throw detail::tcp_error("send");
    auto receive = [&](char* into, uint64_t n) {
      if (!detail::recv_all(fd_, into, n, mode.poll))
        throw std::runtime_error("raw tcp: the server hung up or timed out");
    };
    if (mode.stream) {
      if (in_.size() < raw_tcp_stream_chunk)
        in_.resize(raw_tcp_stream_chunk);
      for (uint64_t left = reply_bytes; left > 0;) {
        auto n = std::min(left, raw_tcp_stream_chunk);
        receive(in_.data(), n);
        left -= n;
      }
    } else if (mode.fresh) {
      std::unique_ptr<char[]> body{new char[reply_bytes]};
      receive(body.get(), reply_bytes);
    } else {
      if (in_.size() < reply_bytes)
        in_.resize(reply_bytes);
      receive(in_.data(), reply_bytes);
    }
  }

private:
  int fd_ = -1;
  std::vector<char> out_;
  std::vector<char> in_;
};

} // namespace actorflow::bench
