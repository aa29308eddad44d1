#pragma once

// Helpers for tests that run sessions.

#include "actorflow/actors/messages.hpp"

namespace actorflow::testing {

/// A session config whose steps cannot wait forever: a broken step fails
/// the test instead of hanging it until the runner's timeout.
inline session_config bounded() {
  session_config config;
  config.operation_timeout_in_ms = 30000;
  return config;
}

} // namespace actorflow::testing
