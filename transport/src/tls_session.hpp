#pragma once

// Private to transport/: one OpenSSL session over a CAF connection's
// socket, as the stream policy of transport.cpp's guarded connections
// reads and writes it: handshake, the peer's certificate checked against
// the host dialed or the cluster's hosts, non-blocking I/O.

#include <cerrno>
#include <memory>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/rw_state.hpp>

#include "tls_context.hpp"

namespace actorflow::tls_detail {

using caf::io::network::native_socket;
using caf::io::network::rw_state;

class tls_session {
public:
  tls_session(std::shared_ptr<tls_state> state, native_socket fd,
              bool incoming, std::string endpoint)
    : state_(std::move(state)),
      incoming_(incoming),
      endpoint_(std::move(endpoint)),
      peer_(peer_address(fd, true)) {
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
    watch_handshake(this, fd, clock_type::now() + state_->cfg.handshake_timeout,
                    state_, std::move(what));
  }

  ~tls_session() {
    forget_handshake(this);
    SSL_free(ssl_);
  }

  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  bool valid() const noexcept {
    return ssl_ != nullptr;
  }

  /// The peer's role (tls_context.hpp), once the handshake is done.
  peer_role role() const noexcept {
    return role_;
  }

  /// The peer's certificate as logs name it, once the handshake is done.
  const std::string& certificate() const noexcept {
    return certificate_;
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
    // the client's certificate; a refusal arrives as the first read, as an
    // alert or as the connection closed (which OpenSSL 3 reports as an
    // "unexpected eof" error or not, depending on timing).
    if (!got_data_ && !incoming_) {
      bool refused = e == SSL_ERROR_SSL;
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
      if (refused
          && ERR_GET_REASON(ERR_peek_error())
               == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        refused = false;
        ERR_clear_error();
      }
#endif
      state_->failed(endpoint_,
                     refused
                       ? "the peer refused this process: " + ssl_errors()
                       : "the peer closed the connection right after the "
                         "TLS handshake (does it accept this process's "
                         "certificate name?)");
    }
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
      forget_handshake(this);
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
    forget_handshake(this);
    failed_ = true;
    refuse(handshake_failure(e, verify_error_));
    return -1;
  }

  bool check_peer() {
    std::string why;
    if (!peer_accepted(*state_, ssl_, incoming_, endpoint_, why, role_)) {
      refuse(why);
      return false;
    }
    if (!incoming_)
      state_->clear_failure(endpoint_);
    certificate_ = describe(SSL_get0_peer_certificate(ssl_));
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
  peer_role role_ = peer_role::client;
  std::string certificate_;
  std::string endpoint_;
  std::string peer_;
  // Set by verify_cb: why the chain of the peer's certificate failed.
  std::string verify_error_;
};

} // namespace actorflow::tls_detail
