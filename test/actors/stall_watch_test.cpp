// stall_watch (actors/src/stall_watch.hpp), with time passed in: a gap
// between beats, or a look while the beats lag, is a stall, seen once by
// each caller.

#include <catch2/catch.hpp>

#include "stall_watch.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

TEST_CASE("stall watch: steady beats are no stall, but a gap is, once per "
          "caller",
          "[stall_watch]") {
  stall_watch w{1s};
  stall_watch::time_point t{};
  t += 10s;
  w.tick(t);
  uint64_t a = 0;
  uint64_t b = 0;
  for (int i = 0; i < 20; ++i) {
    t += 100ms;
    w.tick(t);
    CHECK_FALSE(w.suspect(t, a));
  }
  // Frozen for 5 s, then the ticker runs first.
  t += 5s;
  w.tick(t);
  CHECK(w.suspect(t, a));
  CHECK_FALSE(w.suspect(t, a));
  // Another caller that looked before sees it too, once.
  CHECK(w.suspect(t, b) == false); // b's first look: nothing to compare
  t += 3s;
  w.tick(t);
  CHECK(w.suspect(t, b));
  CHECK(w.suspect(t, a));
}

TEST_CASE("stall watch: a look before the ticker ran after a freeze is a "
          "stall, and the ticker's mark of it is not a second one",
          "[stall_watch]") {
  stall_watch w{1s};
  stall_watch::time_point t{};
  t += 10s;
  w.tick(t);
  uint64_t seen = 0;
  CHECK_FALSE(w.suspect(t, seen));
  // Resumed 4 s later: the executor looks before the ticker beats.
  t += 4s;
  CHECK(w.suspect(t, seen));
  w.tick(t + 50ms);
  CHECK_FALSE(w.suspect(t + 60ms, seen));
  w.tick(t + 150ms);
  CHECK_FALSE(w.suspect(t + 160ms, seen));
}
