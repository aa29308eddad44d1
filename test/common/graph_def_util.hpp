#pragma once

// Queries on a graph_def for the tests of graph rewrites (partitioning,
// matmul_pipelining).

#include <set>
#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"

namespace actorflow::testing {

/// The node called `name`, or nullptr.
inline const node_def* find(const graph_def& g, const std::string& name) {
  for (auto& n : g.nodes)
    if (n.name == name)
      return &n;
  return nullptr;
}

/// The nodes running `op`, in graph order.
inline std::vector<const node_def*> of_op(const graph_def& g,
                                          const std::string& op) {
  std::vector<const node_def*> result;
  for (auto& n : g.nodes)
    if (n.op == op)
      result.push_back(&n);
  return result;
}

/// Whether every input names a node that comes earlier.
inline bool inputs_first(const graph_def& g) {
  std::set<std::string> seen;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (seen.count(parse_input(in).node) == 0)
        return false;
    seen.insert(n.name);
  }
  return true;
}

} // namespace actorflow::testing
