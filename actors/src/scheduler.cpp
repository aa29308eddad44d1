// CAF's work-sharing scheduler with one worker spinning briefly before it
// sleeps (see scheduler.hpp).
//
// A step is a chain of messages between actors, and on the VMs this runs
// on, waking a sleeping thread through a condition variable costs tens of
// microseconds: more than all the work of a small step. TensorFlow's
// inter-op thread pool (Eigen's non-blocking pool) answers the same
// problem the same way: a worker that runs out of work spins for a while
// before it parks, and only one spins at a time, so an idle process burns
// at most one core for at most the spin duration after its last job. And
// as Tokio's LIFO slot, a message an actor sends runs next on the same
// worker instead of waking another one: a step's chain of hand-overs
// (client, master, executor, variable) costs no wake-up at all.

#include "scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include <caf/actor_system_config.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/scheduler/coordinator.hpp>

#if defined(__x86_64__) || defined(__i386__)
#  include <immintrin.h>
#endif

namespace actorflow {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

class spinning_sharing : public caf::policy::unprofiled {
public:
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator* parent)
      : spin(caf::get_or(parent->system().config(), "actorflow.scheduler-spin",
                         caf::timespan{std::chrono::microseconds(50)})) {
      // nop
    }

    /// Guards everything but `size`.
    std::mutex lock;
    std::deque<caf::resumable*> queue;
    /// When the last job was pushed into an empty queue.
    std::chrono::steady_clock::time_point first_push;
    /// Moving average of how long an idle worker waited for work (from
    /// going idle to the push of the job it got), in ns.
    int64_t idle_gap_ns = 0;
    /// queue.size(), for the spinner to poll without the lock.
    std::atomic<size_t> size{0};
    std::condition_variable cv;
    int spinners = 0;
    /// spinners, for internal_enqueue to read without the lock.
    std::atomic<int> spinning{0};
    int sleepers = 0;
    caf::timespan spin;
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }

    /// A job this worker's own actor made runnable, run by this worker
    /// next; only this worker's thread touches it.
    caf::resumable* next = nullptr;
    /// How many jobs in a row came from `next`.
    int chained = 0;
  };

  /// After this many jobs in a row from `next`, the chain goes to the
  /// back of the shared queue, so that two actors messaging each other
  /// endlessly cannot starve the jobs waiting there.
  static constexpr int max_chain = 16;

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    auto& data = d(self);
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{data.lock};
      if (data.queue.empty())
        data.first_push = std::chrono::steady_clock::now();
      data.queue.push_back(job);
      data.size.store(data.queue.size(), std::memory_order_release);
      // A spinning worker takes the first job; wake a sleeper only for
      // jobs beyond what the spinners will pick up (no syscall on the
      // fast path).
      wake = data.sleepers > 0
             && data.queue.size() > static_cast<size_t>(data.spinners);
    }
    if (wake)
      data.cv.notify_one();
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    central_enqueue(self->parent(), job);
  }

  // A message from the actor running on this worker: the receiver runs on
  // this worker once the sender's turn ends, without waking anybody (a
  // step's chain of messages stays on one thread), unless a spinning
  // worker can take it at once. Only one such job waits; more go to the
  // shared queue, where sleepers wake for them.
  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    auto& data = d(self->parent());
    auto& own = d(self);
    if (own.next == nullptr
        && data.spinning.load(std::memory_order_relaxed) == 0) {
      own.next = job;
      return;
    }
    central_enqueue(self->parent(), job);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    central_enqueue(self->parent(), job);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    using clock = std::chrono::steady_clock;
    auto& own = d(self);
    if (own.next != nullptr) {
      if (own.chained < max_chain) {
        ++own.chained;
        return std::exchange(own.next, nullptr);
      }
      central_enqueue(self->parent(), std::exchange(own.next, nullptr));
    }
    own.chained = 0;
    auto& data = d(self->parent());
    std::unique_lock<std::mutex> guard{data.lock};
    if (!data.queue.empty())
      return pop(data);
    auto idle_since = clock::now();
    // Spin only while work has been arriving within the spin time: where
    // it does not (a task waiting on the network), spinning only takes
    // the core from the processes that are about to answer.
    if (data.spinners == 0 && data.spin > caf::timespan{0}
        && data.idle_gap_ns < data.spin.count()) {
      ++data.spinners;
      data.spinning.store(data.spinners, std::memory_order_relaxed);
      guard.unlock();
      auto deadline = idle_since + data.spin;
      for (int i = 0;; ++i) {
        if (data.size.load(std::memory_order_acquire) > 0)
          break;
        cpu_relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline)
          break;
      }
      guard.lock();
      --data.spinners;
      data.spinning.store(data.spinners, std::memory_order_relaxed);
    }
    if (data.queue.empty()) {
      ++data.sleepers;
      data.cv.wait(guard, [&] { return !data.queue.empty(); });
      --data.sleepers;
    }
    // The push, not the wake-up: a sleeper's wake-up latency must not
    // make the gaps look too long to spin for. Capped, so that one long
    // idle period does not keep a busy phase from spinning for long.
    auto gap = std::chrono::duration_cast<std::chrono::nanoseconds>(
                 data.first_push - idle_since)
                 .count();
    gap = std::clamp<int64_t>(gap, 0, 4 * data.spin.count());
    data.idle_gap_ns += (gap - data.idle_gap_ns) / 8;
    return pop(data);
  }

  static caf::resumable* pop(coordinator_data& data) {
    auto* job = data.queue.front();
    data.queue.pop_front();
    data.size.store(data.queue.size(), std::memory_order_release);
    return job;
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker* self, UnaryFunction f) {
    if (auto& own = d(self); own.next != nullptr)
      f(std::exchange(own.next, nullptr));
  }

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& data = d(self);
    std::unique_lock<std::mutex> guard{data.lock};
    while (!data.queue.empty()) {
      auto* job = data.queue.front();
      data.queue.pop_front();
      f(job);
    }
    data.size.store(0, std::memory_order_release);
  }
};

} // namespace

void load_spinning_scheduler(caf::actor_system_config& cfg) {
  cfg.load<caf::scheduler::coordinator<spinning_sharing>>();
}

} // namespace actorflow
