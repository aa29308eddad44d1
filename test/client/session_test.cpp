// The client API in one process: private sessions (seed 000 cells 3-4),
// create_local_server (seed 002), two servers of one cluster sharing a
// variable, deadlines, traces.

#include <catch2/catch.hpp>


#include <chrono>
#include <optional>
#include <string>

#include "actorflow/actorflow.hpp"
#include "common/test_util.hpp"
#include "common/session_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {


run_options full_trace() {
  run_options opts;
  opts.trace_level = run_options::full_trace;
  return opts;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                       - start)
    .count();
}

// True if `text` is a JSON object whose brackets balance (outside strings).
bool balanced_json_object(const std::string& text) {
  if (text.empty() || text.front() != '{' || text.back() != '}')
    return false;
  std::string stack;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    switch (ch) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        stack.push_back(ch);
        break;
      case '}':
        if (stack.empty() || stack.back() != '{')
          return false;
        stack.pop_back();
        if (stack.empty() && i + 1 != text.size())
          return false;
        break;
      case ']':
        if (stack.empty() || stack.back() != '[')
          return false;
        stack.pop_back();
        break;
      default:
        break;
    }
  }
  return stack.empty() && !in_string;
}

} // namespace

TEST_CASE("session: private sessions share nothing (seed 000 cells 3-4)",
          "[session]") {
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f};
  session sess1{bounded(), &g};
  session sess2{bounded(), &g};
  sess1.run(global_variables_initializer());
  sess2.run(global_variables_initializer());
  CHECK(sess1.run(var).to_string() == "0.0");
  CHECK(sess2.run(var).to_string() == "0.0");
  sess1.run(var.assign_add(1.0));
  CHECK(sess1.run(var).to_string() == "1.0");
  CHECK(sess2.run(var).to_string() == "0.0");
  CHECK(&sess1.get_graph() == &g);
}

TEST_CASE("session: create_local_server says hello (seed 002)",
          "[session]") {
  graph g;
  auto as_default = g.as_default();
  auto c = constant("Hello, distributed TensorFlow!");
  auto local = server::create_local_server();
  CHECK(local.job_name() == "local");
  CHECK(local.task_index() == 0);
  CHECK(local.port() != 0);
  CHECK(local.target() == "caf://localhost:" + std::to_string(local.port()));
  CHECK(local.device() == "/job:local/replica:0/task:0/device:CPU:0");
  session sess{local.target(), bounded(), &g};
  CHECK(sess.run(c).to_string() == "Hello, distributed TensorFlow!");
  local.stop();
  CHECK(local.stopped());
  local.stop(); // idempotent
}

TEST_CASE("session: two servers in one process share a variable",
          "[session]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"local", {loopback(free_port()), loopback(free_port())}}}};
  server s0{cluster, "local", 0};
  server s1{cluster, "local", 1};
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  variable var2;
  {
    device_scope pin{"/job:local/task:1"};
    var2 = variable{10.0f, named("var2")};
  }
  session sess1{s0.target(), bounded(), &g};
  session sess2{"grpc://" + cluster.task_address("local", 1), bounded(),
                &g};
  sess1.run(global_variables_initializer());
  sess2.run(global_variables_initializer());
  sess1.run(var.assign_add(1.0));
  CHECK(sess1.run(var).scalar_value<float>() == 1.0f);
  CHECK(sess2.run(var).scalar_value<float>() == 1.0f);
  sess2.run(var2.assign_add(5.0));
  CHECK(sess1.run(var2).scalar_value<float>() == 15.0f);

  run_metadata md;
  sess1.run(var2, {}, full_trace(), &md);
  bool var2_on_task1 = false;
  for (const auto& dev : md.stats.dev_stats)
    for (const auto& node : dev.node_stats)
      if (node.node_name == "var2")
        var2_on_task1
          = dev.device == "/job:local/replica:0/task:1/device:CPU:0";
  CHECK(var2_on_task1);
}

TEST_CASE("session: run_options timeout on an unreachable task",
          "[session]") {
  // Task 1 is in the cluster but nobody serves it.
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"local", {loopback(free_port()), loopback(free_port())}}}};
  server s0{cluster, "local", 0};
  graph g;
  auto as_default = g.as_default();
  output remote;
  {
    device_scope pin{"/job:local/task:1"};
    remote = constant(1.0f, "remote");
  }
  session sess{s0.target(), bounded(), &g};
  run_options options;
  options.timeout_in_ms = 1500;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(remote, {}, options); });
  REQUIRE(err);
  INFO(err->what());
  CHECK((err->code() == error_code::deadline_exceeded
         || err->code() == error_code::unavailable));
  CHECK(seconds_since(start) < 15.0);
}

TEST_CASE("session: operation_timeout_in_ms is the default deadline",
          "[session]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"local", {loopback(free_port()), loopback(free_port())}}}};
  server s0{cluster, "local", 0};
  graph g;
  auto as_default = g.as_default();
  output remote;
  {
    device_scope pin{"/job:local/task:1"};
    remote = constant(1.0f, "remote");
  }
  session_config config;
  config.operation_timeout_in_ms = 1500;
  session sess{s0.target(), config, &g};
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(remote); });
  REQUIRE(err);
  CHECK((err->code() == error_code::deadline_exceeded
         || err->code() == error_code::unavailable));
  CHECK(seconds_since(start) < 15.0);
}

TEST_CASE("session: a full trace has _SOURCE and the fetched node",
          "[session]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f, "a");
  auto b = a * 3.0f;
  session sess{bounded(), &g};
  run_metadata md;
  CHECK(sess.run(b, {}, full_trace(), &md).scalar_value<float>() == 6.0f);
  REQUIRE(md.has_step_stats);
  REQUIRE_FALSE(md.stats.dev_stats.empty());
  bool has_source = false;
  bool has_b = false;
  for (const auto& dev : md.stats.dev_stats) {
    CHECK_THAT(dev.device, Catch::StartsWith("/job:localhost/replica:0/"
                                             "task:0/device:CPU:0"));
    for (const auto& node : dev.node_stats) {
      has_source |= node.node_name == "_SOURCE";
      has_b |= node.node_name == b.op().name();
      CHECK(node.all_start_micros > 0);
    }
  }
  CHECK(has_source);
  CHECK(has_b);

  // Without a trace level, no step stats.
  run_metadata quiet;
  sess.run(b, {}, {}, &quiet);
  CHECK_FALSE(quiet.has_step_stats);
}

TEST_CASE("session: run_metadata.to_chrome_trace is trace-event JSON",
          "[session]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(2.0f, "a");
  auto b = a + a;
  session sess{bounded(), &g};
  run_metadata md;
  sess.run(b, {}, full_trace(), &md);
  auto json = md.to_chrome_trace();
  CHECK_THAT(json, Catch::StartsWith(R"({"traceEvents":[)"));
  CHECK(balanced_json_object(json));
  CHECK_THAT(json, Catch::Contains(b.op().name()));
}

TEST_CASE("session: errors in process", "[session]") {
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  auto x = placeholder(dtype::float32, {2}, "x");
  session sess{bounded(), &g};

  auto uninit = error_of([&] { sess.run(var); });
  REQUIRE(uninit);
  CHECK(uninit->code() == error_code::failed_precondition);
  CHECK_THAT(uninit->get_status().message(),
             Catch::Contains("Attempting to use uninitialized value var"));

  auto missing = error_of([&] { sess.run(fetch{"nope:0"}); });
  REQUIRE(missing);
  CHECK(missing->code() == error_code::not_found);

  auto bad_feed = error_of([&] {
    sess.run(x * 2.0f, {{x, tensor::vec(std::vector<float>{1, 2, 3})}});
  });
  REQUIRE(bad_feed);
  CHECK(bad_feed->code() == error_code::invalid_argument);

  sess.close();
  auto closed = error_of(
    [&] { sess.run(x, {{x, tensor::vec(std::vector<float>{1, 2})}}); });
  REQUIRE(closed);
  CHECK(closed->code() == error_code::aborted);
  sess.close(); // idempotent
}

TEST_CASE("session: a stopped server fails its sessions with Unavailable",
          "[session]") {
  auto local = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f);
  session sess{local.target(), bounded(), &g};
  CHECK(sess.run(c).scalar_value<float>() == 1.0f);
  local.stop();
  run_options options;
  options.timeout_in_ms = 5000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(c, {}, options); });
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::unavailable);
  CHECK(seconds_since(start) < 15.0);
}

TEST_CASE("session: malformed targets and unreachable masters",
          "[session]") {
  auto bad = error_of([] { session sess{"grpc://"}; });
  REQUIRE(bad);
  CHECK(bad->code() == error_code::invalid_argument);
  // No factory takes it: NotFound naming it, as TF's Session("INVALID_TARGET").
  auto unknown = error_of([] { session sess{"INVALID_TARGET"}; });
  REQUIRE(unknown);
  CHECK(unknown->code() == error_code::not_found);
  CHECK_THAT(unknown->get_status().message(),
             Catch::StartsWith("No session factory registered for the given "
                               "session options: {target: "
                               "\"INVALID_TARGET\"} Registered factories "
                               "are {DIRECT_SESSION, GRPC_SESSION"));

  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f);
  auto address = loopback(free_port());
  session_config config;
  config.operation_timeout_in_ms = 2000;
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] {
    session sess{address, config, &g};
    sess.run(c);
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::unavailable);
  CHECK_THAT(err->get_status().message(), Catch::Contains(address));
  CHECK(seconds_since(start) < 15.0);
}
