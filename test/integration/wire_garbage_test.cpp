// Bad input on the wire never crashes a node: random bytes, truncated
// frames, huge length prefixes and valid-looking frames with inconsistent
// sizes, sent to every port a node listens on (CAF's and the tensor
// channel's), leave it alive, its variables unchanged, and a real session
// working.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actorflow/graph/wire.hpp"
#include "integration_util.hpp"
#include "net_util.hpp"
#include "tensor_frame.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// Connects to 127.0.0.1:port, sends `bytes`, reads what comes back for up
/// to 200 ms and closes. False if the connection was refused.
bool send_garbage(uint16_t port, const std::string& bytes) {
  int fd = connect_loopback(port);
  if (fd < 0)
    return false;
  timeval tv{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  char sink[4096];
  while (::recv(fd, sink, sizeof(sink), 0) > 0) {
    // drain
  }
  ::close(fd);
  return true;
}

/// As CAF writes integers (network byte order).
std::string be32(uint32_t x) {
  return {static_cast<char>(x >> 24), static_cast<char>(x >> 16),
          static_cast<char>(x >> 8), static_cast<char>(x)};
}

/// A tensor channel frame prefix for inbox 1, step 1.
std::string prefix(uint32_t key_len, uint32_t head_len, uint32_t flags,
                   uint64_t data_len) {
  std::string out;
  byte_writer w{out};
  tensor_channel::write_prefix(w, 1, 1, key_len, head_len, flags, data_len);
  return out;
}

} // namespace

TEST_CASE("wire: garbage on a node's ports leaves it alive, its variables "
          "unchanged and sessions working",
          "[wire][security]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable v;
  {
    device_scope on_ps{"/job:ps/task:0"};
    v = variable{tensor::scalar(41.0f), named("v")};
  }
  output doubled;
  {
    device_scope on_worker{"/job:worker/task:0"};
    doubled = v.value() * 2.0f;
  }
  session sess{nodes.target("worker", 0), bounded(), &g};
  sess.run(v.initializer());
  // A step that moves v from the ps to the worker: the tensor channel
  // listens by now.
  CHECK(sess.run(doubled).scalar_value<float>() == 82.0f);

  const std::string hello{tensor_channel::hello, sizeof(tensor_channel::hello)};
  tensor matrix{dtype::float32, tensor_shape{3, 4}};
  auto header = tensor_header_bytes(matrix);
  std::mt19937 gen{20261125};
  std::uniform_int_distribution<int> byte{0, 255};
  auto random_bytes = [&](size_t n) {
    std::string out(n, '\0');
    for (auto& c : out)
      c = static_cast<char>(byte(gen));
    return out;
  };
  std::vector<std::pair<std::string, std::string>> attacks{
    {"random bytes", random_bytes(4096)},
    {"random bytes after the hello", hello + random_bytes(4096)},
    {"a truncated prefix", hello + prefix(4, 0, 0, 0).substr(0, 17)},
    {"a truncated frame",
     hello + prefix(8, static_cast<uint32_t>(header.size()), 0, 48) + "key"},
    {"a huge key", hello + prefix(0xFFFFFFFF, 0, 0, 0)},
    {"a huge head",
     hello + prefix(3, 0xFFFFFFF0, tensor_channel::flag_encoded, 0) + "key"},
    {"huge data", hello + prefix(3, static_cast<uint32_t>(header.size()), 0,
                                 uint64_t{1} << 62)
                    + "key" + header},
    {"data shorter than the header says",
     hello + prefix(3, static_cast<uint32_t>(header.size()), 0, 5) + "key"
       + header + "12345"},
    {"a message frame with a bad body",
     hello + prefix(9, 16, tensor_channel::flag_message, 0) + "run_graph"
       + random_bytes(16)},
    {"a ring offer of a path that is not a ring",
     hello + prefix(11, 0, tensor_channel::flag_ring_offer, 1 << 20)
       + "/etc/passwd"},
    {"unknown flags", hello + prefix(3, 0, 0x80, 0) + "key"},
    // CAF's BASP: a header announcing 64 KiB of payload, then random
    // bytes. Not 2 GiB: CAF 0.17 allocates whatever a header announces
    // (docs/DESIGN.md, Departures and limits).
    {"a BASP header and a short payload",
     std::string(1, '\x01') + random_bytes(3) + be32(64 << 10)
       + random_bytes(64)},
  };

  auto check_alive = [&](const std::string& what) {
    INFO("after " << what);
    REQUIRE(nodes.process("ps", 0).running());
    REQUIRE(nodes.process("worker", 0).running());
  };
  // CAF 0.17 allocates whatever payload a BASP header announces (bytes
  // 4-7, big-endian; docs/DESIGN.md, Departures and limits), and CAF
  // listens on two ports: the one the node publishes and the ephemeral
  // one middleman.enable-automatic-connections opens, which looks like the
  // tensor channel's from here. So every garbage that is not a tensor
  // channel frame (those start with the hello, never a BASP operation)
  // announces at most 64 KiB, on every port: one of the random connections
  // below is a valid server handshake announcing 2 GiB, which on the
  // automatic-connections port stalled the ps's middleman for seconds,
  // past the 4 s connection timeout, and the worker lost its link to it.
  auto for_caf = [&hello](std::string bytes) {
    if (bytes.size() >= 6 && bytes.rfind(hello, 0) != 0)
      bytes[4] = bytes[5] = '\0';
    return bytes;
  };
  for (const auto& [job, task] : {std::pair{"ps", 0}, std::pair{"worker", 0}}) {
    auto ports = listening_ports(nodes.process(job, task).pid());
    const auto& address = nodes.address(job, task);
    auto caf_port = static_cast<uint16_t>(
      std::stoi(address.substr(address.rfind(':') + 1)));
    INFO(job << " listens on " << ports.size() << " ports");
    // CAF's port and the tensor channel's.
    CHECK(ports.count(caf_port) == 1);
    CHECK(ports.size() >= 2);
    for (auto port : ports) {
      for (const auto& [what, bytes] : attacks) {
        INFO(job << " port " << port << ": " << what);
        CHECK(send_garbage(port, for_caf(bytes)));
        check_alive(what);
      }
      // And many connections at once, each with a little garbage.
      for (int i = 0; i < 20; ++i)
        send_garbage(port,
                     for_caf(random_bytes(static_cast<size_t>(1 + i * 37))));
      check_alive("20 connections of random bytes");
    }
  }
  // Nothing changed, and the cluster still runs steps, through the same
  // session and a new one.
  CHECK(sess.run(v).scalar_value<float>() == 41.0f);
  CHECK(sess.run(doubled).scalar_value<float>() == 82.0f);
  session fresh{nodes.target("worker", 0), bounded(), &g};
  CHECK(fresh.run(doubled).scalar_value<float>() == 82.0f);
}
