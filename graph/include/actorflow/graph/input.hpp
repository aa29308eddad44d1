#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"
#include "actorflow/graph/queue_ops.hpp"

/// In-graph input pipelines, as TensorFlow 1.x's `tf.train` input
/// functions (python/training/input.py):
///
/// ~~~
/// auto files = string_input_producer({"a.csv", "b.csv"}, {.num_epochs = 2});
/// text_line_reader reader;
/// auto [key, line] = reader.read(files);
/// auto cols = decode_csv(line, {constant(0.0f), constant(0)});
/// auto xs = shuffle_batch(cols, 32, 1000, 100);
/// // sess.run(local_variables_initializer()); start_queue_runners(sess, coord);
/// ~~~
///
/// Each function builds its queue and enqueue ops in the default graph and
/// adds a queue_runner_def to it (`graph::queue_runners()`), which
/// `start_queue_runners` (client/queue_runner.hpp) starts in a session. Names
/// follow TF: the producer's queue is "input_producer" (its ops under
/// "input_producer/"), a batch's outputs "batch:0", "batch:1", ... and its
/// queue "batch/fifo_queue". Errors are InvalidArgument (TF's ValueError)
/// at build time.
namespace actorflow {

/// tf.train.limit_epochs: `value`, which fails with OutOfRange once it has
/// been produced `num_epochs` times (an int64 local variable "epochs"
/// counts; run local_variables_initializer first). `num_epochs` 0 means no
/// limit and returns `value` itself; a negative one is an error.
output limit_epochs(const output& value, int64_t num_epochs,
                    const std::string& name = "limit_epochs");

struct input_producer_options {
  /// Each element is produced this many times, then the queue closes
  /// (0: forever). Needs local_variables_initializer.
  int64_t num_epochs = 0;
  /// Shuffle within each epoch (RandomShuffle, seeded as other random ops).
  bool shuffle = true;
  int64_t seed = 0;
  int32_t capacity = 32;
  std::string shared_name;
  std::string name = "input_producer";
};

/// tf.train.input_producer: a FIFOQueue fed with the rows of `input` (one
/// element per row of shape `element_shape`, which must be fully defined
/// after merging with input's shape[1:]), epoch after epoch.
fifo_queue input_producer(const output& input,
                          tensor_shape element_shape = tensor_shape::unknown(),
                          const input_producer_options& opts = {});

/// tf.train.string_input_producer: a queue of the file names in `strings`
/// (a 1-D string tensor, or the list given), for readers. An empty list is
/// an error.
fifo_queue string_input_producer(const output& strings,
                                 const input_producer_options& opts = {});
fifo_queue string_input_producer(const std::vector<std::string>& strings,
                                 const input_producer_options& opts = {});

struct batch_options {
  /// Threads (queue runner threads, each running the enqueue op).
  int32_t num_threads = 1;
  /// The queue's capacity (batch; shuffle_batch takes it as an argument).
  int32_t capacity = 32;
  /// Each tensor is a batch of examples (dim 0) rather than one example.
  bool enqueue_many = false;
  /// Example shapes (default: the tensors' static shapes, which must then
  /// be fully defined, unless dynamic_pad).
  std::vector<tensor_shape> shapes;
  /// A PaddingFIFOQueue: examples may differ in their unknown dimensions
  /// and are padded with zeros to the largest in the batch (batch only).
  bool dynamic_pad = false;
  /// dequeue_up_to instead of dequeue_many: the last batch may be smaller
  /// once the queue is closed.
  bool allow_smaller_final_batch = false;
  std::string shared_name;
  /// The name scope (default "batch" or "shuffle_batch"), also the name of
  /// the dequeue op that gives the batch.
  std::string name;
  /// RandomShuffleQueue's seed (shuffle_batch only).
  int64_t seed = 0;
};

/// tf.train.batch: batches of `batch_size` examples of `tensors`, through
/// a FIFOQueue (a PaddingFIFOQueue with dynamic_pad) filled by
/// `num_threads` queue-runner threads. Returns one output per tensor with
/// a leading batch dimension. Errors: no tensors, batch_size < 1, shapes
/// that are not fully defined (without dynamic_pad).
std::vector<output> batch(const std::vector<output>& tensors,
                          int32_t batch_size, const batch_options& opts = {});

/// tf.train.shuffle_batch: as batch, through a RandomShuffleQueue that
/// keeps at least `min_after_dequeue` examples (until closed) for mixing.
/// Errors as batch, plus capacity <= min_after_dequeue ("capacity 10 must
/// be bigger than min_after_dequeue 10.").
std::vector<output> shuffle_batch(const std::vector<output>& tensors,
                                  int32_t batch_size, int32_t capacity,
                                  int32_t min_after_dequeue,
                                  const batch_options& opts = {});

} // namespace actorflow
