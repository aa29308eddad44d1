#pragma once

// Tuning knobs read from the environment (ACTORFLOW_*).

#include <cstdint>

namespace actorflow {

/// The number in environment variable `name` if it is within [lo, hi],
/// else `fallback`. Never blocks.
int64_t env_number(const char* name, int64_t lo, int64_t hi,
                   int64_t fallback);

} // namespace actorflow
