// Replicated variables (issue 31 §1) with real processes: two ps tasks
// started with --replicate_variables, three workers whose masters run the
// steps of three client processes (helpers/counter_client.cpp), each
// adding 1 to c0 (ps:0), c1 (ps:1) and global_step (ps:0) per step. The
// test kills (SIGKILL) or stops (SIGSTOP) ps tasks while they count and
// starts replacements at the same address; no step may fail, and every
// counter ends at exactly clients x steps: nothing lost, nothing applied
// twice, no write of a superseded primary.

#include <signal.h>

#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <string>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string counter_client_path = ACTORFLOW_COUNTER_CLIENT_PATH;

constexpr const char* ps_name[] = {"/job:ps/replica:0/task:0",
                                   "/job:ps/replica:0/task:1"};

/// Three workers (started by local_cluster) and two ps tasks this fixture
/// starts itself, so that it can kill and restart them at their address.
struct replicated_cluster {
  local_cluster workers;
  std::unique_ptr<child_process> ps[2];

  replicated_cluster()
    : workers(node_path, {{"ps", 2}, {"worker", 3}}, opts()) {
    start_ps(0);
    start_ps(1);
  }

  static support::cluster_options opts() {
    auto o = captured();
    o.not_started = {{"ps", 0}, {"ps", 1}};
    o.args = {"--replicate_variables"};
    return o;
  }

  void start_ps(int i) {
    auto argv = support::node_command(node_path, workers.spec(), "ps", i);
    argv.push_back("--replicate_variables");
    ps[i] = std::make_unique<child_process>(argv);
    REQUIRE(ps[i]->wait_for_line(support::serving_marker("ps", i), 20s));
  }

  /// Waits (bounded) until ps `i`'s log, past `from` characters, says
  /// that both stores it serves are replicated on `on` again.
  bool replicated_again(int i, size_t from, const std::string& on,
                        std::chrono::seconds timeout = 30s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      auto log = ps[i]->err().substr(std::min(from, ps[i]->err().size()));
      size_t count = 0;
      for (auto at = log.find("are replicated on " + on);
           at != std::string::npos;
           at = log.find("are replicated on " + on, at + 1))
        ++count;
      if (count >= 2)
        return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  std::string target(int worker) {
    return workers.target("worker", worker);
  }
};

std::unique_ptr<child_process> client(const std::string& target,
                                      std::vector<std::string> args) {
  std::vector<std::string> argv{counter_client_path, target};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<child_process>(argv);
}

/// The counters, read through worker 0.
std::string read_counters(replicated_cluster& c) {
  auto r = client(c.target(0), {"read"});
  auto line = r->wait_for_line("c0 ", 60s);
  return line ? *line : "no answer: " + r->out();
}

void start_counting(replicated_cluster& c, int steps,
                    std::vector<std::unique_ptr<child_process>>& clients) {
  auto init = client(c.target(0), {"init"});
  REQUIRE(init->wait_for_line("initialized", 60s));
  for (int w = 0; w < 3; ++w)
    clients.push_back(client(c.target(w), {"run", std::to_string(steps)}));
}

void check_counted(replicated_cluster& c, int steps,
                   std::vector<std::unique_ptr<child_process>>& clients) {
  for (auto& cl : clients) {
    auto done = cl->wait_for_line("done ", 150s);
    INFO(cl->out());
    REQUIRE(done);
    CHECK(*done == "done " + std::to_string(steps) + " errors 0");
  }
  auto total = std::to_string(3 * steps);
  CHECK(read_counters(c)
        == "c0 " + total + " c1 " + total + " global_step " + total);
}

} // namespace

TEST_CASE("replication: counters stay exact while ps tasks are killed and "
          "replaced",
          "[integration][replication]") {
  replicated_cluster c;
  constexpr int steps = 5000;
  std::vector<std::unique_ptr<child_process>> clients;
  start_counting(c, steps, clients);
  std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pause_ms{100, 400};
  int while_counting = 0;
  for (int kill = 0; kill < 5; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    for (auto& cl : clients)
      if (cl->running()) {
        ++while_counting;
        break;
      }
    auto victim = kill % 2;
    auto other = 1 - victim;
    auto from = c.ps[other]->err().size();
    c.ps[victim]->send_signal(SIGKILL);
    c.ps[victim]->wait(10s);
    c.start_ps(victim);
    // The next kill only once the replacement holds both stores again:
    // two copies lost at once are lost.
    INFO(c.ps[other]->err());
    REQUIRE(c.replicated_again(other, from, ps_name[victim]));
  }
  check_counted(c, steps, clients);
  // Most kills hit the clients while they counted (the count is checked
  // whatever the timing).
  CHECK(while_counting >= 3);
  // The logs name the promotions and the failovers.
  auto ps_logs = c.ps[0]->err() + c.ps[1]->err();
  CHECK_THAT(ps_logs, Catch::Contains("promoted: serves the variables of"));
  std::string worker_logs;
  for (int w = 0; w < 3; ++w)
    worker_logs += c.workers.process("worker", w).err();
  CHECK_THAT(worker_logs, Catch::Contains("failover: the variables of"));
  // The console shows each variable's part: every counter has a primary
  // and a backup, on two tasks.
  auto console = run_process({ACTORFLOW_CONSOLE_PATH, "--cluster",
                              c.workers.spec().to_json(), "--once", "--json"},
                             30s);
  REQUIRE(console.status.success());
  auto doc = nlohmann::json::parse(console.out);
  std::map<std::string, std::set<std::string>> parts;
  for (auto* ps : ps_name) {
    auto* entry = task_entry(doc, ps);
    REQUIRE(entry != nullptr);
    for (auto& v : actors_of_kind(*entry, "variable")) {
      auto detail = v.value("detail", "");
      auto role = detail.find("primary") != std::string::npos  ? "primary"
                  : detail.find("backup") != std::string::npos ? "backup"
                                                               : "other";
      parts[v.value("name", "")].insert(role + std::string{" on "} + ps);
    }
  }
  for (auto name : {"c0", "c1", "global_step"}) {
    INFO(name << ": " << console.out);
    REQUIRE(parts[name].size() == 2);
    CHECK(parts[name].begin()->rfind("backup on ", 0) == 0);
    CHECK(parts[name].rbegin()->rfind("primary on ", 0) == 0);
  }
}

TEST_CASE("replication: a primary stopped past the heartbeat bound is "
          "replaced, and applies no write when it continues",
          "[integration][replication]") {
  replicated_cluster c;
  constexpr int steps = 300;
  std::vector<std::unique_ptr<child_process>> clients;
  start_counting(c, steps, clients);
  std::this_thread::sleep_for(300ms);
  auto from = c.ps[0]->err().size();
  c.ps[0]->send_signal(SIGSTOP);
  // Past the heartbeat bound (4.5 s): the masters fail over to ps:1.
  std::this_thread::sleep_for(6s);
  c.ps[0]->send_signal(SIGCONT);
  check_counted(c, steps, clients);
  // Back, the old primary found itself superseded: it became the backup
  // of the task that took over, instead of serving (or writing) again.
  auto expected = "becomes the backup of " + std::string{ps_name[1]}
                  + " for the variables of " + ps_name[0];
  auto until = std::chrono::steady_clock::now() + 30s;
  while (c.ps[0]->err().find(expected, from) == std::string::npos
         && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  CHECK_THAT(c.ps[0]->err().substr(from), Catch::Contains(expected));
}

TEST_CASE("replication: --replicate_variables needs two ps tasks",
          "[integration][replication]") {
  auto r = run_process({node_path, "--ps_hosts", "127.0.0.1:1",
                        "--worker_hosts", "127.0.0.1:2", "--job_name", "ps",
                        "--task_index", "0", "--replicate_variables"},
                       30s);
  CHECK(r.status.to_string() == "exit code 2");
  CHECK_THAT(r.err, Catch::Contains("--replicate_variables needs at least "
                                    "two tasks in job \"ps\"; the cluster "
                                    "has 1"));
}

// Trains with `extra` flags while ps tasks are killed (SIGKILL) at steps
// 300, 800 and 1300: nothing is lost, no session is rebuilt, nothing is
// restored from a checkpoint.
static void train_through_ps_kills(const std::vector<std::string>& extra) {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  std::vector<std::string> args{ACTORFLOW_TRAIN_PATH, "--local", "2",
                                "--local_ps", "2", "--replicate_variables",
                                "--model", "mlp", "--hidden", "32",
                                "--train_steps", "3000", "--log_every",
                                "100", "--step_timeout", "30"};
  args.insert(args.end(), extra.begin(), extra.end());
  child_process trainer{args};
  // The launcher names each task's process ("started /job:ps/task:1 (pid
  // N)"); the latest one of a task is the one to kill.
  auto pid_of_ps = [&](int task) {
    return pid_of(trainer.err(), "/job:ps/task:" + std::to_string(task));
  };
  int kills = 0;
  for (auto [at, task] : {std::pair{"step 300 ", 0}, {"step 800 ", 1},
                          {"step 1300 ", 0}}) {
    if (!trainer.wait_for_line(std::string{"worker 0: "} + at, 90s))
      break; // finished early: the kills so far count
    auto pid = pid_of_ps(task);
    REQUIRE(pid > 0);
    ::kill(pid, SIGKILL);
    ++kills;
    // The next kill after the replacement joined as the backup.
    std::this_thread::sleep_for(1500ms);
  }
  auto st = trainer.wait(180s);
  INFO("stdout:\n" << trainer.out() << "\nstderr:\n" << trainer.err());
  REQUIRE(st);
  CHECK(st->success());
  CHECK(kills >= 2);
  auto all = trainer.out() + trainer.err();
  using Catch::Contains;
  CHECK_THAT(all, Contains("starting it again"));
  CHECK_THAT(all, Contains("promoted: serves the variables of"));
  // Nothing was lost: no new session, no restore from a checkpoint.
  CHECK_THAT(all, !Contains("a new session will be created"));
  CHECK_THAT(all, !Contains("Restoring parameters"));
  CHECK(test_accuracy(trainer.out()) > 0.6);
}

TEST_CASE("replication: actorflow-train --local trains through ps kills "
          "without a restore",
          "[integration][replication][train]") {
  train_through_ps_kills({});
}

TEST_CASE("replication: synchronous training rides through ps kills (the "
          "accumulators and token queue are replicated)",
          "[integration][replication][train]") {
  train_through_ps_kills({"--sync"});
}

TEST_CASE("replication: a busy ps is not taken for lost (training beside "
          "two busy loops)",
          "[integration][replication][train]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  // Two loops that keep both cores busy, beside every task.
  std::vector<std::unique_ptr<child_process>> busy;
  for (int i = 0; i < 2; ++i)
    busy.push_back(std::make_unique<child_process>(
      std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"}));
  auto result = run_process({ACTORFLOW_TRAIN_PATH, "--local", "2",
                             "--local_ps", "2", "--replicate_variables",
                             "--model", "mlp", "--hidden", "64",
                             "--train_steps", "2500", "--log_every", "500"},
                            170s);
  busy.clear();
  INFO("stdout:\n" << result.out << "\nstderr:\n" << result.err);
  REQUIRE_FALSE(result.timed_out);
  CHECK(result.status.success());
  // What happened while training: once the workers finished, the
  // launcher stops the ps tasks one by one, and a ps that outlives the
  // other may promote itself (rightly: its primary left).
  auto err = result.err.substr(0, result.err.find("the workers finished"));
  auto all = result.out + err;
  using Catch::Contains;
  // No task was declared lost, so nothing failed over.
  CHECK_THAT(all, !Contains("warning: lost "));
  CHECK_THAT(all, !Contains("promoted"));
  CHECK_THAT(all, !Contains("failover"));
  CHECK(test_accuracy(result.out) > 0.6);
}
