// check_tls_identity (transport.hpp): a task's own certificate must be for
// the host its peers dial, the one its entry in the cluster names, and be a
// task's (not a client's or a monitor's).

#include <openssl/ssl.h>

#include "actorflow/graph/status.hpp"
#include "actorflow/transport/transport.hpp"
#include "tls_context.hpp"

namespace actorflow {

void check_tls_identity(caf::actor_system& sys, const std::string& host,
                        const std::string& who) {
  auto state = tls_detail::state_of(sys);
  if (!state)
    return;
  // "[::1]" as a cluster may spell it: the certificate names ::1.
  auto name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']')
    name = name.substr(1, name.size() - 2);
  // The context a new connection would use (the files as they are now).
  auto ctx = state->context();
  X509* cert = ctx ? SSL_CTX_get0_certificate(ctx.get()) : nullptr;
  if (cert != nullptr && tls_detail::names_match(cert, name)) {
    // Its peers would take a client's or a monitor's certificate for what
    // it says it is, not for a task.
    tls_detail::peer_role role;
    bool has_role = false;
    std::string why;
    if (!tls_detail::role_in(cert, role, has_role, why))
      throw op_error(error_code::invalid_argument,
                     "tls_cert: " + state->cfg.cert_file + ": " + why);
    if (!has_role || role == tls_detail::peer_role::task)
      return;
    throw op_error(error_code::invalid_argument,
                   "tls_cert: " + state->cfg.cert_file + " ("
                     + tls_detail::describe(cert) + ") is a "
                     + tls_detail::to_string(role) + " certificate; "
                     + who + " serves with a task's (make one with "
                       "actorflow-make-certs NAME:" + name + ")");
  }
  throw op_error(error_code::invalid_argument,
                 "tls_cert: " + state->cfg.cert_file + " ("
                   + tls_detail::describe(cert) + ") is not for " + name
                   + ", the host of " + who
                   + ": its peers dial that name and would refuse the "
                     "certificate (make one for "
                   + name + ", e.g. with actorflow-make-certs)");
}

} // namespace actorflow
