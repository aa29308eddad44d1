// monitoring::history: a task's series in fixed memory, fine then coarse,
// sent whole to a new subscriber and by tail to the others.

#include <catch2/catch.hpp>

#include <cmath>

#include "monitor_history.hpp"

using namespace actorflow::monitoring;

namespace {

constexpr int64_t s = 1'000'000;

} // namespace

TEST_CASE("monitor_history: the finest tier keeps its last samples in order, "
          "the values of each series by name, NaN where a sample lacked it") {
  history h{{{s, 4}}, 8};
  for (int64_t i = 1; i <= 6; ++i) {
    history::values v{{"a", static_cast<double>(i)}};
    if (i % 2 == 0)
      v.emplace_back("b", 10.0 * i);
    h.add(i * s, v);
  }
  auto all = h.all();
  REQUIRE(all.t_us == std::vector<int64_t>{3 * s, 4 * s, 5 * s, 6 * s});
  REQUIRE(all.series["a"] == std::vector<double>{3, 4, 5, 6});
  auto& b = all.series["b"];
  REQUIRE(b.size() == 4);
  CHECK(std::isnan(b[0]));
  CHECK(b[1] == 40);
  CHECK(std::isnan(b[2]));
  CHECK(b[3] == 60);
  CHECK(h.samples() == 6);
}

TEST_CASE("monitor_history: older samples survive as averages of the coarse "
          "tier, placed before the fine ones without overlap") {
  history h{{{s, 5}, {10 * s, 100}}, 4};
  // 60 s of the value t (seconds).
  for (int64_t t = 0; t < 60; ++t)
    h.add(t * s, {{"v", static_cast<double>(t)}});
  auto all = h.all();
  // Fine: 55..59. Coarse buckets [0,10) .. [40,50) end at 10..50 s; the one
  // ending at 50 s is older than the fine tier's oldest (55 s); the bucket
  // [50,60) is still being filled.
  REQUIRE(all.t_us.size() == 10);
  CHECK(all.t_us[0] == 10 * s);
  CHECK(all.series["v"][0] == Approx(4.5));   // mean of 0..9
  CHECK(all.series["v"][4] == Approx(44.5));  // mean of 40..49
  CHECK(all.t_us[5] == 55 * s);
  CHECK(all.series["v"][5] == 55);
  for (size_t i = 1; i < all.t_us.size(); ++i)
    CHECK(all.t_us[i] > all.t_us[i - 1]);
}

TEST_CASE("monitor_history: since() gives a subscriber what was sampled after "
          "its last update, at most what the fine tier holds") {
  history h{{{s, 3}}, 4};
  h.add(1 * s, {{"x", 1}});
  h.add(2 * s, {{"x", 2}});
  auto seen = h.samples();
  CHECK(h.since(seen).t_us.empty());
  h.add(3 * s, {{"x", 3}});
  auto tail = h.since(seen);
  REQUIRE(tail.t_us == std::vector<int64_t>{3 * s});
  CHECK(tail.series["x"] == std::vector<double>{3});
  for (int64_t i = 4; i <= 9; ++i)
    h.add(i * s, {{"x", static_cast<double>(i)}});
  // 7 samples since, the tier holds 3.
  CHECK(h.since(seen).t_us == std::vector<int64_t>{7 * s, 8 * s, 9 * s});
}

TEST_CASE("monitor_history: memory is fixed: series past the limit are "
          "dropped, never grown") {
  history h{{{s, 2}}, 2};
  h.add(s, {{"a", 1}, {"b", 2}, {"c", 3}});
  auto all = h.all();
  CHECK(all.series.size() == 2);
  CHECK(all.series.count("c") == 0);
  CHECK(h.names() == std::vector<std::string>{"a", "b"});
}
