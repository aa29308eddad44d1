#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"

namespace actorflow {

/// The scope stacks of one graph (private to graph/).
struct graph::scope_state {
  /// Device functions, outermost first; std::nullopt is TF's
  /// `tf.device(None)` and hides everything outside it.
  std::vector<std::optional<device_function>> devices;

  /// One `control_dependencies` block: its ops, whether it clears the
  /// outer blocks, and the nodes created while it was open (to find
  /// "dominated" blocks as TensorFlow does).
  struct control_frame {
    std::vector<int> ops;
    bool clear = false;
    std::set<int> created;
  };
  std::vector<control_frame> controls;

  /// Name-scope prefixes ("", "layer1/", ...), outermost first.
  std::vector<std::string> names;
  std::vector<std::string> containers;
  std::vector<operation> colocation;
  /// Device stacks saved while a colocate_with block is open.
  std::vector<std::vector<std::optional<device_function>>> saved_devices;

  std::string name_prefix() const {
    return names.empty() ? std::string{} : names.back();
  }

  /// The frames in force: from the last clearing frame to the innermost.
  size_t first_active_frame() const {
    for (size_t i = controls.size(); i > 0; --i)
      if (controls[i - 1].clear)
        return i - 1;
    return 0;
  }

  /// Control inputs for a new node whose data inputs are `data_nodes`,
  /// skipping frames in which one of those inputs was created.
  std::vector<int> active_control_inputs(const std::set<int>& data_nodes) const {
    std::vector<int> result;
    std::set<int> seen;
    for (size_t i = first_active_frame(); i < controls.size(); ++i) {
      auto& frame = controls[i];
      bool dominated = false;
      for (auto n : data_nodes)
        if (frame.created.count(n) > 0)
          dominated = true;
      if (dominated)
        continue;
      for (auto op : frame.ops)
        if (seen.insert(op).second)
          result.push_back(op);
    }
    return result;
  }

  void record_created(int index) {
    for (size_t i = first_active_frame(); i < controls.size(); ++i)
      controls[i].created.insert(index);
  }
};

/// Opens exactly `prefix` as the name scope (no uniquifying), for the
/// inner nodes of an op whose own name is already chosen.
struct exact_name_scope {
  exact_name_scope(graph& g, std::string prefix) : g_(g) {
    g_.scopes().names.push_back(std::move(prefix));
  }
  ~exact_name_scope() {
    g_.scopes().names.pop_back();
  }
  exact_name_scope(const exact_name_scope&) = delete;
  exact_name_scope& operator=(const exact_name_scope&) = delete;
  graph& g_;
};

inline node_def make_node(std::string name, std::string op) {
  node_def n;
  n.name = std::move(name);
  n.op = std::move(op);
  return n;
}

/// Graph-building errors are InvalidArgument (TF's ValueError/TypeError).
[[noreturn]] inline void fail(const std::string& msg) {
  throw op_error(error_code::invalid_argument, msg);
}

} // namespace actorflow
