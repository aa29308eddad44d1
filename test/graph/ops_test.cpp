// The graph builder against TensorFlow 1.x's Python graph semantics:
// unique node names, name scopes, device scopes (tf_semantics §3.3-3.4),
// variables (§8), control dependencies (§9), containers (§6.1),
// collections, replica_device_setter (§5) and static shapes.

#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph/device_setter.hpp"
#include "actorflow/graph/ops.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

variable_options not_trainable() {
  variable_options opts;
  opts.trainable = false;
  return opts;
}

variable_options in_collections(std::vector<std::string> keys) {
  variable_options opts;
  opts.collections = std::move(keys);
  return opts;
}

std::vector<std::string> sorted(std::vector<std::string> xs) {
  std::sort(xs.begin(), xs.end());
  return xs;
}

std::vector<std::string> names_of(const std::vector<variable>& vars) {
  std::vector<std::string> result;
  for (auto& v : vars)
    result.push_back(v.op().name());
  return result;
}

std::vector<std::string> node_names(const graph& g) {
  std::vector<std::string> result;
  for (auto& n : g.def().nodes)
    result.push_back(n.name);
  return result;
}

} // namespace

// -- naming -------------------------------------------------------------------

TEST_CASE("ops: node names are made unique as TensorFlow's unique_name",
          "[ops]") {
  graph g;
  auto as_default = g.as_default();
  auto c0 = constant(1.0f);
  auto c1 = constant(2.0f);
  auto c2 = constant(3.0f);
  CHECK(c0.op().name() == "Const");
  CHECK(c1.op().name() == "Const_1");
  CHECK(c2.op().name() == "Const_2");
  CHECK(c0.name() == "Const:0");
  auto x = constant(1.0f, "x");
  CHECK(x.op().name() == "x");
  CHECK(constant(1.0f, "x").op().name() == "x_1");
  CHECK(g.unique_name("fresh") == "fresh");
  CHECK(g.unique_name("fresh") == "fresh_1");
  // A name taken explicitly is skipped by the counter.
  CHECK(constant(1.0f, "y_1").op().name() == "y_1");
  CHECK(constant(1.0f, "y").op().name() == "y");
  CHECK(constant(1.0f, "y").op().name() == "y_2");
  // Names are compared without case (newer 1.x unique_name).
  CHECK(constant(1.0f, "Foo").op().name() == "Foo");
  CHECK(constant(1.0f, "foo").op().name() == "foo_1");
  // A name scope named like an existing op is made unique.
  name_scope scope{"x"};
  CHECK(scope.prefix() == "x_2/");
}

TEST_CASE("ops: assign_add with a scalar names its value under the op",
          "[ops]") {
  // Seed 000 cell 13: the second var.assign_add(1.0) runs "AssignAdd_1"
  // and its converted value "AssignAdd_1/value".
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  auto first = var.assign_add(1.0);
  auto second = var.assign_add(1.0);
  CHECK(first.op().name() == "AssignAdd");
  CHECK(second.op().name() == "AssignAdd_1");
  CHECK(second.op().type() == "AssignAdd");
  auto value = g.find_operation("AssignAdd_1/value");
  REQUIRE(value.valid());
  CHECK(value.type() == "Const");
  CHECK(value.out().type() == dtype::float32);
  CHECK(second.op().def().inputs
        == std::vector<std::string>{"var", "AssignAdd_1/value"});
  auto sub = var.assign_sub(2.0);
  CHECK(sub.op().name() == "AssignSub");
  CHECK(g.find_operation("AssignSub/value").valid());
  auto set = var.assign(4.0);
  CHECK(set.op().name() == "Assign");
  CHECK(g.find_operation("Assign/value").valid());
  auto explicit_add = var.assign_add(constant(1.0f));
  CHECK(explicit_add.op().name() == "AssignAdd_2");
}

TEST_CASE("ops: a + 2.0f creates add/y and add", "[ops]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f, "a");
  auto b = a + 2.0f;
  CHECK(b.op().name() == "add");
  CHECK(b.op().type() == "Add");
  CHECK(b.op().def().inputs == std::vector<std::string>{"a", "add/y"});
  auto y = g.find_operation("add/y");
  REQUIRE(y.valid());
  CHECK(y.type() == "Const");
  auto& value = y.def().attr<tensor>("value");
  CHECK(value.type() == dtype::float32);
  CHECK(value.scalar_value<float>() == 2.0f);
  CHECK(b.type() == dtype::float32);
  CHECK(node_names(g) == std::vector<std::string>{"a", "add/y", "add"});

  auto c = a + 3.0f;
  CHECK(c.op().name() == "add_1");
  CHECK(c.op().def().inputs == std::vector<std::string>{"a", "add_1/y"});

  // A scalar on the left is "x"; it takes the tensor's dtype.
  auto i = constant(int32_t{5}, "i");
  auto d = 10 - i;
  CHECK(d.op().name() == "sub");
  CHECK(d.op().def().inputs == std::vector<std::string>{"sub/x", "i"});
  CHECK(g.find_operation("sub/x").out().type() == dtype::int32);
  CHECK(d.type() == dtype::int32);

  // Float division is RealDiv named "truediv".
  auto q = a / 2.0f;
  CHECK(q.op().name() == "truediv");
  CHECK(q.op().type() == "RealDiv");
  CHECK(g.find_operation("truediv/y").valid());
  auto m = a * 2.0f;
  CHECK(m.op().name() == "mul");
  CHECK(g.find_operation("mul/y").valid());
}

TEST_CASE("ops: a variable is v, v/initial_value, v/Assign and v/read",
          "[ops][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v{tensor::vec(std::vector<float>{1, 2, 3}), named("v")};
  CHECK(v.name() == "v:0");
  CHECK(v.op().name() == "v");
  CHECK(v.op().type() == "VariableV2");
  CHECK(v.ref().name() == "v:0");
  CHECK(v.value().name() == "v/read:0");
  CHECK(v.initializer().name() == "v/Assign");
  CHECK(v.initial_value().name() == "v/initial_value:0");
  CHECK(v.type() == dtype::float32);
  CHECK(v.shape() == tensor_shape{3});

  auto init_value = g.find_operation("v/initial_value");
  REQUIRE(init_value.valid());
  CHECK(init_value.type() == "Const");
  auto assign = g.find_operation("v/Assign");
  REQUIRE(assign.valid());
  CHECK(assign.type() == "Assign");
  CHECK(assign.def().inputs
        == std::vector<std::string>{"v", "v/initial_value"});
  CHECK(assign.def().attr<bool>("validate_shape"));
  auto read = g.find_operation("v/read");
  REQUIRE(read.valid());
  CHECK(read.type() == "Identity");
  CHECK(read.def().inputs == std::vector<std::string>{"v"});
  // The VariableV2 node declares the initial shape and dtype.
  CHECK(v.op().def().attr<tensor_shape>("shape") == tensor_shape{3});
  CHECK(v.op().def().attr<dtype>("dtype") == dtype::float32);
  CHECK(sorted(node_names(g))
        == sorted({"v", "v/initial_value", "v/Assign", "v/read"}));

  // Default names: Variable, Variable_1, ...
  variable a{1.0f};
  variable b{2.0f};
  CHECK(a.name() == "Variable:0");
  CHECK(b.name() == "Variable_1:0");
  CHECK(b.initializer().name() == "Variable_1/Assign");
}

TEST_CASE("ops: a variable from an op output keeps that output as its "
          "initial value",
          "[ops][variable]") {
  graph g;
  auto as_default = g.as_default();
  auto init = random_normal({2, 3}, 0.0, 1.0, dtype::float32, 1, "init");
  variable w{init, named("w")};
  CHECK(w.initial_value() == init);
  CHECK(w.shape() == tensor_shape{2, 3});
  CHECK(w.to_proto().initial_value_name == "init:0");
  CHECK(w.initializer().def().inputs
        == std::vector<std::string>{"w", "init"});
}

TEST_CASE("ops: to_proto prints as seed 001", "[ops][variable]") {
  // Seed 001 cells 13-15.
  graph g;
  auto as_default = g.as_default();
  variable l{"local_cpu"};
  CHECK(l.device().empty());
  variable v;
  for (auto ps : {"/job:ps/task:0", "/job:ps/task:1"}) {
    device_scope scope{ps};
    v = variable{"my_var"};
  }
  CHECK(v.device() == "/job:ps/task:1");
  auto proto = v.to_proto();
  CHECK(proto.variable_name == "Variable_2:0");
  CHECK(proto.initializer_name == "Variable_2/Assign");
  CHECK(proto.snapshot_name == "Variable_2/read:0");
  CHECK(proto.initial_value_name == "Variable_2/initial_value:0");
  CHECK(proto.trainable);
  CHECK(proto.to_string()
        == "variable_name: \"Variable_2:0\"\n"
           "initializer_name: \"Variable_2/Assign\"\n"
           "snapshot_name: \"Variable_2/read:0\"\n");
  // Case 109.
  variable named_v{tensor::vec(std::vector<float>{1, 2}), named("v")};
  auto p = named_v.to_proto();
  CHECK(p.variable_name == "v:0");
  CHECK(p.initializer_name == "v/Assign");
  CHECK(p.snapshot_name == "v/read:0");
  CHECK(p.initial_value_name == "v/initial_value:0");
}

TEST_CASE("ops: name scopes nest, uniquify and reopen", "[ops][scope]") {
  graph g;
  auto as_default = g.as_default();
  {
    name_scope layer{"layer1"};
    CHECK(layer.prefix() == "layer1/");
    CHECK(constant(1.0f).op().name() == "layer1/Const");
    {
      name_scope inner{"inner"};
      CHECK(inner.prefix() == "layer1/inner/");
      CHECK(constant(1.0f).op().name() == "layer1/inner/Const");
      auto a = constant(1.0f, "a");
      auto b = a + 2.0f;
      CHECK(b.op().name() == "layer1/inner/add");
      CHECK(g.find_operation("layer1/inner/add/y").valid());
    }
    {
      // "" returns to the top level.
      name_scope top{""};
      CHECK(constant(1.0f).op().name() == "Const");
    }
    variable v{1.0f, named("v")};
    CHECK(v.op().name() == "layer1/v");
    CHECK(v.initializer().name() == "layer1/v/Assign");
    CHECK(v.value().name() == "layer1/v/read:0");
  }
  {
    // The same name again is made unique.
    name_scope again{"layer1"};
    CHECK(again.prefix() == "layer1_1/");
    CHECK(constant(1.0f).op().name() == "layer1_1/Const");
  }
  {
    // A name ending in '/' reopens that scope verbatim.
    name_scope reopened{"layer1/"};
    CHECK(reopened.prefix() == "layer1/");
    CHECK(constant(1.0f).op().name() == "layer1/Const_1");
  }
  CHECK(constant(1.0f).op().name() == "Const_1");
}

// -- device scopes -----------------------------------------------------------

TEST_CASE("ops: nested device strings merge field by field (case 30)",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  device_scope gpu{"/device:GPU:0"};
  auto a = constant(1.0f);
  CHECK(a.op().device() == "/device:GPU:0");
  device_scope worker{"/job:worker"};
  auto b = constant(1.0f);
  CHECK(b.op().device() == "/job:worker/device:GPU:0");
  device_scope cpu{"/device:CPU:0"};
  auto c = constant(1.0f);
  CHECK(c.op().device() == "/job:worker/device:CPU:0");
  device_scope ps{"/job:ps"};
  auto d = constant(1.0f);
  CHECK(d.op().device() == "/job:ps/device:CPU:0");
  device_scope nothing{""};
  auto e = constant(1.0f);
  CHECK(e.op().device() == "/job:ps/device:CPU:0");
}

TEST_CASE("ops: an inner scope wins until it closes (case 31)",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  device_scope outer{"/job:worker/replica:2"};
  CHECK(constant(1.0f).op().device() == "/job:worker/replica:2");
  {
    device_scope inner{"/job:worker/replica:3/task:0"};
    CHECK(constant(1.0f).op().device() == "/job:worker/replica:3/task:0");
  }
  CHECK(constant(1.0f).op().device() == "/job:worker/replica:2");
}

TEST_CASE("ops: device(None) hides every outer scope (case 32)",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  device_scope gpu{"/gpu:0"};
  CHECK(constant(1.0f).op().device() == "/device:GPU:0");
  {
    device_scope none{nullptr};
    CHECK(constant(1.0f).op().device().empty());
    // An inner scope inside None applies on its own.
    device_scope cpu{"/cpu:1"};
    CHECK(constant(1.0f).op().device() == "/device:CPU:1");
  }
  {
    // A replica_device_setter without ps tasks is None too (case 46).
    auto setter = replica_device_setter(replica_device_setter_options{});
    REQUIRE_FALSE(setter.has_value());
    device_scope none{setter};
    CHECK(constant(1.0f).op().device().empty());
  }
  CHECK(constant(1.0f).op().device() == "/device:GPU:0");
}

TEST_CASE("ops: device strings parse as Python's DeviceSpec (§3.2, case 29)",
          "[ops][device]") {
  // tf.device(string) goes through DeviceSpec.from_string, which rejects
  // "/device:GPU" without an index and two device types, and keeps
  // "job:*" literally (device_name::parse_spec; the C++ parser differs).
  graph g;
  auto as_default = g.as_default();
  auto code_of = [](const char* spec) {
    try {
      device_scope scope{spec};
    } catch (const op_error& e) {
      return e.code();
    }
    return error_code::ok;
  };
  CHECK(code_of("/device:GPU") == error_code::invalid_argument);
  CHECK(code_of("/cpu:0/device:GPU:2") == error_code::invalid_argument);
  CHECK(code_of("/job:j/replica:foo") == error_code::invalid_argument);
  device_scope any_job{"/job:*/task:1"};
  CHECK(constant(1.0f).op().device() == "/job:*/task:1");
}

TEST_CASE("ops: a device function sees the inner scopes' device",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  std::vector<std::string> seen;
  device_scope fn{std::optional<device_function>{[&](const node_def& n) {
    seen.push_back(n.device);
    return n.op == "VariableV2" ? std::string{"/job:ps"} : n.device;
  }}};
  {
    device_scope inner{"/device:CPU:0"};
    auto c = constant(1.0f);
    CHECK(c.op().device() == "/device:CPU:0");
  }
  variable v{1.0f, named("v")};
  CHECK(v.device() == "/job:ps");
  CHECK(seen.front() == "/device:CPU:0");
  // What a device function returns is stored verbatim.
  device_scope raw{std::optional<device_function>{
    [](const node_def&) { return std::string{"/cpu:0"}; }}};
  CHECK(constant(1.0f).op().device() == "/cpu:0");
}

TEST_CASE("ops: Assign and read follow the variable's device and group "
          "(case 33)",
          "[ops][device][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v;
  {
    device_scope ps{"/job:ps"};
    v = variable{0, named("v")};
  }
  CHECK(v.device() == "/job:ps");
  CHECK(v.op().colocation_groups() == std::vector<std::string>{"loc:@v"});
  CHECK(v.initializer().device() == "/job:ps");
  CHECK(v.initializer().colocation_groups()
        == std::vector<std::string>{"loc:@v"});
  CHECK(v.value().op().device() == "/job:ps");
  CHECK(v.value().op().colocation_groups()
        == std::vector<std::string>{"loc:@v"});
  device_scope worker{"/job:worker/task:7"};
  auto a = v.assign(1.0);
  CHECK(a.op().device() == "/job:ps");
  CHECK(a.op().colocation_groups() == std::vector<std::string>{"loc:@v"});
  auto b = v.assign_add(constant(int32_t{2}));
  CHECK(b.op().device() == "/job:ps");
  CHECK(b.op().colocation_groups() == std::vector<std::string>{"loc:@v"});
  auto init = is_variable_initialized(v);
  CHECK(init.op().device() == "/job:ps");
  // Other ops in the scope still get the scope's device.
  CHECK(constant(1.0f).op().device() == "/job:worker/task:7");
  // A plain op is its own colocation group.
  auto c = constant(1.0f, "c");
  CHECK(c.op().colocation_groups() == std::vector<std::string>{"loc:@c"});
}

TEST_CASE("ops: a variable under /cpu:100 keeps that device (case 106)",
          "[ops][device][variable]") {
  graph g;
  auto as_default = g.as_default();
  device_scope cpu{"/cpu:100"};
  variable v1{42.0f, named("v1")};
  CHECK(v1.op().device() == "/device:CPU:100");
  CHECK(v1.initializer().device() == "/device:CPU:100");
}

TEST_CASE("ops: colocate_with ignores device scopes", "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  output anchor;
  {
    device_scope task1{"/job:local/task:1"};
    anchor = constant(1.0f, "anchor");
  }
  device_scope task0{"/job:local/task:0"};
  {
    colocate_with with{anchor};
    auto c = constant(2.0f, "c");
    CHECK(c.op().device() == "/job:local/task:1");
    CHECK(c.op().colocation_groups()
          == std::vector<std::string>{"loc:@anchor"});
  }
  CHECK(constant(3.0f).op().device() == "/job:local/task:0");
}

TEST_CASE("ops: replica_device_setter in a device scope (case 39)",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  replica_device_setter_options opts;
  opts.ps_tasks = 2;
  device_scope setter{replica_device_setter(opts)};
  variable v{1.0f, named("v")};
  variable w{2.0f, named("w")};
  auto a = v.value() + w.value();
  CHECK(v.device() == "/job:ps/task:0");
  CHECK(w.device() == "/job:ps/task:1");
  CHECK(a.op().device() == "/job:worker");
  // Initializers and reads stay with their variables.
  CHECK(v.initializer().device() == "/job:ps/task:0");
  CHECK(w.initializer().device() == "/job:ps/task:1");
  CHECK(v.value().op().device() == "/job:ps/task:0");
  CHECK(w.value().op().device() == "/job:ps/task:1");
  // The round robin goes on with the next variable.
  variable x{3.0f, named("x")};
  CHECK(x.device() == "/job:ps/task:0");
}

TEST_CASE("ops: an inner device scope merges into the setter (case 40)",
          "[ops][device]") {
  graph g;
  auto as_default = g.as_default();
  replica_device_setter_options opts;
  opts.ps_tasks = 2;
  device_scope setter{replica_device_setter(opts)};
  variable v;
  {
    device_scope cpu{"/cpu:0"};
    v = variable{1.0f, named("v")};
  }
  variable w{2.0f, named("w")};
  output a;
  {
    device_scope cpu{"/cpu:0"};
    a = v.value() + w.value();
  }
  CHECK(v.device() == "/job:ps/task:0/device:CPU:0");
  CHECK(w.device() == "/job:ps/task:1");
  CHECK(a.op().device() == "/job:worker/device:CPU:0");
}

// -- control dependencies ----------------------------------------------------

TEST_CASE("ops: control dependencies apply to ops created inside (case 110)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f, "a");
  auto b = constant(2.0f, "b");
  output c, d, e;
  {
    control_dependencies deps{a};
    c = constant(3.0f, "c");
    d = identity(b, "d");
    e = identity(c, "e");
  }
  CHECK(c.op().control_inputs() == std::vector<std::string>{"a"});
  CHECK(d.op().control_inputs() == std::vector<std::string>{"a"});
  // e's input c was created inside the block: the block is dominated.
  CHECK(e.op().control_inputs().empty());
  // Control inputs come after data inputs, as "^name".
  CHECK(d.op().def().inputs == std::vector<std::string>{"b", "^a"});
  // Only ops created inside are affected.
  auto f = identity(b, "f");
  CHECK(f.op().control_inputs().empty());
}

TEST_CASE("ops: nested control dependencies take the union (case 111)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto a1 = constant(1.0f, "a1");
  auto a2 = constant(2.0f, "a2");
  auto a3 = constant(3.0f, "a3");
  auto a4 = constant(4.0f, "a4");
  output b1, b2;
  {
    control_dependencies all{a1, a2, a3, a4};
    b1 = constant(5.0f, "b1");
  }
  {
    control_dependencies d1{a1};
    control_dependencies d2{a2};
    control_dependencies d3{a3};
    control_dependencies d4{a4};
    b2 = constant(6.0f, "b2");
  }
  std::vector<std::string> expected{"a1", "a2", "a3", "a4"};
  CHECK(sorted(b1.op().control_inputs()) == expected);
  CHECK(sorted(b2.op().control_inputs()) == expected);
}

TEST_CASE("ops: control dependencies skip data inputs and dominated blocks "
          "(case 112)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto a1 = constant(1.0f, "a_1");
  auto a2 = constant(2.0f, "a_2");
  auto a3 = constant(3.0f, "a_3");
  auto a4 = constant(4.0f, "a_4");
  auto controls = [](const output& x) {
    return sorted(x.op().control_inputs());
  };
  using names = std::vector<std::string>;
  control_dependencies cd1{a1};
  auto b1 = a3 * a4;
  auto c1 = a1 * b1;
  auto d1 = b1 * c1;
  auto e1 = constant(5.0f, "e_1");
  CHECK(controls(b1) == names{"a_1"});
  CHECK(controls(c1).empty());
  CHECK(controls(d1).empty());
  CHECK(controls(e1) == names{"a_1"});
  control_dependencies cd2{a2};
  auto b2 = a3 * a4;
  auto c2 = a1 * b1;
  auto d2 = b2 * c2;
  auto e2 = e1 * e1;
  CHECK(controls(b2) == names{"a_1", "a_2"});
  CHECK(controls(c2) == names{"a_2"});
  CHECK(controls(d2).empty());
  CHECK(controls(e2) == names{"a_2"});
  control_dependencies cd3{a3};
  auto b3 = a3 * a4;
  auto c3 = a1 * b1;
  auto d3 = b3 * c3;
  auto e3 = e2 * e2;
  CHECK(controls(b3) == names{"a_1", "a_2"});
  CHECK(controls(c3) == names{"a_2", "a_3"});
  CHECK(controls(d3).empty());
  CHECK(controls(e3) == names{"a_3"});
  control_dependencies cd4{a4};
  auto b4 = a3 * a4;
  auto c4 = a1 * b1;
  auto d4 = b4 * c4;
  auto e4 = e3 * e3;
  CHECK(controls(b4) == names{"a_1", "a_2"});
  CHECK(controls(c4) == names{"a_2", "a_3", "a_4"});
  CHECK(controls(d4).empty());
  CHECK(controls(e4) == names{"a_4"});
}

TEST_CASE("ops: control inputs are deduplicated by op (case 113)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(std::vector<float>{1, 2, 3, 4}, "x");
  auto parts = split(x, 2, 0, "a");
  REQUIRE(parts.size() == 2);
  output b, c;
  {
    control_dependencies first{parts[0]};
    b = constant(1.0f, "b");
    {
      control_dependencies second{parts[1]};
      c = constant(2.0f, "c");
    }
  }
  CHECK(b.op().control_inputs() == std::vector<std::string>{"a"});
  CHECK(c.op().control_inputs() == std::vector<std::string>{"a"});
}

TEST_CASE("ops: no control input on an op that already reads it (case 114)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f, "a");
  control_dependencies deps{a};
  auto b = identity(a, "b");
  CHECK(b.op().control_inputs().empty());
  CHECK(b.op().def().inputs == std::vector<std::string>{"a"});
}

TEST_CASE("ops: control_dependencies(None) starts a new stack (case 115)",
          "[ops][control]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f, "a");
  auto b = constant(2.0f, "b");
  auto c = constant(3.0f, "c");
  auto d = constant(4.0f, "d");
  output x, y, z;
  {
    control_dependencies outer{a, b};
    {
      control_dependencies none{nullptr};
      x = constant(5.0f, "x");
      {
        control_dependencies inner{c, d};
        y = constant(6.0f, "y");
      }
    }
    // The old stack is back after None closes.
    z = constant(7.0f, "z");
  }
  CHECK(x.op().control_inputs().empty());
  CHECK(sorted(y.op().control_inputs()) == std::vector<std::string>{"c", "d"});
  CHECK(sorted(z.op().control_inputs()) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("ops: variables ignore enclosing control dependencies (case 102)",
          "[ops][control][variable]") {
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f, "c");
  output d, ix;
  variable x;
  {
    control_dependencies deps{c};
    d = constant(2.0f, "d");
    x = variable{2.0f, named("x")};
    ix = x.initialized_value();
  }
  CHECK(d.op().control_inputs() == std::vector<std::string>{"c"});
  CHECK(x.op().control_inputs().empty());
  CHECK(x.initializer().control_inputs().empty());
  CHECK(x.value().op().control_inputs().empty());
  CHECK(x.initial_value().op().control_inputs().empty());
  auto ix_controls = ix.op().control_inputs();
  CHECK(std::find(ix_controls.begin(), ix_controls.end(), "c")
        == ix_controls.end());
}

TEST_CASE("ops: initialized_value reads the variable after its "
          "initializer",
          "[ops][control][variable]") {
  // TF 1.x: identity(self._variable) under
  // control_dependencies([initializer]), colocated with the variable. The
  // ref itself is read, so the value is the initialized one.
  graph g;
  auto as_default = g.as_default();
  variable x;
  {
    device_scope ps{"/job:ps"};
    x = variable{2.0f, named("x")};
  }
  device_scope worker{"/job:worker"};
  auto ix = x.initialized_value();
  CHECK(ix.op().type() == "Identity");
  CHECK(ix.op().def().inputs == std::vector<std::string>{"x", "^x/Assign"});
  CHECK(ix.op().colocation_groups() == std::vector<std::string>{"loc:@x"});
  CHECK(ix.op().device() == "/job:ps");
}

TEST_CASE("ops: group and global_variables_initializer are NoOps with "
          "control inputs",
          "[ops][control][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, named("v")};
  variable w{2.0f, named("w")};
  auto init = global_variables_initializer();
  CHECK(init.name() == "init");
  CHECK(init.type() == "NoOp");
  CHECK(sorted(init.control_inputs())
        == std::vector<std::string>{"v/Assign", "w/Assign"});
  auto grouped = group({v.initializer(), w.initializer()});
  CHECK(grouped.name() == "group_deps");
  CHECK(grouped.num_outputs() == 0);
}

// -- containers and collections ------------------------------------------------

TEST_CASE("ops: container scopes set the container attr (case 49)",
          "[ops][variable]") {
  graph g;
  auto as_default = g.as_default();
  auto container_of = [](const variable& v) {
    return v.op().def().attr<std::string>("container");
  };
  variable v0{1.0f, named("v0")};
  variable v1, v2, v3;
  operation explicit_l3;
  output plain;
  {
    container_scope l1{"l1"};
    v1 = variable{1.0f, named("v1")};
    {
      container_scope l2{"l2"};
      v2 = variable{1.0f, named("v2")};
      node_def n;
      n.name = "v_l3";
      n.op = "VariableV2";
      n.attrs["container"] = std::string{"l3"};
      n.attrs["dtype"] = dtype::float32;
      n.attrs["shape"] = tensor_shape{};
      explicit_l3 = g.add_node(std::move(n), {}, {dtype::float32},
                               {tensor_shape{}}, true);
      plain = constant(1.0f, "plain");
    }
    v3 = variable{1.0f, named("v3")};
  }
  variable v4{1.0f, named("v4")};
  CHECK(container_of(v0).empty());
  CHECK(container_of(v1) == "l1");
  CHECK(container_of(v2) == "l2");
  CHECK(explicit_l3.def().attr<std::string>("container") == "l3");
  CHECK(container_of(v3) == "l1");
  CHECK(container_of(v4).empty());
  // Stateless ops get no container.
  CHECK_FALSE(plain.op().def().has_attr("container"));
}

TEST_CASE("ops: global vs trainable collections (case 103)",
          "[ops][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable x{2.0f, named("x")};
  variable y{2.0f, not_trainable()};
  variable z{2.0f};
  variable t{2.0f, in_collections({trainable_variables_key,
                                   global_variables_key})};
  CHECK(names_of(global_variables())
        == std::vector<std::string>{"x", "Variable", "Variable_1",
                                    "Variable_2"});
  CHECK(names_of(trainable_variables())
        == std::vector<std::string>{"x", "Variable_1", "Variable_2"});
  CHECK_FALSE(y.trainable());
  CHECK(z.trainable());
  // No duplicate when trainable_variables is already listed.
  CHECK(g.collection(trainable_variables_key).size() == 3);
  CHECK(local_variables().empty());
}

TEST_CASE("ops: explicit collections, including none at all",
          "[ops][variable]") {
  graph g;
  auto as_default = g.as_default();
  auto hidden_opts = in_collections({});
  hidden_opts.trainable = false;
  hidden_opts.name = "training_set";
  variable hidden{tensor::vec(std::vector<float>{1, 2}), hidden_opts};
  auto local_opts = in_collections({local_variables_key});
  local_opts.trainable = false;
  local_opts.name = "epochs";
  variable local{int64_t{0}, local_opts};
  CHECK(global_variables().empty());
  CHECK(trainable_variables().empty());
  CHECK(names_of(local_variables()) == std::vector<std::string>{"epochs"});
  // Still a variable of the graph.
  CHECK(g.variables().size() == 2);
  CHECK(variable::from_graph(g, "training_set").name() == "training_set:0");
  // global_variables_initializer over no variables is a plain NoOp.
  auto init = global_variables_initializer();
  CHECK(init.type() == "NoOp");
  CHECK(init.control_inputs().empty());
}

// -- static shapes ------------------------------------------------------------------

TEST_CASE("ops: static shapes of matmul, reductions and arrays",
          "[ops][shape]") {
  graph g;
  auto as_default = g.as_default();
  auto a = zeros({2, 3});
  auto b = zeros({3, 4});
  CHECK(matmul(a, b).shape() == tensor_shape{2, 4});
  CHECK(matmul(b, a, true, true).shape() == tensor_shape{4, 2});
  auto p = placeholder(dtype::float32, {-1, 3}, "p");
  CHECK(p.shape() == tensor_shape{-1, 3});
  CHECK(matmul(p, b).shape() == tensor_shape{-1, 4});

  CHECK(reduce_sum(a, {1}).shape() == tensor_shape{2});
  CHECK(reduce_sum(a, {1}, true).shape() == tensor_shape{2, 1});
  CHECK(reduce_sum(a, {0}, true).shape() == tensor_shape{1, 3});
  CHECK(reduce_mean(a).shape() == tensor_shape{});
  CHECK(reduce_max(a, {}, true).shape() == tensor_shape{1, 1});
  CHECK(reduce_sum(a, {-1}).shape() == tensor_shape{2});
  auto s = reduce_sum(a, {1}, false, "total");
  CHECK(g.find_operation("total/reduction_indices").valid());
  CHECK(s.op().def().attr<bool>("keep_dims") == false);

  auto x = zeros({4, 6});
  auto parts = split(x, 2, 1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].shape() == tensor_shape{4, 3});
  CHECK(parts[1].shape() == tensor_shape{4, 3});
  CHECK(parts[1].name() == "split:1");
  CHECK(parts[0].op().num_outputs() == 2);
  CHECK(g.find_operation("split/split_dim").valid());
  auto thirds = split(x, 3, 1);
  REQUIRE(thirds.size() == 3);
  CHECK(thirds[2].shape() == tensor_shape{4, 2});
  auto unknown = split(placeholder(dtype::float32, {-1, 4}), 2, 1);
  CHECK(unknown[0].shape() == tensor_shape{-1, 2});

  CHECK(concat({a, a}, 0).shape() == tensor_shape{4, 3});
  CHECK(concat({a, a}, 1).shape() == tensor_shape{2, 6});
  auto v = zeros({3});
  CHECK(stack({v, v}).shape() == tensor_shape{2, 3});
  CHECK(stack({v, v}, 1).shape() == tensor_shape{3, 2});
  CHECK(pack({v, v, v}).shape() == tensor_shape{3, 3});
  // Broadcasting.
  CHECK((a + v).shape() == tensor_shape{2, 3});
  CHECK((a + 1.0f).shape() == tensor_shape{2, 3});
  CHECK(reshape(a, {-1}).shape() == tensor_shape{6});
  CHECK(reshape(a, {3, -1}).shape() == tensor_shape{3, 2});
  CHECK(cast(a, dtype::int32).type() == dtype::int32);
  // A placeholder of unknown rank gives unknown shapes downstream.
  auto u = placeholder(dtype::float32);
  CHECK(u.shape().unknown_rank());
  CHECK((u * 2.0f).shape().unknown_rank());
}

TEST_CASE("ops: graph-time errors are InvalidArgument", "[ops][errors]") {
  graph g;
  auto as_default = g.as_default();
  auto f = constant(1.0f, "f");
  auto i = constant(int32_t{1}, "i");
  auto check_invalid = [](std::optional<op_error> err, const char* what) {
    INFO(what);
    REQUIRE(err.has_value());
    CHECK(err->code() == error_code::invalid_argument);
  };
  // dtype mismatch (TF's TypeError).
  check_invalid(error_of([&] { add(f, i); }), "add float32 + int32");
  check_invalid(error_of([&] { f * i; }), "mul float32 * int32");
  // Inner dimensions of a matmul.
  auto a = zeros({2, 3});
  auto b = zeros({2, 3});
  auto mm = error_of([&] { matmul(a, b); });
  check_invalid(mm, "matmul [2,3] x [2,3]");
  CHECK_THAT(mm->get_status().message(),
             Catch::Contains("Dimensions must be equal"));
  check_invalid(error_of([&] { matmul(zeros({2}), zeros({2, 2})); }),
                "matmul of a vector");
  // Broadcasting that cannot work.
  check_invalid(error_of([&] { zeros({2, 3}) + zeros({4}); }),
                "broadcast [2,3] + [4]");
  // Split that does not divide the dimension.
  auto odd = zeros({5});
  check_invalid(error_of([&] { split(odd, 2); }), "split 5 in 2");
  check_invalid(error_of([&] { split(zeros({4, 6}), 4, 1); }),
                "split 6 in 4");
  // A reduction axis out of range.
  check_invalid(error_of([&] { reduce_sum(a, {2}); }), "reduce axis 2");
  // A variable needs a fully defined initial shape unless validate_shape
  // is off.
  auto p = placeholder(dtype::float32, {-1}, "p");
  auto no_shape = error_of([&] { variable{p, named("v")}; });
  check_invalid(no_shape, "variable from a [?] placeholder");
  CHECK_THAT(no_shape->get_status().message(),
             Catch::Contains("initial_value must have a shape specified"));
  variable_options loose;
  loose.validate_shape = false;
  loose.name = "loose";
  variable ok{p, loose};
  CHECK(ok.shape().unknown_rank());
  // A static assign mismatch (TF's ValueError from shape inference).
  variable v{tensor::vec(std::vector<float>{1, 2, 3}), named("v3")};
  check_invalid(error_of([&] { v.assign(zeros({2})); }), "assign [2] to [3]");
  check_invalid(error_of([&] { v.assign(constant(int32_t{1})); }),
                "assign int32 to float32");
  // validate_shape=false allows any shape.
  CHECK_NOTHROW(v.assign(zeros({2}), false));
  // Duplicate node names through the primitive.
  node_def dup;
  dup.name = "f";
  dup.op = "NoOp";
  check_invalid(error_of([&] { g.add_node(dup, {}, {}, {}); }),
                "duplicate name");
}

TEST_CASE("ops: tensor_by_name and find_operation", "[ops]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(std::vector<float>{1, 2, 3, 4}, "x");
  auto parts = split(x, 2);
  CHECK(g.tensor_by_name("x:0") == x);
  CHECK(g.tensor_by_name("x") == x);
  CHECK(g.tensor_by_name("split:1") == parts[1]);
  CHECK_FALSE(g.find_operation("nope").valid());
  auto missing = error_of([&] { g.tensor_by_name("nope:0"); });
  REQUIRE(missing);
  CHECK(missing->code() == error_code::not_found);
  auto no_output = error_of([&] { g.tensor_by_name("x:1"); });
  REQUIRE(no_output);
  CHECK(no_output->code() == error_code::not_found);
}

TEST_CASE("ops: graphs are separate and default_guard restores", "[ops]") {
  graph outer;
  auto outer_default = outer.as_default();
  constant(1.0f);
  {
    graph inner;
    auto inner_default = inner.as_default();
    CHECK(&default_graph() == &inner);
    CHECK(constant(1.0f).op().name() == "Const");
    CHECK(inner.num_nodes() == 1);
  }
  CHECK(&default_graph() == &outer);
  CHECK(constant(1.0f).op().name() == "Const_1");
  // An input from another graph is rejected.
  graph other;
  output foreign;
  {
    auto other_default = other.as_default();
    foreign = constant(1.0f);
  }
  auto x = constant(1.0f);
  auto err = error_of([&] { add(x, foreign); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
}

TEST_CASE("tensor::to_string prints values as Python and numpy do",
          "[tensor]") {
  auto f = [](double x) { return tensor::scalar(x).to_string(); };
  CHECK(f(3.0) == "3.0");
  CHECK(f(10.0) == "10.0");
  CHECK(f(-250.0) == "-250.0");
  CHECK(f(0.1) == "0.1");
  CHECK(f(1234.5) == "1234.5");
  CHECK(f(0.0001) == "0.0001");
  CHECK(f(1e-05) == "1e-05");
  CHECK(f(1.5e-07) == "1.5e-07");
  CHECK(f(1e15) == "1000000000000000.0");
  CHECK(f(1e16) == "1e+16");
  CHECK(f(-0.0) == "-0.0");
  CHECK(tensor::scalar(0.1f).to_string() == "0.1");
  CHECK(tensor::scalar(16777216.0f).to_string() == "16777216.0");
  CHECK(tensor::vec<float>({1.0f, 2.5f, 10.0f}).to_string() == "[1. 2.5 10.]");
}
