// The actorflow-node launcher as a process: its command line, its serving
// line, its exit codes, and clean stops on SIGTERM and SIGINT.

#include <csignal>
#include <regex>
#include <thread>

#include <httplib.h>

#include "common/temp_dir.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

std::string parent_pid() {
  return std::to_string(::getpid());
}

// A one-task cluster spec on a free port, as JSON.
std::string one_worker_json(std::string& address) {
  address = "127.0.0.1:" + std::to_string(support::free_port());
  return R"({"worker": [")" + address + R"("]})";
}

} // namespace

TEST_CASE("launcher: prints its serving line and stops on signals",
          "[launcher]") {
  auto sig = GENERATE(SIGTERM, SIGINT);
  std::string address;
  auto json = one_worker_json(address);
  child_process node{{node_path, "--cluster", json, "--job", "worker",
                      "--task", "0", "--parent-pid", parent_pid()}};
  auto line = node.wait_for_line("serving", 15s);
  INFO(node.err());
  REQUIRE(line);
  CHECK(*line == "actorflow-node: serving /job:worker/replica:0/task:0 at "
                   + address + " (cluster: ClusterSpec({'worker': ['"
                   + address + "']}))");
  // The node really serves: a session on it runs a step.
  {
    graph g;
    auto as_default = g.as_default();
    auto c = constant(4.0f) * 2.0f;
    session sess{"grpc://" + address, bounded(), &g};
    CHECK(sess.run(c).scalar_value<float>() == 8.0f);
  }
  node.send_signal(sig);
  auto st = node.wait(10s);
  INFO("stderr after the signal: " << node.err());
  REQUIRE(st);
  CHECK(st->exited);
  CHECK(st->code == 0);
}

TEST_CASE("launcher: TF-style flags", "[launcher]") {
  auto ports = support::free_ports(2);
  auto ps = "127.0.0.1:" + std::to_string(ports[0]);
  auto worker = "127.0.0.1:" + std::to_string(ports[1]);
  child_process node{{node_path, "--ps_hosts", ps, "--worker_hosts", worker,
                      "--job_name=ps", "--task_index=0", "--parent-pid",
                      parent_pid()}};
  auto line = node.wait_for_line("serving", 15s);
  INFO(node.err());
  REQUIRE(line);
  CHECK_THAT(*line, Catch::Contains("serving /job:ps/replica:0/task:0 at "
                                    + ps));
  CHECK_THAT(*line, Catch::Contains("'worker': ['" + worker + "']"));
  auto st = node.stop();
  INFO("stderr after SIGTERM: " << node.err());
  CHECK(st.success());
}

TEST_CASE("launcher: TF_CONFIG", "[launcher]") {
  auto ports = support::free_ports(2);
  auto w0 = "127.0.0.1:" + std::to_string(ports[0]);
  auto w1 = "127.0.0.1:" + std::to_string(ports[1]);
  support::spawn_options opts;
  opts.env = {R"(TF_CONFIG={"cluster": {"worker": [")" + w0 + R"(", ")" + w1
              + R"("]}, "task": {"type": "worker", "index": 1}})"};
  child_process node{{node_path, "--parent-pid", parent_pid()}, opts};
  auto line = node.wait_for_line("serving", 15s);
  INFO(node.err());
  REQUIRE(line);
  CHECK_THAT(*line, Catch::Contains("serving /job:worker/replica:0/task:1 at "
                                    + w1));
  auto st = node.stop();
  INFO("stderr after SIGTERM: " << node.err());
  CHECK(st.success());
}

TEST_CASE("launcher: a second node on an address in use fails",
          "[launcher]") {
  local_cluster nodes{node_path, {{"local", 1}}, captured()};
  const auto& address = nodes.address("local", 0);
  auto result = run_process(
    support::node_command(node_path, nodes.spec(), "local", 0), 15s);
  INFO(result.err);
  CHECK_FALSE(result.timed_out);
  CHECK(result.status.exited);
  CHECK(result.status.code == 1);
  CHECK_THAT(result.err, Catch::Contains(address));
  // The first node is unharmed.
  CHECK(nodes.process("local", 0).running());
}

TEST_CASE("launcher: bad command lines exit 2 naming the flag",
          "[launcher]") {
  struct bad_case {
    std::vector<std::string> args;
    std::string names;
  };
  std::string address;
  auto json = one_worker_json(address);
  auto two_jobs = R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})";
  auto c = GENERATE_COPY(
    bad_case{{"--cluster", "{not json", "--job", "worker", "--task", "0"},
             "--cluster"},
    bad_case{{"--cluster", R"({"worker": 5})", "--job", "worker"},
             "--cluster"},
    bad_case{{"--cluster", two_jobs, "--task", "0"}, "--job"},
    bad_case{{"--cluster", json, "--job", "chief", "--task", "0"}, "--job"},
    bad_case{{"--cluster", json, "--job", "worker", "--task", "x"},
             "--task"},
    bad_case{{"--cluster", json, "--job", "worker", "--task", "3"},
             "--task"},
    bad_case{{"--cluster", two_jobs, "--job", "worker", "--task"}, "--task"},
    bad_case{{"--job", "worker", "--task", "0"}, "--cluster"},
    bad_case{{"--cluster", json, "--job", "worker", "--bogus"}, "--bogus"},
    bad_case{{"--worker_hosts", "a:1,,b:2", "--job_name", "worker"},
             "--worker_hosts"});
  std::vector<std::string> argv{node_path};
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  support::spawn_options opts;
  // A TF_CONFIG in the test's environment must not fill in the gaps.
  opts.env = {"TF_CONFIG"};
  auto result = run_process(argv, 10s, opts);
  INFO(result.err);
  CHECK_FALSE(result.timed_out);
  CHECK(result.status.exited);
  CHECK(result.status.code == 2);
  CHECK_THAT(result.err, Catch::Contains(c.names));
  CHECK(result.out.find("serving") == std::string::npos);
}

TEST_CASE("launcher: --help", "[launcher]") {
  auto result = run_process({node_path, "--help"}, 10s);
  CHECK(result.status.success());
  CHECK_THAT(result.out, Catch::Contains("--cluster"));
  CHECK_THAT(result.out, Catch::Contains("TF_CONFIG"));
}

TEST_CASE("launcher: exits when its parent is gone", "[launcher]") {
  // --parent-pid naming a process that is not our parent: the node takes
  // it as "my parent already died" and leaves without serving.
  std::string address;
  auto json = one_worker_json(address);
  auto result = run_process({node_path, "--cluster", json, "--job", "worker",
                             "--parent-pid", "999999999"},
                            10s);
  INFO(result.err);
  CHECK_FALSE(result.timed_out);
  CHECK(result.status.exited);
  CHECK(result.out.find("serving") == std::string::npos);
}

TEST_CASE("launcher: --metrics_port serves Prometheus metrics, read-only, "
          "that move with the steps",
          "[launcher][metrics]") {
  std::string address;
  auto json = one_worker_json(address);
  child_process node{{node_path, "--cluster", json, "--job", "worker",
                      "--task", "0", "--parent-pid", parent_pid(),
                      "--metrics_port", "0"}};
  auto line = node.wait_for_line("metrics of", 15s);
  INFO(node.out() << node.err());
  REQUIRE(line);
  static const std::regex where{
    R"(actorflow-node: metrics of /job:worker/replica:0/task:0 at http://127\.0\.0\.1:(\d+)/metrics)"};
  std::smatch m;
  REQUIRE(std::regex_match(*line, m, where));
  httplib::Client http{"127.0.0.1", std::stoi(m[1].str())};
  http.set_read_timeout(10, 0);
  auto updates = [&] {
    auto res = http.Get("/metrics");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type").find("version=0.0.4")
          != std::string::npos);
    static const std::regex updates_line{
      R"(actorflow_variable_updates_total\{task="/job:worker/replica:0/task:0",variable="counter",container="[^"]*"\} (\d+))"};
    std::smatch u;
    if (!std::regex_search(res->body, u, updates_line))
      return -1;
    CHECK(res->body.find("process_resident_memory_bytes ")
          != std::string::npos);
    CHECK(res->body.find("actorflow_steps_total{task=\"/job:worker/replica:0/"
                         "task:0\",code=\"OK\"}")
          != std::string::npos);
    return std::stoi(u[1].str());
  };
  graph g;
  auto as_default = g.as_default();
  variable counter{0.0f, named("counter")};
  auto increment = counter.assign_add(1.0);
  session sess{"grpc://" + address, bounded(), &g};
  sess.run(counter.initializer());
  for (int i = 0; i < 3; ++i)
    sess.run(increment);
  auto first = updates();
  CHECK(first >= 4);
  for (int i = 0; i < 5; ++i)
    sess.run(increment);
  CHECK(updates() == first + 5);
  // Read-only: nothing else is served, and no other method is taken.
  auto post = http.Post("/metrics", "x", "text/plain");
  REQUIRE(post);
  CHECK(post->status == 405);
  auto other = http.Get("/quit");
  REQUIRE(other);
  CHECK(other->status == 404);
  CHECK(updates() == first + 5);
}

TEST_CASE("launcher: bad metrics flags are usage errors", "[launcher]") {
  std::string address;
  auto json = one_worker_json(address);
  for (auto args : {std::vector<std::string>{"--metrics_port", "70000"},
                    std::vector<std::string>{"--metrics_port", "x"},
                    std::vector<std::string>{"--metrics_host", "127.0.0.1"}}) {
    std::vector<std::string> argv{node_path, "--cluster", json, "--job",
                                  "worker"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = run_process(argv, 15s);
    INFO(args.front() << " " << args.back() << ": " << result.err);
    CHECK(result.status.exited);
    CHECK(result.status.code == 2);
    CHECK(result.err.find(args.front()) != std::string::npos);
  }
  // A port in use is a run-time error naming the address.
  auto busy = support::free_port();
  child_process holder{{node_path, "--cluster",
                        R"({"worker": ["127.0.0.1:)" + std::to_string(busy)
                          + R"("]})",
                        "--job", "worker", "--parent-pid", parent_pid()}};
  REQUIRE(holder.wait_for_line("serving", 15s));
  auto result = run_process({node_path, "--cluster", json, "--job", "worker",
                             "--metrics_port", std::to_string(busy)},
                            15s);
  INFO(result.err);
  CHECK(result.status.code == 1);
  CHECK(result.err.find("127.0.0.1:" + std::to_string(busy))
        != std::string::npos);
}

namespace {

/// process_threads of a node started with --metrics_port 0 and `extra`.
int node_threads(const std::vector<std::string>& extra, std::string& log) {
  std::string address;
  std::vector<std::string> argv{node_path, "--cluster",
                                one_worker_json(address), "--job", "worker",
                                "--parent-pid", parent_pid(),
                                "--metrics_port", "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  child_process node{argv};
  auto line = node.wait_for_line("metrics of", 15s);
  log = node.out() + node.err();
  if (!line)
    return -1;
  auto port = std::stoi(line->substr(line->rfind(':') + 1));
  httplib::Client http{"127.0.0.1", port};
  http.set_read_timeout(10, 0);
  static const std::regex threads{R"(\nprocess_threads (\d+))"};
  // A count that three readings in a row agree on (at most 50): one
  // reading in a few dozen runs, under load, differed by one from the
  // settled count (a thread still starting, or one that comes and goes).
  int last = -1;
  int same = 0;
  for (int i = 0; i < 50 && same < 3; ++i) {
    auto res = http.Get("/metrics");
    std::smatch m;
    if (!res || !std::regex_search(res->body, m, threads))
      return -1;
    auto n = std::stoi(m[1].str());
    same = n == last ? same + 1 : 1;
    last = n;
    std::this_thread::sleep_for(20ms);
  }
  return same >= 3 ? last : -1;
}

} // namespace

TEST_CASE("launcher: CAF's options and a configuration file",
          "[launcher][config]") {
  using Catch::Contains;
  temp_dir dir;
  SECTION("CAF's scheduler takes --caf.scheduler.max-threads and the "
          "file's [caf.scheduler]") {
    std::string log1, log4;
    auto one = node_threads({"--caf.scheduler.max-threads=1"}, log1);
    auto ini = dir.write("caf.ini", "[caf.scheduler]\nmax-threads = 4\n");
    auto four = node_threads({"--config-file", ini}, log4);
    INFO(log1 << log4);
    REQUIRE(one > 0);
    REQUIRE(four > 0);
    // The same process but for three more scheduler threads.
    CHECK(four - one == 3);
  }
  SECTION("the file's [actorflow] section gives the flags, the command "
          "line wins") {
    std::string address;
    auto json = one_worker_json(address);
    // task = 3 is not in the cluster: only the command line's 0 works.
    auto ini = dir.write("node.ini",
                         "[actorflow]\ncluster = '" + json
                           + "'\njob = \"worker\"\ntask = 3\n"
                             "[scheduler]\nmax-threads = 1\n");
    child_process node{{node_path, "--config-file", ini, "--task", "0",
                        "--parent-pid", parent_pid()}};
    auto line = node.wait_for_line("serving", 15s);
    INFO(node.err());
    REQUIRE(line);
    CHECK_THAT(*line, Contains("serving /job:worker/replica:0/task:0 at "
                               + address));
    node.send_signal(SIGTERM);
    REQUIRE(node.wait(10s));
    CHECK_THAT(node.err(), Contains("actorflow-node: /job:worker/replica:0/"
                                    "task:0 stopped on Terminated"));
  }
  SECTION("--log_level hides the levels below it") {
    std::string address;
    auto json = one_worker_json(address);
    child_process node{{node_path, "--cluster", json, "--job", "worker",
                        "--parent-pid", parent_pid(), "--log_level",
                        "error"}};
    REQUIRE(node.wait_for_line("serving", 15s));
    node.send_signal(SIGTERM);
    REQUIRE(node.wait(10s));
    // The stop is an info line; the serving line is the program's output.
    CHECK(node.err().find("stopped on") == std::string::npos);
  }
  SECTION("bad configuration: status 2, naming the flag, key or file") {
    std::string address;
    auto json = one_worker_json(address);
    struct bad_case {
      std::vector<std::string> args;
      std::string message;
    };
    auto unknown_key = dir.write("unknown.ini", "[actorflow]\njobb = \"w\"\n");
    auto unknown_caf = dir.write("caf.ini",
                                 "[scheduler]\nmax-thread = 2\n");
    auto bad_value = dir.write("value.ini", "[scheduler]\nmax-threads = 2x\n");
    std::vector<bad_case> cases{
      {{"--config-file", unknown_key},
       "--config-file " + unknown_key + ": [actorflow] has no option 'jobb'"},
      {{"--config-file", unknown_caf},
       "--config-file " + unknown_caf + ": [scheduler] max-thread is not a "
       "CAF option"},
      {{"--config-file", bad_value},
       "--config-file " + bad_value + ": parser_error("},
      {{"--config-file", dir / "missing.ini"},
       "--config-file " + (dir / "missing.ini") + ": cannot be read"},
      {{"--caf.scheduler.max-threads=many"},
       "--caf.scheduler.max-threads=many: not a CAF option, or a bad value"},
      {{"--caf.scheduler.bogus=1"}, "--caf.scheduler.bogus=1: not a CAF "
                                    "option"},
      {{"--caf.scheduler.max-threads", "2"},
       "--caf.scheduler.max-threads: CAF's options are given as "
       "--caf.<option>=<value>"},
      {{"--log_level", "loud"},
       "--log_level: expected trace, debug, info, warning, error or off, "
       "got 'loud'"},
      {{"--job", "w", "--job_name", "x"}, "--job given twice"},
    };
    for (const auto& bad : cases) {
      std::vector<std::string> argv{node_path, "--cluster", json,
                                    "--parent-pid", parent_pid()};
      argv.insert(argv.end(), bad.args.begin(), bad.args.end());
      auto result = run_process(argv, 10s);
      INFO(bad.args.front() << "\n" << result.err);
      CHECK(result.status.exited);
      CHECK(result.status.code == 2);
      CHECK_THAT(result.err, Contains("actorflow-node: error: " + bad.message));
      CHECK(result.out.find("serving") == std::string::npos);
    }
  }
}

TEST_CASE("launcher: --operation_timeout_in_ms bounds its sessions' steps",
          "[launcher]") {
  // Task 1 of the cluster is never started.
  auto ports = support::free_ports(2);
  auto address = "127.0.0.1:" + std::to_string(ports[0]);
  auto json = R"({"worker": [")" + address + R"(", "127.0.0.1:)"
              + std::to_string(ports[1]) + R"("]})";
  child_process node{{node_path, "--cluster", json, "--job", "worker",
                      "--task", "0", "--operation_timeout_in_ms", "1500",
                      "--parent-pid", parent_pid()}};
  REQUIRE(node.wait_for_line("serving", 15s));
  graph g;
  auto as_default = g.as_default();
  output remote;
  {
    device_scope pin{"/job:worker/task:1"};
    remote = constant(1.0f, "remote");
  }
  // The session sets no deadline: the node's default ends the wait.
  session sess{"grpc://" + address, session_config{}, &g};
  auto start = std::chrono::steady_clock::now();
  auto err = error_of([&] { sess.run(remote); });
  REQUIRE(err);
  CHECK(err->code() == error_code::deadline_exceeded);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  node.send_signal(SIGTERM);
  REQUIRE(node.wait(10s));
}
