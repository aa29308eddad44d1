#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actorflow/graph/tensor.hpp"

namespace actorflow {

/// A node attribute, as TensorFlow's AttrValue (the kinds we use).
/// New kinds go at the end: the wire format tags kinds by position.
using attr_value
  = std::variant<int64_t, double, bool, std::string, dtype, tensor_shape,
                 tensor, std::vector<int64_t>, std::vector<std::string>,
                 std::vector<dtype>, std::vector<tensor_shape>>;

/// One node of a graph, as TensorFlow's NodeDef. Inputs are "name",
/// "name:1" (data) or "^name" (control).
struct node_def {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  /// The requested (possibly partial) device; after placement, the full
  /// device name.
  std::string device;
  std::map<std::string, attr_value> attrs;

  /// The attribute `key` as T, or `fallback` if it is absent. Throws
  /// op_error (InvalidArgument) if present with another kind.
  template <class T>
  T attr_or(const std::string& key, T fallback) const {
    auto i = attrs.find(key);
    if (i == attrs.end())
      return fallback;
    if (auto p = std::get_if<T>(&i->second))
      return *p;
    throw op_error(error_code::invalid_argument,
                   "attribute '" + key + "' of node '" + name
                     + "' has the wrong kind");
  }
  /// The attribute `key` as T; op_error (InvalidArgument) if absent.
  template <class T>
  const T& attr(const std::string& key) const {
    auto i = attrs.find(key);
    if (i == attrs.end())
      throw op_error(error_code::invalid_argument,
                     "node '" + name + "' lacks attribute '" + key + "'");
    if (auto p = std::get_if<T>(&i->second))
      return *p;
    throw op_error(error_code::invalid_argument,
                   "attribute '" + key + "' of node '" + name
                     + "' has the wrong kind");
  }
  bool has_attr(const std::string& key) const {
    return attrs.count(key) > 0;
  }
};

/// A graph as a list of nodes (TensorFlow's GraphDef). Node order is
/// creation order; a node's data and control inputs come before it.
struct graph_def {
  std::vector<node_def> nodes;
  /// Graph-level random seed (0 = none), as tf.set_random_seed.
  int64_t seed = 0;
};

/// A parsed input reference: "name:2" -> {name, 2, false}; "^name" ->
/// {name, -1, true}.
struct tensor_ref {
  std::string node;
  int index = 0;
  bool control = false;
};

tensor_ref parse_input(std::string_view input);

/// "name" for index 0, "name:i" otherwise (the form TensorFlow uses in
/// NodeDef inputs).
std::string input_name(std::string_view node, int index);

/// "name:i" always (the form of a tensor's name, e.g. "var:0").
std::string tensor_name(std::string_view node, int index);

} // namespace actorflow
