#pragma once

// --metrics_port / --metrics_host, declared here once for actorflow-node
// and actorflow-train: a task serves its Prometheus metrics
// (server::serve_metrics) only when asked, on 127.0.0.1 unless told
// otherwise.

#include <cstdint>
#include <optional>
#include <string>

#include "actorflow/client/server.hpp"
#include "actorflow/transport/host_port.hpp"
#include "command_line.hpp"

namespace actorflow::apps {

struct metrics_flags {
  std::optional<uint16_t> port;
  std::optional<std::string> host;

  void add_to(CLI::App& app) {
    app.add_option("--metrics_port", port,
                   "serve Prometheus metrics at http://HOST:N/metrics (0: a "
                   "free port; the task prints where); off by default")
      ->type_name("N")
      ->check(support::port_number())
      ->group("Metrics");
    app.add_option("--metrics_host", host,
                   "the address /metrics binds (default 127.0.0.1)")
      ->type_name("HOST")
      ->check(support::non_empty())
      ->group("Metrics");
  }

  /// usage_error for --metrics_host without --metrics_port.
  void check() const {
    if (host && !port)
      throw usage_error("--metrics_host needs --metrics_port");
  }
};

/// Serves `srv`'s metrics when --metrics_port was given and returns the
/// line to log ("PROG: metrics of TASK at http://HOST:PORT/metrics"), ""
/// when it was not. Errors: op_error (Unknown, naming the address) when it
/// cannot bind.
inline std::string serve_metrics(server& srv, const metrics_flags& flags,
                                 const std::string& prog) {
  if (!flags.port)
    return {};
  auto host = flags.host.value_or("127.0.0.1");
  auto port = srv.serve_metrics(host, *flags.port);
  return prog + ": metrics of /job:" + srv.job_name() + "/replica:0/task:"
         + std::to_string(srv.task_index()) + " at http://"
         + host_port{host, port}.to_string() + "/metrics";
}

} // namespace actorflow::apps
