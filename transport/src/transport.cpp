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

//
// What CAF's TLS connections share with the tensor channel's (contexts,
// identity checks, the watchdog) is tls_context.cpp; the channel's own
// TLS sockets are tls_socket.cpp.

#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>
#include <caf/policy/tcp.hpp>

#include "actorflow/graph/status.hpp"
#include "actorflow/transport/system_data.hpp"
#include "connection_guard.hpp"
#include "monitor_filter.hpp"
#include "tls_context.hpp"
#include "tls_session.hpp"

namespace actorflow {

using namespace tls_detail;
using transport_detail::monitor_access;
using transport_detail::monitor_filter;

namespace {

using caf::io::network::native_socket;
using caf::io::network::rw_state;
using default_mpx = caf::io::network::default_multiplexer;

// -- guarded connections -------------------------------------------------------

// CAF's connections, plain or TLS, under the system's connection_guard:
// the stream policy reads through TLS when there is a session, and keeps
// the connection's deadline moving while an established peer talks.
class guarded_policy {
public:
  guarded_policy(std::unique_ptr<tls_session> s,
                 std::shared_ptr<connection_guard> guard,
                 connection_guard::entry_ptr entry)
    : s_(std::move(s)), guard_(std::move(guard)), entry_(std::move(entry)) {
    // nop
  }

  // Before the socket closes (the policy is a member of the stream, which
  // closes its descriptor last): the watchdog must not shut it down once
  // the number may be reused.
  ~guarded_policy() {
    if (guard_)
      guard_->release(entry_);
  }

  guarded_policy(const guarded_policy&) = delete;
  guarded_policy& operator=(const guarded_policy&) = delete;

  rw_state read_some(size_t& result, native_socket fd, void* buf,
                     size_t len) {
    auto r = s_ ? s_->read_some(result, fd, buf, len)
                : caf::policy::tcp::read_some(result, fd, buf, len);
    if (result > 0 && entry_ && entry_->established())
      entry_->extend_silence(clock_type::now(), guard_->limits().idle_timeout);
    return r;
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf,
                      size_t len) {
    return s_ ? s_->write_some(result, fd, buf, len)
              : caf::policy::tcp::write_some(result, fd, buf, len);
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return s_ ? s_->must_read_more(fd, threshold)
              : caf::policy::tcp::must_read_more(fd, threshold);
  }

private:
  std::unique_ptr<tls_session> s_;
  std::shared_ptr<connection_guard> guard_;
  connection_guard::entry_ptr entry_;
};

// A CAF connection whose reads are bounded: CAF 0.17 allocates and zeroes
// whatever payload a BASP header announces, so each read BASP asks for is
// checked against the guard's limits (and charged to its in-flight
// budget) before the stream allocates it; a larger one shuts the socket
// down, and BASP sees the connection end.
class guarded_scribe : public caf::io::scribe {
public:
  guarded_scribe(default_mpx& mpx, native_socket fd,
                 std::unique_ptr<tls_session> s,
                 std::shared_ptr<connection_guard> guard,
                 connection_guard::entry_ptr entry, std::string peer)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)),
      guard_(guard),
      entry_(entry),
      peer_(std::move(peer)),
      detector_(guard_->limits().detector),
      session_(s.get()),
      stream_(mpx, fd, std::move(s), std::move(guard), std::move(entry)) {
    // nop
  }

  // A monitor's messages pass its filter before BASP sees them; a refused
  // one shuts the socket down, and BASP reads the end of the connection
  // next (the rest of what was read is dropped).
  bool consume(caf::execution_unit* ctx, const void* buf,
               size_t size) override {
    if (entry_)
      watch_heartbeats(static_cast<const char*>(buf), size);
    if (session_ == nullptr || session_->role() != peer_role::monitor)
      return scribe::consume(ctx, buf, size);
    if (!filter_)
      filter_ = std::make_unique<monitor_filter>(
        system_data<monitor_access>(parent()->home_system()));
    auto refused_before = filter_->refused();
    auto why = filter_->check(static_cast<const char*>(buf), size);
    if (why.empty())
      return scribe::consume(ctx, buf, size);
    if (!refused_before) {
      guard_->say("dropped the CAF connection " + peer_ + " ("
                    + session_->certificate() + "): " + why,
                  clock_type::now());
      ::shutdown(stream_.fd(), SHUT_RDWR);
    }
    return true;
  }

  ~guarded_scribe() override {
    guard_->refund(charged_);
  }

  void configure_read(caf::io::receive_policy::config config) override {
    if (!admit_read(config.second)) {
      // The old read size stays (nothing is allocated); the stream reads
      // the end of the connection next.
      ::shutdown(stream_.fd(), SHUT_RDWR);
      return;
    }
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
      // A write event runs a TLS handshake's first steps even when CAF
      // has nothing to write yet.
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
  // BASP's reads alternate header and payload (when the header announces
  // one); each heartbeat header is a beat of the connection's failure
  // detector, which sets the silence the guard tolerates from then on.
  void watch_heartbeats(const char* data, size_t size) {
    if (payload_due_) {
      payload_due_ = false;
      return;
    }
    if (size != caf::io::basp::header_size)
      return;
    caf::io::basp::header hdr;
    caf::binary_deserializer source{nullptr, data, size};
    if (source(hdr))
      return;
    payload_due_ = hdr.payload_len > 0;
    if (hdr.operation != caf::io::basp::message_type::heartbeat)
      return;
    auto now = clock_type::now();
    detector_.beat(now);
    tolerate(now);
  }

  // The silence tolerated from `now` on: the detector's, from its history
  // (before the first heartbeat, its estimate).
  void tolerate(clock_type::time_point now) {
    // Without heartbeats (middleman.heartbeat-interval 0) silence says
    // nothing: only the idle timeout applies, as before the detector.
    if (detector_.settings().heartbeat_interval.count() > 0)
      entry_->set_tolerance(detector_.tolerated(), detector_.mean(),
                            detector_.std_dev());
    entry_->extend_silence(now, guard_->limits().idle_timeout);
  }

  // Whether BASP may read `n` bytes next. Its reads go header, payload,
  // header: the third is asked for once BASP accepted the peer's
  // handshake, and from then on the connection is established.
  bool admit_read(size_t n) {
    auto now = clock_type::now();
    if (++reads_ == 3) {
      if (entry_) {
        entry_->set_established();
        tolerate(now);
      }
    }
    const auto& limits = guard_->limits();
    bool established = reads_ >= 3;
    auto limit = established ? limits.max_message_bytes
                             : limits.max_handshake_bytes;
    if (n > limit) {
      guard_->say("dropped the CAF connection " + peer_ + ": it announced "
                    + std::to_string(n) + " bytes (at most "
                    + std::to_string(limit)
                    + (established ? "" : " before its handshake") + ")",
                  now);
      return false;
    }
    if (n > charged_) {
      if (!guard_->charge(n - charged_, "the CAF connection " + peer_, now))
        return false;
      charged_ = n;
    }
    return true;
  }

  std::shared_ptr<connection_guard> guard_;
  connection_guard::entry_ptr entry_;
  std::string peer_;
  phi_accrual detector_;
  bool payload_due_ = false;
  bool launched_ = false;
  size_t reads_ = 0;
  uint64_t charged_ = 0;
  // The TLS session inside stream_ (nullptr in plain mode), and the filter
  // of a monitor's reads.
  tls_session* session_;
  std::unique_ptr<monitor_filter> filter_;
  caf::io::network::stream_impl<guarded_policy> stream_;
};

void set_nodelay(native_socket fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Admits each connection through the guard, and with TLS starts its
// session.
class guarded_doorman : public caf::io::network::doorman_impl {
public:
  guarded_doorman(default_mpx& mpx, native_socket fd,
                  std::shared_ptr<tls_state> state,
                  std::shared_ptr<connection_guard> guard)
    : doorman_impl(mpx, fd), state_(std::move(state)), guard_(std::move(guard)) {
    // nop
  }

  bool new_connection() override {
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    auto entry = guard_->admit(fd, peer_address(fd),
                               state_ ? "CAF (TLS)" : "CAF", clock_type::now());
    if (!entry) {
      caf::io::network::close_socket(fd);
      return false;
    }
    caf::io::network::nonblocking(fd, true);
    set_nodelay(fd);
    auto peer = peer_address(fd, true);
    std::unique_ptr<tls_session> s;
    if (state_) {
      s = std::make_unique<tls_session>(state_, fd, true, "");
      if (!s->valid()) {
        state_->say("cannot start a TLS session for " + peer + ": "
                    + ssl_errors());
        guard_->release(entry);
        caf::io::network::close_socket(fd);
        return false;
      }
    }
    auto scribe = caf::make_counted<guarded_scribe>(
      mpx, fd, std::move(s), guard_, std::move(entry), "from " + peer);
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }

private:
  std::shared_ptr<tls_state> state_;
  std::shared_ptr<connection_guard> guard_;
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

// The middleman actor everything in actorflow connects and publishes
// through (transport_actor): its connect/open make guarded scribes and
// doormen, over TLS when the system has it.
class guarded_middleman_actor : public caf::io::middleman_actor_impl {
public:
  guarded_middleman_actor(caf::actor_config& cfg, caf::actor broker,
                          std::shared_ptr<tls_state> state,
                          std::shared_ptr<connection_guard> guard)
    : middleman_actor_impl(cfg, std::move(broker)),
      state_(std::move(state)),
      guard_(std::move(guard)) {
    // nop
  }

  const char* name() const override {
    return "actorflow_middleman";
  }
  void on_exit() override {
    middleman_actor_impl::on_exit();
    // The state's handle would keep this actor (and the system's
    // shutdown, which waits for it) alive.
    if (state_) {
      std::lock_guard<std::mutex> guard{state_->mtx};
      state_->actor = nullptr;
    }
  }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             uint16_t port) override {
    auto endpoint = host + ":" + std::to_string(port);
    // A reason from an earlier attempt must not explain this one.
    if (state_)
      state_->clear_failure(endpoint);
    auto fd = connect_within(host, port,
                             state_ ? state_->cfg.handshake_timeout
                                    : guard_->limits().handshake_timeout);
    if (!fd)
      return std::move(fd.error());
    std::unique_ptr<tls_session> s;
    if (state_) {
      s = std::make_unique<tls_session>(state_, *fd, false, endpoint);
      if (!s->valid()) {
        caf::io::network::close_socket(*fd);
        return caf::make_error(caf::sec::cannot_connect_to_node,
                               "cannot start a TLS session: " + ssl_errors());
      }
    }
    // Outgoing: bounded reads, no admission (this process chose the
    // peer), the same deadlines when heartbeats judge silence (without
    // them, none: CAF never timed such a connection out either).
    auto entry = guard_->limits().detector.heartbeat_interval.count() > 0
                   ? guard_->track(*fd, endpoint, clock_type::now())
                   : nullptr;
    return caf::make_counted<guarded_scribe>(mpx(), *fd, std::move(s), guard_,
                                             std::move(entry),
                                             "to " + endpoint);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<guarded_doorman>(mpx(), *fd, state_, guard_);
  }

private:
  default_mpx& mpx() {
    return static_cast<default_mpx&>(system().middleman().backend());
  }

  std::shared_ptr<tls_state> state_;
  std::shared_ptr<connection_guard> guard_;
};

// A system's guarded middleman actor without TLS (system_data.hpp), made
// by the first transport_actor call.
struct plain_slot {
  std::mutex mtx;
  caf::io::middleman_actor actor;
};

// Spawns the guarded middleman actor of `sys` and ties its end to CAF's
// own middleman actor, which the middleman kills when it stops (the
// system's shutdown then waits for detached actors); `on_end` runs then.
caf::io::middleman_actor spawn_guarded(caf::actor_system& sys,
                                       std::shared_ptr<tls_state> state,
                                       std::function<void()> on_end) {
  auto broker
    = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  // Detached, as CAF's own middleman actor: connect() blocks for up to the
  // handshake timeout.
  auto actor = sys.spawn<guarded_middleman_actor, caf::detached + caf::hidden>(
    broker, std::move(state), connection_guard_of(sys));
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(actor);
  sys.middleman().actor_handle()->attach_functor(
    [weak, on_end = std::move(on_end)] {
      // Like CAF's, it traps exit reasons other than kill.
      if (auto a = caf::actor_cast<caf::actor>(weak))
        caf::anon_send_exit(a, caf::exit_reason::kill);
      on_end();
    });
  return actor;
}

} // namespace

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
  {
    auto plain = system_data<plain_slot>(sys);
    std::lock_guard<std::mutex> guard{plain->mtx};
    if (plain->actor)
      throw op_error(error_code::failed_precondition,
                     "TLS must be enabled before the actor system's first "
                     "connection");
  }
  auto slot = tls_slot_of(sys);
  auto taken = [&] {
    std::lock_guard<std::mutex> guard{slot->mtx};
    return slot->state != nullptr;
  };
  if (taken())
    throw op_error(error_code::failed_precondition,
                   "TLS is enabled for this actor system already");
  // Spawned without the lock: a middleman that is gone already runs the
  // end at once, which takes the lock.
  std::weak_ptr<tls_state> weak_state = state;
  auto actor = spawn_guarded(sys, state, [slot, weak_state] {
    std::lock_guard<std::mutex> guard{slot->mtx};
    if (slot->state == weak_state.lock())
      slot->state = nullptr;
  });
  std::lock_guard<std::mutex> guard{slot->mtx};
  if (slot->state != nullptr) {
    caf::anon_send_exit(actor, caf::exit_reason::kill);
    throw op_error(error_code::failed_precondition,
                   "TLS is enabled for this actor system already");
  }
  state->actor = actor;
  slot->state = state;
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

void allow_monitors(caf::actor_system& sys, caf::actor_id id,
                    const std::vector<caf::atom_value>& atoms) {
  std::vector<uint64_t> values;
  for (auto atom : atoms)
    values.push_back(static_cast<uint64_t>(atom));
  system_data<monitor_access>(sys)->allow(id, std::move(values));
}

caf::io::middleman_actor transport_actor(caf::actor_system& sys) {
  if (auto state = state_of(sys)) {
    std::lock_guard<std::mutex> guard{state->mtx};
    return state->actor;
  }
  auto plain = system_data<plain_slot>(sys);
  {
    std::lock_guard<std::mutex> guard{plain->mtx};
    if (plain->actor)
      return plain->actor;
  }
  // Spawned without the lock: a middleman that is gone already runs the
  // end at once, which takes the lock.
  auto actor = spawn_guarded(sys, nullptr, [plain] {
    std::lock_guard<std::mutex> guard{plain->mtx};
    plain->actor = nullptr;
  });
  std::lock_guard<std::mutex> guard{plain->mtx};
  if (plain->actor)
    caf::anon_send_exit(actor, caf::exit_reason::kill);
  else
    plain->actor = actor;
  return plain->actor;
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
