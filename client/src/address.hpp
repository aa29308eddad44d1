#pragma once

// Private to client/: session targets ("caf://host:port"); the address itself
// is actorflow/transport/host_port.hpp's.

#include <string_view>

#include "actorflow/transport/host_port.hpp"

namespace actorflow {

/// Strips a "caf://" or "grpc://" scheme from a session target.
inline std::string_view strip_scheme(std::string_view target) {
  for (std::string_view scheme : {"caf://", "grpc://"})
    if (target.substr(0, scheme.size()) == scheme)
      return target.substr(scheme.size());
  return target;
}

} // namespace actorflow
