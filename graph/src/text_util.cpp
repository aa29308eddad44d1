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

void hex_byte(std::string& out, unsigned char u) {
  static constexpr char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[u >> 4];
  out += digits[u & 0xF];
}

// The length of the valid UTF-8 sequence at text[i] (2 to 4) and its code
// point, or 0 if the bytes there are not one (overlong forms, surrogates
// and code points past U+10FFFF included).
size_t utf8_sequence(std::string_view text, size_t i, char32_t& cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  auto u = byte(i);
  size_t len = 0;
  char32_t min = 0;
  if (u >= 0xC2 && u <= 0xDF) {
    len = 2;
    cp = u & 0x1F;
    min = 0x80;
  } else if (u >= 0xE0 && u <= 0xEF) {
    len = 3;
    cp = u & 0x0F;
    min = 0x800;
  } else if (u >= 0xF0 && u <= 0xF4) {
    len = 4;
    cp = u & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > text.size())
    return 0;
  for (size_t k = 1; k < len; ++k) {
    auto c = byte(i + k);
    if ((c & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

// Code points a terminal or a log viewer acts on instead of showing.
bool unsafe_code_point(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F)                   // C1 controls
         || cp == 0x2028 || cp == 0x2029             // line/para separators
         || (cp >= 0x202A && cp <= 0x202E)           // bidi embeddings
         || (cp >= 0x2066 && cp <= 0x2069)           // bidi isolates
         || cp == 0x200E || cp == 0x200F || cp == 0x061C; // bidi marks
}

} // namespace

std::string log_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto c = text[i];
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      char32_t cp = 0;
      auto len = utf8_sequence(text, i, cp);
      if (len > 0 && !unsafe_code_point(cp)) {
        out.append(text.substr(i, len));
      } else {
        // One escape per byte: of the unsafe code point, or the one
        // invalid byte (what follows it is looked at anew).
        len = len > 0 ? len : 1;
        for (size_t k = 0; k < len; ++k)
          hex_byte(out, static_cast<unsigned char>(text[i + k]));
      }
      i += len;
      continue;
    }
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20 || u == 0x7F)
          hex_byte(out, u);
        else
          out += c;
    }
    ++i;
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
