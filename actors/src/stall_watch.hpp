#pragma once

// Whether this process may have been frozen (SIGSTOP, a VM paused) since
// a caller last looked. A task that was silent long enough has been
// declared lost by its peers, which failed the steps it owed them; what
// it finds in its sockets when it resumes (a step's request sent before
// the stop) may belong to such a step, and must not run unasked
// (issue 31 §0). A thread ticks every `period`; a tick that comes more
// than `gap` after the one before marks a stall, and so does a look while
// the last tick is older than `gap` (the ticker has not run since the
// process resumed). A busy machine may mark one too: the caller then
// checks with the step's master, which costs a round trip, not a step.
// Time is passed in (the ticker's thread passes the clock's), so the
// class has its own test.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace actorflow {

class stall_watch {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  explicit stall_watch(clock_type::duration gap) : gap_(gap) {
    // nop
  }

  /// The ticker's beat at `now`.
  void tick(time_point now) noexcept;

  /// True if the process may have been frozen since the caller's last
  /// look, whose mark it keeps in `seen` (0 at first: a first look is
  /// not suspect unless the ticker lags). Thread-safe, never blocks.
  bool suspect(time_point now, uint64_t& seen) const noexcept;

private:
  clock_type::duration gap_;
  std::atomic<int64_t> last_{0};
  std::atomic<uint64_t> epoch_{1};
};

/// The process's watch (a gap of 1 s), its ticker started on first use.
stall_watch& process_stall_watch();

} // namespace actorflow
