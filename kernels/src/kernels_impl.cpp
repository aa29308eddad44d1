#include "kernels_impl.hpp"

#include <algorithm>

namespace actorflow::detail {

status arity_error(const kernel_context& ctx, size_t n, bool at_least) {
  return invalid_argument(ctx.node.op
                          + (at_least ? " expects at least " : " expects ")
                          + std::to_string(n) + " input(s), got "
                          + std::to_string(ctx.inputs.size()));
}

status type_attr_error(const kernel_context& ctx, const std::string& key,
                       dtype declared, dtype actual) {
  return invalid_argument("attribute " + key + " of " + ctx.node.op + " is "
                          + std::string{to_string(declared)}
                          + " but the input is "
                          + std::string{to_string(actual)});
}

status input_type_error(const kernel_context& ctx, size_t i, dtype want) {
  return invalid_argument("cannot compute " + ctx.node.op + " as input #"
                          + std::to_string(i)
                          + "(zero-based) was expected to be a "
                          + std::string{to_string(want)} + " tensor but is a "
                          + std::string{to_string(ctx.inputs[i].type())}
                          + " tensor");
}

status list_length_error(const kernel_context& ctx, int64_t n, size_t count,
                         const char* noun) {
  return invalid_argument("attribute N of " + ctx.node.op + " is "
                          + std::to_string(n) + " but it has "
                          + std::to_string(count) + " " + noun);
}

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
