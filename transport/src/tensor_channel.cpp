// The tensor channel (tensor_channel.hpp). One listener per host this
// process's tasks are bound to, one reading thread per incoming
// connection, one link (connection and writing thread) per peer process.
//
// On the wire, after an 8-byte hello: frames of a 40-byte little-endian
// prefix (u32 magic, u32 key length, u64 inbox, i64 step, u32 head length,
// u32 flags, u64 data length), the rendezvous key, the head (the tensor's
// wire header; with flag `encoded`, a string tensor's whole to_bytes
// encoding) and the element data. With flag `message` the frame is a
// message instead: the key names its kind ("run_graph", "step_reply"),
// the head is its body as CAF's binary serializer writes it, and there is
// no element data. With flag `in_ring` the element data is in the
// connection's ring of shared memory (shared_ring.hpp) and the frame ends
// with its position there (u64) instead. A link offers a ring right after
// its hello with a frame of flag `ring_offer` (key: the ring's path,
// step: its token, data length: its capacity, nothing else) and the
// reader answers one byte, 'Y' if it mapped the ring, 'N' if not. A peer
// that breaks this gets its connection closed; nothing else changes.

#include "actorflow/transport/tensor_channel.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <charconv>
#include <map>
#include <optional>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <caf/actor_cast.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/send.hpp>

#include "actorflow/graph/wire.hpp"
#include "actorflow/transport/env_number.hpp"
#include "actorflow/transport/host_port.hpp"
#include "actorflow/transport/run_actors.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "shared_ring.hpp"
#include "polite_poll.hpp"
#include "tensor_frame.hpp"
#include "tls_socket.hpp"

namespace actorflow::tensor_channel {

namespace {

// Data below this goes through the socket: a copy of it there costs
// about what a copy into the ring does.
constexpr uint64_t ring_min_data = 16 << 10;
// Each incoming connection is a thread: a bound on what peers can open.
constexpr size_t max_incoming = 256;
constexpr int connect_timeout_ms = 5000;

std::atomic<uint64_t> n_fallbacks{0};
std::atomic<uint64_t> n_messages{0};
std::atomic<uint64_t> n_ring_frames{0};
std::atomic<uint64_t> n_tensor_frames{0};
std::atomic<uint64_t> n_socket_bytes{0};
std::atomic<uint64_t> n_ring_bytes{0};

// Microseconds since the epoch, as the monitor reports times.
int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

void close_fd(int fd) {
  if (fd >= 0)
    ::close(fd);
}

// An incoming connection: its blocking socket, and its TLS when the
// process's system has TLS on.
struct channel_in {
  int fd = -1;
  tls_socket* tls = nullptr;
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
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

// The counters of one incoming connection (link_stats).
struct incoming_stat {
  std::string peer;
  int64_t since_us = wall_us();
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> frames{0};
  std::atomic<int64_t> last_us{0};
};

struct registry {
  std::mutex mtx;
  std::vector<std::shared_ptr<incoming_stat>> incoming_stats;
  // The listener's port by the host it is bound to; 0: binding failed.
  std::map<std::string, uint16_t> ports;
  std::unordered_map<uint64_t, caf::weak_actor_ptr> inboxes;
  uint64_t next_inbox = 1;
  std::map<std::string, std::shared_ptr<link>> links;
  size_t incoming = 0;
};

registry& reg() {
  // Never destroyed: detached reading and writing threads may use it
  // while the process exits.
  static auto* instance = new registry;
  return *instance;
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
  auto& r = reg();
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
  bool in_ring = kind == frame_kind::in_ring;
  std::string key(key_len, '\0');
  if (!read_all(in, key.data(), key.size()))
    return false;
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

// The address of a connected socket's peer, "host:port".
std::string peer_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return "?";
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host,
                    sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV)
      != 0)
    return "?";
  return std::string{host} + ":" + port;
}

void serve(int fd, tls_socket::security_ptr sec) {
  std::unique_ptr<tls_socket> tls;
  if (sec)
    tls = tls_socket::accept(sec, fd);
  channel_in in{fd, tls.get()};
  auto stat = std::make_shared<incoming_stat>();
  stat->peer = peer_of(fd);
  {
    auto& r = reg();
    std::lock_guard<std::mutex> guard{r.mtx};
    r.incoming_stats.push_back(stat);
  }
  char greeting[sizeof(hello)];
  try {
    if ((!sec || tls) && read_all(in, greeting, sizeof(greeting))
        && std::memcmp(greeting, hello, sizeof(hello)) == 0) {
      using clock = std::chrono::steady_clock;
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
        if (!parse_prefix({prefix, prefix_size}, parsed)
            || !read_frame(in, parsed, ring, stash))
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
  close_fd(fd);
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  --r.incoming;
  std::erase(r.incoming_stats, stat);
}

void accept_loop(int fd, tls_socket::security_ptr sec) {
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
    {
      auto& r = reg();
      std::lock_guard<std::mutex> guard{r.mtx};
      if (r.incoming >= max_incoming) {
        close_fd(conn);
        continue;
      }
      ++r.incoming;
    }
    int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread{serve, conn, sec}.detach();
  }
}

// Binds a listener on `host`, port 0, and serves it on a thread of its
// own; its port, or 0 (and why on stderr) if it cannot.
uint16_t listen_on(const std::string& host,
                   const tls_socket::security_ptr& sec) {
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
      std::thread{accept_loop, fd, sec}.detach();
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

} // namespace

// -- sending ------------------------------------------------------------------

class link {
public:
  link(std::string host, std::string port, tls_socket::security_ptr sec)
    : host_(std::move(host)), port_(std::move(port)), sec_(std::move(sec)) {
    // nop
  }

  void start(std::shared_ptr<link> self) {
    std::thread{[self] { self->run(); }}.detach();
  }

  bool down() {
    std::lock_guard<std::mutex> guard{mtx_};
    return state_ == state::down;
  }

  link_stat stat() {
    std::lock_guard<std::mutex> guard{mtx_};
    return {host_ + ":" + port_, true, state_ == state::up, bytes_, frames_,
            since_us_, last_us_};
  }

  bool send(uint64_t inbox, int64_t step, const std::string& key,
            const tensor& value, const caf::actor& fallback,
            bool write_now) {
    return send(make_frame(inbox, step, key, value, fallback), write_now);
  }

  /// Sends `msg` (a run_graph or step_reply message) as a frame of `kind`
  /// whose body is msg's element `body_at` on (`wire`'s instead, when
  /// given: a request whose large feeds went ahead), and the whole of
  /// `msg` to `fallback` over CAF should the link fail; false (nothing
  /// sent) when it is down already or the body is more than a frame may
  /// hold.
  bool send_message(uint64_t inbox, int64_t step, std::string_view kind,
                    caf::message msg, size_t body_at,
                    const caf::actor& fallback,
                    const caf::message* wire = nullptr) {
    frame f;
    caf::binary_serializer sink{nullptr, f.body};
    const auto& body = wire != nullptr ? *wire : msg;
    for (auto i = body_at; i < body.size(); ++i)
      if (auto err = body.save(i, sink))
        return false;
    if (f.body.size() > max_encoded)
      return false;
    byte_writer w{f.head};
    w.reserve(prefix_size + kind.size());
    write_prefix(w, inbox, step, kind.size(), f.body.size(), flag_message,
                 0);
    w.raw(kind.data(), kind.size());
    // The body goes out after the head as a tensor's data would, but the
    // prefix counts it in the head (a message has no element data).
    f.data = f.body.data();
    f.data_len = f.body.size();
    f.fallback = fallback;
    f.message = std::move(msg);
    return send(std::move(f), true);
  }

private:
  enum class state { connecting, up, down };

  struct frame {
    std::string head; // prefix, key and tensor header (or encoding)
    tensor value;     // keeps a tensor's data alive until written
    const char* data = nullptr;
    size_t data_len = 0;
    size_t done = 0;
    std::vector<char> body; // a message's body, which `data` points into
    // Element data that may go through the ring (a plain tensor frame).
    bool ring_candidate = false;
    bool in_ring = false; // it did: `data` is its position, in `body`
    // For the CAF fallback: a tensor's step and key, or the whole message.
    caf::actor fallback;
    int64_t step = 0;
    std::string key;
    caf::message message;
    frame() = default;
    frame(frame&&) = default;
    frame& operator=(frame&&) = default;
    // A copy's `data` would point into the original's body.
    frame(const frame&) = delete;
    frame& operator=(const frame&) = delete;
    size_t size() const {
      return head.size() + data_len;
    }
  };

  bool send(frame f, bool write_now) {
    std::unique_lock<std::mutex> guard{mtx_};
    if (state_ == state::down)
      return false;
    bytes_ += f.size();
    ++frames_;
    last_us_ = wall_us();
    // Data that fits in the ring costs this thread a copy there and a
    // short frame, less than waking the link's thread.
    bool ring_now = f.ring_candidate && ring_ && fits_ring(f);
    if ((write_now || ring_now) && state_ == state::up && !busy_
        && queue_.empty()) {
      // Nothing ahead of it: write what the socket takes now, from this
      // thread, and leave the rest to the link's.
      busy_ = true;
      guard.unlock();
      if (ring_now)
        move_to_ring(f);
      bool broken = (write_now || f.in_ring) && !write_some(f);
      guard.lock();
      busy_ = false;
      if (broken) {
        fail(guard, &f);
        return true;
      }
      if (f.done < f.size())
        queue_.push_front(std::move(f));
    } else {
      queue_.push_back(std::move(f));
    }
    if (!queue_.empty())
      cv_.notify_one();
    return true;
  }

  static frame make_frame(uint64_t inbox, int64_t step,
                          const std::string& key, const tensor& value,
                          const caf::actor& fallback) {
    frame f;
    auto header = tensor_header_bytes(value);
    uint32_t flags = 0;
    if (header.empty()) {
      header = to_bytes(value);
      flags = flag_encoded;
    } else {
      f.data = static_cast<const char*>(value.raw());
      f.data_len = value.byte_size();
      f.ring_candidate = f.data_len >= ring_min_data;
    }
    byte_writer w{f.head};
    w.reserve(prefix_size + key.size() + header.size());
    write_prefix(w, inbox, step, key.size(), header.size(), flags,
                 f.data_len);
    w.raw(key.data(), key.size());
    w.raw(header.data(), header.size());
    f.value = value;
    f.fallback = fallback;
    f.step = step;
    f.key = key;
    return f;
  }

  // Data of up to half the ring takes it: two such frames fit at any
  // position, so a size that took the ring takes it every time once its
  // reader lets go of the one before. Larger data would fit only when
  // the ring happened to be empty at the right place, and the same
  // transfer took the ring or the socket depending on what ran before.
  bool fits_ring(const frame& f) const {
    return f.data_len <= ring_.capacity() / 2;
  }

  // Puts f's element data in the ring if it is a candidate that fits now:
  // the frame then carries the data's position instead. Only the writer
  // of the frame's first byte calls it, so frames take the ring in the
  // order they go on the wire.
  void move_to_ring(frame& f) {
    if (!f.ring_candidate || f.done != 0 || !fits_ring(f))
      return;
    f.ring_candidate = false;
    auto pos = ring_.put(f.data, f.data_len);
    if (!pos)
      return;
    for (size_t i = 0; i < 4; ++i)
      f.head[flags_offset + i] = static_cast<char>(flag_in_ring >> (8 * i));
    f.body.resize(8);
    for (size_t i = 0; i < 8; ++i)
      f.body[i] = static_cast<char>(*pos >> (8 * i));
    f.data = f.body.data();
    f.data_len = f.body.size();
    f.in_ring = true;
  }

  // Writes what the socket takes without waiting; false if it broke.
  bool write_some(frame& f) {
    move_to_ring(f);
    if (tls_)
      return write_some_tls(f);
    while (f.done < f.size()) {
      iovec iov[2];
      int n = 0;
      if (f.done < f.head.size()) {
        iov[n++] = {f.head.data() + f.done, f.head.size() - f.done};
        if (f.data_len > 0)
          iov[n++] = {const_cast<char*>(f.data), f.data_len};
      } else {
        auto off = f.done - f.head.size();
        iov[n++] = {const_cast<char*>(f.data) + off, f.data_len - off};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n);
      auto r = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r > 0) {
        f.done += static_cast<size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return true;
      } else {
        return false;
      }
    }
    return true;
  }

  // write_some through TLS. A write the socket could not take must come
  // again with the same bytes: what goes in each call depends on f.done
  // alone. A small frame goes as one record (head and data copied
  // together), a large one as its head, then its data in place.
  bool write_some_tls(frame& f) {
    constexpr size_t coalesce = 16 << 10;
    while (f.done < f.size()) {
      const char* from;
      size_t len;
      if (f.done < f.head.size() && f.size() <= coalesce) {
        scratch_.assign(f.head, f.done);
        scratch_.append(f.data, f.data_len);
        from = scratch_.data();
        len = scratch_.size();
      } else if (f.done < f.head.size()) {
        from = f.head.data() + f.done;
        len = f.head.size() - f.done;
      } else {
        auto off = f.done - f.head.size();
        from = f.data + off;
        len = f.data_len - off;
      }
      auto r = tls_->write(from, len);
      if (r < 0)
        return false;
      if (r == 0)
        return true;
      f.done += static_cast<size_t>(r);
    }
    return true;
  }

  // Writes all of `f`, waiting for room; false if the socket broke.
  bool write_all(frame& f) {
    while (f.done < f.size()) {
      if (!write_some(f))
        return false;
      if (f.done < f.size()) {
        pollfd p{fd_, POLLOUT, 0};
        if (::poll(&p, 1, 1000) < 0 && errno != EINTR)
          return false;
        if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
          return false;
      }
    }
    return true;
  }

  bool connect_now() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host_.c_str(), port_.c_str(), &hints, &res) != 0)
      return false;
    for (auto* a = res; a != nullptr && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family,
                        a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        a->ai_protocol);
      if (fd < 0)
        continue;
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc < 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof(err);
        if (::poll(&p, 1, connect_timeout_ms) == 1
            && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
            && err == 0)
          rc = 0;
      }
      if (rc == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fd_ = fd;
      } else {
        close_fd(fd);
      }
    }
    ::freeaddrinfo(res);
    if (fd_ < 0)
      return false;
    if (sec_) {
      tls_ = tls_socket::connect(sec_, fd_, host_, port_,
                                 std::chrono::milliseconds(connect_timeout_ms));
      if (!tls_)
        return false;
    }
    frame greeting;
    greeting.head.assign(hello, sizeof(hello));
    return write_all(greeting) && offer_ring();
  }

  // Offers the peer a ring of shared memory for frames' data and waits
  // for its answer (on the link's thread, before any frame goes); false
  // if the connection broke. A peer on another host, or in another PID
  // namespace, cannot open it and says so: data then goes through the
  // socket.
  bool offer_ring() {
    auto capacity = ring_capacity();
    if (capacity == 0 || !ring_.create(capacity))
      return true;
    frame offer;
    byte_writer w{offer.head};
    write_prefix(w, 0, static_cast<int64_t>(ring_.token()),
                 ring_.path().size(), 0, flag_ring_offer, capacity);
    w.raw(ring_.path().data(), ring_.path().size());
    char answer = 0;
    bool answered = write_all(offer) && read_answer(answer);
    ring_.close_file();
    if (answer != 'Y')
      ring_.reset();
    return answered;
  }

  // The peer's one-byte answer to a ring offer, within the connect
  // timeout; false if none came.
  bool read_answer(char& answer) {
    auto deadline = std::chrono::steady_clock::now()
                    + std::chrono::milliseconds(connect_timeout_ms);
    for (;;) {
      if (!tls_ || !tls_->has_pending()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
        pollfd p{fd_, POLLIN, 0};
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1)
          return false;
      }
      if (!tls_)
        return ::recv(fd_, &answer, 1, 0) == 1;
      auto r = tls_->read(&answer, 1);
      if (r == 1)
        return true;
      if (r != -2)
        return false;
    }
  }

  // The link is down: every queued frame (and `extra`) goes over CAF.
  void fail(std::unique_lock<std::mutex>& guard, frame* extra) {
    state_ = state::down;
    since_us_ = wall_us();
    cv_.notify_all();
    std::deque<frame> left;
    left.swap(queue_);
    if (extra != nullptr)
      left.push_front(std::move(*extra));
    guard.unlock();
    for (auto& f : left) {
      n_fallbacks.fetch_add(1, std::memory_order_relaxed);
      if (!f.message.empty())
        caf::anon_send(f.fallback, std::move(f.message));
      else
        caf::anon_send(f.fallback, recv_tensor_atom_v, f.step,
                       std::move(f.key), std::move(f.value));
    }
    guard.lock();
  }

  void run() {
    bool ok = connect_now();
    std::unique_lock<std::mutex> guard{mtx_};
    if (!ok) {
      std::fprintf(stderr,
                   "actorflow: tensor channel: cannot connect to %s:%s; "
                   "tensors to it go over CAF\n",
                   host_.c_str(), port_.c_str());
      fail(guard, nullptr);
      return;
    }
    state_ = state::up;
    since_us_ = wall_us();
    for (;;) {
      cv_.wait(guard, [this] {
        return (!queue_.empty() && !busy_) || state_ == state::down;
      });
      if (state_ == state::down) {
        // A sender's direct write found the socket broken.
        tls_.reset();
        close_fd(fd_);
        return;
      }
      auto f = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      guard.unlock();
      bool ok_write = write_all(f);
      guard.lock();
      busy_ = false;
      if (!ok_write) {
        // The frame went partly or not at all; the receiver drops a
        // partial one with the connection.
        fail(guard, &f);
        tls_.reset();
        close_fd(fd_);
        return;
      }
    }
  }

  std::string host_;
  std::string port_;
  tls_socket::security_ptr sec_;
  int fd_ = -1;
  // With TLS: the connection's session, and the writer's copy of a small
  // frame (both used by the writer holding busy_).
  std::unique_ptr<tls_socket> tls_;
  std::string scratch_;
  std::mutex mtx_;
  std::condition_variable cv_;
  state state_ = state::connecting;
  bool busy_ = false;
  std::deque<frame> queue_;
  // Monitoring (link_stats), under mtx_.
  uint64_t bytes_ = 0;
  uint64_t frames_ = 0;
  int64_t since_us_ = wall_us();
  int64_t last_us_ = 0;
  // Set up before the link is up; then used by the writer holding busy_.
  ring_writer ring_;
};

// -- API ----------------------------------------------------------------------

std::string open_inbox(const std::string& host, const caf::actor& exec) {
  // A system with TLS has a listener of its own that speaks it.
  auto sec = tls_socket::security_of(exec->home_system());
  auto key = host + tls_socket::key_of(sec);
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto p = r.ports.find(key);
  if (p == r.ports.end())
    p = r.ports.emplace(key, listen_on(host, sec)).first;
  if (p->second == 0)
    return {};
  auto id = r.next_inbox++;
  r.inboxes.emplace(id, caf::actor_cast<caf::weak_actor_ptr>(exec));
  return host_port{host_of(host), p->second}.to_string() + "/"
         + std::to_string(id);
}

void close_inbox(const std::string& address) {
  auto slash = address.rfind('/');
  if (slash == std::string::npos)
    return;
  auto id = std::strtoull(address.c_str() + slash + 1, nullptr, 10);
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  r.inboxes.erase(id);
}

route route_to(const std::string& address, caf::actor_system* sys) {
  auto slash = address.rfind('/');
  if (slash == std::string::npos || slash + 1 == address.size()
      || address.find_first_not_of("0123456789", slash + 1)
           != std::string::npos)
    return {};
  auto hp = address.substr(0, slash);
  host_port parsed;
  if (!host_port::parse(hp, parsed).ok())
    return {};
  auto host = parsed.host;
  auto port = std::to_string(parsed.port);
  route result;
  result.inbox = std::strtoull(address.c_str() + slash + 1, nullptr, 10);
  auto sec = sys ? tls_socket::security_of(*sys) : nullptr;
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto& to = r.links[hp + tls_socket::key_of(sec)];
  // A link that went down stays down for its senders; new routes (a
  // restarted peer registers again) get a fresh connection.
  if (to == nullptr || to->down()) {
    to = std::make_shared<link>(host, port, sec);
    to->start(to);
  }
  result.to = to;
  return result;
}

bool send(const route& r, int64_t step, const std::string& key,
          const tensor& value, const caf::actor& fallback, bool write_now) {
  return r.to != nullptr
         && r.to->send(r.inbox, step, key, value, fallback, write_now);
}

namespace {

// `msg` (whose elements from `body_at` on are the frame's body) over the
// channel, else to `dest` over CAF; true when it went on the channel.
bool send_or_fallback(const route& r, int64_t step, std::string_view kind,
                      caf::message msg, size_t body_at,
                      const caf::actor& dest) {
  if (r.to != nullptr
      && r.to->send_message(r.inbox, step, kind, msg, body_at, dest))
    return true;
  caf::anon_send(dest, std::move(msg));
  return false;
}

} // namespace

bool send_run_graph(const route& r, run_graph_request req,
                    const caf::actor& exec) {
  auto step = req.step_id;
  // Large numeric feeds go ahead of the request as tensor frames of their
  // own (through the ring from a peer on this host; read straight into
  // the tensor otherwise), not serialized into the request's body: that
  // body is copied into a buffer on both sides. The receiver puts them
  // back in place (parse_message). Should the link fail on the way, the
  // whole request goes over CAF, feeds included.
  std::optional<run_graph_request> wire;
  for (size_t i = 0; r.to != nullptr && i < req.feeds.size(); ++i) {
    const auto& value = req.feeds[i].second;
    if (value.type() == dtype::string || value.byte_size() < ring_min_data)
      continue;
    if (!wire)
      wire = req;
    if (!r.to->send(r.inbox, step, std::string{feed_key} + std::to_string(i),
                    value, caf::actor{}, true)) {
      wire.reset();
      break;
    }
    wire->feeds[i].second = tensor{};
  }
  if (!wire)
    return send_or_fallback(r, step, run_graph_kind,
                            caf::make_message(run_graph_atom_v,
                                              std::move(req)),
                            1, exec);
  auto full = caf::make_message(run_graph_atom_v, std::move(req));
  auto body = caf::make_message(run_graph_atom_v, std::move(*wire));
  if (r.to->send_message(r.inbox, step, run_graph_kind, full, 1, exec, &body))
    return true;
  caf::anon_send(exec, std::move(full));
  return false;
}

bool send_step_reply(const route& r, int64_t step, int64_t part,
                     run_graph_response resp, const caf::actor& master) {
  return send_or_fallback(r, step, step_reply_kind,
                          caf::make_message(step_reply_atom_v, step, part,
                                            std::move(resp)),
                          2, master);
}

uint64_t fallbacks() {
  return n_fallbacks.load(std::memory_order_relaxed);
}

uint64_t messages_received() {
  return n_messages.load(std::memory_order_relaxed);
}

uint64_t ring_frames_received() {
  return n_ring_frames.load(std::memory_order_relaxed);
}

uint64_t ring_capacity() {
  return uint64_t(env_number("ACTORFLOW_CHANNEL_RING_MIB", 0, 4096, 4)) << 20;
}

received_totals totals_received() {
  constexpr auto relaxed = std::memory_order_relaxed;
  return {n_tensor_frames.load(relaxed), n_socket_bytes.load(relaxed),
          n_ring_bytes.load(relaxed), n_messages.load(relaxed)};
}

std::vector<link_stat> link_stats() {
  std::vector<std::shared_ptr<link>> links;
  std::vector<link_stat> out;
  {
    auto& r = reg();
    std::lock_guard<std::mutex> guard{r.mtx};
    for (auto& [address, l] : r.links)
      links.push_back(l);
    for (auto& in : r.incoming_stats)
      out.push_back({in->peer, false, true,
                     in->bytes.load(std::memory_order_relaxed),
                     in->frames.load(std::memory_order_relaxed),
                     in->since_us,
                     in->last_us.load(std::memory_order_relaxed)});
  }
  for (auto& l : links)
    out.push_back(l->stat());
  return out;
}

} // namespace actorflow::tensor_channel
