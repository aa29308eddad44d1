#pragma once

// Private to net/: "host:port" parsing shared by servers and sessions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace actorflow {

struct host_port {
  std::string host;
  uint16_t port = 0;
};

/// Parses "host:port" (port 0..65535); nullopt if there is no valid port.
inline std::optional<host_port> parse_address(std::string_view address) {
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0
      || colon + 1 == address.size())
    return std::nullopt;
  uint32_t port = 0;
  for (auto c : address.substr(colon + 1)) {
    if (c < '0' || c > '9')
      return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
    if (port > 65535)
      return std::nullopt;
  }
  return host_port{std::string{address.substr(0, colon)},
                   static_cast<uint16_t>(port)};
}

/// Strips a "caf://" or "grpc://" scheme from a session target.
inline std::string_view strip_scheme(std::string_view target) {
  for (std::string_view scheme : {"caf://", "grpc://"})
    if (target.substr(0, scheme.size()) == scheme)
      return target.substr(scheme.size());
  return target;
}

} // namespace actorflow
