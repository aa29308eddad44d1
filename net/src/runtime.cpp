#include "actorflow/net/runtime.hpp"

#include <mutex>

#include "actorflow/actors/type_ids.hpp"

namespace actorflow {

void add_types(caf::actor_system_config& cfg) {
  actorflow::add_types_impl(cfg);
}

void add_options(caf::actor_system_config& cfg) {
  actorflow::add_options_impl(cfg);
}

namespace {

struct default_runtime {
  default_runtime() : sys(init(cfg)) {
    // nop
  }
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_types(cfg);
    add_options(cfg);
    return cfg;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

} // namespace

caf::actor_system& default_system() {
  // Never destroyed: CAF's shutdown waits for (or races with) actors that
  // outlive main, such as a session a user leaked. The OS reclaims it.
  static auto* instance = new default_runtime;
  return instance->sys;
}

} // namespace actorflow
