#pragma once

// Private to client/: reaching the master a task publishes (sessions,
// server::join_cluster).

#include <string>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow {

/// The master published at `target` ("caf://host:port", "grpc://..." or
/// "host:port"), within the config's operation timeout (10 s without
/// one). Blocks. Errors (op_error): InvalidArgument for a malformed
/// target, Unavailable naming the address (and a TLS failure) when
/// nothing answers there or nothing is published.
master_actor connect_master(caf::actor_system& sys, const std::string& target,
                            const session_config& config);

} // namespace actorflow
