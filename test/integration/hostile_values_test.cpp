// Issue 30, with real processes: a node survives graphs whose tensors'
// sizes overflow (a Fill of [2^62+1] floats used to kill it with SIGSEGV:
// 4 * (2^62 + 1) bytes wrapped to 4), a Print message from a client
// reaches the node's log escaped, and bad configuration values stop a
// program before it serves, with exit status 2 naming the flag or key and
// the value.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/temp_dir.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t two_62 = int64_t{1} << 62;

} // namespace

TEST_CASE("hostile values: a node survives steps whose tensors' sizes "
          "overflow, and serves the next",
          "[hostile][security]") {
  local_cluster nodes{node_path, {{"ps", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  std::vector<std::pair<std::string, output>> attacks;
  variable v;
  output doubled;
  {
    device_scope on_ps{"/job:ps/task:0"};
    v = variable{tensor::scalar(21.0f), named("v")};
    doubled = v.value() * 2.0f;
    attacks.emplace_back("Fill [2^62+1] floats",
                         reduce_sum(fill({two_62 + 1}, constant(1.0f))));
    attacks.emplace_back("Fill [2^61] doubles",
                         reduce_sum(fill({int64_t{1} << 61},
                                         constant(1.0))));
    attacks.emplace_back("RandomUniform [2^62+1]",
                         reduce_sum(random_uniform({two_62 + 1})));
    attacks.emplace_back("ones [2^62+1] bools, more than memory",
                         ones({two_62 + 1}, dtype::bool_));
  }
  session sess{nodes.target("ps", 0), bounded(), &g};
  sess.run(v.initializer());
  for (const auto& [what, fetch] : attacks) {
    INFO(what);
    auto err = error_of([&] { sess.run(fetch); });
    REQUIRE(err);
    CHECK((err->code() == error_code::invalid_argument
           || err->code() == error_code::resource_exhausted));
    INFO(err->what());
    REQUIRE(nodes.process("ps", 0).running());
    // The same session, and a new one, still run steps on the node.
    CHECK(sess.run(doubled).scalar_value<float>() == 42.0f);
  }
  auto err = error_of([&] { sess.run(attacks.front().second); });
  REQUIRE(err);
  CHECK_THAT(err->what(), Contains("Encountered overflow when multiplying "
                                   "4611686018427387905 with 4"));
  session again{nodes.target("ps", 0), bounded(), &g};
  CHECK(again.run(doubled).scalar_value<float>() == 42.0f);
  REQUIRE(nodes.process("ps", 0).running());
}

TEST_CASE("hostile values: a Print message from a client reaches the node's "
          "log escaped, on one line",
          "[hostile][security]") {
  local_cluster nodes{node_path, {{"ps", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  output printed;
  {
    device_scope on_ps{"/job:ps/task:0"};
    printed = print(constant(1.0f), {constant(7)},
                    "x\nactorflow-node: error: forged line \x1b[2J\x1b[31m");
  }
  session sess{nodes.target("ps", 0), bounded(), &g};
  sess.run(printed);
  auto& node = nodes.process("ps", 0);
  std::string err;
  for (int i = 0; i < 100; ++i) {
    err = node.err();
    if (err.find("forged line") != std::string::npos)
      break;
    ::usleep(50'000);
  }
  INFO(err);
  CHECK_THAT(err, Contains("x\\nactorflow-node: error: forged line "
                           "\\x1b[2J\\x1b[31m[7]"));
  CHECK(err.find("\nactorflow-node: error: forged") == std::string::npos);
  CHECK(err.find('\x1b') == std::string::npos);
}

namespace {

struct bad_start {
  std::string program;
  std::vector<std::string> args;
  std::string message;
};

} // namespace

TEST_CASE("hostile values: bad configuration values exit 2 before the "
          "program serves, naming the flag or key and the value",
          "[hostile][config]") {
  temp_dir dir;
  auto address = "127.0.0.1:" + std::to_string(support::free_port());
  std::vector<std::string> node_flags{"--ps_hosts", address, "--job_name",
                                      "ps", "--task_index", "0",
                                      "--parent-pid",
                                      std::to_string(::getpid())};
  auto negative = dir.write("negative.ini", "[scheduler]\nmax-threads = -3\n");
  auto zero = dir.write("zero.ini", "[caf.scheduler]\nmax-threads = 0\n");
  auto policy = dir.write("policy.ini", "[scheduler]\npolicy = 'fast'\n");
  auto port = dir.write("port.ini", "[actorflow]\nmetrics_port = 70000\n");
  std::filesystem::create_directory(dir / "conf.d");
  const std::string node = node_path;
  const std::string train = ACTORFLOW_TRAIN_PATH;
  std::vector<bad_start> cases{
    {node, {"--config-file", negative},
     "--config-file " + negative
       + ": [scheduler] max-threads = -3: expected a uint64"},
    {node, {"--config-file", zero},
     "--config-file " + zero + ": [scheduler] max-threads = 0: must be at "
                               "least 1"},
    {node, {"--config-file", policy},
     "--config-file " + policy + ": [scheduler] policy = 'fast': expected "
                                 "'stealing' or 'sharing'"},
    {node, {"--caf.scheduler.max-threads=0"},
     "--caf.scheduler.max-threads=0: must be at least 1"},
    {node, {"--config-file", dir / "conf.d"},
     "--config-file " + (dir / "conf.d") + ": is a directory, not a file"},
    {node, {"--metrics_port", "70000"},
     "--metrics_port: expected a port number, got '70000'"},
    {node, {"--metrics_port=-1"},
     "--metrics_port: expected a port number, got '-1'"},
    {node, {"--config-file", port},
     "--config-file " + port
       + ": --metrics_port: expected a port number, got '70000'"},
    {train, {"--local", "1", "--metrics_port", "70000"},
     "--metrics_port: expected a port number, got '70000'"},
    {train, {"--local", "1", "--config-file", dir / "conf.d"},
     "--config-file " + (dir / "conf.d") + ": is a directory, not a file"},
    {train, {"--local", "1", "--config-file", negative},
     "--config-file " + negative
       + ": [scheduler] max-threads = -3: expected a uint64"},
  };
  for (const auto& bad : cases) {
    std::vector<std::string> argv{bad.program};
    if (bad.program == node)
      argv.insert(argv.end(), node_flags.begin(), node_flags.end());
    argv.insert(argv.end(), bad.args.begin(), bad.args.end());
    auto result = run_process(argv, std::chrono::seconds{20},
                              {.env = {"TF_CONFIG"}});
    auto name = std::filesystem::path{bad.program}.filename().string();
    INFO(name << " " << bad.args.back() << "\n" << result.err);
    CHECK_FALSE(result.timed_out);
    CHECK(result.status.exited);
    CHECK(result.status.code == 2);
    CHECK_THAT(result.err, Contains(name + ": error: " + bad.message));
    CHECK(result.out.find("serving") == std::string::npos);
    CHECK(result.err.find("serving") == std::string::npos);
    CHECK(result.err.find("started /job") == std::string::npos);
  }
}
