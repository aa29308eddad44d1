#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

namespace actorflow {

/// What a synchronous kernel sees while it computes one node.
struct kernel_context {
  /// The node being computed (its op, attributes and name).
  const node_def& node;
  /// The node's data inputs, dereferenced (never refs).
  std::span<const tensor> inputs;
  /// Filled by the kernel: one tensor per output of the node.
  std::vector<tensor> outputs;
  /// The node's own random generator (random ops), seeded by the executor
  /// from the graph and op seeds; never null for random ops.
  std::mt19937_64* rng = nullptr;
  /// Where Print writes its line ("message[values]..."); stderr if empty.
  std::function<void(const std::string&)> print;
  /// How many times this node ran before, counted by the executor that
  /// keeps it across steps (Print's `first_n`), or null: then every run
  /// counts as the first.
  int64_t* runs = nullptr;
};

/// A synchronous compute function: reads `ctx.inputs`, fills
/// `ctx.outputs`, and returns InvalidArgument (naming the node) on bad
/// input. Never throws for bad input; never blocks.
using compute_fn = status (*)(kernel_context& ctx);

/// The registry of synchronous kernels, by op type ("Add", "MatMul", ...).
/// Stateful and waiting ops (variables, Send/Recv, placeholders) are run by
/// the executor in actors/, not here.
class kernel_registry {
public:
  void add(std::string op, compute_fn fn);
  /// The kernel for `op`, or nullptr.
  compute_fn find(const std::string& op) const;
  bool contains(const std::string& op) const {
    return find(op) != nullptr;
  }
  std::vector<std::string> ops() const;

private:
  std::unordered_map<std::string, compute_fn> fns_;
};

/// Adds every built-in kernel to `registry` (explicit; no static
/// initializers).
void register_builtin_kernels(kernel_registry& registry);

/// A registry filled with the built-in kernels once, on first use.
const kernel_registry& builtin_kernels();

/// Runs `ctx.node` with the built-in kernel for its op. Unimplemented if
/// none exists; any exception from a kernel becomes an Internal status
/// (InvalidArgument for op_error) naming the node.
status run_kernel(kernel_context& ctx);

/// Runs `ctx.node` with `fn`, a kernel looked up beforehand (the executor
/// finds each node's once, when its partition is registered), with the
/// same errors as run_kernel.
status run_kernel(compute_fn fn, kernel_context& ctx);

} // namespace actorflow
