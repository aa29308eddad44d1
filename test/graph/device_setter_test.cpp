// replica_device_setter and its strategies: tf_semantics §5, cases 39-48,
// expressed on node_defs. A node's `device` holds what the inner device
// scopes produced before the setter (the outermost function) runs.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/device_setter.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

node_def variable_node(std::string name, std::string device = {},
                  tensor_shape shape = {}, dtype type = dtype::float32) {
  node_def node;
  node.name = std::move(name);
  node.op = "VariableV2";
  node.device = std::move(device);
  node.attrs["shape"] = std::move(shape);
  node.attrs["dtype"] = type;
  return node;
}

node_def add(std::string device = {}) {
  node_def node;
  node.name = "add";
  node.op = "Add";
  node.inputs = {"v", "w"};
  node.device = std::move(device);
  return node;
}

device_function setter(replica_device_setter_options opts) {
  auto fn = replica_device_setter(std::move(opts));
  REQUIRE(fn.has_value());
  return *fn;
}

replica_device_setter_options two_ps() {
  replica_device_setter_options opts;
  opts.ps_tasks = 2;
  return opts;
}

} // namespace

TEST_CASE("variables round-robin over ps, compute on worker (case 39)") {
  auto fn = setter(two_ps());
  CHECK(fn(variable_node("v")) == "/job:ps/task:0");
  CHECK(fn(variable_node("w")) == "/job:ps/task:1");
  CHECK(fn(add()) == "/job:worker");
  CHECK(fn(variable_node("x")) == "/job:ps/task:0");
}

TEST_CASE("inner device scopes merge into the setter's choice (case 40)") {
  auto fn = setter(two_ps());
  CHECK(fn(variable_node("v", apply_scopes({"/cpu:0"})))
        == "/job:ps/task:0/device:CPU:0");
  CHECK(fn(variable_node("w")) == "/job:ps/task:1");
  CHECK(fn(add(apply_scopes({"/cpu:0"}))) == "/job:worker/device:CPU:0");
}

TEST_CASE("the strategy runs only when the ps job survives (case 41)") {
  int calls = 0;
  auto opts = two_ps();
  auto rr = round_robin_strategy(2);
  opts.strategy = [&](const node_def& node) {
    ++calls;
    return rr(node);
  };
  auto fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/job:ps/task:0");
  CHECK(fn(variable_node("w", apply_scopes({"/job:moon"}))) == "/job:moon");
  CHECK(calls == 1);
  CHECK(fn(variable_node("x", apply_scopes({"/job:moon", "/job:ps"})))
        == "/job:ps/task:1");
  CHECK(calls == 2);
}

TEST_CASE("a ps_device without a job never picks a task (case 42)") {
  replica_device_setter_options opts;
  opts.ps_tasks = 1;
  opts.ps_device = "/cpu:0";
  int calls = 0;
  opts.strategy = [&](const node_def&) { return ++calls, 0; };
  auto fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/device:CPU:0");
  CHECK(fn(variable_node("w", apply_scopes({"/job:moon"})))
        == "/job:moon/device:CPU:0");
  CHECK(fn(add()) == "/job:worker");
  CHECK(calls == 0);
}

TEST_CASE("merge_devices=false keeps a set device verbatim (case 43)") {
  auto opts = two_ps();
  opts.merge_devices = false;
  auto fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/job:ps/task:0");
  CHECK(fn(variable_node("w", "/job:ps")) == "/job:ps");
  // Verbatim, not canonicalized.
  CHECK(fn(add("/cpu:0")) == "/cpu:0");
  CHECK(fn(add()) == "/job:worker");
}

TEST_CASE("custom ps and worker devices (case 44)") {
  replica_device_setter_options opts;
  opts.ps_tasks = 2;
  opts.ps_device = "/job:moon";
  opts.worker_device = "/job:sun";
  auto fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/job:moon/task:0");
  CHECK(fn(variable_node("w")) == "/job:moon/task:1");
  CHECK(fn(add()) == "/job:sun");

  opts.ps_device = "/job:moon/cpu:0";
  fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/job:moon/task:0/device:CPU:0");
  CHECK(fn(variable_node("w")) == "/job:moon/task:1/device:CPU:0");
  CHECK(fn(add()) == "/job:sun");
}

TEST_CASE("resource variables are ps ops (case 45)") {
  auto fn = setter(two_ps());
  auto handle = variable_node("rv");
  handle.op = "VarHandleOp";
  CHECK(fn(handle) == "/job:ps/task:0");
  for (auto op : {"Variable", "AutoReloadVariable", "MutableHashTableV2",
                  "MutableDenseHashTable"}) {
    auto node = variable_node("t");
    node.op = op;
    CHECK_THAT(fn(node), Catch::StartsWith("/job:ps/task:"));
  }
  replica_device_setter_options opts = two_ps();
  opts.ps_ops = {"Add"};
  fn = setter(opts);
  CHECK(fn(add()) == "/job:ps/task:0");
  CHECK(fn(variable_node("v")) == "/job:worker");
}

TEST_CASE("no ps tasks: no setter (case 46)") {
  CHECK_FALSE(replica_device_setter({}).has_value());
  replica_device_setter_options opts;
  opts.ps_tasks = -1;
  CHECK_THROWS_AS(replica_device_setter(opts), op_error);
}

TEST_CASE("greedy strategy with a constant load is round robin (case 47)") {
  auto greedy = greedy_load_balancing_strategy(
    2, [](const node_def&) { return int64_t{1}; });
  auto opts = two_ps();
  opts.strategy = greedy;
  auto fn = setter(opts);
  CHECK(fn(variable_node("a")) == "/job:ps/task:0");
  CHECK(fn(variable_node("b")) == "/job:ps/task:1");
  CHECK(fn(variable_node("c")) == "/job:ps/task:0");
  CHECK(fn(variable_node("d")) == "/job:ps/task:1");
}

TEST_CASE("greedy strategy by byte size (case 48)") {
  auto opts = two_ps();
  opts.strategy = greedy_load_balancing_strategy(2, byte_size_load_fn);
  auto fn = setter(opts);
  CHECK(fn(variable_node("a", {}, {2, 2})) == "/job:ps/task:0"); // 16 bytes
  CHECK(fn(variable_node("b", {}, {2, 1})) == "/job:ps/task:1"); // 8 bytes
  CHECK(fn(variable_node("c", {}, {2, 2})) == "/job:ps/task:1"); // 16 bytes
  CHECK(fn(variable_node("d", {}, {1, 3})) == "/job:ps/task:0"); // 12 bytes

  auto fresh = greedy_load_balancing_strategy(2, byte_size_load_fn);
  CHECK(fresh(variable_node("s", {}, {}, dtype::int32)) == 0);
}

TEST_CASE("byte_size_load_fn") {
  CHECK(byte_size_load_fn(variable_node("a", {}, {2, 2})) == 16);
  CHECK(byte_size_load_fn(variable_node("s")) == 4);
  CHECK(byte_size_load_fn(variable_node("d", {}, {3}, dtype::float64)) == 24);
  CHECK(byte_size_load_fn(variable_node("e", {}, {0, 5})) == 0);
  auto unknown = variable_node("u", {}, tensor_shape{-1, 2});
  CHECK_THROWS_AS(byte_size_load_fn(unknown), op_error);
  auto no_shape = add();
  try {
    byte_size_load_fn(no_shape);
    FAIL("no exception");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::invalid_argument);
  }
  auto bad_type = variable_node("b");
  bad_type.attrs["dtype"] = dtype::invalid;
  CHECK_THROWS_AS(byte_size_load_fn(bad_type), op_error);
}

TEST_CASE("strategies share state across copies") {
  auto rr = round_robin_strategy(3);
  auto copy = rr;
  node_def node;
  CHECK(rr(node) == 0);
  CHECK(copy(node) == 1);
  CHECK(rr(node) == 2);
  CHECK(copy(node) == 0);

  auto fn = setter(two_ps());
  auto fn2 = fn;
  CHECK(fn(variable_node("v")) == "/job:ps/task:0");
  CHECK(fn2(variable_node("w")) == "/job:ps/task:1");

  CHECK_THROWS_AS(round_robin_strategy(0), op_error);
  CHECK_THROWS_AS(greedy_load_balancing_strategy(0, byte_size_load_fn),
                  op_error);
}

TEST_CASE("malformed devices are InvalidArgument") {
  auto opts = two_ps();
  opts.ps_device = "/job:ps/replica:x";
  CHECK_THROWS_AS(replica_device_setter(opts), op_error);
  auto fn = setter(two_ps());
  try {
    fn(variable_node("v", "/cpu:0/gpu:1"));
    FAIL("no exception");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("Cannot specify multiple device"));
  }
}

TEST_CASE("an empty ps_device sends everything to the workers") {
  auto opts = two_ps();
  opts.ps_device = "";
  auto fn = setter(opts);
  CHECK(fn(variable_node("v")) == "/job:worker");
  opts = two_ps();
  opts.worker_device = "";
  fn = setter(opts);
  CHECK(fn(add("/job:a/task:1")) == "/job:a/task:1");
  CHECK(fn(add()) == "");
}
