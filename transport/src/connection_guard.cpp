#include "actorflow/graph/log_ring.hpp"
#include "connection_guard.hpp"

#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include "actorflow/transport/system_data.hpp"

namespace actorflow {

connection_guard::connection_guard(guard_limits limits,
                                   std::function<void(int)> shut,
                                   std::function<void(const std::string&)> log,
                                   std::function<size_t(int)> unread)
  : limits_(limits),
    shut_(std::move(shut)),
    unread_(std::move(unread)),
    log_(std::move(log), limits.log_burst, limits.log_interval) {
  // nop
}

connection_guard::entry_ptr
connection_guard::admit(int fd, const std::string& peer,
                        const std::string& what, time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& mine = per_peer_[peer];
  for (;;) {
    bool peer_full = mine >= limits_.max_per_peer;
    bool all_full = open_.size() >= limits_.max_connections;
    if (!peer_full && !all_full)
      break;
    // The oldest that has not finished its handshake makes room.
    entry* victim = nullptr;
    for (auto& [seq, e] : open_)
      if (!e->shut_ && !e->established()
          && (!peer_full || e->peer_ == peer)) {
        victim = e.get();
        break;
      }
    if (victim == nullptr) {
      say("refused " + what + " connection from " + peer + ": "
                   + (peer_full ? std::to_string(mine)
                                    + " connections from it are open"
                                : std::to_string(open_.size())
                                    + " connections are open")
                   + ", all past their handshake",
                 now);
      if (mine == 0)
        per_peer_.erase(peer);
      return nullptr;
    }
    say("closed a " + what + " connection from " + victim->peer_
                 + " that had not finished its handshake, to make room for "
                 + peer,
               now);
    shut_locked(*victim);
    // Counted out now: its owner's release finds it gone.
    auto keep = open_.at(victim->seq_);
    open_.erase(victim->seq_);
    if (auto i = per_peer_.find(victim->peer_); i != per_peer_.end()
                                                 && --i->second == 0
                                                 && victim->peer_ != peer)
      per_peer_.erase(i);
  }
  auto e = std::make_shared<entry>();
  e->peer_ = peer;
  e->fd_ = fd;
  e->seq_ = next_seq_++;
  e->extend(now, limits_.handshake_timeout);
  open_.emplace(e->seq_, e);
  ++mine;
  return e;
}

connection_guard::entry_ptr
connection_guard::track(int fd, const std::string& peer, time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto e = std::make_shared<entry>();
  e->peer_ = peer;
  e->fd_ = fd;
  e->seq_ = next_seq_++;
  e->outgoing_ = true;
  e->extend(now, limits_.handshake_timeout);
  tracked_.emplace(e->seq_, e);
  return e;
}

void connection_guard::release(const entry_ptr& e) {
  if (!e)
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  if (e->outgoing_) {
    tracked_.erase(e->seq_);
    e->fd_ = -1;
    return;
  }
  auto i = open_.find(e->seq_);
  if (i == open_.end() || i->second != e)
    return;
  open_.erase(i);
  if (auto j = per_peer_.find(e->peer_); j != per_peer_.end() && --j->second == 0)
    per_peer_.erase(j);
  // Its owner closes the socket next: never shut it down from here again.
  e->fd_ = -1;
}

size_t connection_guard::expire(time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  auto now_ns = now.time_since_epoch().count();
  auto check = [&](entry& e) {
    auto deadline = e.deadline_ns_.load(std::memory_order_relaxed);
    if (e.shut_ || deadline == 0 || deadline > now_ns)
      return;
    if (e.established() && unread_ && e.fd_ >= 0 && unread_(e.fd_) > 0) {
      // The peer spoke and this process has not read it yet: this side
      // is the slow one. Looked at again a heartbeat interval on.
      e.extend(now, std::max(limits_.detector.heartbeat_interval,
                             std::chrono::milliseconds{250}));
      return;
    }
    auto tolerance = e.tolerance_ns_.load(std::memory_order_relaxed);
    std::string why;
    if (!e.established()) {
      why = "no handshake for "
            + std::to_string(limits_.handshake_timeout.count()) + " ms";
    } else if (tolerance > 0) {
      auto ms = [](int64_t us) { return std::to_string((us + 500) / 1000); };
      why = "silent for " + ms(tolerance / 1000)
            + " ms, longer than its heartbeats' history tolerates (every "
            + ms(e.mean_us_.load(std::memory_order_relaxed)) + " ms, spread "
            + ms(e.std_us_.load(std::memory_order_relaxed))
            + " ms; phi reached "
            + std::to_string(static_cast<int>(limits_.detector.threshold))
            + ")";
    } else {
      why = "silent for " + std::to_string(limits_.idle_timeout.count())
            + " ms";
    }
    say(std::string{e.outgoing_ ? "closed the connection to "
                                : "closed the connection from "}
          + e.peer_ + ": " + why,
        now);
    shut_locked(e);
    ++n;
  };
  for (auto& [seq, e] : open_)
    check(*e);
  for (auto& [seq, e] : tracked_)
    check(*e);
  return n;
}

bool connection_guard::charge(uint64_t n, const std::string& who,
                              time_point now) {
  auto cur = inflight_.load(std::memory_order_relaxed);
  do {
    if (n > limits_.max_inflight_bytes
        || cur > limits_.max_inflight_bytes - n) {
      say("refused " + std::to_string(n) + " bytes announced by "
                   + who + ": " + std::to_string(cur)
                   + " bytes from peers are in flight already (at most "
                   + std::to_string(limits_.max_inflight_bytes) + ")",
                 now);
      return false;
    }
  } while (!inflight_.compare_exchange_weak(cur, cur + n,
                                            std::memory_order_relaxed));
  return true;
}

void connection_guard::refund(uint64_t n) noexcept {
  inflight_.fetch_sub(n, std::memory_order_relaxed);
}

size_t connection_guard::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return open_.size();
}

size_t connection_guard::size(const std::string& peer) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = per_peer_.find(peer);
  return i == per_peer_.end() ? 0 : i->second;
}

void connection_guard::shut_locked(entry& e) {
  e.shut_ = true;
  e.clear_deadline();
  if (e.fd_ >= 0 && shut_)
    shut_(e.fd_);
}

namespace {

// One end of `fd`, numeric: the peer's (getpeername) or its own.
std::string end_address(int fd, bool peer, bool with_port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, a, &len) : ::getsockname(fd, a, &len)) != 0
      || ::getnameinfo(a, len, host, sizeof(host), port, sizeof(port),
                       NI_NUMERICHOST | NI_NUMERICSERV)
           != 0)
    return "?";
  return with_port ? std::string{host} + ":" + port : std::string{host};
}

} // namespace

std::string peer_address(int fd, bool with_port) {
  return end_address(fd, true, with_port);
}

std::string local_address(int fd) {
  return end_address(fd, false, true);
}

namespace {

struct guard_slot {
  std::mutex mtx;
  std::shared_ptr<connection_guard> guard;
};

std::chrono::milliseconds option_ms(caf::actor_system& sys, const char* key,
                                    std::chrono::milliseconds fallback) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(caf::get_or(
    sys.config(), key, caf::timespan{fallback}));
}

uint64_t option_bytes(caf::actor_system& sys, const char* key,
                      uint64_t fallback) {
  auto v = caf::get_or(sys.config(), key, static_cast<int64_t>(fallback));
  return v > 0 ? static_cast<uint64_t>(v) : fallback;
}

// Shuts down connections past their deadline four times a second, for as
// long as the guard lives.
void watch(std::weak_ptr<connection_guard> weak) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto guard = weak.lock();
    if (!guard)
      return;
    guard->expire(connection_guard::clock_type::now());
  }
}

} // namespace

guard_limits guard_limits_of(caf::actor_system& sys) {
  guard_limits l;
  auto count = [&](const char* key, size_t fallback) {
    auto v = caf::get_or(sys.config(), key, static_cast<int64_t>(fallback));
    return v > 0 ? static_cast<size_t>(v) : fallback;
  };
  l.max_connections = count("actorflow.max-connections", l.max_connections);
  l.max_per_peer = count("actorflow.max-connections-per-peer", l.max_per_peer);
  l.handshake_timeout = option_ms(sys, "actorflow.handshake-timeout",
                                  l.handshake_timeout);
  l.idle_timeout = option_ms(sys, "actorflow.idle-timeout", l.idle_timeout);
  auto& d = l.detector;
  d.max_silence = l.idle_timeout;
  d.heartbeat_interval = option_ms(sys, "middleman.heartbeat-interval",
                                   d.heartbeat_interval);
  d.acceptable_pause = option_ms(sys, "actorflow.acceptable-heartbeat-pause",
                                 d.acceptable_pause);
  d.min_std_dev = option_ms(sys, "actorflow.min-heartbeat-std-dev",
                            d.min_std_dev);
  const char* threshold = "actorflow.failure-detector-threshold";
  if (auto x = caf::get_if<double>(&sys.config(), threshold); x && *x > 0)
    d.threshold = *x;
  else if (auto n = caf::get_if<int64_t>(&sys.config(), threshold); n && *n > 0)
    d.threshold = static_cast<double>(*n);
  l.max_message_bytes = option_bytes(sys, "actorflow.max-message-bytes",
                                     l.max_message_bytes);
  // A quarter of the machine's memory (at least 256 MiB) unless set.
  auto pages = ::sysconf(_SC_PHYS_PAGES);
  auto page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0)
    l.max_inflight_bytes = std::max<uint64_t>(
      uint64_t{256} << 20, static_cast<uint64_t>(pages)
                             * static_cast<uint64_t>(page) / 4);
  l.max_inflight_bytes = option_bytes(sys, "actorflow.max-inflight-bytes",
                                      l.max_inflight_bytes);
  return l;
}

std::shared_ptr<connection_guard> make_watched_guard(guard_limits limits) {
  auto guard = std::make_shared<connection_guard>(
    limits, [](int fd) { ::shutdown(fd, SHUT_RDWR); },
    [](const std::string& line) {
      std::fprintf(stderr, "actorflow: warning: %s\n", line.c_str());
      note_log(log_level::warning, line);
    },
    [](int fd) -> size_t {
      int n = 0;
      return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<size_t>(n)
                                                     : 0;
    });
  std::thread{watch, std::weak_ptr<connection_guard>{guard}}.detach();
  return guard;
}

std::shared_ptr<connection_guard> connection_guard_of(caf::actor_system& sys) {
  auto slot = system_data<guard_slot>(sys);
  std::lock_guard<std::mutex> lock{slot->mtx};
  if (!slot->guard)
    slot->guard = make_watched_guard(guard_limits_of(sys));
  return slot->guard;
}

} // namespace actorflow
