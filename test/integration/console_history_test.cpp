// actorflow-console over a long run (issue 33): a console that connects
// late sees the run so far (each task's history), the tasks' log lines,
// tensor-channel links and the topology named by task, alerts that fire
// and clear (a ps stopped under training: its workers' global step
// stalls), and a recording of all that replayed after the cluster is gone.

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actorflow/support/temp_dir.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using json = nlohmann::json;

namespace {

const std::string console_path = ACTORFLOW_CONSOLE_PATH;
const std::string train_path = ACTORFLOW_TRAIN_PATH;
constexpr const char* ps = "/job:ps/replica:0/task:0";
constexpr const char* worker0 = "/job:worker/replica:0/task:0";

/// GETs `path` from the console's web UI with its token; null on failure.
json get(const std::string& url, const std::string& path) {
  static const std::regex parts{R"(http://([^:/]+):(\d+)/\?token=(\w+))"};
  std::smatch m;
  if (!std::regex_search(url, m, parts))
    return nullptr;
  httplib::Client http{m[1].str(), std::stoi(m[2].str())};
  http.set_read_timeout(5, 0);
  auto res = http.Get(path.c_str(),
                      {{"Authorization", "Bearer " + m[3].str()}});
  if (!res || res->status != 200)
    return nullptr;
  return json::parse(res->body, nullptr, false);
}

/// Polls `path` until `ok` holds for its answer (up to `limit`); the last
/// answer.
template <class F>
json poll(const std::string& url, const std::string& path, F ok,
          std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  json doc;
  do {
    doc = get(url, path);
    if (!doc.is_discarded() && !doc.is_null() && ok(doc))
      return doc;
    std::this_thread::sleep_for(200ms);
  } while (std::chrono::steady_clock::now() < until);
  return doc;
}

/// `actorflow-train --local N` training the softmax model for longer than
/// a test runs.
std::vector<std::string> training(int workers) {
  return {train_path,    "--local",       std::to_string(workers),
          "--model",     "softmax",       "--train_steps",
          "100000000",   "--log_every",   "200"};
}

/// The cluster `launcher` trains on (its "cluster {...}" line) once it
/// printed `progress`; "" if it did not.
std::string cluster_of(child_process& launcher, const std::string& progress) {
  static const std::regex cluster_line{
    R"(actorflow-train: cluster (\{[^\n]*\}))"};
  std::smatch m;
  if (!launcher.wait_for_line(progress, 60s))
    return {};
  auto log = launcher.err();
  return std::regex_search(log, m, cluster_line) ? m[1].str() : std::string{};
}

/// `actorflow-console --replay FILE` at 1000x speed, --once --json, and
/// `args`.
support::process_result replay_once(const std::string& recording,
                                    std::vector<std::string> args) {
  std::vector<std::string> cmd{console_path, "--replay", recording,
                               "--replay_speed", "1000", "--once", "--json"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return run_process(cmd, 60s);
}

bool has_alert(const json& doc, const char* list, const std::string& rule,
               const std::string& task) {
  for (auto& a : doc["alerts"][list])
    if (a["rule"] == rule && a["task"] == task)
      return true;
  return false;
}

} // namespace

TEST_CASE("console: a late console sees the run so far, the logs, the "
          "topology by task and alerts firing and clearing, and its recording "
          "replays after the cluster is gone",
          "[console]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  child_process launcher{training(2)};
  auto cluster = cluster_of(launcher, "worker/1: worker 1: step ");
  REQUIRE_FALSE(cluster.empty());
  // The run goes on for a while before anyone watches.
  std::this_thread::sleep_for(5s);
  auto console_started_s
    = std::chrono::duration<double>(
        std::chrono::system_clock::now().time_since_epoch())
        .count();
  support::temp_dir dir;
  auto recording = (dir.path / "run.jsonl").string();
  child_process console{{console_path, "--cluster", cluster, "--http",
                         "127.0.0.1:0", "--interval_ms", "500", "--record",
                         recording, "--alert", "step_stalled_s=3"}};
  auto serving = console.wait_for_line("web UI at ", 15s);
  INFO("console: " << console.out() << console.err());
  REQUIRE(serving);
  auto url = serving->substr(serving->find("http://"));

  // The history: what every task sampled before the console connected.
  auto history = poll(url, "/api/history",
                      [](const json& d) { return d["tasks"].size() == 3; },
                      15s);
  REQUIRE(history["tasks"].size() == 3);
  for (auto& [task, h] : history["tasks"].items()) {
    INFO(task);
    auto& t = h["t"];
    REQUIRE(t.size() >= 5);
    CHECK(t[0].get<double>() < console_started_s - 3);
    CHECK(h["series"].contains("rss_bytes"));
    CHECK(h["series"].contains("cpu_percent"));
  }
  auto& w = history["tasks"][worker0]["series"];
  for (auto* series : {"steps_per_s", "global_step", "loss",
                       "examples_per_s"}) {
    INFO(series);
    REQUIRE(w.contains(series));
    int values = 0;
    for (auto& x : w[series])
      values += x.is_number() ? 1 : 0;
    CHECK(values >= 3);
  }
  // Links in the history are named by the task at the other end.
  CHECK(w.contains(std::string{"link_out:"} + ps));
  CHECK(history["tasks"][ps]["series"].contains(std::string{"link_out:"}
                                                + worker0));

  // The logs: a trainer's progress lines, from before the console came.
  auto logs = poll(url, std::string{"/api/logs?task="} + worker0,
                   [](const json& d) { return d["lines"].size() >= 2; }, 10s);
  REQUIRE(logs["lines"].size() >= 2);
  bool progress = false;
  for (auto& l : logs["lines"])
    progress |= l["text"].get<std::string>().find("worker 0: step")
                  != std::string::npos
                && l["level"] == "info";
  INFO(logs.dump().substr(0, 1000));
  CHECK(progress);
  auto last_seq = logs["lines"].back()["seq"].get<uint64_t>();
  auto later = poll(url,
                    std::string{"/api/logs?task="} + worker0 + "&after="
                      + std::to_string(last_seq),
                    [](const json& d) { return !d["lines"].empty(); }, 10s);
  REQUIRE_FALSE(later["lines"].empty());
  CHECK(later["lines"][0]["seq"].get<uint64_t>() > last_seq);

  // Links named by task, and the topology: the ps talks to each worker,
  // tensors flowing both ways.
  auto doc = poll(url, "/api/cluster",
                  [](const json& d) { return d["topology"].size() == 2; },
                  10s);
  REQUIRE(doc["topology"].size() == 2);
  for (auto& e : doc["topology"]) {
    INFO(e.dump());
    CHECK(e["a"] == ps);
    CHECK(e["caf_up"] == true);
    CHECK(e["channel_up"] == true);
    CHECK(e["bytes_per_s_ab"].is_number());
  }
  for (auto& t : doc["tasks"])
    for (auto& l : t["node"]["channel"]) {
      INFO(t["task"] << " " << l.dump());
      CHECK(l.contains("peer_task"));
    }
  // An actor's recent figures, for its charts.
  auto actor_id = doc["tasks"][0]["node"]["actors"][0]["id"].get<uint64_t>();
  auto figures = poll(url,
                      std::string{"/api/actor_history?task="} + ps + "&id="
                        + std::to_string(actor_id),
                      [](const json& d) { return d["t"].size() >= 2; }, 10s);
  CHECK(figures["t"].size() >= 2);
  CHECK(figures["mailbox"].size() == figures["t"].size());
  CHECK(doc["alerts"]["active"].empty());

  // The ps stopped: it is down, and the workers' global step stalls.
  auto ps_pid = pid_of(launcher.err(), "/job:ps/task:0");
  REQUIRE(ps_pid > 0);
  REQUIRE(::kill(ps_pid, SIGSTOP) == 0);
  doc = poll(url, "/api/cluster",
             [](const json& d) {
               return has_alert(d, "active", "task_down", ps)
                      && has_alert(d, "active", "step_stalled", worker0);
             },
             30s);
  INFO(doc["alerts"].dump());
  CHECK(has_alert(doc, "active", "task_down", ps));
  CHECK(has_alert(doc, "active", "step_stalled", worker0));
  CHECK(doc["healthy"] == false);
  REQUIRE(::kill(ps_pid, SIGCONT) == 0);
  auto resumed_s = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  // Back: both clear, kept with when they fired and cleared; and no alert
  // is left (worker 1's step may stall too, and on a loaded host resume
  // later than worker 0's), so that the recording ends healthy.
  doc = poll(url, "/api/cluster",
             [](const json& d) {
               return has_alert(d, "recent", "task_down", ps)
                      && has_alert(d, "recent", "step_stalled", worker0)
                      && d["alerts"]["active"].empty();
             },
             60s);
  INFO(doc["alerts"].dump());
  REQUIRE(has_alert(doc, "recent", "step_stalled", worker0));
  for (auto& a : doc["alerts"]["recent"])
    CHECK(a["cleared_us"].get<int64_t>() > a["fired_us"].get<int64_t>());
  // The console reconnected to the ps: its history is the whole run again,
  // from before the console came to after the stop.
  history = poll(url, "/api/history",
                 [&](const json& d) {
                   auto& t = d["tasks"][ps]["t"];
                   return !t.empty() && t.back().get<double>() > resumed_s + 1;
                 },
                 20s);
  auto& ps_t = history["tasks"][ps]["t"];
  REQUIRE_FALSE(ps_t.empty());
  CHECK(ps_t[0].get<double>() < console_started_s - 3);
  CHECK(ps_t.back().get<double>() > resumed_s + 1);

  console.send_signal(SIGTERM);
  auto st = console.wait(10s);
  REQUIRE(st);
  CHECK(st->code == 0);
  launcher.send_signal(SIGTERM);
  launcher.wait(30s);

  // The cluster is gone; its recording shows the run again, alerts and all.
  // Alerts are judged again, by the replaying console's rules.
  auto replay = replay_once(recording, {"--alert", "step_stalled_s=3"});
  INFO("replay: " << replay.out.substr(0, 2000) << replay.err);
  REQUIRE_FALSE(replay.timed_out);
  REQUIRE(replay.status.exited);
  auto end = json::parse(replay.out);
  CHECK(end["replay"]["ended"] == true);
  CHECK(end["replay"]["file"] == recording);
  REQUIRE(end["tasks"].size() == 3);
  for (auto& t : end["tasks"]) {
    INFO(t["task"]);
    CHECK(t["state"] == "up");
    CHECK(t.contains("node"));
  }
  CHECK(has_alert(end, "recent", "step_stalled", worker0));
  CHECK(has_alert(end, "recent", "task_down", ps));
  // Up and no alert at the recording's end: healthy.
  CHECK(end["healthy"] == true);
  CHECK(replay.status.code == 0);
  // Not a recording: refused by name.
  auto bad = run_process({console_path, "--replay", "/etc/hostname",
                          "--once"},
                         20s);
  CHECK(bad.status.code == 1);
  CHECK(bad.err.find("/etc/hostname") != std::string::npos);
}

TEST_CASE("console: the loss_nan, mailbox_growing and rss_growing alerts "
          "fire and clear when their series say so (a recording replayed)",
          "[console]") {
  // What a ps and a worker would send over 60 s, written as a recording:
  // the ps's deepest mailbox grows for 15 samples and is drained, the
  // worker's RSS grows 2 MB/s for 20 s and levels off, and its loss is NaN
  // (null in JSON) for 5 s. The replaying console judges them with its
  // rules, as a live one does.
  support::temp_dir dir;
  auto recording = dir / "synthetic.jsonl";
  const int64_t t0 = 1'700'000'000'000'000;
  const int64_t s = 1'000'000;
  {
    std::ofstream out{recording};
    out << json{{"actorflow_console_recording", 1},
                {"cluster",
                 {{"ps", {"127.0.0.1:1"}}, {"worker", {"127.0.0.1:2"}}}},
                {"interval_ms", 1000},
                {"started_us", t0}}
             .dump()
        << '\n';
    for (int task = 0; task < 2; ++task)
      out << json{{"at_us", t0}, {"task", task}, {"subscribed", true}}.dump()
          << '\n';
    for (int k = 0; k < 60; ++k) {
      auto at = t0 + k * s;
      double depth = k >= 5 && k < 20 ? (k - 4) * 10.0 : 0.0;
      double rss = 100e6 + 2e6 * std::clamp(k - 10, 0, 20);
      json loss = k >= 35 && k < 40 ? json(nullptr) : json(2.0);
      auto process = [&](int pid) {
        return json{{"pid", pid}, {"started_us", t0 - 5 * s}};
      };
      json ps_update{
        {"now_us", at},
        {"process", process(100)},
        {"actors",
         {{{"id", 7}, {"kind", "queue"}, {"name", "q"}, {"mailbox", depth}}}},
        {"training", json::array()},
        {"history_tail",
         {{"t_us", {at}}, {"series", {{"mailbox_max", {depth}}}}}}};
      json worker_update{
        {"now_us", at},
        {"process", process(200)},
        {"actors", json::array()},
        {"training",
         {{{"task", worker0}, {"global_step", k}, {"loss", loss}}}},
        {"history_tail",
         {{"t_us", {at}},
          {"series",
           {{"rss_bytes", {rss}},
            {"loss", {loss}},
            {"global_step", {double(k)}}}}}}};
      out << json{{"at_us", at}, {"task", 0}, {"update", ps_update}}.dump()
          << '\n'
          << json{{"at_us", at}, {"task", 1}, {"update", worker_update}}.dump()
          << '\n';
    }
  }
  auto replay = replay_once(recording, {"--alert", "rss_growing_s=10"});
  INFO("replay: " << replay.out.substr(0, 3000) << replay.err);
  REQUIRE_FALSE(replay.timed_out);
  REQUIRE(replay.status.exited);
  auto end = json::parse(replay.out);
  REQUIRE(end["replay"]["ended"] == true);
  // Seconds into the recording when `rule` fired and cleared for `task`.
  auto when = [&](const std::string& rule, const std::string& task) {
    for (auto& a : end["alerts"]["recent"])
      if (a["rule"] == rule && a["task"] == task)
        return std::pair{double(a["fired_us"].get<int64_t>() - t0) / s,
                         double(a.value("cleared_us", int64_t{0}) - t0) / s};
    return std::pair{-1.0, -1.0};
  };
  // Ten samples each deeper than the one before: fired at the tenth (14 s),
  // cleared when drained (20 s).
  auto mailbox = when("mailbox_growing", ps);
  CHECK(mailbox.first == 14);
  CHECK(mailbox.second == 20);
  auto loss_nan = when("loss_nan", worker0);
  CHECK(loss_nan.first == 35);
  CHECK(loss_nan.second == 40);
  // +10 % over the 10 s window (from the sample at or before its start),
  // in most of its samples: from 15 s (100 to 110 MB) until the window
  // holds less than 10 % of growth (35 s: 128 to 140 MB).
  auto rss = when("rss_growing", worker0);
  CHECK(rss.first >= 15);
  CHECK(rss.first <= 16);
  CHECK(rss.second == 35);
  CHECK(end["alerts"]["active"].empty());
  CHECK(end["healthy"] == true);
  CHECK(replay.status.code == 0);
  // With the rules off, none of them fires.
  auto off = replay_once(recording,
                         {"--alert", "rss_growing_s=off", "--alert",
                          "mailbox_growing=off", "--alert", "loss_nan=off"});
  auto quiet = json::parse(off.out);
  CHECK(quiet["alerts"]["recent"].empty());
  CHECK(quiet["alerts"]["active"].empty());
}

TEST_CASE("console: --once exits non-zero while an alert is active, and "
          "--alert is checked",
          "[console]") {
  auto usage = run_process({console_path, "--cluster",
                            R"({"ps": ["127.0.0.1:1"]})", "--once", "--alert",
                            "no_such_rule=1"},
                           20s);
  CHECK(usage.status.code == 2);
  CHECK(usage.err.find("no rule no_such_rule") != std::string::npos);
  auto mixed = run_process({console_path, "--replay", "x.jsonl", "--cluster",
                            R"({"ps": ["127.0.0.1:1"]})", "--once"},
                           20s);
  CHECK(mixed.status.code == 2);
  CHECK(mixed.err.find("--replay cannot be combined") != std::string::npos);
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  child_process launcher{training(1)};
  auto cluster = cluster_of(launcher, "worker 0: step ");
  REQUIRE_FALSE(cluster.empty());
  // Enough history for the loss rules (6 samples).
  std::this_thread::sleep_for(7s);
  auto once = run_process({console_path, "--cluster", cluster, "--once"},
                          30s);
  INFO(once.out << once.err);
  CHECK(once.status.code == 0);
  CHECK(once.out.find("\nhealthy\n") != std::string::npos);
  // Every task up, and a rule the run meets at once (a loss above half its
  // median is a "jump" by a factor of 0.5): unhealthy, exit 3.
  auto alerted = run_process({console_path, "--cluster", cluster,
                              "--once", "--alert", "loss_jump=0.5"},
                             30s);
  INFO(alerted.out << alerted.err);
  CHECK(alerted.status.code == 3);
  CHECK(alerted.out.find("ALERT loss_jump since ") != std::string::npos);
  CHECK(alerted.out.find("unhealthy: 1 alerts") != std::string::npos);
  auto as_json = run_process({console_path, "--cluster", cluster,
                              "--once", "--json", "--alert",
                              "loss_jump=0.5"},
                             30s);
  CHECK(as_json.status.code == 3);
  auto doc = json::parse(as_json.out);
  CHECK(doc["healthy"] == false);
  CHECK(has_alert(doc, "active", "loss_jump", worker0));
  launcher.send_signal(SIGTERM);
  launcher.wait(30s);
}

TEST_CASE("console: a trainer whose loss went NaN fires loss_nan, named by "
          "its task, and --once says so",
          "[console]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  // A learning rate no float survives: the logits overflow at once.
  auto args = training(1);
  args.insert(args.end(), {"--optimizer", "sgd", "--learning_rate", "1e37"});
  child_process launcher{args};
  auto cluster = cluster_of(launcher, "worker 0: step ");
  REQUIRE_FALSE(cluster.empty());
  INFO(launcher.err().substr(0, 3000));
  json doc;
  support::process_result once;
  auto until = std::chrono::steady_clock::now() + 40s;
  do {
    once = run_process({console_path, "--cluster", cluster, "--once",
                        "--json"},
                       30s);
    doc = json::parse(once.out, nullptr, false);
    if (!doc.is_discarded() && has_alert(doc, "active", "loss_nan", worker0))
      break;
    std::this_thread::sleep_for(1s);
  } while (std::chrono::steady_clock::now() < until);
  INFO(once.out.substr(0, 3000) << once.err);
  REQUIRE_FALSE(doc.is_discarded());
  CHECK(has_alert(doc, "active", "loss_nan", worker0));
  CHECK(doc["healthy"] == false);
  CHECK(once.status.code == 3);
  launcher.send_signal(SIGTERM);
  launcher.wait(30s);
}

TEST_CASE("console: a dead worker's leftovers on the ps are marked orphaned "
          "and the engine drops them: its session's executors at once, its "
          "tensor-channel link within 12 s",
          "[console]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  child_process launcher{training(2)};
  auto cluster = cluster_of(launcher, "worker/1: worker 1: step ");
  REQUIRE_FALSE(cluster.empty());
  child_process live{{console_path, "--cluster", cluster, "--json",
                      "--interval_ms", "500"}};
  const std::string w1 = "/job:worker/replica:0/task:1";
  REQUIRE(live.wait_for_line(R"("state":"up","task":")" + w1, 15s));
  // What the ps holds of worker 1: its link and its session's executors.
  auto leftovers = [&](const json& line, bool& marked) {
    int n = 0;
    marked = true;
    auto* p = task_entry(line, ps);
    if (p == nullptr || !p->contains("node"))
      return -1;
    for (auto& l : (*p)["node"]["channel"])
      if (l.value("peer_task", "") == w1) {
        ++n;
        marked = marked && l.value("orphaned", false);
      }
    for (auto& a : (*p)["node"]["actors"])
      if (a["kind"] == "executor"
          && a["name"].get<std::string>().find(", worker/1 session ")
               != std::string::npos) {
        ++n;
        marked = marked && a.value("orphaned", false);
      }
    return n;
  };
  std::this_thread::sleep_for(2s);
  auto victim = pid_of(launcher.err(), "/job:worker/task:1");
  REQUIRE(victim > 0);
  auto offset = live.out().size();
  auto killed = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  bool seen_orphans = false;
  double gone_after = -1;
  while (seconds_since(killed) < 20 && gone_after < 0) {
    std::this_thread::sleep_for(250ms);
    auto out = live.out();
    std::istringstream in{out.substr(offset)};
    offset = out.size();
    std::string text;
    while (std::getline(in, text)) {
      if (text.empty() || text.front() != '{')
        continue;
      // A line still being written when read is cut: skipped.
      auto line = json::parse(text, nullptr, false);
      if (line.is_discarded())
        continue;
      auto* w = task_entry(line, w1);
      if (w == nullptr || (*w)["state"] != "down")
        continue;
      bool marked = false;
      auto n = leftovers(line, marked);
      if (n > 0) {
        INFO(text.substr(0, 3000));
        CHECK(marked); // everything of the dead worker's is marked
        seen_orphans = true;
      } else if (n == 0 && gone_after < 0) {
        gone_after = seconds_since(killed);
      }
    }
  }
  INFO("leftovers gone after " << gone_after << " s");
  CHECK(seen_orphans);
  CHECK(gone_after > 0);
  CHECK(gone_after <= 12.5);
  live.send_signal(SIGTERM);
  live.wait(10s);
  launcher.send_signal(SIGTERM);
  launcher.wait(30s);
}
