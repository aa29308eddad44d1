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
#include "polite_poll.hpp"

#include "actorflow/transport/run_actors.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/execution_unit.hpp>
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
    /// Threads in run_actors_until waiting for a job or their result. An
    /// actor's job wakes one of them before any sleeping worker.
    int helpers_waiting = 0;
    std::condition_variable helper_cv;
    /// Threads in run_actors_after (not the scheduler's own): the
    /// coordinator stops only once none is left, and none enters after.
    int outside_runners = 0;
    bool stopping = false;
    std::condition_variable outside_cv;
  };

  /// After this many jobs in a row from a next_slot, the chain goes to
  /// the back of the shared queue, so that two actors messaging each
  /// other endlessly cannot starve the jobs waiting there.
  static constexpr int max_chain = 16;

  /// The job a thread that runs actors (a worker, or a thread in
  /// run_actors_until) runs next: the first one that an actor running
  /// there made runnable. Only that thread touches it.
  struct next_slot {
    caf::resumable* job = nullptr;
    /// How many jobs in a row came from here.
    int chained = 0;

    /// Keeps `x` here, unless the slot is taken or a worker spins (it
    /// takes the job at once from the shared queue); false then.
    bool keep(coordinator_data& data, caf::resumable* x) {
      if (job != nullptr
          || data.spinning.load(std::memory_order_relaxed) != 0)
        return false;
      job = x;
      return true;
    }

    /// The kept job, or nullptr when there is none or max_chain jobs in a
    /// row came from here (the kept one then goes to the shared queue).
    caf::resumable* take(coordinator_data& data) {
      if (job != nullptr && chained < max_chain) {
        ++chained;
        return std::exchange(job, nullptr);
      }
      if (job != nullptr)
        push(data, std::exchange(job, nullptr));
      chained = 0;
      return nullptr;
    }
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {
      // nop
    }

    next_slot next;
  };

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(d(self), job);
  }

  /// Set while a thread that runs actors next (run_actors_until) sends:
  /// nobody needs waking for the jobs it makes runnable.
  static inline thread_local bool helper_sending = false;

  /// Set while run_actors_after's `start` runs: the first actor it makes
  /// runnable lands here instead of in the shared queue.
  static inline thread_local caf::resumable** captured = nullptr;

  /// Set on the workers' threads and while a thread is in help(): such a
  /// thread may be inside an actor's turn, and must not run actors from
  /// there (the same actor could be resumed twice at once).
  static inline thread_local bool runs_actors = false;

  static void push(coordinator_data& data, caf::resumable* job) {
    if (captured != nullptr && *captured == nullptr
        && job->subtype() == caf::resumable::scheduled_actor) {
      *captured = job;
      return;
    }
    bool wake = false;
    bool wake_helper = false;
    {
      std::lock_guard<std::mutex> guard{data.lock};
      if (data.queue.empty())
        data.first_push = std::chrono::steady_clock::now();
      data.queue.push_back(job);
      data.size.store(data.queue.size(), std::memory_order_release);
      // A spinning worker takes the first job; wake a sleeper only for
      // jobs beyond what the spinners will pick up (no syscall on the
      // fast path).
      if (!helper_sending) {
        wake_helper = data.helpers_waiting > 0
                      && job->subtype() == caf::resumable::scheduled_actor;
        wake = !wake_helper && data.sleepers > 0
               && data.queue.size() > static_cast<size_t>(data.spinners);
      }
    }
    if (wake_helper)
      data.helper_cv.notify_one();
    else if (wake)
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
    if (!d(self).next.keep(data, job))
      push(data, job);
  }

  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    central_enqueue(self->parent(), job);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    using clock = std::chrono::steady_clock;
    runs_actors = true;
    auto& data = d(self->parent());
    if (auto* job = d(self).next.take(data))
      return job;
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
    if (auto& next = d(self).next; next.job != nullptr)
      f(std::exchange(next.job, nullptr));
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

  /// Where run_actors_until runs actors. As on a worker, the first job an
  /// actor running here makes runnable runs here next.
  class helper_unit : public caf::execution_unit {
  public:
    helper_unit(caf::actor_system& sys, coordinator_data& data)
      : caf::execution_unit(&sys), data_(data) {
      // nop
    }

    void exec_later(caf::resumable* job) override {
      if (!next.keep(data_, job))
        push(data_, job);
    }

    next_slot next;

  private:
    coordinator_data& data_;
  };

  /// Sets a thread-local flag for its lifetime.
  struct set_while_alive {
    explicit set_while_alive(bool& flag) : flag(flag) {
      flag = true;
    }
    ~set_while_alive() {
      flag = false;
    }
    bool& flag;
  };

  /// Runs `job` and then the chain of actors it makes runnable on the
  /// calling thread (see help()).
  static void run_chain(coordinator_data& data, helper_unit& unit,
                        size_t max_throughput, caf::resumable* job,
                        const std::function<bool()>* go_on = nullptr) {
    while (job != nullptr) {
      switch (job->resume(&unit, max_throughput)) {
        case caf::resumable::resume_later:
        case caf::resumable::shutdown_execution_unit:
          push(data, job);
          break;
        case caf::resumable::done:
        case caf::resumable::awaiting_message:
          caf::intrusive_ptr_release(job);
          break;
      }
      job = unit.next.take(data);
      if (job != nullptr && go_on != nullptr && *go_on && !(*go_on)()) {
        push(data, job);
        job = nullptr;
      }
    }
  }

  /// run_actors_after (run_actors.hpp) for this policy's coordinator.
  static void run_after(coordinator_data& data, caf::actor_system& sys,
                        size_t max_throughput,
                        const std::function<void()>& start,
                        const std::function<bool()>& go_on) {
    if (runs_actors) {
      start();
      return;
    }
    bool stopping = false;
    {
      std::lock_guard<std::mutex> guard{data.lock};
      stopping = data.stopping;
      if (!stopping)
        ++data.outside_runners;
    }
    if (stopping) {
      start();
      return;
    }
    caf::resumable* first = nullptr;
    {
      set_while_alive helping{runs_actors};
      helper_unit unit{sys, data};
      captured = &first;
      start();
      captured = nullptr;
      run_chain(data, unit, max_throughput, first, &go_on);
    }
    std::lock_guard<std::mutex> guard{data.lock};
    if (--data.outside_runners == 0 && data.stopping)
      data.outside_cv.notify_all();
  }

  /// Lets the coordinator's stop proceed once no thread is in run_after,
  /// and keeps new ones from running actors.
  static void stop_outside_runners(coordinator_data& data) {
    std::unique_lock<std::mutex> guard{data.lock};
    data.stopping = true;
    data.outside_cv.wait(guard, [&] { return data.outside_runners == 0; });
  }

  /// run_actors_until (run_actors.hpp) for this policy's coordinator;
  /// false on a thread that runs actors already.
  static bool help(coordinator_data& data, caf::actor_system& sys,
                   size_t max_throughput, const std::function<void()>& start,
                   const std::function<bool()>& done) {
    if (runs_actors)
      return false;
    set_while_alive helping{runs_actors};
    helper_unit unit{sys, data};
    {
      set_while_alive sending{helper_sending};
      start();
    }
    bool polled = false;
    for (;;) {
      auto* job = unit.next.take(data);
      if (job == nullptr) {
        std::unique_lock<std::mutex> guard{data.lock};
        // Checked under the lock that notify_actor_helpers takes: no
        // wake-up is lost between this check and the wait.
        if (done()) {
          // A push may have woken this thread instead of a worker.
          if (!data.queue.empty() && data.sleepers > 0
              && data.queue.size() > static_cast<size_t>(data.spinners))
            data.cv.notify_one();
          return true;
        }
        if (!data.queue.empty()
            && data.queue.front()->subtype()
                 == caf::resumable::scheduled_actor) {
          job = pop(data);
        } else {
          // Anything but an actor (the coordinator's shutdown jobs) is
          // for the workers.
          if (!data.queue.empty())
            data.cv.notify_one();
          // Poll first, for up to twice the spin time since the last
          // job: the reply of a remote step comes within tens of µs, and
          // waking a blocked thread costs about as much again on a VM
          // that halts an idle vCPU at once. Not while the cores are
          // taken (polite_poll.hpp).
          if (!polled && data.spin > caf::timespan{0}
              && polite_poll::allowed()) {
            polled = true;
            auto deadline = std::chrono::steady_clock::now() + 2 * data.spin;
            guard.unlock();
            while (std::chrono::steady_clock::now() < deadline
                   && data.size.load(std::memory_order_acquire) == 0
                   && !done() && polite_poll::yield())
              ;
            guard.lock();
            continue;
          }
          ++data.helpers_waiting;
          data.helper_cv.wait(guard);
          --data.helpers_waiting;
          continue;
        }
      }
      polled = false;
      run_chain(data, unit, max_throughput, job);
    }
  }
};

class spinning_coordinator
  : public caf::scheduler::coordinator<spinning_sharing> {
public:
  using super = caf::scheduler::coordinator<spinning_sharing>;

  using super::super;

  static caf::actor_system::module* make(caf::actor_system& sys,
                                         caf::detail::type_list<>) {
    return new spinning_coordinator(sys);
  }

protected:
  void stop() override {
    // A thread in run_actors_after may be inside an actor's turn: it must
    // be out before the workers and the actors' resources go.
    spinning_sharing::stop_outside_runners(data());
    super::stop();
  }
};

} // namespace

bool run_actors_until(caf::actor_system& sys,
                      const std::function<void()>& start,
                      const std::function<bool()>& done) {
  auto* coordinator = dynamic_cast<spinning_coordinator*>(&sys.scheduler());
  if (coordinator == nullptr)
    return false;
  return spinning_sharing::help(coordinator->data(), sys,
                                coordinator->max_throughput(), start, done);
}

void run_actors_after(caf::actor_system& sys,
                      const std::function<void()>& start,
                      const std::function<bool()>& go_on) {
  auto* coordinator = dynamic_cast<spinning_coordinator*>(&sys.scheduler());
  if (coordinator == nullptr) {
    start();
    return;
  }
  spinning_sharing::run_after(coordinator->data(), sys,
                              coordinator->max_throughput(), start, go_on);
}

void notify_actor_helpers(caf::actor_system& sys) {
  auto* coordinator = dynamic_cast<spinning_coordinator*>(&sys.scheduler());
  if (coordinator == nullptr)
    return;
  auto& data = coordinator->data();
  {
    std::lock_guard<std::mutex> guard{data.lock};
    if (data.helpers_waiting == 0)
      return;
  }
  data.helper_cv.notify_all();
}

void load_spinning_scheduler(caf::actor_system_config& cfg) {
  cfg.load<spinning_coordinator>();
}

} // namespace actorflow
