// Servers in one process: partitions registered for a session are released
// when the session closes, and a stopped server refuses new sessions.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/client/runtime.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;

namespace {

// Polls `pred` until it holds or two seconds pass (stats are asynchronous).
template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred())
      return true;
    std::this_thread::yield();
  }
  return pred();
}

} // namespace

TEST_CASE("server: closing a session releases its partitions",
          "[server][session]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f);
  auto b = a * 3.0f;
  auto c = b + 1.0f;
  auto before = srv.stats().partitions;
  {
    session sess{srv.target(), session_config{}, &g};
    CHECK(sess.run(b).scalar_value<float>() == 6.0f);
    CHECK(sess.run(c).scalar_value<float>() == 7.0f);
    // Two fetch signatures: two registered partitions on the one task.
    CHECK(srv.stats().partitions == before + 2);
  }
  CHECK(eventually([&] { return srv.stats().partitions == before; }));
  auto stats = srv.stats();
  CHECK(stats.steps_run >= 2);
  CHECK(stats.messages_handled > 0);
  CHECK(stats.task == "/job:local/replica:0/task:0");
}

TEST_CASE("server: a closed session refuses to run", "[server][session]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f);
  session sess{srv.target(), session_config{}, &g};
  CHECK(sess.run(a).scalar_value<float>() == 1.0f);
  sess.close();
  try {
    sess.run(a);
    FAIL("run after close succeeded");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::aborted);
  }
}

TEST_CASE("server: a malformed address of any task is InvalidArgument at "
          "start, naming the pair and the task",
          "[server]") {
  for (std::string bad : {"ps0", "ps0:port", "::1:2222", ":2222", ""}) {
    INFO(bad);
    cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
      {"worker", {"127.0.0.1:" + std::to_string(testing::free_port())}},
      {"ps", {bad}}}};
    auto err = testing::error_of([&] { server srv{cluster, "worker", 0}; });
    REQUIRE(err.has_value());
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("\"" + bad + "\"")
                 && Catch::Contains("/job:ps/replica:0/task:0"));
  }
}

TEST_CASE("server: a stopped server makes new sessions Unavailable",
          "[server][session]") {
  auto srv = server::create_local_server();
  auto target = srv.target();
  srv.stop();
  CHECK(srv.stopped());
  session_config cfg;
  cfg.operation_timeout_in_ms = 2000;
  try {
    session sess{target, cfg};
    FAIL("connected to a stopped server");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::unavailable);
    CHECK_THAT(e.what(), Catch::Contains(target.substr(6)));
  }
}

TEST_CASE("server: a malformed node fails its run, not the server",
          "[server][errors]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto x = constant(std::vector<float>{1, 2, 3, 4});
  // A Split whose num_split attribute is a string: only a hand-made graph
  // (or a hostile client) can send this.
  node_def bad;
  bad.name = "bad_split";
  bad.op = "Split";
  bad.attrs["num_split"] = std::string{"two"};
  auto dim = constant(0);
  auto op = g.add_node(bad, {dim, x}, {dtype::float32}, {});
  session sess{srv.target(), session_config{}, &g};
  try {
    sess.run(op.out(0));
    FAIL("a malformed node ran");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("num_split"));
  }
  // The server and the session still work.
  CHECK(sess.run(x).num_elements() == 4);
  session other{srv.target(), session_config{}, &g};
  CHECK(other.run(x).flat<float>()[3] == 4.0f);
}

TEST_CASE("server: names fetch tensors (\"n:0\") or run operations (\"n\")",
          "[server][session]") {
  graph g;
  auto as_default = g.as_default();
  variable v{5.0f, actorflow::testing::named("v")};
  session sess{session_config{}, &g};
  // "init" is an operation: it runs and yields no value.
  auto init = global_variables_initializer();
  CHECK(init.name() == "init");
  CHECK_FALSE(sess.run("init").valid());
  auto out = sess.run(std::vector<fetch>{"v:0", "v/read:0", "v/Assign"});
  CHECK(out[0].scalar_value<float>() == 5.0f);
  CHECK(out[1].scalar_value<float>() == 5.0f);
  CHECK_FALSE(out[2].valid());
}

TEST_CASE("server: an embedding CAF actor asks the task for its stats",
          "[server][caf]") {
  auto srv = server::create_local_server();
  caf::scoped_actor self{default_system()};
  task_stats stats;
  bool answered = false;
  self->request(srv.task_actor(), std::chrono::seconds(5), get_stats_atom_v)
    .receive(
      [&](task_stats& s) {
        stats = std::move(s);
        answered = true;
      },
      [&](caf::error&) {});
  REQUIRE(answered);
  CHECK(stats.task == "/job:local/replica:0/task:0");
  CHECK(stats.messages_handled >= 1);
}

TEST_CASE("server: assigning one variable's ref to another copies its value",
          "[server][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, actorflow::testing::named("v")};
  variable w{9.0f, actorflow::testing::named("w")};
  auto copy = v.assign(w.ref());
  session sess{session_config{}, &g};
  sess.run(global_variables_initializer());
  CHECK(sess.run(copy).scalar_value<float>() == 9.0f);
  CHECK(sess.run(v).scalar_value<float>() == 9.0f);
}

TEST_CASE("server: its monitor traces the next step on request, without "
          "handing the client stats it did not ask for",
          "[server][monitoring]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f, "a");
  auto b = a * 3.0f;
  session sess{srv.target(), session_config{}, &g};
  CHECK(sess.run(b).scalar_value<float>() == 6.0f);
  caf::scoped_actor self{default_system()};
  auto task = caf::actor_cast<master_actor>(srv.task_actor());
  monitor_actor mon;
  self->request(task, std::chrono::seconds(10), get_monitor_atom_v)
    .receive([&](monitor_actor& m) { mon = m; },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  REQUIRE(mon);
  auto last_trace = [&] {
    std::pair<int64_t, std::string> result;
    self->request(mon, std::chrono::seconds(10), monitor_get_trace_atom_v)
      .receive(
        [&](int64_t at, std::string& text) { result = {at, std::move(text)}; },
        [&](caf::error& err) { FAIL(caf::to_string(err)); });
    return result;
  };
  CHECK(last_trace().first == 0);
  self->request(mon, std::chrono::seconds(10), monitor_trace_atom_v)
    .receive([&](status& st) { CHECK(st.ok()); },
             [&](caf::error& err) { FAIL(caf::to_string(err)); });
  run_metadata md;
  CHECK(sess.run(b, {}, run_options{}, &md).scalar_value<float>() == 6.0f);
  // The client did not ask for a trace: none in its metadata.
  CHECK_FALSE(md.has_step_stats);
  auto [at, trace] = last_trace();
  CHECK(at > 0);
  CHECK(trace.find("\"traceEvents\"") != std::string::npos);
  CHECK(trace.find("\"name\":\"mul\"") != std::string::npos);
  // One step only: the next one is not traced again.
  sess.run(b);
  CHECK(last_trace().first == at);
}

TEST_CASE("server: a queue's size and blocked enqueues and dequeues show in "
          "its task's metrics",
          "[server][monitoring]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{1, {dtype::float32}, {tensor_shape{}}, "metered"};
  auto enqueue = q.enqueue({constant(1.0f)});
  auto dequeue = q.dequeue();
  // Every wait bounded: a broken queue fails the test instead of hanging.
  session_config bounded;
  bounded.operation_timeout_in_ms = 20000;
  session sess{srv.target(), bounded, &g};
  task_options opts;
  opts.job = srv.job_name();
  opts.task = srv.task_index();
  auto gauge = [&](const std::string& name) {
    auto text = metrics_text(default_system(), opts);
    auto key = name + "{task=\"/job:local/replica:0/task:0\",queue=\"metered\"";
    auto at = text.find(key);
    if (at == std::string::npos)
      return -1.0;
    auto value = text.find("} ", at);
    return std::stod(text.substr(value + 2));
  };
  // A dequeue waits on the empty queue.
  auto waiting = std::async(std::launch::async, [&] {
    session other{srv.target(), bounded, &g};
    return other.run(dequeue.front()).scalar_value<float>();
  });
  CHECK(eventually([&] {
    return gauge("actorflow_queue_blocked_dequeues") == 1;
  }));
  CHECK(gauge("actorflow_queue_capacity") == 1);
  sess.run(enqueue);
  CHECK(waiting.get() == 1.0f);
  CHECK(eventually([&] {
    return gauge("actorflow_queue_blocked_dequeues") == 0;
  }));
  // The queue fills; a second enqueue waits for room.
  sess.run(enqueue);
  CHECK(gauge("actorflow_queue_size") == 1);
  auto blocked = std::async(std::launch::async, [&] {
    session other{srv.target(), bounded, &g};
    other.run(enqueue);
  });
  CHECK(eventually([&] {
    return gauge("actorflow_queue_blocked_enqueues") == 1;
  }));
  CHECK(sess.run(dequeue.front()).scalar_value<float>() == 1.0f);
  blocked.get();
  CHECK(gauge("actorflow_queue_blocked_enqueues") == 0);
  CHECK(gauge("actorflow_queue_size") == 1);
}

namespace {

/// Serves `port` for `master`'s task: the first `swallow` requests for the
/// worker go unanswered (a master too busy to answer in time), the rest
/// are handed on; anything else is dropped.
caf::actor publish_slow_master(caf::actor master, uint16_t port, int swallow,
                               std::shared_ptr<std::atomic<int>> asked) {
  auto& sys = master.home_system();
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  auto proxy = sys.spawn([master, swallow, asked,
                          held](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(caf::drop);
    return {
      [=](get_worker_atom) {
        auto rp = self->make_response_promise();
        if (asked->fetch_add(1) < swallow) {
          held->push_back(rp); // answered never
          return;
        }
        self->request(master, caf::infinite, get_worker_atom_v)
          .then([rp](worker_actor& w) mutable { rp.deliver(w); });
      },
    };
  });
  auto published = sys.middleman().publish(proxy, port, "127.0.0.1");
  REQUIRE(published);
  return proxy;
}

} // namespace

TEST_CASE("server: a task whose master is slow to hand out its worker is "
          "asked again within the step's deadline, not given up on",
          "[server][busy]") {
  using namespace actorflow::testing;
  auto first = loopback(free_port());
  auto front = free_port();
  using jobs = std::map<std::string, std::vector<std::string>>;
  cluster_spec cluster{jobs{{"local", {first, loopback(front)}}}};
  // Task 1 really listens elsewhere; its ClusterSpec address is the slow
  // front. Its own ClusterSpec names task 0 where nothing listens, so
  // that it does not greet task 0 (the membership authority), which
  // would then reach it through that connection, not the front.
  server s0{cluster, "local", 0};
  server s1{cluster_spec{jobs{{"local", {loopback(free_port()),
                                         loopback(free_port())}}}},
            "local", 1};
  graph g;
  auto as_default = g.as_default();
  variable v;
  {
    device_scope pin{"/job:local/task:1"};
    v = variable{1.0f, actorflow::testing::named("v")};
  }
  auto asked = std::make_shared<std::atomic<int>>(0);
  session_config config;
  SECTION("the first ask unanswered: the step is served by the second") {
    auto proxy = publish_slow_master(s1.task_actor(), front, 1, asked);
    config.operation_timeout_in_ms = 30000;
    session sess{s0.target(), config, &g};
    sess.run(v.initializer());
    CHECK(sess.run(v).scalar_value<float>() == 1.0f);
    CHECK(asked->load() == 2);
    caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
  }
  SECTION("never answered: the step fails at its own deadline") {
    auto proxy = publish_slow_master(s1.task_actor(), front, 1000, asked);
    config.operation_timeout_in_ms = 2000;
    session sess{s0.target(), config, &g};
    try {
      sess.run(v.initializer());
      FAIL("the step ran");
    } catch (const op_error& e) {
      CHECK(e.get_status().code() == error_code::deadline_exceeded);
    }
    CHECK(asked->load() >= 1);
    caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
  }
}
