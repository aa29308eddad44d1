// actorflow-console's web UI in a real browser: Debian's headless Chromium,
// driven by test/integration/web/console_page.mjs (playwright-core from
// the npm registry), against a live `actorflow-train --local 2` cluster.
// The page must list every task, draw its plots with points, keep taking
// live updates and show a traced step's timeline; it opens only with the
// console's token (the printed URL's), and a form another site posts to
// the console is refused.

#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <thread>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string console_path = ACTORFLOW_CONSOLE_PATH;
const std::string train_path = ACTORFLOW_TRAIN_PATH;
const std::filesystem::path web_test_dir
  = std::filesystem::path{ACTORFLOW_SOURCE_DIR} / "test/integration/web";

/// Why the browser test cannot run here, or "".
std::string missing_tools() {
  if (!have_fashion_mnist())
    return "Fashion-MNIST is not installed (dataset-fashion-mnist)";
  if (!std::filesystem::exists("/usr/bin/chromium"))
    return "Debian's chromium is not installed";
  if (!std::filesystem::exists(web_test_dir / "node_modules/playwright-core"))
    return "playwright-core is not installed (scripts/setup.sh)";
  return {};
}

} // namespace

TEST_CASE("console: the web UI in headless Chromium lists the tasks, plots "
          "live updates and shows a step timeline",
          "[console][web]") {
  if (auto why = missing_tools(); !why.empty()) {
    WARN(why << ": not run");
    return;
  }
  child_process launcher{{train_path, "--local", "2", "--model", "softmax",
                          "--train_steps", "100000000", "--log_every",
                          "200"}};
  REQUIRE(launcher.wait_for_line("worker/1: worker 1: step ", 60s));
  static const std::regex cluster_line{R"(actorflow-train: cluster (\{[^\n]*\}))"};
  std::smatch m;
  auto log = launcher.err();
  REQUIRE(std::regex_search(log, m, cluster_line));
  child_process console{{console_path, "--cluster", m[1].str(), "--http",
                         "127.0.0.1:0", "--interval_ms", "500"}};
  auto serving = console.wait_for_line("web UI at ", 15s);
  INFO("console: " << console.out() << console.err());
  REQUIRE(serving);
  auto url = serving->substr(serving->find("http://"));
  auto shot = std::filesystem::temp_directory_path()
              / ("actorflow-console-web-" + std::to_string(::getpid())
                 + ".png");
  auto page = run_process(
    {"/usr/bin/env", "node", (web_test_dir / "console_page.mjs").string(), url,
     "/job:ps/replica:0/task:0,/job:worker/replica:0/task:0,"
     "/job:worker/replica:0/task:1",
     "/job:worker/replica:0/task:0", shot.string()},
    120s);
  INFO("browser:\n" << page.out << page.err);
  CHECK_FALSE(page.timed_out);
  CHECK(page.status.exited);
  CHECK(page.status.code == 0);
  CHECK(page.out.find("ok: no script errors") != std::string::npos);
  // The page's forged form, refused by the console, which said why.
  CHECK(page.out.find("ok: a cross-site form POST is refused (403)")
        != std::string::npos);
  CHECK(console.err().find("web UI: refused POST /api/trace from 127.0.0.1:")
        != std::string::npos);
  CHECK(std::filesystem::file_size(shot) > 10000);
  std::filesystem::remove(shot);
  console.send_signal(SIGTERM);
  auto st = console.wait(10s);
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
}

TEST_CASE("console: the web UI in headless Chromium greys a down task's "
          "last-known values and wraps its reason",
          "[console][web]") {
  if (auto why = missing_tools(); !why.empty()) {
    WARN(why << ": not run");
    return;
  }
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  child_process console{{console_path, "--cluster", nodes.spec().to_json(),
                         "--http", "127.0.0.1:0", "--interval_ms", "300"}};
  auto serving = console.wait_for_line("web UI at ", 15s);
  INFO("console: " << console.out() << console.err());
  REQUIRE(serving);
  auto url = serving->substr(serving->find("http://"));
  auto shot = std::filesystem::temp_directory_path()
              / ("actorflow-console-down-" + std::to_string(::getpid())
                 + ".png");
  // The page sees the worker up first (its document is the console's),
  // says "ready", and waits for the kill.
  child_process page{{"/usr/bin/env", "node",
                      (web_test_dir / "console_down.mjs").string(), url,
                      "/job:worker/replica:0/task:0",
                      "/job:ps/replica:0/task:0", shot.string()}};
  auto ready = page.wait_for_line("ready", 60s);
  INFO("browser:\n" << page.out() << page.err());
  REQUIRE(ready);
  nodes.process("worker", 0).send_signal(SIGKILL);
  nodes.process("worker", 0).wait(10s);
  auto st = page.wait(60s);
  auto out = page.out();
  INFO("browser after the kill:\n" << out << page.err());
  REQUIRE(st);
  CHECK(st->code == 0);
  CHECK(out.find("ok: its last-known values are grey") != std::string::npos);
  CHECK(out.find("ok: no script errors") != std::string::npos);
  std::filesystem::remove(shot);
  console.send_signal(SIGTERM);
  CHECK(console.wait(10s));
}

namespace {

/// A training cluster (actorflow-train --local 2) that has run for a few
/// seconds before a console serves its web UI; the page scripts are run
/// against that console.
struct watched_training {
  child_process launcher{{train_path, "--local", "2", "--model", "softmax",
                          "--train_steps", "100000000", "--log_every",
                          "200"}};
  std::optional<child_process> console;
  std::string url;

  /// Starts the console; false (and why in `why`) if it cannot.
  bool start(std::string& why) {
    if (!launcher.wait_for_line("worker/1: worker 1: step ", 60s)) {
      why = "no training progress: " + launcher.err();
      return false;
    }
    static const std::regex cluster_line{
      R"(actorflow-train: cluster (\{[^\n]*\}))"};
    std::smatch m;
    auto log = launcher.err();
    if (!std::regex_search(log, m, cluster_line)) {
      why = "no cluster line: " + log;
      return false;
    }
    // The run has history before the page (and the console) open.
    std::this_thread::sleep_for(6s);
    console.emplace(std::vector<std::string>{
      console_path, "--cluster", m[1].str(), "--http", "127.0.0.1:0",
      "--interval_ms", "500"});
    auto serving = console->wait_for_line("web UI at ", 15s);
    if (!serving) {
      why = "console: " + console->out() + console->err();
      return false;
    }
    url = serving->substr(serving->find("http://"));
    return true;
  }

  /// Runs test/integration/web/`name` on the page with `args`; its output.
  std::string script(const char* name, std::vector<std::string> args) {
    std::vector<std::string> cmd{"/usr/bin/env", "node",
                                 (web_test_dir / name).string(), url};
    cmd.insert(cmd.end(), args.begin(), args.end());
    auto r = run_process(cmd, 140s);
    INFO(name << ":\n" << r.out << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.status.code == 0);
    CHECK(r.out.find("ok: no script errors") != std::string::npos);
    return r.out;
  }

  ~watched_training() {
    if (console) {
      console->send_signal(SIGTERM);
      console->wait(10s);
    }
  }
};

std::string shot(const char* what) {
  return (std::filesystem::temp_directory_path()
          / ("actorflow-console-" + std::string{what} + "-"
             + std::to_string(::getpid()) + ".png"))
    .string();
}

const std::string ps_task = "/job:ps/replica:0/task:0";
const std::string w0_task = "/job:worker/replica:0/task:0";
const std::string w1_task = "/job:worker/replica:0/task:1";

/// Runs page script `name` (with `args`, its screenshot last) against a
/// console of a training cluster of its own and checks it said `said`.
/// A watched training cluster, started; null (the test is not run) when
/// Chromium or node is missing.
std::unique_ptr<watched_training> watch_training() {
  if (auto why = missing_tools(); !why.empty()) {
    WARN(why << ": not run");
    return nullptr;
  }
  auto t = std::make_unique<watched_training>();
  std::string why;
  auto started = t->start(why);
  INFO(why);
  REQUIRE(started);
  return t;
}

void check_page(const char* name, std::vector<std::string> args,
                const std::string& said) {
  auto t = watch_training();
  if (!t)
    return;
  auto picture = shot(name);
  args.push_back(picture);
  auto out = t->script(name, args);
  CHECK(out.find(said) != std::string::npos);
  std::filesystem::remove(picture);
}

} // namespace

// Each page script against a cluster of its own: one test each stays well
// within ctest's 180 s on a loaded machine.

TEST_CASE("console: the web UI in headless Chromium pages, sorts and filters "
          "every actor and shows one's detail and charts",
          "[console][web]") {
  check_page("console_actors.mjs", {}, "ok: more than 25 rows");
}

TEST_CASE("console: the web UI in headless Chromium plots the run from "
          "before it opened (the tasks' histories)",
          "[console][web]") {
  // Charts with points from before the page's load: the history.
  check_page("console_history.mjs", {}, "ok: steps/s per master seeded");
}

TEST_CASE("console: the web UI in headless Chromium draws the topology, one "
          "edge per pair of tasks that talk, links named by task",
          "[console][web]") {
  check_page("console_topology.mjs",
             {ps_task + "=" + w0_task + "," + ps_task + "=" + w1_task},
             "ok: one edge per talking pair");
}

TEST_CASE("console: the web UI in headless Chromium tails a task's logs with "
          "level filter and search",
          "[console][web]") {
  check_page("console_logs.mjs", {w0_task},
             "ok: the level filter narrows them");
}

TEST_CASE("console: the web UI in headless Chromium shows an alert when a "
          "worker dies",
          "[console][web]") {
  auto t = watch_training();
  if (!t)
    return;
  child_process page{{"/usr/bin/env", "node",
                      (web_test_dir / "console_alerts.mjs").string(), t->url,
                      w1_task, shot("alerts")}};
  REQUIRE(page.wait_for_line("ready", 90s));
  auto victim = pid_of(t->launcher.err(), "/job:worker/task:1");
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  auto st = page.wait(90s);
  INFO("alerts page:\n" << page.out() << page.err());
  REQUIRE(st);
  CHECK(st->code == 0);
  CHECK(page.out().find("ok: an active task_down alert for " + w1_task)
        != std::string::npos);
  std::filesystem::remove(shot("alerts"));
}
