#pragma once

// The old name of actorflow/support/local_cluster.hpp, for actorflow-bench
// until its split (elsewhere) includes the new one; the code lives there,
// in namespace actorflow::support.

#include "actorflow/support/local_cluster.hpp"

namespace actorflow {
namespace examples = support;
} // namespace actorflow
