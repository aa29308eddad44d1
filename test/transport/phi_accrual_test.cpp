// The failure detector of CAF connections (phi_accrual.hpp), with time
// passed in: the silence it tolerates is about the heartbeat interval plus
// the acceptable pause for a peer whose heartbeats came like clockwork,
// longer for one whose heartbeats came irregularly (a busy peer), never
// more than max_silence, and it forgets an old irregular spell.

#include <catch2/catch.hpp>

#include <random>

#include "phi_accrual.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

using time_point = phi_accrual::time_point;

double seconds(phi_accrual::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Beats `n` times, `gap()` apart, from `t`; returns the last beat's time.
template <class Gap>
time_point beat(phi_accrual& d, time_point t, int n, Gap gap) {
  for (int i = 0; i < n; ++i) {
    t += gap();
    d.beat(t);
  }
  return t;
}

} // namespace

TEST_CASE("phi_accrual: regular heartbeats tolerate the interval plus the "
          "acceptable pause, and suspicion grows with the silence",
          "[transport][detector]") {
  phi_accrual d;
  auto t = beat(d, time_point{} + 1h, 60, [] { return 500ms; });
  CHECK(d.mean() == Approx(0.5).epsilon(0.02));
  // 0.5 s + 3 s, plus ~5.2 spreads of the 100 ms floor: ~4.0 s, as CAF's
  // fixed 4 s timeout was.
  CHECK(seconds(d.tolerated()) == Approx(4.02).margin(0.05));
  CHECK(d.phi(t + 500ms) < 0.01);
  CHECK(d.phi(t + 3500ms) == Approx(0.3).margin(0.05));
  CHECK(d.phi(t + 4s) < 8);
  CHECK(d.phi(t + 4100ms) > 8);
  double last = 0;
  for (auto s = 0ms; s <= 6s; s += 100ms) {
    CHECK(d.phi(t + s) >= last);
    last = d.phi(t + s);
  }
}

TEST_CASE("phi_accrual: before any heartbeat the interval is the estimate",
          "[transport][detector]") {
  phi_settings s;
  s.heartbeat_interval = 1000ms;
  phi_accrual d{s};
  CHECK(d.mean() == Approx(1.0));
  CHECK(d.phi(time_point{} + 1h) == 0);
  // 1 s + 3 s, and 5.2 spreads of 250 ms.
  CHECK(seconds(d.tolerated()) == Approx(5.3).margin(0.05));
}

TEST_CASE("phi_accrual: a busy peer's irregular heartbeats buy it more "
          "silence, up to max_silence, and a regular spell takes it back",
          "[transport][detector]") {
  phi_accrual d;
  std::mt19937 gen{7};
  std::uniform_int_distribution<int> ms{300, 2000};
  auto t = beat(d, time_point{} + 1h, 100,
                [&] { return std::chrono::milliseconds{ms(gen)}; });
  auto busy = seconds(d.tolerated());
  // Mean ~1.15 s, spread ~0.5 s: ~6.6 s.
  CHECK(busy > 6.0);
  CHECK(busy < 8.0);
  // A silence of 5 s after such a history is not suspect; it would be
  // after regular heartbeats (previous test).
  CHECK(d.phi(t + 5s) < 3);
  // Very irregular: capped.
  int i = 0;
  t = beat(d, t, 100, [&] { return ++i % 2 ? 500ms : 3000ms; });
  CHECK(d.tolerated() == 10s);
  // 100 regular beats later the spell is forgotten.
  beat(d, t, 100, [] { return 500ms; });
  CHECK(seconds(d.tolerated()) == Approx(4.02).margin(0.05));
}

TEST_CASE("phi_accrual: the threshold and the pause are the user's",
          "[transport][detector]") {
  phi_settings s;
  s.acceptable_pause = 1000ms;
  s.threshold = 3;
  phi_accrual d{s};
  beat(d, time_point{} + 1h, 20, [] { return 500ms; });
  // 0.5 + 1 s, and 3.1 spreads of 100 ms (phi 3).
  CHECK(seconds(d.tolerated()) == Approx(1.81).margin(0.05));
}
