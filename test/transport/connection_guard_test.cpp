// The rules of connection_guard, without sockets: admission at the bounds
// (the oldest connection without a handshake makes room), deadlines, the
// in-flight byte budget, and the rate-limited log.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "connection_guard.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

struct fixture {
  std::vector<int> shut;
  std::vector<std::string> said;
  connection_guard::time_point t0 = connection_guard::clock_type::now();

  connection_guard make(guard_limits limits) {
    return connection_guard{limits, [this](int fd) { shut.push_back(fd); },
                            [this](const std::string& line) {
                              said.push_back(line);
                            }};
  }
};

guard_limits small() {
  guard_limits l;
  l.max_connections = 4;
  l.max_per_peer = 2;
  l.handshake_timeout = 1000ms;
  l.idle_timeout = 500ms;
  l.max_inflight_bytes = 100;
  l.log_burst = 2;
  l.log_interval = 10'000ms;
  return l;
}

} // namespace

TEST_CASE("connection_guard: at the per-peer bound the peer's oldest "
          "connection without a handshake makes room",
          "[transport][guard]") {
  fixture f;
  auto g = f.make(small());
  auto a = g.admit(10, "10.0.0.1", "CAF", f.t0);
  auto b = g.admit(11, "10.0.0.1", "CAF", f.t0);
  auto other = g.admit(20, "10.0.0.2", "CAF", f.t0);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(other);
  CHECK(g.size("10.0.0.1") == 2);
  auto c = g.admit(12, "10.0.0.1", "CAF", f.t0);
  REQUIRE(c);
  // fd 10 was the oldest of that peer: shut down, counted out; the other
  // peer's connection untouched.
  CHECK(f.shut == std::vector<int>{10});
  CHECK(g.size("10.0.0.1") == 2);
  CHECK(g.size() == 3);
  // Its owner's release afterwards changes nothing.
  g.release(a);
  CHECK(g.size() == 3);
}

TEST_CASE("connection_guard: established connections are never evicted, "
          "and a new one is refused when all are",
          "[transport][guard]") {
  fixture f;
  auto g = f.make(small());
  auto a = g.admit(10, "10.0.0.1", "CAF", f.t0);
  auto b = g.admit(11, "10.0.0.1", "CAF", f.t0);
  a->set_established();
  b->set_established();
  CHECK_FALSE(g.admit(12, "10.0.0.1", "CAF", f.t0));
  CHECK(f.shut.empty());
  REQUIRE(f.said.size() == 1);
  CHECK(f.said[0]
        == "refused CAF connection from 10.0.0.1: 2 connections from it "
           "are open, all past their handshake");
  // Another peer still gets in, up to the total bound.
  CHECK(g.admit(20, "10.0.0.2", "CAF", f.t0));
  CHECK(g.admit(21, "10.0.0.2", "CAF", f.t0));
  CHECK(g.size() == 4);
  // At the total bound the oldest without a handshake goes, whoever's.
  auto c = g.admit(30, "10.0.0.3", "CAF", f.t0);
  REQUIRE(c);
  CHECK(f.shut == std::vector<int>{20});
  g.release(a);
  CHECK(g.size("10.0.0.1") == 1);
  CHECK(g.admit(13, "10.0.0.1", "CAF", f.t0));
}

TEST_CASE("connection_guard: a connection past its deadline is shut down "
          "once, a released one never",
          "[transport][guard]") {
  fixture f;
  auto g = f.make(small());
  auto a = g.admit(10, "10.0.0.1", "CAF", f.t0);
  auto b = g.admit(11, "10.0.0.2", "CAF", f.t0);
  auto c = g.admit(12, "10.0.0.3", "CAF", f.t0);
  // a finishes its handshake and talks; b never does; c is released.
  a->set_established();
  a->extend(f.t0 + 800ms, g.limits().idle_timeout);
  g.release(c);
  CHECK(g.expire(f.t0 + 999ms) == 0);
  CHECK(g.expire(f.t0 + 1000ms) == 1);
  CHECK(f.shut == std::vector<int>{11});
  CHECK(g.expire(f.t0 + 1200ms) == 0);
  // a's silence passes its idle timeout.
  CHECK(g.expire(f.t0 + 1300ms) == 1);
  CHECK(f.shut == std::vector<int>{11, 10});
  // A cleared deadline (a channel between frames) never expires.
  auto d = g.admit(13, "10.0.0.4", "CAF", f.t0);
  d->set_established();
  d->clear_deadline();
  CHECK(g.expire(f.t0 + 1h) == 0);
  CHECK(f.said.size() == 2);
  CHECK(f.said[0] == "closed the connection from 10.0.0.2: no handshake for "
                     "1000 ms");
}

TEST_CASE("connection_guard: announced bytes are charged against the "
          "in-flight budget",
          "[transport][guard]") {
  fixture f;
  auto g = f.make(small());
  CHECK(g.charge(60, "peer A", f.t0));
  CHECK_FALSE(g.charge(41, "peer B", f.t0));
  CHECK(g.inflight() == 60);
  CHECK(g.charge(40, "peer B", f.t0));
  g.refund(60);
  CHECK(g.inflight() == 40);
  // An announcement past the whole budget (or past uint64) never fits.
  CHECK_FALSE(g.charge(~uint64_t{0}, "peer C", f.t0));
  CHECK(g.inflight() == 40);
  REQUIRE_FALSE(f.said.empty());
  CHECK(f.said[0].find("refused 41 bytes announced by peer B") == 0);
}

TEST_CASE("connection_guard: refusals are logged at a bounded rate, and "
          "those held back are counted",
          "[transport][guard]") {
  fixture f;
  auto g = f.make(small());
  for (int i = 0; i < 300; ++i)
    g.say("line " + std::to_string(i), f.t0 + std::chrono::milliseconds(i));
  CHECK(f.said == std::vector<std::string>{"line 0", "line 1"});
  g.say("later", f.t0 + 10'000ms);
  CHECK(f.said
        == std::vector<std::string>{
          "line 0", "line 1",
          "later (and 298 more refusals before, not shown)"});
}

TEST_CASE("connection_guard: an established connection's silence is what "
          "its heartbeats tolerate, and a dialed one is watched outside the "
          "bounds",
          "[transport][guard][detector]") {
  fixture f;
  auto limits = small();
  limits.max_connections = 1;
  limits.log_burst = 10;
  auto g = f.make(limits);
  auto in = g.admit(10, "10.0.0.1", "CAF", f.t0);
  // Dialed: not counted, so the bound of one admits nothing more, and
  // it does not take the admitted one's place.
  auto out = g.track(20, "10.0.0.2:4000", f.t0);
  for (auto& e : {in, out}) {
    e->set_established();
    e->extend_silence(f.t0, g.limits().idle_timeout);
  }
  CHECK(g.size() == 1);
  CHECK_FALSE(g.admit(11, "10.0.0.3", "CAF", f.t0));
  CHECK(f.shut.empty());
  f.said.clear();
  // Before a heartbeat set a tolerance: the idle timeout (500 ms here).
  CHECK(g.expire(f.t0 + 499ms) == 0);
  // The dialed one learnt from its peer's heartbeats: 4 s from now.
  out->set_tolerance(4s, 0.5, 0.01);
  out->extend_silence(f.t0 + 100ms, g.limits().idle_timeout);
  CHECK(g.expire(f.t0 + 500ms) == 1);
  CHECK(f.shut == std::vector<int>{10});
  CHECK(g.expire(f.t0 + 4099ms) == 0);
  CHECK(g.expire(f.t0 + 4100ms) == 1);
  CHECK(f.shut == std::vector<int>{10, 20});
  REQUIRE(f.said.size() == 2);
  CHECK(f.said[0] == "closed the connection from 10.0.0.1: silent for 500 ms");
  CHECK(f.said[1]
        == "closed the connection to 10.0.0.2:4000: silent for 4000 ms, "
           "longer than its heartbeats' history tolerates (every 500 ms, "
           "spread 10 ms; phi reached 8)");
  g.release(out);
  CHECK(g.expire(f.t0 + 1h) == 0);
}

TEST_CASE("connection_guard: a connection whose peer sent bytes this "
          "process has not read is not silent",
          "[transport][guard][detector]") {
  std::vector<int> shut;
  size_t unread = 64;
  auto t0 = connection_guard::clock_type::now();
  connection_guard g{small(), [&](int fd) { shut.push_back(fd); },
                     [](const std::string&) {},
                     [&](int) { return unread; }};
  auto e = g.admit(10, "10.0.0.1", "CAF", t0);
  auto fresh = g.admit(11, "10.0.0.2", "CAF", t0);
  e->set_established();
  e->extend_silence(t0, g.limits().idle_timeout);
  // Past the deadline, but the socket holds the peer's bytes: this
  // process is the slow one; looked at again a heartbeat interval on.
  // A connection without its handshake is not forgiven for that.
  CHECK(g.expire(t0 + 1s) == 1);
  CHECK(shut == std::vector<int>{11});
  CHECK(g.expire(t0 + 1499ms) == 0);
  unread = 0;
  CHECK(g.expire(t0 + 1499ms) == 0);
  CHECK(g.expire(t0 + 1500ms) == 1);
  CHECK(shut == std::vector<int>{11, 10});
}
