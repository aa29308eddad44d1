#pragma once

// One way to read and write a task's address: "host:port", where the host
// is a name, an IPv4 address or a bracketed IPv6 address ("[::1]:2222").

#include <cstdint>
#include <string>
#include <string_view>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// A parsed "host:port".
struct host_port {
  /// A name, an IPv4 address or an IPv6 address (without brackets).
  std::string host;
  uint16_t port = 0;

  /// Parses `text` into `out`: "host:port" or "[v6]:port", the port a
  /// decimal number in 0..65535. InvalidArgument naming `text` for an empty
  /// host, a missing or bad port, or an IPv6 address without brackets;
  /// `out` is unchanged then. Never throws.
  static status parse(std::string_view text, host_port& out);

  /// "host:port", with brackets around an IPv6 host.
  std::string to_string() const;

  friend bool operator==(const host_port&, const host_port&) = default;
};

/// The host of `address` as host_port::parse reads it (without brackets),
/// or `address` itself when it does not parse (a bare host; a bare
/// bracketed IPv6 address without its brackets).
std::string host_of(std::string_view address);

} // namespace actorflow
