#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

/// TensorFlow's ConditionalAccumulator (core/kernels/
/// conditional_accumulator_base.cc) in plain C++: gradients accumulate
/// while their local step is not older than the accumulator's global step;
/// a take waits until enough have arrived, returns their mean (or sum),
/// resets the count and advances the global step. Waiting takes are
/// pending attempts completed by later calls through callbacks; nothing
/// blocks.
namespace actorflow {

struct accumulator_options {
  /// Named in messages.
  std::string name;
  dtype type = dtype::float32;
  /// Possibly partial; gradients must be compatible with it.
  tensor_shape shape = tensor_shape::unknown();
  /// "MEAN" (default) or "SUM".
  std::string reduction_type = "MEAN";
};

/// InvalidArgument for a dtype other than float32/float64 or an unknown
/// reduction type.
status validate(const accumulator_options& opts);

class accumulator_core {
public:
  /// Called once per take: the aggregated gradient, or an error.
  using done_fn = std::function<void(status, tensor)>;
  using attempt_id = uint64_t;

  explicit accumulator_core(accumulator_options opts);
  /// Fails pending takes with Cancelled.
  ~accumulator_core();
  accumulator_core(const accumulator_core&) = delete;
  accumulator_core& operator=(const accumulator_core&) = delete;

  /// Adds `grad` if `local_step` >= the global step, else drops it (a
  /// stale gradient; still OK, as TF). InvalidArgument, leaving the sum
  /// unchanged, for a dtype or shape that does not match ("Shape mismatch:
  /// expected [2,3], got [3,2]"). May complete waiting takes. `replica`
  /// names the sender ("/job:worker/replica:0/task:1"; "" if unknown):
  /// its local step and the time are remembered (replicas()), stale or not.
  status apply(const tensor& grad, int64_t local_step,
               const std::string& replica = "");

  /// Waits until `num_required` gradients have accumulated, then gives
  /// their mean (or sum), resets the count and increments the global
  /// step. Takes are served in order. InvalidArgument at once for
  /// num_required < 1 ("Argument num_required must be positive, but was
  /// 0").
  attempt_id take(int32_t num_required, done_fn done);

  /// Fails a pending take with Cancelled; the accumulated sum stays.
  void cancel(attempt_id id);
  /// Fails every pending take with `why`, or when it is OK Cancelled
  /// "TakeGrad operation was cancelled".
  void cancel_all(const status& why = {});

  /// Sets the global step (also backwards: a chief restored from an older
  /// checkpoint, as TF allows).
  void set_global_step(int64_t step);

  /// Lowers the count pending takes wait for to `n` where they wait for
  /// more (elastic synchronous training: a replica left, so the update
  /// waits for one gradient fewer); takes that now have enough are
  /// served. InvalidArgument for n < 1, and nothing changes.
  status set_num_required(int32_t n);

  int32_t num_accumulated() const noexcept {
    return count_;
  }
  int64_t global_step() const noexcept {
    return global_step_;
  }

  using clock = std::chrono::steady_clock;

  /// A named sender's last gradient: its local step (below the global
  /// step: none for the update the takes wait for) and when it came.
  struct replica_info {
    std::string name;
    int64_t last_step = 0;
    clock::time_point last_time;
  };
  /// Every named sender so far, by name. Survives takes and
  /// set_global_step (they say which replicas have not sent for the
  /// current step).
  std::vector<replica_info> replicas() const;

  /// The state a replica needs (replicated accumulators, issue 31 §1):
  /// the running sum, its count, the global step and the senders' last
  /// steps. Pending takes are not part of it (their callers retry).
  struct snapshot_data {
    tensor sum;
    int32_t count = 0;
    int64_t global_step = 0;
    std::vector<std::pair<std::string, int64_t>> replicas;
  };
  snapshot_data snapshot() const;

  /// Takes `data` as its state (a promoted replica). InvalidArgument,
  /// changing nothing, when the sum does not match the accumulator's
  /// dtype and shape or the count is negative or disagrees with the sum.
  status restore(snapshot_data data);

private:
  struct attempt {
    attempt_id id;
    int32_t required;
    done_fn done;
  };
  /// Serves waiting takes while enough gradients are there.
  void serve();

  accumulator_options opts_;
  tensor sum_;
  int32_t count_ = 0;
  int64_t global_step_ = 0;
  std::deque<attempt> takes_;
  attempt_id next_id_ = 1;
  std::map<std::string, replica_info> replicas_;
};

} // namespace actorflow
