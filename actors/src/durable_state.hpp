#pragma once

// The state of a queue or accumulator of a replicated ps task, kept in a
// variable of its store (issue 31 §1; docs/DESIGN.md, "Replicated queues
// and accumulators"). The variable is replicated like any other, so the
// backup task holds the latest image, and a promoted backup builds the
// queue or accumulator from it. Without CAF: the actors (queue_actor.cpp,
// accumulator_actor.cpp) give durable_replies the write to their
// variable. Not thread-safe: one actor owns each.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"
#include "actorflow/kernels/accumulator_core.hpp"
#include "actorflow/kernels/queue_core.hpp"
#include "applied_tags.hpp"

namespace actorflow {

/// The name of the variable that holds the state of queue or accumulator
/// `name` in its container ("_state/<name>": TF refuses op names that
/// start with "_", so no graph's variable has it).
std::string durable_state_name(const std::string& name);

/// True for such a name.
inline bool is_durable_state_name(const std::string& name) {
  return name.rfind("_state/", 0) == 0;
}

/// A queue's replicated state: its elements (those leased to steps
/// first, in the order they were taken, as they go back to the head when
/// their steps die), whether it is closed, and the applied tags.
struct queue_image {
  std::vector<queue_core::tuple> contents;
  bool closed = false;
  /// Leased elements: a tuple and whether it holds a batch's rows.
  std::vector<std::pair<queue_core::tuple, bool>> leased;
  std::vector<int64_t> tags;
};

/// An accumulator's replicated state: the core's, the applied tags and
/// the results of the last takes by tag (a retried take gets the same
/// gradient).
struct accumulator_image {
  accumulator_core::snapshot_data core;
  std::vector<int64_t> tags;
  std::vector<std::pair<int64_t, tensor>> takes;
};

/// As a 1-D uint8 tensor (the variable's value).
tensor encode_image(const queue_image& x);
tensor encode_image(const accumulator_image& x);

/// DataLoss, naming `what`, for a value that is not such an image
/// (truncated, corrupt, or another kind); `out` is unchanged then.
status decode_image(const tensor& value, const std::string& what,
                    queue_image& out);
status decode_image(const tensor& value, const std::string& what,
                    accumulator_image& out);

/// The replies of a replicated queue or accumulator wait until the image
/// that contains their operation is held (by the variable, which answers
/// once its backup holds it). Without a writer (not replicated) they go
/// at once. Small images pipeline (the variable acknowledges writes in
/// order); while a large one (`coalesce_from` bytes or more) is in
/// flight, the operations that come go together in the next write, which
/// takes the state as it is then (two workers' gradients arriving
/// together cost one image of the sum, not two).
class durable_replies {
public:
  /// Gets the write's status: OK, or why the image is not held (the
  /// replies then carry that error instead of their result).
  using reply = std::function<void(const status&)>;
  /// Writes an image and calls back with its status, once.
  using writer = std::function<void(tensor, std::function<void(status)>)>;

  static constexpr size_t coalesce_from = 64 * 1024;

  void set_writer(writer w) {
    write_ = std::move(w);
  }
  bool replicated() const noexcept {
    return static_cast<bool>(write_);
  }
  /// A reply of the operation that runs now (or of one it completed).
  void defer(reply r) {
    waiting_.push_back(std::move(r));
  }
  /// The operation is done: when it answered something (an operation
  /// completed, so the state may have changed) or `changed` says so,
  /// `image()` is written, now or after the write in flight, and then
  /// the deferred replies go with the write's status. An operation that
  /// only waits writes nothing. Not replicated: the replies go now.
  void commit(std::function<tensor()> image, bool changed = false) {
    if (!write_) {
      release();
      return;
    }
    if (waiting_.empty() && !changed)
      return;
    image_ = std::move(image);
    dirty_ = true;
    for (auto& r : waiting_)
      next_.push_back(std::move(r));
    waiting_.clear();
    if (in_flight_ == 0 || last_size_ < coalesce_from)
      start();
  }
  /// Sends the deferred replies without writing (nothing changed: they
  /// are cancellations).
  void release() {
    auto replies = std::move(waiting_);
    waiting_.clear();
    for (auto& r : replies)
      r(status{});
  }

  /// The actor ends: the deferred replies go as they are, and those
  /// waiting for a write in flight or to come get `why` (the write's
  /// answer would reach an actor that is gone).
  void end(const status& why) {
    release();
    auto next = std::move(next_);
    next_.clear();
    for (auto& r : next)
      r(why);
    auto batches = std::move(in_flight_batches_);
    in_flight_batches_.clear();
    for (auto& [id, batch] : batches)
      for (auto& r : batch)
        r(why);
  }

private:
  void start() {
    ++in_flight_;
    dirty_ = false;
    auto id = next_batch_++;
    in_flight_batches_[id] = std::move(next_);
    next_.clear();
    auto image = image_();
    last_size_ = image.byte_size();
    write_(std::move(image), [this, id](status err) {
      auto i = in_flight_batches_.find(id);
      if (i == in_flight_batches_.end())
        return; // answered by end()
      auto batch = std::move(i->second);
      in_flight_batches_.erase(i);
      for (auto& r : batch)
        r(err);
      --in_flight_;
      if (dirty_ && in_flight_ == 0)
        start();
    });
  }

  writer write_;
  std::function<tensor()> image_;
  std::vector<reply> waiting_;
  /// Replies of operations after the write in flight began.
  std::vector<reply> next_;
  /// The replies each write in flight holds, by its number.
  std::map<uint64_t, std::vector<reply>> in_flight_batches_;
  uint64_t next_batch_ = 0;
  size_t in_flight_ = 0;
  /// The size of the last image written.
  size_t last_size_ = 0;
  /// The state changed since the write in flight took its image.
  bool dirty_ = false;
};

} // namespace actorflow
