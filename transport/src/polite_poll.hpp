#pragma once

// Private to actors/: how this process's threads poll (the tensor
// channel's readers, a caller waiting for its step's reply) without
// making things worse when the cores are taken. Polling yields the core
// between tries, which costs nothing while the other runnable threads
// are the ones about to answer; but when CPU-bound work (another
// process's computation, a compiler) fills the cores, each yield hands
// the core over for a whole time slice, milliseconds, where blocking
// would have been woken within microseconds (a woken sleeper preempts).
// A remote small step took 3.7 ms that way beside two compile jobs. So a
// yield that comes back late marks the process contended, and nobody
// polls for a while after: beside two busy loops on this 2-core VM the
// step took 300 us (1.2 ms before the caller polled at all, 156 us with a
// quiet period of 100 ms); idle, the bench's figures stay where they were
// without the check (a 100 ms period cost them 10 %: the bench's own
// polling baselines, interleaved with the engine, count as contention).

#include <atomic>
#include <chrono>
#include <thread>

namespace actorflow::polite_poll {

/// A yield that took longer than this came back from another thread's
/// time slice, not from an idle core's.
inline constexpr std::chrono::microseconds late_yield{500};

/// How long nobody polls after a late yield.
inline constexpr std::chrono::milliseconds quiet_period{20};

inline std::atomic<int64_t>& contended_until_ns() {
  static std::atomic<int64_t> until{0};
  return until;
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// False while the process saw its cores taken recently: block instead.
/// Never blocks.
inline bool allowed() {
  return now_ns() >= contended_until_ns().load(std::memory_order_relaxed);
}

/// Yields the core once; false (and polling is off for quiet_period)
/// when that took longer than late_yield.
inline bool yield() {
  auto before = now_ns();
  std::this_thread::yield();
  auto after = now_ns();
  if (after - before <= std::chrono::nanoseconds(late_yield).count())
    return true;
  contended_until_ns().store(
    after + std::chrono::nanoseconds(quiet_period).count(),
    std::memory_order_relaxed);
  return false;
}

} // namespace actorflow::polite_poll
