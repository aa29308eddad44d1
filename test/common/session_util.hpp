#pragma once

// Helpers for tests that run sessions.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "actorflow/transport/messages.hpp"
#include "actorflow/support/free_ports.hpp"

namespace actorflow::testing {

/// A session config whose steps cannot wait forever: a broken step fails
/// the test instead of hanging it until the runner's timeout.
inline session_config bounded() {
  session_config config;
  config.operation_timeout_in_ms = 30000;
  return config;
}

// A loopback port nothing listens on right now, below the kernel's
// ephemeral range (actorflow/support/free_ports.hpp).
using support::free_port;

/// A TCP connection to 127.0.0.1:`port` (blocking, close-on-exec), or -1
/// if it was refused.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::string loopback(uint16_t port) {
  return "127.0.0.1:" + std::to_string(port);
}

} // namespace actorflow::testing
