// The tensor channel's receiving half (channel_registry.hpp): one
// listener per host and actor system, one reading thread per incoming
// connection. What a frame looks like: tensor_channel.cpp.

#include "channel_registry.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <caf/actor_cast.hpp>
#include <caf/message.hpp>

#include "actorflow/transport/env_number.hpp"
#include "actorflow/transport/run_actors.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "polite_poll.hpp"
#include "shared_ring.hpp"
#include "tensor_frame.hpp"

namespace actorflow::tensor_channel {

namespace {

// process's system has TLS on.
struct channel_in {
  int fd = -1;
  tls_socket* tls = nullptr;
  // Its system's channel (held by the connection's thread).
  channel_registry* reg = nullptr;
  // Its admission: read_all moves its deadline while a frame comes.
  connection_guard::entry* entry = nullptr;
  // Its counters and the name its peer gave (link_stats).
  incoming_stat* stat = nullptr;
};

std::chrono::nanoseconds channel_spin();
void await_frame(const channel_in& in, std::chrono::nanoseconds spin);

// Reads exactly n bytes from a blocking socket; false on EOF or error.
// While the rest of what it waits for is on its way (a large frame's
// data, written by the peer as the socket drains), it polls for up to
// channel_spin() since the last bytes came before it blocks: a blocked
// thread's wake-up per socket buffer's worth cost a 16 MiB fetch a
// quarter of its rate against a raw polling reader.
bool read_all(const channel_in& in, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  auto spin_until = std::chrono::steady_clock::time_point::min();
  while (n > 0) {
    ssize_t r;
    if (in.tls) {
      // The same for TLS: poll the socket until a record is there (or
      // buffered already), then read it.
      await_frame(in, channel_spin());
      r = in.tls->read(p, n);
    } else {
      r = ::recv(in.fd, p, n, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        auto now = std::chrono::steady_clock::now();
        if (spin_until == std::chrono::steady_clock::time_point::min())
          spin_until = now + channel_spin();
        if (now < spin_until && polite_poll::allowed()
            && polite_poll::yield())
          continue;
        r = ::recv(in.fd, p, n, 0);
      }
    }
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      spin_until = std::chrono::steady_clock::time_point::min();
      // A frame may take long on a slow link, but never stall.
      if (n > 0 && in.entry != nullptr && in.entry->established())
        in.entry->extend(std::chrono::steady_clock::now(),
                         in.reg->guard->limits().idle_timeout);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

// Whether the next frame on `fd`, if its prefix is there yet, is for
// `inbox` too (read without taking it off the socket).
bool next_frame_for(const channel_in& in, uint64_t inbox) {
  char bytes[prefix_size];
  if (in.tls) {
    if (!in.tls->peek_buffered(bytes, prefix_size))
      return true;
  } else if (::recv(in.fd, bytes, prefix_size, MSG_PEEK | MSG_DONTWAIT)
             < static_cast<ssize_t>(prefix_size)) {
    return true;
  }
  frame_prefix next;
  return parse_prefix({bytes, prefix_size}, next) && next.inbox == inbox;
}

// Hands a received message to its inbox's executor (or master) under the
// registry's lock, so that close_inbox, once returned, has no delivery in
// progress. Then this thread runs the actor (and what it sets off)
// itself: it is awake, while a scheduler thread would need waking, and a
// tensor's bytes are in this core's cache. Frames for the same inbox wait
// in the socket meanwhile (its actor is busy with this one's work); once a
// frame for another one is there, the rest of the chain goes to the
// scheduler's threads, so that one actor's work does not hold up
// another's.
void deliver(const channel_in& in, uint64_t inbox, caf::message msg) {
  auto& r = *in.reg;
  std::unique_lock<std::mutex> guard{r.mtx};
  auto i = r.inboxes.find(inbox);
  if (i == r.inboxes.end())
    return;
  auto dest = caf::actor_cast<caf::actor>(i->second);
  if (!dest)
    return;
  auto send = [&] {
    dest->enqueue(nullptr, caf::make_message_id(), std::move(msg), nullptr);
    guard.unlock();
  };
  // The registered inbox keeps the actor, and so its system, alive until
  // run_actors_after holds the system's scheduler.
  run_actors_after(dest->home_system(), send,
                   [&in, inbox] { return next_frame_for(in, inbox); });
}


// The feeds of run_graph requests that came ahead of their request on
// one connection (send_run_graph), by inbox and step. Bounded: a sender
// whose link broke between a request's feeds and the request leaves
// them here, and the oldest go once there are max_stashed.
struct feed_stash {
  static constexpr size_t max_stashed = 64;
  std::map<std::pair<uint64_t, int64_t>, arrived_feeds> by_request;

  void add(uint64_t inbox, int64_t step, size_t pos, tensor value) {
    by_request[{inbox, step}].emplace_back(pos, std::move(value));
    if (by_request.size() > max_stashed)
      by_request.erase(by_request.begin());
  }
};

// A feed's position from its frame's key (feed_key + decimal), or
// nothing if the key is not a feed's.
std::optional<size_t> feed_position(std::string_view key) {
  if (!key.starts_with(feed_key))
    return std::nullopt;
  key.remove_prefix(feed_key.size());
  size_t pos = 0;
  auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), pos);
  if (ec != std::errc{} || end != key.data() + key.size())
    return std::nullopt;
  return pos;
}

// The rest of a frame whose prefix is `p`, off the wire; false ends
// the connection (EOF, error, or a peer that does not speak the
// protocol).
bool read_frame(const channel_in& in, const frame_prefix& p,
                ring_reader& ring, feed_stash& stash) {
  auto [magic, key_len, inbox, step, head_len, flags, data_len] = p;
  auto kind = check_prefix(p);
  if (kind == frame_kind::invalid)
    return false;
  bool message = kind == frame_kind::message;
  bool offer = kind == frame_kind::ring_offer;
  bool sender = kind == frame_kind::sender;
  bool in_ring = kind == frame_kind::in_ring;
  std::string key(key_len, '\0');
  if (!read_all(in, key.data(), key.size()))
    return false;
  if (sender) {
    // A label for monitoring, not an identity: the first one stays.
    if (!valid_sender_name(key))
      return false;
    std::lock_guard<std::mutex> guard{in.reg->mtx};
    if (in.stat->peer_name.empty())
      in.stat->peer_name = std::move(key);
    return true;
  }
  if (offer) {
    // Only the first offer of a connection can be taken.
    char answer = !ring && ring.open(key, data_len, static_cast<uint64_t>(step))
                    ? 'Y'
                    : 'N';
    return in.tls ? in.tls->write(&answer, 1) == 1
                  : ::send(in.fd, &answer, 1, MSG_NOSIGNAL) == 1;
  }
  if (message) {
    // Not zero-filled first: a request's feeds may be megabytes.
    std::unique_ptr<char[]> body{new char[head_len]};
    if (!read_all(in, body.get(), head_len))
      return false;
    arrived_feeds* feeds = nullptr;
    auto stashed = stash.by_request.find({inbox, step});
    if (stashed != stash.by_request.end())
      feeds = &stashed->second;
    auto msg = parse_message(key, step, {body.get(), head_len}, feeds);
    if (stashed != stash.by_request.end())
      stash.by_request.erase(stashed);
    if (msg.empty())
      return false;
    n_messages.fetch_add(1, std::memory_order_relaxed);
    deliver(in, inbox, std::move(msg));
    return true;
  }
  std::string head(head_len, '\0');
  if (!read_all(in, head.data(), head.size()))
    return false;
  tensor value;
  if (!decode_tensor_head(p, kind, head, value))
    return false;
  if (kind != frame_kind::encoded) {
    if (in_ring) {
      char where[8];
      uint64_t pos = 0;
      byte_reader r{std::string_view{where, sizeof(where)}};
      if (!read_all(in, where, sizeof(where)) || !r.u64(pos))
        return false;
      auto lease = ring.take(pos, data_len);
      if (!lease)
        return false;
      // In place: the tensor holds the lease (tensor::borrow). Bools are
      // copied, so that the peer cannot change a byte once it is checked.
      if (value.type() == dtype::bool_)
        std::memcpy(value.raw(), lease->data, data_len);
      else
        value = tensor::borrow(value.type(), value.shape(), lease->data,
                               std::move(lease->owner));
      n_ring_frames.fetch_add(1, std::memory_order_relaxed);
      n_ring_bytes.fetch_add(data_len, std::memory_order_relaxed);
    } else if (!read_all(in, value.raw(), data_len)) {
      return false;
    } else {
      n_socket_bytes.fetch_add(data_len, std::memory_order_relaxed);
    }
    if (!check_received_data(value).ok())
      return false;
  }
  n_tensor_frames.fetch_add(1, std::memory_order_relaxed);
  if (auto pos = feed_position(key)) {
    stash.add(inbox, step, *pos, std::move(value));
    return true;
  }
  deliver(in, inbox,
          caf::make_message(recv_tensor_atom_v, step, std::move(key),
                            std::move(value)));
  return true;
}

// Polls `fd` for up to `spin` for the next frame, yielding the core to
// whatever else is runnable on it meanwhile; not at all while the cores
// are taken (polite_poll.hpp).
void await_frame(const channel_in& in, std::chrono::nanoseconds spin) {
  if (in.tls && in.tls->has_pending())
    return;
  auto deadline = std::chrono::steady_clock::now() + spin;
  while (polite_poll::allowed()) {
    pollfd p{in.fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0 || !polite_poll::yield()
        || std::chrono::steady_clock::now() >= deadline)
      return;
  }
}

// How long a reading thread polls for the next frame before it blocks
// (ACTORFLOW_CHANNEL_SPIN_US, 0 to never): a blocked thread's wake-up
// took 100-500 us on the VMs measured, where an idle vCPU halts at once,
// and a training step's frames come in bursts (docs/PERFORMANCE.md).
std::chrono::nanoseconds channel_spin() {
  static const auto spin = std::chrono::microseconds(
    env_number("ACTORFLOW_CHANNEL_SPIN_US", 0, 1000000, 1000));
  return spin;
}

void serve(int fd, tls_socket::security_ptr sec,
           std::shared_ptr<channel_registry> reg,
           connection_guard::entry_ptr entry) {
  using clock = std::chrono::steady_clock;
  auto& guard = *reg->guard;
  std::unique_ptr<tls_socket> tls;
  if (sec)
    tls = tls_socket::accept(sec, fd);
  auto stat = std::make_shared<incoming_stat>();
  channel_in in{fd, tls.get(), reg.get(), entry.get(), stat.get()};
  stat->peer = peer_address(fd, true);
  {
    auto& r = *reg;
    std::lock_guard<std::mutex> guard{r.mtx};
    r.incoming_stats.push_back(stat);
  }
  char greeting[sizeof(hello)];
  try {
    if ((!sec || tls) && read_all(in, greeting, sizeof(greeting))
        && std::memcmp(greeting, hello, sizeof(hello)) == 0) {
      // Names the peer when a frame does not fit the budget.
      const auto who = "the tensor channel peer " + stat->peer;
      // A peer that speaks the protocol may stay idle between steps.
      entry->set_established();
      entry->clear_deadline();
      auto spin = channel_spin();
      // A moving average of the idle gaps before a frame: only while
      // frames have been coming within the spin time does it pay to poll
      // (as the scheduler's idle worker; a link that carries a frame now
      // and then costs nothing). Capped, so that one long pause does not
      // keep a burst from polling for long.
      int64_t gap_ns = 0;
      char prefix[prefix_size];
      ring_reader ring;
      feed_stash stash;
      for (;;) {
        auto idle_since = clock::now();
        if (spin.count() > 0 && gap_ns < spin.count())
          await_frame(in, spin);
        if (!read_all(in, prefix, prefix_size))
          break;
        auto gap = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     clock::now() - idle_since)
                     .count();
        gap_ns += (std::clamp<int64_t>(gap, 0, 4 * spin.count()) - gap_ns)
                  / 8;
        frame_prefix parsed;
        if (!parse_prefix({prefix, prefix_size}, parsed))
          break;
        // What the frame announces is charged before it is allocated,
        // and the rest of it must come without stalling.
        auto now = clock::now();
        uint64_t announced = parsed.key_len + parsed.head_len;
        if (check_prefix(parsed) != frame_kind::in_ring)
          announced += parsed.data_len;
        if (!guard.charge(announced, who, now))
          break;
        entry->extend(now, guard.limits().idle_timeout);
        bool ok = read_frame(in, parsed, ring, stash);
        entry->clear_deadline();
        guard.refund(announced);
        if (!ok)
          break;
        constexpr auto relaxed = std::memory_order_relaxed;
        stat->frames.store(stat->frames.load(relaxed) + 1, relaxed);
        stat->last_us.store(wall_us(), relaxed);
        stat->bytes.store(stat->bytes.load(relaxed) + prefix_size
                            + parsed.key_len + parsed.head_len
                            + parsed.data_len,
                          relaxed);
      }
    }
  } catch (const std::exception&) {
    // An allocation the frame announced failed: drop the connection.
  }
  tls.reset();
  // Out of the guard before the number can be reused.
  guard.release(entry);
  close_fd(fd);
  auto& r = *reg;
  std::lock_guard<std::mutex> lock{r.mtx};
  std::erase(r.incoming_stats, stat);
}

void accept_loop(int fd, tls_socket::security_ptr sec,
                 std::shared_ptr<channel_registry> reg) {
  for (;;) {
    int conn = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE
          || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (errno != EINTR && errno != ECONNABORTED)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      return;
    }
    auto entry = reg->guard->admit(conn, peer_address(conn), "tensor channel",
                                   std::chrono::steady_clock::now());
    if (!entry) {
      close_fd(conn);
      continue;
    }
    int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread{serve, conn, sec, reg, std::move(entry)}.detach();
  }
}

} // namespace

std::shared_ptr<connection_guard> channel_guard(caf::actor_system& sys) {
  auto limits = guard_limits_of(sys);
  limits.max_connections = std::min(limits.max_connections, max_incoming);
  return make_watched_guard(limits);
}

uint16_t listen_on(const std::string& host,
                   const tls_socket::security_ptr& sec,
                   std::shared_ptr<channel_registry> reg) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  auto name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                ? host.substr(1, host.size() - 2)
                : host;
  if (int e = ::getaddrinfo(name.c_str(), "0", &hints, &res); e != 0) {
    std::fprintf(stderr,
                 "actorflow: tensor channel: cannot resolve %s (%s); "
                 "tensors to this process go over CAF\n",
                 host.c_str(), ::gai_strerror(e));
    return 0;
  }
  std::string why = "no address";
  for (auto* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                      a->ai_protocol);
    if (fd < 0)
      continue;
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0
        && ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len)
             == 0) {
      ::freeaddrinfo(res);
      std::thread{accept_loop, fd, sec, std::move(reg)}.detach();
      return ntohs(bound.ss_family == AF_INET6
                     ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    why = std::strerror(errno);
    close_fd(fd);
  }
  ::freeaddrinfo(res);
  std::fprintf(stderr,
               "actorflow: tensor channel: cannot listen on %s (%s); "
               "tensors to this process go over CAF\n",
               host.c_str(), why.c_str());
  return 0;
}

} // namespace actorflow::tensor_channel
