#include "actorflow/transport/transport.hpp"

// TLS for CAF's connections. CAF 0.17's OpenSSL module checks only that a
// peer's certificate is signed by a trusted CA, builds its context when the
// first connection comes (aborting the process if the key is bad), and
// falls back to anonymous TLS when no certificate is set. So this file
// plugs its own stream policy into CAF's multiplexer, the way that module
// does: a middleman actor whose connect/open make scribes and doormen over
// OpenSSL sessions. After the handshake, the peer's certificate name is
// checked against the host dialed (outgoing) or the cluster's hosts and
// the allowed peers (incoming). A watchdog drops handshakes that do not
// finish in time; connects have a deadline.

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>

#include "actorflow/graph/status.hpp"
#include "tls_socket.hpp"

namespace actorflow {

namespace {

using caf::io::network::native_socket;
using caf::io::network::rw_state;
using default_mpx = caf::io::network::default_multiplexer;
using clock_type = std::chrono::steady_clock;

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
      item = "DNS:";
      item.append(reinterpret_cast<const char*>(
                    ASN1_STRING_get0_data(n->d.dNSName)),
                  static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
    } else if (n->type == GEN_IPADD) {
      char text[INET6_ADDRSTRLEN] = "?";
      auto len = ASN1_STRING_length(n->d.iPAddress);
      inet_ntop(len == 16 ? AF_INET6 : AF_INET,
                ASN1_STRING_get0_data(n->d.iPAddress), text, sizeof(text));
      item = std::string{"IP:"} + text;
    } else {
      continue;
    }
    list += (list.empty() ? "" : ", ") + item;
  }
  GENERAL_NAMES_free(names);
  return list.empty() ? out : out + " (" + list + ")";
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

// "host" of "host:port" or "[v6]:port"; a bare host (or v6 address) as is.
std::string host_of(const std::string& hp) {
  if (!hp.empty() && hp.front() == '[')
    return hp.substr(1, hp.find(']') - 1);
  auto colon = hp.find(':');
  if (colon != std::string::npos && hp.find(':', colon + 1) == std::string::npos)
    return hp.substr(0, colon);
  return hp;
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

// -- contexts -----------------------------------------------------------------

struct file_stamp {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  off_t size = -1;
  bool operator==(const file_stamp&) const = default;
};

file_stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {};
  return {st.st_dev, st.st_ino,
          st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_size};
}

using stamps = std::array<file_stamp, 3>;

stamps stamps_of(const tls_config& cfg) {
  return {stamp_of(cfg.cert_file), stamp_of(cfg.key_file),
          stamp_of(cfg.ca_file)};
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

using ctx_ptr = std::shared_ptr<SSL_CTX>;

// A context for `cfg`'s files, or nullptr and `why` (naming the option
// and the file at fault).
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

// -- per-system state -----------------------------------------------------------

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

  bool accepts(X509* cert) {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& name : trusted)
      if (names_match(cert, name))
        return true;
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

struct registry {
  std::mutex mtx;
  std::map<const caf::actor_system*, std::shared_ptr<tls_state>> systems;
};

registry& reg() {
  // Never destroyed: the watchdog and CAF's threads may use it at exit.
  static auto* instance = new registry;
  return *instance;
}

std::shared_ptr<tls_state> state_of(const caf::actor_system& sys) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.systems.find(&sys);
  return i == r.systems.end() ? nullptr : i->second;
}

// -- handshake watchdog -------------------------------------------------------

// Drops connections whose handshake is not done by their deadline:
// shutdown() makes CAF's multiplexer see the socket fail and close it.
class watchdog {
public:
  struct entry {
    native_socket fd;
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
std::string handshake_failure(int e, const std::string& verify_error) {
  if (!verify_error.empty())
    return "TLS handshake failed: " + verify_error;
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
    return "TLS handshake failed: the peer closed the connection (is it "
           "speaking TLS?)";
  return "TLS handshake failed: " + ssl_errors();
}

// Whether the peer of `ssl`, whose handshake is done, is who it must be:
// for an outgoing connection to `endpoint` ("host:port") the host, for an
// incoming one a host of the cluster or an allowed peer; `why` if not.
bool peer_accepted(tls_state& state, SSL* ssl, bool incoming,
                   const std::string& endpoint, std::string& why) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) {
    why = "it presented no certificate";
    return false;
  }
  if (incoming) {
    if (state.accepts(cert))
      return true;
    why = describe(cert)
          + " is not for a host of the cluster nor an allowed peer ("
          + state.accepted_names() + ")";
    return false;
  }
  if (names_match(cert, host_of(endpoint)))
    return true;
  why = describe(cert) + " is not for " + host_of(endpoint);
  return false;
}

// -- sessions -------------------------------------------------------------------

// The address of a socket's peer, "host:port".
std::string peer_of(native_socket fd) {
  auto addr = caf::io::network::remote_addr_of_fd(fd);
  auto port = caf::io::network::remote_port_of_fd(fd);
  if (!addr || !port)
    return "?";
  return *addr + ":" + std::to_string(*port);
}

// One TLS connection: the handshake, the peer's identity, then reads and
// writes for CAF's stream. Used by CAF's network thread only.
class tls_session {
public:
  tls_session(std::shared_ptr<tls_state> state, native_socket fd,
              bool incoming, std::string endpoint)
    : state_(std::move(state)),
      incoming_(incoming),
      endpoint_(std::move(endpoint)),
      peer_(peer_of(fd)) {
    ctx_ = state_->context();
    ssl_ = SSL_new(ctx_.get());
    if (ssl_ == nullptr)
      return;
    SSL_set_app_data(ssl_, &verify_error_);
    SSL_set_fd(ssl_, fd);
    if (incoming_)
      SSL_set_accept_state(ssl_);
    else
      SSL_set_connect_state(ssl_);
    auto what = incoming_ ? "dropped TLS peer " + peer_
                          : "dropped TLS connection to " + endpoint_;
    what += ": handshake not done within "
            + std::to_string(state_->cfg.handshake_timeout.count()) + " ms";
    watchdog::instance().watch(
      this, {fd, clock_type::now() + state_->cfg.handshake_timeout, state_,
             std::move(what)});
  }

  ~tls_session() {
    watchdog::instance().forget(this);
    SSL_free(ssl_);
  }

  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  bool valid() const noexcept {
    return ssl_ != nullptr;
  }

  rw_state read_some(size_t& result, native_socket, void* buf, size_t len) {
    result = 0;
    if (!done_) {
      auto h = handshake();
      if (h < 0)
        return rw_state::failure;
      if (h == 0)
        return rw_state::success;
    }
    if (len == 0)
      return rw_state::indeterminate;
    int e = 0;
    result = ssl_io(ssl_, false, buf, len, e);
    if (result > 0) {
      got_data_ = true;
      return rw_state::success;
    }
    if (would_block(e))
      return rw_state::success;
    // TLS 1.3: the client's handshake is done before the server checked
    // the client's certificate; a refusal arrives as the first read.
    if (!got_data_ && !incoming_)
      state_->failed(endpoint_,
                     e == SSL_ERROR_SSL
                       ? "the peer refused this process: " + ssl_errors()
                       : "the peer closed the connection right after the "
                         "TLS handshake (does it accept this process's "
                         "certificate name?)");
    return rw_state::failure;
  }

  rw_state write_some(size_t& result, native_socket, const void* buf,
                      size_t len) {
    result = 0;
    if (!done_) {
      auto h = handshake();
      if (h < 0)
        return rw_state::failure;
      if (h == 0)
        // Waiting for the peer with nothing to write: stop write events
        // (a read continues the handshake). With data queued, `success`
        // keeps them (indeterminate would drop the data).
        return len == 0 && want_read_ ? rw_state::indeterminate
                                      : rw_state::success;
    }
    if (len == 0)
      return rw_state::indeterminate;
    int e = 0;
    result = ssl_io(ssl_, true, const_cast<void*>(buf), len, e);
    return result > 0 || would_block(e) ? rw_state::success
                                        : rw_state::failure;
  }

  bool must_read_more(native_socket, size_t threshold) {
    return static_cast<size_t>(SSL_pending(ssl_)) >= threshold;
  }

private:
  // Continues the handshake: 1 done (and the peer accepted), 0 waiting
  // for the peer, -1 failed (said why).
  int handshake() {
    if (failed_)
      return -1;
    block_sigpipe();
    ERR_clear_error();
    auto r = SSL_do_handshake(ssl_);
    if (r == 1) {
      watchdog::instance().forget(this);
      if (!check_peer()) {
        failed_ = true;
        return -1;
      }
      done_ = true;
      return 1;
    }
    auto e = SSL_get_error(ssl_, r);
    want_read_ = e == SSL_ERROR_WANT_READ;
    if (would_block(e))
      return 0;
    watchdog::instance().forget(this);
    failed_ = true;
    refuse(handshake_failure(e, verify_error_));
    return -1;
  }

  bool check_peer() {
    std::string why;
    if (!peer_accepted(*state_, ssl_, incoming_, endpoint_, why)) {
      refuse(why);
      return false;
    }
    if (!incoming_)
      state_->clear_failure(endpoint_);
    return true;
  }

  void refuse(const std::string& why) {
    if (incoming_) {
      state_->say("refused TLS peer " + peer_ + ": " + why);
    } else {
      state_->failed(endpoint_, why);
      state_->say("refused TLS connection to " + endpoint_ + " (" + peer_
                  + "): " + why);
    }
  }

  std::shared_ptr<tls_state> state_;
  ctx_ptr ctx_;
  SSL* ssl_ = nullptr;
  bool incoming_;
  bool done_ = false;
  bool want_read_ = false;
  bool got_data_ = false;
  bool failed_ = false;
  std::string endpoint_;
  std::string peer_;
  // Set by verify_cb: why the chain of the peer's certificate failed.
  std::string verify_error_;
};

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
class tls_policy {
public:
  explicit tls_policy(std::unique_ptr<tls_session> s) : s_(std::move(s)) {
    // nop
  }

  rw_state read_some(size_t& result, native_socket fd, void* buf,
                     size_t len) {
    return s_->read_some(result, fd, buf, len);
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf,
                      size_t len) {
    return s_->write_some(result, fd, buf, len);
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return s_->must_read_more(fd, threshold);
  }

private:
  std::unique_ptr<tls_session> s_;
};

class tls_scribe : public caf::io::scribe {
public:
  tls_scribe(default_mpx& mpx, native_socket fd,
             std::unique_ptr<tls_session> s)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)),
      stream_(mpx, fd, std::move(s)) {
    // nop
  }

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
      // A write event runs the handshake's first steps even when CAF has
      // nothing to write yet.
      stream_.force_empty_write(this);
    }
  }

  void ack_writes(bool enable) override {
    stream_.ack_writes(enable);
  }

  std::vector<char>& wr_buf() override {
    return stream_.wr_buf();
  }

  std::vector<char>& rd_buf() override {
    return stream_.rd_buf();
  }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override {
    stream_.flush(this);
  }

  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }

  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }

  void add_to_loop() override {
    stream_.activate(this);
  }

  void remove_from_loop() override {
    stream_.passivate();
  }

private:
  bool launched_ = false;
  caf::io::network::stream_impl<tls_policy> stream_;
};

void set_nodelay(native_socket fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

class tls_doorman : public caf::io::network::doorman_impl {
public:
  tls_doorman(default_mpx& mpx, native_socket fd,
              std::shared_ptr<tls_state> state)
    : doorman_impl(mpx, fd), state_(std::move(state)) {
    // nop
  }

  bool new_connection() override {
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    caf::io::network::nonblocking(fd, true);
    set_nodelay(fd);
    auto s = std::make_unique<tls_session>(state_, fd, true, "");
    if (!s->valid()) {
      state_->say("cannot start a TLS session for " + peer_of(fd) + ": "
                  + ssl_errors());
      caf::io::network::close_socket(fd);
      return false;
    }
    auto scribe = caf::make_counted<tls_scribe>(mpx, fd, std::move(s));
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

private:
  std::shared_ptr<tls_state> state_;
};

// A TCP connection to host:port within `timeout` (CAF's own connect
// blocks for as long as the kernel retries), non-blocking for CAF.
caf::expected<native_socket> connect_within(const std::string& host,
                                            uint16_t port,
                                            std::chrono::milliseconds timeout) {
  auto fail = [&](const std::string& why) {
    return caf::make_error(caf::sec::cannot_connect_to_node,
                           host + ":" + std::to_string(port) + ": " + why);
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  auto service = std::to_string(port);
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
      e != 0)
    return fail(::gai_strerror(e));
  auto deadline = clock_type::now() + timeout;
  std::string why = "no address";
  for (auto* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - clock_type::now())
                    .count();
      pollfd p{fd, POLLOUT, 0};
      int err = ETIMEDOUT;
      if (left > 0 && ::poll(&p, 1, static_cast<int>(left)) == 1) {
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      ::freeaddrinfo(res);
      set_nodelay(fd);
      return fd;
    }
    why = errno == ETIMEDOUT ? "TCP connect not done within "
                                 + std::to_string(timeout.count()) + " ms"
                             : std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return fail(why);
}

class tls_middleman_actor : public caf::io::middleman_actor_impl {
public:
  tls_middleman_actor(caf::actor_config& cfg, caf::actor broker,
                      std::shared_ptr<tls_state> state)
    : middleman_actor_impl(cfg, std::move(broker)), state_(std::move(state)) {
    // nop
  }

  const char* name() const override {
    return "actorflow_tls_middleman";
  }
  void on_exit() override {
    middleman_actor_impl::on_exit();
    // The state's handle would keep this actor (and the system's
    // shutdown, which waits for it) alive.
    std::lock_guard<std::mutex> guard{state_->mtx};
    state_->actor = nullptr;
  }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             uint16_t port) override {
    auto endpoint = host + ":" + std::to_string(port);
    // A reason from an earlier attempt must not explain this one.
    state_->clear_failure(endpoint);
    auto fd = connect_within(host, port, state_->cfg.handshake_timeout);
    if (!fd)
      return std::move(fd.error());
    auto s = std::make_unique<tls_session>(state_, *fd, false, endpoint);
    if (!s->valid()) {
      caf::io::network::close_socket(*fd);
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             "cannot start a TLS session: " + ssl_errors());
    }
    return caf::make_counted<tls_scribe>(mpx(), *fd, std::move(s));
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<tls_doorman>(mpx(), *fd, state_);
  }

private:
  default_mpx& mpx() {
    return static_cast<default_mpx&>(system().middleman().backend());
  }

  std::shared_ptr<tls_state> state_;
};

} // namespace

// -- the tensor channel's connections -------------------------------------------

struct tls_socket::security {
  std::shared_ptr<tls_state> state;
};

tls_socket::security_ptr tls_socket::security_of(caf::actor_system& sys) {
  auto state = state_of(sys);
  if (!state)
    return nullptr;
  auto sec = std::make_shared<security>();
  sec->state = std::move(state);
  return sec;
}

std::string tls_socket::key_of(const security_ptr& sec) {
  if (!sec)
    return {};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "#tls%p",
                static_cast<const void*>(sec->state.get()));
  return buf;
}

std::unique_ptr<tls_socket>
tls_socket::connect(const security_ptr& sec, int fd, const std::string& host,
                    const std::string& port,
                    std::chrono::milliseconds timeout) {
  std::unique_ptr<tls_socket> s{new tls_socket};
  s->sec_ = sec;
  auto endpoint = (host.find(':') != std::string::npos ? "[" + host + "]"
                                                        : host)
                  + ":" + port;
  if (!s->handshake(fd, false, endpoint, timeout))
    return nullptr;
  return s;
}

std::unique_ptr<tls_socket> tls_socket::accept(const security_ptr& sec,
                                               int fd) {
  std::unique_ptr<tls_socket> s{new tls_socket};
  s->sec_ = sec;
  if (!s->handshake(fd, true, "", sec->state->cfg.handshake_timeout))
    return nullptr;
  return s;
}

tls_socket::~tls_socket() {
  SSL_free(ssl_);
}

bool tls_socket::handshake(int fd, bool incoming, const std::string& endpoint,
                           std::chrono::milliseconds timeout) {
  auto& state = *sec_->state;
  auto peer = peer_of(fd);
  auto refuse = [&](const std::string& why) {
    if (incoming)
      state.say("refused TLS peer " + peer + " (tensor channel): " + why);
    else
      state.say("refused TLS connection to " + endpoint + " (" + peer
                + ", tensor channel): " + why);
    return false;
  };
  auto ctx = state.context();
  ssl_ = SSL_new(ctx.get());
  if (ssl_ == nullptr)
    return refuse("cannot start a TLS session: " + ssl_errors());
  SSL_set_app_data(ssl_, &verify_error_);
  SSL_set_fd(ssl_, fd);
  // Frames come in bursts of records: read two at a time (more measured
  // slower for 64 MiB fetches: the buffer falls out of the cache).
  SSL_set_read_ahead(ssl_, 1);
  SSL_set_default_read_buffer_len(ssl_, 34 << 10);
  if (incoming)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
  block_sigpipe();
  // Non-blocking for the handshake's deadline; the socket's mode after.
  auto flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  auto deadline = clock_type::now() + timeout;
  std::string why;
  for (;;) {
    ERR_clear_error();
    auto r = SSL_do_handshake(ssl_);
    if (r == 1)
      break;
    auto e = SSL_get_error(ssl_, r);
    if (!would_block(e)) {
      why = handshake_failure(e, verify_error_);
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - clock_type::now())
                  .count();
    pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN
                                                             : POLLOUT),
             0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      why = "handshake not done within " + std::to_string(timeout.count())
            + " ms";
      break;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  // peer_accepted says why when it refuses.
  if (why.empty())
    peer_accepted(state, ssl_, incoming, endpoint, why);
  if (!why.empty())
    return refuse(why);
  return true;
}

long tls_socket::read(void* buf, size_t n) {
  int e = 0;
  if (auto done = ssl_io(ssl_, false, buf, n, e); done > 0)
    return static_cast<long>(done);
  if (e == SSL_ERROR_ZERO_RETURN)
    return 0;
  return would_block(e) ? -2 : -1;
}

long tls_socket::write(const void* buf, size_t n) {
  int e = 0;
  if (auto done = ssl_io(ssl_, true, const_cast<void*>(buf), n, e); done > 0)
    return static_cast<long>(done);
  return would_block(e) ? 0 : -1;
}

bool tls_socket::has_pending() const {
  return SSL_has_pending(ssl_) == 1;
}

bool tls_socket::peek_buffered(void* buf, size_t n) {
  if (static_cast<size_t>(SSL_pending(ssl_)) < n)
    return false;
  return SSL_peek(ssl_, buf, static_cast<int>(n)) == static_cast<int>(n);
}

void check_tls_config(const tls_config& cfg) {
  std::string why;
  if (!make_context(cfg, why))
    throw op_error(error_code::invalid_argument, why);
  if (cfg.handshake_timeout.count() <= 0)
    throw op_error(error_code::invalid_argument,
                   "tls_handshake_timeout_ms must be positive");
}

void enable_tls(caf::actor_system& sys, const tls_config& cfg) {
  check_tls_config(cfg);
  if (caf::get_or(sys.config(), "middleman.enable-automatic-connections",
                  false))
    throw op_error(error_code::failed_precondition,
                   "TLS cannot be enabled while CAF's automatic connections "
                   "are on (they would bypass it): set "
                   "middleman.enable-automatic-connections=false");
  auto state = std::make_shared<tls_state>();
  state->cfg = cfg;
  // Never empty: checked above (a file that changed meanwhile is caught at
  // the first connection).
  std::string why;
  state->ctx = make_context(cfg, why);
  state->loaded = stamps_of(cfg);
  if (!state->ctx)
    throw op_error(error_code::invalid_argument, why);
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  if (r.systems.count(&sys) != 0)
    throw op_error(error_code::failed_precondition,
                   "TLS is enabled for this actor system already");
  auto broker
    = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached, as CAF's own middleman actor: connect() blocks for up to the
  // handshake timeout.
  state->actor = sys.spawn<tls_middleman_actor, caf::detached + caf::hidden>(
    broker, state);
  r.systems[&sys] = state;
  // Goes with CAF's own middleman actor, which the middleman kills when it
  // stops (the system's shutdown then waits for detached actors), and the
  // system's entry with it.
  auto* key = &sys;
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(state->actor);
  sys.middleman().actor_handle()->attach_functor([weak, key] {
    // Like CAF's, it traps exit reasons other than kill.
    if (auto actor = caf::actor_cast<caf::actor>(weak))
      caf::anon_send_exit(actor, caf::exit_reason::kill);
    auto& r = reg();
    std::lock_guard<std::mutex> guard{r.mtx};
    r.systems.erase(key);
  });
}

bool tls_enabled(caf::actor_system& sys) {
  return state_of(sys) != nullptr;
}

void trust_hosts(caf::actor_system& sys,
                 const std::vector<std::string>& hosts) {
  auto state = state_of(sys);
  if (!state)
    return;
  std::lock_guard<std::mutex> guard{state->mtx};
  for (const auto& hp : hosts)
    state->trusted.insert(host_of(hp));
}

caf::io::middleman_actor transport_actor(caf::actor_system& sys) {
  if (auto state = state_of(sys)) {
    std::lock_guard<std::mutex> guard{state->mtx};
    return state->actor;
  }
  return sys.middleman().actor_handle();
}

std::string last_tls_failure(caf::actor_system& sys, const std::string& host,
                             uint16_t port) {
  auto state = state_of(sys);
  if (!state)
    return {};
  std::lock_guard<std::mutex> guard{state->mtx};
  auto i = state->failures.find(host + ":" + std::to_string(port));
  return i == state->failures.end() ? std::string{} : i->second;
}

} // namespace actorflow
