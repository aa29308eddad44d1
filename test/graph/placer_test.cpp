// The placer on hand-built graph_defs, against TensorFlow 1.x's Placer
// (tf_semantics §4, cases 34-38, and §13 item 1): sorted device set,
// colocation by ref edges and `_class`, soft placement, the generator
// heuristic and the placement log.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "actorflow/graph/placer.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string task0_cpu = "/job:local/replica:0/task:0/device:CPU:0";
const std::string task1_cpu = "/job:local/replica:0/task:1/device:CPU:0";
const std::string task1_gpu = "/job:local/replica:0/task:1/device:GPU:0";

node_def colocated(node_def n, std::string with) {
  n.attrs["_class"] = std::vector<std::string>{"loc:@" + with};
  return n;
}

// The two-task cluster of seed 000, devices given in the order passed.
placer_options two_tasks(std::vector<std::string> devices
                         = {task0_cpu, task1_cpu},
                         bool soft = false) {
  placer_options opts;
  opts.devices = std::move(devices);
  opts.allow_soft_placement = soft;
  return opts;
}

std::map<std::string, std::string> devices_of(const graph_def& g) {
  std::map<std::string, std::string> result;
  for (auto& n : g.nodes)
    result[n.name] = n.device;
  return result;
}

// A variable with initializer and snapshot, as the builder makes them.
graph_def variable_graph(const std::string& var_device = {}) {
  graph_def g;
  g.nodes.push_back(make("v/initial_value", "Const"));
  g.nodes.push_back(make("v", "VariableV2", {}, var_device));
  g.nodes.push_back(
    colocated(make("v/Assign", "Assign", {"v", "v/initial_value"}), "v"));
  g.nodes.push_back(colocated(make("v/read", "Identity", {"v"}), "v"));
  return g;
}

} // namespace

TEST_CASE("placer: unpinned nodes go to the first task by name (seed 000)",
          "[placer]") {
  for (auto order : {std::vector<std::string>{task0_cpu, task1_cpu},
                     std::vector<std::string>{task1_cpu, task0_cpu}}) {
    auto g = variable_graph();
    g.nodes.push_back(make("double", "Mul", {"v/read", "v/read"}));
    REQUIRE(place(g, two_tasks(order)).ok());
    for (auto& n : g.nodes) {
      INFO(n.name);
      CHECK(n.device == task0_cpu);
    }
  }
}

TEST_CASE("placer: every node gets a full device name", "[placer]") {
  graph_def g;
  g.nodes.push_back(make("a", "NoOp", {}, "/job:local"));
  g.nodes.push_back(make("b", "NoOp", {}, "/task:1"));
  g.nodes.push_back(make("c", "NoOp", {}, "/cpu:0"));
  g.nodes.push_back(make("d", "NoOp", {}, "/job:local/replica:0/task:1/cpu:0"));
  REQUIRE(place(g, two_tasks({task1_cpu, task0_cpu})).ok());
  auto dev = devices_of(g);
  CHECK(dev["a"] == task0_cpu);
  CHECK(dev["b"] == task1_cpu);
  CHECK(dev["c"] == task0_cpu);
  CHECK(dev["d"] == task1_cpu);
}

TEST_CASE("placer: a GPU on any task beats every CPU (§4.3)", "[placer]") {
  graph_def g;
  g.nodes.push_back(make("x", "NoOp"));
  g.nodes.push_back(make("y", "NoOp", {}, "/device:CPU:0"));
  REQUIRE(place(g, two_tasks({task0_cpu, task1_cpu, task1_gpu})).ok());
  auto dev = devices_of(g);
  CHECK(dev["x"] == task1_gpu);
  CHECK(dev["y"] == task0_cpu);
}

TEST_CASE("placer: ops using a variable's ref go with the variable",
          "[placer]") {
  graph_def g;
  g.nodes.push_back(make("v", "VariableV2", {}, "/job:local/task:1"));
  g.nodes.push_back(make("one", "Const", {}, "/job:local/task:0"));
  // No _class here: only the ref edge ties these to v.
  g.nodes.push_back(make("inc", "AssignAdd", {"v", "one"}));
  g.nodes.push_back(make("set", "Assign", {"v", "one"}));
  g.nodes.push_back(make("is_init", "IsVariableInitialized", {"v"}));
  g.nodes.push_back(make("other", "NoOp"));
  REQUIRE(place(g, two_tasks()).ok());
  auto dev = devices_of(g);
  CHECK(dev["v"] == task1_cpu);
  CHECK(dev["inc"] == task1_cpu);
  CHECK(dev["set"] == task1_cpu);
  CHECK(dev["is_init"] == task1_cpu);
  CHECK(dev["one"] == task0_cpu);
  CHECK(dev["other"] == task0_cpu);
}

TEST_CASE("placer: a request anywhere in a ref group moves the whole group",
          "[placer]") {
  graph_def g;
  g.nodes.push_back(make("v", "VariableV2"));
  g.nodes.push_back(make("one", "Const"));
  g.nodes.push_back(make("inc", "AssignAdd", {"v", "one"}, "/job:local/task:1"));
  REQUIRE(place(g, two_tasks()).ok());
  auto dev = devices_of(g);
  CHECK(dev["v"] == task1_cpu);
  CHECK(dev["inc"] == task1_cpu);
}

TEST_CASE("placer: _class loc:@ colocates", "[placer]") {
  auto g = variable_graph("/job:local/task:1");
  g.nodes.push_back(colocated(make("c", "NoOp"), "anchor"));
  g.nodes.push_back(make("anchor", "NoOp", {}, "/job:local/task:1"));
  REQUIRE(place(g, two_tasks()).ok());
  auto dev = devices_of(g);
  CHECK(dev["v"] == task1_cpu);
  CHECK(dev["v/Assign"] == task1_cpu);
  CHECK(dev["v/read"] == task1_cpu);
  CHECK(dev["c"] == task1_cpu);
  CHECK(dev["anchor"] == task1_cpu);
}

TEST_CASE("placer: a task outside the cluster is InvalidArgument (case 36)",
          "[placer][errors]") {
  graph_def g;
  g.nodes.push_back(make("free", "NoOp"));
  g.nodes.push_back(make("pinned", "NoOp", {}, "/job:local/task:5"));
  auto before = g.nodes;
  auto st = place(g, two_tasks());
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(),
             Catch::Contains("Cannot assign a device for operation"));
  CHECK_THAT(st.message(), Catch::Contains("pinned"));
  CHECK_THAT(st.message(), Catch::Contains("/job:local/task:5"));
  // The graph is unchanged on error.
  REQUIRE(g.nodes.size() == before.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    CHECK(g.nodes[i].device == before[i].device);
  // An unknown job fails the same way.
  graph_def h;
  h.nodes.push_back(make("ps_op", "NoOp", {}, "/job:ps"));
  auto st2 = place(h, two_tasks());
  CHECK(st2.code() == error_code::invalid_argument);
  CHECK_THAT(st2.message(), Catch::Contains("ps_op"));
}

TEST_CASE("placer: a GPU request needs soft placement on CPUs (case 37)",
          "[placer][errors]") {
  auto gpu_graph = [] {
    graph_def g;
    g.nodes.push_back(make("a", "Const", {}, "/device:GPU:0"));
    g.nodes.push_back(make("b", "Neg", {"a"}, "/device:GPU:0"));
    return g;
  };
  auto hard = gpu_graph();
  auto st = place(hard, two_tasks({task1_cpu, task0_cpu}));
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(),
             Catch::Contains("Cannot assign a device for operation"));
  auto soft = gpu_graph();
  REQUIRE(place(soft, two_tasks({task1_cpu, task0_cpu}, true)).ok());
  CHECK(devices_of(soft)["a"] == task0_cpu);
  CHECK(devices_of(soft)["b"] == task0_cpu);
}

TEST_CASE("placer: soft placement keeps the task (case 38)", "[placer]") {
  graph_def g;
  g.nodes.push_back(make("x", "NoOp", {}, "/job:local/task:1/device:GPU:0"));
  REQUIRE(place(g, two_tasks({task0_cpu, task1_cpu}, true)).ok());
  CHECK(g.nodes[0].device == task1_cpu);
  // Soft placement does not forgive a missing task.
  graph_def h;
  h.nodes.push_back(make("y", "NoOp", {}, "/job:local/task:5/device:GPU:0"));
  CHECK(place(h, two_tasks({task0_cpu, task1_cpu}, true)).code()
        == error_code::invalid_argument);
}

TEST_CASE("placer: conflicting requests in one group are InvalidArgument",
          "[placer][errors]") {
  auto conflicting = [] {
    graph_def g;
    g.nodes.push_back(make("v", "VariableV2", {}, "/job:local/task:0"));
    g.nodes.push_back(make("one", "Const"));
    g.nodes.push_back(make("inc", "AssignAdd", {"v", "one"},
                           "/job:local/task:1"));
    return g;
  };
  auto g = conflicting();
  auto st = place(g, two_tasks());
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("Cannot colocate nodes"));
  // Soft placement softens only types and ids, never tasks.
  auto h = conflicting();
  CHECK(place(h, two_tasks({task0_cpu, task1_cpu}, true)).code()
        == error_code::invalid_argument);
  // A type conflict within a group is forgiven with soft placement.
  graph_def k;
  k.nodes.push_back(make("v", "VariableV2", {}, "/device:GPU:0"));
  k.nodes.push_back(colocated(make("r", "Identity", {"v"}, "/device:CPU:0"),
                              "v"));
  CHECK(place(k, two_tasks()).code() == error_code::invalid_argument);
  graph_def k2 = k;
  REQUIRE(place(k2, two_tasks({task0_cpu, task1_cpu}, true)).ok());
  CHECK(devices_of(k2)["v"] == task0_cpu);
  CHECK(devices_of(k2)["r"] == task0_cpu);
}

TEST_CASE("placer: a Const follows its consumers when they agree",
          "[placer]") {
  graph_def g;
  g.nodes.push_back(make("c", "Const"));
  g.nodes.push_back(make("use1", "Neg", {"c"}, "/job:local/task:1"));
  g.nodes.push_back(make("use2", "Square", {"c"}, "/job:local/task:1"));
  // A Const whose consumers disagree stays on the default device.
  g.nodes.push_back(make("d", "Const"));
  g.nodes.push_back(make("left", "Neg", {"d"}, "/job:local/task:0"));
  g.nodes.push_back(make("right", "Neg", {"d"}, "/job:local/task:1"));
  // A pinned Const stays where it was pinned.
  g.nodes.push_back(make("e", "Const", {}, "/job:local/task:0"));
  g.nodes.push_back(make("use_e", "Neg", {"e"}, "/job:local/task:1"));
  REQUIRE(place(g, two_tasks()).ok());
  auto dev = devices_of(g);
  CHECK(dev["c"] == task1_cpu);
  CHECK(dev["d"] == task0_cpu);
  CHECK(dev["e"] == task0_cpu);
  CHECK(dev["use_e"] == task1_cpu);
}

TEST_CASE("placer: the log records name, op and device of every node "
          "(case 34)",
          "[placer]") {
  auto g = variable_graph();
  std::vector<placement_record> log;
  REQUIRE(place(g, two_tasks({task1_cpu, task0_cpu}), &log).ok());
  REQUIRE(log.size() == g.nodes.size());
  std::map<std::string, placement_record> by_node;
  for (auto& r : log)
    by_node[r.node] = r;
  REQUIRE(by_node.count("v") == 1);
  CHECK(by_node["v"].op == "VariableV2");
  CHECK(by_node["v"].device == task0_cpu);
  // The line TF prints: "v: (VariableV2): /job:local/replica:0/task:0/...".
  auto& r = by_node["v"];
  CHECK(r.node + ": (" + r.op + "): " + r.device
        == "v: (VariableV2): /job:local/replica:0/task:0/device:CPU:0");
  CHECK(by_node["v/Assign"].op == "Assign");
  CHECK(by_node["v/read"].op == "Identity");
  // Nodes that already had a device are logged too.
  graph_def pinned;
  pinned.nodes.push_back(make("p", "NoOp", {}, task1_cpu));
  std::vector<placement_record> log2;
  REQUIRE(place(pinned, two_tasks(), &log2).ok());
  REQUIRE(log2.size() == 1);
  CHECK(log2[0].node == "p");
  CHECK(log2[0].device == task1_cpu);
}

TEST_CASE("placer: malformed requests and an empty device set fail",
          "[placer][errors]") {
  graph_def g;
  g.nodes.push_back(make("bad", "NoOp", {}, "/job:local/bogus:3"));
  auto st = place(g, two_tasks());
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("bad"));
  graph_def h;
  h.nodes.push_back(make("x", "NoOp"));
  CHECK(place(h, placer_options{}).code() == error_code::invalid_argument);
}
