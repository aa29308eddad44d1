#pragma once

// Sockets and networks of the integration tests: what a process listens
// on (from /proc), and a network namespace that plays another host.

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "integration_util.hpp"

namespace actorflow::testing {

/// The TCP sockets process `pid` listens on, as (address, port): its
/// sockets' inodes matched in /proc/net/tcp and tcp6 (state 0A = LISTEN).
/// Addresses are numeric ("127.0.0.1", "0.0.0.0", "::", "::1", or the
/// IPv6 form of other addresses in hex).
inline std::set<std::pair<std::string, uint16_t>>
listening_sockets(pid_t pid) {
  std::set<std::string> inodes;
  auto fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator{fd_dir}) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<std::pair<std::string, uint16_t>> result;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in{table};
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
      std::istringstream fields{line};
      std::string sl, local, remote, state, queues, timer, retr, uid,
        timeout, inode;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retr
        >> uid >> timeout >> inode;
      if (state != "0A" || inodes.count(inode) == 0)
        continue;
      auto colon = local.rfind(':');
      auto hex = local.substr(0, colon);
      auto port = static_cast<uint16_t>(
        std::stoul(local.substr(colon + 1), nullptr, 16));
      std::string address;
      if (hex.size() == 8) { // IPv4, little-endian bytes
        auto v = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
        address = std::to_string(v & 0xFF) + "." + std::to_string((v >> 8) & 0xFF)
                  + "." + std::to_string((v >> 16) & 0xFF) + "."
                  + std::to_string(v >> 24);
      } else if (hex == std::string(32, '0')) {
        address = "::";
      } else if (hex == "00000000000000000000000001000000") {
        address = "::1";
      } else {
        address = hex;
      }
      result.emplace(address, port);
    }
  }
  return result;
}

/// The resident memory of `pid` in KiB (VmRSS), -1 if unknown.
inline long rss_kib(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

/// The TCP ports process `pid` listens on.
inline std::set<uint16_t> listening_ports(pid_t pid) {
  std::set<uint16_t> ports;
  for (const auto& [address, port] : listening_sockets(pid))
    ports.insert(port);
  return ports;
}

/// The `ip` command (iproute2), or "" if there is none.
inline std::string ip_path() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0)
      return p;
  return {};
}

/// Another host: a network namespace with one veth pair to this one,
/// 10.211.K.1 on this host's end, 10.211.K.2 in the namespace. Needs
/// root; ok() says whether it could be made, why() why not. Removed with
/// everything in it.
class veth_namespace {
public:
  veth_namespace() {
    auto id = std::to_string(::getpid() % 100000);
    ns_ = "afp" + id;
    host_if_ = "afh" + id;
    ns_if_ = "afn" + id;
    auto k = std::to_string(::getpid() % 250 + 1);
    host_ip_ = "10.211." + k + ".1";
    ns_ip_ = "10.211." + k + ".2";
    ip_ = ip_path();
    if (ip_.empty()) {
      why_ = "no ip command (iproute2)";
      return;
    }
    ok_ = run({"netns", "add", ns_})
          && run({"link", "add", host_if_, "type", "veth", "peer", "name",
                  ns_if_})
          && run({"link", "set", ns_if_, "netns", ns_})
          && run({"addr", "add", host_ip_ + "/24", "dev", host_if_})
          && run({"link", "set", host_if_, "up"})
          && run({"netns", "exec", ns_, ip_, "addr", "add", ns_ip_ + "/24",
                  "dev", ns_if_})
          && run({"netns", "exec", ns_, ip_, "link", "set", ns_if_, "up"})
          && run({"netns", "exec", ns_, ip_, "link", "set", "lo", "up"});
  }
  ~veth_namespace() {
    run({"netns", "del", ns_});
    run({"link", "del", host_if_});
  }
  veth_namespace(const veth_namespace&) = delete;
  veth_namespace& operator=(const veth_namespace&) = delete;
  bool ok() const {
    return ok_;
  }
  const std::string& why() const {
    return why_;
  }
  /// Cuts the link (true) or restores it (false).
  bool cut(bool down) {
    return run({"link", "set", host_if_, down ? "down" : "up"});
  }
  /// The command that runs `argv` inside the namespace.
  std::vector<std::string> inside(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {ip_, "netns", "exec", ns_});
    return argv;
  }
  /// Whether a TCP connection from inside the namespace to host:port is
  /// accepted within 3 s.
  bool reaches(const std::string& host, uint16_t port) const {
    auto r = run_process(
      inside({"timeout", "3", "bash", "-c",
              "exec 3<>/dev/tcp/" + host + "/" + std::to_string(port)}),
      10s);
    return r.status.success();
  }
  const std::string& host_ip() const {
    return host_ip_;
  }
  const std::string& ns_ip() const {
    return ns_ip_;
  }

private:
  bool run(std::vector<std::string> args) {
    if (ip_.empty())
      return false;
    args.insert(args.begin(), ip_);
    auto r = run_process(args, 10s);
    if (!r.status.success() && why_.empty())
      why_ = args[1] + " " + args[2] + ": " + r.err;
    return r.status.success();
  }

  std::string ip_, ns_, host_if_, ns_if_, host_ip_, ns_ip_, why_;
  bool ok_ = false;
};

/// A network namespace playing another host, or nullptr (and a warning
/// saying why the test does not run) when this process is not root or the
/// namespace cannot be made.
inline std::unique_ptr<veth_namespace> make_other_host() {
  if (::geteuid() != 0) {
    WARN("not root: network namespaces cannot be made; not run");
    return nullptr;
  }
  auto net = std::make_unique<veth_namespace>();
  if (!net->ok()) {
    WARN("cannot make a network namespace (" << net->why() << "); not run");
    return nullptr;
  }
  return net;
}

/// Checks what a cluster bound to loopback must show another host: every
/// socket of `pids` listens on a loopback address, and from inside `net`
/// no port of theirs answers at this host's address on the link. A
/// listener of the test's own on every interface does answer there (the
/// control: the probe can see a port that is open to the network).
inline void check_unreachable_from(const veth_namespace& net,
                                   const std::vector<pid_t>& pids) {
  std::set<uint16_t> ports;
  for (auto pid : pids)
    for (const auto& [address, port] : listening_sockets(pid)) {
      INFO("pid " << pid << " listens on " << address << " port " << port);
      CHECK((address.rfind("127.", 0) == 0 || address == "::1"));
      ports.insert(port);
    }
  REQUIRE_FALSE(ports.empty());
  for (auto port : ports) {
    INFO("port " << port);
    CHECK_FALSE(net.reaches(net.host_ip(), port));
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  socklen_t len = sizeof(any);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&any), &len) == 0);
  CHECK(net.reaches(net.host_ip(), ntohs(any.sin_port)));
  ::close(fd);
}

} // namespace actorflow::testing
