// apps/support: the exit-status convention the programs share, the child
// process's line hook the --local launcher forwards with, and the flag
// validators' messages.

#include <csignal>
#include <mutex>
#include <utility>

#include "actorflow/support/flags.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// What `v` says about `text` ("" when it takes it).
std::string verdict(const CLI::Validator& v, std::string text) {
  return v(text);
}

} // namespace

TEST_CASE("support: TF's codes map to one exit status", "[support]") {
  CHECK(support::exit_status_of(error_code::ok) == 0);
  CHECK(support::exit_status_of(error_code::invalid_argument) == 2);
  for (auto code : {error_code::unknown, error_code::unavailable,
                    error_code::deadline_exceeded, error_code::not_found,
                    error_code::failed_precondition})
    CHECK(support::exit_status_of(code) == 1);
}

TEST_CASE("support: node and trainer both exit 2 on an InvalidArgument "
          "start",
          "[support]") {
  // The ps address has no port: the server's InvalidArgument.
  std::string cluster = R"({"ps": ["nohost"], "worker": ["127.0.0.1:1"]})";
  for (const auto* program : {ACTORFLOW_NODE_PATH, ACTORFLOW_TRAIN_PATH}) {
    auto result = run_process({program, "--cluster", cluster, "--job_name",
                               "ps", "--task_index", "0"},
                              15s, {.env = {"TF_CONFIG"}});
    INFO(program << ": " << result.err);
    CHECK(result.status.exited);
    CHECK(result.status.code == 2);
    CHECK_THAT(result.err, Catch::Contains("could not start "
                                           "/job:ps/replica:0/task:0 at "
                                           "nohost"));
  }
}

TEST_CASE("support: on_line sees every line of both streams", "[support]") {
  std::mutex mtx;
  std::vector<std::pair<int, std::string>> lines;
  support::spawn_options opts;
  opts.on_line = [&](int stream, std::string_view line) {
    std::lock_guard guard{mtx};
    lines.emplace_back(stream, std::string{line});
  };
  support::child_process child{
    {"/bin/sh", "-c", "printf 'a\\nb\\n'; printf 'e\\n' >&2; printf c"}, opts};
  auto st = child.wait(10s);
  REQUIRE(st);
  CHECK(st->success());
  REQUIRE(child.drain(5s));
  std::lock_guard guard{mtx};
  std::vector<std::string> out;
  std::vector<std::string> err;
  for (const auto& [stream, line] : lines)
    (stream == 1 ? out : err).push_back(line);
  // The last, unterminated line too.
  CHECK(out == std::vector<std::string>{"a", "b", "c"});
  CHECK(err == std::vector<std::string>{"e"});
  CHECK(child.out() == "a\nb\nc");
}

TEST_CASE("support: a child is stopped and reaped by its destructor",
          "[support]") {
  pid_t pid = 0;
  {
    support::child_process child{{"/bin/sleep", "60"}};
    pid = child.pid();
    CHECK(child.running());
  }
  // Gone and reaped (a zombie would still be there).
  CHECK_FALSE(runs(pid, "/bin/sleep"));
  CHECK(::kill(pid, 0) != 0);
}

TEST_CASE("support: the validators' messages", "[support]") {
  using namespace support;
  CHECK(verdict(integer_in(1, 64), "2").empty());
  CHECK(verdict(integer_in(1, 64), "0") == "must be at least 1, got 0");
  CHECK(verdict(integer_in(1, 64), "65") == "must be at most 64, got 65");
  CHECK(verdict(integer_in(1, 64), "2x") == "expected an integer, got '2x'");
  CHECK(verdict(positive_number(), "fast") == "expected a number, got 'fast'");
  CHECK(verdict(positive_number(), "0") == "must be positive, got 0");
  CHECK(verdict(number_below(1), "1") == "must be below 1, got 1");
  CHECK(verdict(one_of({"sgd", "momentum", "adam"}), "rmsprop")
        == "expected sgd, momentum or adam, got 'rmsprop'");
  CHECK(verdict(port_number(), "65535").empty());
  CHECK(verdict(port_number(), "70000")
        == "expected a port number, got '70000'");
  CHECK(verdict(process_id(), "1") == "expected a process id, got '1'");
  CHECK(verdict(host_port_address(), "[::1]:2222").empty());
  CHECK_THAT(verdict(host_port_address(), "nohost"),
             Catch::StartsWith("expected HOST:PORT: "));
  auto hosts = list_of(host_port_address());
  CHECK(verdict(hosts, "a:1,b:2").empty());
  CHECK(verdict(hosts, "a:1,,b:2") == "empty entry in 'a:1,,b:2'");
  CHECK(verdict(list_of(integer_in(1, 9), 2), "1")
        == "expected 2 comma-separated entries, got '1'");
  CHECK(verdict(non_empty(), "") == "empty");
}
