#pragma once

// The state machine behind FIFOQueue, PaddingFIFOQueue and
// RandomShuffleQueue, with TensorFlow's semantics (core/kernels/queue_base.cc,
// fifo_queue.cc, padding_fifo_queue.cc, random_shuffle_queue_op.cc).
//
// The core never blocks: an operation that has to wait becomes a *pending
// attempt* stored inside the core, and its callback fires during a later call
// (enqueue, dequeue, close, cancel) that lets it make progress. It has no
// locks and no threads, so it belongs to exactly one owner, e.g. one actor.
// Callbacks run after the core's state is consistent and may call back into
// the core, but must not destroy it.

#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

namespace actorflow {

enum class queue_kind { fifo, padding_fifo, random_shuffle };

/// TensorFlow's class name of a queue kind: "FIFOQueue", "PaddingFIFOQueue",
/// "RandomShuffleQueue".
std::string_view to_string(queue_kind kind);

struct queue_options {
  queue_kind kind = queue_kind::fifo;
  /// Resource name used in messages, e.g. "fifo_queue".
  std::string name;
  /// Negative means unbounded (INT32_MAX).
  int32_t capacity = -1;
  /// Component dtypes (at least one).
  std::vector<dtype> types;
  /// Empty means unknown shapes; otherwise one shape per component. FIFO and
  /// RandomShuffle need fully defined shapes, Padding allows -1 dims.
  std::vector<tensor_shape> shapes;
  /// RandomShuffle only: dequeues wait while size <= this (unless closed).
  int32_t min_after_dequeue = 0;
  /// RandomShuffle only; (0, 0) picks a nondeterministic seed.
  int64_t seed = 0;
  int64_t seed2 = 0;
};

/// Checks options as TensorFlow's Python constructors and kernels do; every
/// failure is InvalidArgument:
/// - no component types;
/// - shapes count differs from types count ("Queue shapes must have the same
///   length as dtypes"; Padding: "Shapes must be provided for all
///   components, but received 2 dtypes and 1 shapes.");
/// - FIFO/RandomShuffle shape not fully defined ("All shapes must be fully
///   defined: [?]"); Padding without shapes ("When providing partial shapes,
///   a list of shapes must be provided.") or with an unknown-rank shape;
/// - RandomShuffle: "min_after_dequeue -1 must be >= 0",
///   "min_after_dequeue 5 must be < capacity 5".
status validate(const queue_options& opts);

/// Checks that a `shared_name` lookup may reuse `existing` for `requested`
/// (InvalidArgument otherwise), in TF's order: kind ("Shared queue 'q' has
/// type 'FIFOQueue' that does not match type of Node 'q':
/// PaddingFIFOQueue"), capacity ("Shared queue 'q_a' has capacity 10 but
/// requested capacity was 15"), RandomShuffle min_after_dequeue and seeds
/// (seeds only when the requested ones are not (0, 0)), component types
/// ("... has component types float but requested component types were
/// int32") and shapes ("... has component shapes [] but requested component
/// shapes were [[1,1,2,3]]"; equal for FIFO/RandomShuffle, compatible for
/// Padding).
status check_compatible(const queue_options& existing,
                        const queue_options& requested);

class queue_core {
public:
  using tuple = std::vector<tensor>;
  /// Called exactly once per attempt: during the call that created the
  /// attempt if it finishes at once, else during a later call on the core.
  /// The tuple is empty unless a dequeue succeeded.
  using done_fn = std::function<void(status, tuple)>;
  using attempt_id = uint64_t;

  /// `opts` must pass `validate`; an unbounded capacity becomes INT32_MAX.
  explicit queue_core(queue_options opts);

  /// Fails every pending attempt with Cancelled, so no callback is lost.
  ~queue_core();

  queue_core(const queue_core&) = delete;
  queue_core& operator=(const queue_core&) = delete;

  /// Adds one element. An invalid tuple fails at once with InvalidArgument
  /// ("Wrong number of components in tuple. Expected 2, got 1", "Type
  /// mismatch in tuple component 0. Expected float, got int32", "Shape
  /// mismatch in tuple component 1. Expected [3,3], got [3,4]") and leaves
  /// the queue unchanged. Otherwise waits (behind earlier enqueues) until
  /// size < capacity. Fails with Cancelled "<Type> '<name>' is closed." if
  /// the queue is closed when its turn comes.
  attempt_id enqueue(tuple values, done_fn done);

  /// Adds the rows of `batches` (sliced along dim 0) one by one as space
  /// frees up, so other producers' elements and dequeues may interleave.
  /// Validates like `enqueue` with the batch dim included ("Expected
  /// [2,3,3], got [2,3,4]"; without shapes: "All input tensors must have the
  /// same size in the 0th dimension. Component 1 has 2, and should have 3").
  /// A batch of 0 succeeds at once, even on a closed queue. Rows already
  /// inserted stay if the queue is closed (with cancel) midway.
  attempt_id enqueue_many(tuple batches, done_fn done);

  /// Removes one element (the oldest; RandomShuffle: a random one). Waits
  /// while empty (RandomShuffle: while size <= min_after_dequeue, unless
  /// closed). On a closed, empty queue fails with OutOfRange "<Type>
  /// '<name>' is closed and has insufficient elements (requested 1, current
  /// size 0)".
  attempt_id dequeue(done_fn done);

  /// Removes n elements and stacks them into [n]+shape tensors (Padding: each
  /// -1 dim becomes the batch maximum, filled with 0, "" or false). Needs
  /// shapes unless Padding (InvalidArgument "<Type>'s DequeueMany and
  /// DequeueUpTo require the components to have specified shapes."); n < 0
  /// gives InvalidArgument "DequeueManyOp requested n < 0 elements"; n == 0
  /// returns [0]+shape tensors at once. While waiting at the head it takes
  /// elements as they arrive (so capacity does not limit n). If the queue
  /// closes first, the taken elements go back to the front in order and it
  /// fails with OutOfRange "<Type> '<name>' is closed and has insufficient
  /// elements (requested n, current size m)".
  attempt_id dequeue_many(int64_t n, done_fn done);

  /// Like `dequeue_many` ("DequeueUpToOp requested n < 0 elements"), but a
  /// closed queue with 0 < size < n yields the remaining elements. A closed
  /// empty queue fails with OutOfRange once no enqueue is pending.
  attempt_id dequeue_up_to(int64_t n, done_fn done);

  /// cancel_pending_enqueues == false: queued behind the pending enqueues;
  /// when its turn comes it closes the queue (then waiting dequeues fail or
  /// drain), or fails with Cancelled "Queue '<name>' is already closed."
  /// cancel_pending_enqueues == true: closes at once, fails every pending
  /// enqueue (and pending plain close) with Cancelled "Enqueue operation was
  /// cancelled", and always succeeds.
  attempt_id close(bool cancel_pending_enqueues, done_fn done);

  /// Fails a pending attempt with Cancelled ("Enqueue operation was
  /// cancelled" / "Dequeue operation was cancelled"). No element is lost: a
  /// partially assembled dequeue_many puts its elements back at the front in
  /// order; a partially done enqueue_many keeps the rows it inserted. No-op
  /// for an unknown or finished attempt.
  void cancel(attempt_id id);

  /// Puts elements a dequeue took back at the front, in order (their
  /// step ended while the dequeue completed, so nobody received them):
  /// one element, or with `batched` the rows of a dequeue_many result
  /// (padded rows stay padded). Ignores capacity and the closed flag, as
  /// the elements were already in the queue; waiting dequeues may take
  /// them at once.
  void put_back(tuple values, bool batched);

  /// Cancels every pending attempt, dequeues first so that their elements
  /// are back before anything else runs (session closed / container reset).
  /// Each gets `why`, or when it is OK Cancelled "Dequeue (Enqueue)
  /// operation was cancelled".
  void cancel_all(const status& why = {});

  /// Number of stored elements (not counting those held by a partially
  /// assembled dequeue_many).
  int32_t size() const;

  bool is_closed() const;

  /// Number of attempts still waiting.
  size_t pending() const;
  /// Of those, the enqueues (a full queue) and the dequeues (too few
  /// elements).
  size_t pending_enqueues() const;
  size_t pending_dequeues() const;

  const queue_options& options() const;

  /// The stored elements, oldest first (what a replica holds; issue 31
  /// §1). Those a partially assembled dequeue_many holds are included,
  /// in front, as they go back there if it fails.
  std::vector<tuple> contents() const;

  /// Takes `elements` and the closed flag as its state (a promoted
  /// replica), ignoring capacity as put_back does. InvalidArgument,
  /// changing nothing, for an element that does not fit the queue's
  /// component types and shapes.
  status restore_contents(std::vector<tuple> elements, bool closed);

private:
  enum class run_result { no_progress, progress, complete };
  enum class op_kind {
    enqueue,
    enqueue_many,
    close,
    dequeue,
    dequeue_many,
    dequeue_up_to
  };

  struct attempt {
    attempt_id id = 0;
    op_kind op = op_kind::enqueue;
    done_fn done;
    /// enqueue: the element; enqueue_many: the batches.
    tuple input;
    /// enqueue_many: next row to insert.
    int64_t next_row = 0;
    /// dequeue_many/up_to: elements still wanted.
    int64_t requested = 0;
    /// dequeue_many/up_to: elements taken so far, in dequeue order.
    std::vector<tuple> taken;
  };

  struct finished {
    done_fn done;
    status st;
    tuple result;
  };

  std::string_view type_name() const;
  std::string closed_message() const;
  std::string insufficient_message(int64_t requested, int64_t size) const;
  status validate_tuple(const tuple& values) const;
  status validate_many_tuple(const tuple& values) const;

  attempt_id start_dequeue_many(int64_t n, done_fn done,
                                bool allow_small_batch);
  attempt_id add(attempt a, bool is_enqueue);
  attempt_id finish_now(done_fn done, status st, tuple result = {});
  void finish(attempt& a, status st, tuple result = {});

  /// Alternates enqueue and dequeue attempts until neither progresses.
  void flush();
  bool try_attempts(std::deque<attempt>& attempts);
  run_result run(attempt& a);
  run_result run_enqueue(attempt& a);
  run_result run_enqueue_many(attempt& a);
  run_result run_dequeue(attempt& a);
  run_result run_dequeue_many(attempt& a, bool allow_small_batch);

  /// Removes the next element (front, or a random one for RandomShuffle).
  tuple take_element();
  /// Returns the elements of a partial dequeue_many to the queue.
  void restore(std::vector<tuple>& taken);
  /// Stacks (and pads) `elements` into [elements.size()]+shape tensors.
  tuple stack(const std::vector<tuple>& elements) const;
  /// Calls the callbacks collected while the state changed.
  void deliver();

  queue_options opts_;
  std::deque<tuple> elements_;
  std::deque<attempt> enqueue_attempts_;
  std::deque<attempt> dequeue_attempts_;
  std::vector<finished> finished_;
  attempt_id next_id_ = 1;
  bool closed_ = false;
  std::mt19937_64 rng_;
};

} // namespace actorflow
