#pragma once

// A TCP forwarder that keeps what it carries: what an eavesdropper on a
// link would read (the TLS tests check that a marker is not in it).

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/session_util.hpp"

namespace actorflow::testing {

// A TCP forwarder from a local port to `to_port` that keeps every byte it
// carries both ways: what an eavesdropper on the link would read.
class recording_proxy {
public:
  explicit recording_proxy(uint16_t to_port) : to_port_(to_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    REQUIRE(::listen(listener_, 8) == 0);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    threads_.emplace_back([this] { accept_loop(); });
  }

  ~recording_proxy() {
    ::shutdown(listener_, SHUT_RDWR);
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (int fd : fds_)
        ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_)
      t.join();
    for (int fd : fds_)
      ::close(fd);
    ::close(listener_);
  }

  uint16_t port() const noexcept {
    return port_;
  }

  std::string seen() {
    std::lock_guard<std::mutex> guard{mtx_};
    return seen_;
  }

private:
  void accept_loop() {
    for (;;) {
      int in = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0)
        return;
      int out = connect_loopback(to_port_);
      if (out < 0) {
        ::close(in);
        continue;
      }
      std::lock_guard<std::mutex> guard{mtx_};
      fds_.push_back(in);
      fds_.push_back(out);
      threads_.emplace_back([this, in, out] { pump(in, out); });
      threads_.emplace_back([this, in, out] { pump(out, in); });
    }
  }

  void pump(int from, int to) {
    char buf[65536];
    for (;;) {
      auto n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0)
        break;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        seen_.append(buf, static_cast<size_t>(n));
      }
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(to, SHUT_WR);
  }

  uint16_t to_port_;
  uint16_t port_ = 0;
  int listener_ = -1;
  std::mutex mtx_;
  std::string seen_;
  std::vector<int> fds_;
  // Only the accepting thread adds to it while it runs.
  std::vector<std::thread> threads_;
};

} // namespace actorflow::testing
