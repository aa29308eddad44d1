#pragma once

// Helpers for the kernel tests: build a node, run its registered kernel
// directly (so a thrown exception fails the test instead of being converted
// by run_kernel), and compare tensors.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "actorflow/kernels/kernel.hpp"

namespace actorflow::test {

/// What one kernel run produced.
struct run_result {
  status st;
  std::vector<tensor> outputs;
  /// Lines Print wrote through ctx.print.
  std::vector<std::string> printed;

  /// The single output; fails the test unless the run succeeded with
  /// exactly one output.
  const tensor& out() const {
    REQUIRE(st.ok());
    REQUIRE(outputs.size() == 1);
    return outputs[0];
  }
};

/// A node named "n" of op `op` with the given attributes.
inline node_def make_node(std::string op,
                          std::map<std::string, attr_value> attrs = {}) {
  node_def node;
  node.name = "n";
  node.op = std::move(op);
  node.attrs = std::move(attrs);
  return node;
}

/// Runs the registered kernel of `node.op` over `inputs`.
inline run_result run(const node_def& node, std::vector<tensor> inputs,
                      std::mt19937_64* rng = nullptr) {
  auto fn = builtin_kernels().find(node.op);
  REQUIRE(fn != nullptr);
  run_result result;
  kernel_context ctx{node, std::span<const tensor>{inputs}, {}, nullptr, {}};
  ctx.rng = rng;
  ctx.print = [&](const std::string& line) { result.printed.push_back(line); };
  REQUIRE_NOTHROW(result.st = fn(ctx));
  result.outputs = std::move(ctx.outputs);
  if (!result.st.ok())
    CHECK(result.outputs.empty());
  return result;
}

/// Runs `op` without attributes.
inline run_result run(const std::string& op, std::vector<tensor> inputs) {
  return run(make_node(op), std::move(inputs));
}

template <class T>
tensor make(std::vector<T> values, tensor_shape shape) {
  return tensor::from_vector(std::move(values), std::move(shape));
}

template <class T>
std::vector<T> values(const tensor& t) {
  auto xs = t.flat<T>();
  return {xs.begin(), xs.end()};
}

/// Element-wise approximate equality of floating-point values.
template <class T>
bool approx_equal(const std::vector<T>& xs, const std::vector<T>& ys,
                  double eps = 1e-5) {
  if (xs.size() != ys.size())
    return false;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!(xs[i] == Approx(ys[i]).epsilon(eps).margin(eps)))
      return false;
  return true;
}

} // namespace actorflow::test
