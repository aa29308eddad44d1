#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/graph/training.hpp"
#include "actorflow/client/session.hpp"
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

/// Which replicas a synchronous update waits for: those of `replicas`
/// (task names, "/job:worker/replica:0/task:1") that have sent no gradient
/// for the step `opt`'s accumulators are at, as the accumulators tell
/// (sync_replicas_optimizer::accumulator_replicas, run with `sess`).
/// "waiting for gradients from /job:worker/replica:0/task:1: none for
/// 8.0 s (its last for global step 41); the update at global step 42 has
/// 1 of 2 gradients"; with several, each in parentheses; a replica that
/// never sent says "none received". "" if every one of `replicas` has sent: the wait is
/// not theirs. A step that timed out in synchronous training says with it
/// whom it waited for (actorflow-train does). Throws the run's op_error
/// (the accumulators' task unreachable, say): the caller's own error then
/// says more. Blocks for one run of at most `timeout_ms`.
std::string sync_replicas_waiting_for(session& sess,
                                      const sync_replicas_optimizer& opt,
                                      const std::vector<std::string>& replicas,
                                      int64_t timeout_ms = 5000);

} // namespace actorflow
