#include "actorflow/graph/text_util.hpp"

#include <charconv>
#include <climits>
#include <cstdio>

namespace actorflow {

std::string c_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\'':
        out += "\\'";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (u < 32 || u >= 127) {
          char buf[5];
          std::snprintf(buf, sizeof(buf), "\\%03o", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

} // namespace

std::optional<int> parse_python_int(std::string_view text,
                                    bool& out_of_range) {
  out_of_range = false;
  auto s = text;
  while (!s.empty() && is_py_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_py_space(s.back()))
    s.remove_suffix(1);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || !is_digit(s.front()) || !is_digit(s.back()))
    return std::nullopt;
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (is_digit(s[i]))
      digits.push_back(s[i]);
    else if (s[i] != '_' || s[i - 1] == '_')
      return std::nullopt;
  }
  long long value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(),
                                   digits.data() + digits.size(), value);
  if (ec != std::errc{} || value > INT_MAX) {
    out_of_range = true;
    return std::nullopt;
  }
  return static_cast<int>(negative ? -value : value);
}

} // namespace actorflow
