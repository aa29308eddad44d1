#pragma once

// Helpers shared by the test executables of every layer.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/status.hpp"

namespace actorflow::testing {

/// variable_options with just a name (designated initializers would trip
/// -Wmissing-field-initializers on the other members).
inline variable_options named(const std::string& name) {
  variable_options opts;
  opts.name = name;
  return opts;
}

/// The op_error `f` throws, or std::nullopt if it returns normally.
template <class F>
std::optional<op_error> error_of(F&& f) {
  try {
    f();
  } catch (const op_error& e) {
    return e;
  }
  return std::nullopt;
}

/// A node_def by hand, for the placer and partitioner tests.
inline node_def make(std::string name, std::string op,
                     std::vector<std::string> inputs = {},
                     std::string device = {}) {
  node_def n;
  n.name = std::move(name);
  n.op = std::move(op);
  n.inputs = std::move(inputs);
  n.device = std::move(device);
  return n;
}

} // namespace actorflow::testing
