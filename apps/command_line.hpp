#pragma once

// The apps' command lines: support::command_line (the flags every program
// takes, declared once with CLI11; support/command_line.hpp) and the
// helpers cluster_flags.hpp and metrics_flags.hpp build on. Errors are
// usage_error (exit status 2) naming the flag at fault.

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "actorflow/support/command_line.hpp"
#include "actorflow/support/flags.hpp"
#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/log.hpp"

namespace actorflow::apps {

namespace log = support::log;
using support::command_line;
using support::usage_error;

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

/// "a,b,c" -> {a, b, c}; empty entries are an error naming `flag`.
inline std::vector<std::string> split_list(const std::string& flag,
                                           const std::string& list) {
  auto items = support::split_list(list);
  for (const auto& item : items)
    if (item.empty())
      throw usage_error(flag + ": empty entry in '" + list + "'");
  return items;
}

} // namespace actorflow::apps
