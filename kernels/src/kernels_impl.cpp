#include "kernels_impl.hpp"

#include <algorithm>

namespace actorflow::detail {

std::string slice_debug_string(const tensor_shape& shape, int64_t i) {
  auto& dims = shape.dims();
  if (dims.empty())
    return "";
  std::vector<int64_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = dims[d] == 0 ? 0 : i % dims[d];
    i = dims[d] == 0 ? 0 : i / dims[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d) {
    if (d > 0)
      s += ',';
    s += std::to_string(index[d]);
  }
  return s + "]";
}

status read_index_type(const kernel_context& ctx, const std::string& key,
                       dtype fallback, dtype& out) {
  out = fallback;
  if (auto st = read_attr(ctx, key, out); !st.ok())
    return st;
  if (out != dtype::int32 && out != dtype::int64)
    return invalid_argument("attribute " + key + " of " + ctx.node.op
                            + " must be int32 or int64, got "
                            + std::string{to_string(out)});
  return {};
}

tensor int_vector(dtype type, const std::vector<int64_t>& values) {
  tensor out{type, tensor_shape{static_cast<int64_t>(values.size())}};
  if (type == dtype::int32) {
    auto xs = out.flat<int32_t>();
    for (size_t i = 0; i < values.size(); ++i)
      xs[i] = static_cast<int32_t>(values[i]);
  } else {
    auto xs = out.flat<int64_t>();
    std::copy(values.begin(), values.end(), xs.begin());
  }
  return out;
}

} // namespace actorflow::detail
