#pragma once

// Private to transport/: what CAF's TLS connections (transport.cpp) and
// the tensor channel's (tls_socket.cpp) share: OpenSSL contexts built from
// a tls_config, a system's TLS state, the identity checks after a
// handshake, and the watchdog that drops handshakes past their deadline
// (tls_context.cpp).

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <sys/stat.h>

#include <openssl/ssl.h>

#include <caf/fwd.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actorflow/graph/log_ring.hpp"
#include "actorflow/transport/host_port.hpp"
#include "actorflow/transport/tls_config.hpp"

namespace actorflow::tls_detail {

using clock_type = std::chrono::steady_clock;

/// OpenSSL's queued errors as one line (and the queue emptied).
std::string ssl_errors();

/// A certificate as a log line names it (subject and names).
std::string describe(X509* cert);

/// Whether `cert` is for `name` (a host name or an IP address).
bool names_match(X509* cert, const std::string& name);

/// What a peer's certificate lets it do (issue 30 §3): a `task` serves the
/// cluster; a `client` runs graphs (within the nodes' file policy); a
/// `monitor` only watches (the console, metrics). The role is the
/// certificate's URI name "urn:actorflow:role:ROLE" (actorflow-make-certs
/// writes it); a certificate without one is a task's if it names a host of
/// the cluster, a monitor's if it is for the name "monitor", else a
/// client's (certificates made before roles keep what they could do).
enum class peer_role { task, client, monitor };

const char* to_string(peer_role role) noexcept;

/// The role `cert`'s URI names give it: false and `why` for an unknown
/// role or two different ones; `has_role` false when it names none.
bool role_in(X509* cert, peer_role& role, bool& has_role, std::string& why);

/// Keeps SIGPIPE from ending the process when a peer is gone (OpenSSL
/// writes with send() without MSG_NOSIGNAL).
void block_sigpipe();

/// SSL_read or SSL_write of up to `len` bytes: what went through, and
/// SSL's error in `err` when nothing did.
size_t ssl_io(SSL* ssl, bool write, void* buf, size_t len, int& err);

/// Whether SSL error `err` means "try again when the socket is ready".
bool would_block(int err);

struct file_stamp {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  off_t size = -1;
  bool operator==(const file_stamp&) const = default;
};

/// The certificate's, the key's and the CA's stamps.
using stamps = std::array<file_stamp, 3>;

stamps stamps_of(const tls_config& cfg);

using ctx_ptr = std::shared_ptr<SSL_CTX>;

/// A context for `cfg`'s files, or nullptr and `why` (naming the option
/// and the file at fault). Blocks for the file reads.
ctx_ptr make_context(const tls_config& cfg, std::string& why);

/// A system's TLS: its configuration and context, whom it trusts, why
/// its last connections failed, and its middleman actor.
struct tls_state {
  tls_config cfg;
  std::mutex mtx;
  ctx_ptr ctx;
  stamps loaded;
  stamps rejected;
  std::set<std::string> trusted;
  std::map<std::string, std::string> failures;
  caf::io::middleman_actor actor;

  void say(const std::string& what) {
    if (cfg.log)
      cfg.log(what);
    else
      std::fprintf(stderr, "actorflow: warning: %s\n", what.c_str());
    note_log(log_level::warning, what);
  }

  // The context for a new connection: rebuilt when a file changed (a
  // certificate replaced by rename while running), the last good one if
  // the new files do not load.
  ctx_ptr context() {
    auto now = stamps_of(cfg);
    std::lock_guard<std::mutex> guard{mtx};
    if (now != loaded && now != rejected) {
      std::string why;
      if (auto fresh = make_context(cfg, why)) {
        ctx = std::move(fresh);
        loaded = now;
      } else {
        rejected = now;
        say("TLS files changed but do not load; keeping the previous ones: "
            + why);
      }
    }
    return ctx;
  }

  void failed(const std::string& endpoint, const std::string& why) {
    std::lock_guard<std::mutex> guard{mtx};
    failures[endpoint] = why;
  }

  void clear_failure(const std::string& endpoint) {
    std::lock_guard<std::mutex> guard{mtx};
    failures.erase(endpoint);
  }

  /// Whether `cert` names a host of a cluster this system serves.
  bool names_cluster_host(X509* cert) {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& name : trusted)
      if (names_match(cert, name))
        return true;
    return false;
  }

  /// Whether `cert` is for one of the allowed peers' names.
  bool names_allowed_peer(X509* cert) {
    for (const auto& name : cfg.allowed_peers)
      if (names_match(cert, name))
        return true;
    return false;
  }

  std::string accepted_names() {
    std::lock_guard<std::mutex> guard{mtx};
    std::string out;
    for (const auto& name : trusted)
      out += (out.empty() ? "" : ", ") + name;
    for (const auto& name : cfg.allowed_peers)
      out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "none" : out;
  }
};

/// A system's TLS (system_data.hpp): set by enable_tls, reset when the
/// system's middleman stops.
struct tls_slot {
  std::mutex mtx;
  std::shared_ptr<tls_state> state;
};

std::shared_ptr<tls_slot> tls_slot_of(caf::actor_system& sys);

/// The TLS of `sys`, nullptr when it has none.
std::shared_ptr<tls_state> state_of(caf::actor_system& sys);

/// Drops the connection on `fd` unless forget_handshake(key) comes before
/// `deadline`, saying `what` to `state`'s log: shutdown() makes its owner
/// see the socket fail. Never blocks (a thread of its own watches).
void watch_handshake(const void* key, int fd, clock_type::time_point deadline,
                     std::shared_ptr<tls_state> state, std::string what);

/// The handshake of `key` is over (done, failed, or its socket closes).
void forget_handshake(const void* key);

/// Why a handshake failed with SSL error `e`: the certificate check's
/// finding, a peer that hung up, or OpenSSL's queue.
std::string handshake_failure(int e, const std::string& verify_error);

/// Whether the peer of `ssl`, whose handshake is done, is who it must be:
/// for an outgoing connection to `endpoint` ("host:port") a task of that
/// host; for an incoming one a host of the cluster or an allowed peer, a
/// `task` certificate only for a host of the cluster. `role` receives the
/// peer's role (peer_role); `why` says why not.
bool peer_accepted(tls_state& state, SSL* ssl, bool incoming,
                   const std::string& endpoint, std::string& why,
                   peer_role& role);



} // namespace actorflow::tls_detail
