#pragma once

// --metrics_port / --metrics_host, shared by actorflow-node and
// actorflow-train: a task serves its Prometheus metrics (server::
// serve_metrics) only when asked, on 127.0.0.1 unless told otherwise.

#include <optional>
#include <string>

#include "actorflow/client/server.hpp"
#include "command_line.hpp"

namespace actorflow::apps {

struct metrics_flags {
  std::optional<std::string> port;
  std::optional<std::string> host;
};

/// The port --metrics_port asks for; usage_error unless it is one.
inline uint16_t metrics_port(const metrics_flags& flags) {
  auto port = parse_index(*flags.port);
  if (!port || *port > 65535)
    throw usage_error("--metrics_port: expected a port number, got '"
                      + *flags.port + "'");
  return static_cast<uint16_t>(*port);
}

/// Serves `srv`'s metrics when --metrics_port was given and returns the
/// line to log ("PROG: metrics of TASK at http://HOST:PORT/metrics"), ""
/// when it was not. Errors: usage_error for a bad port, op_error (Unknown,
/// naming the address) when it cannot bind.
inline std::string serve_metrics(server& srv, const metrics_flags& flags,
                                 const std::string& prog) {
  if (!flags.port) {
    if (flags.host)
      throw usage_error("--metrics_host needs --metrics_port");
    return {};
  }
  auto host = flags.host.value_or("127.0.0.1");
  auto port = srv.serve_metrics(host, metrics_port(flags));
  auto shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return prog + ": metrics of /job:" + srv.job_name() + "/replica:0/task:"
         + std::to_string(srv.task_index()) + " at http://" + shown + ":"
         + std::to_string(port) + "/metrics";
}

} // namespace actorflow::apps
