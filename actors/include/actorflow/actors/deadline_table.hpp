#pragma once

// Deadlines of an actor's outstanding requests, checked by one timer
// message at a time.
//
// CAF 0.17's per-request timeouts (request(dest, timeout, ...)) insert
// into its clock thread's schedule when sent and erase from it when
// answered, waking that thread both times: on a 2-core VM that doubled
// the cost of a trivial step (~12 -> ~25 us). With this table an actor
// sends its requests without a CAF timeout, records their deadlines here,
// and keeps at most one check message to itself in flight; since steps
// usually carry the same timeout, that is one timer per timeout period
// instead of two clock wake-ups per request. Not thread-safe: the owning
// actor's state.

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>
#include <vector>

namespace actorflow {

template <class Key>
class deadline_table {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;
  using duration = clock_type::duration;

  /// Records `key`'s deadline. Returns the delay after which the owner
  /// sends itself a check message, or nullopt when a check already in
  /// flight comes first.
  std::optional<duration> add(const Key& key, time_point deadline,
                              time_point now) {
    deadlines_[key] = deadline;
    if (armed_ && *armed_ <= deadline)
      return std::nullopt;
    armed_ = deadline;
    return std::max(deadline - now, duration::zero());
  }

  /// Forgets `key` (answered in time).
  void erase(const Key& key) {
    deadlines_.erase(key);
  }

  /// On a check message: removes and returns the keys whose deadline has
  /// passed. Sets `rearm` to the delay of the next check when one is
  /// needed and none is in flight for it.
  std::vector<Key> expire(time_point now, std::optional<duration>& rearm) {
    if (armed_ && *armed_ <= now)
      armed_.reset();
    std::vector<Key> expired;
    std::optional<time_point> next;
    for (auto i = deadlines_.begin(); i != deadlines_.end();) {
      if (i->second <= now) {
        expired.push_back(i->first);
        i = deadlines_.erase(i);
      } else {
        if (!next || i->second < *next)
          next = i->second;
        ++i;
      }
    }
    rearm.reset();
    if (next && (!armed_ || *next < *armed_)) {
      armed_ = next;
      rearm = *next - now;
    }
    return expired;
  }

  size_t size() const noexcept {
    return deadlines_.size();
  }

private:
  std::unordered_map<Key, time_point> deadlines_;
  /// The earliest check message in flight.
  std::optional<time_point> armed_;
};

} // namespace actorflow
