// host_port: the one parser and printer of "host:port" addresses.

#include <catch2/catch.hpp>

#include "actorflow/transport/host_port.hpp"
#include "actorflow/graph/device_name.hpp"

using namespace actorflow;

TEST_CASE("host_port: names, IPv4 and bracketed IPv6 round-trip",
          "[host_port]") {
  struct row {
    const char* text;
    const char* host;
    uint16_t port;
  };
  for (auto [text, host, port] :
       {row{"ps0.example.com:2222", "ps0.example.com", 2222},
        row{"127.0.0.1:0", "127.0.0.1", 0},
        row{"localhost:65535", "localhost", 65535},
        row{"[::1]:2222", "::1", 2222},
        row{"[fe80::1%eth0]:80", "fe80::1%eth0", 80}}) {
    INFO(text);
    host_port hp;
    REQUIRE(host_port::parse(text, hp).ok());
    CHECK(hp.host == host);
    CHECK(hp.port == port);
    CHECK(hp.to_string() == text);
    CHECK(host_of(text) == host);
  }
}

TEST_CASE("host_port: bad addresses are InvalidArgument naming the text, "
          "and leave the output as it was",
          "[host_port]") {
  for (auto text : {"", "host", "host:", ":2222", "host:22x", "host:65536",
                    "host:-1", "host:123456", "::1:2222", "[::1]", "[]:80",
                    "a[b]:80"}) {
    INFO(text);
    host_port hp{"kept", 7};
    auto err = host_port::parse(text, hp);
    REQUIRE_FALSE(err.ok());
    CHECK(err.code() == error_code::invalid_argument);
    CHECK_THAT(err.message(), Catch::Contains("\"" + std::string{text} + "\""));
    CHECK(hp == host_port{"kept", 7});
  }
  // A bare host (no port) is its own host.
  CHECK(host_of("ps0") == "ps0");
  CHECK(host_of("::1") == "::1");
  CHECK(host_of("[::1]") == "::1");
}

TEST_CASE("task_name: TF's task prefix", "[host_port]") {
  CHECK(task_name("ps", 0) == "/job:ps/replica:0/task:0");
  CHECK(task_name("worker", 12, 3) == "/job:worker/replica:3/task:12");
  CHECK(full_device_name("ps", 0, 1, "CPU", 0)
        == task_name("ps", 1) + "/device:CPU:0");
}
