// The one place that knows every built-in kernel family.

#include "actorflow/kernels/kernel.hpp"

#include "kernels_impl.hpp"

namespace actorflow {

/// DecodeCSV and DecodeRaw (decode_kernels.cpp).
void register_decode_kernels(kernel_registry& registry);

void register_builtin_kernels(kernel_registry& registry) {
  detail::register_math_kernels(registry);
  detail::register_array_kernels(registry);
  detail::register_random_kernels(registry);
  detail::register_nn_kernels(registry);
  detail::register_logging_kernels(registry);
  detail::register_conv_kernels(registry);
  register_decode_kernels(registry);
}

} // namespace actorflow
