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

TEST_CASE("configure_default_system: INI values and CAF options are type- "
          "and range-checked, naming the key or argument and the value",
          "[runtime]") {
  auto refused = [](std::vector<std::string> args, std::string ini,
                    const std::string& message) {
    INFO(message);
    auto err = error_of([&] {
      configure_default_system(std::move(args), std::move(ini), "my.ini");
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->what(), Contains(message));
  };
  // CAF 0.17 took these in silence (and ran with its defaults).
  refused({}, "[scheduler]\nmax-threads = -3\n",
          "my.ini: [scheduler] max-threads = -3: expected a uint64");
  refused({}, "[scheduler]\nmax-threads = 'many'\n",
          "my.ini: [scheduler] max-threads = 'many': expected a uint64");
  refused({}, "[scheduler]\nmax-threads = 0\n",
          "my.ini: [scheduler] max-threads = 0: must be at least 1");
  refused({}, "[scheduler]\nmax-threads = 5000\n",
          "my.ini: [scheduler] max-threads = 5000: must be at most 1024");
  refused({}, "[scheduler]\nmax-throughput = 0\n",
          "[scheduler] max-throughput = 0: must be at least 1");
  refused({}, "[scheduler]\npolicy = 'fastest'\n",
          "[scheduler] policy = 'fastest': expected 'stealing' or "
          "'sharing'");
  refused({}, "[middleman]\nheartbeat-interval = -1s\n",
          "[middleman] heartbeat-interval = -1s: must not be negative");
  refused({}, "[middleman]\nenable-automatic-connections = 3\n",
          "[middleman] enable-automatic-connections = 3: expected a boolean");
  refused({}, "[actorflow]\ntensor-channel = 2\n",
          "[actorflow] tensor-channel = 2: expected true or false");
  refused({}, "[actorflow]\nscheduler-spin = 5s\n",
          "[actorflow] scheduler-spin = 5s: must be between 0s and 1s");
  // On the command line the argument is named as given.
  refused({"--scheduler.max-threads=0"}, "",
          "--scheduler.max-threads=0: must be at least 1");
  // What is fine stays fine.
  for (const auto* ini :
       {"[scheduler]\nmax-threads = 2\npolicy = 'sharing'\n",
        "[middleman]\nheartbeat-interval = 500ms\nworkers = 0\n",
        "[actorflow]\ntensor-channel = false\nscheduler-spin = 20us\n"}) {
    INFO(ini);
    auto err = error_of([&] { configure_default_system({}, ini, "ok.ini"); });
    // The system may exist by now (FailedPrecondition): the values passed.
    if (err)
      CHECK(err->code() == error_code::failed_precondition);
  }
}
