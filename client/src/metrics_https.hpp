#pragma once

// serve_metrics over TLS (server.cpp): cpp-httplib's SSLServer (Debian
// builds it with CPPHTTPLIB_OPENSSL_SUPPORT) with the task's certificate
// and key, answering only readers with a certificate of the cluster's CA.

#include <memory>
#include <string>

#include <httplib.h>

#include "actorflow/transport/tls_config.hpp"

namespace actorflow::detail {

/// An HTTPS server with `tls`'s certificate and key (TLS 1.2 or later) that
/// asks every reader for a certificate signed by `tls`'s CA: a handshake
/// with one the CA does not sign fails, a request without one gets 403.
/// Both refusals are said through `tls.log` (stderr when empty) as
/// "refused metrics reader ADDRESS of WHO: ...", five lines a minute at
/// most. The files are read here, once. Errors (op_error): InvalidArgument
/// naming the option and file if they do not load (check_tls_config).
/// Blocks for the file reads.
std::unique_ptr<httplib::Server> metrics_https(const tls_config& tls,
                                               const std::string& who);

} // namespace actorflow::detail
