// actorflow-console against a real cluster (actorflow-train --local 2):
// one JSON snapshot lists every task with its actors and plausible
// counters, and a worker killed with SIGKILL is shown down by name.

#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using json = nlohmann::json;

namespace {

const std::string train_path = ACTORFLOW_TRAIN_PATH;

/// The --json lines of a console's output.
std::vector<json> json_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in{out};
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line.front() == '{')
      lines.push_back(json::parse(line));
  return lines;
}

/// Every rate of every line is a plausible number: no difference between
/// two processes' counters (once 4.45e18 messages/s after a restart).
void check_rates(const std::vector<json>& lines) {
  auto in = [](const json& j, const char* key, double max) {
    if (!j.contains(key))
      return;
    INFO(key << " = " << j[key].dump() << " in " << j.dump().substr(0, 300));
    REQUIRE(j[key].is_number());
    auto x = j[key].get<double>();
    CHECK(x >= 0);
    CHECK(x <= max);
  };
  for (auto& line : lines)
    for (auto& t : line["tasks"]) {
      if (!t.contains("node"))
        continue;
      auto& node = t["node"];
      in(node["steps"], "per_s", 1e6);
      for (auto& a : node["actors"]) {
        in(a, "messages_per_s", 1e7);
        in(a, "busy_percent", 1e3);
        in(a, "updates_per_s", 1e7);
      }
      for (auto& l : node["channel"])
        in(l, "bytes_per_s", 1e11);
    }
}
const std::string console_path = ACTORFLOW_CONSOLE_PATH;


/// The launcher's "cluster {...}" line's JSON.
std::string cluster_of(const std::string& log) {
  static const std::regex pattern{R"(actorflow-train: cluster (\{[^\n]*\}))"};
  std::smatch m;
  return std::regex_search(log, m, pattern) ? m[1].str() : std::string{};
}

} // namespace

TEST_CASE("console: a JSON snapshot of a training cluster lists every task "
          "and its actors, and a killed worker is down by name",
          "[console]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  // Every task also serves /metrics (on a free port each, with --local).
  child_process launcher{{train_path, "--local", "2", "--model", "softmax",
                          "--train_steps", "100000000", "--log_every",
                          "100", "--metrics_port", "0"}};
  auto progress = launcher.wait_for_line("worker/1: worker 1: step ", 60s);
  INFO("launcher stdout:\n" << launcher.out() << "\nstderr:\n"
                            << launcher.err());
  REQUIRE(progress);
  auto cluster = cluster_of(launcher.err() + launcher.out());
  REQUIRE_FALSE(cluster.empty());
  {
    static const std::regex metrics_line{
      R"((\w+)/(\d): actorflow-train: metrics of /job:(\w+)/replica:0/task:(\d) at http://127\.0\.0\.1:(\d+)/metrics)"};
    auto out = launcher.out();
    std::map<std::string, int> ports;
    for (std::sregex_iterator i{out.begin(), out.end(), metrics_line}, end;
         i != end; ++i)
      ports[(*i)[3].str() + "/" + (*i)[4].str()] = std::stoi((*i)[5].str());
    REQUIRE(ports.size() == 3);
    httplib::Client http{"127.0.0.1", ports.at("ps/0")};
    auto res = http.Get("/metrics");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->body.find("actorflow_variable_bytes{task=\"/job:ps/replica:0/"
                         "task:0\",variable=\"softmax/weights\"")
          != std::string::npos);
    // The ps's tensor-channel connections are labelled with the task at
    // their other end both ways: the links it opened by what its executors
    // were told, those the workers opened by what each link said.
    for (auto direction : {"in", "out"})
      for (auto worker : {"0", "1"}) {
        std::regex sample{std::string{"actorflow_peer_bytes_total\\{[^}]*"}
                          + "direction=\"" + direction + "\",peer_task=\""
                          + "/job:worker/replica:0/task:" + worker + "\""};
        INFO(direction << " " << worker << "\n" << res->body.substr(0, 4000));
        CHECK(std::regex_search(res->body, sample));
      }
  }

  auto once = run_process({console_path, "--cluster", cluster, "--once",
                           "--json"},
                          20s);
  INFO("console stdout:\n" << once.out << "\nstderr:\n" << once.err);
  REQUIRE_FALSE(once.timed_out);
  REQUIRE(once.status.exited);
  REQUIRE(once.status.code == 0);
  auto doc = json::parse(once.out);
  REQUIRE(doc["tasks"].size() == 3);
  for (auto& t : doc["tasks"]) {
    INFO(t["task"]);
    CHECK(t["state"] == "up");
    CHECK(t["rtt_us"].get<double>() > 0);
    REQUIRE(t.contains("node"));
    auto& node = t["node"];
    CHECK(node["task"] == t["task"]);
    CHECK(node["process"]["rss_bytes"].get<int64_t>() > 0);
    CHECK(node["process"]["threads"].get<int64_t>() > 0);
    // Every node knows the whole cluster.
    CHECK(node["cluster"] == doc["cluster"]);
    auto tasks = actors_of_kind(t, "task");
    REQUIRE(tasks.size() == 1);
    CHECK(tasks[0]["name"] == t["task"]);
    CHECK(tasks[0]["messages"].get<uint64_t>() > 0);
    CHECK(actors_of_kind(t, "monitor").size() == 1);
  }

  // The ps holds the model's variables, initialized and updated by the
  // workers' steps; its executors ran the workers' partitions.
  auto* ps = task_entry(doc, "/job:ps/replica:0/task:0");
  REQUIRE(ps != nullptr);
  auto variables = actors_of_kind(*ps, "variable");
  REQUIRE(variables.size() >= 3);
  bool weights = false;
  for (auto& v : variables) {
    INFO(v.dump());
    CHECK(v["gauges"]["initialized"] == 1);
    CHECK(v["gauges"]["bytes"].get<int64_t>() > 0);
    CHECK(v["messages"].get<uint64_t>() > 0);
    CHECK(v["mailbox_max"].get<uint32_t>() >= v["mailbox"].get<uint32_t>());
    // Not replicated: no part in replication (an epoch) to show.
    CHECK(v["detail"].get<std::string>().find("epoch") == std::string::npos);
    if (v["name"].get<std::string>().find("weights") != std::string::npos
        && v["detail"].get<std::string>().find("float32 [784,10]")
             != std::string::npos) {
      weights = true;
      CHECK(v["gauges"]["updates"].get<int64_t>() > 10);
      CHECK(v["busy_us"].get<uint64_t>() > 0);
    }
  }
  CHECK(weights);
  // Executors are named by the ops they run, most frequent first, and
  // the session (by the task that opened it).
  auto executors = actors_of_kind(*ps, "executor");
  CHECK_FALSE(executors.empty());
  static const std::regex executor_name{
    R"(^[A-Za-z].* \(\d+ ops\), worker/[01] session \d+$)"};
  for (auto& e : executors) {
    INFO(e["name"]);
    CHECK(std::regex_match(e["name"].get<std::string>(), executor_name));
  }

  // Each worker is a master: its steps, and the trainer's progress.
  for (auto* name :
       {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"}) {
    auto* w = task_entry(doc, name);
    REQUIRE(w != nullptr);
    INFO(name);
    auto& steps = (*w)["node"]["steps"];
    CHECK(steps["total"].get<uint64_t>() > 0);
    CHECK(steps["by_code"]["OK"].get<uint64_t>() > 0);
    CHECK(steps["p50_us"].get<double>() > 0);
    CHECK(steps["p99_us"].get<double>() >= steps["p50_us"].get<double>());
    CHECK_FALSE(actors_of_kind(*w, "executor").empty());
    auto& training = (*w)["node"]["training"];
    REQUIRE(training.size() == 1);
    CHECK(training[0]["task"] == name);
    CHECK(training[0]["global_step"].get<int64_t>() > 0);
    // The trainer's session: its client actor, in the worker's process.
    auto clients = actors_of_kind(*w, "client");
    REQUIRE_FALSE(clients.empty());
    CHECK(clients[0]["messages"].get<uint64_t>() > 0);
    // Tensors went over the channel to and from the ps, just now.
    bool sent = false;
    for (auto& l : (*w)["node"]["channel"])
      sent |= l["direction"] == "out" && l["bytes"].get<uint64_t>() > 0
              && l["last_us"].get<int64_t>() >= l["since_us"].get<int64_t>();
    CHECK(sent);
    // The master connected to the ps.
    bool ps_peer = false;
    for (auto& p : (*w)["node"]["peers"])
      ps_peer |= p["peer"] == "/job:ps/replica:0/task:0" && p["up"] == true;
    CHECK(ps_peer);
  }

  // A live console (one JSON line per interval) shows a worker killed with
  // SIGKILL as down, by name, within 5 s; the others stay up.
  child_process live{{console_path, "--cluster", cluster, "--json",
                      "--interval_ms", "500"}};
  REQUIRE(live.wait_for_line(R"("state":"up","task":"/job:worker/replica:0/task:1")",
                             15s));
  auto victim = pid_of(launcher.err() + launcher.out(), "/job:worker/task:1");
  REQUIRE(victim > 0);
  auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  auto down = live.wait_for_line(
    R"("state":"down","task":"/job:worker/replica:0/task:1")", 10s);
  INFO("live console stdout (tail):\n"
       << live.out().substr(live.out().size() > 4000
                              ? live.out().size() - 4000
                              : 0));
  REQUIRE(down);
  CHECK(seconds_since(killed_at) <= 5.0);
  auto line = json::parse(*down);
  auto* dead = task_entry(line, "/job:worker/replica:0/task:1");
  REQUIRE(dead != nullptr);
  CHECK_FALSE((*dead)["error"].get<std::string>().empty());
  CHECK_FALSE(dead->contains("node"));
  CHECK((*task_entry(line, "/job:ps/replica:0/task:0"))["state"] == "up");
  CHECK((*task_entry(line, "/job:worker/replica:0/task:0"))["state"] == "up");
  live.send_signal(SIGTERM);
  auto st = live.wait(10s);
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
}

TEST_CASE("console: bad command lines are usage errors naming the flag",
          "[console]") {
  auto no_cluster = run_process({console_path, "--once", "--json"}, 10s,
                                {.env = {"TF_CONFIG"}});
  CHECK(no_cluster.status.code == 2);
  CHECK(no_cluster.err.find("missing --cluster") != std::string::npos);
  auto bad_interval = run_process(
    {console_path, "--ps_hosts", "127.0.0.1:1", "--interval_ms", "5"}, 10s);
  CHECK(bad_interval.status.code == 2);
  CHECK(bad_interval.err.find("--interval_ms") != std::string::npos);
  auto unknown = run_process({console_path, "--bogus"}, 10s);
  CHECK(unknown.status.code == 2);
  CHECK(unknown.err.find("unknown flag '--bogus'") != std::string::npos);
  // A task nobody serves is down, named, with the reason; exit 3 (the
  // cluster is not healthy).
  auto port = free_port();
  auto nobody = run_process({console_path, "--ps_hosts",
                             "127.0.0.1:" + std::to_string(port), "--once",
                             "--json"},
                            20s);
  INFO(nobody.out << nobody.err);
  REQUIRE(nobody.status.code == 3);
  auto doc = json::parse(nobody.out);
  REQUIRE(doc["tasks"].size() == 1);
  CHECK(doc["tasks"][0]["task"] == "/job:ps/replica:0/task:0");
  CHECK(doc["tasks"][0]["state"] == "down");
  CHECK(doc["tasks"][0]["error"].get<std::string>().find(
          "127.0.0.1:" + std::to_string(port))
        != std::string::npos);
}

TEST_CASE("console: a task that is stopped is shown down by name, and up "
          "again when it is started again",
          "[console]") {
  auto port = free_port();
  auto address = "127.0.0.1:" + std::to_string(port);
  auto json_spec = R"({"worker": [")" + address + R"("]})";
  auto node = std::make_unique<child_process>(std::vector<std::string>{
    node_path, "--cluster", json_spec, "--job", "worker"});
  REQUIRE(node->wait_for_line("serving", 15s));
  child_process live{{console_path, "--cluster", json_spec, "--json",
                      "--interval_ms", "300"}};
  const std::string up = R"("state":"up","task":"/job:worker/replica:0/task:0")";
  const std::string down
    = R"("state":"down","task":"/job:worker/replica:0/task:0")";
  REQUIRE(live.wait_for_line(up, 15s));
  node->send_signal(SIGTERM);
  REQUIRE(node->wait(10s));
  auto stopped_at = std::chrono::steady_clock::now();
  INFO("console stdout (tail):\n"
       << live.out().substr(live.out().size() > 3000 ? live.out().size() - 3000
                                                     : 0));
  REQUIRE(live.wait_for_line(down, 10s));
  CHECK(seconds_since(stopped_at) <= 5.0);
  // The same task, a new process on the same port: the console reconnects
  // by itself. (Lines before the restart show it up too: count them.)
  auto ups = [&] {
    auto out = live.out();
    size_t n = 0;
    for (auto at = out.find(up); at != std::string::npos;
         at = out.find(up, at + 1))
      ++n;
    return n;
  };
  auto ups_before = ups();
  node = std::make_unique<child_process>(std::vector<std::string>{
    node_path, "--cluster", json_spec, "--job", "worker"});
  REQUIRE(node->wait_for_line("serving", 15s));
  auto deadline = std::chrono::steady_clock::now() + 10s;
  // Polls stdout, as wait_for_line would match the lines from before the
  // restart; bounded by the deadline.
  while (ups() == ups_before && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  CHECK(ups() > ups_before);
  // A few updates of the new process: its rates start over from its own
  // counters (a counter reset, as Prometheus takes one), never a
  // difference against the old process's larger ones.
  deadline = std::chrono::steady_clock::now() + 10s;
  while (ups() < ups_before + 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  live.send_signal(SIGINT);
  auto st = live.wait(10s);
  REQUIRE(st);
  CHECK(st->code == 0);
  auto lines = json_lines(live.out());
  REQUIRE(lines.size() > ups_before + 3);
  check_rates(lines);
  auto& last = lines.back()["tasks"][0];
  CHECK(last["state"] == "up");
  CHECK(last["restarts"] == 1);
}

TEST_CASE("console: a silent task is stale before it is down, keeps its "
          "last-known values and its first down reason",
          "[console]") {
  auto port = free_port();
  auto json_spec = R"({"worker": ["127.0.0.1:)" + std::to_string(port)
                   + R"("]})";
  child_process node{{node_path, "--cluster", json_spec, "--job", "worker"}};
  REQUIRE(node.wait_for_line("serving", 15s));
  child_process live{{console_path, "--cluster", json_spec, "--json",
                      "--interval_ms", "300"}};
  const std::string task = R"("task":"/job:worker/replica:0/task:0")";
  REQUIRE(live.wait_for_line(R"("stale":false,"state":"up",)" + task, 15s));
  node.send_signal(SIGSTOP);
  // Two intervals without an update: stale (its values no longer live);
  // three and a half: down.
  REQUIRE(live.wait_for_line(R"("stale":true,"state":"up",)" + task, 10s));
  REQUIRE(live.wait_for_line(R"("stale":false,"state":"down",)" + task,
                             10s));
  // Down a while: the reconnects fail too (a stopped process accepts no
  // handshake), which must not replace the first reason.
  std::this_thread::sleep_for(3s);
  node.send_signal(SIGCONT);
  live.send_signal(SIGINT);
  REQUIRE(live.wait(10s));
  auto lines = json_lines(live.out());
  std::string first_error;
  int down_lines = 0;
  for (auto& line : lines) {
    auto& t = line["tasks"][0];
    if (t["state"] != "down")
      continue;
    INFO(t.dump().substr(0, 600));
    ++down_lines;
    CHECK_FALSE(t.contains("node"));
    REQUIRE(t.contains("last_node"));
    CHECK(t["last_node"]["process"]["rss_bytes"].get<int64_t>() > 0);
    if (first_error.empty())
      first_error = t["error"].get<std::string>();
    CHECK(t["error"] == first_error);
  }
  CHECK(down_lines >= 5);
  CHECK_THAT(first_error, Catch::StartsWith("no update for "));
}

TEST_CASE("console: --once prints a summary or a document with measured "
          "rates, and exits 3 when a task is down",
          "[console]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  auto spec = nodes.spec().to_json();
  auto text = run_process({console_path, "--cluster", spec, "--once",
                           "--interval_ms", "200"},
                          30s);
  INFO(text.out << text.err);
  CHECK(text.status.code == 0);
  CHECK_THAT(text.out, Catch::Contains("actorflow cluster: 2 tasks, 2 up"));
  CHECK_THAT(text.out, Catch::Contains("/job:worker/replica:0/task:0"));
  CHECK_THAT(text.out, Catch::EndsWith("healthy\n"));
  auto doc_run = run_process({console_path, "--cluster", spec, "--once",
                              "--json", "--interval_ms", "200"},
                             30s);
  INFO(doc_run.out << doc_run.err);
  CHECK(doc_run.status.code == 0);
  auto doc = json::parse(doc_run.out);
  CHECK(doc["healthy"] == true);
  for (auto& t : doc["tasks"]) {
    INFO(t["task"]);
    REQUIRE(t.contains("node"));
    auto& steps = t["node"]["steps"];
    CHECK(steps["bucket_bounds_us"].size() + 1 == steps["buckets"].size());
    // Two samples: the monitor's own rate is measured (it handles every
    // tick of the subscription), not left out.
    auto monitors = actors_of_kind(t, "monitor");
    REQUIRE(monitors.size() == 1);
    REQUIRE(monitors[0].contains("messages_per_s"));
    CHECK(monitors[0]["messages_per_s"].get<double>() > 0);
  }
  nodes.process("worker", 0).send_signal(SIGKILL);
  nodes.process("worker", 0).wait(10s);
  auto down = run_process({console_path, "--cluster", spec, "--once"}, 30s);
  INFO(down.out << down.err);
  CHECK(down.status.code == 3);
  CHECK_THAT(down.out, Catch::Contains("/job:worker/replica:0/task:0 is DOWN"));
  CHECK_THAT(down.out, Catch::Contains("unhealthy: 1 of 2 tasks not up"));
  auto down_doc = run_process({console_path, "--cluster", spec, "--once",
                               "--json"},
                              30s);
  CHECK(down_doc.status.code == 3);
  CHECK(json::parse(down_doc.out)["healthy"] == false);
}
