#pragma once

// The tags of the writes or operations applied, in a bounded window
// (issue 31 §1): a step retried after a failover carries the same tags,
// so it is applied once. Used by replica_log (variables) and the
// replicated queues and accumulators (durable_state.hpp). Not
// thread-safe: one actor owns each.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

namespace actorflow {

class applied_tags {
public:
  /// How many it remembers: a retry comes within its step's deadline,
  /// while a few thousand other writes at most reach the same actor.
  static constexpr size_t window = 4096;

  /// True for a tag recorded before (tag 0: untagged, never).
  bool seen(int64_t tag) const {
    return tag != 0 && set_.count(tag) > 0;
  }

  /// Remembers `tag` (0 never); the oldest goes beyond the window.
  void record(int64_t tag) {
    if (tag == 0 || !set_.insert(tag).second)
      return;
    order_.push_back(tag);
    if (order_.size() > window) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }

  /// Oldest first.
  std::vector<int64_t> list() const {
    return {order_.begin(), order_.end()};
  }

  /// Replaces what it remembers (a sync or an image).
  void assign(const std::vector<int64_t>& tags) {
    set_.clear();
    order_.clear();
    for (auto t : tags)
      record(t);
  }

private:
  std::unordered_set<int64_t> set_;
  std::deque<int64_t> order_;
};

} // namespace actorflow
