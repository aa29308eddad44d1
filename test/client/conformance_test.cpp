// TensorFlow conformance, second pass (issue 34), through sessions: the
// new dtypes end to end, Assert, Print's first_n, tf.group per device,
// with_dependencies, device_filters, partition graphs, a server's default
// session config and the wait for tasks that are not up.

#include <catch2/catch.hpp>

#include <chrono>
#include <complex>
#include <future>
#include <thread>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "actorflow/actorflow.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                       - start)
    .count();
}

// What this process writes to std::cerr while it lives (Print's lines, the
// master's log), instead of the terminal.
class captured_cerr {
public:
  captured_cerr() : old_(std::cerr.rdbuf(buf_.rdbuf())) {
    // nop
  }
  ~captured_cerr() {
    std::cerr.rdbuf(old_);
  }
  std::string text() const {
    return buf_.str();
  }

private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

// A Const on task `task` of job "local".
output const_on_task(int task, float value, const std::string& name) {
  device_scope pin{"/job:local/task:" + std::to_string(task)};
  return constant(value, name);
}

// Job "local" of `n` tasks on distinct free loopback ports (two calls of
// free_port() may return the same one).
cluster_spec local_tasks(size_t n) {
  std::vector<std::string> addresses;
  for (auto port : support::free_ports(n))
    addresses.push_back(loopback(port));
  return cluster_spec{std::map<std::string, std::vector<std::string>>{
    {"local", addresses}}};
}

cluster_spec two_tasks() {
  return local_tasks(2);
}

} // namespace

TEST_CASE("conformance: the new dtypes through variables, queues and casts",
          "[conformance][dtype]") {
  graph g;
  auto as_default = g.as_default();
  auto h = constant(tensor::from_vector(
    std::vector<half>{half(1.5f), half(-2.0f)}, tensor_shape{2}));
  variable v{h, named("v16")};
  auto doubled = v.value() + v.value();
  auto c = placeholder(dtype::complex64, tensor_shape{2}, "c");
  auto cc = mul(c, c);
  auto as_i8 = cast(constant(std::vector<float>{200.0f, -3.7f}), dtype::int8);
  fifo_queue q{4, {dtype::int16, dtype::complex128}, {{}, {}}};
  auto enq = q.enqueue({constant(tensor::scalar(int16_t{-7})),
                        constant(tensor::scalar(std::complex<double>(1, 2)))});
  auto deq = q.dequeue();
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  auto d = sess.run(doubled);
  CHECK(d.type() == dtype::float16);
  CHECK(static_cast<float>(d.flat<half>()[0]) == 3.0f);
  CHECK(static_cast<float>(d.flat<half>()[1]) == -4.0f);
  using c64 = std::complex<float>;
  auto r = sess.run(cc, {{c, tensor::vec<c64>({c64(0, 1), c64(1, 1)})}});
  CHECK(r.flat<c64>()[0] == c64(-1, 0));
  CHECK(r.flat<c64>()[1] == c64(0, 2));
  auto i8 = sess.run(as_i8);
  CHECK(i8.flat<int8_t>()[0] == 127);
  CHECK(i8.flat<int8_t>()[1] == -3);
  sess.run(enq);
  auto got = sess.run({deq[0], deq[1]});
  CHECK(got[0].scalar_value<int16_t>() == -7);
  CHECK(got[1].scalar_value<std::complex<double>>()
        == std::complex<double>(1, 2));
}

TEST_CASE("conformance: a failing Assert fails its step with its data and "
          "aborts a blocked dequeue beside it",
          "[conformance][assert]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, tensor_shape{}, "x");
  auto ok = assert_(greater(x, constant(0.0f)),
                    {constant(std::string{"x must be positive, got"}), x});
  output checked;
  {
    control_dependencies after{ok};
    checked = identity(x, "checked");
  }
  fifo_queue q{4, {dtype::float32}, {{}}};
  auto deq = q.dequeue();
  session sess{bounded(), &g};
  CHECK(sess.run(checked, {{x, tensor::scalar(2.0f)}}).scalar_value<float>()
        == 2.0f);
  auto err = error_of([&] { sess.run(checked, {{x, tensor::scalar(-1.0f)}}); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(),
             Contains("assertion failed: [x must be positive, got] [-1]"));
  // The dequeue waits on an empty queue; the failed assert ends the step
  // at once (not at the deadline) and withdraws the dequeue.
  auto start = std::chrono::steady_clock::now();
  err = error_of([&] {
    sess.run({fetch{deq[0]}, fetch{ok}}, {{x, tensor::scalar(-1.0f)}});
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK(seconds_since(start) < 10.0);
  // Nothing was taken by the withdrawn dequeue: the next element is the
  // next dequeue's.
  sess.run(q.enqueue({constant(5.0f)}));
  CHECK(sess.run(deq[0]).scalar_value<float>() == 5.0f);
  // A condition that is not a bool scalar is refused where it is built.
  auto bad = error_of([&] { assert_(x, {}); });
  REQUIRE(bad);
  CHECK(bad->code() == error_code::invalid_argument);
}

TEST_CASE("conformance: Print honours first_n per node and session",
          "[conformance][print]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(3.0f);
  auto p = print(x, {x}, "first_n says: ", 2);
  captured_cerr cerr;
  {
    session sess{bounded(), &g};
    for (int i = 0; i < 4; ++i)
      CHECK(sess.run(p).scalar_value<float>() == 3.0f);
    // Another plan of the same session continues the count.
    sess.run({fetch{p}, fetch{x}});
  }
  CHECK(count_of(cerr.text(), "first_n says: [3]") == 2);
  {
    // A new session counts from zero (TF's kernels are per session).
    session sess{bounded(), &g};
    sess.run(p);
  }
  CHECK(count_of(cerr.text(), "first_n says: [3]") == 3);
}

TEST_CASE("conformance: tf.group makes one NoOp per device and a root",
          "[conformance][group]") {
  graph g;
  auto as_default = g.as_default();
  variable a{1.0f, named("a")};
  variable b;
  variable c;
  {
    device_scope on{"/job:ps/task:0"};
    b = variable{2.0f, named("b")};
    c = variable{3.0f, named("c")};
  }
  auto root = group({a.initializer(), b.initializer(), c.initializer()});
  CHECK(root.name() == "group_deps");
  auto& nodes = g.def().nodes;
  std::map<std::string, const node_def*> by_name;
  for (auto& n : nodes)
    by_name[n.name] = &n;
  // Devices sort "" first: group_deps/NoOp for a's, _1 for the ps's two.
  REQUIRE(by_name.count("group_deps/NoOp") == 1);
  REQUIRE(by_name.count("group_deps/NoOp_1") == 1);
  auto& local = *by_name["group_deps/NoOp"];
  auto& ps = *by_name["group_deps/NoOp_1"];
  CHECK(local.device.empty());
  CHECK(local.inputs == std::vector<std::string>{"^a/Assign"});
  CHECK(ps.device == "/job:ps/task:0");
  CHECK(ps.inputs == std::vector<std::string>{"^b/Assign", "^c/Assign"});
  CHECK(by_name["group_deps"]->inputs
        == std::vector<std::string>{"^group_deps/NoOp",
                                    "^group_deps/NoOp_1"});
  // One device: a single NoOp, placed there.
  auto one = group({b.initializer(), c.initializer()}, "ps_init");
  CHECK(by_name.count("ps_init/NoOp") == 0);
  CHECK(one.device() == "/job:ps/task:0");
  CHECK(one.name() == "ps_init");
}

TEST_CASE("conformance: with_dependencies returns its tensor after the "
          "dependencies ran",
          "[conformance][group]") {
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, named("v")};
  auto bumped = with_dependencies({v.assign_add(10.0f).op()}, v.value());
  CHECK(bumped.op().name() == "control_dependency");
  auto& def = g.def().nodes.back();
  CHECK(def.op == "Identity");
  CHECK(std::find(def.inputs.begin(), def.inputs.end(), "^AssignAdd")
        != def.inputs.end());
  session sess{bounded(), &g};
  sess.run(v.initializer());
  CHECK(sess.run(bumped).scalar_value<float>() == 11.0f);
}

TEST_CASE("conformance: device_filters keep a session to the tasks they "
          "name",
          "[conformance][device_filters]") {
  // Three tasks; task 2 is never started.
  auto cluster = local_tasks(3);
  server s0{cluster, "local", 0};
  server s1{cluster, "local", 1};
  graph g;
  auto as_default = g.as_default();
  auto on1 = const_on_task(1, 1.0f, "on1");
  auto on2 = const_on_task(2, 2.0f, "on2");
  auto config = bounded();
  config.device_filters = {"/job:local/task:1"};
  session sess{s0.target(), config, &g};
  CHECK(sess.run(on1).scalar_value<float>() == 1.0f);
  // Outside the filters: refused at once, as TF's placer refuses it (not
  // waited for, which a session without filters would do).
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(on2); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(),
             Contains("Cannot assign a device for operation 'on2': "
                      "Operation was explicitly assigned to "
                      "/job:local/task:2 but available devices are [ "));
  CHECK_THAT(err->what(), Contains("/job:local/replica:0/task:1"));
  CHECK_THAT(err->what(), !Contains("task:2/device"));
  CHECK(seconds_since(start) < 5.0);
  config.device_filters = {"not a device"};
  session bad{s0.target(), config, &g};
  err = error_of([&] { bad.run(on1); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Contains("Invalid device filter 'not a device'"));
}

TEST_CASE("conformance: RunMetadata.partition_graphs holds each task's "
          "graph",
          "[conformance][run_metadata]") {
  auto cluster = two_tasks();
  server s0{cluster, "local", 0};
  server s1{cluster, "local", 1};
  graph g;
  auto as_default = g.as_default();
  auto remote = const_on_task(1, 4.0f, "remote");
  auto sum = add(remote, constant(1.0f, "one"), "sum");
  session sess{s0.target(), bounded(), &g};
  run_metadata md;
  sess.run(sum, {}, {}, &md);
  CHECK(md.partition_graphs.empty());
  run_options opts;
  opts.output_partition_graphs = true;
  CHECK(sess.run(sum, {}, opts, &md).scalar_value<float>() == 5.0f);
  REQUIRE(md.partition_graphs.size() == 2);
  std::map<std::string, std::vector<std::string>> ops_by_device;
  for (auto& part : md.partition_graphs)
    for (auto& n : part.nodes)
      ops_by_device[n.device].push_back(n.op + ":" + n.name);
  auto t0 = std::string{"/job:local/replica:0/task:0/device:CPU:0"};
  auto t1 = std::string{"/job:local/replica:0/task:1/device:CPU:0"};
  REQUIRE(ops_by_device.size() == 2);
  auto has = [&](const std::string& dev, const std::string& prefix) {
    for (auto& x : ops_by_device[dev])
      if (x.rfind(prefix, 0) == 0)
        return true;
    return false;
  };
  CHECK(has(t1, "Const:remote"));
  CHECK(has(t1, "_Send:"));
  CHECK(has(t0, "_Recv:"));
  CHECK(has(t0, "Add:sum"));
}

TEST_CASE("conformance: a server's default session config applies to its "
          "sessions",
          "[conformance][config]") {
  auto cluster = two_tasks();
  server_options opts;
  opts.default_session_config.operation_timeout_in_ms = 1500;
  server s0{cluster, "local", 0, opts};
  graph g;
  auto as_default = g.as_default();
  auto remote = const_on_task(1, 1.0f, "remote");
  // No deadline of its own: the server's 1.5 s bounds the wait for task 1.
  session sess{s0.target(), session_config{}, &g};
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(remote); });
  REQUIRE(err);
  CHECK(err->code() == error_code::deadline_exceeded);
  CHECK(seconds_since(start) < 10.0);
  // A session's own deadline wins over the server's.
  session_config own;
  own.operation_timeout_in_ms = 4000;
  session longer{s0.target(), own, &g};
  start = std::chrono::steady_clock::now();
  err = error_of([&] { longer.run(remote); });
  REQUIRE(err);
  CHECK(err->code() == error_code::deadline_exceeded);
  CHECK(seconds_since(start) >= 3.5);
}

TEST_CASE("conformance: a wait for tasks not up is logged every 10 s and "
          "ended by the caller's deadline with DeadlineExceeded",
          "[conformance][config]") {
  auto cluster = two_tasks();
  server s0{cluster, "local", 0};
  graph g;
  auto as_default = g.as_default();
  auto remote = const_on_task(1, 1.0f, "remote");
  session sess{s0.target(), bounded(), &g};
  run_options opts;
  opts.timeout_in_ms = 12000;
  captured_cerr cerr;
  auto err = error_of([&] { sess.run(remote, {}, opts); });
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::deadline_exceeded);
  CHECK_THAT(err->what(), Contains("/job:local/replica:0/task:1"));
  CHECK(count_of(cerr.text(), "CreateSession still waiting for response "
                              "from worker: /job:local/replica:0/task:1")
        == 1);
}

TEST_CASE("conformance: a container reset aborts a pending dequeue saying "
          "so",
          "[conformance][reset]") {
  auto cluster = two_tasks();
  server s0{cluster, "local", 0};
  server s1{cluster, "local", 1};
  graph g;
  auto as_default = g.as_default();
  std::vector<output> deq;
  {
    container_scope c{"c"};
    device_scope on{"/job:local/task:1"};
    fifo_queue q{4, {dtype::float32}, {{}}, "shared_q"};
    deq = q.dequeue();
  }
  // One client on the master that resets, one on the other master (its
  // dequeue hears it from the queue).
  session here{s0.target(), bounded(), &g};
  session there{s1.target(), bounded(), &g};
  auto waits = [&](session& sess) {
    return std::async(std::launch::async,
                      [&] { return error_of([&] { sess.run(deq[0]); }); });
  };
  auto a = waits(here);
  auto b = waits(there);
  // Both dequeues wait on the empty queue before the reset.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  session::reset(s0.target(), {"c"});
  for (auto* f : {&a, &b}) {
    auto err = f->get();
    REQUIRE(err);
    CHECK(err->code() == error_code::aborted);
    CHECK_THAT(err->what(), Contains("container 'c' was reset"));
  }
}

TEST_CASE("conformance: a reset that misses a task names the tasks it "
          "reached and the one it did not",
          "[conformance][reset]") {
  auto cluster = two_tasks();
  server s0{cluster, "local", 0};
  // The master gives a task 5 s to answer; the client waits longer.
  session_config patient;
  patient.operation_timeout_in_ms = 15000;
  auto err = error_of([&] { session::reset(s0.target(), {"c"}, patient); });
  REQUIRE(err);
  CHECK(err->code() == error_code::unavailable);
  CHECK_THAT(err->what(),
             Contains("Session.reset reached 1 of 2 tasks "
                      "(/job:local/replica:0/task:0); not "
                      "/job:local/replica:0/task:1: Could not connect to "));
}
