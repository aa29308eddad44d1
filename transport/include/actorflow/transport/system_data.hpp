#pragma once

// State that belongs to one actor system: the tensor channel's listeners,
// inboxes and links, a system's TLS setup, the destinations of chunked
// tensors, the cells of its variables. Two actor systems in one process
// (an application's own beside actorflow's default, or several in-process
// tasks) never share it.

#include <memory>
#include <typeindex>

#include <caf/fwd.hpp>

namespace actorflow {

/// The `T` of `sys`, value-initialized on first use. `sys` keeps it until
/// its shutdown (its middleman's stop, or without one its internal
/// actors' exit); it goes then, or later, when the last holder
/// of the returned pointer lets go (a detached thread that still serves
/// it). Thread-safe; takes short locks (never waits on anything else).
/// Cheap but not free: callers on a per-message path keep the pointer.
template <class T>
std::shared_ptr<T> system_data(caf::actor_system& sys);

namespace detail {

std::shared_ptr<void> system_data_impl(caf::actor_system& sys,
                                       std::type_index type,
                                       std::shared_ptr<void> (*make)());

} // namespace detail

template <class T>
std::shared_ptr<T> system_data(caf::actor_system& sys) {
  auto make = []() -> std::shared_ptr<void> { return std::make_shared<T>(); };
  return std::static_pointer_cast<T>(
    detail::system_data_impl(sys, typeid(T), make));
}

} // namespace actorflow
