#include "actorflow/kernels/kernel.hpp"

#include <algorithm>
#include <exception>
#include <iostream>

namespace actorflow {

void kernel_registry::add(std::string op, compute_fn fn) {
  fns_[std::move(op)] = fn;
}

compute_fn kernel_registry::find(const std::string& op) const {
  auto i = fns_.find(op);
  return i == fns_.end() ? nullptr : i->second;
}

std::vector<std::string> kernel_registry::ops() const {
  std::vector<std::string> result;
  for (auto& kvp : fns_)
    result.push_back(kvp.first);
  std::sort(result.begin(), result.end());
  return result;
}

const kernel_registry& builtin_kernels() {
  static const kernel_registry instance = [] {
    kernel_registry r;
    register_builtin_kernels(r);
    return r;
  }();
  return instance;
}

status run_kernel(kernel_context& ctx) {
  auto fn = builtin_kernels().find(ctx.node.op);
  if (fn == nullptr)
    return unimplemented("No kernel registered for op '" + ctx.node.op
                         + "' (node '" + ctx.node.name + "')");
  return run_kernel(fn, ctx);
}

status run_kernel(compute_fn fn, kernel_context& ctx) {
  try {
    return fn(ctx);
  } catch (const op_error& e) {
    auto& st = e.get_status();
    return {st.code(), st.message() + " [[node " + ctx.node.name + "]]"};
  } catch (const std::exception& e) {
    return internal_error(std::string{e.what()} + " [[node " + ctx.node.name
                          + "]]");
  }
}

} // namespace actorflow
