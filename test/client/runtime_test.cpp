// configure_default_system: CAF's options for the process-wide actor
// system are checked before anything changes, and only before it exists.

#include <catch2/catch.hpp>

#include "actorflow/graph/status.hpp"
#include "actorflow/client/runtime.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

TEST_CASE("configure_default_system: bad options are InvalidArgument "
          "naming them, and the system is configured only before it exists",
          "[runtime]") {
  auto err = error_of([] {
    configure_default_system({"--scheduler.max-threads=x"});
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Contains("--scheduler.max-threads=x"));
  err = error_of([] { configure_default_system({"--scheduler.nope=1"}); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  err = error_of([] {
    configure_default_system({}, "[middleman]\nheartbeat = 1\n", "my.ini");
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(),
             Contains("my.ini: [middleman] heartbeat is not a CAF option"));
  err = error_of([] {
    configure_default_system({}, "[scheduler]\nmax-threads = 2x\n", "f.ini");
  });
  REQUIRE(err);
  CHECK_THAT(err->what(), Contains("f.ini: "));
  // Valid, but too late once the system runs.
  default_system();
  err = error_of([] {
    configure_default_system({"--scheduler.max-threads=2"},
                             "[middleman]\nheartbeat-interval = 1s\n");
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::failed_precondition);
}
