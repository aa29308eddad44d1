#pragma once

// A scratch directory for tests that read or write files: the apps' own
// (header-only, so the unit tests need not link the apps' library).

#include "../../apps/support/include/actorflow/support/temp_dir.hpp"

namespace actorflow::testing {

using support::temp_dir;

} // namespace actorflow::testing
