#include "metrics_https.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "actorflow/graph/status.hpp"
#include "actorflow/transport/refusal_log.hpp"
#include "actorflow/transport/transport.hpp"

namespace actorflow::detail {

namespace {

/// Says the refusals of one server's readers, a few a minute at most
/// (refusal_log); to stderr when the TLS config has no log of its own.
/// Thread-safe (httplib's workers).
class metrics_refusals {
public:
  metrics_refusals(std::function<void(const std::string&)> sink,
                   std::string who)
    : log_([sink = std::move(sink)](const std::string& line) {
        if (sink)
          sink(line);
        else
          std::fprintf(stderr, "%s\n", line.c_str());
      }),
      who_(std::move(who)) {
    // nop
  }

  void say(const std::string& peer, const std::string& why) {
    log_.say("refused metrics reader " + peer + " of " + who_ + ": " + why);
  }

private:
  refusal_log log_;
  std::string who_;
};

// The refusal log of the context a handshake runs in (its ex_data).
int log_index() {
  static int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr,
                                              nullptr);
  return index;
}

std::string peer_of(SSL* ssl) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(SSL_get_fd(ssl), reinterpret_cast<sockaddr*>(&addr), &len)
      != 0)
    return "?";
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

std::string subject_of(X509* cert) {
  if (!cert)
    return "none";
  char name[256] = {};
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof(name) - 1);
  return std::string{"'"} + name + "'";
}

// The handshake's certificate check: says why it fails.
int verify(int ok, X509_STORE_CTX* store) {
  if (ok)
    return ok;
  auto* ssl = static_cast<SSL*>(
    X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* log = static_cast<metrics_refusals*>(
    SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), log_index()));
  if (log)
    log->say(peer_of(ssl),
             "certificate "
               + subject_of(X509_STORE_CTX_get_current_cert(store)) + ": "
               + X509_verify_cert_error_string(X509_STORE_CTX_get_error(store))
               + " (not signed by the cluster's CA)");
  return 0;
}

int passphrase(char* buf, int size, int, void* user) {
  const auto& pass = *static_cast<const std::string*>(user);
  auto n = std::min<int>(size, static_cast<int>(pass.size()));
  std::copy_n(pass.data(), n, buf);
  return n;
}

} // namespace

std::unique_ptr<httplib::Server> metrics_https(const tls_config& tls,
                                               const std::string& who) {
  // Readable messages naming the option and file for bad ones.
  check_tls_config(tls);
  // Kept by the server's handler below, so as long as the server: its
  // context (whose ex_data points to it) goes with it.
  auto log = std::make_shared<metrics_refusals>(tls.log, who);
  auto http = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
    auto* c = &ctx;
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(c, tls.cert_file.c_str()) != 1)
      return false;
    EVP_PKEY* key = nullptr;
    if (auto* bio = BIO_new_file(tls.key_file.c_str(), "r")) {
      key = PEM_read_bio_PrivateKey(
        bio, nullptr, passphrase, const_cast<std::string*>(&tls.key_passphrase));
      BIO_free(bio);
    }
    if (!key)
      return false;
    auto key_ok = SSL_CTX_use_PrivateKey(c, key) == 1
                  && SSL_CTX_check_private_key(c) == 1;
    EVP_PKEY_free(key);
    if (!key_ok
        || SSL_CTX_load_verify_locations(c, tls.ca_file.c_str(), nullptr) != 1)
      return false;
    // Which CA's certificates to offer (curl, Prometheus pick by it).
    if (auto* names = SSL_load_client_CA_file(tls.ca_file.c_str()))
      SSL_CTX_set_client_CA_list(c, names);
    // Asked for, not required: a reader without one gets a 403 that says
    // why, over TLS; one the CA does not sign fails the handshake.
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, verify);
    return true;
  });
  if (!http->is_valid()) {
    ERR_clear_error();
    throw op_error(error_code::invalid_argument,
                   "cannot serve metrics of " + who + " over TLS with "
                     + tls.cert_file + ", " + tls.key_file + " and "
                     + tls.ca_file);
  }
  SSL_CTX_set_ex_data(http->ssl_context(), log_index(), log.get());
  http->set_pre_routing_handler([log](const httplib::Request& req,
                                      httplib::Response& res) {
    // A context with SSL_VERIFY_PEER: the certificate, if any, is valid.
    auto* ssl = const_cast<SSL*>(req.ssl);
    X509* cert = ssl ? SSL_get1_peer_certificate(ssl) : nullptr;
    if (cert) {
      X509_free(cert);
      return httplib::Server::HandlerResponse::Unhandled;
    }
    log->say(req.remote_addr + ":" + std::to_string(req.remote_port),
             "no certificate");
    res.status = 403;
    res.set_content("403 Forbidden: /metrics needs a client certificate "
                    "signed by the cluster's CA\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  return http;
}

} // namespace actorflow::detail
