#pragma once

// A scratch directory for tests that read or write files (shared with the
// apps: apps/examples/temp_dir.hpp).

#include "../../apps/examples/temp_dir.hpp"

namespace actorflow::testing {

using examples::temp_dir;

} // namespace actorflow::testing
