#pragma once

// The replication bookkeeping of one variable, without CAF (issue 31 §1;
// docs/DESIGN.md, "Replicated variables"): its epoch, the sequence
// number of its last write, and the tags of the writes it applied, so
// that a step retried after a failover is applied once. The variable
// actor (variable_actor.cpp) is the thin layer around it. Not thread-safe:
// one actor owns it.

#include <cstdint>
#include <vector>

#include "applied_tags.hpp"

namespace actorflow {

class replica_log {
public:
  static constexpr size_t window = applied_tags::window;

  /// What a backup does with a forwarded write.
  enum class verdict {
    /// The next write: apply it.
    apply,
    /// Already applied (a resent write): acknowledge it, change nothing.
    duplicate,
    /// From an older epoch: its sender was superseded (refuse).
    fenced,
    /// A write is missing before it (refuse: the primary must sync).
    gap,
  };

  int64_t epoch() const noexcept {
    return epoch_;
  }

  /// The sequence number of the last write.
  int64_t seq() const noexcept {
    return seq_;
  }

  /// True if a write with `tag` was applied (tag 0: an untagged write,
  /// never).
  bool seen(int64_t tag) const {
    return tags_.seen(tag);
  }

  /// A write with `tag` was applied (the oldest tag goes beyond the
  /// window).
  void record(int64_t tag) {
    tags_.record(tag);
  }

  /// The remembered tags, oldest first (a new backup's sync carries them).
  std::vector<int64_t> tags() const {
    return tags_.list();
  }

  /// A primary's next write number.
  int64_t next_seq() noexcept {
    return ++seq_;
  }

  /// Whether a backup in its epoch takes write `seq` of `epoch`.
  verdict accept(int64_t epoch, int64_t seq) const noexcept {
    if (epoch < epoch_)
      return verdict::fenced;
    if (epoch > epoch_)
      return verdict::gap; // a primary this backup was not synced with
    if (seq <= seq_)
      return verdict::duplicate;
    return seq == seq_ + 1 ? verdict::apply : verdict::gap;
  }

  /// A backup applied write `seq` (after accept() said apply).
  void accepted(int64_t seq, int64_t tag) {
    seq_ = seq;
    record(tag);
  }

  /// Whether a sync of `epoch` may replace this state (a newer or the
  /// same epoch, never an older one).
  bool may_sync(int64_t epoch) const noexcept {
    return epoch >= epoch_;
  }

  /// The whole state from a primary (a sync): its epoch, last write and
  /// tags.
  void reset(int64_t epoch, int64_t seq, const std::vector<int64_t>& tags) {
    epoch_ = epoch;
    seq_ = seq;
    tags_.assign(tags);
  }

  /// Becomes the primary of `epoch` (a promotion) or joins it as a
  /// primary given a backup; the writes of older epochs are fenced from
  /// now on. Never goes back.
  void enter(int64_t epoch) noexcept {
    if (epoch > epoch_)
      epoch_ = epoch;
  }

private:
  int64_t epoch_ = 0;
  int64_t seq_ = 0;
  applied_tags tags_;
};

} // namespace actorflow
