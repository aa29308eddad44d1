#pragma once

// Command lines of the apps: "--name value", "--name=value", "--flag";
// errors are usage_error (exit status 2) naming the flag at fault.

#include <charconv>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow::apps {

/// A bad command line or configuration (exit status 2).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A strict non-negative decimal integer: "1x", "-1", "" and "+1" fail.
inline std::optional<long long> parse_index(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                   value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0
      || text.empty())
    return std::nullopt;
  return value;
}

/// "a,b,c" -> {a, b, c}; empty entries are an error naming the flag.
inline std::vector<std::string> split_list(const std::string& flag,
                                           const std::string& list) {
  std::vector<std::string> result;
  size_t begin = 0;
  for (;;) {
    auto comma = list.find(',', begin);
    auto item = list.substr(begin, comma == std::string::npos
                                     ? std::string::npos
                                     : comma - begin);
    if (item.empty())
      throw usage_error(flag + ": empty entry in '" + list + "'");
    result.push_back(item);
    if (comma == std::string::npos)
      return result;
    begin = comma + 1;
  }
}

/// Walks a command line flag by flag:
///
/// ~~~
/// flag_reader flags{argc, argv};
/// while (flags.next())
///   if (flags.name() == "--quick") { flags.no_value(); quick = true; }
///   else if (flags.name() == "--only") only = flags.value();
/// ~~~
///
/// "--help" and "-h" both come back as "--help"; any other argument that
/// does not start with "--" is a usage_error ("unexpected argument 'x'").
class flag_reader {
public:
  flag_reader(int argc, char** argv) : argc_(argc), argv_(argv) {
    // nop
  }

  /// Moves to the next flag; false after the last one.
  bool next() {
    if (++i_ >= argc_)
      return false;
    std::string_view arg{argv_[i_]};
    inline_value_.reset();
    if (arg == "--help" || arg == "-h") {
      name_ = "--help";
      return true;
    }
    if (!arg.starts_with("--"))
      throw usage_error("unexpected argument '" + std::string{arg} + "'");
    auto eq = arg.find('=');
    name_ = std::string{arg.substr(0, eq)};
    if (eq != std::string_view::npos)
      inline_value_ = std::string{arg.substr(eq + 1)};
    return true;
  }

  /// The current flag's name, e.g. "--seed".
  const std::string& name() const noexcept {
    return name_;
  }

  /// Its value: after '=', else the next argument (consumed).
  std::string value() {
    if (inline_value_)
      return *inline_value_;
    if (i_ + 1 < argc_)
      return argv_[++i_];
    throw usage_error(name_ + " needs a value");
  }

  /// For a switch: a usage_error if it was given "=value".
  void no_value() const {
    if (inline_value_)
      throw usage_error(name_ + " takes no value");
  }

private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string name_;
  std::optional<std::string> inline_value_;
};

} // namespace actorflow::apps
