#pragma once

// TLS in the integration tests: certificates made by scripts/make_certs.sh
// (the README's way), a client's own actor system with TLS (the embedding
// application's way).

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/transport/transport.hpp"
#include "common/temp_dir.hpp"
#include "integration_util.hpp"

namespace actorflow::testing {

/// Runs scripts/make_certs.sh DIR ARGS... and requires it to succeed.
inline void make_certs_in(const std::string& dir,
                          const std::vector<std::string>& args) {
  std::vector<std::string> argv{
    std::string{ACTORFLOW_SOURCE_DIR} + "/scripts/make_certs.sh", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  support::spawn_options opts;
  opts.capture_stderr = true;
  opts.echo_stdout = false;
  auto res = run_process(argv, 30s, opts);
  INFO(res.err);
  REQUIRE(res.status.success());
}

/// A cluster CA in a temporary directory with the certificates `specs`
/// ("NAME:HOST[,HOST...]", as make_certs.sh takes them), and optionally a
/// second CA in `other/` with `other_specs`.
struct pki {
  temp_dir dir;
  std::string ca;

  explicit pki(const std::vector<std::string>& specs,
               const std::vector<std::string>& other_specs = {})
    : dir("actorflow-tls-pki"), ca(dir / "ca.pem") {
    make_certs_in(dir / "", specs);
    if (!other_specs.empty())
      make_certs_in(dir / "other", other_specs);
  }
  std::string cert(const std::string& name) const {
    return dir / (name + ".pem");
  }
  std::string key(const std::string& name) const {
    return dir / (name + ".key");
  }
  /// A program's --tls_cert, --tls_key and --tls_ca for `name`.
  std::vector<std::string> flags(const std::string& name) const {
    return {"--tls_cert", cert(name), "--tls_key", key(name), "--tls_ca", ca};
  }
  /// The tls_config of `name`'s certificate.
  tls_config as(const std::string& name) const {
    tls_config cfg;
    cfg.cert_file = cert(name);
    cfg.key_file = key(name);
    cfg.ca_file = ca;
    return cfg;
  }
};

/// An actor system of the test's own, TLS on when `tls` is enabled (its
/// log lines kept in `said`): the embedding application's path.
struct client_system {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  std::vector<std::string> said;
  std::mutex mtx;

  explicit client_system(tls_config tls) : sys(init(cfg)) {
    if (tls.enabled()) {
      tls.log = [this](const std::string& line) {
        std::lock_guard<std::mutex> guard{mtx};
        said.push_back(line);
      };
      enable_tls(sys, tls);
    }
  }

  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_types(cfg);
    add_options(cfg);
    return cfg;
  }
};

} // namespace actorflow::testing
