// The control ops: tf.group (one NoOp per device), tf.Assert,
// with_dependencies and tf.Print.

#include "actorflow/graph/ops.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph_scopes.hpp"
#include "op_builders.hpp"

namespace actorflow {

using namespace detail;

namespace {

// A NoOp `name` (unique_name's form) with a control input on each of
// `ops`, once each.
operation grouping_no_op(graph& g, const std::string& name,
                         const std::vector<operation>& ops) {
  auto n = make_node(g.unique_name(name), "NoOp");
  std::set<std::string> seen;
  for (auto& op : ops) {
    auto c = "^" + op.name();
    if (seen.insert(c).second)
      n.inputs.push_back(c);
  }
  return g.add_node(std::move(n), {}, {}, {});
}

} // namespace

operation group(const std::vector<operation>& ops, const std::string& name) {
  graph* g = ops.empty() ? &default_graph() : ops.front().owner();
  // Bucketed by requested device, in the devices' order, as TF's group.
  std::map<std::string, std::vector<operation>> by_device;
  for (auto& op : ops) {
    if (op.owner() != g)
      fail("group: all ops must be from one graph");
    by_device[op.device()].push_back(op);
  }
  auto as_default = g->as_default();
  if (by_device.size() <= 1) {
    device_scope on(by_device.empty() ? "" : by_device.begin()->first);
    return grouping_no_op(*g, name, ops);
  }
  // One NoOp per device ("group_deps/NoOp", "group_deps/NoOp_1", ...),
  // the root "group_deps" depending on them: one control edge per device
  // crosses tasks instead of one per op.
  name_scope scope(name);
  std::vector<operation> per_device;
  for (auto& [dev, dev_ops] : by_device) {
    device_scope on(dev);
    per_device.push_back(grouping_no_op(*g, "NoOp", dev_ops));
  }
  return grouping_no_op(*g, scope.prefix(), per_device);
}

operation assert_(const output& condition, const std::vector<output>& data,
                  int64_t summarize, const std::string& name) {
  auto& g = graph_of(condition);
  if (condition.type() != dtype::bool_
      || !condition.shape().is_compatible_with(tensor_shape{}))
    fail("Assert: the condition of '" + name
         + "' must be a bool scalar, got " + std::string{to_string(
           condition.type())} + " of shape " + condition.shape().to_string());
  auto n = make_node(g.unique_name(name), "Assert");
  n.attrs["summarize"] = summarize;
  std::vector<output> inputs{condition};
  std::vector<dtype> types;
  for (auto& d : data) {
    inputs.push_back(d);
    types.push_back(d.type());
  }
  n.attrs["T"] = types;
  return g.add_node(std::move(n), inputs, {}, {});
}

output with_dependencies(const std::vector<operation>& dependencies,
                         const output& x, const std::string& name) {
  auto& g = graph_of(x);
  auto as_default = g.as_default();
  name_scope scope(name.empty() ? "control_dependency" : name);
  colocate_with near(x);
  control_dependencies after(dependencies);
  // A variable's snapshot ("v/read") is read again after the dependencies:
  // TF's snapshot aliases the variable's buffer, so its value is the one
  // after them; here a read copies, when it runs.
  auto src = x;
  if (x.op().type() == "Identity") {
    auto in = x.op().inputs();
    if (in.size() == 1 && in[0].op().type() == "VariableV2")
      src = in[0];
  }
  return identity(src, scope.prefix());
}

output print(const output& input, const std::vector<output>& data,
             const std::string& message, int64_t first_n, int64_t summarize,
             const std::string& name) {
  auto& g = graph_of(input);
  auto n = make_node(g.unique_name(name), "Print");
  n.attrs["T"] = input.type();
  n.attrs["message"] = message;
  n.attrs["first_n"] = first_n;
  n.attrs["summarize"] = summarize;
  std::vector<output> inputs{input};
  std::vector<dtype> types;
  for (auto& d : data) {
    inputs.push_back(d);
    types.push_back(d.type());
  }
  n.attrs["U"] = types;
  return g.add_node(std::move(n), inputs, {input.type()}, {input.shape()})
    .out(0);
}

} // namespace actorflow
