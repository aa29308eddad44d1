#pragma once

// What TLS between processes needs (transport.hpp uses it; free of CAF so
// that net's and apps' headers can carry it).

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace actorflow {

/// Mutual TLS for one actor system (`--tls_*` flags, TF_CONFIG's "tls").
/// Every peer must present a certificate signed by `ca_file` whose name
/// (a DNS or IP subject alternative name, or the common name when it has
/// no DNS name) is the host a connection was made to (outgoing) or, for
/// incoming connections, a host of a cluster this system serves or one of
/// `allowed_peers` (`client` and `monitor` by default). Each peer is held
/// to the role its certificate names (README, Security: roles).
struct tls_config {
  /// PEM certificate chain of this process (tls_cert).
  std::string cert_file;
  /// PEM private key of `cert_file` (tls_key).
  std::string key_file;
  /// Passphrase of an encrypted `key_file` (tls_key_passphrase).
  std::string key_passphrase;
  /// PEM certificates of the CAs that sign every peer (tls_ca).
  std::string ca_file;
  /// Names accepted from incoming peers besides the cluster's hosts
  /// (tls_allowed_peers); clients and the console use certificates for
  /// these names.
  std::vector<std::string> allowed_peers{"client", "monitor"};
  /// A connection whose TLS handshake is not done by then is dropped
  /// (tls_handshake_timeout_ms); so is a TCP connect.
  std::chrono::milliseconds handshake_timeout{10000};
  /// Where refusals and dropped handshakes are said (the peer's address,
  /// its certificate's names and why); stderr when empty. Called on CAF's
  /// network thread, the tensor channel's threads or the handshake
  /// watchdog's: must not block for long.
  std::function<void(const std::string&)> log;

  /// True if any of the files or the passphrase is set: TLS is wanted.
  bool enabled() const noexcept {
    return !cert_file.empty() || !key_file.empty() || !ca_file.empty()
           || !key_passphrase.empty();
  }
};

} // namespace actorflow
