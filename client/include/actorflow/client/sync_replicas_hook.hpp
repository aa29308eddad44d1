#pragma once

#include <memory>

#include "actorflow/graph/training.hpp"
#include "actorflow/client/session_run_hook.hpp"

namespace actorflow {

/// TF's `SyncReplicasOptimizer.make_session_run_hook(is_chief,
/// num_tokens)`: after every session creation (the first and each one
/// after a lost ps), sets this worker's local step to the global step; the
/// chief also sets the accumulators' global step, enqueues `num_tokens`
/// tokens (-1: replicas_to_aggregate) and starts the chief queue runner
/// on the session's coordinator. Unlike TF, the chief sets its own local
/// step too, so its first gradients after a restore are not stale.
///
/// With `release_tokens_at_end`, end() enqueues total_num_replicas tokens,
/// so that workers still training do not wait for updates this worker's
/// gradients would have completed (TF leaves that to the program).
///
/// `opt` must outlive the hook; its train op must be built before begin()
/// (which throws the optimizer's InvalidArgument otherwise).
std::shared_ptr<session_run_hook>
make_sync_replicas_hook(sync_replicas_optimizer& opt, bool is_chief,
                        int num_tokens = -1,
                        bool release_tokens_at_end = false);

} // namespace actorflow
