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

/// Text from outside the process (a peer's node name, a Print message, a
/// certificate's subject, an address) made safe to write into a log line:
/// printable ASCII and valid UTF-8 stay as they are; a backslash becomes
/// `\\`; newline, carriage return and tab `\n`, `\r`, `\t`; every other
/// control character (ESC `\x1b`, DEL `\x7f`, the C1 controls U+0080 to
/// U+009F), the line and paragraph separators, the bidirectional overrides
/// and isolates (U+202A to U+202E, U+2066 to U+2069, U+200E, U+200F,
/// U+061C) and each byte of invalid UTF-8 `\xNN`, one per byte. So an
/// escaped text is one line that cannot move the cursor, recolour the
/// terminal, reorder what follows it or end the log line early, and the
/// original bytes can be read back from it.
std::string log_escape(std::string_view text);

/// Python's int(text) in base 10: surrounding whitespace, an optional
/// sign, digits with single underscores between them. Returns nullopt where
/// Python raises ValueError, or (with `out_of_range` set) where the value
/// does not fit an int32, the proto field type these values go to.
std::optional<int> parse_python_int(std::string_view text, bool& out_of_range);

} // namespace actorflow
