#include "actorflow/client/runtime.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/kernels/file_policy.hpp"

namespace actorflow {

void add_types(caf::actor_system_config& cfg) {
  actorflow::add_types_impl(cfg);
}

void add_options(caf::actor_system_config& cfg) {
  actorflow::add_options_impl(cfg);
}

namespace {

/// What configure_default_system stored, read once by default_runtime.
struct user_config {
  std::mutex mtx;
  std::vector<std::string> args;
  std::string ini;
  std::optional<tls_config> tls;
  bool system_created = false;
};

user_config& stored_config() {
  static auto* instance = new user_config;
  return *instance;
}

/// A config whose declared options we can look up (CAF 0.17 keeps them
/// protected).
struct checked_config : caf::actor_system_config {
  const caf::config_option_set& declared() const noexcept {
    return custom_options_;
  }
};

/// A value as the INI spells it (CAF 0.17 prints a negative duration as
/// "0d").
std::string value_text(const caf::config_value& value) {
  if (const auto* t = caf::get_if<caf::timespan>(&value)) {
    auto ns = t->count();
    for (auto [unit, per] : {std::pair{"s", int64_t{1'000'000'000}},
                             std::pair{"ms", int64_t{1'000'000}},
                             std::pair{"us", int64_t{1'000}}})
      if (ns != 0 && ns % per == 0)
        return std::to_string(ns / per) + unit;
    return std::to_string(ns) + "ns";
  }
  return caf::to_string(value);
}

/// How one setting is named in an error: the argument that gave it
/// ("--scheduler.max-threads=0", which the apps show as --caf....), or
/// "<source>: [category] key = value" for the INI.
std::string setting_name(const std::vector<std::string>& args,
                         const std::string& source,
                         const std::string& category, const std::string& key,
                         const caf::config_value& value) {
  auto prefix = "--" + category + "." + key + "=";
  for (auto i = args.rbegin(); i != args.rend(); ++i)
    if (i->rfind(prefix, 0) == 0)
      return *i;
  return (source.empty() ? std::string{} : source + ": ") + "[" + category
         + "] " + key + " = " + value_text(value);
}

/// The bounds CAF 0.17 does not check, of the options that matter here: a
/// value it takes but cannot use is silently replaced by its default (a
/// negative max-threads) or stalls the process (0 threads). "" if `value`
/// is fine, else what is wrong with it.
std::string out_of_range(const std::string& category, const std::string& key,
                         const caf::config_value& value) {
  struct count_rule {
    const char* category;
    const char* key;
    int64_t min;
    int64_t max;
  };
  static constexpr count_rule counts[] = {
    {"scheduler", "max-threads", 1, 1024},
    {"scheduler", "max-throughput", 1, std::numeric_limits<int64_t>::max()},
    {"middleman", "workers", 0, 1024},
    {"middleman", "max-consecutive-reads", 1,
     std::numeric_limits<int64_t>::max()},
  };
  for (const auto& rule : counts) {
    if (category != rule.category || key != rule.key)
      continue;
    const auto* n = caf::get_if<caf::config_value::integer>(&value);
    if (n == nullptr)
      return "expected an integer";
    if (*n < rule.min)
      return "must be at least " + std::to_string(rule.min);
    if (*n > rule.max)
      return "must be at most " + std::to_string(rule.max);
    return {};
  }
  if (category == "scheduler" && key == "policy") {
    const auto* atom = caf::get_if<caf::atom_value>(&value);
    if (atom == nullptr
        || (*atom != caf::atom("stealing") && *atom != caf::atom("sharing")))
      return "expected 'stealing' or 'sharing' (leave it out for "
             "actorflow's own scheduler)";
    return {};
  }
  if (category == "actorflow" && key == "tensor-channel") {
    if (caf::get_if<bool>(&value) == nullptr)
      return "expected true or false";
    return {};
  }
  if (category == "actorflow" && key == "scheduler-spin") {
    const auto* t = caf::get_if<caf::timespan>(&value);
    if (t == nullptr)
      return "expected a duration (e.g. 50us)";
    if (t->count() < 0 || *t > std::chrono::seconds{1})
      return "must be between 0s and 1s";
    return {};
  }
  // No duration of CAF's is meaningful below zero.
  if (const auto* t = caf::get_if<caf::timespan>(&value); t && t->count() < 0)
    return "must not be negative";
  return {};
}

/// Checks every value of `content` (CAF's sections, and the [actorflow]
/// keys read from CAF's configuration) against its option's type and
/// out_of_range; what is wrong, naming the setting, or nullopt.
std::optional<std::string> check_settings(const checked_config& cfg,
                                          const caf::settings& content,
                                          const std::vector<std::string>& args,
                                          const std::string& source) {
  for (const auto& [category, value] : content) {
    if (category == "global")
      continue;
    const auto* entries = caf::get_if<caf::settings>(&value);
    if (entries == nullptr)
      continue;
    for (const auto& [key, setting] : *entries) {
      if (category != "actorflow") {
        const auto* opt = cfg.declared().qualified_name_lookup(category, key);
        if (opt == nullptr)
          return source + ": [" + category + "] " + key
                 + " is not a CAF option";
        if (opt->check(setting))
          return setting_name(args, source, category, key, setting)
                 + ": expected a "
                 + std::string{opt->type_name().data(),
                               opt->type_name().size()};
      }
      if (auto why = out_of_range(category, key, setting); !why.empty())
        return setting_name(args, source, category, key, setting) + ": "
               + why;
    }
  }
  return std::nullopt;
}

/// Parses `args` and `ini` into `cfg` (whose types and options are not
/// added yet); the error says what was wrong.
std::optional<std::string> parse_into(checked_config& cfg,
                                      const std::vector<std::string>& args,
                                      const std::string& ini,
                                      const std::string& source) {
  std::istringstream in{ini};
  if (auto err = cfg.parse(args, in)) {
    auto what = cfg.render(err);
    for (const auto& arg : args)
      if (what.find(arg) != std::string::npos)
        return arg + ": not a CAF option, or a bad value (" + what + ")";
    return source + ": " + what;
  }
  if (!cfg.remainder.empty())
    return cfg.remainder.front() + ": not a CAF option";
  // CAF 0.17 keeps keys it does not know (a typo would go unnoticed), and
  // drops an INI value of the wrong type without a word (then uses its
  // default: `max-threads = -3` ran with as many threads as cores). So the
  // INI is read again untyped, and every value checked here.
  std::istringstream again{ini};
  auto raw = caf::actor_system_config::parse_config(again);
  if (!raw)
    return source + ": " + cfg.render(raw.error());
  if (auto why = check_settings(cfg, *raw, {}, source))
    return why;
  return check_settings(cfg, cfg.content, args, source);
}

struct default_runtime {
  default_runtime() : sys(init(cfg)) {
    auto& stored = stored_config();
    std::lock_guard<std::mutex> guard{stored.mtx};
    // Checked by configure_default_tls; a file broken since fails here.
    if (stored.tls)
      enable_tls(sys, *stored.tls);
  }
  static caf::actor_system_config& init(checked_config& cfg) {
    auto& stored = stored_config();
    std::lock_guard<std::mutex> guard{stored.mtx};
    stored.system_created = true;
    // The middleman's options exist once it is loaded (add_types); the
    // values were checked by configure_default_system already.
    add_types(cfg);
    parse_into(cfg, stored.args, stored.ini, "");
    if (stored.tls)
      caf::put(cfg.content, "middleman.enable-automatic-connections", false);
    add_options(cfg);
    return cfg;
  }
  checked_config cfg;
  caf::actor_system sys;
};

} // namespace

void configure_default_system(std::vector<std::string> args, std::string ini,
                              std::string source) {
  checked_config scratch;
  add_types(scratch);
  if (auto why = parse_into(scratch, args, ini, source))
    throw op_error(error_code::invalid_argument, *why);
  auto& stored = stored_config();
  std::lock_guard<std::mutex> guard{stored.mtx};
  if (stored.system_created)
    throw op_error(error_code::failed_precondition,
                   "configure_default_system: the actor system exists "
                   "already");
  stored.args = std::move(args);
  stored.ini = std::move(ini);
}

void configure_default_tls(const tls_config& cfg) {
  check_tls_config(cfg);
  auto& stored = stored_config();
  std::lock_guard<std::mutex> guard{stored.mtx};
  if (stored.system_created)
    throw op_error(error_code::failed_precondition,
                   "configure_default_tls: the actor system exists already");
  stored.tls = cfg;
  // No op of this process opens them (kernels/file_policy.hpp).
  deny_file_access(cfg.key_file, "the node's TLS key");
  deny_file_access(cfg.cert_file, "the node's TLS certificate");
  deny_file_access(cfg.ca_file, "the node's TLS CA file");
}

caf::actor_system& default_system() {
  // Never destroyed: CAF's shutdown waits for (or races with) actors that
  // outlive main, such as a session a user leaked. The OS reclaims it.
  static auto* instance = new default_runtime;
  return instance->sys;
}

} // namespace actorflow
