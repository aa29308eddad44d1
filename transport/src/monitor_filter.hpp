#pragma once

// Private to transport/: what a peer with a `monitor` certificate may send
// over a CAF connection (issue 30 §3). CAF 0.17 delivers a BASP message to
// whatever actor id (or registered name) its header names, and an actor
// cannot tell which connection a message came over; so the connection
// itself is filtered, deny by default, before BASP sees the bytes:
//
// - its client handshake (first: a monitor dials in) and heartbeats pass,
//   and so does the proxy bookkeeping (monitor and down messages) for its
//   own node, the one its handshake named (a down message for another
//   node would end this node's proxies of that node's actors), and what
//   CAF's spawn servers say to each other when two nodes meet (an info
//   request by name, "SpawnServ", and its answer);
// - a direct message passes only if its receiver is an actor id the
//   process opened to monitors (allow_monitors, transport.hpp), it has no
//   forwarding stages, and its first element is one of the atoms allowed
//   for that actor (the task's get_mon and get_stats; its monitor's
//   subscribe, ping, snapshot and trace requests);
// - anything else (a routed message, which names its own source node; any
//   other receiver by name, or a spawn request; a message to any other
//   actor; an exit message) ends the connection.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow::transport_detail {

/// The actors of one system that monitors may reach, with the atoms each
/// accepts from them (system_data). Thread-safe: actors add, the network
/// thread reads.
class monitor_access {
public:
  void allow(uint64_t actor, std::vector<uint64_t> atoms);

  /// Whether `atom` may be sent to `actor` by a monitor.
  bool permits(uint64_t actor, uint64_t atom) const;

private:
  mutable std::mutex mtx_;
  std::map<uint64_t, std::vector<uint64_t>> allowed_;
};

/// One monitor connection's reads, in the order BASP asks for them: a
/// header, then its payload when it announces one. Used by the network
/// thread that owns the connection.
class monitor_filter {
public:
  explicit monitor_filter(std::shared_ptr<const monitor_access> access)
    : access_(std::move(access)) {
    // nop
  }

  /// Checks the next read, `size` bytes BASP asked for. "" to deliver it,
  /// else why the connection must close; after a refusal every read is
  /// refused.
  std::string check(const char* data, size_t size);

  /// Whether a read was refused (and every later one is).
  bool refused() const noexcept {
    return !refused_.empty();
  }

private:
  std::string check_header(const char* data, size_t size);
  std::string check_message(const char* data, size_t size);

  std::shared_ptr<const monitor_access> access_;
  // The header whose payload comes next (payload_ > 0).
  // The node its handshake named, as CAF serialized it.
  bool greeted_ = false;
  std::string node_;
  uint8_t operation_ = 0;
  bool by_name_ = false;
  uint64_t dest_ = 0;
  uint32_t payload_ = 0;
  std::string refused_;
};

} // namespace actorflow::transport_detail
