#include "fuzz_targets.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/message.hpp>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow::fuzz {

namespace {

/// A system that knows actorflow's types, as a node's does (no
/// middleman: CAF's BASP hands a message's payload to this same
/// deserializer).
caf::actor_system& system_with_types() {
  static auto* cfg = [] {
    auto* c = new caf::actor_system_config;
    c->add_message_types<caf::id_block::actorflow>();
    c->set("scheduler.max-threads", size_t{1});
    return c;
  }();
  static auto* sys = new caf::actor_system{*cfg};
  return *sys;
}

} // namespace

bool fuzz_caf_message(const uint8_t* data, size_t size) {
  auto& sys = system_with_types();
  caf::binary_deserializer source{sys, reinterpret_cast<const char*>(data),
                                  size};
  caf::message msg;
  return !source(msg) && source.remaining() == 0;
}

} // namespace actorflow::fuzz

#ifdef ACTORFLOW_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  actorflow::fuzz::fuzz_caf_message(data, size);
  return 0;
}
#endif
