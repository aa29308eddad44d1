// TLS on the tensor channel's own connections (tls_socket.hpp), with the
// contexts, identity checks and watchdog of CAF's (tls_context.hpp).

#include "tls_socket.hpp"

#include <cerrno>
#include <string>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "connection_guard.hpp"
#include "tls_context.hpp"

namespace actorflow {

using namespace tls_detail;

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
  auto peer = peer_address(fd, true);
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
  // peer_accepted says why when it refuses. A monitor only watches: the
  // channel carries a step's tensors, which it may neither send nor read.
  peer_role role = peer_role::client;
  if (why.empty() && peer_accepted(state, ssl_, incoming, endpoint, why, role)
      && role == peer_role::monitor)
    why = "a monitor certificate may only watch, not carry tensors";
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

} // namespace actorflow
