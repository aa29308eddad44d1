#include "actorflow/graph/subgraph.hpp"

#include <map>
#include <set>
#include <unordered_map>

namespace actorflow {

namespace {

std::string canonical_tensor(const std::string& name) {
  auto ref = parse_input(name);
  return tensor_name(ref.node, ref.index);
}

// "x:0" -> "x_0", for node names derived from tensor names.
std::string flat_name(const std::string& tensor) {
  std::string s = tensor;
  for (auto& c : s)
    if (c == ':' || c == '/')
      c = '_';
  return s;
}

// Outputs of a node of a built-in op (graph_def carries no output list);
// -1 when the op is not one we know.
int64_t num_outputs(const node_def& n) {
  static const std::set<std::string> single{
    "Const", "Placeholder", "Identity", "Print", "Add", "Sub", "Mul",
    "RealDiv", "Div", "Neg", "Square", "Exp", "Log", "Relu", "Sigmoid",
    "Tanh", "MatMul", "Sum", "Mean", "Max", "Min", "Prod", "Any", "All",
    "ConcatV2", "Pack", "Reshape",
    "Cast", "Fill", "RandomStandardNormal", "TruncatedNormal",
    "RandomUniform", "VariableV2", "Assign", "AssignAdd", "AssignSub",
    "IsVariableInitialized", "_Arg", "_Recv", "Floor", "Pow",
    "PlaceholderWithDefault"};
  if (n.op == "NoOp" || n.op == "Assert" || n.op == "_Retval"
      || n.op == "_Send")
    return 0;
  if (n.op == "Split")
    return n.attr_or<int64_t>("num_split", 1);
  return single.count(n.op) > 0 ? 1 : -1;
}

bool lacks_output(const node_def& n, int index) {
  auto count = num_outputs(n);
  return count >= 0 && index >= count;
}

} // namespace

status build_subgraph(const graph_def& g, const std::vector<std::string>& feeds,
                      const std::vector<std::string>& fetches,
                      const std::vector<std::string>& targets, subgraph& out) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    index.emplace(g.nodes[i].name, i);
  // Fed tensors, by canonical name -> feed position.
  std::map<std::string, size_t> fed;
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto ref = parse_input(feeds[i]);
    if (ref.control || index.count(ref.node) == 0)
      return not_found("Feed " + feeds[i] + ": not found in graph; the "
                       "tensor '" + feeds[i] + "' cannot be fed");
    auto& node = g.nodes[index.at(ref.node)];
    if (lacks_output(node, ref.index))
      return invalid_argument("FeedInputs: " + feeds[i]
                              + " should have output index < "
                              + std::to_string(num_outputs(node)));
    auto key = tensor_name(ref.node, ref.index);
    if (!fed.emplace(key, i).second)
      return invalid_argument("Tensor " + key + " is fed more than once");
  }
  std::vector<tensor_ref> fetch_refs;
  for (auto& f : fetches) {
    auto ref = parse_input(f);
    if (ref.control || index.count(ref.node) == 0)
      return not_found("FetchOutputs node " + f + ": not found");
    auto& node = g.nodes[index.at(ref.node)];
    if (lacks_output(node, ref.index))
      return invalid_argument("FetchOutputs: " + f
                              + " should have output index < "
                              + std::to_string(num_outputs(node)));
    fetch_refs.push_back(ref);
  }
  for (auto& t : targets)
    if (index.count(t) == 0)
      return not_found("Target node " + t + ": not found");
  // Walk backwards from fetches and targets, stopping at fed tensors.
  std::vector<bool> needed(g.nodes.size(), false);
  std::vector<size_t> stack;
  auto visit = [&](const std::string& node) {
    auto i = index.at(node);
    if (!needed[i]) {
      needed[i] = true;
      stack.push_back(i);
    }
  };
  for (auto& ref : fetch_refs)
    if (fed.count(tensor_name(ref.node, ref.index)) == 0)
      visit(ref.node);
  for (auto& t : targets)
    visit(t);
  while (!stack.empty()) {
    auto i = stack.back();
    stack.pop_back();
    for (auto& in : g.nodes[i].inputs) {
      auto ref = parse_input(in);
      if (index.count(ref.node) == 0)
        return invalid_argument("Node '" + g.nodes[i].name
                                + "' has an input from unknown node '"
                                + ref.node + "'");
      if (!ref.control && fed.count(tensor_name(ref.node, ref.index)) > 0)
        continue;
      visit(ref.node);
    }
  }
  out = subgraph{};
  out.def.seed = g.seed;
  // _Arg nodes come first so that every node's inputs precede it.
  std::map<std::string, std::string> arg_of;
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto key = canonical_tensor(feeds[i]);
    node_def arg;
    arg.name = "_arg_" + flat_name(key);
    arg.op = "_Arg";
    arg.attrs["index"] = static_cast<int64_t>(i);
    // A placeholder's declared shape, which the master checks every feed
    // against, so that rewrites after placement know the fed shape.
    if (auto ref = parse_input(feeds[i]); ref.index == 0) {
      auto& fed_node = g.nodes[index.at(ref.node)];
      if (fed_node.op == "Placeholder")
        if (auto s = fed_node.attrs.find("shape"); s != fed_node.attrs.end())
          arg.attrs["shape"] = s->second;
    }
    // The feed's device follows its consumers (placer heuristic).
    arg_of[key] = arg.name;
    out.arg_nodes.push_back(arg.name);
    out.def.nodes.push_back(std::move(arg));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!needed[i])
      continue;
    auto node = g.nodes[i];
    for (auto& in : node.inputs) {
      auto ref = parse_input(in);
      if (ref.control)
        continue;
      if (auto j = arg_of.find(tensor_name(ref.node, ref.index));
          j != arg_of.end())
        in = j->second;
    }
    out.def.nodes.push_back(std::move(node));
  }
  for (size_t i = 0; i < fetch_refs.size(); ++i) {
    auto key = tensor_name(fetch_refs[i].node, fetch_refs[i].index);
    node_def ret;
    ret.name = "_retval_" + flat_name(key) + "_" + std::to_string(i);
    ret.op = "_Retval";
    ret.attrs["index"] = static_cast<int64_t>(i);
    if (auto j = arg_of.find(key); j != arg_of.end())
      ret.inputs.push_back(j->second);
    else
      ret.inputs.push_back(input_name(fetch_refs[i].node, fetch_refs[i].index));
    out.retval_nodes.push_back(ret.name);
    out.def.nodes.push_back(std::move(ret));
  }
  return {};
}

} // namespace actorflow
