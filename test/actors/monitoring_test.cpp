// The instrumentation (actors/monitoring.hpp, instrumented.hpp) and the
// monitor actor: counts, mailbox depths, busy time, bounded records, step
// percentiles, snapshots and subscriptions.

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "actorflow/actors/monitoring.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "common/test_system.hpp"
#include "actorflow/actors/instrumented.hpp"

using namespace actorflow;
using actorflow::testing::test_system;
using namespace actorflow::monitoring;
using json = nlohmann::json;

namespace {

constexpr auto max_wait = std::chrono::seconds(30);

std::shared_ptr<actor_record> record_for(uint64_t id) {
  for (auto& rec : registry::instance().live())
    if (rec->id == id)
      return rec;
  return nullptr;
}

// Holds its thread for `ms` on an int message (a test actor making a
// backlog on purpose), answers "done" with the count it saw.
caf::behavior counter(caf::event_based_actor*) {
  auto seen = std::make_shared<int>(0);
  return {
    [seen](int ms) {
      ++*seen;
      if (ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    },
    [seen](const std::string&) { return *seen; },
  };
}

} // namespace

TEST_CASE("monitoring: an instrumented actor counts messages, busy time and "
          "its mailbox depth",
          "[monitoring]") {
  auto& sys = test_system();
  auto a = spawn_instrumented(sys, {actor_kind::queue, "q1", "c1", "/job:t"},
                              counter);
  auto rec = record_for(a.id());
  REQUIRE(rec != nullptr);
  CHECK(rec->who.name == "q1");
  CHECK(rec->who.container == "c1");
  CHECK(rec->who.kind == actor_kind::queue);
  // One slow message, then 50 that wait behind it.
  caf::anon_send(a, 30);
  for (int i = 0; i < 50; ++i)
    caf::anon_send(a, 0);
  caf::scoped_actor self{sys};
  int seen = 0;
  self->request(a, max_wait, std::string{"done"})
    .receive([&](int n) { seen = n; },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(seen == 51);
  auto s = rec->read();
  // The reply is sent from within the last message's handling: allow for
  // its own count to land a moment later.
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  // Polls the record, which signals nothing when a count lands; bounded by
  // the deadline.
  while (s.messages < 52 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = rec->read();
  }
  CHECK(s.messages == 52);
  CHECK(s.mailbox == 0);
  // After the slow one, the others (and the request) were waiting.
  CHECK(s.mailbox_max >= 40);
  CHECK(s.busy_ns >= 30'000'000);
  CHECK(s.busy_max_ns >= 30'000'000);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("monitoring: an ended actor leaves the live set for a bounded "
          "list of ended ones with its exit reason",
          "[monitoring]") {
  auto& sys = test_system();
  std::vector<caf::actor> actors;
  for (int i = 0; i < 100; ++i)
    actors.push_back(spawn_instrumented(
      sys, {actor_kind::variable, "v" + std::to_string(i), "", "/job:e"},
      counter));
  for (auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  auto alive = [&] {
    size_t n = 0;
    for (auto& a : actors)
      n += record_for(a.id()) != nullptr ? 1 : 0;
    return n;
  };
  // Polls the registry, which signals nothing when a record leaves the live
  // set; bounded by the deadline.
  while (alive() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(alive() == 0);
  auto ended = registry::instance().ended();
  CHECK(ended.size() <= registry::max_ended);
  REQUIRE_FALSE(ended.empty());
  auto& last = ended.back();
  CHECK(last.who.task == "/job:e");
  CHECK(last.reason.find("user_shutdown") != std::string::npos);
  CHECK(last.ended_us >= last.started_us);
}

TEST_CASE("monitoring: disabled, a spawn has no record", "[monitoring]") {
  auto& sys = test_system();
  set_enabled(false);
  auto a = spawn_instrumented(sys, {actor_kind::reader, "off", "", ""},
                              counter);
  set_enabled(true);
  CHECK(record_for(a.id()) == nullptr);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("monitoring: a step record's percentiles, codes and last errors",
          "[monitoring]") {
  step_record steps;
  CHECK(steps.read().total == 0);
  CHECK(steps.read().p50_us == 0);
  for (int d = 1; d <= 100; ++d)
    steps.finished(d, 0, "");
  for (int i = 0; i < 10; ++i)
    steps.finished(1000, 14, "Lost task /job:ps/replica:0/task:0 #"
                               + std::to_string(i));
  auto s = steps.read();
  CHECK(s.total == 110);
  CHECK(s.errors == 10);
  CHECK(s.by_code.at(0) == 100);
  CHECK(s.by_code.at(14) == 10);
  CHECK(s.p50_us >= 50);
  CHECK(s.p50_us <= 60);
  CHECK(s.p99_us == 1000);
  CHECK(s.last_us == 1000);
  // Only the last 8 errors are kept.
  REQUIRE(s.last_errors.size() == 8);
  CHECK(s.last_errors.back().message.find("#9") != std::string::npos);
  CHECK(s.last_errors.back().code == 14);
  // The durations kept are the last ring_size.
  for (size_t i = 0; i < 2 * step_record::ring_size; ++i)
    steps.finished(7, 0, "");
  s = steps.read();
  CHECK(s.p50_us == 7);
  CHECK(s.p99_us == 7);
}

TEST_CASE("monitoring: the monitor actor's snapshot and subscription",
          "[monitoring]") {
  auto& sys = test_system();
  task_options opts;
  opts.job = "mon";
  opts.task = 0;
  opts.cluster["/job:mon/replica:0/task:0"] = "127.0.0.1:1";
  auto task = caf::actor_cast<master_actor>(spawn_task(sys, opts));
  caf::scoped_actor self{sys};
  monitor_actor mon;
  self->request(task, max_wait, get_monitor_atom_v)
    .receive([&](monitor_actor& m) { mon = m; },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  REQUIRE(mon);
  // The same monitor each time.
  self->request(task, max_wait, get_monitor_atom_v)
    .receive([&](monitor_actor& m) { CHECK(m == mon); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  json doc;
  self->request(mon, max_wait, monitor_snapshot_atom_v)
    .receive([&](std::string& text) { doc = json::parse(text); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  CHECK(doc["task"] == "/job:mon/replica:0/task:0");
  CHECK(doc["address"] == "127.0.0.1:1");
  CHECK(doc["cluster"]["mon"][0] == "127.0.0.1:1");
  CHECK(doc["delta"] == false);
  CHECK(doc["process"]["rss_bytes"].get<int64_t>() > 0);
  bool has_task = false;
  for (auto& a : doc["actors"]) {
    // Only this task's actors (and the process's).
    auto owner = a["task"].get<std::string>();
    CHECK((owner.empty() || owner == "/job:mon/replica:0/task:0"));
    has_task |= a["kind"] == "task";
  }
  CHECK(has_task);
  // Bad intervals are InvalidArgument, naming the task; nothing changes.
  for (int64_t bad : {int64_t{0}, int64_t{10}, int64_t{600000}}) {
    self->request(mon, max_wait, monitor_subscribe_atom_v, bad,
                  caf::actor_cast<caf::actor>(self))
      .receive(
        [&](status& st) {
          CHECK(st.code() == error_code::invalid_argument);
          CHECK(st.message().find("/job:mon/replica:0/task:0")
                != std::string::npos);
        },
        [&](caf::error& err) { FAIL(caf::to_string(err)); });
  }
  // The task actor counts a message after its handler returned, so the
  // reply to the last get_monitor may come before its count: wait until
  // two snapshots agree on the task's record (polled: the record signals
  // nothing; bounded by 200 tries), or the first update could be older
  // than the second.
  auto task_record = [&] {
    json out;
    self->request(mon, max_wait, monitor_snapshot_atom_v)
      .receive(
        [&](std::string& text) {
          auto snapshot = json::parse(text);
          for (auto& a : snapshot["actors"])
            if (a["kind"] == "task")
              out = a;
        },
        [&](caf::error& err) { FAIL(caf::to_string(err)); });
    return out;
  };
  auto last = task_record();
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto now = task_record();
    if (now == last)
      break;
    last = std::move(now);
  }
  self->request(mon, max_wait, monitor_subscribe_atom_v, int64_t{50},
                caf::actor_cast<caf::actor>(self))
    .receive([&](status& st) { CHECK(st.ok()); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  std::vector<json> updates;
  for (int i = 0; i < 3; ++i)
    self->receive(
      [&](monitor_update_atom, std::string& text) {
        CHECK(self->current_sender() == mon.address());
        updates.push_back(json::parse(text));
      },
      caf::after(max_wait) >> [&] { FAIL("no monitor update"); });
  REQUIRE(updates.size() == 3);
  CHECK(updates[0]["delta"] == false);
  CHECK_FALSE(updates[0]["actors"].empty());
  for (size_t i = 1; i < updates.size(); ++i) {
    CHECK(updates[i]["delta"] == true);
    CHECK(updates[i].contains("removed"));
    // Only what changed: the task actor handled nothing since.
    for (auto& a : updates[i]["actors"])
      CHECK(a["kind"] != "task");
  }
  caf::anon_send_exit(task, caf::exit_reason::user_shutdown);
}

TEST_CASE("monitoring: metrics_text is Prometheus' text format with the "
          "task's actors, steps and process",
          "[monitoring]") {
  auto& sys = test_system();
  task_options opts;
  opts.job = "prom";
  opts.task = 1;
  opts.cluster["/job:prom/replica:0/task:1"] = "127.0.0.1:2";
  const std::string task = "/job:prom/replica:0/task:1";
  auto q = spawn_instrumented(
    sys, {.kind = actor_kind::queue, .name = "in\"put", .container = "c",
          .task = task},
    counter);
  caf::scoped_actor self{sys};
  auto steps = registry::instance().steps(task);
  steps->finished(300, 0, "");
  steps->finished(4000, 0, "");
  steps->finished(20'000'000, 14, "lost");
  auto text = metrics_text(sys, opts);
  INFO(text);
  // Every line is a comment or "name{labels} value"; a family's samples
  // follow its HELP and TYPE and nothing else comes between them.
  static const std::regex sample_line{
    R"re(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|NaN))re"};
  std::istringstream lines{text};
  std::string line;
  std::string family;
  std::set<std::string> families;
  std::map<std::string, double> values;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      CHECK(families.insert(family).second);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      CHECK(line.substr(7, family.size()) == family);
      continue;
    }
    std::smatch m;
    REQUIRE(std::regex_match(line, m, sample_line));
    CHECK(m[1].str().rfind(family, 0) == 0);
    values[line.substr(0, line.rfind(' '))] = std::stod(m[5].str());
  }
  for (auto* name :
       {"actorflow_actor_mailbox_size", "actorflow_actor_messages_total",
        "actorflow_actor_busy_seconds_total", "actorflow_queue_size",
        "actorflow_steps_total", "actorflow_step_seconds",
        "actorflow_peer_bytes_total", "process_resident_memory_bytes",
        "process_cpu_seconds_total", "process_open_fds"})
    CHECK(families.count(name) == 1);
  auto id = std::to_string(q.id());
  CHECK(values.count("actorflow_actor_mailbox_size{task=\"" + task
                     + "\",kind=\"queue\",actor=\"in\\\"put\",actor_id=\""
                     + id + "\"}")
        == 1);
  CHECK(values.at("actorflow_queue_size{task=\"" + task
                  + "\",queue=\"in\\\"put\",container=\"c\"}")
        == 0);
  CHECK(values.at("actorflow_steps_total{task=\"" + task
                  + "\",code=\"OK\"}")
        == 2);
  CHECK(values.at("actorflow_steps_total{task=\"" + task
                  + "\",code=\"Unavailable\"}")
        == 1);
  // The histogram is cumulative; +Inf is the count.
  auto bucket = [&](const std::string& le) {
    return values.at("actorflow_step_seconds_bucket{task=\"" + task
                     + "\",le=\"" + le + "\"}");
  };
  CHECK(bucket("0.0001") == 0);
  CHECK(bucket("0.0005") == 1);
  CHECK(bucket("0.005") == 2);
  CHECK(bucket("10") == 2);
  CHECK(bucket("+Inf") == 3);
  CHECK(values.at("actorflow_step_seconds_count{task=\"" + task + "\"}")
        == 3);
  CHECK(values.at("actorflow_step_seconds_sum{task=\"" + task + "\"}")
        == Approx(20.0043));
  CHECK(values.at("process_resident_memory_bytes") > 0);
  // The figures move: a message more for the queue actor.
  self->request(q, max_wait, std::string{"done"})
    .receive([](int) {}, [](caf::error& err) { FAIL(caf::to_string(err)); });
  // The reply leaves from inside the handler, before the record counts
  // the message: wait (briefly) for the count.
  auto counted = "actorflow_actor_messages_total{task=\"" + task
                 + "\",kind=\"queue\",actor=\"in\\\"put\",actor_id=\"" + id
                 + "\"} 1\n";
  auto later = metrics_text(sys, opts);
  // Polls the metrics text, as the record signals nothing when it counts;
  // bounded by 200 tries.
  for (int i = 0; i < 200 && later.find(counted) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    later = metrics_text(sys, opts);
  }
  CHECK(later.find(counted) != std::string::npos);
  caf::anon_send_exit(q, caf::exit_reason::user_shutdown);
}
