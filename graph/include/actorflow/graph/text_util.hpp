#pragma once

#include <optional>
#include <string>
#include <string_view>

/// Text conventions borrowed from TensorFlow's Python side, shared by the
/// layers that print or parse what Python would.
namespace actorflow {

/// Protobuf's CEscape (text format, as_utf8 off): C escapes for newline,
/// carriage return, tab, quotes and backslash, and octal escapes for everything outside printable ASCII.
std::string c_escape(std::string_view text);

/// Python's int(text) in base 10: surrounding whitespace, an optional
/// sign, digits with single underscores between them. Returns nullopt where
/// Python raises ValueError, or (with `out_of_range` set) where the value
/// does not fit an int32, the proto field type these values go to.
std::optional<int> parse_python_int(std::string_view text, bool& out_of_range);

} // namespace actorflow
