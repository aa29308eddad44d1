// The tensor channel (transport/tensor_channel.hpp): `_Send` values
// between processes over a TCP connection of their own. Values of every
// kind arrive intact and in order at the inbox's actor, which the
// reading thread runs itself; a peer that breaks the protocol loses its
// connection and nothing else; a route that cannot connect hands its
// frames to CAF; and executors of two tasks with addresses use it (two
// actor systems in one process stand for two processes: between them CAF
// serializes nothing, so a value over one chunk arrives only by the
// channel). A step's request and its answer travel as messages. A large
// value's bytes go through a ring of shared memory when the reader could
// map it, and a ring frame that does not match the ring loses its
// connection. With TLS on, frames travel encrypted and a plain sender is
// refused.

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/binary_serializer.hpp>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/partition.hpp"
#include "actorflow/graph/placer.hpp"
#include "actorflow/graph/subgraph.hpp"
#include "common/recording_proxy.hpp"
#include "common/temp_dir.hpp"
#include "shared_ring.hpp"
#include "actorflow/transport/tensor_channel.hpp"
#include "tensor_frame.hpp"

using namespace actorflow;

namespace {

constexpr auto max_wait = std::chrono::seconds(30);

struct system_holder {
  explicit system_holder(std::optional<bool> channel = std::nullopt,
                         size_t threads = 0,
                         std::optional<caf::timespan> spin = std::nullopt) {
    add_types_impl(cfg);
    if (channel)
      caf::put(cfg.content, "actorflow.tensor-channel", *channel);
    if (threads > 0)
      cfg.set("scheduler.max-threads", threads);
    if (spin)
      caf::put(cfg.content, "actorflow.scheduler-spin", *spin);
    add_options_impl(cfg);
    sys.emplace(cfg);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

struct received {
  int64_t step = 0;
  std::string key;
  tensor value;
};

received receive_one(caf::scoped_actor& self) {
  received r;
  self->receive(
    [&](recv_tensor_atom, int64_t step, std::string& key, tensor& value) {
      r = {step, std::move(key), std::move(value)};
    },
    caf::after(max_wait) >> [] { FAIL("nothing arrived"); });
  return r;
}

// An inbox on 127.0.0.1 for `self`.
std::string inbox_for(caf::scoped_actor& self) {
  return tensor_channel::open_inbox("127.0.0.1",
                                    caf::actor_cast<caf::actor>(self));
}

// An inbox for `self` and the route to it: a channel to oneself.
struct loopback {
  explicit loopback(caf::scoped_actor& self)
    : me(caf::actor_cast<caf::actor>(self)),
      sys(&self->system()),
      address(inbox_for(self)) {
    REQUIRE_FALSE(address.empty());
    route = tensor_channel::route_to(address, *sys);
    REQUIRE(route);
  }
  ~loopback() {
    tensor_channel::close_inbox(*sys, address);
  }
  caf::actor me;
  caf::actor_system* sys;
  std::string address;
  tensor_channel::route route;
};

// Requires that `who` has run its first turn (it echoes strings): a
// message to an actor not yet started makes no job for the thread that
// delivers it to run.
void require_started(caf::scoped_actor& self, const caf::actor& who) {
  bool started = false;
  self->request(who, max_wait, std::string{"ready"})
    .receive([&](std::string&) { started = true; }, [](caf::error&) {});
  REQUIRE(started);
}

// Fails if a tensor reaches `self` within 200 ms.
void expect_nothing(caf::scoped_actor& self, const char* what) {
  self->receive([&](recv_tensor_atom, int64_t, std::string&,
                    tensor&) { FAIL(what); },
                caf::after(std::chrono::milliseconds(200)) >> [] {});
}

// The port of an inbox address "host:port/id".
uint16_t port_of(const std::string& address) {
  auto colon = address.rfind(':');
  auto slash = address.rfind('/');
  return static_cast<uint16_t>(
    std::stoi(address.substr(colon + 1, slash - colon - 1)));
}

int connect_raw(uint16_t port) {
  int fd = actorflow::testing::connect_loopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

void write_raw(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
}

// Waits until the peer closes `fd` (the listener dropped the connection):
// a FIN, or a reset when it closed with bytes of ours still unread.
bool closed_by_peer(int fd) {
  timeval tv{};
  tv.tv_sec = 10;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  auto r = ::recv(fd, &c, 1, 0);
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

// A frame as tensor_channel.cpp writes it, with every field chosen.
std::string frame(uint32_t magic, uint64_t inbox, int64_t step,
                  const std::string& key, const std::string& head,
                  uint32_t flags, uint64_t data_len, const std::string& data) {
  std::string out;
  byte_writer w{out};
  w.u32(magic);
  w.u32(static_cast<uint32_t>(key.size()));
  w.u64(inbox);
  w.i64(step);
  w.u32(static_cast<uint32_t>(head.size()));
  w.u32(flags);
  w.u64(data_len);
  w.raw(key.data(), key.size());
  w.raw(head.data(), head.size());
  w.raw(data.data(), data.size());
  return out;
}

uint64_t inbox_id(const std::string& address) {
  return std::stoull(address.substr(address.rfind('/') + 1));
}

// An inbox for `self` and what a raw connection to it needs.
struct raw_inbox {
  explicit raw_inbox(caf::scoped_actor& self)
    : sys(&self->system()), address(inbox_for(self)) {
    REQUIRE_FALSE(address.empty());
    port = port_of(address);
    id = inbox_id(address);
  }
  ~raw_inbox() {
    tensor_channel::close_inbox(*sys, address);
  }
  caf::actor_system* sys;
  std::string address;
  uint16_t port = 0;
  uint64_t id = 0;
};

const std::string hello = "AFTCHAN1";
constexpr uint32_t magic = 0x46544641;
constexpr uint32_t flag_message = 2;
constexpr uint32_t flag_ring_offer = 4;
constexpr uint32_t flag_in_ring = 8;
constexpr uint32_t flag_sender = 16;

// A float matrix of `rows` x 1024 whose elements depend on `seed`.
tensor floats_of(int64_t rows, float seed) {
  std::vector<float> v(static_cast<size_t>(rows) * 1024);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = seed + static_cast<float>(i % 977);
  return tensor::from_vector<float>(v, {rows, 1024});
}

// The one-byte answer to a ring offer on a raw connection.
char answer_of(int fd) {
  timeval tv{};
  tv.tv_sec = 10;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c = 0;
  REQUIRE(::recv(fd, &c, 1, 0) == 1);
  return c;
}

// A ring position as a frame carries it.
std::string position(uint64_t pos) {
  std::string out;
  byte_writer w{out};
  w.u64(pos);
  return out;
}

// A request as a master sends a later step's: feeds and the trace flag.
run_graph_request request_of(int64_t step) {
  run_graph_request req;
  req.step_id = step;
  req.feeds = {{0, tensor::vec<float>({1.5f, -2.0f})},
               {3, tensor::vec<std::string>({"a", "bc"})}};
  req.trace = true;
  return req;
}

void check_request(const run_graph_request& got, int64_t step) {
  auto want = request_of(step);
  CHECK(got.step_id == step);
  CHECK(got.trace);
  REQUIRE(got.feeds.size() == want.feeds.size());
  for (size_t i = 0; i < want.feeds.size(); ++i) {
    CHECK(got.feeds[i].first == want.feeds[i].first);
    CHECK(got.feeds[i].second == want.feeds[i].second);
  }
}

run_graph_request receive_request(caf::scoped_actor& self) {
  run_graph_request got;
  self->receive([&](run_graph_atom, run_graph_request& req) { got = req; },
                caf::after(max_wait) >> [] { FAIL("no request arrived"); });
  return got;
}

// A message frame's body as the channel writes it (CAF's serializer).
template <class... Ts>
std::string body_of(caf::actor_system& sys, Ts&... xs) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE_FALSE(sink(xs...));
  return {buf.begin(), buf.end()};
}

} // namespace

TEST_CASE("tensor_channel: values of every kind arrive intact and in order",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  auto address = inbox_for(self);
  REQUIRE_FALSE(address.empty());
  CHECK(address.rfind("127.0.0.1:", 0) == 0);
  auto route = tensor_channel::route_to(address, self->system());
  REQUIRE(route);
  std::vector<float> big(3 << 20); // 12 MiB: more than a socket buffer
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i % 1000) * 0.5f;
  auto matrix = tensor::from_vector<float>(big, {3 << 10, 1 << 10});
  std::vector<tensor> values{
    tensor::scalar<int64_t>(-7),
    tensor::vec<float>({1.5f, -2.0f, 3.25f}),
    tensor::from_vector<bool>({true, false, true, true}, {2, 2}),
    tensor::vec<std::string>({"", "a", std::string(70000, 'x')}),
    tensor{dtype::float32, tensor_shape{0, 5}},
    matrix,
    matrix.slice(1000, 1003), // a view: written from the middle of a buffer
  };
  for (size_t i = 0; i < values.size(); ++i)
    REQUIRE(tensor_channel::send(route, 40 + static_cast<int64_t>(i),
                                 "key" + std::to_string(i), values[i],
                                 caf::actor_cast<caf::actor>(self),
                                 i % 2 == 0));
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << i);
    auto r = receive_one(self);
    CHECK(r.step == 40 + static_cast<int64_t>(i));
    CHECK(r.key == "key" + std::to_string(i));
    CHECK(r.value == values[i]);
    CHECK(r.value.shape() == values[i].shape());
  }
  tensor_channel::close_inbox(self->system(), address);
}

TEST_CASE("tensor_channel: a reader polls only while frames keep coming",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  auto& route = channel.route;
  auto& me = channel.me;
  auto value = tensor::vec<float>({1.0f});
  // A burst (the reader polls between its frames), then quiet.
  for (int64_t i = 0; i < 50; ++i)
    REQUIRE(tensor_channel::send(route, i, "k", value, me, true));
  for (int64_t i = 0; i < 50; ++i)
    REQUIRE(receive_one(self).step == i);
  auto cpu_seconds = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
           + 1e-6 * static_cast<double>(u.ru_utime.tv_usec
                                        + u.ru_stime.tv_usec);
  };
  // Polling ends within its spin time (ACTORFLOW_CHANNEL_SPIN_US, 1 ms by
  // default): over half a second of quiet the process is all but idle,
  // where a reader that kept polling would take the whole of it.
  // Outlast the reader's spin first: it signals nothing when it stops
  // polling.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(cpu_seconds() - before < 0.2);
  // After the pause the reader, blocked now, still takes the next frame.
  REQUIRE(tensor_channel::send(route, 99, "k", value, me, true));
  CHECK(receive_one(self).step == 99);
}

TEST_CASE("tensor_channel: a closed inbox gets nothing, the connection "
          "stays up for the others",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor gone{*s.sys};
  caf::scoped_actor open{*s.sys};
  auto a = inbox_for(gone);
  auto b = inbox_for(open);
  REQUIRE(inbox_id(a) != inbox_id(b));
  tensor_channel::close_inbox(*s.sys, a);
  auto value = tensor::vec<int32_t>({1, 2, 3});
  REQUIRE(tensor_channel::send(tensor_channel::route_to(a, *s.sys), 1, "k",
                               value, caf::actor_cast<caf::actor>(gone),
                               true));
  REQUIRE(tensor_channel::send(tensor_channel::route_to(b, *s.sys), 2, "k",
                               value, caf::actor_cast<caf::actor>(open),
                               true));
  auto r = receive_one(open);
  CHECK(r.step == 2);
  CHECK(r.value == value);
  expect_nothing(gone, "a closed inbox got a tensor");
  tensor_channel::close_inbox(*s.sys, b);
}

TEST_CASE("tensor_channel: the reading thread runs the receiving actor "
          "itself, while every scheduler thread is busy",
          "[tensor_channel]") {
  std::atomic<bool> busy{false};
  std::atomic<bool> release{false};
  // Declared after the flags: its actors use them until it is gone.
  system_holder s{std::nullopt, 1};
  auto& sys = *s.sys;
  // Occupies the only scheduler thread until released (or 60 s).
  auto blocker = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
    return {[&](int) {
      busy = true;
      auto until = std::chrono::steady_clock::now() + 2 * max_wait;
      // Polls `release`, which the test sets without notifying anyone;
      // bounded by `until`.
      while (!release && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }};
  });
  caf::scoped_actor self{sys};
  auto forwarder = sys.spawn(
    [dest = caf::actor_cast<caf::actor>(self)](caf::event_based_actor* me)
      -> caf::behavior {
      return {[=](recv_tensor_atom atom, int64_t step, std::string& key,
                  tensor& value) { me->send(dest, atom, step, key, value); },
              [](const std::string& x) { return x; }};
    });
  // Started before the worker is taken.
  require_started(self, forwarder);
  caf::anon_send(blocker, 1);
  auto until = std::chrono::steady_clock::now() + max_wait;
  // Polls `busy`, which the blocker sets without notifying anyone; bounded
  // by `until`.
  while (!busy && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(busy);
  auto address = tensor_channel::open_inbox("127.0.0.1", forwarder);
  REQUIRE_FALSE(address.empty());
  auto value = tensor::vec<float>({1.5f, 2.5f});
  REQUIRE(tensor_channel::send(tensor_channel::route_to(address, sys), 7,
                               "k", value, forwarder, true));
  bool arrived = false;
  self->receive(
    [&](recv_tensor_atom, int64_t step, std::string&, tensor& got) {
      arrived = step == 7 && got == value;
    },
    caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(arrived);
  release = true;
  tensor_channel::close_inbox(self->system(), address);
  caf::anon_send_exit(forwarder, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(blocker, caf::exit_reason::user_shutdown);
}

TEST_CASE("tensor_channel: a frame for another actor is not held up by "
          "the chain the reading thread runs",
          "[tensor_channel]") {
  std::atomic<bool> chain_done{false};
  std::atomic<int> pongs{0};
  // Declared after the flags: its actors use them until it is gone. No worker
  // spins, so nothing takes the chain's jobs off the reading thread but
  // the rule under test.
  system_holder s{std::nullopt, 0, caf::timespan{0}};
  auto& sys = *s.sys;
  caf::scoped_actor self{sys};
  // `first` answers a tensor with a chain of 9 round trips to `pong`,
  // each 50 ms long: 19 jobs, one after the other, more than the 17 a
  // thread runs in a row.
  auto pong = sys.spawn([&](caf::event_based_actor* me) -> caf::behavior {
    return {[&, me](int n, caf::actor back) {
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
              ++pongs;
              me->send(back, n);
            },
            [](const std::string& x) { return x; }};
  });
  auto first = sys.spawn(
    [&, pong](caf::event_based_actor* me) -> caf::behavior {
      return {[me, pong](recv_tensor_atom, int64_t, std::string&, tensor&) {
                me->send(pong, 8, caf::actor{me});
              },
              [&, me, pong](int n) {
                if (n == 0)
                  chain_done = true;
                else
                  me->send(pong, n - 1, caf::actor{me});
              },
              [](const std::string& x) { return x; }};
    });
  // Both started before any frame arrives.
  require_started(self, first);
  require_started(self, pong);
  auto a = tensor_channel::open_inbox("127.0.0.1", first);
  auto b = inbox_for(self);
  REQUIRE_FALSE(a.empty());
  auto value = tensor::vec<int32_t>({1});
  auto route = tensor_channel::route_to(a, self->system());
  REQUIRE(tensor_channel::send(route, 1, "k", value, first, true));
  REQUIRE(tensor_channel::send(tensor_channel::route_to(b, self->system()),
                               2, "k", value,
                               caf::actor_cast<caf::actor>(self), true));
  auto r = receive_one(self);
  auto pongs_before = pongs.load();
  CHECK(r.step == 2);
  // It came before the chain had gone far: at once, or after one more job
  // if its frame was not on the socket yet when the reading thread
  // looked (the rest of the chain runs on the scheduler's threads).
  // Running the whole chain first would take 8 of them.
  CHECK(pongs_before <= 1);
  auto until = std::chrono::steady_clock::now() + max_wait;
  // Polls `chain_done`, which `first` sets without notifying anyone;
  // bounded by `until`.
  while (!chain_done && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(chain_done);
  tensor_channel::close_inbox(self->system(), a);
  tensor_channel::close_inbox(self->system(), b);
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(pong, caf::exit_reason::user_shutdown);
}

TEST_CASE("tensor_channel: a peer that breaks the protocol loses its "
          "connection and nothing else",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  raw_inbox raw{self};
  auto port = raw.port;
  auto inbox = raw.id;
  auto floats = tensor::vec<float>({1.0f, 2.0f});
  auto head = tensor_header_bytes(floats);
  std::string data(static_cast<const char*>(floats.raw()),
                   floats.byte_size());
  std::vector<std::pair<std::string, std::string>> bad = {
    {"no hello", "GET / HTTP/1.1\r\n\r\n"},
    {"bad magic", hello + frame(magic + 1, inbox, 1, "k", head, 0, 8, data)},
    {"unknown flags", hello + frame(magic, inbox, 1, "k", head, 6, 8, data)},
    {"data length against the header",
     hello + frame(magic, inbox, 1, "k", head, 0, 12, data + std::string(4, '\0'))},
    {"a corrupt header", hello + frame(magic, inbox, 1, "k", "\x01\x63", 0, 8,
                                       data)},
    {"a corrupt encoding",
     hello + frame(magic, inbox, 1, "k", "\x01zzzz", 1, 0, "")},
    {"an oversized key", hello + frame(magic, inbox, 1, std::string(70000, 'k'),
                                       head, 0, 8, data)},
    {"an allocation past the limit",
     hello + frame(magic, inbox, 1, "k", head, 0, uint64_t{1} << 40, "")},
  };
  auto req = request_of(1);
  auto req_body = body_of(*s.sys, req);
  bad.emplace_back("a message of no known kind",
                   hello + frame(magic, inbox, 1, "exit", req_body,
                                 flag_message, 0, ""));
  bad.emplace_back("a message body that does not parse",
                   hello + frame(magic, inbox, 1, "run_graph", "\x05zz",
                                 flag_message, 0, ""));
  bad.emplace_back("a request for another step than its frame's",
                   hello + frame(magic, inbox, 2, "run_graph", req_body,
                                 flag_message, 0, ""));
  bad.emplace_back("a message with element data",
                   hello + frame(magic, inbox, 1, "run_graph", req_body,
                                 flag_message, 8, data));
  auto bools = tensor::vec<bool>({true, false});
  bad.emplace_back("a bool byte that is not 0 or 1",
                   hello
                     + frame(magic, inbox, 1, "k", tensor_header_bytes(bools),
                             0, 2, std::string{"\x01\x07", 2}));
  for (auto& [what, bytes] : bad) {
    INFO(what);
    int fd = connect_raw(port);
    write_raw(fd, bytes);
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  expect_nothing(self, "a broken frame was delivered");
  self->receive([](run_graph_atom, run_graph_request&) {
                  FAIL("a broken request was delivered");
                },
                caf::after(std::chrono::milliseconds(0)) >> [] {});
  // A well-formed request on a raw connection arrives.
  {
    int fd = connect_raw(port);
    write_raw(fd, hello + frame(magic, inbox, 1, "run_graph", req_body,
                                flag_message, 0, ""));
    check_request(receive_request(self), 1);
    ::close(fd);
  }
  // A well-formed frame on a raw connection arrives; so do the channel's.
  int fd = connect_raw(port);
  write_raw(fd, hello + frame(magic, inbox, 9, "raw", head, 0, 8, data));
  auto r = receive_one(self);
  CHECK(r.step == 9);
  CHECK(r.value == floats);
  ::close(fd);
  auto route = tensor_channel::route_to(raw.address, self->system());
  REQUIRE(tensor_channel::send(route, 10, "k", floats,
                               caf::actor_cast<caf::actor>(self), true));
  CHECK(receive_one(self).step == 10);
}

TEST_CASE("tensor_channel: a request's large feeds go ahead as tensor "
          "frames and arrive in place",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  auto req = request_of(11);
  // 64 KiB (through the ring from this host), 1 MiB, and the small and
  // string feeds of request_of, which stay in the request's body.
  auto big = floats_of(16, 4.0f);
  auto bigger = floats_of(256, 5.0f);
  req.feeds.emplace_back(5, big);
  req.feeds.emplace_back(6, bigger);
  auto before = tensor_channel::totals_received();
  REQUIRE(tensor_channel::send_run_graph(channel.route, req, channel.me));
  auto got = receive_request(self);
  auto after = tensor_channel::totals_received();
  CHECK(got.step_id == 11);
  REQUIRE(got.feeds.size() == 4);
  for (size_t i = 0; i < got.feeds.size(); ++i) {
    INFO("feed " << i);
    CHECK(got.feeds[i].first == req.feeds[i].first);
    CHECK(got.feeds[i].second == req.feeds[i].second);
  }
  // Two tensor frames carried the two large feeds' bytes, one message the
  // rest.
  CHECK(after.tensor_frames - before.tensor_frames == 2);
  CHECK(after.ring_bytes + after.socket_bytes - before.ring_bytes
          - before.socket_bytes
        == big.byte_size() + bigger.byte_size());
  CHECK(after.messages - before.messages == 1);
  // A feed frame for a request whose position it does not have makes the
  // request invalid rather than misplaced: parse_message says so.
  auto small = request_of(12);
  auto body = body_of(*s.sys, small);
  tensor_channel::arrived_feeds stray;
  stray.emplace_back(9, big);
  CHECK(tensor_channel::parse_message(tensor_channel::run_graph_kind, 12,
                                      body, &stray)
          .empty());
  // ... and so does one for the position of a feed that is in the body.
  tensor_channel::arrived_feeds twice;
  twice.emplace_back(0, big);
  CHECK(tensor_channel::parse_message(tensor_channel::run_graph_kind, 12,
                                      body, &twice)
          .empty());
  CHECK_FALSE(tensor_channel::parse_message(tensor_channel::run_graph_kind,
                                            12, body)
                .empty());
}

TEST_CASE("tensor_channel: a step's request and its answer arrive as "
          "messages",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  auto& route = channel.route;
  auto& me = channel.me;
  CHECK(tensor_channel::send_run_graph(route, request_of(7), me));
  check_request(receive_request(self), 7);
  run_graph_response resp;
  resp.result = {error_code::failed_precondition, "not yet"};
  resp.outputs = {{2, tensor::scalar<int64_t>(-3)}};
  resp.held = {{"/job:w/replica:0/task:0/device:CPU:0", "k;0",
                tensor::vec<double>({0.5, 8.0})}};
  node_exec_stats stat;
  stat.node_name = "n";
  stat.all_start_micros = 12;
  resp.node_stats = {stat};
  CHECK(tensor_channel::send_step_reply(route, 7, 3, resp, me));
  bool replied = false;
  self->receive(
    [&](step_reply_atom, int64_t step, int64_t part,
        run_graph_response& got) {
      replied = true;
      CHECK(step == 7);
      CHECK(part == 3);
      CHECK(got.result.code() == error_code::failed_precondition);
      CHECK(got.result.message() == "not yet");
      REQUIRE(got.outputs.size() == 1);
      CHECK(got.outputs[0].first == 2);
      CHECK(got.outputs[0].second == resp.outputs[0].second);
      REQUIRE(got.held.size() == 1);
      CHECK(got.held[0].device == resp.held[0].device);
      CHECK(got.held[0].key == "k;0");
      CHECK(got.held[0].value == resp.held[0].value);
      REQUIRE(got.node_stats.size() == 1);
      CHECK(got.node_stats[0].node_name == "n");
      CHECK(got.node_stats[0].all_start_micros == 12);
    },
    caf::after(max_wait) >> [] {});
  CHECK(replied);
  // Without a route the answer goes over CAF, as one message.
  CHECK_FALSE(tensor_channel::send_step_reply({}, 8, 1, resp, me));
  replied = false;
  self->receive(
    [&](step_reply_atom, int64_t step, int64_t part, run_graph_response&) {
      replied = step == 8 && part == 1;
    },
    caf::after(max_wait) >> [] {});
  CHECK(replied);
}

TEST_CASE("tensor_channel: frames for a peer that cannot be reached go "
          "over CAF",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  // A listener whose one-place accept queue a first connection fills: the
  // link's connect then hangs (its SYNs are dropped), so the frames below
  // queue whatever the machine's speed; closing the listener makes the
  // next SYN get a reset.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  REQUIRE(::listen(fd, 0) == 0);
  int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(filler, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
          == 0);
  auto address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/1";
  auto route = tensor_channel::route_to(address, self->system());
  REQUIRE(route);
  auto value = tensor::vec<double>({0.25, 4.0});
  auto fallbacks = tensor_channel::fallbacks();
  // Queued while connecting: each reaches `self` as one CAF message.
  REQUIRE(tensor_channel::send_run_graph(route, request_of(4),
                                         caf::actor_cast<caf::actor>(self)));
  REQUIRE(tensor_channel::send(route, 5, "late", value,
                               caf::actor_cast<caf::actor>(self), false));
  ::close(filler);
  ::close(fd);
  check_request(receive_request(self), 4);
  auto r = receive_one(self);
  CHECK(r.step == 5);
  CHECK(r.key == "late");
  CHECK(r.value == value);
  CHECK(tensor_channel::fallbacks() == fallbacks + 2);
  // The link is down now: the sender is told to use CAF itself.
  CHECK_FALSE(tensor_channel::send(route, 6, "k", value,
                                   caf::actor_cast<caf::actor>(self), true));
  // A step's request to it goes over CAF as the same message.
  CHECK_FALSE(tensor_channel::send_run_graph(
    route, request_of(7), caf::actor_cast<caf::actor>(self)));
  check_request(receive_request(self), 7);
  CHECK_FALSE(tensor_channel::route_to("127.0.0.1:1", self->system()));
  CHECK_FALSE(tensor_channel::route_to("no-port/3", self->system()));
  CHECK_FALSE(tensor_channel::route_to("127.0.0.1:1/x", self->system()));
}

TEST_CASE("tensor_channel: a host that cannot be bound gives no inbox",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  // TEST-NET-1 (RFC 5737): not an address of this machine.
  CHECK(tensor_channel::open_inbox("192.0.2.1",
                                   caf::actor_cast<caf::actor>(self))
          .empty());
}

TEST_CASE("tensor_channel: large values go through the ring, more of them "
          "than it holds",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  auto& me = channel.me;
  // Below 16 KiB a value goes through the socket.
  auto before = tensor_channel::ring_frames_received();
  auto small = floats_of(2, 1.0f);
  REQUIRE(tensor_channel::send(channel.route, 1, "small", small, me, true));
  CHECK(receive_one(self).value == small);
  CHECK(tensor_channel::ring_frames_received() == before);
  // 24 MiB through a ring of 4 MiB, views included, sent back to back by
  // both ways of writing: what does not fit goes through the socket.
  auto whole = floats_of(1024, 3.0f);
  std::vector<tensor> values;
  for (int i = 0; i < 24; ++i)
    values.push_back(i % 3 == 2 ? whole.slice(256 * (i % 4), 256 * (i % 4) + 256)
                                : floats_of(256, static_cast<float>(i)));
  for (size_t i = 0; i < values.size(); ++i)
    REQUIRE(tensor_channel::send(channel.route, 10 + static_cast<int64_t>(i),
                                 "k", values[i], me, i % 2 == 0));
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("value " << i);
    auto r = receive_one(self);
    CHECK(r.step == 10 + static_cast<int64_t>(i));
    CHECK(r.value == values[i]);
  }
  auto through_ring = tensor_channel::ring_frames_received() - before;
  CHECK(through_ring >= 1);
  CHECK(through_ring <= values.size());
}

TEST_CASE("tensor_channel: the path of a value depends on its size alone",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  // Half the 4 MiB ring (rows of 4 KiB) takes the ring every time its
  // reader has let go of the one before; the whole ring's size never
  // does, whatever the ring's position (it fit only when the ring
  // happened to be empty where it wrapped).
  auto half = floats_of(512, 1.0f);
  auto whole = floats_of(1024, 2.0f);
  auto odd = floats_of(48, 3.0f);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    for (const auto* value : {&half, &whole, &odd}) {
      auto before = tensor_channel::totals_received();
      REQUIRE(tensor_channel::send(channel.route, round, "k", *value,
                                   channel.me, round % 2 == 0));
      CHECK(receive_one(self).value == *value);
      auto after = tensor_channel::totals_received();
      auto bytes = value->byte_size();
      if (value == &whole) {
        CHECK(after.socket_bytes - before.socket_bytes == bytes);
        CHECK(after.ring_bytes == before.ring_bytes);
      } else {
        CHECK(after.ring_bytes - before.ring_bytes == bytes);
        CHECK(after.socket_bytes == before.socket_bytes);
      }
      CHECK(after.tensor_frames == before.tensor_frames + 1);
    }
  }
}

TEST_CASE("tensor_channel: with ACTORFLOW_CHANNEL_RING_MIB=0 a link offers "
          "no ring",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  raw_inbox raw{self};
  // "localhost" names another link to the same listener: a new one, made
  // while the variable is set.
  ::setenv("ACTORFLOW_CHANNEL_RING_MIB", "0", 1);
  auto route = tensor_channel::route_to("localhost:"
                                          + std::to_string(raw.port) + "/"
                                          + std::to_string(raw.id),
                                        self->system());
  REQUIRE(route);
  auto before = tensor_channel::ring_frames_received();
  auto value = floats_of(256, 5.0f);
  REQUIRE(tensor_channel::send(route, 1, "k", value,
                               caf::actor_cast<caf::actor>(self), true));
  CHECK(receive_one(self).value == value);
  ::unsetenv("ACTORFLOW_CHANNEL_RING_MIB");
  CHECK(tensor_channel::ring_frames_received() == before);
}

TEST_CASE("tensor_channel: a ring offer is answered, and a ring frame that "
          "does not match the ring loses its connection",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  raw_inbox raw{self};
  constexpr uint64_t capacity = 64 << 10;
  auto value = floats_of(8, 2.0f); // 32 KiB
  auto head = tensor_header_bytes(value);
  auto offer = [&](const tensor_channel::ring_writer& w) {
    return frame(magic, 0, static_cast<int64_t>(w.token()), w.path(), "",
                 flag_ring_offer, w.capacity(), "");
  };
  auto in_ring = [&](int64_t step, uint64_t pos) {
    return frame(magic, raw.id, step, "k", head, flag_in_ring,
                 value.byte_size(), position(pos));
  };
  SECTION("a ring the reader can map: its frames arrive, a replay does not") {
    tensor_channel::ring_writer w;
    REQUIRE(w.create(capacity));
    int fd = connect_raw(raw.port);
    write_raw(fd, hello + offer(w));
    CHECK(answer_of(fd) == 'Y');
    // A second offer on the connection is refused; the first ring stays.
    tensor_channel::ring_writer second;
    REQUIRE(second.create(capacity));
    write_raw(fd, offer(second));
    CHECK(answer_of(fd) == 'N');
    auto before = tensor_channel::ring_frames_received();
    auto pos = w.put(value.raw(), value.byte_size());
    REQUIRE(pos);
    write_raw(fd, in_ring(3, *pos));
    auto r = receive_one(self);
    CHECK(r.step == 3);
    CHECK(r.value == value);
    CHECK(tensor_channel::ring_frames_received() == before + 1);
    write_raw(fd, in_ring(4, *pos));
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  SECTION("no ring, or one the reader could not map: a ring frame ends the "
          "connection") {
    int fd = connect_raw(raw.port);
    write_raw(fd, hello);
    SECTION("not offered") {}
    SECTION("a path outside /proc/<pid>/fd") {
      tensor_channel::ring_writer w;
      REQUIRE(w.create(capacity));
      write_raw(fd, frame(magic, 0, static_cast<int64_t>(w.token()),
                          "/dev/zero", "", flag_ring_offer, capacity, ""));
      CHECK(answer_of(fd) == 'N');
    }
    SECTION("the wrong token") {
      tensor_channel::ring_writer w;
      REQUIRE(w.create(capacity));
      write_raw(fd, frame(magic, 0, static_cast<int64_t>(w.token() ^ 1),
                          w.path(), "", flag_ring_offer, capacity, ""));
      CHECK(answer_of(fd) == 'N');
    }
    // Still a connection: a frame through the socket arrives.
    write_raw(fd, frame(magic, raw.id, 5, "k", head, 0, value.byte_size(),
                        std::string(static_cast<const char*>(value.raw()),
                                    value.byte_size())));
    CHECK(receive_one(self).value == value);
    write_raw(fd, in_ring(6, 0));
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  SECTION("an offer with element data or a path too long") {
    int fd = connect_raw(raw.port);
    SECTION("data") {
      write_raw(fd, hello + frame(magic, 0, 1, "/proc/1/fd/1", "x",
                                  flag_ring_offer, capacity, ""));
    }
    SECTION("path") {
      write_raw(fd, hello + frame(magic, 0, 1, std::string(100, '1'), "",
                                  flag_ring_offer, capacity, ""));
    }
    CHECK(closed_by_peer(fd));
    ::close(fd);
  }
  expect_nothing(self, "a ring frame that does not match was delivered");
}

TEST_CASE("tensor_channel: a link says which task it comes from, and the "
          "incoming connection is named by it, and a malformed name loses the "
          "connection",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  const std::string me = "/job:worker/replica:0/task:3";
  // Not a task's name: ignored, the later good one is taken.
  tensor_channel::name_self(*s.sys, "two words");
  tensor_channel::name_self(*s.sys, me);
  tensor_channel::name_self(*s.sys, "/job:ps/replica:0/task:0"); // first stays
  loopback lb{self};
  tensor_channel::name_peer(*s.sys, lb.address, "/job:ps/replica:0/task:9");
  REQUIRE(tensor_channel::send(lb.route, 1, "k", tensor::vec<float>({1.0f}),
                               lb.me, true));
  CHECK(receive_one(self).step == 1);
  // The connection's two ends, in one process: named by what each end knows.
  auto find = [&](bool outgoing) -> std::optional<tensor_channel::link_stat> {
    for (auto& l : tensor_channel::link_stats(*s.sys))
      if (l.outgoing == outgoing && l.up == true && l.frames > 0)
        return l;
    return std::nullopt;
  };
  auto out = find(true);
  REQUIRE(out);
  CHECK(out->peer_name == "/job:ps/replica:0/task:9");
  // The incoming end: the sender frame came before the value.
  auto in = find(false);
  REQUIRE(in);
  CHECK(in->peer_name == me);
  CHECK(in->peer == out->local);

  raw_inbox raw{self};
  auto value = tensor::vec<float>({2.5f});
  auto head = tensor_header_bytes(value);
  auto data = std::string(static_cast<const char*>(value.raw()),
                          value.byte_size());
  SECTION("a raw peer's name is kept; a second one changes nothing") {
    int fd = connect_raw(raw.port);
    write_raw(fd, hello
                    + frame(magic, 0, 0, "/job:raw/replica:0/task:1", "",
                            flag_sender, 0, "")
                    + frame(magic, 0, 0, "/job:other/replica:0/task:0", "",
                            flag_sender, 0, "")
                    + frame(magic, raw.id, 7, "k", head, 0, data.size(), data));
    CHECK(receive_one(self).value == value);
    int named = 0;
    for (auto& l : tensor_channel::link_stats(*s.sys)) {
      CHECK(l.peer_name != "/job:other/replica:0/task:0");
      named += l.peer_name == "/job:raw/replica:0/task:1" ? 1 : 0;
    }
    CHECK(named == 1);
    ::close(fd);
  }
  SECTION("malformed names") {
    std::vector<std::pair<std::string, std::string>> bad = {
      {"a space", frame(magic, 0, 0, "/job:a b", "", flag_sender, 0, "")},
      {"a control character",
       frame(magic, 0, 0, "/job:a\nb", "", flag_sender, 0, "")},
      {"empty", frame(magic, 0, 0, "", "", flag_sender, 0, "")},
      {"too long",
       frame(magic, 0, 0, std::string(257, 'n'), "", flag_sender, 0, "")},
      {"with a head", frame(magic, 0, 0, "/job:a", "x", flag_sender, 0, "")},
      {"with data", frame(magic, 0, 0, "/job:a", "", flag_sender, 4, "abcd")},
      {"for an inbox", frame(magic, raw.id, 0, "/job:a", "", flag_sender, 0,
                             "")},
    };
    for (auto& [what, bytes] : bad) {
      INFO(what);
      int fd = connect_raw(raw.port);
      write_raw(fd, hello + bytes);
      CHECK(closed_by_peer(fd));
      ::close(fd);
    }
    // The inbox still takes frames.
    int fd = connect_raw(raw.port);
    write_raw(fd, hello
                    + frame(magic, raw.id, 8, "k", head, 0, data.size(),
                            data));
    CHECK(receive_one(self).step == 8);
    ::close(fd);
  }
}

TEST_CASE("tensor_channel: a value received in the ring holds its room "
          "until the last tensor sharing it is gone",
          "[tensor_channel]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  loopback channel{self};
  // 1 MiB values into a 4 MiB ring, each held on arrival: the ring fills
  // and the rest come through the socket, all intact.
  auto send_and_hold = [&](int64_t first, std::vector<tensor>& held) {
    auto before = tensor_channel::ring_frames_received();
    for (int64_t i = 0; i < 8; ++i) {
      auto value = floats_of(256, static_cast<float>(first + i));
      REQUIRE(tensor_channel::send(channel.route, first + i, "k", value,
                                   channel.me, true));
      auto r = receive_one(self);
      CHECK(r.step == first + i);
      CHECK(r.value == value);
      held.push_back(std::move(r.value));
    }
    return tensor_channel::ring_frames_received() - before;
  };
  std::vector<tensor> held;
  auto in_ring = send_and_hold(100, held);
  CHECK(in_ring >= 1);
  CHECK(in_ring <= 4);
  size_t borrowed = 0;
  for (auto& t : held)
    borrowed += t.borrowed() ? 1 : 0;
  CHECK(borrowed == in_ring);
  // Values held still read as they arrived, whatever came after them.
  for (size_t i = 0; i < held.size(); ++i)
    CHECK(held[i] == floats_of(256, static_cast<float>(100 + i)));
  // Once they are gone, the room is back.
  held.clear();
  CHECK(send_and_hold(200, held) >= 1);
}

TEST_CASE("tensor_channel: with TLS on, frames travel encrypted and a plain "
          "sender is refused",
          "[tensor_channel][tls]") {
  actorflow::testing::temp_dir certs{"actorflow-channel-tls"};
  auto cmd = std::string{ACTORFLOW_MAKE_CERTS} + " '" + certs.path.string()
             + "' node:127.0.0.1 > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  tls_config tls;
  tls.cert_file = certs / "node.pem";
  tls.key_file = certs / "node.key";
  tls.ca_file = certs / "ca.pem";
  std::mutex mtx;
  std::string said;
  tls.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard{mtx};
    said += line + "\n";
  };
  caf::actor_system_config cfg;
  add_types_impl(cfg);
  caf::put(cfg.content, "middleman.enable-automatic-connections", false);
  add_options_impl(cfg);
  caf::actor_system sys{cfg};
  enable_tls(sys, tls);
  // Incoming peers must have a certificate for a host of the cluster.
  trust_hosts(sys, {"127.0.0.1:2222"});
  caf::scoped_actor self{sys};
  auto me = caf::actor_cast<caf::actor>(self);
  auto address = inbox_for(self);
  REQUIRE_FALSE(address.empty());
  auto slash = address.rfind('/');
  auto colon = address.rfind(':', slash);
  auto port = static_cast<uint16_t>(
    std::stoi(address.substr(colon + 1, slash - colon - 1)));
  // A sender of the same system, through a proxy that records the wire.
  actorflow::testing::recording_proxy wire{port};
  auto route = tensor_channel::route_to(
    "127.0.0.1:" + std::to_string(wire.port()) + address.substr(slash), sys);
  REQUIRE(route);
  // Below the size that goes through the ring of shared memory.
  std::vector<float> marker(1024, 1234.5f);
  auto value = tensor::vec<float>(marker);
  auto before = tensor_channel::fallbacks();
  REQUIRE(tensor_channel::send(route, 5, "tls_marker_key", value, me, true));
  auto r = receive_one(self);
  CHECK(r.key == "tls_marker_key");
  CHECK(r.value == value);
  CHECK(tensor_channel::fallbacks() == before);
  auto seen = wire.seen();
  // The frame did cross the proxy, as ciphertext.
  CHECK(seen.size() > marker.size() * sizeof(float));
  CHECK(seen.find("tls_marker_key") == std::string::npos);
  CHECK(seen.find(std::string(reinterpret_cast<const char*>(marker.data()),
                              64))
        == std::string::npos);
  // A sender without TLS does not get through: its frame falls back to
  // CAF, and the listener says whom it refused.
  system_holder plain_sys;
  auto plain = tensor_channel::route_to(address, *plain_sys.sys);
  REQUIRE(plain);
  REQUIRE(tensor_channel::send(plain, 6, "plain", value, me, true));
  auto fallback = receive_one(self);
  CHECK(fallback.key == "plain");
  CHECK(tensor_channel::fallbacks() == before + 1);
  // Polls what the TLS log said: its callback signals nothing when a line
  // comes; bounded by the deadline.
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (said.find("(tensor channel): TLS handshake failed") != std::string::npos)
        break;
    }
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  tensor_channel::close_inbox(self->system(), address);
}
