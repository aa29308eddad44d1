#include "actorflow/client/runtime.hpp"

#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/status.hpp"

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
  // CAF 0.17 keeps keys it does not know; a typo would go unnoticed.
  for (const auto& [category, value] : cfg.content) {
    if (category == "actorflow" || category == "global")
      continue;
    const auto* entries = caf::get_if<caf::settings>(&value);
    if (entries == nullptr)
      continue;
    for (const auto& [key, ignored] : *entries)
      if (cfg.declared().qualified_name_lookup(category, key) == nullptr)
        return source + ": [" + category + "] " + key
               + " is not a CAF option";
  }
  return std::nullopt;
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
}

caf::actor_system& default_system() {
  // Never destroyed: CAF's shutdown waits for (or races with) actors that
  // outlive main, such as a session a user leaked. The OS reclaims it.
  static auto* instance = new default_runtime;
  return instance->sys;
}

} // namespace actorflow
