#pragma once

// Command lines of the apps: "--name value", "--name=value", "--flag",
// parsed with CLI11, an INI file (--config-file) and CAF's own options;
// errors are usage_error (exit status 2) naming the flag at fault.

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actorflow/graph/status.hpp"
#include "actorflow/client/runtime.hpp"
#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/log.hpp"

namespace actorflow::apps {

namespace log = support::log;
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

/// What every app's --help says about the flags flag_reader adds.
inline constexpr const char* common_usage = R"(
Configuration (every actorflow program):
  --config-file FILE   an INI file: its [actorflow] section sets these
                       flags (train_steps = 2000, model = "mlp",
                       sync = true; the command line wins), its other
                       sections are CAF's ([scheduler], [middleman], ...)
  --caf.NAME=VALUE     one of CAF's options, e.g.
                       --caf.scheduler.max-threads=2
  --log_level LEVEL    trace, debug, info, warning, error or off (default
                       info)

TLS (every connection between processes; off unless a file is given):
  --tls_cert FILE      this process's PEM certificate (chain)
  --tls_key FILE       its private key (PEM)
  --tls_key_passphrase TEXT   the key's passphrase, if it is encrypted
  --tls_ca FILE        the CA certificate(s) that sign every peer
  --tls_allowed_peers NAMES   certificate names accepted from connecting
                       processes besides the cluster's hosts (default
                       client; "" for none)
  --tls_handshake_timeout_ms MS   drop a connection whose TCP connect or
                       TLS handshake takes longer (default 10000)
  TF_CONFIG's "tls" object takes the same fields without "tls_" ("cert",
  "key", "key_passphrase", "ca", "allowed_peers" as a list); flags win.
)";

/// The common TLS flags (tls_config's fields).
inline const std::vector<std::string>& tls_flag_names() {
  static const std::vector<std::string> names{
    "--tls_cert",          "--tls_key",           "--tls_key_passphrase",
    "--tls_ca",            "--tls_allowed_peers", "--tls_handshake_timeout_ms"};
  return names;
}

/// A flag an app takes: its names ("--job_name,--job": the first is the
/// one `flag_reader::name` reports) and whether it takes a value.
struct flag_spec {
  std::string names;
  bool takes_value = true;
};

/// An app's command line and configuration file, parsed with CLI11
/// (Debian's libcli11-dev), then walked flag by flag:
///
/// ~~~
/// flag_reader flags{argc, argv, {{"--quick", false}, {"--only"}}};
/// while (flags.next())
///   if (flags.name() == "--quick") { flags.no_value(); quick = true; }
///   else if (flags.name() == "--only") only = flags.value();
/// ~~~
///
/// Syntax: "--name value", "--name=value", "--switch"; "--help" or "-h".
/// Besides the app's flags, every app takes:
/// - `--config-file FILE`: an INI file (';' comments, and lines starting
///   with '#'). Its [actorflow] section holds the
///   app's flags (`train_steps = 2000`, `model = "mlp"`, `sync = true`;
///   the command line wins); its other sections are CAF's ([scheduler],
///   [middleman], ..., also spelled [caf.scheduler]).
/// - `--caf.<option>=<value>`: one of CAF's options
///   (`--caf.scheduler.max-threads=2`), given to the process-wide actor
///   system (apply_common) as CAF 0.17 spells it ("--scheduler.max-threads=2").
/// - `--log_level LEVEL` (log.hpp).
/// Flags come back in command-line order, then those only the file gave.
/// Errors are usage_error naming the flag: an unknown flag, a flag given
/// twice, a missing value, an unknown key in [actorflow], a file that
/// cannot be read.
class flag_reader {
public:
  flag_reader(int argc, char** argv, const std::vector<flag_spec>& flags)
    : app_("", argc > 0 ? argv[0] : "") {
    app_.set_help_flag();
    app_.allow_config_extras(CLI::config_extras_mode::error);
    // INI, as CAF reads it: ';' comments (and '#' lines).
    app_.config_formatter(std::make_shared<CLI::ConfigINI>());
    std::vector<const char*> args{argc > 0 ? argv[0] : ""};
    for (int i = 1; i < argc; ++i) {
      std::string_view arg{argv[i]};
      if (arg.starts_with("--caf.")) {
        auto eq = arg.find('=');
        if (eq == std::string_view::npos)
          throw usage_error(std::string{arg}
                            + ": CAF's options are given as "
                              "--caf.<option>=<value>");
        caf_args.push_back("--" + std::string{arg.substr(6)});
        common_.push_back(std::string{arg});
      } else {
        args.push_back(argv[i]);
      }
    }
    auto add = [&](const std::string& names, bool takes_value) {
      values_.emplace_back();
      if (takes_value)
        app_.add_option(names, values_.back())
          ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
      else
        switch_of_[app_.add_flag(names, switches_[names])
                     ->multi_option_policy(CLI::MultiOptionPolicy::Throw)]
          = &switches_[names];
    };
    // A switch takes no value on the command line (CLI11 would read
    // "--quick=0" as off); in the file, "quick = false" is fine.
    for (const auto& f : flags) {
      if (f.takes_value)
        continue;
      for (const auto& arg : args) {
        std::string_view a{arg};
        auto eq = a.find('=');
        if (eq == std::string_view::npos)
          continue;
        auto name = std::string{a.substr(0, eq)};
        if (("," + f.names + ",").find("," + name + ",") != std::string::npos)
          throw usage_error(name + " takes no value");
      }
    }
    add("-h,--help", false);
    add("--config-file", true);
    add("--log_level", true);
    for (const auto& name : tls_flag_names())
      add(name, true);
    for (const auto& f : flags)
      add(f.names, f.takes_value);
    try {
      app_.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
      throw translate(e);
    }
    if (auto* f = app_.get_option("--config-file"); f->count() > 0) {
      config_file = f->as<std::string>();
      read_config_file();
    }
    if (auto* l = app_.get_option("--log_level"); l->count() > 0) {
      log_level = l->as<std::string>();
      common_.push_back("--log_level=" + log_level);
    }
    for (const auto& name : tls_flag_names())
      if (auto* t = app_.get_option(name); t->count() > 0) {
        tls_flags[name] = t->as<std::string>();
        common_.push_back(name + "=" + tls_flags[name]);
      }
    // Command-line order, then what only the file set.
    for (auto* opt : app_.parse_order())
      take(opt);
    for (auto* opt : app_.get_options())
      if (opt->count() > 0)
        take(opt);
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

  /// --config-file as given.
  std::optional<std::string> config_file;
  /// --log_level as given (default info).
  std::string log_level = "info";
  /// CAF's options, as CAF 0.17 spells them ("--scheduler.max-threads=2").
  std::vector<std::string> caf_args;
  /// The configuration file's CAF sections, as CAF 0.17 reads them.
  std::string caf_ini;
  /// The TLS flags given ("--tls_cert" -> file), from the command line or
  /// the file.
  std::map<std::string, std::string> tls_flags;

  /// --log_level and --caf.* as given, for child processes (which get the
  /// file's [actorflow] flags as flags, and its CAF sections in a file of
  /// their own: caf_ini).
  const std::vector<std::string>& common_args() const noexcept {
    return common_;
  }

private:
  void take(CLI::Option* opt) {
    auto name = opt->get_name();
    if (name == "--config-file" || name == "--log_level"
        || std::ranges::find(tls_flag_names(), name)
             != tls_flag_names().end())
      return;
    // "sync = false" in the file: not given.
    if (auto i = switch_of_.find(opt); i != switch_of_.end() && !*i->second)
      return;
    for (auto* seen : given_)
      if (seen == opt)
        return;
    given_.push_back(opt);
  }

  usage_error translate(const CLI::ParseError& e) {
    std::string what = e.what();
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      auto extras = app_.remaining();
      if (!extras.empty()) {
        const auto& first = extras.front();
        if (first.starts_with("-"))
          return usage_error("unknown flag '" + first + "'");
        return usage_error("unexpected argument '" + first + "'");
      }
    }
    // CLI11 says "--seed: At Most 1 required but received 2" and
    // "--seed: 1 required TEXT missing".
    auto colon = what.find(':');
    auto name = what.substr(0, colon);
    if (colon != std::string::npos && name.starts_with("-")) {
      if (what.find("At Most") != std::string::npos)
        return usage_error(name + " given twice");
      if (what.find("missing") != std::string::npos)
        return usage_error(name + " needs a value");
    }
    return usage_error(what);
  }

  void read_config_file() {
    const auto& file = *config_file;
    std::ifstream in{file};
    if (!in)
      throw usage_error("--config-file " + file + ": cannot be read");
    // [actorflow] goes to CLI11, the rest to CAF.
    std::string ours;
    std::string line;
    bool in_ours = false;
    while (std::getline(in, line)) {
      auto begin = line.find_first_not_of(" \t");
      auto trimmed = begin == std::string::npos ? std::string{}
                                                : line.substr(begin);
      if (trimmed.starts_with("[")) {
        in_ours = trimmed.starts_with("[actorflow]");
        if (in_ours)
          continue;
        if (trimmed.starts_with("[caf."))
          trimmed = "[" + trimmed.substr(5);
        caf_ini += trimmed + "\n";
        continue;
      }
      // CAF 0.17 takes ';' comments only.
      if (!in_ours && trimmed.starts_with("#"))
        line = ";" + trimmed.substr(1);
      (in_ours ? ours : caf_ini) += line + "\n";
    }
    std::istringstream section{ours};
    try {
      app_.parse_from_stream(section);
    } catch (const CLI::ConfigError& e) {
      // "INI was not able to parse <key>".
      std::string what = e.what();
      auto key = what.substr(what.rfind(' ') + 1);
      throw usage_error("--config-file " + file + ": [actorflow] has no "
                        "option '" + key + "'");
    } catch (const CLI::ParseError& e) {
      throw usage_error("--config-file " + file + ": "
                        + translate(e).what());
    }
  }

  CLI::App app_;
  // Stable addresses: CLI11 keeps pointers to them.
  std::deque<std::string> values_;
  std::map<std::string, bool> switches_;
  std::map<CLI::Option*, bool*> switch_of_;
  std::vector<CLI::Option*> given_;
  std::vector<std::string> common_;
  int i_ = -1;
  std::string name_;
};

/// The TLS configuration of the process: TF_CONFIG's "tls" object, then
/// the --tls_* flags over it. usage_error naming the flag or field.
inline tls_config read_tls_config(const flag_reader& flags) {
  tls_config cfg;
  if (const char* text = std::getenv("TF_CONFIG"); text && *text) {
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_object() && doc.contains("tls")) {
      const auto& tls = doc["tls"];
      if (!tls.is_object())
        throw usage_error("TF_CONFIG: \"tls\" must be an object");
      for (auto& [key, value] : tls.items()) {
        auto field = "TF_CONFIG: tls." + key;
        if (key == "allowed_peers") {
          if (!value.is_array())
            throw usage_error(field + " must be a list of names");
          cfg.allowed_peers.clear();
          for (auto& name : value) {
            if (!name.is_string())
              throw usage_error(field + " must be a list of names");
            cfg.allowed_peers.push_back(name.get<std::string>());
          }
          continue;
        }
        if (!value.is_string())
          throw usage_error(field + " must be a string");
        auto v = value.get<std::string>();
        if (key == "cert")
          cfg.cert_file = v;
        else if (key == "key")
          cfg.key_file = v;
        else if (key == "key_passphrase")
          cfg.key_passphrase = v;
        else if (key == "ca")
          cfg.ca_file = v;
        else
          throw usage_error(field + ": unknown (cert, key, key_passphrase, "
                                    "ca, allowed_peers)");
      }
    }
  }
  for (const auto& [name, value] : flags.tls_flags) {
    if (name == "--tls_cert")
      cfg.cert_file = value;
    else if (name == "--tls_key")
      cfg.key_file = value;
    else if (name == "--tls_key_passphrase")
      cfg.key_passphrase = value;
    else if (name == "--tls_ca")
      cfg.ca_file = value;
    else if (name == "--tls_allowed_peers")
      cfg.allowed_peers = value.empty() ? std::vector<std::string>{}
                                        : split_list(name, value);
    else if (name == "--tls_handshake_timeout_ms") {
      auto ms = parse_index(value);
      if (!ms || *ms == 0)
        throw usage_error(name + ": expected a positive number of "
                                 "milliseconds, got '" + value + "'");
      cfg.handshake_timeout = std::chrono::milliseconds(*ms);
    }
  }
  return cfg;
}

/// Applies what every app takes (flag_reader): sets up the log (log.hpp)
/// for `program` at --log_level, and configures the process-wide actor
/// system with CAF's options. usage_error naming the flag, the file or the
/// CAF option at fault; call before anything uses the actor system.
inline void apply_common(const flag_reader& flags, const std::string& program) {
  spdlog::level::level_enum level{};
  if (!log::parse_level(flags.log_level, level))
    throw usage_error("--log_level: expected " + std::string{log::levels}
                      + ", got '" + flags.log_level + "'");
  log::init(program, flags.log_level);
  try {
    configure_default_system(flags.caf_args, flags.caf_ini,
                             flags.config_file
                               ? "--config-file " + *flags.config_file
                               : std::string{"the CAF options"});
  } catch (const op_error& e) {
    // Name CAF's options as they were given ("--caf.scheduler...").
    auto message = e.get_status().message();
    for (const auto& arg : flags.caf_args)
      if (message.starts_with(arg))
        message = "--caf." + message.substr(2);
    throw usage_error(message);
  }
  auto tls = read_tls_config(flags);
  if (!tls.enabled())
    return;
  tls.log = [](const std::string& line) { log::warning(line); };
  try {
    configure_default_tls(tls);
  } catch (const op_error& e) {
    // "tls_cert: ..." names the flag ("--tls_cert").
    auto message = e.get_status().message();
    throw usage_error(message.starts_with("tls_") ? "--" + message
                                                  : message);
  }
}

} // namespace actorflow::apps
