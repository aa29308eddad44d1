// plan_registration: the master's fan-in of one plan's registration and
// the runs that wait for it, without actors or sockets.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "plan_registration.hpp"

using namespace actorflow;

namespace {

using registration = plan_registration<std::string>;
using outcome = registration::outcome;

} // namespace

TEST_CASE("plan_registration: ready once every partition is registered, "
          "with the runs that waited",
          "[plan_registration]") {
  registration r{3};
  r.wait("second run");
  CHECK(r.registered(1) == outcome::waiting);
  r.wait("third run");
  CHECK(r.registered(0) == outcome::waiting);
  CHECK_FALSE(r.settled());
  CHECK(r.registered(2) == outcome::ready);
  CHECK(r.settled());
  CHECK(r.error().ok());
  CHECK(r.take_runs() == std::vector<std::string>{"second run", "third run"});
  // Handed over once.
  CHECK(r.take_runs().empty());
}

TEST_CASE("plan_registration: an answer for a partition that already "
          "answered, or that does not exist, changes nothing",
          "[plan_registration]") {
  registration r{2};
  CHECK(r.registered(0) == outcome::waiting);
  CHECK(r.registered(0) == outcome::settled);
  CHECK(r.registered(7) == outcome::settled);
  CHECK(r.unreachable(0, "again") == outcome::settled);
  CHECK_FALSE(r.settled());
  CHECK(r.registered(1) == outcome::ready);
  // After it is ready, a late answer has nothing to start.
  CHECK(r.failed(1, {error_code::internal, "late"}) == outcome::settled);
  CHECK(r.error().ok());
}

TEST_CASE("plan_registration: the first hard error fails it at once, and "
          "later answers only settle",
          "[plan_registration]") {
  registration r{3};
  r.wait("waiting run");
  CHECK(r.registered(0) == outcome::waiting);
  CHECK(r.failed(1, {error_code::invalid_argument, "bad partition"})
        == outcome::failed);
  CHECK(r.settled());
  CHECK(r.error().code() == error_code::invalid_argument);
  CHECK(r.error().message() == "bad partition");
  // The third partition registers after the failure: its executor is
  // ended by the caller, nothing starts.
  CHECK(r.registered(2) == outcome::settled);
  CHECK(r.failed(2, {error_code::aborted, "second error"})
        == outcome::settled);
  CHECK(r.error().message() == "bad partition");
  CHECK(r.take_runs() == std::vector<std::string>{"waiting run"});
}

TEST_CASE("plan_registration: unreachable tasks fail it once every "
          "partition has answered, naming each",
          "[plan_registration]") {
  SECTION("one") {
    registration r{2};
    CHECK(r.unreachable(1, "Could not connect to /job:w/replica:0/task:1")
          == outcome::waiting);
    CHECK_FALSE(r.settled());
    CHECK(r.registered(0) == outcome::failed);
    CHECK(r.error().code() == error_code::unavailable);
    CHECK(r.error().message()
          == "Could not connect to /job:w/replica:0/task:1");
  }
  SECTION("several") {
    registration r{3};
    CHECK(r.unreachable(0, "a down") == outcome::waiting);
    CHECK(r.registered(1) == outcome::waiting);
    CHECK(r.unreachable(2, "b down") == outcome::failed);
    CHECK(r.error().code() == error_code::unavailable);
    CHECK(r.error().message() == "2 tasks unreachable: a down; b down");
  }
  SECTION("a hard error before the last answer wins") {
    registration r{2};
    CHECK(r.unreachable(0, "a down") == outcome::waiting);
    CHECK(r.failed(1, {error_code::aborted, "session closed"})
          == outcome::failed);
    CHECK(r.error().code() == error_code::aborted);
  }
}
