// A busy task is not a dead one (issue 31 §1). A task's CAF connections
// judge a peer's silence by its heartbeats' history (phi_accrual.hpp,
// connection_guard.hpp): a peer whose heartbeats come late and
// irregularly, as an overloaded machine's do, is given more silence than
// one whose heartbeats came like clockwork; and a process that was itself
// stopped does not take its peers for lost because their heartbeats wait
// unread in its sockets. With CAF's fixed 4 s timeout, which these
// replaced (--caf.middleman.connection-timeout=4s given to both tasks),
// the 5.5 s stop below took task 1 for lost and failed two steps.

#include <sched.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <thread>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string train_path = ACTORFLOW_TRAIN_PATH;

// Stops `proc` for `d`, then lets it run again.
void stop_for(child_process& proc, std::chrono::milliseconds d) {
  proc.send_signal(SIGSTOP);
  REQUIRE(wait_until_stopped(proc.pid()));
  std::this_thread::sleep_for(d);
  proc.send_signal(SIGCONT);
}

// Pins process `pid` to CPU `cpu`.
bool pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(pid, sizeof(set), &set) == 0;
}

} // namespace

TEST_CASE("busy: a task whose heartbeats came irregularly is given more "
          "silence, and one stopped for good is still lost within the bound",
          "[busy][failures]") {
  counter_on_task1 c;
  auto& [nodes, g, v, increment] = c;
  session sess{nodes.target("local", 0), bounded(), &g};
  sess.run(v.initializer());
  run_options options;
  options.timeout_in_ms = 60000;
  // Steps run throughout; those issued while task 1 is stopped wait for
  // it.
  std::atomic<bool> done{false};
  std::atomic<int> ran{0};
  std::atomic<int> failed{0};
  std::string first_error;
  std::thread steps{[&] {
    while (!done) {
      if (auto e = error_of([&] { sess.run(increment, {}, options); })) {
        if (failed++ == 0)
          first_error = e->what();
      } else {
        ++ran;
      }
    }
  }};
  auto& task1 = nodes.process("local", 1);
  std::this_thread::sleep_for(2s);
  // Heavily loaded: stopped 2.5 s of every 3 s.
  for (int i = 0; i < 5; ++i) {
    stop_for(task1, 2500ms);
    std::this_thread::sleep_for(500ms);
  }
  // Past CAF's old fixed timeout; within what that history tolerates.
  stop_for(task1, 5500ms);
  std::this_thread::sleep_for(1s);
  done = true;
  steps.join();
  INFO("task 0:\n" << nodes.process("local", 0).err());
  INFO("task 1:\n" << task1.err());
  INFO("first error: " << first_error);
  CHECK(failed == 0);
  CHECK(ran > 0);
  CHECK(sess.run(v, {}, options).scalar_value<float>()
        == static_cast<float>(ran.load()));
  for (int t : {0, 1})
    CHECK(nodes.process("local", t).err().find("closed the connection")
          == std::string::npos);
  // Stopped for good: lost once the silence passes what the history
  // tolerates (at most actorflow.idle-timeout, 10 s), not never.
  task1.send_signal(SIGSTOP);
  REQUIRE(wait_until_stopped(task1.pid()));
  auto stopped_at = std::chrono::steady_clock::now();
  auto lost = error_of([&] { sess.run(increment, {}, options); });
  auto took = seconds_since(stopped_at);
  task1.send_signal(SIGKILL);
  REQUIRE(lost);
  CHECK(lost->code() == error_code::unavailable);
  CHECK(took > 4.0);
  CHECK(took < 13.0);
  CHECK_THAT(err_with(nodes.process("local", 0),
                      "longer than its heartbeats' history tolerates"),
             Catch::Contains("longer than its heartbeats' history tolerates"));
}

TEST_CASE("busy: training beside busy loops pinned to the ps's core loses "
          "no task",
          "[busy][failures][train]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  child_process trainer{{train_path, "--local", "2", "--model", "mlp",
                         "--hidden", "64", "--train_steps", "3000",
                         "--log_every", "500", "--step_timeout", "60"}};
  auto ps = [&] { return pid_of(trainer.err(), "/job:ps/task:0"); };
  auto until = std::chrono::steady_clock::now() + 30s;
  // Polls the launcher's stderr for the ps's pid; bounded.
  while (ps() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  REQUIRE(ps() != 0);
  REQUIRE(pin(ps(), 0));
  // Four busy loops on the ps's core: it gets a fifth of it.
  std::vector<std::unique_ptr<child_process>> loops;
  for (int i = 0; i < 4; ++i) {
    loops.push_back(std::make_unique<child_process>(
      std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"}));
    REQUIRE(pin(loops.back()->pid(), 0));
  }
  auto st = trainer.wait(170s);
  loops.clear();
  INFO(trainer.out() << trainer.err());
  REQUIRE(st);
  CHECK(st->success());
  CHECK(test_accuracy(trainer.out()) > 0.6);
  for (auto* lost : {"closed the connection", "Lost task", "lost /job",
                     "reconnected", "a new session will be created"})
    CHECK(trainer.out().find(lost) == std::string::npos);
  for (auto* lost : {"closed the connection", "Lost task", "lost /job",
                     "reconnected"})
    CHECK(trainer.err().find(lost) == std::string::npos);
}

TEST_CASE("busy: without heartbeats an idle connection is not taken for "
          "lost",
          "[busy][failures]") {
  // middleman.heartbeat-interval 0 on both tasks: silence between them
  // says nothing, so only the idle timeout (10 s) applies, as before the
  // detector. (The test's own connection to task 0 keeps heartbeats:
  // steps every 100 ms keep it talking.)
  auto o = captured();
  o.args = {"--caf.middleman.heartbeat-interval=0s"};
  local_cluster nodes{node_path, {{"local", 2}}, o};
  graph g;
  auto as_default = g.as_default();
  auto counter = [](const char* device, const char* name) {
    device_scope pin{device};
    variable v{tensor::scalar(0.0f), named(name)};
    return std::pair{v, v.assign_add(1.0f).op()};
  };
  auto [here, bump_here] = counter("/job:local/task:0", "here");
  auto [there, bump_there] = counter("/job:local/task:1", "there");
  session sess{nodes.target("local", 0), bounded(), &g};
  sess.run(std::vector<fetch>{here.initializer(), there.initializer()});
  sess.run(bump_there);
  // Tasks 0 and 1 idle past the ~4 s a heartbeat history would tolerate.
  auto until = std::chrono::steady_clock::now() + 5500ms;
  while (std::chrono::steady_clock::now() < until) {
    sess.run(bump_here);
    std::this_thread::sleep_for(100ms);
  }
  sess.run(bump_there);
  CHECK(sess.run(there).scalar_value<float>() == 2.0f);
  for (int t : {0, 1})
    CHECK(nodes.process("local", t).err().find("closed the connection")
          == std::string::npos);
}
