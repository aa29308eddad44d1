#pragma once

// How a replicated queue or accumulator writes its state
// (durable_state.hpp): an assign to its variable, which answers once its
// backup holds the value. Untagged: the variable must take every image;
// the operations' own tags are inside it.

#include <chrono>

#include "durable_state.hpp"
#include "runtime.hpp"

namespace actorflow {

template <class Self>
durable_replies::writer durable_writer(Self* self, variable_actor var) {
  return [self, var](tensor image, std::function<void(status)> k) {
    // The variable answers within the heartbeat bound (a lost backup
    // fails its waiting writes); the timeout only bounds a bug.
    self
      ->request(var, std::chrono::seconds(30), assign_atom_v,
                std::move(image), false, int64_t{0})
      .then([k](status& err, tensor&) { k(err); },
            [k](caf::error& err) {
              k(to_status(err, "the variable of a replicated state"));
            });
  };
}

} // namespace actorflow
