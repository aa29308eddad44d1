#pragma once

// Helpers shared by the test executables of every layer.

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/device_name.hpp"
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

/// Requires that `err` is an InvalidArgument whose message contains
/// `fragment`.
inline void check_invalid(const std::optional<op_error>& err,
                          const std::string& fragment) {
  INFO(fragment);
  REQUIRE(err.has_value());
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(), Catch::Contains(fragment));
}

/// Applies nested `tf.device(string)` scopes, listed outermost first, to a
/// fresh op, as tf.device does: functions run innermost to outermost and
/// each one is `copy(scope).merge_from(op.device)`, so the op's device so
/// far wins.
inline std::string apply_scopes(const std::vector<std::string>& scopes) {
  std::string device;
  for (auto i = scopes.rbegin(); i != scopes.rend(); ++i) {
    device_name scope;
    REQUIRE(device_name::parse_spec(*i, scope).ok());
    device_name current;
    REQUIRE(device_name::parse_spec(device, current).ok());
    scope.merge_from(current);
    device = scope.to_string();
  }
  return device;
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
