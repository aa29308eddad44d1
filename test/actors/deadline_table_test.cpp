// deadline_table: the step deadlines of the master and the session's
// client actor without CAF request timeouts.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include "actorflow/actors/deadline_table.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

using table = deadline_table<int>;

} // namespace

TEST_CASE("deadline_table: the first deadline arms a check, later ones "
          "ride on it",
          "[deadlines]") {
  table t;
  auto now = table::clock_type::now();
  auto first = t.add(1, now + 100ms, now);
  REQUIRE(first);
  CHECK(*first == 100ms);
  // Same or later deadline: the check in flight comes first.
  CHECK_FALSE(t.add(2, now + 100ms, now));
  CHECK_FALSE(t.add(3, now + 300ms, now));
  // An earlier one needs its own check.
  auto earlier = t.add(4, now + 20ms, now + 5ms);
  REQUIRE(earlier);
  CHECK(*earlier == 15ms);
  CHECK(t.size() == 4);
}

TEST_CASE("deadline_table: a check expires what is due and re-arms for "
          "the rest",
          "[deadlines]") {
  table t;
  auto now = table::clock_type::now();
  REQUIRE(t.add(1, now + 100ms, now));
  CHECK_FALSE(t.add(2, now + 250ms, now));
  CHECK_FALSE(t.add(3, now + 400ms, now));
  t.erase(2); // answered in time
  std::optional<table::duration> rearm;
  CHECK(t.expire(now + 50ms, rearm).empty()); // an early (stale) check
  CHECK_FALSE(rearm);                         // the armed one still comes
  auto due = t.expire(now + 100ms, rearm);
  CHECK(due == std::vector<int>{1});
  REQUIRE(rearm);
  CHECK(*rearm == 300ms); // for key 3 (key 2 was erased)
  due = t.expire(now + 400ms, rearm);
  CHECK(due == std::vector<int>{3});
  CHECK_FALSE(rearm);
  CHECK(t.size() == 0);
  // Empty again: the next deadline arms a new check.
  CHECK(t.add(5, now + 500ms, now + 400ms));
}

TEST_CASE("deadline_table: several due at once, in any order",
          "[deadlines]") {
  table t;
  auto now = table::clock_type::now();
  REQUIRE(t.add(1, now + 30ms, now));
  REQUIRE(t.add(2, now + 10ms, now));
  CHECK_FALSE(t.add(3, now + 20ms, now));
  std::optional<table::duration> rearm;
  auto due = t.expire(now + 35ms, rearm);
  std::sort(due.begin(), due.end());
  CHECK(due == std::vector<int>{1, 2, 3});
  CHECK_FALSE(rearm);
}
