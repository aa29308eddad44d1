#pragma once

// Private to transport/: what a process lets a peer hold on the ports it
// listens on (CAF's, with or without TLS, and the tensor channel's).
// Connections are bounded in total and per peer address; when a bound is
// reached, the oldest connection that has not yet proven itself (finished
// its handshake) makes room, so idle strangers cannot keep a legitimate
// peer out. Every connection has a deadline its owner moves as bytes come
// (handshake, silence, a frame stalled midway); past it, the watchdog
// shuts the socket down and its owner sees the end of the stream. Bytes a
// peer announces (a message or tensor about to be read) are charged to a
// budget before they are allocated. Refusals are logged at a bounded rate.
// Connections this process dialed are watched too (`track`), outside the
// bounds. An established CAF connection's silence is judged by its
// heartbeats' history (phi_accrual.hpp, set by its owner); one whose peer
// has sent bytes this process has not read yet is not silent (this
// process is the slow one), so it is never shut for that.
//
// CAF-free; the clock is passed in, and `shut` and `log` are given, so the
// rules are tested without sockets (test/transport/connection_guard_test).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actorflow/transport/refusal_log.hpp"
#include "phi_accrual.hpp"

namespace actorflow {

/// The bounds (actor system options `actorflow.*`, docs/DESIGN.md).
struct guard_limits {
  /// Connections accepted and open at once, over all ports.
  size_t max_connections = 1024;
  /// Of those, from one peer address.
  size_t max_per_peer = 128;
  /// From accept to a finished handshake (TLS and BASP, or the tensor
  /// channel's hello).
  std::chrono::milliseconds handshake_timeout{10'000};
  /// Longest silence of an established CAF connection (its peer sends a
  /// heartbeat every 0.5 s; within it, `detector` judges) and of a
  /// tensor-channel frame midway.
  std::chrono::milliseconds idle_timeout{10'000};
  /// How an established CAF connection's silence is judged (its
  /// max_silence is idle_timeout).
  phi_settings detector;
  /// Largest message one CAF connection may announce once established;
  /// before, `max_handshake_bytes`.
  uint64_t max_message_bytes = uint64_t{1} << 30;
  uint64_t max_handshake_bytes = uint64_t{64} << 10;
  /// Bytes announced by peers and not yet delivered, over all connections
  /// (guard_limits_of: a quarter of the machine's memory).
  uint64_t max_inflight_bytes = uint64_t{4} << 30;
  /// Refusal lines per `log_interval` (refusal_log.hpp).
  size_t log_burst = 5;
  std::chrono::milliseconds log_interval{10'000};
};

class connection_guard {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  /// One admitted connection. Its owner moves the deadline and says when
  /// the handshake is done; `release` (or the destructor) takes it out
  /// before the owner closes the socket, so the watchdog never shuts down
  /// a descriptor that was reused.
  class entry {
  public:
    /// Sets the deadline to `now + timeout` (none for a zero timeout).
    void extend(time_point now, std::chrono::milliseconds timeout) noexcept {
      deadline_ns_.store(timeout.count() > 0
                           ? (now + timeout).time_since_epoch().count()
                           : 0,
                         std::memory_order_relaxed);
    }
    /// Sets the deadline to `now` plus the silence this connection is
    /// tolerated (set_tolerance), or `fallback` before one was set.
    void extend_silence(time_point now,
                        std::chrono::milliseconds fallback) noexcept {
      auto t = tolerance_ns_.load(std::memory_order_relaxed);
      auto d = t > 0 ? std::chrono::nanoseconds{t}
                     : std::chrono::nanoseconds{fallback};
      deadline_ns_.store((now + d).time_since_epoch().count(),
                         std::memory_order_relaxed);
    }
    /// The silence tolerated from now on, learnt from the peer's
    /// heartbeats (their mean and spread, for the log).
    void set_tolerance(std::chrono::nanoseconds tolerated, double mean_s,
                       double std_dev_s) noexcept {
      tolerance_ns_.store(tolerated.count(), std::memory_order_relaxed);
      mean_us_.store(static_cast<int64_t>(mean_s * 1e6),
                     std::memory_order_relaxed);
      std_us_.store(static_cast<int64_t>(std_dev_s * 1e6),
                    std::memory_order_relaxed);
    }
    void clear_deadline() noexcept {
      deadline_ns_.store(0, std::memory_order_relaxed);
    }
    void set_established() noexcept {
      established_.store(true, std::memory_order_relaxed);
    }
    bool established() const noexcept {
      return established_.load(std::memory_order_relaxed);
    }
    const std::string& peer() const noexcept {
      return peer_;
    }

  private:
    friend class connection_guard;
    std::string peer_;
    int fd_ = -1;
    uint64_t seq_ = 0;
    bool shut_ = false;
    // Dialed by this process (track), not admitted.
    bool outgoing_ = false;
    std::atomic<int64_t> deadline_ns_{0};
    std::atomic<int64_t> tolerance_ns_{0};
    std::atomic<int64_t> mean_us_{0};
    std::atomic<int64_t> std_us_{0};
    std::atomic<bool> established_{false};
  };

  using entry_ptr = std::shared_ptr<entry>;

  /// `shut(fd)` ends a connection (shutdown(2): its owner then reads EOF);
  /// `log(line)` says a refusal; `unread(fd)` is how many bytes wait in
  /// the socket's receive queue (none given: never any).
  connection_guard(guard_limits limits, std::function<void(int)> shut,
                   std::function<void(const std::string&)> log,
                   std::function<size_t(int)> unread = {});

  const guard_limits& limits() const noexcept {
    return limits_;
  }

  /// Admits a connection on `fd` from `peer` (an address, no port) whose
  /// handshake must end by `now + handshake_timeout`; `what` names the
  /// port in the log ("CAF", "tensor channel"). At a bound, the oldest
  /// connection not yet established (from `peer` when the per-peer bound
  /// is the one reached) is shut down to make room; if there is none, the
  /// new one is refused: nullptr, and the refusal logged. Does not close
  /// `fd`.
  entry_ptr admit(int fd, const std::string& peer, const std::string& what,
                  time_point now);

  /// Watches a connection this process dialed to `peer` (host:port):
  /// deadlines as for an admitted one, outside the bounds.
  entry_ptr track(int fd, const std::string& peer, time_point now);

  /// Takes `e` out (idempotent). Call before closing its socket.
  void release(const entry_ptr& e);

  /// Shuts down every connection past its deadline at `now`, logging
  /// each; returns how many. An established one with unread bytes is
  /// given another heartbeat interval instead.
  size_t expire(time_point now);

  /// Charges `n` announced bytes: false (and logged, naming `who`) if the
  /// in-flight total would pass max_inflight_bytes.
  bool charge(uint64_t n, const std::string& who, time_point now);
  void refund(uint64_t n) noexcept;

  /// Says `line` unless log_burst lines were said in this log_interval
  /// (refusal_log).
  void say(const std::string& line, time_point now) {
    log_.say(line, now);
  }

  /// Open connections (all, and from `peer`).
  size_t size() const;
  size_t size(const std::string& peer) const;
  uint64_t inflight() const noexcept {
    return inflight_.load(std::memory_order_relaxed);
  }

private:
  void shut_locked(entry& e);

  guard_limits limits_;
  std::function<void(int)> shut_;
  std::function<size_t(int)> unread_;
  refusal_log log_;
  mutable std::mutex mtx_;
  uint64_t next_seq_ = 1;
  // By admission order (seq), so the oldest comes first.
  std::map<uint64_t, entry_ptr> open_;
  std::map<std::string, size_t> per_peer_;
  // Dialed connections (track), by seq too.
  std::map<uint64_t, entry_ptr> tracked_;
  std::atomic<uint64_t> inflight_{0};
};

/// `sys`'s limits: the defaults above, or the options actorflow.max-connections,
/// max-connections-per-peer, handshake-timeout, idle-timeout,
/// max-message-bytes, max-inflight-bytes, failure-detector-threshold,
/// acceptable-heartbeat-pause, min-heartbeat-std-dev and CAF's
/// middleman.heartbeat-interval where set.
guard_limits guard_limits_of(caf::actor_system& sys);

/// A guard that shuts connections down with shutdown(2), logs refusals to
/// stderr as warnings, and has a watchdog thread that checks deadlines
/// four times a second while the guard lives.
std::shared_ptr<connection_guard> make_watched_guard(guard_limits limits);

/// The guard of `sys`'s CAF connections (made on first use, with a watchdog
/// thread that checks deadlines four times a second while it lives);
/// refusals go to stderr as warnings.
std::shared_ptr<connection_guard> connection_guard_of(caf::actor_system& sys);

/// The peer's address of a connected socket, numeric, with ":port" when
/// `with_port` ("?" if unknown). The one such helper of transport/.
std::string peer_address(int fd, bool with_port = false);

/// The address `fd` is bound to on this side, "host:port" ("?" if unknown).
std::string local_address(int fd);

} // namespace actorflow
