// The console's rates (apps/console/cluster_watch.hpp, merge_update) from
// monitor documents made up here: a task restarted under the console (a
// new process on the same address, the same actor ids, smaller counters)
// starts its rates over, as Prometheus takes a counter reset, instead of
// subtracting the old process's counters (issue 33: 4.45e18 messages/s).

#include <catch2/catch.hpp>

#include "console/cluster_watch.hpp"

using namespace actorflow::apps;

namespace {

struct counters {
  int64_t now_us = 0;
  uint64_t messages = 0;
  uint64_t busy_us = 0;
  uint64_t steps = 0;
  uint64_t bytes = 0;
  double updates = 0;
  int64_t actor_since_us = 1;
};

// One whole document of process `pid` started at `started_us`: actor 7
// and one channel link.
json doc(int64_t pid, int64_t started_us, const counters& c) {
  json actor{{"id", 7},
             {"kind", "variable"},
             {"since_us", c.actor_since_us},
             {"messages", c.messages},
             {"busy_us", c.busy_us},
             {"gauges", {{"updates", c.updates}}}};
  json link{{"peer", "/job:ps/replica:0/task:0"},
            {"direction", "in"},
            {"bytes", c.bytes}};
  return json{{"now_us", c.now_us},
              {"delta", false},
              {"process", {{"pid", pid}, {"started_us", started_us}}},
              {"actors", json::array({actor})},
              {"steps", {{"total", c.steps}}},
              {"channel", json::array({link})}};
}

const json& actor(const task_view& v) {
  return v.node["actors"][0];
}

} // namespace

TEST_CASE("console: rates of one process are the counters' differences",
          "[console]") {
  task_view v;
  merge_update(v, doc(100, 5, {10'000'000, 5000, 2'000'000, 800, 1 << 30, 40}));
  // One sample: no rate yet.
  CHECK_FALSE(actor(v).contains("messages_per_s"));
  CHECK_FALSE(v.node["steps"].contains("per_s"));
  merge_update(v, doc(100, 5,
                      {11'000'000, 6000, 2'500'000, 900, (1 << 30) + 1000,
                       50}));
  CHECK(actor(v)["messages_per_s"].get<double>() == Approx(1000));
  CHECK(actor(v)["busy_percent"].get<double>() == Approx(50));
  CHECK(actor(v)["updates_per_s"].get<double>() == Approx(10));
  CHECK(v.node["steps"]["per_s"].get<double>() == Approx(100));
  CHECK(v.node["channel"][0]["bytes_per_s"].get<double>() == Approx(1000));
  CHECK(v.samples == 2);
  CHECK(v.restarts == 0);
}

TEST_CASE("console: a task restarted under the console starts its rates "
          "over instead of subtracting the old process's counters",
          "[console]") {
  task_view v;
  merge_update(v, doc(100, 5, {10'000'000, 5000, 2'000'000, 800, 1 << 30, 40}));
  merge_update(v, doc(100, 5,
                      {11'000'000, 6000, 2'500'000, 900, (1 << 30) + 1000,
                       50}));
  // The new process: other pid and start, the same actor id, counters
  // from zero, four seconds later.
  merge_update(v, doc(200, 14'000'000, {15'000'000, 10, 1000, 3, 500, 1}));
  CHECK(v.restarts == 1);
  CHECK(v.samples == 1);
  CHECK_FALSE(actor(v).contains("messages_per_s"));
  CHECK_FALSE(actor(v).contains("busy_percent"));
  CHECK_FALSE(v.node["steps"].contains("per_s"));
  CHECK_FALSE(v.node["channel"][0].contains("bytes_per_s"));
  merge_update(v, doc(200, 14'000'000, {16'000'000, 110, 501'000, 13, 1500, 3}));
  CHECK(actor(v)["messages_per_s"].get<double>() == Approx(100));
  CHECK(actor(v)["busy_percent"].get<double>() == Approx(50));
  CHECK(actor(v)["updates_per_s"].get<double>() == Approx(2));
  CHECK(v.node["steps"]["per_s"].get<double>() == Approx(10));
  CHECK(v.node["channel"][0]["bytes_per_s"].get<double>() == Approx(1000));
}

TEST_CASE("console: a new subscription, a counter going backwards and a "
          "reused actor id never give a negative or wrapped rate",
          "[console]") {
  task_view v;
  merge_update(v, doc(100, 5, {10'000'000, 5000, 2'000'000, 800, 4000, 40}));
  SECTION("the first update of a new subscription starts over") {
    v.rebase = true;
    merge_update(v, doc(100, 5, {12'000'000, 7000, 2'100'000, 900, 5000, 41}));
    CHECK_FALSE(actor(v).contains("messages_per_s"));
    CHECK(v.restarts == 0);
  }
  SECTION("a counter below its last value was reset: it counts from zero") {
    merge_update(v, doc(100, 5, {12'000'000, 400, 2'100'000, 20, 300, 41}));
    CHECK(actor(v)["messages_per_s"].get<double>() == Approx(200));
    CHECK(v.node["steps"]["per_s"].get<double>() == Approx(10));
    CHECK(v.node["channel"][0]["bytes_per_s"].get<double>() == Approx(150));
  }
  SECTION("the same id with another start is another actor") {
    counters c{12'000'000, 7000, 2'100'000, 900, 5000, 41};
    c.actor_since_us = 2;
    merge_update(v, doc(100, 5, c));
    CHECK_FALSE(actor(v).contains("messages_per_s"));
    // The task's own counters still have their rates.
    CHECK(v.node["steps"]["per_s"].get<double>() == Approx(50));
  }
}
