// Subgraph pruning (TensorFlow's subgraph::RewriteGraphForExecution: feeds
// become `_Arg`, fetches get `_Retval`, unneeded nodes go) and partitioning
// (TensorFlow's Partition: one `_Send`/`_Recv` pair per cut tensor and
// consumer device, control edges included).

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actorflow/graph/partition.hpp"
#include "actorflow/graph/subgraph.hpp"
#include "common/graph_def_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string dev0 = "/job:local/replica:0/task:0/device:CPU:0";
const std::string dev1 = "/job:local/replica:0/task:1/device:CPU:0";
const std::string dev2 = "/job:local/replica:0/task:2/device:CPU:0";

// a, b -> c = a + b -> d = c * c (with a control input on e); "unused" and
// "p" are not needed by d.
graph_def sample() {
  graph_def g;
  g.seed = 7;
  g.nodes.push_back(make("a", "Const"));
  g.nodes.push_back(make("b", "Const"));
  g.nodes.push_back(make("e", "NoOp"));
  g.nodes.push_back(make("c", "Add", {"a", "b"}));
  g.nodes.push_back(make("d", "Mul", {"c", "c", "^e"}));
  g.nodes.push_back(make("unused", "Neg", {"a"}));
  g.nodes.push_back(make("p", "Placeholder"));
  g.nodes.push_back(make("q", "Split", {"a", "b"}));
  g.nodes.back().attrs["num_split"] = int64_t{2};
  return g;
}

std::set<std::string> names(const graph_def& g) {
  std::set<std::string> result;
  for (auto& n : g.nodes)
    result.insert(n.name);
  return result;
}

} // namespace

// -- build_subgraph -------------------------------------------------------------

TEST_CASE("partition: a fetch keeps only what it needs", "[subgraph]") {
  subgraph sub;
  REQUIRE(build_subgraph(sample(), {}, {"d:0"}, {}, sub).ok());
  auto kept = names(sub.def);
  CHECK(kept.count("a") == 1);
  CHECK(kept.count("b") == 1);
  CHECK(kept.count("c") == 1);
  CHECK(kept.count("d") == 1);
  CHECK(kept.count("e") == 1); // a control input is needed too
  CHECK(kept.count("unused") == 0);
  CHECK(kept.count("p") == 0);
  CHECK(kept.count("q") == 0);
  CHECK(sub.def.seed == 7);
  CHECK(sub.arg_nodes.empty());
  REQUIRE(sub.retval_nodes.size() == 1);
  auto ret = find(sub.def, sub.retval_nodes[0]);
  REQUIRE(ret != nullptr);
  CHECK(ret->op == "_Retval");
  CHECK(ret->attr<int64_t>("index") == 0);
  CHECK(ret->inputs == std::vector<std::string>{"d"});
  CHECK(of_op(sub.def, "_Retval").size() == 1);
  CHECK(inputs_first(sub.def));
  // The kept nodes are untouched.
  CHECK(find(sub.def, "d")->inputs
        == std::vector<std::string>{"c", "c", "^e"});
}

TEST_CASE("partition: fetches of several outputs get one _Retval each",
          "[subgraph]") {
  subgraph sub;
  REQUIRE(build_subgraph(sample(), {}, {"q:1", "c", "q:0"}, {}, sub).ok());
  REQUIRE(sub.retval_nodes.size() == 3);
  std::vector<std::vector<std::string>> inputs;
  for (size_t i = 0; i < 3; ++i) {
    auto ret = find(sub.def, sub.retval_nodes[i]);
    REQUIRE(ret != nullptr);
    CHECK(ret->attr<int64_t>("index") == static_cast<int64_t>(i));
    inputs.push_back(ret->inputs);
  }
  CHECK(inputs[0] == std::vector<std::string>{"q:1"});
  CHECK(inputs[1] == std::vector<std::string>{"c"});
  CHECK(inputs[2] == std::vector<std::string>{"q"});
  // The same tensor fetched twice is fine.
  subgraph twice;
  REQUIRE(build_subgraph(sample(), {}, {"c:0", "c:0"}, {}, twice).ok());
  CHECK(twice.retval_nodes.size() == 2);
  CHECK(twice.retval_nodes[0] != twice.retval_nodes[1]);
}

TEST_CASE("partition: feeds cut the graph and become _Arg", "[subgraph]") {
  subgraph sub;
  REQUIRE(build_subgraph(sample(), {"c:0"}, {"d:0"}, {}, sub).ok());
  auto kept = names(sub.def);
  CHECK(kept.count("a") == 0);
  CHECK(kept.count("b") == 0);
  CHECK(kept.count("c") == 0);
  CHECK(kept.count("d") == 1);
  CHECK(kept.count("e") == 1);
  REQUIRE(sub.arg_nodes.size() == 1);
  auto arg = find(sub.def, sub.arg_nodes[0]);
  REQUIRE(arg != nullptr);
  CHECK(arg->op == "_Arg");
  CHECK(arg->attr<int64_t>("index") == 0);
  CHECK(arg->inputs.empty());
  // Both uses of c:0 read the _Arg; the control input stays.
  CHECK(find(sub.def, "d")->inputs
        == std::vector<std::string>{arg->name, arg->name, "^e"});
  CHECK(inputs_first(sub.def));
}

TEST_CASE("partition: feeding one output of a node keeps the others",
          "[subgraph]") {
  graph_def g;
  g.nodes.push_back(make("x", "Const"));
  g.nodes.push_back(make("s", "Split", {"x", "x"}));
  g.nodes.back().attrs["num_split"] = int64_t{2};
  g.nodes.push_back(make("use0", "Neg", {"s"}));
  g.nodes.push_back(make("use1", "Neg", {"s:1"}));
  subgraph sub;
  REQUIRE(build_subgraph(g, {"s:1"}, {"use0", "use1"}, {}, sub).ok());
  REQUIRE(sub.arg_nodes.size() == 1);
  CHECK(names(sub.def).count("s") == 1); // s:0 is still computed
  CHECK(find(sub.def, "use0")->inputs == std::vector<std::string>{"s"});
  CHECK(find(sub.def, "use1")->inputs
        == std::vector<std::string>{sub.arg_nodes[0]});
}

TEST_CASE("partition: a fed tensor can be fetched", "[subgraph]") {
  subgraph sub;
  REQUIRE(build_subgraph(sample(), {"p:0", "c:0"}, {"c:0"}, {}, sub).ok());
  REQUIRE(sub.arg_nodes.size() == 2);
  REQUIRE(sub.retval_nodes.size() == 1);
  auto ret = find(sub.def, sub.retval_nodes[0]);
  REQUIRE(ret != nullptr);
  CHECK(ret->inputs == std::vector<std::string>{sub.arg_nodes[1]});
  CHECK(find(sub.def, sub.arg_nodes[1])->attr<int64_t>("index") == 1);
  CHECK(names(sub.def).count("c") == 0);
  CHECK(names(sub.def).count("a") == 0);
}

TEST_CASE("partition: targets run without a _Retval", "[subgraph]") {
  subgraph sub;
  REQUIRE(build_subgraph(sample(), {}, {}, {"unused"}, sub).ok());
  CHECK(names(sub.def) == std::set<std::string>{"a", "unused"});
  CHECK(sub.retval_nodes.empty());
  CHECK(of_op(sub.def, "_Retval").empty());
}

TEST_CASE("partition: unknown fetches, feeds and targets are NotFound",
          "[subgraph][errors]") {
  subgraph sub;
  auto fetch = build_subgraph(sample(), {}, {"nope:0"}, {}, sub);
  CHECK(fetch.code() == error_code::not_found);
  CHECK_THAT(fetch.message(), Catch::Contains("nope"));
  auto feed = build_subgraph(sample(), {"ghost:0"}, {"d:0"}, {}, sub);
  CHECK(feed.code() == error_code::not_found);
  CHECK_THAT(feed.message(), Catch::Contains("ghost"));
  auto target = build_subgraph(sample(), {}, {}, {"phantom"}, sub);
  CHECK(target.code() == error_code::not_found);
  CHECK_THAT(target.message(), Catch::Contains("phantom"));
  auto twice = build_subgraph(sample(), {"c:0", "c"}, {"d:0"}, {}, sub);
  CHECK(twice.code() == error_code::invalid_argument);
}

TEST_CASE("partition: feeding or fetching an output a node lacks is "
          "InvalidArgument",
          "[subgraph][errors]") {
  // Documented in subgraph.hpp for feeds. TensorFlow's FeedInputs and
  // FetchOutputs reject an output index beyond the node's outputs
  // ("FeedInputs: a:1 should have output index < 1"). "a" is a Const (one
  // output).
  subgraph sub;
  auto feed = build_subgraph(sample(), {"a:1"}, {"unused:0"}, {}, sub);
  CHECK(feed.code() == error_code::invalid_argument);
  auto fetch = build_subgraph(sample(), {}, {"a:1"}, {}, sub);
  CHECK(fetch.code() == error_code::invalid_argument);
}

// -- partition ---------------------------------------------------------------------

namespace {

// b lives on dev1 and feeds c and d on dev0 (one pair for both); c feeds
// f on dev1; g on dev1 waits for a on dev0 by a control edge; h on dev1
// reads b on its own device.
graph_def placed_sample() {
  graph_def g;
  g.seed = 3;
  g.nodes.push_back(make("a", "Const", {}, dev0));
  g.nodes.push_back(make("b", "Const", {}, dev1));
  g.nodes.push_back(make("c", "Add", {"a", "b"}, dev0));
  g.nodes.push_back(make("d", "Mul", {"b", "c"}, dev0));
  g.nodes.push_back(make("f", "Neg", {"c"}, dev1));
  g.nodes.push_back(make("g", "NoOp", {"^a"}, dev1));
  g.nodes.push_back(make("h", "Identity", {"b"}, dev1));
  return g;
}

// The Recv in `parts` matching a Send, by rendezvous key.
const node_def* matching_recv(const std::map<std::string, graph_def>& parts,
                              const node_def& send) {
  auto recv_device = send.attr<std::string>("recv_device");
  auto p = parts.find(recv_device);
  if (p == parts.end())
    return nullptr;
  const node_def* found = nullptr;
  for (auto& n : p->second.nodes)
    if (n.op == "_Recv"
        && n.attr<std::string>("tensor_name")
             == send.attr<std::string>("tensor_name")) {
      if (found != nullptr)
        return nullptr; // more than one
      found = &n;
    }
  return found;
}

} // namespace

TEST_CASE("partition: one graph per device, every node on its device",
          "[partition]") {
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(placed_sample(), parts).ok());
  REQUIRE(parts.size() == 2);
  REQUIRE(parts.count(dev0) == 1);
  REQUIRE(parts.count(dev1) == 1);
  for (auto& [device, g] : parts) {
    INFO(device);
    CHECK(g.seed == 3);
    for (auto& n : g.nodes)
      CHECK(n.device == device);
    CHECK(inputs_first(g));
  }
  for (auto name : {"a", "c", "d"})
    CHECK(find(parts[dev0], name) != nullptr);
  for (auto name : {"b", "f", "g", "h"})
    CHECK(find(parts[dev1], name) != nullptr);
}

TEST_CASE("partition: one _Send/_Recv pair per tensor and consumer device",
          "[partition]") {
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(placed_sample(), parts).ok());
  auto& p0 = parts[dev0];
  auto& p1 = parts[dev1];
  // b:0 -> dev0 (for c and d), c:0 -> dev1, ^a -> dev1.
  CHECK(of_op(p1, "_Send").size() == 1);
  CHECK(of_op(p0, "_Recv").size() == 1);
  CHECK(of_op(p0, "_Send").size() == 2);
  CHECK(of_op(p1, "_Recv").size() == 2);
  for (auto& [device, g] : parts)
    for (auto send : of_op(g, "_Send")) {
      INFO(send->name);
      CHECK(send->attr<std::string>("send_device") == device);
      auto recv = matching_recv(parts, *send);
      REQUIRE(recv != nullptr);
      CHECK(recv->attr<std::string>("send_device") == device);
      CHECK(recv->attr<std::string>("recv_device")
            == send->attr<std::string>("recv_device"));
      CHECK(recv->inputs.empty());
    }
  // The pair for b:0 carries the rendezvous key of (dev1, dev0, b:0).
  auto send_b = of_op(p1, "_Send").front();
  CHECK(send_b->inputs == std::vector<std::string>{"b"});
  CHECK(send_b->attr<std::string>("tensor_name")
        == rendezvous_key(dev1, dev0, "b:0"));
  auto recv_b = of_op(p0, "_Recv").front();
  // Both consumers on dev0 read the one Recv.
  CHECK(find(p0, "c")->inputs == std::vector<std::string>{"a", recv_b->name});
  CHECK(find(p0, "d")->inputs
        == std::vector<std::string>{recv_b->name, "c"});
  // The same-device edge b -> h is untouched.
  CHECK(find(p1, "h")->inputs == std::vector<std::string>{"b"});
  CHECK(find(p0, "c")->inputs.front() == "a");
}

TEST_CASE("partition: a control edge across devices becomes a Send/Recv "
          "pair",
          "[partition]") {
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(placed_sample(), parts).ok());
  auto& p0 = parts[dev0];
  auto& p1 = parts[dev1];
  auto g_inputs = find(p1, "g")->inputs;
  REQUIRE(g_inputs.size() == 1);
  auto ref = parse_input(g_inputs[0]);
  CHECK(ref.control);
  auto recv = find(p1, ref.node);
  REQUIRE(recv != nullptr);
  CHECK(recv->op == "_Recv");
  // Its Send on dev0 runs after a.
  const node_def* send = nullptr;
  for (auto s : of_op(p0, "_Send"))
    if (s->attr<std::string>("tensor_name")
        == recv->attr<std::string>("tensor_name"))
      send = s;
  REQUIRE(send != nullptr);
  REQUIRE(send->inputs.size() == 1);
  CHECK(parse_input(send->inputs[0]).node == "a");
  CHECK(parse_input(send->inputs[0]).control);
}

TEST_CASE("partition: a tensor sent to two devices gets two pairs",
          "[partition]") {
  graph_def g;
  g.nodes.push_back(make("x", "Const", {}, dev0));
  g.nodes.push_back(make("y1", "Neg", {"x"}, dev1));
  g.nodes.push_back(make("y2", "Neg", {"x"}, dev2));
  g.nodes.push_back(make("y3", "Square", {"x"}, dev2));
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(g, parts).ok());
  REQUIRE(parts.size() == 3);
  auto sends = of_op(parts[dev0], "_Send");
  REQUIRE(sends.size() == 2);
  std::set<std::string> keys;
  for (auto s : sends) {
    keys.insert(s->attr<std::string>("tensor_name"));
    CHECK(matching_recv(parts, *s) != nullptr);
  }
  CHECK(keys.size() == 2);
  CHECK(keys.count(rendezvous_key(dev0, dev1, "x:0")) == 1);
  CHECK(keys.count(rendezvous_key(dev0, dev2, "x:0")) == 1);
  CHECK(of_op(parts[dev2], "_Recv").size() == 1);
  // Keys differ by every part of the triple.
  CHECK(rendezvous_key(dev0, dev1, "x:0") != rendezvous_key(dev1, dev0, "x:0"));
  CHECK(rendezvous_key(dev0, dev1, "x:0") != rendezvous_key(dev0, dev1, "x:1"));
}

TEST_CASE("partition: a second output of a node is its own tensor",
          "[partition]") {
  graph_def g;
  g.nodes.push_back(make("x", "Const", {}, dev0));
  g.nodes.push_back(make("s", "Split", {"x", "x"}, dev0));
  g.nodes.back().attrs["num_split"] = int64_t{2};
  g.nodes.push_back(make("u", "Add", {"s", "s:1"}, dev1));
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(g, parts).ok());
  auto sends = of_op(parts[dev0], "_Send");
  REQUIRE(sends.size() == 2);
  auto u = find(parts[dev1], "u");
  REQUIRE(u != nullptr);
  REQUIRE(u->inputs.size() == 2);
  CHECK(u->inputs[0] != u->inputs[1]);
  auto r0 = find(parts[dev1], u->inputs[0]);
  auto r1 = find(parts[dev1], u->inputs[1]);
  REQUIRE(r0 != nullptr);
  REQUIRE(r1 != nullptr);
  CHECK(r0->attr<std::string>("tensor_name")
        == rendezvous_key(dev0, dev1, "s:0"));
  CHECK(r1->attr<std::string>("tensor_name")
        == rendezvous_key(dev0, dev1, "s:1"));
}

TEST_CASE("partition: a one-device graph is one partition without "
          "Send/Recv",
          "[partition]") {
  graph_def g;
  g.nodes.push_back(make("a", "Const", {}, dev0));
  g.nodes.push_back(make("b", "Neg", {"a"}, dev0));
  g.nodes.push_back(make("c", "NoOp", {"^b"}, dev0));
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(g, parts).ok());
  REQUIRE(parts.size() == 1);
  auto& only = parts[dev0];
  REQUIRE(only.nodes.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(only.nodes[i].name == g.nodes[i].name);
    CHECK(only.nodes[i].inputs == g.nodes[i].inputs);
  }
}

TEST_CASE("partition: a node without a device is InvalidArgument",
          "[partition][errors]") {
  graph_def g;
  g.nodes.push_back(make("a", "Const", {}, dev0));
  g.nodes.push_back(make("lost", "Neg", {"a"}));
  std::map<std::string, graph_def> parts;
  auto st = partition(g, parts);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("lost"));
}

TEST_CASE("partition: prune, then place by hand, then partition",
          "[subgraph][partition]") {
  // The master's pipeline on a fed placeholder: p is fed, y = p * w with w
  // on dev1, fetched.
  graph_def g;
  g.nodes.push_back(make("p", "Placeholder"));
  g.nodes.push_back(make("w", "Const", {}, dev1));
  g.nodes.push_back(make("y", "Mul", {"p", "w"}, dev0));
  subgraph sub;
  REQUIRE(build_subgraph(g, {"p:0"}, {"y:0"}, {}, sub).ok());
  CHECK(names(sub.def).count("p") == 0);
  for (auto& n : sub.def.nodes)
    if (n.device.empty())
      n.device = dev0;
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(sub.def, parts).ok());
  REQUIRE(parts.size() == 2);
  CHECK(of_op(parts[dev0], "_Arg").size() == 1);
  CHECK(of_op(parts[dev0], "_Retval").size() == 1);
  CHECK(of_op(parts[dev1], "_Send").size() == 1);
  CHECK(find(parts[dev0], "y")->inputs.front() == sub.arg_nodes[0]);
}
