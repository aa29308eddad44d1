#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/graph.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/graph/status.hpp"

/// TensorFlow's `tf.train.QueueRunner`, `tf.train.add_queue_runner` and
/// `tf.train.start_queue_runners`:
///
/// ~~~
/// using namespace actorflow;
/// fifo_queue q{32, {dtype::float32}, {tensor_shape{}}};
/// auto enq = q.enqueue({random_normal({})});
/// add_queue_runner(queue_runner{q, {enq, enq}});  // two threads
/// auto x = q.dequeue().front();
/// session sess;
/// coordinator coord;
/// start_queue_runners(sess, coord);
/// for (int i = 0; i < 100 && !coord.should_stop(); ++i)
///   sess.run(x);
/// coord.request_stop();   // the cancel op unblocks pending enqueues
/// coord.join();
/// ~~~
///
/// Threads call `session::run`, which reads the graph: finish building it
/// (including the queue runners' close ops) before starting threads.
namespace actorflow {

class session;
class coordinator;

/// Runs enqueue ops of one queue in threads (TF's QueueRunner). Copies
/// share their state; the threads hold it too, so a queue_runner may be
/// destroyed while its threads run. The session must outlive them.
class queue_runner {
public:
  /// One thread per op of `enqueue_ops` (which may be any ops of the
  /// queue's graph, e.g. an enqueue of a dequeue of another queue).
  /// `close_op` defaults to `queue.close()` and `cancel_op` to
  /// `queue.close(true)`, built now in the queue's graph (named as TF:
  /// "<queue>_Close", "<queue>_Close_1"). `queue_closed_codes` are the
  /// op_error codes meaning "the queue was closed" (TF's
  /// `queue_closed_exception_types`; empty = {OutOfRange}).
  /// Throws op_error (InvalidArgument): an invalid queue or no enqueue ops
  /// ("Must provide queue and enqueue_ops."), an op that is invalid or
  /// from another graph.
  queue_runner(const queue_base& queue, std::vector<operation> enqueue_ops,
               operation close_op = {}, operation cancel_op = {},
               std::vector<error_code> queue_closed_codes = {});

  /// From the graph's record (TF's `QueueRunner.from_proto`): looks the
  /// names up in `g`; builds nothing. Throws op_error (NotFound) naming
  /// an operation `g` lacks, (InvalidArgument) for no enqueue ops.
  queue_runner(graph& g, const queue_runner_def& def);

  /// The queue node's name (TF's `QueueRunner.name`).
  const std::string& name() const;
  operation queue_op() const;
  const std::vector<operation>& enqueue_ops() const;
  operation close_op() const;
  operation cancel_op() const;
  const std::vector<error_code>& queue_closed_codes() const;
  graph& owner() const;

  /// The record `graph::add_queue_runner` keeps (TF's `to_proto`; our
  /// queue_runner_def has no `queue_closed_exception_types`).
  queue_runner_def to_def() const;

  /// Errors the threads of the last `create_threads` without a
  /// coordinator ended with (with a coordinator they go to it instead).
  /// A copy; safe to call while threads run.
  std::vector<std::exception_ptr> exceptions_raised() const;

  /// Starts one thread per enqueue op, named
  /// "QueueRunnerThread-<queue>-<enqueue op>", each running its op in a
  /// loop with `sess` (TF's `create_threads(sess, coord, start=True)`):
  ///
  /// - it stops when `coord` requests a stop (checked between runs);
  /// - an op_error with a queue-closed code (OutOfRange: the queue, or one
  ///   it reads from, is closed) ends the thread; the last thread of this
  ///   runner to end so runs `close_op` (errors ignored), closing the queue
  ///   without cancelling pending enqueues;
  /// - any other exception ends the thread and is passed to
  ///   `coord->request_stop(ex)` or, without a coordinator, kept in
  ///   `exceptions_raised()` (TF also rethrows it in the thread).
  ///
  /// With a coordinator, one more thread
  /// "QueueRunnerThread-<queue>-<cancel op>" waits for the stop request and
  /// runs `cancel_op` (errors ignored), so enqueues blocked on a full
  /// queue fail (Cancelled) and their threads end; all threads are
  /// registered with `coord` (join them with `coord->join()`) and the
  /// result is empty. Without one, the threads are returned and the caller
  /// must join them.
  ///
  /// If threads of this runner still run for `sess`, starts none (returns
  /// empty), as TF. Does not block. Throws op_error (InvalidArgument) if
  /// `sess` runs another graph, std::system_error if a thread cannot be
  /// started. `coord` and `sess` must outlive the threads. (TF's
  /// `start=False` is not offered: a std::thread starts when created.)
  std::vector<std::thread> create_threads(session& sess,
                                          coordinator* coord = nullptr);

private:
  struct state;
  std::shared_ptr<state> state_;
};

/// tf.train.add_queue_runner: records `qr.to_def()` in its graph's
/// QUEUE_RUNNERS collection (`graph::queue_runners()`).
void add_queue_runner(const queue_runner& qr);

/// tf.train.start_queue_runners: builds a queue_runner for each record of
/// `sess.get_graph().queue_runners()` and starts its threads with `coord`
/// (see `queue_runner::create_threads`). Returns the number of threads
/// started (enqueue ops plus one cancel thread per runner). The runners
/// live as long as their threads. Does not block. Throws op_error
/// (NotFound) for a record naming an operation the graph lacks, before
/// starting anything. Unlike TF, each call builds new runners: calling it
/// twice for one session starts a second set of threads.
std::size_t start_queue_runners(session& sess, coordinator& coord);

} // namespace actorflow
