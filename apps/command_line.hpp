#pragma once

// The apps' command lines: support::command_line (the flags every program
// takes, declared once with CLI11; support/command_line.hpp), and for
// actorflow-bench, which walks its flags one by one, flag_reader on top of
// it. Errors are usage_error (exit status 2) naming the flag at fault.

#include <algorithm>
#include <charconv>
#include <deque>
#include <map>
#include <optional>
#include <ostream>
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

/// What a program's --help says about the flags every program takes, for
/// a program that writes its own help (`std::cout << usage << common_usage`);
/// CLI11 writes it from their declarations.
struct common_usage_text {};
inline constexpr common_usage_text common_usage{};

inline std::ostream& operator<<(std::ostream& out, common_usage_text) {
  return out << "\n" << support::common_flags::help();
}

/// A flag flag_reader takes: its names ("--job_name,--job": the first is
/// the one `flag_reader::name` reports) and whether it takes a value.
struct flag_spec {
  std::string names;
  bool takes_value = true;
};

/// A command line (with the common flags and --config-file, as
/// command_line parses it) walked flag by flag, for a program that
/// declares its flags as names and reads each value as text:
///
/// ~~~
/// flag_reader flags{argc, argv, {{"--quick", false}, {"--only"}}};
/// apply_common(flags, "actorflow-bench");
/// while (flags.next())
///   if (flags.name() == "--quick") { flags.no_value(); quick = true; }
///   else if (flags.name() == "--only") only = flags.value();
/// ~~~
///
/// "--help" (or "-h") comes back as a flag. Flags come back in
/// command-line order, then those only the file gave. Errors as
/// command_line::parse.
class flag_reader {
public:
  flag_reader(int argc, char** argv, const std::vector<flag_spec>& flags)
    : cl_(argc > 0 ? argv[0] : "", "") {
    auto& app = cl_.app();
    // The program writes its own help: --help is one of its flags.
    app.set_help_flag();
    auto add = [&](const std::string& names, bool takes_value) {
      values_.emplace_back();
      if (takes_value)
        app.add_option(names, values_.back());
      else
        switch_of_[app.add_flag(names, switches_[names])] = &switches_[names];
    };
    add("-h,--help", false);
    for (const auto& f : flags)
      add(f.names, f.takes_value);
    cl_.parse(argc, argv);
    std::vector<CLI::Option*> ours;
    for (auto* opt : app.get_options())
      if (opt->get_group() != "Configuration" && opt->get_group() != "TLS")
        ours.push_back(opt);
    // Command-line order, then what only the file set.
    for (auto* opt : app.parse_order())
      take(opt, ours);
    for (auto* opt : ours)
      if (opt->count() > 0)
        take(opt, ours);
  }

  flag_reader(const flag_reader&) = delete;
  flag_reader& operator=(const flag_reader&) = delete;

  /// Moves to the next flag given; false after the last one.
  bool next() {
    if (++i_ >= static_cast<int>(given_.size()))
      return false;
    name_ = given_[static_cast<size_t>(i_)]->get_name();
    if (name_ == "-h")
      name_ = "--help";
    return true;
  }

  /// The current flag's first name, e.g. "--seed" ("--help" for -h).
  const std::string& name() const noexcept {
    return name_;
  }

  /// Its value.
  std::string value() const {
    return given_[static_cast<size_t>(i_)]->as<std::string>();
  }

  /// For a switch: nothing to read (CLI11 checked it).
  void no_value() const {
    // nop
  }

  /// The command line's common flags, for apply_common.
  const command_line& common() const noexcept {
    return cl_;
  }

private:
  void take(CLI::Option* opt, const std::vector<CLI::Option*>& ours) {
    if (std::find(ours.begin(), ours.end(), opt) == ours.end())
      return;
    // "sync = false" in the file: not given.
    if (auto i = switch_of_.find(opt); i != switch_of_.end() && !*i->second)
      return;
    if (std::find(given_.begin(), given_.end(), opt) == given_.end())
      given_.push_back(opt);
  }

  command_line cl_;
  // Stable addresses: CLI11 keeps pointers to them.
  std::deque<std::string> values_;
  std::map<std::string, bool> switches_;
  std::map<CLI::Option*, bool*> switch_of_;
  std::vector<CLI::Option*> given_;
  int i_ = -1;
  std::string name_;
};

/// Applies what every program takes (command_line::apply) for a program
/// that reads its flags with flag_reader; sets up `program`'s log.
inline void apply_common(const flag_reader& flags, const std::string& program) {
  flags.common().apply(program);
}

} // namespace actorflow::apps
