// The console's model from documents made up here (issue 33): a task's
// history and log lines merged from its updates (task_view.hpp), the
// alert rules firing and clearing (alerts.hpp), links named by the task at
// their other end and the topology (topology.hpp), a recording read back
// (recording.hpp).

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "actorflow/support/temp_dir.hpp"
#include "console/alerts.hpp"
#include "console/recording.hpp"
#include "console/task_view.hpp"
#include "console/topology.hpp"

using namespace actorflow::apps;

namespace {

constexpr int64_t s = 1'000'000;

json base_doc(int64_t now_us) {
  return json{{"now_us", now_us},
              {"delta", false},
              {"process", {{"pid", 1}, {"started_us", 1}}},
              {"actors", json::array()},
              {"steps", {{"total", 0}}},
              {"channel", json::array()},
              {"training", json::array()}};
}

// A task that is up with history series `series` sampled each second
// from `t0` (values of one series per element).
task_view with_history(const std::string& task, int64_t t0,
                       std::map<std::string, std::vector<json>> series) {
  task_view v;
  v.task = task;
  v.state = "up";
  json times = json::array();
  size_t n = 0;
  for (auto& [name, values] : series)
    n = std::max(n, values.size());
  for (size_t i = 0; i < n; ++i)
    times.push_back(t0 + static_cast<int64_t>(i) * s);
  auto doc = base_doc(t0 + static_cast<int64_t>(n) * s);
  json js = json::object();
  for (auto& [name, values] : series)
    js[name] = values;
  doc["history"] = {{"t_us", times}, {"series", js}};
  merge_update(v, doc);
  return v;
}

std::vector<json> ramp(size_t n, double from, double step) {
  std::vector<json> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(from + step * static_cast<double>(i));
  return out;
}

} // namespace

TEST_CASE("console: a task's history comes whole with the first update and "
          "grows by each update's tail, a series new in a tail padded",
          "[console]") {
  task_view v;
  auto first = base_doc(10 * s);
  first["history"] = {{"t_us", {8 * s, 9 * s}},
                      {"series", {{"rss_bytes", {100, 110}}}}};
  merge_update(v, first);
  CHECK_FALSE(v.node.contains("history")); // kept apart from the document
  auto tail = base_doc(11 * s);
  tail["delta"] = true;
  tail["history_tail"] = {{"t_us", {10 * s}},
                          {"series", {{"rss_bytes", {120}},
                                      {"steps_per_s", {5}}}}};
  merge_update(v, tail);
  auto& h = v.past->history;
  CHECK(h["t_us"] == json({8 * s, 9 * s, 10 * s}));
  CHECK(h["series"]["rss_bytes"] == json({100, 110, 120}));
  CHECK(h["series"]["steps_per_s"] == json({nullptr, nullptr, 5}));
}

TEST_CASE("console: log lines are kept once per process, in order, bounded",
          "[console]") {
  task_view v;
  auto first = base_doc(s);
  first["logs"] = {{{"seq", 1}, {"level", "info"}, {"text", "a"}},
                   {{"seq", 2}, {"level", "warning"}, {"text", "b"}}};
  merge_update(v, first);
  // A new subscription to the same process sends its recent lines again.
  v.rebase = true;
  auto again = base_doc(2 * s);
  again["logs"] = {{{"seq", 2}, {"level", "warning"}, {"text", "b"}},
                   {{"seq", 3}, {"level", "error"}, {"text", "c"}}};
  merge_update(v, again);
  REQUIRE(v.past->logs.size() == 3);
  CHECK(v.past->logs.back()["text"] == "c");
  // A restarted process counts from 1 again: its lines are new.
  auto restarted = base_doc(3 * s);
  restarted["process"]["pid"] = 2;
  restarted["logs"] = {{{"seq", 1}, {"level", "info"}, {"text", "d"}}};
  merge_update(v, restarted);
  CHECK(v.past->logs.size() == 4);
  // Bounded.
  auto many = base_doc(4 * s);
  many["process"]["pid"] = 2;
  many["logs"] = json::array();
  for (int i = 2; i < 2 + static_cast<int>(max_log_lines) + 10; ++i)
    many["logs"].push_back({{"seq", i}, {"text", "x"}});
  merge_update(v, many);
  CHECK(v.past->logs.size() == max_log_lines);
}

TEST_CASE("console: a copy taken by a UI does not change under a later update",
          "[console]") {
  task_view v;
  auto first = base_doc(s);
  first["logs"] = {{{"seq", 1}, {"text", "a"}}};
  merge_update(v, first);
  task_view copy = v; // what view() hands out
  auto next = base_doc(2 * s);
  next["logs"] = {{{"seq", 2}, {"text", "b"}}};
  merge_update(v, next);
  CHECK(copy.past->logs.size() == 1);
  CHECK(v.past->logs.size() == 2);
}

TEST_CASE("console: each actor's recent figures, one point per update, "
          "started over when its id is reused",
          "[console]") {
  task_view v;
  auto doc = [](int64_t now, uint64_t messages, int64_t since) {
    auto d = base_doc(now);
    d["actors"] = {{{"id", 3},
                    {"kind", "queue"},
                    {"since_us", since},
                    {"messages", messages},
                    {"busy_us", 0},
                    {"mailbox", 4}}};
    return d;
  };
  merge_update(v, doc(1 * s, 0, 1));
  merge_update(v, doc(2 * s, 100, 1));
  auto& a = v.past->actor_history.at(3);
  REQUIRE(a.t_us.size() == 2);
  CHECK(std::isnan(a.messages_per_s[0])); // one sample: no rate
  CHECK(a.messages_per_s[1] == Approx(100));
  CHECK(a.mailbox[1] == 4);
  merge_update(v, doc(3 * s, 5, 2)); // another actor under id 3
  CHECK(v.past->actor_history.at(3).t_us.size() == 1);
}

TEST_CASE("console alerts: each rule fires on what holds and clears when it "
          "stops, keeping both times",
          "[console]") {
  alert_book book;
  std::vector<task_view> tasks(1);
  tasks[0].task = "/job:ps/replica:0/task:0";
  tasks[0].state = "down";
  tasks[0].error = "lost: unreachable";
  book.evaluate(tasks, 100 * s);
  REQUIRE(book.active().size() == 1);
  CHECK(book.active()[0].rule == "task_down");
  CHECK(book.active()[0].message.find("lost: unreachable")
        != std::string::npos);
  tasks[0].state = "up";
  tasks[0].has_node = true;
  book.evaluate(tasks, 105 * s);
  CHECK(book.active().empty());
  REQUIRE(book.recent().size() == 1);
  CHECK(book.recent()[0].fired_us == 100 * s);
  CHECK(book.recent()[0].cleared_us == 105 * s);
  CHECK(book.to_json()["recent"][0]["cleared_us"] == 105 * s);
}

TEST_CASE("console alerts: a global step that stopped moving, a loss that "
          "jumped, a growing mailbox, a growing RSS",
          "[console]") {
  alert_rules rules;
  rules.step_stalled_s = 10;
  // Moved for 5 s, then still for 20 s.
  auto steps = ramp(5, 0, 10);
  for (int i = 0; i < 20; ++i)
    steps.push_back(40);
  auto v = with_history("/job:worker/replica:0/task:0", 0, {{"global_step",
                                                            steps}});
  auto c = alert_conditions(rules, v, 25 * s);
  REQUIRE(c.count("step_stalled"));
  CHECK(c["step_stalled"].find("40") != std::string::npos);
  // A step that never moved (an idle cluster) is no stall.
  v = with_history("w", 0, {{"global_step", std::vector<json>(25, 7)}});
  CHECK_FALSE(alert_conditions(rules, v, 25 * s).count("step_stalled"));

  auto loss = std::vector<json>(20, 0.5);
  loss.push_back(9.0);
  v = with_history("w", 0, {{"loss", loss}});
  c = alert_conditions(rules, v, 21 * s);
  REQUIRE(c.count("loss_jump"));
  CHECK(c["loss_jump"].find("18x") != std::string::npos);
  loss.back() = 0.6;
  v = with_history("w", 0, {{"loss", loss}});
  CHECK_FALSE(alert_conditions(rules, v, 21 * s).count("loss_jump"));

  v = with_history("w", 0, {{"mailbox_max", ramp(12, 0, 3)}});
  CHECK(alert_conditions(rules, v, 12 * s).count("mailbox_growing"));
  auto dip = ramp(12, 0, 3);
  dip[8] = 0;
  v = with_history("w", 0, {{"mailbox_max", dip}});
  CHECK_FALSE(alert_conditions(rules, v, 12 * s).count("mailbox_growing"));

  rules.rss_growing_s = 20;
  v = with_history("w", 0, {{"rss_bytes", ramp(30, 100e6, 2e6)}});
  c = alert_conditions(rules, v, 30 * s);
  REQUIRE(c.count("rss_growing"));
  // Flat RSS, or a window the history does not cover yet: nothing.
  v = with_history("w", 0, {{"rss_bytes", std::vector<json>(30, 100e6)}});
  CHECK_FALSE(alert_conditions(rules, v, 30 * s).count("rss_growing"));
  v = with_history("w", 20 * s, {{"rss_bytes", ramp(10, 100e6, 5e6)}});
  CHECK_FALSE(alert_conditions(rules, v, 30 * s).count("rss_growing"));
}

TEST_CASE("console alerts: a NaN loss (null in JSON) fires loss_nan",
          "[console]") {
  task_view v;
  v.task = "w";
  v.state = "up";
  auto d = base_doc(s);
  d["training"] = {{{"task", "w"}, {"global_step", 3}, {"loss", nullptr}}};
  merge_update(v, d);
  CHECK(alert_conditions({}, v, s).count("loss_nan"));
  alert_rules off;
  off.set("loss_nan=off");
  CHECK_FALSE(alert_conditions(off, v, s).count("loss_nan"));
}

TEST_CASE("console alerts: --alert NAME=VALUE, with clear refusals",
          "[console]") {
  alert_rules r;
  r.set("step_stalled_s=30");
  CHECK(r.step_stalled_s == 30);
  r.set("mailbox_growing=off");
  CHECK(r.mailbox_growing == 0);
  r.set("task_down=off");
  CHECK_FALSE(r.task_down);
  CHECK_THROWS_WITH(r.set("bogus=1"), Catch::Contains("no rule bogus"));
  CHECK_THROWS_WITH(r.set("loss_jump=-2"),
                    Catch::Contains("not a positive number"));
  CHECK_THROWS_WITH(r.set("task_down=5"), Catch::Contains("takes on or off"));
  CHECK_THROWS_WITH(r.set("loss_jump"), Catch::Contains("NAME=VALUE"));
}

TEST_CASE("console topology: links are named by the task at their other end "
          "by matching the two ends of each connection",
          "[console]") {
  std::vector<task_view> tasks(2);
  tasks[0].task = "/job:ps/replica:0/task:0";
  tasks[1].task = "/job:worker/replica:0/task:0";
  for (auto& v : tasks) {
    v.state = "up";
    v.has_node = true;
    v.node = base_doc(s);
  }
  // worker -> ps: the worker's link from 127.0.0.1:5001 to the ps's inbox.
  tasks[1].node["channel"] = {{{"peer", "127.0.0.1:7000"},
                               {"local", "127.0.0.1:5001"},
                               {"direction", "out"},
                               {"up", true},
                               {"bytes_per_s", 1000.0}}};
  tasks[0].node["channel"] = {{{"peer", "127.0.0.1:5001"},
                               {"direction", "in"},
                               {"up", true}},
                              {{"peer", "127.0.0.1:7100"},
                               {"local", "127.0.0.1:6001"},
                               {"peer_task", "/job:worker/replica:0/task:0"},
                               {"direction", "out"},
                               {"up", true},
                               {"bytes_per_s", 5000.0}}};
  tasks[0].node["peers"] = {{{"peer", "/job:worker/replica:0/task:0"},
                             {"up", true}}};
  name_links(tasks);
  CHECK(tasks[0].node["channel"][0]["peer_task"]
        == "/job:worker/replica:0/task:0");
  CHECK(tasks[1].node["channel"][0]["peer_task"] == "/job:ps/replica:0/task:0");
  auto edges = topology(tasks);
  REQUIRE(edges.size() == 1);
  auto& e = edges[0];
  CHECK(e.a == "/job:ps/replica:0/task:0");
  CHECK(*e.caf_up);
  CHECK(*e.channel_up);
  CHECK(*e.bytes_per_s_ab == 5000); // ps -> worker
  CHECK(*e.bytes_per_s_ba == 1000); // worker -> ps
  auto j = to_json(edges);
  CHECK(j[0]["b"] == "/job:worker/replica:0/task:0");
  // A peer down shows as such.
  tasks[0].node["peers"][0]["up"] = false;
  CHECK_FALSE(*topology(tasks)[0].caf_up);
}

TEST_CASE("console recording: written lines read back in order, a cut last "
          "line ends it, another file is refused by name",
          "[console]") {
  actorflow::support::temp_dir dir;
  auto path = (dir.path / "run.jsonl").string();
  {
    recorder rec{path, {{"actorflow_console_recording", 1},
                        {"cluster", {{"ps", {"127.0.0.1:1"}}}},
                        {"interval_ms", 500}}};
    rec.write({{"at_us", 1}, {"task", 0}, {"subscribed", true}});
    rec.write({{"at_us", 2}, {"task", 0}, {"update", base_doc(2)}});
  }
  {
    std::ofstream out{path, std::ios::app};
    out << "{\"at_us\": 3, \"task\": 0, \"upd"; // killed mid-line
  }
  recording_reader reader{path};
  CHECK(reader.header()["interval_ms"] == 500);
  json e;
  REQUIRE(reader.next(e));
  CHECK(e["subscribed"] == true);
  REQUIRE(reader.next(e));
  CHECK(e["update"]["now_us"] == 2);
  CHECK_FALSE(reader.next(e));
  auto other = (dir.path / "other.json").string();
  std::ofstream{other} << "{\"cluster\": {}}\n";
  CHECK_THROWS_WITH(recording_reader{other},
                    Catch::Contains("not a recording"));
  CHECK_THROWS_WITH(recording_reader{(dir.path / "none").string()},
                    Catch::Contains("cannot read"));
}
