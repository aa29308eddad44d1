#pragma once

// Private to actors/: actorflow's CAF scheduler (scheduler.cpp).

namespace caf {
class actor_system_config;
} // namespace caf

namespace actorflow {

/// Makes `cfg`'s actor system schedule actors with CAF's work sharing
/// (one central queue), except that a worker that finds no work spins for
/// `actorflow.scheduler-spin` (a timespan) before it sleeps, one worker at
/// a time, and an enqueue wakes a sleeper only when no spinner will take
/// the job. A message an actor sends while no worker spins runs next on
/// the sender's worker (one job per worker; after 16 such jobs in a row
/// it queues like any other). Ignores `scheduler.policy`.
void load_spinning_scheduler(caf::actor_system_config& cfg);

} // namespace actorflow
