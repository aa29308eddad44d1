#include "actorflow/support/flags.hpp"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>

#include "actorflow/transport/host_port.hpp"

namespace actorflow::support {

namespace {

/// A strict decimal integer: "1x", "", "+1" and out-of-range values fail.
bool parse_integer(const std::string& text, long long& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                   value);
  return !text.empty() && ec == std::errc{}
         && end == text.data() + text.size();
}

/// A validator that checks without changing the value.
CLI::Validator checking(std::function<std::string(const std::string&)> f) {
  return CLI::Validator{[f = std::move(f)](std::string& text) {
                          return f(text);
                        },
                        ""};
}

} // namespace

CLI::Validator integer_in(long long min, long long max) {
  return checking([min, max](const std::string& text) -> std::string {
    long long value = 0;
    if (!parse_integer(text, value))
      return "expected an integer, got '" + text + "'";
    if (value < min)
      return "must be at least " + std::to_string(min) + ", got " + text;
    if (value > max)
      return "must be at most " + std::to_string(max) + ", got " + text;
    return {};
  });
}

CLI::Validator positive_number() {
  return checking([](const std::string& text) -> std::string {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                     value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()
        || !std::isfinite(value))
      return "expected a number, got '" + text + "'";
    if (value <= 0)
      return "must be positive, got " + text;
    return {};
  });
}

namespace {

CLI::Validator number_bounded(double bound, bool inclusive) {
  return checking([bound, inclusive](const std::string& text) -> std::string {
    double value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    if (inclusive ? value > bound : value >= bound) {
      std::ostringstream os;
      os << "must be " << (inclusive ? "at most " : "below ") << bound
         << ", got " << text;
      return os.str();
    }
    return {};
  });
}

} // namespace

CLI::Validator number_below(double bound) {
  return number_bounded(bound, false);
}

CLI::Validator number_at_most(double bound) {
  return number_bounded(bound, true);
}

CLI::Validator one_of(std::vector<std::string> choices) {
  return checking([choices = std::move(choices)](const std::string& text) {
    for (const auto& choice : choices)
      if (text == choice)
        return std::string{};
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i)
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ")
              + choices[i];
    return "expected " + list + ", got '" + text + "'";
  });
}

CLI::Validator port_number() {
  return checking([](const std::string& text) -> std::string {
    long long value = 0;
    if (!parse_integer(text, value) || value < 0 || value > 65535)
      return "expected a port number, got '" + text + "'";
    return {};
  });
}

CLI::Validator process_id() {
  return checking([](const std::string& text) -> std::string {
    long long value = 0;
    if (!parse_integer(text, value) || value <= 1
        || value > std::numeric_limits<pid_t>::max())
      return "expected a process id, got '" + text + "'";
    return {};
  });
}

CLI::Validator task_index() {
  return checking([](const std::string& text) -> std::string {
    long long value = 0;
    if (!parse_integer(text, value) || value < 0 || value > 1'000'000)
      return "expected a task index, got '" + text + "'";
    return {};
  });
}

CLI::Validator host_port_address() {
  return checking([](const std::string& text) -> std::string {
    host_port parsed;
    if (auto st = host_port::parse(text, parsed); !st.ok())
      return "expected HOST:PORT: " + st.message();
    return {};
  });
}

CLI::Validator list_of(CLI::Validator item, size_t count) {
  return checking([item, count](const std::string& text) -> std::string {
    size_t entries = 0;
    size_t begin = 0;
    for (;;) {
      auto comma = text.find(',', begin);
      auto entry = text.substr(begin, comma == std::string::npos
                                        ? std::string::npos
                                        : comma - begin);
      if (entry.empty())
        return "empty entry in '" + text + "'";
      if (auto why = item(entry); !why.empty())
        return why;
      ++entries;
      if (comma == std::string::npos)
        break;
      begin = comma + 1;
    }
    if (count != 0 && entries != count)
      return "expected " + std::to_string(count)
             + " comma-separated entries, got '" + text + "'";
    return {};
  });
}

CLI::Validator non_empty() {
  return checking([](const std::string& text) -> std::string {
    return text.empty() ? "empty" : "";
  });
}

std::optional<uint64_t> parse_byte_size(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                   value);
  if (end == text.data() || ec != std::errc{})
    return std::nullopt;
  std::string suffix{end, text.data() + text.size()};
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix.front()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift > 0)
      suffix.erase(0, 1);
    if (!(suffix.empty() || suffix == "B" || (shift > 0 && suffix == "iB")))
      return std::nullopt;
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift))
    return std::nullopt;
  return value << shift;
}

CLI::Validator byte_size() {
  return CLI::Validator{[](std::string& text) -> std::string {
                          auto bytes = parse_byte_size(text);
                          if (!bytes)
                            return "expected a size in bytes such as 3G, "
                                   "512M or 1048576, got '"
                                   + text + "'";
                          text = std::to_string(*bytes);
                          return {};
                        },
                        ""};
}

CLI::Validator executable_file() {
  return checking([](const std::string& text) -> std::string {
    if (::access(text.c_str(), X_OK) != 0)
      return text + ": not an executable file";
    return {};
  });
}

namespace {

/// CLI11 2.1 leaves a flag's text on one line however long it is.
class wrapping_formatter : public CLI::Formatter {
public:
  std::string make_option_desc(const CLI::Option* opt) const override {
    constexpr size_t line_width = 79;
    auto width = line_width - get_column_width();
    std::string result;
    size_t line = 0;
    std::istringstream words{opt->get_description()};
    for (std::string word; words >> word;) {
      if (line > 0 && line + 1 + word.size() > width) {
        result += '\n';
        line = 0;
      } else if (line > 0) {
        result += ' ';
        ++line;
      }
      result += word;
      line += word.size();
    }
    return result;
  }
};

} // namespace

std::shared_ptr<CLI::Formatter> help_formatter() {
  return std::make_shared<wrapping_formatter>();
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> result;
  size_t begin = 0;
  for (;;) {
    auto comma = list.find(',', begin);
    result.push_back(list.substr(begin, comma == std::string::npos
                                          ? std::string::npos
                                          : comma - begin));
    if (comma == std::string::npos)
      return result;
    begin = comma + 1;
  }
}

usage_error usage_error_of(const CLI::ParseError& e, const CLI::App& app) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    auto extras = app.remaining();
    if (!extras.empty()) {
      const auto& first = extras.front();
      if (first.starts_with("-"))
        return usage_error("unknown flag '" + first + "'");
      return usage_error("unexpected argument '" + first + "'");
    }
  }
  // CLI11 says "--seed: At Most 1 required but received 2" and "--seed: 1
  // required N missing"; a validator's message comes as "--seed: ...".
  auto colon = what.find(':');
  auto name = what.substr(0, colon);
  if (colon != std::string::npos && name.starts_with("-")
      && dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (what.find("At Most") != std::string::npos)
      return usage_error(name + " given twice");
    if (what.find("missing") != std::string::npos)
      return usage_error(name + " needs a value");
  }
  return usage_error(what);
}

bool parse_flags(CLI::App& app, std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view arg{args[i]};
    auto eq = arg.find('=');
    if (!arg.starts_with("--") || eq == std::string_view::npos)
      continue;
    std::string name{arg.substr(0, eq)};
    for (const auto* opt : app.get_options())
      if (opt->get_expected_max() == 0 && opt->check_name(name))
        throw usage_error(name + " takes no value");
  }
  // CLI11 takes the arguments without the program's name, last first.
  std::vector<std::string> reversed;
  if (!args.empty())
    reversed.assign(args.rbegin(), args.rend() - 1);
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help() << std::flush;
    return false;
  } catch (const CLI::ParseError& e) {
    throw usage_error_of(e, app);
  }
  return true;
}

} // namespace actorflow::support
