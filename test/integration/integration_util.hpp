#pragma once

// Shared bits of the integration tests: the launcher's path, error capture
// and trace queries.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/local_cluster.hpp"
#include "common/test_util.hpp"
#include "common/session_util.hpp"

namespace actorflow::testing {

using namespace std::chrono_literals;
using support::child_process;
using support::local_cluster;
using support::run_process;

/// The launcher built alongside the tests.
inline const std::string node_path = ACTORFLOW_NODE_PATH;

/// Devices on which the traced step ran node `name`.
inline std::set<std::string> devices_running(const run_metadata& md,
                                             const std::string& name) {
  std::set<std::string> result;
  for (const auto& dev : md.stats.dev_stats)
    for (const auto& node : dev.node_stats)
      if (node.node_name == name)
        result.insert(dev.device);
  return result;
}

/// The trace as the seed prints it, for failure messages.
inline std::string trace_text(const run_metadata& md) {
  std::string result;
  for (const auto& dev : md.stats.dev_stats) {
    result += dev.device + "\n";
    for (const auto& node : dev.node_stats)
      result += "   " + node.node_name + "\n";
  }
  return result;
}

inline run_options full_trace() {
  run_options opts;
  opts.trace_level = run_options::full_trace;
  return opts;
}

inline std::string cpu0(const std::string& job, int task) {
  return "/job:" + job + "/replica:0/task:" + std::to_string(task)
         + "/device:CPU:0";
}

/// Nodes whose stderr we keep, so a failing test can show it.
inline support::cluster_options captured() {
  support::cluster_options opts;
  opts.capture_stderr = true;
  opts.echo_stdout = false;
  return opts;
}

/// Where Debian's dataset-fashion-mnist installs the data the trainer reads.
inline constexpr const char* fashion_mnist_dir
  = "/usr/share/datasets/fashion-mnist";

/// True when the Fashion-MNIST files are installed (the trainer's tests
/// skip with a warning otherwise).
inline bool have_fashion_mnist() {
  return std::filesystem::exists(std::string{fashion_mnist_dir}
                                 + "/t10k-labels-idx1-ubyte.gz");
}

/// The pids of actorflow-train --local's "started /job:J/task:T (pid N)"
/// lines, in order.
inline std::vector<pid_t> started_pids(const std::string& err) {
  static const std::regex pattern{R"(started /job:\w+/task:\d+ \(pid (\d+)\))"};
  std::vector<pid_t> result;
  for (std::sregex_iterator i{err.begin(), err.end(), pattern}, end;
       i != end; ++i)
    result.push_back(static_cast<pid_t>(std::stol((*i)[1].str())));
  return result;
}

/// The pid of the latest "started /job:J/task:T (pid N)" line of
/// actorflow-train --local for `task` ("/job:J/task:T"), 0 for none (a
/// task started again after it died has a line per start).
inline pid_t pid_of(const std::string& log, const std::string& task) {
  std::regex pattern{"started " + task + R"( \(pid (\d+)\))"};
  pid_t pid = 0;
  for (std::sregex_iterator i{log.begin(), log.end(), pattern}, end; i != end;
       ++i)
    pid = static_cast<pid_t>(std::stol((*i)[1].str()));
  return pid;
}

/// The entry of `task` in actorflow-console's --once --json document
/// (nullptr for none).
inline const nlohmann::json* task_entry(const nlohmann::json& doc,
                                        const std::string& task) {
  for (auto& t : doc["tasks"])
    if (t["task"] == task)
      return &t;
  return nullptr;
}

/// The actors of `kind` of a task entry of that document.
inline std::vector<nlohmann::json> actors_of_kind(const nlohmann::json& task,
                                                  const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (auto& a : task["node"]["actors"])
    if (a["kind"] == kind)
      out.push_back(a);
  return out;
}

/// True while `pid` is a process running `program` (a zombie waiting for
/// its reaper is gone for our purposes).
inline bool runs(pid_t pid, const std::string& program) {
  std::ifstream cmdline{"/proc/" + std::to_string(pid) + "/cmdline"};
  std::string text;
  std::getline(cmdline, text, '\0');
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat_text;
  std::getline(stat, stat_text);
  return stat_text.find(") Z") == std::string::npos
         && text.find(program) != std::string::npos;
}

/// Every live process (zombies left out) as its pid and its arguments
/// (from /proc; a process that ends while being read may be missed).
inline std::vector<std::pair<std::string, std::vector<std::string>>>
live_processes() {
  std::vector<std::pair<std::string, std::vector<std::string>>> result;
  for (const auto& entry : std::filesystem::directory_iterator{"/proc"}) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat{entry.path() / "stat"};
    std::string stat_text;
    std::getline(stat, stat_text);
    if (stat_text.empty() || stat_text.find(") Z") != std::string::npos)
      continue;
    std::ifstream cmdline{entry.path() / "cmdline"};
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');)
      args.push_back(arg);
    result.emplace_back(name, std::move(args));
  }
  return result;
}

/// actorflow-bench's JSON lines in `out` (one figure each), by name; other
/// lines (the table, progress) are skipped.
inline std::map<std::string, nlohmann::json>
bench_figures(const std::string& out) {
  std::map<std::string, nlohmann::json> result;
  std::istringstream lines{out};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{')
      continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("name") && j["name"].is_string())
      result[j["name"].get<std::string>()] = j;
  }
  return result;
}

/// The value of actorflow-train's last "test accuracy: X" line, or -1.
inline double test_accuracy(const std::string& out) {
  static const std::regex pattern{R"(test accuracy: ([0-9.]+))"};
  double result = -1;
  for (std::sregex_iterator i{out.begin(), out.end(), pattern}, end;
       i != end; ++i)
    result = std::stod((*i)[1].str());
  return result;
}

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                       - start)
    .count();
}

/// The stderr of `proc` once it has `needle`, or after `timeout`. Polls:
/// child_process waits only for stdout lines; bounded by the deadline.
inline std::string err_with(child_process& proc, const std::string& needle,
                            std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto err = proc.err();
  while (err.find(needle) == std::string::npos
         && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    err = proc.err();
  }
  return err;
}

/// Waits (up to 5 s) until process `pid` is in the stopped state ('T' in
/// /proc/<pid>/stat); false if it did not get there. kill(SIGSTOP) returns
/// before every thread of the process has stopped.
inline bool wait_until_stopped(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  // Polls /proc: child_process reports an exit but not a stop; bounded by
  // the deadline.
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
    std::string text;
    std::getline(in, text);
    auto close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size()
        && text[close + 2] == 'T')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

/// Two tasks of job "local" and, in `g`, a float variable "v" (0) on task
/// 1 with its `increment` (assign_add 1): the failure tests' counter.
struct counter_on_task1 {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  variable v;
  operation increment;

  counter_on_task1() {
    auto as_default = g.as_default();
    device_scope pin{"/job:local/task:1"};
    v = variable{tensor::scalar(0.0f), named("v")};
    increment = v.assign_add(1.0f).op();
  }
};

/// Checks that `proc` says `needle` on stderr within 10 s.
inline void check_said(child_process& proc, const std::string& needle) {
  CHECK_THAT(err_with(proc, needle), Catch::Contains(needle));
}

/// SIGTERM to `worker`, actorflow-train's worker `index` that joined the
/// cluster: it exits 0 saying it leaves, and `authority` (the process
/// whose stderr has the first ps task's log) logs that it left.
inline void check_leaves_on_sigterm(child_process& worker, int index,
                                    child_process& authority) {
  worker.send_signal(SIGTERM);
  auto st = worker.wait(std::chrono::seconds(30));
  REQUIRE(st);
  CHECK(st->success());
  CHECK_THAT(worker.out(),
             Catch::Contains("worker " + std::to_string(index)
                             + ": SIGTERM: leaving the cluster"));
  check_said(authority, "/job:worker/replica:0/task:" + std::to_string(index)
                          + " left: it said so");
}

} // namespace actorflow::testing
