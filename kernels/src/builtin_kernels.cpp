// The one place that knows every built-in kernel family.

#include "actorflow/kernels/kernel.hpp"

#include "kernels_impl.hpp"

namespace actorflow {

void register_builtin_kernels(kernel_registry& registry) {
  detail::register_math_kernels(registry);
  detail::register_array_kernels(registry);
  detail::register_random_kernels(registry);
}

} // namespace actorflow
