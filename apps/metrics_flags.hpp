#pragma once

// --metrics_port / --metrics_host / --metrics_tls, declared here once for
// actorflow-node and actorflow-train: a task serves its Prometheus metrics
// (server::serve_metrics) only when asked, on 127.0.0.1 unless told
// otherwise, over TLS with the process's own certificate when asked (then
// only readers with a certificate of the cluster's CA get them).

#include <arpa/inet.h>
#include <netinet/in.h>

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
  bool tls = false;
  /// The process's TLS configuration (--tls_*, TF_CONFIG's "tls"), read by
  /// check().
  tls_config process_tls;

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
    app.add_flag("--metrics_tls", tls,
                 "serve /metrics over TLS (https) with --tls_cert and "
                 "--tls_key, only to readers with a certificate signed by "
                 "--tls_ca")
      ->group("Metrics");
  }

  /// usage_error for --metrics_host or --metrics_tls without
  /// --metrics_port, and for --metrics_tls without the process's TLS
  /// (`cl`'s --tls_* flags or TF_CONFIG's "tls").
  void check(const command_line& cl) {
    if (host && !port)
      throw usage_error("--metrics_host needs --metrics_port");
    if (tls && !port)
      throw usage_error("--metrics_tls needs --metrics_port");
    process_tls = support::read_tls_config(cl.common());
    process_tls.log = [](const std::string& line) { log::warning(line); };
    if (tls && !process_tls.enabled())
      throw usage_error("--metrics_tls needs the process's TLS certificate "
                        "(--tls_cert, --tls_key and --tls_ca)");
  }
};

/// True for "localhost", 127.0.0.0/8 and ::1.
inline bool is_loopback_address(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return host == "localhost"
         || (::inet_pton(AF_INET, host.c_str(), &v4) == 1
             && (ntohl(v4.s_addr) >> 24) == 127)
         || (::inet_pton(AF_INET6, host.c_str(), &v6) == 1
             && IN6_IS_ADDR_LOOPBACK(&v6));
}

/// Serves `srv`'s metrics when --metrics_port was given and returns the
/// line to log ("PROG: metrics of TASK at http://HOST:PORT/metrics",
/// https with --metrics_tls), "" when it was not. Warns when a process with
/// TLS serves them in plain HTTP beyond loopback. Errors: op_error
/// (Unknown, naming the address) when it cannot bind; InvalidArgument for
/// TLS files that do not load.
inline std::string serve_metrics(server& srv, const metrics_flags& flags,
                                 const std::string& prog) {
  if (!flags.port)
    return {};
  auto host = flags.host.value_or("127.0.0.1");
  if (!flags.tls && flags.process_tls.enabled() && !is_loopback_address(host))
    log::warning("/metrics is plain HTTP on " + host
                 + " while the cluster uses TLS: whoever reaches that "
                   "address reads this task's metrics (--metrics_tls serves "
                   "them over TLS)");
  auto port = flags.tls
                ? srv.serve_metrics(host, *flags.port, flags.process_tls)
                : srv.serve_metrics(host, *flags.port);
  return prog + ": metrics of /job:" + srv.job_name() + "/replica:0/task:"
         + std::to_string(srv.task_index()) + " at "
         + (flags.tls ? "https://" : "http://")
         + host_port{host, port}.to_string() + "/metrics";
}

} // namespace actorflow::apps
