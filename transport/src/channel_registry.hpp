#pragma once

// Private to transport/: what the tensor channel's two halves share. The
// sending half (links, the API) is tensor_channel.cpp; the receiving half
// (listeners and one reading thread per incoming connection) is
// channel_reader.cpp.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <caf/fwd.hpp>
#include <caf/weak_intrusive_ptr.hpp>

#include "connection_guard.hpp"
#include "tls_socket.hpp"

namespace actorflow::tensor_channel {

class link;

// Data below this goes through the socket: a copy of it there costs
// about what a copy into the ring does.
inline constexpr uint64_t ring_min_data = 16 << 10;
// Each incoming connection is a thread: a bound on what peers can open.
inline constexpr size_t max_incoming = 256;

/// The guard of a system's channel listeners: its limits, with at most
/// max_incoming connections.
std::shared_ptr<connection_guard> channel_guard(caf::actor_system& sys);
inline constexpr int connect_timeout_ms = 5000;

// This process's totals (channel_info.hpp), over every actor system.
inline std::atomic<uint64_t> n_fallbacks{0};
inline std::atomic<uint64_t> n_messages{0};
inline std::atomic<uint64_t> n_ring_frames{0};
inline std::atomic<uint64_t> n_tensor_frames{0};
inline std::atomic<uint64_t> n_socket_bytes{0};
inline std::atomic<uint64_t> n_ring_bytes{0};

// Microseconds since the epoch, as the monitor reports times.
inline int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

inline void close_fd(int fd) {
  if (fd >= 0)
    ::close(fd);
}

// The counters of one incoming connection (link_stats).
struct incoming_stat {
  std::string peer;
  int64_t since_us = wall_us();
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> frames{0};
  std::atomic<int64_t> last_us{0};
  // The task the peer says it is (its link's sender frame), under the
  // registry's lock.
  std::string peer_name;
};

// The channel of one actor system (system_data.hpp): its listeners, the
// inboxes of its executors and masters, its links to other processes.
// Its listeners' threads hold it too, so it outlives the system while
// they serve.
struct channel_registry {
  std::mutex mtx;
  std::vector<std::shared_ptr<incoming_stat>> incoming_stats;
  // The listener's port by the host it is bound to (and its TLS); 0:
  // binding failed.
  std::map<std::string, uint16_t> ports;
  std::unordered_map<uint64_t, caf::weak_actor_ptr> inboxes;
  uint64_t next_inbox = 1;
  std::map<std::string, std::shared_ptr<link>> links;
  // The task behind an inbox's "host:port" (name_peer), for link_stats,
  // and when it was given: a name with no link to its address is
  // forgotten after a while (link_stats), and there are at most 64 more
  // names than links.
  struct peer_name {
    std::string task;
    int64_t given_us = 0;
  };
  std::map<std::string, peer_name> names;
  // The task this system serves (name_self): its links say it to their
  // peers.
  std::string self_name;
  // Admits incoming connections (at most max_incoming: each is a thread),
  // bounds their handshake and stalled frames and the bytes announced;
  // made with the first listener.
  std::shared_ptr<connection_guard> guard;
};

// Binds a listener for `reg` on `host`, port 0, and serves it on a thread
// of its own (with TLS when `sec` is set); its port, or 0 (and why on
// stderr) if it cannot. Blocks for the name lookup and bind().
uint16_t listen_on(const std::string& host,
                   const tls_socket::security_ptr& sec,
                   std::shared_ptr<channel_registry> reg);

} // namespace actorflow::tensor_channel
