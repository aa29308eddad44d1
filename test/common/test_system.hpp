#pragma once

// The actor system of the actors layer's tests: one for the whole binary
// (the actors layer has no default_system; that lives in client/), with
// actorflow's types and options. Never destroyed, as default_system.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow::testing {

/// `cfg` for a system under CAF's deterministic test coordinator
/// (caf/scheduler/test_coordinator.hpp): nothing runs until the test runs
/// it. Before actorflow's options, which pick their own scheduler unless
/// one is set. actorflow's types without CAF's middleman (add_types_impl
/// loads it): its network thread and detached actor would enqueue into
/// the test coordinator, which only the test's thread may touch (under
/// load that race hung or crashed about one run in a hundred). In-process
/// actors need no network.
inline caf::actor_system_config& deterministic(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.inline-output", true);
  cfg.add_message_types<caf::id_block::actorflow>();
  add_options_impl(cfg);
  return cfg;
}

/// A fixture's actor system under the test coordinator (deterministic()):
/// nothing runs until the test runs it, and time moves only when the test
/// moves it. `configure`, when given, sets options first.
class coordinated_system {
public:
  explicit coordinated_system(
    void (*configure)(caf::actor_system_config&) = nullptr)
    : sys_(init(cfg_, configure)),
      sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())) {
  }

  /// Runs jobs until none is left; time does not move.
  void drain() {
    while (sched_.try_run_once()) {
      // next
    }
  }

protected:
  static caf::actor_system_config&
  init(caf::actor_system_config& cfg,
       void (*configure)(caf::actor_system_config&)) {
    if (configure != nullptr)
      configure(cfg);
    return deterministic(cfg);
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
};

inline caf::actor_system& test_system() {
  struct holder {
    holder() : sys(init(cfg)) {
      // nop
    }
    static caf::actor_system_config& init(caf::actor_system_config& cfg) {
      add_types_impl(cfg);
      add_options_impl(cfg);
      return cfg;
    }
    caf::actor_system_config cfg;
    caf::actor_system sys;
  };
  static auto* instance = new holder;
  return instance->sys;
}

} // namespace actorflow::testing
