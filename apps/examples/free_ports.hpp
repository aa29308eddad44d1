#pragma once

// The old name of actorflow/support/free_ports.hpp, for
// test/common/session_util.hpp: the unit tests include it by this name
// (test/CMakeLists.txt), without the apps' library. The code lives there,
// in namespace actorflow::support.

#include "../support/include/actorflow/support/free_ports.hpp"

namespace actorflow {
namespace examples = support;
} // namespace actorflow
