#pragma once

// What a process knows about the actors it runs, for the monitor actor
// (monitor_actor in type_ids.hpp) and the console: one record per live actor, written
// by that actor's own thread with relaxed atomics (never a lock on the
// message path), read by the monitor. Everything here is bounded: a live
// actor has one record, an ended actor stays in a list of the last 64, a
// task's step record keeps the last 512 step durations. No CAF here.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow::monitoring {

/// What an actor is, in TensorFlow's terms.
enum class actor_kind : uint8_t {
  task,        ///< a task's master (the actor the task publishes)
  executor,    ///< one registered partition of a session's graph
  variable,    ///< a variable (container/name)
  queue,       ///< a FIFOQueue / PaddingFIFOQueue / RandomShuffleQueue
  reader,      ///< a reader (TextLineReader, ...)
  accumulator, ///< a ConditionalAccumulator
  client,      ///< a session's client actor (steps to its master)
  monitor,     ///< the task's monitor actor
  other,       ///< an embedding application's own actor
  worker,      ///< a task's worker (partitions and resources)
};

const char* to_string(actor_kind kind);

/// Who an actor is: kind, its TF name (a variable's or queue's shared name,
/// a partition's session and device, a client's session handle), its
/// container ("" for none) and the task it serves
/// ("/job:ps/replica:0/task:0"; "" for the process: every task of the
/// process shows it).
struct identity {
  actor_kind kind = actor_kind::task;
  std::string name;
  std::string container;
  std::string task;
};

/// Whether actors spawned from now on are instrumented. On unless the
/// environment says ACTORFLOW_MONITORING=0 (read once); set_enabled
/// switches it for the bench's on/off comparison and for tests.
bool enabled();
void set_enabled(bool on);

/// Nanoseconds of the steady clock.
int64_t steady_ns();
/// Microseconds since the epoch (what snapshots show).
int64_t wall_us();

namespace detail {
/// Whether ticks() reads the CPU's time-stamp counter (x86-64, where the
/// kernel's clock source is the TSC). Set before main.
extern const bool use_tsc;
} // namespace detail

/// A timestamp for the message path, where a steady_clock read (~35 ns
/// here) per message was most of the instrumentation's cost: the
/// time-stamp counter (~10 ns) where it is usable, else steady_ns().
/// Differences convert to ns with ns_per_tick().
inline uint64_t ticks() noexcept {
#if defined(__x86_64__)
  if (detail::use_tsc)
    return __builtin_ia32_rdtsc();
#endif
  return static_cast<uint64_t>(steady_ns());
}

/// Nanoseconds per tick, measured against the steady clock since the
/// process started (1 without the TSC). One load once the process has run
/// for a second, two clock reads before. Never blocks.
double ns_per_tick();

/// The counters of one actor. Written only by the actor's own thread
/// (handled(), the gauges), read by anyone.
class actor_record {
public:
  actor_record(uint64_t id, identity who);

  const uint64_t id;
  const identity who;
  const int64_t started_us;

  /// After the actor handled one message that took `busy_ticks` (see
  /// ticks()), ending at `now_ticks`, with `mailbox_left` messages still
  /// waiting. Never blocks.
  void handled(uint64_t busy_ticks, uint32_t mailbox_left,
               uint64_t now_ticks) noexcept;

  /// Kind-specific gauges (see gauge_names): a queue's size, capacity,
  /// closed flag, blocked enqueues and dequeues; a variable's bytes,
  /// initialized flag, updates. Written by the actor itself.
  static constexpr size_t max_gauges = 7;
  std::array<std::atomic<int64_t>, max_gauges> gauges{};
  /// The names of this kind's gauges ("" for an unused slot).
  static const std::array<const char*, max_gauges>&
  gauge_names(actor_kind kind);

  /// Free text the actor sets rarely (a variable's dtype and shape).
  void set_detail(std::string text);
  std::string detail() const;

  struct sample {
    uint64_t messages = 0;
    uint64_t busy_ns = 0;
    /// The longest message in the last 1-4 s (two windows of 2^31 ticks).
    uint64_t busy_max_ns = 0;
    uint32_t mailbox = 0;
    /// The deepest mailbox in the last 1-4 s.
    uint32_t mailbox_max = 0;
  };
  sample read() const;

private:
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> busy_ticks_{0};
  std::atomic<uint32_t> mailbox_{0};
  // Maxima per window of 2^31 ticks: the current and the previous.
  std::atomic<int64_t> window_{0};
  std::atomic<uint64_t> busy_max_cur_{0};
  std::atomic<uint64_t> busy_max_prev_{0};
  std::atomic<uint32_t> mailbox_max_cur_{0};
  std::atomic<uint32_t> mailbox_max_prev_{0};
  mutable std::mutex detail_mtx_;
  std::string detail_;
};

/// The steps one master finished: counts by TensorFlow status code, the
/// last 512 durations and the last 8 errors. Written by the task actor.
class step_record {
public:
  static constexpr size_t ring_size = 512;
  /// Upper bounds of the duration histogram's buckets, in us (Prometheus'
  /// actorflow_step_seconds), +Inf after the last.
  static constexpr std::array<double, 16> bucket_bounds_us{
    100,    250,    500,    1e3,   2.5e3, 5e3,   1e4,   2.5e4,
    5e4,    1e5,    2.5e5,  5e5,   1e6,   2.5e6, 5e6,   1e7};

  /// A step that took `duration_us` ended with `code` (0 for OK).
  void finished(int64_t duration_us, int code, const std::string& message);

  struct sample {
    uint64_t total = 0;
    uint64_t errors = 0;
    std::map<int, uint64_t> by_code;
    /// Over the durations kept (at most ring_size); 0 without steps.
    double p50_us = 0;
    double p99_us = 0;
    double last_us = 0;
    /// (time, code, message), oldest first.
    struct error_entry {
      int64_t at_us;
      int code;
      std::string message;
    };
    std::vector<error_entry> last_errors;
    /// Steps per histogram bucket (not cumulative; the last is +Inf) and
    /// the sum of all durations.
    std::array<uint64_t, bucket_bounds_us.size() + 1> buckets{};
    double sum_us = 0;
  };
  sample read() const;

  /// Asks the master to trace its next step (FULL_TRACE) for the monitor.
  void request_trace() noexcept;
  /// Whether a trace was asked for, clearing the request (the master, as a
  /// step starts: one relaxed load when none was).
  bool take_trace_request() noexcept {
    return trace_wanted_.load(std::memory_order_relaxed)
           && trace_wanted_.exchange(false);
  }
  /// Whether a request waits for the next step.
  bool trace_requested() const noexcept;
  /// The traced step, as Chrome trace-event JSON (the master stores it).
  void store_trace(std::string chrome_json);
  struct trace {
    /// When it was stored; 0: never.
    int64_t at_us = 0;
    std::string chrome_json;
  };
  trace last_trace() const;
  /// last_trace().at_us without copying the trace.
  int64_t trace_at_us() const;

private:
  std::atomic<bool> trace_wanted_{false};
  mutable std::mutex trace_mtx_;
  trace trace_;
  std::atomic<uint64_t> total_{0};
  std::array<std::atomic<uint32_t>, ring_size> durations_{};
  std::array<std::atomic<uint64_t>, 20> by_code_{};
  std::array<std::atomic<uint64_t>, bucket_bounds_us.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_us_{0};
  mutable std::mutex errors_mtx_;
  std::vector<sample::error_entry> errors_;
};

/// A trainer's progress, as it reports it (report_training).
struct training_progress {
  std::string task;
  int64_t global_step = -1;
  int64_t local_step = -1;
  double loss = 0;
  double examples_per_sec = 0;
  /// Negative until an evaluation reported one.
  double accuracy = -1;
  int64_t updated_us = 0;
};

/// A connection of a task to another task (CAF's middleman) as the task
/// actor knows it.
struct peer_entry {
  std::string peer;
  std::string address;
  bool up = false;
  int64_t since_us = 0;
  std::string reason; ///< why it went down
};

/// An actor that ended, kept among the last 64.
struct ended_actor {
  uint64_t id = 0;
  identity who;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  uint64_t messages = 0;
  std::string reason;
};

/// The process's resource use, from /proc/self.
struct process_stats {
  int64_t pid = 0;
  int64_t rss_bytes = 0;
  double cpu_seconds = 0;
  int64_t threads = 0;
  int64_t open_fds = 0;
  int64_t started_us = 0;
};
process_stats read_process_stats();

/// The process-wide registry of the above. Thread-safe; never destroyed
/// (actors end during static destruction).
class registry {
public:
  static registry& instance();

  /// Adds a live actor's record (the spawn of an instrumented actor).
  std::shared_ptr<actor_record> add(uint64_t id, identity who);
  /// The actor ended with `reason`: its record moves to the ended list.
  void remove(uint64_t id, const std::string& reason);

  std::vector<std::shared_ptr<actor_record>> live() const;
  std::vector<ended_actor> ended() const;

  /// The step record of master `task` (made on first use).
  std::shared_ptr<step_record> steps(const std::string& task);

  /// Task `task` connected to `peer` at `address` (up) or lost it.
  void peer_changed(const std::string& task, peer_entry entry);
  std::vector<peer_entry> peers(const std::string& task) const;

  /// A trainer's progress (the latest per task is kept).
  void report_training(training_progress progress);
  std::vector<training_progress> training() const;

  static constexpr size_t max_ended = 64;

private:
  registry() = default;
  mutable std::mutex mtx_;
  std::map<uint64_t, std::shared_ptr<actor_record>> live_;
  std::vector<ended_actor> ended_;
  std::map<std::string, std::shared_ptr<step_record>> steps_;
  std::map<std::string, std::map<std::string, peer_entry>> peers_;
  std::map<std::string, training_progress> training_;
};

/// Reports a trainer's progress to this process's registry (what the
/// console plots). Never blocks beyond a short lock.
void report_training(training_progress progress);

} // namespace actorflow::monitoring
