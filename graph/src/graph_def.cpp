#include "actorflow/graph/graph_def.hpp"

#include <charconv>

namespace actorflow {

tensor_ref parse_input(std::string_view input) {
  tensor_ref result;
  if (!input.empty() && input.front() == '^') {
    result.node = std::string{input.substr(1)};
    result.index = -1;
    result.control = true;
    return result;
  }
  auto colon = input.rfind(':');
  if (colon != std::string_view::npos) {
    int index = 0;
    auto digits = input.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(digits.data(),
                                     digits.data() + digits.size(), index);
    if (ec == std::errc{} && ptr == digits.data() + digits.size()
        && !digits.empty()) {
      result.node = std::string{input.substr(0, colon)};
      result.index = index;
      return result;
    }
  }
  result.node = std::string{input};
  return result;
}

std::string input_name(std::string_view node, int index) {
  if (index == 0)
    return std::string{node};
  return tensor_name(node, index);
}

std::string tensor_name(std::string_view node, int index) {
  std::string result{node};
  result += ':';
  result += std::to_string(index);
  return result;
}

} // namespace actorflow
