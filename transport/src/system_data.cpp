#include "actorflow/transport/system_data.hpp"

#include <map>
#include <mutex>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

namespace actorflow::detail {

namespace {

// CAF 0.17 has no slot for an application's state in actor_system (its
// modules have fixed ids, and an actor kept in the system's registry
// outlives the system's scheduler when the registry is destroyed). So a
// system's data is kept here, by the system's address, and dropped at the
// system's shutdown — before another system could take the same address
// (which would otherwise inherit the entry, and never drop it either):
// when its middleman stops, or, without one, when its config server (an
// internal actor ~actor_system ends) exits.
struct system_entry {
  std::mutex mtx;
  std::map<std::type_index, std::shared_ptr<void>> by_type;
};

struct system_table {
  std::mutex mtx;
  std::unordered_map<const caf::actor_system*, std::shared_ptr<system_entry>>
    by_system;
};

system_table& table() {
  // Never destroyed: CAF's threads may look up during exit.
  static auto* instance = new system_table;
  return *instance;
}

std::shared_ptr<system_entry> entry_of(caf::actor_system& sys) {
  auto& t = table();
  std::shared_ptr<system_entry> entry;
  {
    std::lock_guard<std::mutex> guard{t.mtx};
    auto& slot = t.by_system[&sys];
    if (slot)
      return slot;
    slot = entry = std::make_shared<system_entry>();
  }
  auto drop = [key = &sys, entry] {
    auto& t = table();
    std::lock_guard<std::mutex> guard{t.mtx};
    auto i = t.by_system.find(key);
    if (i != t.by_system.end() && i->second == entry)
      t.by_system.erase(i);
  };
  // The middleman's actor when there is one: its brokers may still ask
  // while it stops, after the internal actors are gone.
  auto handle = sys.has_middleman()
                  ? caf::actor_cast<caf::actor>(sys.middleman().actor_handle())
                  : caf::actor_cast<caf::actor>(sys.config_serv());
  // Outside the lock: the functor runs at once if the actor is gone
  // already (a system shutting down); a middleman that stopped has no
  // actor left at all, nor a system past its internal actors' exit (an
  // actor cleaning up after it asked): then the entry is not kept either.
  if (handle)
    handle->attach_functor(std::move(drop));
  else
    drop();
  return entry;
}

} // namespace

std::shared_ptr<void> system_data_impl(caf::actor_system& sys,
                                       std::type_index type,
                                       std::shared_ptr<void> (*make)()) {
  auto entry = entry_of(sys);
  std::lock_guard<std::mutex> guard{entry->mtx};
  auto& slot = entry->by_type[type];
  if (!slot)
    slot = make();
  return slot;
}

} // namespace actorflow::detail
