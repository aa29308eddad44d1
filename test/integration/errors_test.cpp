// Errors across the wire: each must come back to the client as an op_error
// with TensorFlow's code and a message naming what failed, and none may
// hang.

#include <fstream>
#include <optional>
#include <thread>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("errors: uninitialized variable over the wire", "[errors]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  // Through the second task, so the failure crosses two hops.
  session sess{nodes.target("local", 1), bounded(), &g};
  auto err = error_of([&] { sess.run(var); });
  REQUIRE(err);
  CHECK(err->code() == error_code::failed_precondition);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("Attempting to use uninitialized value var"));
  // The session survives the failed step.
  sess.run(global_variables_initializer());
  CHECK(sess.run(var).scalar_value<float>() == 0.0f);
}

TEST_CASE("errors: device naming a task not in the cluster", "[errors]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  output bad;
  {
    device_scope nowhere{"/job:local/task:7"};
    bad = constant(1.0f, "bad");
  }
  session sess{nodes.target("local", 0), bounded(), &g};
  auto err = error_of([&] { sess.run(bad); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(), Catch::Contains("bad"));
  CHECK_THAT(err->get_status().message(), Catch::Contains("task:7"));
}

TEST_CASE("errors: unknown fetch and bad feeds", "[errors]") {
  local_cluster nodes{node_path, {{"local", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {2}, "x");
  auto y = x * 2.0f;
  session sess{nodes.target("local", 0), bounded(), &g};

  SECTION("fetching an unknown node is NotFound") {
    auto err = error_of([&] { sess.run(fetch{"no_such_node:0"}); });
    REQUIRE(err);
    CHECK(err->code() == error_code::not_found);
    CHECK_THAT(err->get_status().message(), Catch::Contains("no_such_node"));
  }
  SECTION("feeding the wrong dtype is InvalidArgument") {
    auto err = error_of([&] {
      sess.run(y, {{x, tensor::vec(std::vector<int32_t>{1, 2})}});
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(), Catch::Contains("x"));
  }
  SECTION("feeding the wrong shape is InvalidArgument") {
    auto err = error_of([&] {
      sess.run(y, {{x, tensor::vec(std::vector<float>{1, 2, 3})}});
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(), Catch::Contains("x"));
  }
  SECTION("a missing feed is InvalidArgument") {
    auto err = error_of([&] { sess.run(y); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(), Catch::Contains("x"));
  }
  // Whatever failed, a good step still runs.
  auto good = sess.run(y, {{x, tensor::vec(std::vector<float>{1, 2})}});
  CHECK(good.to_string() == "[2. 4.]");
}

TEST_CASE("errors: an unreachable master is Unavailable", "[errors]") {
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f);
  // A free port with nothing listening.
  auto address = "127.0.0.1:" + std::to_string(support::free_port());
  session_config config;
  config.operation_timeout_in_ms = 3000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] {
    session sess{"grpc://" + address, config, &g};
    sess.run(c);
  });
  auto took = seconds_since(start);
  REQUIRE(err);
  CHECK(err->code() == error_code::unavailable);
  CHECK_THAT(err->get_status().message(), Catch::Contains(address));
  // A bound on "no hang", not a performance figure.
  CHECK(took < 15.0);
}

TEST_CASE("errors: a step waiting on an unreachable task times out",
          "[errors]") {
  // Task 1 is in the spec but never started: its port stays closed.
  auto opts = captured();
  opts.not_started = {{"worker", 1}};
  local_cluster nodes{node_path, {{"worker", 2}}, opts};
  graph g;
  auto as_default = g.as_default();
  output remote;
  {
    device_scope on_task1{"/job:worker/task:1"};
    remote = constant(5.0f, "remote");
  }
  auto local = constant(6.0f, "local");
  session sess{nodes.target("worker", 0), bounded(), &g};
  run_options options;
  options.timeout_in_ms = 2000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(remote, {}, options); });
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what());
  CHECK((err->code() == error_code::deadline_exceeded
         || err->code() == error_code::unavailable));
  CHECK(took < 15.0);
  // The master is still usable for steps that stay on reachable tasks.
  CHECK(sess.run(local, {}, options).scalar_value<float>() == 6.0f);
}

// Enough remote steps for a session's caller to wait by running actors
// (client/src/session.cpp: while its replies average 0.1-2 ms), so that the
// failures below reach a caller waiting that way too.
constexpr int warm_up_steps = 30;

/// Two tasks, a constant pinned on task 1, and a session on task 0 that
/// has run it warm_up_steps times.
struct warmed_up_cluster {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  output on_task1;
  std::optional<session> sess;

  warmed_up_cluster() {
    auto as_default = g.as_default();
    {
      device_scope pin{"/job:local/task:1"};
      on_task1 = constant(2.0f, "on_task1");
    }
    sess.emplace(nodes.target("local", 0), bounded(), &g);
    for (int i = 0; i < warm_up_steps; ++i)
      REQUIRE(sess->run(on_task1).scalar_value<float>() == 2.0f);
  }
};

// A lost task must be noticed (the header promises Unavailable for a lost
// master or task): the step fails with Unavailable instead of running into
// its deadline, which is set only so that a broken build cannot hang.
TEST_CASE("errors: a lost task fails the step with Unavailable",
          "[errors]") {
  warmed_up_cluster c;
  auto& nodes = c.nodes;
  auto& sess = *c.sess;
  const auto& on_task1 = c.on_task1;
  auto st = nodes.process("local", 1).stop();
  CHECK(st.success());
  run_options options;
  options.timeout_in_ms = 8000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(on_task1, {}, options); });
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::unavailable);
  CHECK(took < 15.0);
}

// A later step's request to another process goes over the tensor channel,
// which reports no failure of its own: the master notices the task's end.
TEST_CASE("errors: a task killed while a later step waits on it fails the "
          "step with Unavailable",
          "[errors]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  operation enqueue;
  output dequeue;
  {
    device_scope pin{"/job:local/task:1"};
    fifo_queue q{4, {dtype::float32}, {tensor_shape{}}};
    enqueue = q.enqueue({constant(1.0f)});
    dequeue = q.dequeue().front();
  }
  session sess{nodes.target("local", 0), bounded(), &g};
  for (int i = 0; i < 2; ++i) {
    sess.run(enqueue);
    REQUIRE(sess.run(dequeue).scalar_value<float>() == 1.0f);
  }
  std::optional<op_error> err;
  auto start = std::chrono::steady_clock::now();
  std::thread waiting{[&] {
    run_options options;
    options.timeout_in_ms = 20000;
    err = error_of([&] { sess.run(dequeue, {}, options); });
  }};
  // Let the step reach task 1 and wait there first: the session gives no
  // sign that a step is waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  nodes.process("local", 1).send_signal(SIGKILL);
  waiting.join();
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::unavailable);
  CHECK(took < 10.0);
}

TEST_CASE("errors: a lost master fails the session with Unavailable",
          "[errors]") {
  auto how = GENERATE(SIGTERM, SIGKILL);
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  auto c = constant(2.0f, "c");
  session sess{nodes.target("local", 0), bounded(), &g};
  for (int i = 0; i < warm_up_steps; ++i)
    REQUIRE(sess.run(c).scalar_value<float>() == 2.0f);
  auto& master = nodes.process("local", 0);
  master.send_signal(how);
  master.stop();
  run_options options;
  options.timeout_in_ms = 8000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(c, {}, options); });
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::unavailable);
  CHECK(took < 15.0);
}

// close() from another thread ends a step that is still running, whether
// its caller blocks or, after warm_up_steps remote steps, runs actors
// while it waits, and whether the step's request went over CAF (its
// first run) or over the tensor channel (a later one).
TEST_CASE("errors: closing a session ends its running step with Aborted",
          "[errors]") {
  auto warm_up = GENERATE(0, warm_up_steps);
  auto ran_before = GENERATE(false, true);
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  auto c = constant(2.0f, "c");
  operation enqueue;
  output never;
  {
    device_scope pin{"/job:local/task:1"};
    fifo_queue q{4, {dtype::float32}, {tensor_shape{}}};
    enqueue = q.enqueue({constant(1.0f)});
    never = q.dequeue().front();
  }
  session sess{nodes.target("local", 0), bounded(), &g};
  for (int i = 0; i < warm_up; ++i)
    REQUIRE(sess.run(c).scalar_value<float>() == 2.0f);
  if (ran_before) {
    sess.run(enqueue);
    REQUIRE(sess.run(never).scalar_value<float>() == 1.0f);
  }
  std::optional<op_error> err;
  auto start = std::chrono::steady_clock::now();
  std::thread waiting{[&] {
    run_options options;
    options.timeout_in_ms = 20000;
    err = error_of([&] { sess.run(never, {}, options); });
  }};
  // Let the step start waiting on the queue first: the session gives no
  // sign that a step is waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sess.close();
  waiting.join();
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::aborted);
  CHECK(took < 10.0);
}

// Bounds below are deadlines of the behaviour (a step's own deadline is
// 20 s), not speed figures: loose enough for a loaded machine.
TEST_CASE("errors: a dead task is named with its address at once, later "
          "steps fail within about a second, and its restart aborts the "
          "session once",
          "[errors][failures]") {
  warmed_up_cluster c;
  auto& nodes = c.nodes;
  auto& sess = *c.sess;
  const auto& on_task1 = c.on_task1;
  nodes.process("local", 1).send_signal(SIGKILL);
  run_options options;
  options.timeout_in_ms = 20000;
  auto named = "/job:local/replica:0/task:1 at "
               + nodes.address("local", 1);
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(on_task1, {}, options); });
  auto took = seconds_since(start);
  REQUIRE(err);
  INFO(err->what() << " after " << took << " s");
  CHECK(err->code() == error_code::unavailable);
  CHECK_THAT(err->get_status().message(), Catch::Contains(named));
  CHECK(took < 3.0);
  // Still down: every step that needs it fails the same way, without
  // waiting for its deadline.
  for (int i = 0; i < 2; ++i) {
    start = std::chrono::steady_clock::now();
    err = error_of([&] { sess.run(on_task1, {}, options); });
    took = seconds_since(start);
    REQUIRE(err);
    INFO(err->what() << " after " << took << " s");
    CHECK(err->code() == error_code::unavailable);
    CHECK_THAT(err->get_status().message(), Catch::Contains(named));
    CHECK(took < 3.0);
  }
  // Started again (a new process, without the state): Aborted once, then
  // the session works again.
  nodes.process("local", 1).stop();
  child_process again{
    support::node_command(node_path, nodes.spec(), "local", 1)};
  REQUIRE(again.wait_for_line("serving", 15s));
  err = error_of([&] { sess.run(on_task1, {}, options); });
  REQUIRE(err);
  CHECK(err->code() == error_code::aborted);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("has restarted without its state"));
  CHECK(sess.run(on_task1, {}, options).scalar_value<float>() == 2.0f);
}

TEST_CASE("errors: a silent task (SIGSTOP) is reported within seconds, and "
          "when it continues the session goes on with its state",
          "[errors][failures]") {
  counter_on_task1 c;
  auto& [nodes, g, v, increment] = c;
  session sess{nodes.target("local", 0), bounded(), &g};
  sess.run(v.initializer());
  for (int i = 0; i < 5; ++i)
    sess.run(increment);
  auto& task1 = nodes.process("local", 1);
  task1.send_signal(SIGSTOP);
  // kill() returns before every thread of the task has stopped: a step of
  // ~30 us could still be answered by a thread that was running. Wait
  // until the kernel says the process is stopped.
  REQUIRE(wait_until_stopped(task1.pid()));
  run_options options;
  options.timeout_in_ms = 20000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(v, {}, options); });
  auto took = seconds_since(start);
  // Continue it whatever happened, or the cluster's stop would wait.
  task1.send_signal(SIGCONT);
  REQUIRE(err);
  INFO(err->what() << " after " << took << " s");
  CHECK(err->code() == error_code::unavailable);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("/job:local/replica:0/task:1 at "
                             + nodes.address("local", 1)));
  // Reported by the heartbeat's 4 s timeout, not the step's 20 s deadline.
  CHECK(took < 10.0);
  // The same process came back: nothing was lost, nothing is aborted.
  // Give the continued task a moment to reconnect; the session offers no
  // event for that.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(sess.run(v, {}, options).scalar_value<float>() == 5.0f);
  sess.run(increment, {}, options);
  CHECK(sess.run(v, {}, options).scalar_value<float>() == 6.0f);
  // The master's node said so in its log, both ways.
  auto& master = nodes.process("local", 0);
  auto logged = [&](const std::string& line) {
    auto until = std::chrono::steady_clock::now() + 5s;
    // Polls the master's stderr: child_process waits only for stdout lines;
    // bounded by 5 s.
    while (std::chrono::steady_clock::now() < until) {
      if (master.err().find(line) != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  INFO(master.err());
  CHECK(logged("actorflow-node: warning: lost /job:local/replica:0/task:1 "
               "at " + nodes.address("local", 1)));
  CHECK(logged("actorflow-node: reconnected to /job:local/replica:0/task:1 "
               "at " + nodes.address("local", 1)));
}

TEST_CASE("errors: a step on tasks that are not up waits for them until its "
          "deadline, then names every missing one, and uses a task that "
          "comes up in time",
          "[errors][failures]") {
  auto opts = captured();
  opts.not_started = {{"worker", 1}, {"worker", 2}};
  local_cluster nodes{node_path, {{"worker", 3}}, opts};
  graph g;
  auto as_default = g.as_default();
  output on1;
  output on2;
  {
    device_scope pin{"/job:worker/task:1"};
    on1 = constant(1.0f, "on1");
  }
  {
    device_scope pin{"/job:worker/task:2"};
    on2 = constant(2.0f, "on2");
  }
  auto sum = on1 + on2;
  session sess{nodes.target("worker", 0), bounded(), &g};
  run_options options;
  options.timeout_in_ms = 2000;
  auto err = error_of([&] { sess.run(sum, {}, options); });
  REQUIRE(err);
  INFO(err->what());
  // The caller's deadline ended the wait: DeadlineExceeded, as TF's client
  // reports it (issue 34; it was Unavailable).
  CHECK(err->code() == error_code::deadline_exceeded);
  for (int t : {1, 2})
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("/job:worker/replica:0/task:" + std::to_string(t)
                               + " at " + nodes.address("worker", t)));
  // Both come up while the next step waits (its deadline is 20 s).
  options.timeout_in_ms = 20000;
  float got = 0;
  std::optional<op_error> err2;
  std::thread step{[&] {
    err2 = error_of([&] {
      got = sess.run(sum, {}, options).scalar_value<float>();
    });
  }};
  // Started from this thread, which outlives them (node_command's
  // --parent-pid ties a node to the thread that spawned it).
  // Let the step start waiting for them first: the session gives no sign
  // that a step is waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<std::unique_ptr<child_process>> late;
  for (int t : {1, 2})
    late.push_back(std::make_unique<child_process>(
      support::node_command(node_path, nodes.spec(), "worker", t)));
  step.join();
  INFO((err2 ? err2->what() : "ok"));
  CHECK_FALSE(err2);
  CHECK(got == 3.0f);
}
