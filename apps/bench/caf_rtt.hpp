#pragma once

// The CAF baseline of actorflow-bench: one request/reply between a thread
// of this process and an echo actor in another process, over CAF 0.17
// with actorflow's own configuration (actorflow::default_system(): the
// scheduler, middleman and heartbeat settings every task uses). It is the
// least any remote step can cost on top of the engine's work, since a
// step is at least one such round trip (docs/PERFORMANCE.md).
//
// The server is this same program started again with a hidden mode flag
// (serve_caf_echo), for the reason raw_tcp.hpp gives. It prints its port
// on stdout and serves until SIGTERM or its parent's death.
//
// Blocking calls: serve_caf_echo (until killed), caf_echo_client's
// constructor (connect, bounded by CAF's connect timeout) and round_trip
// (one message and its echo, at most caf_echo_timeout).

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "actorflow/actorflow.hpp"

namespace actorflow::bench {

/// What the server prints once it listens, followed by the port.
constexpr const char* caf_echo_marker = "caf-echo-server listening on port ";

/// How long one round trip may take before the peer counts as lost.
constexpr std::chrono::seconds caf_echo_timeout{60};

/// The server side (the hidden `--caf-echo-server` mode): publishes an
/// actor that sends every string back to its sender on a free port of
/// `ip` (loopback by default), prints `caf_echo_marker` and the port, then
/// waits to be killed. Exits (PR_SET_PDEATHSIG) when `parent` dies.
/// Returns the exit status.
inline int serve_caf_echo(pid_t parent, const std::string& ip = "127.0.0.1") {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  auto& sys = default_system();
  auto echo = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[self](std::string& text) {
      self->send(caf::actor_cast<caf::actor>(self->current_sender()),
                 std::move(text));
    }};
  });
  auto port = sys.middleman().publish(echo, 0, ip.c_str(), true);
  if (!port)
    return 1;
  auto line = std::string{caf_echo_marker} + std::to_string(*port) + "\n";
  if (::write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return 1;
  for (;;)
    ::pause();
}

/// The client side: a blocking actor on the calling thread, as a session's
/// caller, talking to the server's echo actor.
class caf_echo_client {
public:
  /// Connects to the echo actor at `ip`:`port`. Blocks.
  explicit caf_echo_client(uint16_t port, const std::string& ip = "127.0.0.1")
    : self_(default_system()), payload_(48, 'x') {
    auto echo = default_system().middleman().remote_actor(ip, port);
    if (!echo)
      throw std::runtime_error("caf echo: connect " + ip + ":"
                               + std::to_string(port) + ": "
                               + default_system().render(echo.error()));
    echo_ = *echo;
  }

  /// One 48-byte string there and back. A receive timeout, not a request
  /// timeout: the latter would also wake CAF's clock thread per message.
  /// Throws after caf_echo_timeout without the echo.
  void round_trip() {
    self_->send(echo_, payload_);
    bool got = false;
    self_->receive([&](std::string&) { got = true; },
                   caf::after(caf_echo_timeout) >> [] {});
    if (!got)
      throw std::runtime_error("caf echo: no reply within "
                               + std::to_string(caf_echo_timeout.count())
                               + " s");
  }

private:
  caf::scoped_actor self_;
  caf::actor echo_;
  std::string payload_;
};

} // namespace actorflow::bench
