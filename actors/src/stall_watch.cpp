// stall_watch.hpp: a ticker thread's beats, and the looks that compare
// with them.

#include "stall_watch.hpp"

#include <thread>

namespace actorflow {

namespace {

int64_t ticks_of(stall_watch::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           t.time_since_epoch())
    .count();
}

} // namespace

void stall_watch::tick(time_point now) noexcept {
  auto prev = last_.exchange(ticks_of(now));
  if (prev != 0
      && ticks_of(now) - prev
           > std::chrono::duration_cast<std::chrono::nanoseconds>(gap_)
               .count())
    epoch_.fetch_add(1);
}

bool stall_watch::suspect(time_point now, uint64_t& seen) const noexcept {
  auto epoch = epoch_.load();
  auto last = last_.load();
  auto lagging = last != 0
                 && ticks_of(now) - last
                      > std::chrono::duration_cast<std::chrono::nanoseconds>(
                          gap_)
                          .count();
  if (seen == 0)
    seen = epoch;
  if (lagging) {
    // The ticker will mark this stall when it runs: that mark is seen.
    seen = epoch + 1;
    return true;
  }
  if (epoch != seen) {
    seen = epoch;
    return true;
  }
  return false;
}

stall_watch& process_stall_watch() {
  // Never destroyed: the ticker runs until the process ends.
  static auto* watch = [] {
    auto* w = new stall_watch{std::chrono::seconds(1)};
    w->tick(stall_watch::clock_type::now());
    std::thread{[w] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        w->tick(stall_watch::clock_type::now());
      }
    }}.detach();
    return w;
  }();
  return *watch;
}

} // namespace actorflow
