#pragma once

// The actor system of the actors layer's tests: one for the whole binary
// (the actors layer has no default_system; that lives in client/), with
// actorflow's types and options. Never destroyed, as default_system.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow::testing {

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
