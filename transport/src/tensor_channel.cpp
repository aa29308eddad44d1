// The tensor channel (tensor_channel.hpp): its API and its sending half,
// one link (connection and writing thread) per peer process and actor
// system. The receiving half is channel_reader.cpp.
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
// reader answers one byte, 'Y' if it mapped the ring, 'N' if not. Then a
// link of a named system (name_self) says which task it comes from, in a
// frame of flag `sender` (key: the task's name, nothing else), which the
// reader keeps for its link_stats. A peer that breaks this gets its
// connection closed; nothing else changes.

#include "actorflow/transport/tensor_channel.hpp"
#include "actorflow/graph/log_ring.hpp"
#include "actorflow/graph/text_util.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string_view>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <caf/actor_cast.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/send.hpp>

#include "actorflow/graph/wire.hpp"
#include "actorflow/transport/env_number.hpp"
#include "actorflow/transport/host_port.hpp"
#include "actorflow/transport/system_data.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "channel_registry.hpp"
#include "shared_ring.hpp"
#include "tensor_frame.hpp"

namespace actorflow::tensor_channel {

// -- sending ------------------------------------------------------------------

class link {
public:
  link(std::string host, std::string port, tls_socket::security_ptr sec,
       std::string sender)
    : host_(std::move(host)),
      port_(std::move(port)),
      sec_(std::move(sec)),
      sender_(std::move(sender)) {
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
    // An idle link whose peer closed (its process died) is taken down
    // when seen, not at the next send: the console stops showing a link
    // to a dead task up, and the registry drops it (link_stats).
    if (state_ == state::up && queue_.empty() && !busy_ && fd_ >= 0) {
      pollfd p{fd_, POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 1
          && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
        state_ = state::down;
        since_us_ = wall_us();
        cv_.notify_all();
      }
    }
    return {host_ + ":" + port_, true, state_ == state::up, bytes_, frames_,
            since_us_, last_us_, local_, {}};
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
    return write_all(greeting) && offer_ring() && name_sender();
  }

  // Tells the peer which task this link comes from (name_self), for its
  // link_stats; nothing when this system was not named.
  bool name_sender() {
    if (sender_.empty())
      return true;
    frame named;
    byte_writer w{named.head};
    write_prefix(w, 0, 0, sender_.size(), 0, flag_sender, 0);
    w.raw(sender_.data(), sender_.size());
    return write_all(named);
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
      auto line = "tensor channel: cannot connect to " + log_escape(host_)
                  + ":" + log_escape(port_) + "; tensors to it go over CAF";
      std::fprintf(stderr, "actorflow: %s\n", line.c_str());
      note_log(log_level::warning, line);
      fail(guard, nullptr);
      return;
    }
    state_ = state::up;
    since_us_ = wall_us();
    local_ = local_address(fd_);
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
  std::string sender_;
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
  std::string local_;
  // Set up before the link is up; then used by the writer holding busy_.
  ring_writer ring_;
};

// -- API ----------------------------------------------------------------------

std::string open_inbox(const std::string& host, const caf::actor& exec) {
  // A system with TLS has a listener of its own that speaks it.
  auto sec = tls_socket::security_of(exec->home_system());
  auto key = host + tls_socket::key_of(sec);
  auto reg = system_data<channel_registry>(exec->home_system());
  auto& r = *reg;
  std::lock_guard<std::mutex> guard{r.mtx};
  auto p = r.ports.find(key);
  if (p == r.ports.end()) {
    if (!r.guard)
      r.guard = channel_guard(exec->home_system());
    p = r.ports.emplace(key, listen_on(host, sec, reg)).first;
  }
  if (p->second == 0)
    return {};
  auto id = r.next_inbox++;
  r.inboxes.emplace(id, caf::actor_cast<caf::weak_actor_ptr>(exec));
  return host_port{host_of(host), p->second}.to_string() + "/"
         + std::to_string(id);
}

void close_inbox(caf::actor_system& sys, const std::string& address) {
  auto slash = address.rfind('/');
  if (slash == std::string::npos)
    return;
  auto id = std::strtoull(address.c_str() + slash + 1, nullptr, 10);
  auto reg = system_data<channel_registry>(sys);
  auto& r = *reg;
  std::lock_guard<std::mutex> guard{r.mtx};
  r.inboxes.erase(id);
}

route route_to(const std::string& address, caf::actor_system& sys) {
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
  auto sec = tls_socket::security_of(sys);
  auto reg = system_data<channel_registry>(sys);
  auto& r = *reg;
  std::lock_guard<std::mutex> guard{r.mtx};
  auto& to = r.links[hp + tls_socket::key_of(sec)];
  // A link that went down stays down for its senders; new routes (a
  // restarted peer registers again) get a fresh connection.
  if (to == nullptr || to->down()) {
    to = std::make_shared<link>(host, port, sec, r.self_name);
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

/// How long link_stats still lists a link that went down.
constexpr int64_t stale_link_us = 10'000'000;

void name_peer(caf::actor_system& sys, const std::string& address,
               const std::string& name) {
  auto reg = system_data<channel_registry>(sys);
  std::lock_guard<std::mutex> guard{reg->mtx};
  // The first name stays: the master names an inbox by the task that
  // serves it (after a failover, not the device's home), before its
  // executors learn it. Bounded: a name per link and a few more.
  // Keyed as link_stats names a link: an inbox's "host:port/N" without N.
  auto slash = address.rfind('/');
  auto key = slash == std::string::npos ? address : address.substr(0, slash);
  if (reg->names.size() < reg->links.size() + 64)
    reg->names.emplace(std::move(key),
                       channel_registry::peer_name{name, wall_us()});
}

void name_self(caf::actor_system& sys, const std::string& name) {
  if (!valid_sender_name(name))
    return;
  auto reg = system_data<channel_registry>(sys);
  std::lock_guard<std::mutex> guard{reg->mtx};
  if (reg->self_name.empty())
    reg->self_name = name;
}

std::vector<link_stat> link_stats(caf::actor_system& sys) {
  std::vector<std::shared_ptr<link>> links;
  std::vector<link_stat> out;
  std::map<std::string, std::string> names;
  {
    auto reg = system_data<channel_registry>(sys);
    auto& r = *reg;
    std::lock_guard<std::mutex> guard{r.mtx};
    // A link down for a while is gone (a new route makes a new one).
    auto now = wall_us();
    std::erase_if(r.links, [now](auto& entry) {
      auto st = entry.second->stat();
      return !st.up && now - st.since_us > stale_link_us;
    });
    for (auto& [address, l] : r.links)
      links.push_back(l);
    // A name whose links are gone (keyed "host:port" and a TLS suffix) is
    // forgotten too: a later process at the address is another task.
    std::erase_if(r.names, [&](auto& entry) {
      auto& [address, name] = entry;
      auto l = r.links.lower_bound(address);
      bool linked = l != r.links.end() && l->first.starts_with(address)
                    && (l->first.size() == address.size()
                        || l->first[address.size()] == '#');
      return !linked && now - name.given_us > stale_link_us;
    });
    for (auto& [address, name] : r.names)
      names[address] = name.task;
    for (auto& in : r.incoming_stats)
      out.push_back({in->peer, false, true,
                     in->bytes.load(std::memory_order_relaxed),
                     in->frames.load(std::memory_order_relaxed),
                     in->since_us,
                     in->last_us.load(std::memory_order_relaxed),
                     {},
                     in->peer_name});
  }
  for (auto& l : links) {
    out.push_back(l->stat());
    if (auto i = names.find(out.back().peer); i != names.end())
      out.back().peer_name = i->second;
  }
  return out;
}

} // namespace actorflow::tensor_channel
