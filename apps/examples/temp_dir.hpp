#pragma once

// The old name of actorflow/support/temp_dir.hpp, for actorflow-bench
// until its split (elsewhere) includes the new one; the code lives there,
// in namespace actorflow::support.

#include "actorflow/support/temp_dir.hpp"

namespace actorflow {
namespace examples = support;
} // namespace actorflow
