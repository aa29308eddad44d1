#include "actorflow/support/command_line.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actorflow/kernels/file_policy.hpp"
#include "actorflow/support/log.hpp"

namespace actorflow::support {

namespace {

constexpr const char* common_footer = R"(CAF's options (every actorflow program):
  --caf.NAME=VALUE            one of CAF's options, e.g.
                              --caf.scheduler.max-threads=2
--config-file: its [actorflow] section sets the flags above (names without
the dashes: train_steps = 2000, model = "mlp", sync = true; the command
line wins), its other sections are CAF's ([scheduler], [middleman],
...).
TF_CONFIG's "tls" object takes the TLS fields without "tls_" ("cert",
"key", "key_passphrase", "ca", "allowed_peers" as a list); flags win.)";

} // namespace

void common_flags::add_to(CLI::App& app) {
  auto* opt = app.add_option("--config-file", config_file,
                             "an INI file: its [actorflow] section sets "
                             "these flags, its other sections are CAF's");
  opt->type_name("FILE")->group("Configuration");
  app.add_option("--log_level", log_level,
                 "trace, debug, info, warning, error or off")
    ->type_name("LEVEL")
    ->capture_default_str()
    ->check(CLI::Validator{[](std::string& level) -> std::string {
                             spdlog::level::level_enum parsed{};
                             if (log::parse_level(level, parsed))
                               return {};
                             return "expected " + std::string{log::levels}
                                    + ", got '" + level + "'";
                           },
                           ""})
    ->group("Configuration");
  auto file = [&](const char* name, std::optional<std::string>& slot,
                  const char* what) {
    app.add_option(name, slot, what)->type_name("FILE")->group("TLS");
  };
  file("--tls_cert", tls_cert, "this process's PEM certificate (chain)");
  file("--tls_key", tls_key, "its private key (PEM)");
  app.add_option("--tls_key_passphrase", tls_key_passphrase,
                 "the key's passphrase, if it is encrypted")
    ->type_name("TEXT")
    ->group("TLS");
  file("--tls_ca", tls_ca, "the CA certificate(s) that sign every peer");
  app.add_option("--tls_allowed_peers", tls_allowed_peers,
                 "certificate names accepted from connecting processes "
                 "besides the cluster's hosts (default client,monitor; \"\" "
                 "for none)")
    ->type_name("NAMES")
    ->group("TLS");
  app.add_option("--tls_handshake_timeout_ms", tls_handshake_timeout_ms,
                 "drop a connection whose TCP connect or TLS handshake "
                 "takes longer (default 10000)")
    ->type_name("MS")
    ->check(integer_in(1, 3'600'000))
    ->group("TLS");
  app.add_option("--file_roots", file_roots,
                 "comma-separated directories the ops of this process "
                 "(readers, ...) may open files in (default: anywhere the "
                 "process may; its TLS files and --config-file never)")
    ->type_name("DIRS")
    ->group("Files");
}

const char* common_flags::footer() {
  return common_footer;
}

tls_config read_tls_config(const common_flags& flags) {
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
  if (flags.tls_cert)
    cfg.cert_file = *flags.tls_cert;
  if (flags.tls_key)
    cfg.key_file = *flags.tls_key;
  if (flags.tls_key_passphrase)
    cfg.key_passphrase = *flags.tls_key_passphrase;
  if (flags.tls_ca)
    cfg.ca_file = *flags.tls_ca;
  if (flags.tls_allowed_peers)
    cfg.allowed_peers = flags.tls_allowed_peers->empty()
                          ? std::vector<std::string>{}
                          : split_list(*flags.tls_allowed_peers);
  if (flags.tls_handshake_timeout_ms)
    cfg.handshake_timeout
      = std::chrono::milliseconds(*flags.tls_handshake_timeout_ms);
  return cfg;
}

command_line::command_line(std::string program, std::string description)
  : program_(std::move(program)), app_(std::move(description), program_) {
  app_.set_help_flag("-h,--help", "this text");
  app_.formatter(help_formatter());
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  app_.allow_config_extras(CLI::config_extras_mode::error);
  // INI, as CAF reads it: ';' comments (and '#' lines).
  app_.config_formatter(std::make_shared<CLI::ConfigINI>());
  auto before = app_.get_options().size();
  common_.add_to(app_);
  auto all = app_.get_options();
  common_options_.assign(all.begin() + static_cast<ptrdiff_t>(before),
                         all.end());
  footer("");
}

void command_line::footer(const std::string& text) {
  app_.footer(text.empty() ? std::string{common_footer}
                           : text + "\n\n" + common_footer);
}

bool command_line::parse(int argc, char** argv) {
  std::vector<std::string> args{argc > 0 ? argv[0] : program_};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (!arg.starts_with("--caf.")) {
      args.emplace_back(arg);
      continue;
    }
    if (arg.find('=') == std::string_view::npos)
      throw usage_error(std::string{arg}
                        + ": CAF's options are given as "
                          "--caf.<option>=<value>");
    caf_args_.push_back("--" + std::string{arg.substr(6)});
    caf_given_.emplace_back(arg);
  }
  if (!parse_flags(app_, std::move(args)))
    return false;
  if (common_.config_file)
    read_config_file();
  return true;
}

void command_line::read_config_file() {
  const auto& file = *common_.config_file;
  // A directory opens as a stream that reads nothing: an empty
  // configuration, taken in silence. Only a file will do (a FIFO or
  // /dev/stdin too).
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw usage_error("--config-file " + file
                      + ": is a directory, not a file");
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
      caf_ini_ += trimmed + "\n";
      continue;
    }
    // CAF 0.17 takes ';' comments only.
    if (!in_ours && trimmed.starts_with("#"))
      line = ";" + trimmed.substr(1);
    (in_ours ? ours : caf_ini_) += line + "\n";
  }
  if (in.bad())
    throw usage_error("--config-file " + file + ": cannot be read");
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
                      + usage_error_of(e, app_).what());
  }
}

void command_line::apply(const std::string& program) const {
  log::init(program, common_.log_level);
  try {
    configure_default_system(caf_args_, caf_ini_,
                             common_.config_file
                               ? "--config-file " + *common_.config_file
                               : std::string{"the CAF options"});
  } catch (const op_error& e) {
    // Name CAF's options as they were given ("--caf.scheduler...").
    auto message = e.get_status().message();
    for (const auto& arg : caf_args_)
      if (message.starts_with(arg))
        message = "--caf." + message.substr(2);
    throw usage_error(message);
  }
  apply_file_policy();
  auto tls = read_tls_config(common_);
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

void command_line::apply_file_policy() const {
  // The TLS files are denied by configure_default_tls.
  if (common_.config_file)
    deny_file_access(*common_.config_file,
                     "the node's configuration file (--config-file)");
  if (!common_.file_roots)
    return;
  auto roots = split_list(*common_.file_roots);
  if (roots.empty())
    throw usage_error("--file_roots: expected directories, got ''");
  try {
    set_file_roots(roots);
  } catch (const op_error& e) {
    // "file_roots: DIR: ..." names the flag.
    throw usage_error("--" + e.get_status().message());
  }
}

std::vector<std::string>
command_line::as_args(const std::vector<CLI::Option*>& opts) const {
  std::vector<std::string> result;
  for (const auto* opt : opts) {
    if (opt->count() == 0)
      continue;
    if (opt->get_expected_max() == 0) {
      // "sync = false" in the file: not on.
      if (opt->as<bool>())
        result.push_back(opt->get_name());
    } else {
      result.push_back(opt->get_name() + "=" + opt->as<std::string>());
    }
  }
  return result;
}

std::vector<std::string> command_line::common_args() const {
  std::vector<std::string> result;
  for (const auto* opt : common_options_)
    if (opt->get_name() != "--config-file" && opt->count() > 0)
      result.push_back(opt->get_name() + "=" + opt->as<std::string>());
  result.insert(result.end(), caf_given_.begin(), caf_given_.end());
  return result;
}

} // namespace actorflow::support
