#pragma once

#include <string>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow {

/// The nodes one step needs, with feeds and fetches made explicit.
struct subgraph {
  /// Pruned nodes in a valid (inputs-first) order. Every fed tensor's uses
  /// are rewired to an `_Arg` node (attr `index` = position in `feeds`;
  /// attr `shape` = a fed placeholder's declared shape, which feeds are
  /// checked against),
  /// and every fetch gets a `_Retval` node (attr `index` = position in
  /// `fetches`).
  graph_def def;
  /// For each feed, the name of its `_Arg` node; for each fetch, of its
  /// `_Retval` node.
  std::vector<std::string> arg_nodes;
  std::vector<std::string> retval_nodes;
};

/// Prunes `g` to what `fetches` (tensor names "n:i" or "n") and `targets`
/// (node names) need, cutting at `feeds` (tensor names). Errors:
/// NotFound naming an unknown fetch, feed or target; InvalidArgument for a
/// tensor fed twice or a feed on a node without that output.
status build_subgraph(const graph_def& g, const std::vector<std::string>& feeds,
                      const std::vector<std::string>& fetches,
                      const std::vector<std::string>& targets, subgraph& out);

} // namespace actorflow
