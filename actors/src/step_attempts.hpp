#pragma once

// Private to actors/: the pending attempts of a resource actor (a queue's
// waiting dequeues and enqueues, an accumulator's waiting takes) by the
// step that made them, so that cancelling a step cancels exactly its
// attempts. No CAF.

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace actorflow {

template <class Id>
class step_attempts {
public:
  /// Attempt `id` of `step` waits.
  void add(int64_t step, Id id) {
    by_step_[step].push_back(id);
  }

  /// Attempt `id` of `step` completed: nothing to cancel any more.
  void forget(int64_t step, Id id) {
    auto i = by_step_.find(step);
    if (i == by_step_.end())
      return;
    std::erase(i->second, id);
    if (i->second.empty())
      by_step_.erase(i);
  }

  /// The attempts of `step`, which no longer count as waiting here.
  std::vector<Id> take(int64_t step) {
    auto i = by_step_.find(step);
    if (i == by_step_.end())
      return {};
    auto ids = std::move(i->second);
    by_step_.erase(i);
    return ids;
  }

  void clear() {
    by_step_.clear();
  }

private:
  std::unordered_map<int64_t, std::vector<Id>> by_step_;
};

} // namespace actorflow
