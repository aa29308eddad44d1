// The task actor through its message protocol (what client/'s session and
// server speak): master sessions, graph deltas, steps, variables in the
// task's resource manager, statistics and the placement log. Semantics
// from tf_semantics §4 (placement), §6.1 (containers, sharing by name),
// §8 (variables) and §12 (master service).

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/ops.hpp"
#include "common/test_system.hpp"

using namespace actorflow;
using actorflow::testing::test_system;

namespace {

// A bound on every wait, so a broken actor fails the test instead of
// hanging it.
constexpr auto max_wait = std::chrono::seconds(30);

task_options local_task() {
  task_options opts;
  opts.job = "localhost";
  opts.task = 0;
  opts.cluster["/job:localhost/replica:0/task:0"] = "";
  return opts;
}

variable_options named(const std::string& name) {
  variable_options opts;
  opts.name = name;
  return opts;
}

std::string render(const caf::error& err) {
  return test_system().render(err);
}

// A task actor and a scoped actor to talk to it.
class task_fixture {
public:
  explicit task_fixture(task_options opts = local_task())
    : self_(test_system()), task_(spawn_task(test_system(), std::move(opts))) {
    // nop
  }

  ~task_fixture() {
    self_->send_exit(task_, caf::exit_reason::user_shutdown);
  }

  task_fixture(const task_fixture&) = delete;
  task_fixture& operator=(const task_fixture&) = delete;

  std::string create_session(session_config config = {}) {
    std::string handle;
    self_->request(task_, max_wait, create_session_atom_v, config)
      .receive([&](std::string& h) { handle = std::move(h); },
               [&](caf::error& err) {
                 FAIL("create_session failed: " << render(err));
               });
    return handle;
  }

  status close_session(const std::string& handle) {
    status result;
    self_->request(task_, max_wait, close_session_atom_v, handle)
      .receive([&](status& st) { result = std::move(st); },
               [&](caf::error& err) {
                 FAIL("close_session failed: " << render(err));
               });
    return result;
  }

  run_step_response run_step(run_step_request req) {
    run_step_response result;
    self_->request(task_, max_wait, run_step_atom_v, std::move(req))
      .receive([&](run_step_response& resp) { result = std::move(resp); },
               [&](caf::error& err) {
                 FAIL("run_step failed: " << render(err));
               });
    return result;
  }

  task_stats stats() {
    task_stats result;
    self_->request(task_, max_wait, get_stats_atom_v)
      .receive([&](task_stats& s) { result = std::move(s); },
               [&](caf::error& err) {
                 FAIL("get_stats failed: " << render(err));
               });
    return result;
  }

private:
  caf::scoped_actor self_;
  caf::actor task_;
};

// The client side of one master session, as client/'s session does it:
// sends the nodes the master has not seen with each step.
class client {
public:
  client(task_fixture& task, graph& g, session_config config = {})
    : task_(task), g_(g), handle_(task.create_session(config)) {
    // nop
  }

  const std::string& handle() const noexcept {
    return handle_;
  }

  run_step_response run(std::vector<std::string> fetches,
                        std::vector<std::string> targets = {},
                        std::vector<std::pair<output, tensor>> feeds = {},
                        run_options options = {}) {
    run_step_request req;
    req.session_handle = handle_;
    req.fetches = std::move(fetches);
    req.targets = std::move(targets);
    req.options = options;
    for (auto& [out, value] : feeds) {
      req.feed_names.push_back(out.name());
      req.feed_values.push_back(value);
    }
    auto total = g_.num_nodes();
    if (total > sent_ || sent_ == 0) {
      graph_def delta;
      delta.seed = g_.seed();
      delta.nodes.assign(g_.def().nodes.begin() + sent_, g_.def().nodes.end());
      req.graph_delta = to_bytes(delta);
      req.graph_base = sent_;
    }
    auto resp = task_.run_step(std::move(req));
    if (resp.result.ok() || resp.result.code() != error_code::aborted)
      sent_ = total;
    return resp;
  }

  /// The single fetched value; fails the test unless the step succeeded.
  tensor value(const std::string& fetch) {
    auto resp = run({fetch});
    INFO(resp.result.to_string());
    REQUIRE(resp.result.ok());
    REQUIRE(resp.outputs.size() == 1);
    return resp.outputs[0];
  }

  void target(const std::string& node) {
    auto resp = run({}, {node});
    INFO(resp.result.to_string());
    REQUIRE(resp.result.ok());
  }

private:
  task_fixture& task_;
  graph& g_;
  std::string handle_;
  int sent_ = 0;
};

// Redirects std::cout while alive. The task actor prints the placement
// log before it answers, so the answer orders that write before our read.
class cout_capture {
public:
  cout_capture() : old_(std::cout.rdbuf(buf_.rdbuf())) {
    // nop
  }
  ~cout_capture() {
    std::cout.rdbuf(old_);
  }
  cout_capture(const cout_capture&) = delete;
  cout_capture& operator=(const cout_capture&) = delete;
  std::string text() const {
    return buf_.str();
  }

private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

} // namespace

TEST_CASE("task: a session runs a step and returns its fetches", "[task]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f, "a");
  auto b = a * 3.0f;
  auto s = constant(std::string{"hello"}, "s");
  client c{task, g};
  CHECK_FALSE(c.handle().empty());
  auto resp = c.run({b.name(), a.name(), s.name()});
  REQUIRE(resp.result.ok());
  REQUIRE(resp.outputs.size() == 3);
  CHECK(resp.outputs[0].scalar_value<float>() == 6.0f);
  CHECK(resp.outputs[1].scalar_value<float>() == 2.0f);
  CHECK(resp.outputs[2].scalar_value<std::string>() == "hello");
  CHECK_FALSE(resp.has_stats);
  // Nodes added after the first step reach the master as a delta.
  auto d = b + a;
  CHECK(c.value(d.name()).scalar_value<float>() == 8.0f);
}

TEST_CASE("task: session handles are distinct and closing is final (§12)",
          "[task]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  constant(1.0f, "a");
  client first{task, g};
  client second{task, g};
  CHECK(first.handle() != second.handle());
  CHECK(first.value("a:0").scalar_value<float>() == 1.0f);
  CHECK(task.close_session(first.handle()).ok());
  auto after = first.run({"a:0"});
  CHECK(after.result.code() == error_code::aborted);
  CHECK_THAT(after.result.message(), Catch::Contains("is not found"));
  auto again = task.close_session(first.handle());
  CHECK(again.code() == error_code::aborted);
  CHECK_THAT(again.message(), Catch::Contains("is not found"));
  // The other session is unaffected.
  CHECK(second.value("a:0").scalar_value<float>() == 1.0f);
  // An unknown handle is Aborted too.
  run_step_request req;
  req.session_handle = "no-such-session";
  req.fetches = {"a:0"};
  auto unknown = task.run_step(req);
  CHECK(unknown.result.code() == error_code::aborted);
}

TEST_CASE("task: a graph delta from the wrong base is rejected", "[task]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  constant(1.0f, "a");
  auto handle = task.create_session();
  run_step_request req;
  req.session_handle = handle;
  req.fetches = {"a:0"};
  graph_def delta;
  delta.nodes = g.def().nodes;
  req.graph_delta = to_bytes(delta);
  req.graph_base = 5; // the master has 0 nodes
  auto resp = task.run_step(req);
  CHECK(resp.result.code() == error_code::aborted);
  // From the right base it runs.
  req.graph_base = 0;
  auto ok = task.run_step(req);
  REQUIRE(ok.result.ok());
  CHECK(ok.outputs.at(0).scalar_value<float>() == 1.0f);
}

TEST_CASE("task: variables through the protocol (§8)", "[task][variable]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  variable v{0.0f, named("v")};
  auto inc = v.assign_add(1.0);
  auto init = is_variable_initialized(v);
  client c{task, g};
  auto uninit = c.run({v.name()});
  CHECK(uninit.result.code() == error_code::failed_precondition);
  CHECK_THAT(uninit.result.message(),
             Catch::Contains("Attempting to use uninitialized value v"));
  CHECK_FALSE(c.value(init.name()).scalar_value<bool>());
  c.target(v.initializer().name());
  CHECK(c.value(init.name()).scalar_value<bool>());
  CHECK(c.value(inc.name()).scalar_value<float>() == 1.0f);
  CHECK(c.value(v.value().name()).scalar_value<float>() == 1.0f);
}

TEST_CASE("task: a training op's _row_begin updates those rows of its "
          "variable only, and rows outside it fail with the variable named",
          "[task][variable]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  variable v{tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8},
                                        tensor_shape{4, 2}),
             named("v")};
  constant(1.0f, "alpha");
  placeholder(dtype::float32, tensor_shape{2, 2}, "grad");
  // What matmul_pipelining makes of an update by a gradient's row block.
  auto def = g.def();
  for (auto [name, first] : {std::pair{"rows_2", 2}, std::pair{"rows_3", 3}}) {
    node_def n;
    n.name = name;
    n.op = "ApplyGradientDescent";
    n.inputs = {"v", "alpha", "grad"};
    n.attrs["T"] = dtype::float32;
    n.attrs["_row_begin"] = int64_t{first};
    def.nodes.push_back(std::move(n));
  }
  auto handle = task.create_session();
  auto run = [&](std::vector<std::string> fetches,
                 std::vector<std::string> targets, bool send_graph = false) {
    run_step_request req;
    req.session_handle = handle;
    req.fetches = std::move(fetches);
    req.targets = std::move(targets);
    if (send_graph) {
      req.graph_delta = to_bytes(def);
      req.graph_base = 0;
    }
    if (!req.targets.empty() && req.targets[0] != v.initializer().name()) {
      req.feed_names = {"grad:0"};
      req.feed_values = {tensor::from_vector<float>({1, 1, 1, 1},
                                                    tensor_shape{2, 2})};
    }
    return task.run_step(std::move(req));
  };
  REQUIRE(run({}, {v.initializer().name()}, true).result.ok());
  auto ok = run({}, {"rows_2"});
  INFO(ok.result.to_string());
  REQUIRE(ok.result.ok());
  auto after = run({"v:0"}, {});
  REQUIRE(after.result.ok());
  CHECK(after.outputs.at(0)
        == tensor::from_vector<float>({1, 2, 3, 4, 4, 5, 6, 7},
                                      tensor_shape{4, 2}));
  auto outside = run({}, {"rows_3"});
  CHECK(outside.result.code() == error_code::invalid_argument);
  CHECK_THAT(outside.result.message(),
             Catch::Contains("rows [3, 5) are outside v of shape [4,2]"));
  CHECK(run({"v:0"}, {}).outputs.at(0) == after.outputs.at(0));
}

TEST_CASE("task: sessions on one task share variables by name (case 53)",
          "[task][variable]") {
  task_fixture task;
  graph g1;
  variable v1;
  output inc;
  {
    auto as_default = g1.as_default();
    v1 = variable{0.0f, named("v")};
    inc = v1.assign_add(1.0);
  }
  client c1{task, g1};
  c1.target(v1.initializer().name());
  c1.value(inc.name());
  // Another graph with a node of the same name, never initialized there.
  graph g2;
  variable v2;
  {
    auto as_default = g2.as_default();
    v2 = variable{0.0f, named("v")};
  }
  client c2{task, g2};
  CHECK(c2.value(v2.name()).scalar_value<float>() == 1.0f);
}

TEST_CASE("task: containers keep same-named variables apart (§6.1)",
          "[task][variable]") {
  task_fixture task;
  graph g1;
  variable plain;
  {
    auto as_default = g1.as_default();
    plain = variable{1.0f, named("v")};
  }
  client c1{task, g1};
  c1.target(plain.initializer().name());

  // "v" in container "other" is another variable.
  graph g2;
  variable other;
  {
    auto as_default = g2.as_default();
    container_scope scope{"other"};
    other = variable{2.0f, named("v")};
  }
  client c2{task, g2};
  CHECK(c2.run({other.name()}).result.code()
        == error_code::failed_precondition);

  // The default container is the job's name: "localhost" names the same
  // variable as no container at all.
  graph g3;
  variable same;
  {
    auto as_default = g3.as_default();
    container_scope scope{"localhost"};
    same = variable{3.0f, named("v")};
  }
  client c3{task, g3};
  CHECK(c3.value(same.name()).scalar_value<float>() == 1.0f);

  // A malformed container name is InvalidArgument.
  graph g4;
  variable bad;
  {
    auto as_default = g4.as_default();
    container_scope scope{"bad name!"};
    bad = variable{4.0f, named("v")};
  }
  client c4{task, g4};
  auto resp = c4.run({}, {bad.initializer().name()});
  CHECK(resp.result.code() == error_code::invalid_argument);
  CHECK_THAT(resp.result.message(),
             Catch::Contains("container contains invalid characters"));
}

TEST_CASE("task: stats count sessions, steps, variables and partitions",
          "[task][stats]") {
  task_fixture task;
  auto before = task.stats();
  CHECK(before.task == "/job:localhost/replica:0/task:0");
  CHECK(before.sessions == 0);
  CHECK(before.steps_run == 0);
  CHECK(before.variables == 0);
  CHECK(before.partitions == 0);
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, named("v")};
  auto x = placeholder(dtype::float32, {}, "x");
  auto y = x * 2.0f;
  client c{task, g};
  c.target(v.initializer().name());
  auto mid = task.stats();
  CHECK(mid.sessions == 1);
  CHECK(mid.steps_run > before.steps_run);
  CHECK(mid.variables == 1);
  CHECK(mid.partitions >= 1);
  CHECK(mid.messages_handled > before.messages_handled);
  auto resp = c.run({y.name()}, {}, {{x, tensor::scalar(3.0f)}});
  REQUIRE(resp.result.ok());
  CHECK(resp.outputs.at(0).scalar_value<float>() == 6.0f);
  auto after = task.stats();
  CHECK(after.steps_run > mid.steps_run);
  CHECK(after.bytes_in >= mid.bytes_in + sizeof(float));
  CHECK(after.messages_handled > mid.messages_handled);
}

TEST_CASE("task: a repeated signature reuses its plan", "[task][stats]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {2}, "x");
  auto y = x * 2.0f;
  client c{task, g};
  auto feed = [&](float a, float b) {
    return std::vector<std::pair<output, tensor>>{
      {x, tensor::vec(std::vector<float>{a, b})}};
  };
  auto first = c.run({y.name()}, {}, feed(1, 2));
  REQUIRE(first.result.ok());
  CHECK(first.outputs.at(0) == tensor::vec(std::vector<float>{2, 4}));
  auto partitions = task.stats().partitions;
  // Same fetches and feeds, new values: no new partition, fresh results.
  auto second = c.run({y.name()}, {}, feed(3, 4));
  REQUIRE(second.result.ok());
  CHECK(second.outputs.at(0) == tensor::vec(std::vector<float>{6, 8}));
  CHECK(task.stats().partitions == partitions);
  // Another signature is planned anew.
  auto both = c.run({y.name(), x.name()}, {}, feed(5, 6));
  REQUIRE(both.result.ok());
  CHECK(both.outputs.at(1) == tensor::vec(std::vector<float>{5, 6}));
  CHECK(task.stats().partitions > partitions);
}

TEST_CASE("task: feeds are checked against their placeholders",
          "[task][errors]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {2}, "x");
  auto y = x + 1.0f;
  client c{task, g};
  auto not_fed = c.run({y.name()});
  CHECK(not_fed.result.code() == error_code::invalid_argument);
  CHECK_THAT(not_fed.result.message(),
             Catch::Contains("You must feed a value for placeholder tensor "
                             "'x'"));
  auto wrong_type = c.run({y.name()}, {},
                          {{x, tensor::vec(std::vector<int32_t>{1, 2})}});
  CHECK(wrong_type.result.code() == error_code::invalid_argument);
  auto wrong_shape = c.run({y.name()}, {},
                           {{x, tensor::vec(std::vector<float>{1, 2, 3})}});
  CHECK(wrong_shape.result.code() == error_code::invalid_argument);
  auto missing = c.run({"nope:0"});
  CHECK(missing.result.code() == error_code::not_found);
}

TEST_CASE("task: a full trace reports _SOURCE and the nodes on the task's "
          "device",
          "[task][trace]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f, "a");
  auto b = a * 3.0f;
  client c{task, g};
  run_options opts;
  opts.trace_level = run_options::full_trace;
  auto resp = c.run({b.name()}, {}, {}, opts);
  REQUIRE(resp.result.ok());
  REQUIRE(resp.has_stats);
  REQUIRE(resp.stats.dev_stats.size() == 1);
  auto& dev = resp.stats.dev_stats[0];
  CHECK(dev.device == "/job:localhost/replica:0/task:0/device:CPU:0");
  REQUIRE_FALSE(dev.node_stats.empty());
  CHECK(dev.node_stats.front().node_name == "_SOURCE");
  std::vector<std::string> names;
  for (auto& n : dev.node_stats)
    names.push_back(n.node_name);
  CHECK(std::count(names.begin(), names.end(), "a") == 1);
  CHECK(std::count(names.begin(), names.end(), "mul") == 1);
  CHECK(std::count(names.begin(), names.end(), "mul/y") == 1);
  auto quiet = c.run({b.name()});
  REQUIRE(quiet.result.ok());
  CHECK_FALSE(quiet.has_stats);
  CHECK(quiet.stats.dev_stats.empty());
}

TEST_CASE("task: unpinned ops are placed on the first task and logged "
          "(cases 34-35)",
          "[task][placement]") {
  // The master is task 1 of a two-task cluster; task 0 has no address, so
  // only placement and the log can be observed for it.
  task_options opts;
  opts.job = "local";
  opts.task = 1;
  opts.cluster["/job:local/replica:0/task:0"] = "";
  opts.cluster["/job:local/replica:0/task:1"] = "";
  task_fixture task{opts};
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, named("v")};
  variable pinned;
  {
    device_scope scope{"/job:local/task:1"};
    pinned = variable{2.0f, named("pinned")};
  }
  session_config config;
  config.log_device_placement = true;
  client c{task, g, config};
  std::string log;
  run_step_response unpinned;
  {
    cout_capture capture;
    unpinned = c.run({}, {v.initializer().name()});
    log = capture.text();
  }
  CHECK_THAT(log, Catch::Contains("v: (VariableV2): "
                                  "/job:local/replica:0/task:0/device:CPU:0\n"));
  CHECK_THAT(log, Catch::Contains("v/Assign: (Assign): "
                                  "/job:local/replica:0/task:0/device:CPU:0"));
  // Task 0 cannot be reached from here.
  CHECK_FALSE(unpinned.result.ok());

  // Pinned to the master's own task, the variable lives here.
  tensor value;
  {
    cout_capture capture;
    c.target(pinned.initializer().name());
    log = capture.text();
    value = c.value(pinned.name());
  }
  CHECK_THAT(log, Catch::Contains("pinned: (VariableV2): "
                                  "/job:local/replica:0/task:1/device:CPU:0"));
  CHECK(value.scalar_value<float>() == 2.0f);

  // A fed placeholder is logged too, as TF does, where its value enters.
  output fed;
  output doubled;
  {
    device_scope scope{"/job:local/task:1"};
    fed = placeholder(dtype::float32, tensor_shape{}, "fed");
    doubled = mul(fed, constant(2.0f), "doubled");
  }
  {
    cout_capture capture;
    auto r = c.run({doubled.name()}, {}, {{fed, tensor::scalar(3.0f)}});
    log = capture.text();
    REQUIRE(r.result.ok());
  }
  CHECK_THAT(log, Catch::Contains("fed: (Placeholder): "
                                  "/job:local/replica:0/task:1/device:CPU:0\n"));
  CHECK_THAT(log, Catch::Contains("doubled: (Mul): "
                                  "/job:local/replica:0/task:1/device:CPU:0\n"));
}

TEST_CASE("task: a device outside the cluster fails placement (case 36)",
          "[task][placement]") {
  task_fixture task;
  graph g;
  auto as_default = g.as_default();
  output a;
  {
    device_scope scope{"/job:localhost/task:5"};
    a = constant(1.0f, "a");
  }
  client c{task, g};
  auto resp = c.run({a.name()});
  CHECK(resp.result.code() == error_code::invalid_argument);
  CHECK_THAT(resp.result.message(),
             Catch::Contains("Cannot assign a device for operation"));
  CHECK_THAT(resp.result.message(), Catch::Contains("'a'"));
}
