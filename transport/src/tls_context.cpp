// TLS contexts, a system's TLS state, identity checks and the handshake
// watchdog (tls_context.hpp), shared by CAF's TLS connections
// (transport.cpp) and the tensor channel's (tls_socket.cpp).

#include "tls_context.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <string_view>
#include <thread>

#include <arpa/inet.h>
#include <signal.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <caf/io/network/native_socket.hpp>

#include "actorflow/transport/system_data.hpp"
#include "actorflow/graph/text_util.hpp"

namespace actorflow::tls_detail {

namespace {

file_stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  return {st.st_dev, st.st_ino,
          st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_size};
}

// Hands OpenSSL the passphrase of an encrypted key; without one, fails
// instead of OpenSSL's prompt on the terminal.
int passphrase_cb(char* buf, int size, int, void* user) {
  const auto* pass = static_cast<const std::string*>(user);
  if (pass == nullptr || pass->empty() || size <= 0)
    return -1;
  auto n = std::min(pass->size(), static_cast<size_t>(size - 1));
  std::memcpy(buf, pass->data(), n);
  buf[n] = '\0';
  return static_cast<int>(n);
}

int verify_cb(int ok, X509_STORE_CTX* store);

// Drops connections whose handshake is not done by their deadline:
// shutdown() makes CAF's multiplexer see the socket fail and close it.
class watchdog {
public:
  struct entry {
    int fd;
    clock_type::time_point deadline;
    std::shared_ptr<tls_state> state;
    std::string what;
  };

  static watchdog& instance() {
    static auto* w = new watchdog;
    return *w;
  }

  void watch(const void* key, entry e) {
    std::lock_guard<std::mutex> guard{mtx_};
    pending_.emplace(key, std::move(e));
    if (!started_) {
      started_ = true;
      std::thread{[this] { run(); }}.detach();
    }
    cv_.notify_one();
  }

  // Called before the socket closes (the session goes before its
  // stream's fd): the watchdog never shuts down a reused descriptor.
  void forget(const void* key) {
    std::lock_guard<std::mutex> guard{mtx_};
    pending_.erase(key);
  }

private:
  void run() {
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      // Asleep until the earliest deadline, or a new connection.
      if (pending_.empty()) {
        cv_.wait(guard);
      } else {
        // A copy: wait_until reads it again after waking, when forget()
        // may have erased its entry meanwhile (ASan caught it).
        auto first = std::min_element(
                       pending_.begin(), pending_.end(),
                       [](const auto& a, const auto& b) {
                         return a.second.deadline < b.second.deadline;
                       })
                       ->second.deadline;
        cv_.wait_until(guard, first);
      }
      auto now = clock_type::now();
      for (auto i = pending_.begin(); i != pending_.end();) {
        if (i->second.deadline > now) {
          ++i;
          continue;
        }
        ::shutdown(i->second.fd, SHUT_RDWR);
        i->second.state->say(i->second.what);
        i = pending_.erase(i);
      }
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::map<const void*, entry> pending_;
  bool started_ = false;
};

// Why a handshake failed with SSL error `e`: the certificate check's
// finding, a peer that hung up, or OpenSSL's queue.

} // namespace

// OpenSSL's queued errors as one line (and the queue emptied).
std::string ssl_errors() {
  std::string msg;
  while (auto err = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof(buf));
    if (!msg.empty())
      msg += "; ";
    msg += buf;
  }
  return msg.empty() ? "no detail from OpenSSL" : msg;
}

namespace {

// The bytes of an ASN.1 string (a DNS name, a URI), as they are.
std::string text_of(const ASN1_STRING* s) {
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
          static_cast<size_t>(ASN1_STRING_length(s))};
}

} // namespace

// A certificate's subject and subject alternative names, for messages.
std::string describe(X509* cert) {
  if (cert == nullptr)
    return "no certificate";
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof(subject));
  std::string out = std::string{"certificate '"} + subject + "'";
  auto* names = static_cast<GENERAL_NAMES*>(
    X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr)
    return out;
  std::string list;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    auto* n = sk_GENERAL_NAME_value(names, i);
    std::string item;
    if (n->type == GEN_DNS) {
      item = "DNS:" + text_of(n->d.dNSName);
    } else if (n->type == GEN_IPADD) {
      char text[INET6_ADDRSTRLEN] = "?";
      auto len = ASN1_STRING_length(n->d.iPAddress);
      inet_ntop(len == 16 ? AF_INET6 : AF_INET,
                ASN1_STRING_get0_data(n->d.iPAddress), text, sizeof(text));
      item = std::string{"IP:"} + text;
    } else if (n->type == GEN_URI) {
      // The role (urn:actorflow:role:...).
      item = "URI:" + text_of(n->d.uniformResourceIdentifier);
    } else {
      continue;
    }
    list += (list.empty() ? "" : ", ") + item;
  }
  GENERAL_NAMES_free(names);
  // A peer's names may hold anything (newlines, terminal escapes): the
  // line is logged.
  return list.empty() ? out : out + " (" + log_escape(list) + ")";
}

// Whether `cert` is for `name`: an IP address against its IP names, a
// host name against its DNS names (or its common name if it has none).
bool names_match(X509* cert, const std::string& name) {
  in6_addr ip{};
  if (inet_pton(AF_INET, name.c_str(), &ip) == 1
      || inet_pton(AF_INET6, name.c_str(), &ip) == 1)
    return X509_check_ip_asc(cert, name.c_str(), 0) == 1;
  return X509_check_host(cert, name.c_str(), name.size(), 0, nullptr) == 1;
}

// OpenSSL writes with write(): a peer gone makes it raise SIGPIPE. Blocked
// once per thread that does TLS I/O (CAF's network thread), it stays
// pending there instead of ending the process.
void block_sigpipe() {
  thread_local bool blocked = false;
  if (blocked)
    return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  blocked = true;
}

// One SSL_read or SSL_write of up to 1 GiB: the bytes moved, or 0 with
// `err` set to SSL_get_error's verdict.
size_t ssl_io(SSL* ssl, bool write, void* buf, size_t len, int& err) {
  block_sigpipe();
  ERR_clear_error();
  auto n = static_cast<int>(std::min<size_t>(len, 1 << 30));
  auto r = write ? SSL_write(ssl, buf, n) : SSL_read(ssl, buf, n);
  if (r > 0)
    return static_cast<size_t>(r);
  err = SSL_get_error(ssl, r);
  return 0;
}

// True if `err` (ssl_io's) only means "not now": the socket would block.
bool would_block(int err) {
  return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE;
}

stamps stamps_of(const tls_config& cfg) {
  return {stamp_of(cfg.cert_file), stamp_of(cfg.key_file),
          stamp_of(cfg.ca_file)};
}

ctx_ptr make_context(const tls_config& cfg, std::string& why) {
  std::string missing;
  for (auto [name, value] : {std::pair{"tls_cert", &cfg.cert_file},
                             std::pair{"tls_key", &cfg.key_file},
                             std::pair{"tls_ca", &cfg.ca_file}})
    if (value->empty())
      missing += (missing.empty() ? "" : ", ") + std::string{name};
  if (!missing.empty()) {
    // CAF would fall back to anonymous, unauthenticated TLS.
    why = "TLS needs tls_cert, tls_key and tls_ca; missing: " + missing;
    return nullptr;
  }
  ERR_clear_error();
  ctx_ptr ctx{SSL_CTX_new(TLS_method()), SSL_CTX_free};
  if (!ctx) {
    why = "cannot create a TLS context: " + ssl_errors();
    return nullptr;
  }
  auto* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  // AES-128-GCM first (OpenSSL prefers AES-256): 128-bit security, and
  // tensors encrypt ~30 % faster with AES-NI.
  SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                              "TLS_CHACHA20_POLY1305_SHA256");
  if (SSL_CTX_use_certificate_chain_file(c, cfg.cert_file.c_str()) != 1) {
    why = "tls_cert: cannot load a certificate from " + cfg.cert_file + ": "
          + ssl_errors();
    return nullptr;
  }
  // Read first, then handed to the context: "cannot read" and "not the
  // key of this certificate" are different mistakes.
  EVP_PKEY* key = nullptr;
  if (auto* bio = BIO_new_file(cfg.key_file.c_str(), "r")) {
    key = PEM_read_bio_PrivateKey(
      bio, nullptr, passphrase_cb,
      const_cast<std::string*>(&cfg.key_passphrase));
    BIO_free(bio);
  }
  if (key == nullptr) {
    why = "tls_key: cannot load the private key from " + cfg.key_file
          + (cfg.key_passphrase.empty()
               ? " (if it is encrypted, give tls_key_passphrase)"
               : " (wrong tls_key_passphrase?)")
          + ": " + ssl_errors();
    return nullptr;
  }
  auto key_ok = SSL_CTX_use_PrivateKey(c, key) == 1
                && SSL_CTX_check_private_key(c) == 1;
  EVP_PKEY_free(key);
  if (!key_ok) {
    why = "tls_key: " + cfg.key_file + " is not the key of the certificate in "
          + cfg.cert_file + ": " + ssl_errors();
    return nullptr;
  }
  if (SSL_CTX_load_verify_locations(c, cfg.ca_file.c_str(), nullptr) != 1) {
    why = "tls_ca: cannot load CA certificates from " + cfg.ca_file + ": "
          + ssl_errors();
    return nullptr;
  }
  // A certificate the CA does not sign would be refused by every peer:
  // say so now.
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(c, &chain);
  auto* check = X509_STORE_CTX_new();
  X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(c),
                      SSL_CTX_get0_certificate(c), chain);
  auto valid = X509_verify_cert(check) == 1;
  auto err = X509_STORE_CTX_get_error(check);
  X509_STORE_CTX_free(check);
  if (!valid) {
    why = "tls_cert: " + cfg.cert_file + " is not valid under the CA in "
          + cfg.ca_file + ": " + X509_verify_cert_error_string(err);
    ERR_clear_error();
    return nullptr;
  }
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     verify_cb);
  // CAF's stream retries a write from where it stopped, with the rest.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE
                        | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Connections live long; resumption tickets would only add round trips'
  // worth of bytes after each handshake.
  SSL_CTX_set_num_tickets(c, 0);
  return ctx;
}

std::shared_ptr<tls_slot> tls_slot_of(caf::actor_system& sys) {
  return system_data<tls_slot>(sys);
}

std::shared_ptr<tls_state> state_of(caf::actor_system& sys) {
  auto slot = tls_slot_of(sys);
  std::lock_guard<std::mutex> guard{slot->mtx};
  return slot->state;
}

void watch_handshake(const void* key, int fd, clock_type::time_point deadline,
                     std::shared_ptr<tls_state> state, std::string what) {
  watchdog::instance().watch(key,
                             {fd, deadline, std::move(state), std::move(what)});
}

void forget_handshake(const void* key) {
  watchdog::instance().forget(key);
}

std::string handshake_failure(int e, const std::string& verify_error) {
  if (!verify_error.empty())
    return "TLS handshake failed: " + verify_error;
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
    return "TLS handshake failed: the peer closed the connection (is it "
           "speaking TLS?)";
  return "TLS handshake failed: " + ssl_errors();
}

const char* to_string(peer_role role) noexcept {
  switch (role) {
    case peer_role::task:
      return "task";
    case peer_role::client:
      return "client";
    default:
      return "monitor";
  }
}

bool role_in(X509* cert, peer_role& role, bool& has_role, std::string& why) {
  static constexpr std::string_view prefix = "urn:actorflow:role:";
  has_role = false;
  auto* names = static_cast<GENERAL_NAMES*>(
    X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr)
    return true;
  bool ok = true;
  for (int i = 0; ok && i < sk_GENERAL_NAME_num(names); ++i) {
    auto* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_URI)
      continue;
    auto uri = text_of(n->d.uniformResourceIdentifier);
    if (!uri.starts_with(prefix))
      continue;
    auto name = uri.substr(prefix.size());
    peer_role found;
    if (name == "task") {
      found = peer_role::task;
    } else if (name == "client") {
      found = peer_role::client;
    } else if (name == "monitor") {
      found = peer_role::monitor;
    } else {
      why = describe(cert) + " names the unknown role '" + log_escape(name)
            + "' (task, client or monitor)";
      ok = false;
      break;
    }
    if (has_role && found != role) {
      why = describe(cert) + " names two roles, " + to_string(role) + " and "
            + to_string(found);
      ok = false;
      break;
    }
    role = found;
    has_role = true;
  }
  GENERAL_NAMES_free(names);
  return ok;
}

bool peer_accepted(tls_state& state, SSL* ssl, bool incoming,
                   const std::string& endpoint, std::string& why,
                   peer_role& role) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) {
    why = "it presented no certificate";
    return false;
  }
  bool has_role = false;
  if (!role_in(cert, role, has_role, why))
    return false;
  if (!incoming) {
    // The task dialed: its host's certificate, not a client's or a
    // monitor's that happens to name the host.
    if (!names_match(cert, host_of(endpoint))) {
      why = describe(cert) + " is not for " + host_of(endpoint);
      return false;
    }
    if (has_role && role != peer_role::task) {
      why = describe(cert) + " is a " + to_string(role)
            + " certificate, not a task's";
      return false;
    }
    role = peer_role::task;
    return true;
  }
  auto host = state.names_cluster_host(cert);
  if (!host && !state.names_allowed_peer(cert)) {
    why = describe(cert)
          + " is not for a host of the cluster nor an allowed peer ("
          + state.accepted_names() + ")";
    return false;
  }
  if (has_role) {
    if (role == peer_role::task && !host) {
      why = describe(cert)
            + " is a task certificate but not for a host of the cluster ("
            + state.accepted_names() + ")";
      return false;
    }
    return true;
  }
  role = host                          ? peer_role::task
         : names_match(cert, "monitor") ? peer_role::monitor
                                        : peer_role::client;
  return true;
}


// One TLS connection: the handshake, the peer's identity, then reads and
// writes for CAF's stream. Used by CAF's network thread only.

namespace {

int verify_cb(int ok, X509_STORE_CTX* store) {
  if (ok == 1)
    return ok;
  auto* ssl = static_cast<SSL*>(
    X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  // Where the SSL's owner keeps why its peer failed (SSL_set_app_data).
  auto* slot = ssl ? static_cast<std::string*>(SSL_get_app_data(ssl))
                   : nullptr;
  if (slot == nullptr || !slot->empty())
    return ok;
  // The peer's own certificate, and the one in its chain that failed.
  auto* leaf = X509_STORE_CTX_get0_cert(store);
  auto* current = X509_STORE_CTX_get_current_cert(store);
  auto what = describe(leaf);
  if (current != nullptr && current != leaf) {
    char subject[256];
    X509_NAME_oneline(X509_get_subject_name(current), subject,
                      sizeof(subject));
    what += std::string{" signed by '"} + subject + "'";
  }
  *slot = what + ": "
          + X509_verify_cert_error_string(X509_STORE_CTX_get_error(store));
  return ok;
}

// The policy CAF's stream_impl drives.

} // namespace

} // namespace actorflow::tls_detail
