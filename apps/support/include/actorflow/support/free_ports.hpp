#pragma once

// Free loopback ports for processes started on them, picked below the
// kernel's ephemeral range: a port the kernel hands out on its own (a
// process listening on port 0, as the tensor channel does, or the local
// end of an outgoing connection) can then never take one between its
// picking and its use. Tests and examples run many such processes at once.
// Header-only: the unit tests use it without the apps' library.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorflow::support {

/// The first port of the kernel's ephemeral range (32768 when unreadable).
inline int ephemeral_port_low() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  int low = 0;
  int high = 0;
  if (in >> low >> high && low > 0 && low < 65536)
    return low;
  return 32768;
}

/// `n` distinct free loopback ports, below the ephemeral range where it
/// leaves room (else from it). Every socket stays bound until all are
/// picked; they are closed without listen(), so no TIME_WAIT keeps them
/// busy afterwards.
inline std::vector<uint16_t> free_ports(size_t n) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  auto close_all = [&] {
    for (int fd : fds)
      ::close(fd);
  };
  constexpr int first = 10000;
  auto low = ephemeral_port_low();
  std::random_device rd;
  std::mt19937 gen{rd()};
  std::uniform_int_distribution<int> pick{first, std::max(first, low - 1)};
  for (size_t i = 0; i < n; ++i) {
    bool bound = false;
    // Random ports below the range (a few may be taken), then the kernel's.
    for (int attempt = 0; attempt <= 64 && !bound; ++attempt) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        auto err = errno;
        close_all();
        throw std::runtime_error(std::string{"socket: "} + std::strerror(err));
      }
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      auto below = low > first + 1000 && attempt < 64;
      addr.sin_port = htons(static_cast<uint16_t>(below ? pick(gen) : 0));
      socklen_t len = sizeof addr;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0
          && ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)
               == 0) {
        fds.push_back(fd);
        ports.push_back(ntohs(addr.sin_port));
        bound = true;
      } else {
        ::close(fd);
      }
    }
    if (!bound) {
      close_all();
      throw std::runtime_error("bind 127.0.0.1: no free port");
    }
  }
  close_all();
  return ports;
}

inline uint16_t free_port() {
  return free_ports(1).front();
}

} // namespace actorflow::support
