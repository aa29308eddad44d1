#pragma once

// Threads that run actors themselves (transport/src/scheduler.cpp).

#include <functional>

namespace caf {
class actor_system;
} // namespace caf

namespace actorflow {

/// Calls `start`, which sends messages to actors of `sys`, then runs
/// `sys`'s actors on the calling thread until `done()` holds, waiting for
/// work in between. The jobs `start` makes runnable wake no worker, and
/// while this thread waits, an actor made runnable by another thread (a
/// reply from the network) wakes this thread before any sleeping worker:
/// a request and its reply cost no hand-over to a scheduler thread. Blocks
/// until `done()` holds: whatever makes it true must then call
/// notify_actor_helpers. Returns false at once, calling neither, when
/// `sys` does not run actorflow's scheduler (an application chose one of
/// CAF's policies) or when the calling thread runs actors already (a
/// scheduler thread, e.g. a blocking call from inside an actor, or a
/// thread in run_actors_until).
bool run_actors_until(caf::actor_system& sys,
                      const std::function<void()>& start,
                      const std::function<bool()>& done);

/// Calls `start`, which sends a message to an actor of `sys`, then runs
/// on the calling thread the actor that message made runnable and the
/// chain of actors that one makes runnable in turn (as a scheduler thread
/// would, without waking one), and returns when the chain ends. For
/// threads of the caller's own that receive from the network (the tensor
/// channel's readers): the receiving thread is awake already, a scheduler
/// thread would have to be woken. Blocks for as long as the actors run.
/// `go_on`, when given, is asked before each job after the first: false
/// leaves the rest of the chain to the scheduler's threads (the caller
/// has other work waiting, e.g. more frames on its socket). Only `start`
/// runs when `sys` does not run actorflow's scheduler, when it is
/// stopping, or when the calling thread runs actors already. `sys` does
/// not finish stopping while a thread is in here.
void run_actors_after(caf::actor_system& sys,
                      const std::function<void()>& start,
                      const std::function<bool()>& go_on = {});

/// Wakes the threads waiting in run_actors_until on `sys` so that they
/// check their `done()` again. Cheap when none waits.
void notify_actor_helpers(caf::actor_system& sys);

} // namespace actorflow
