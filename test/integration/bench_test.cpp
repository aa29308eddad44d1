// actorflow-bench as CI runs it: `--quick` measures every figure of the
// issue and prints each as a JSON line with a positive value (the numbers
// are reported, never asserted: a shared CI machine is too noisy for
// thresholds), leaves no process behind, and rejects bad flags.

#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string bench_path = ACTORFLOW_BENCH_PATH;
const std::string train_path = ACTORFLOW_TRAIN_PATH;

constexpr const char* data_dir = "/usr/share/datasets/fashion-mnist";

/// The figures issues 5 and 21 ask for (rss_peak as one line per task).
const std::vector<std::string> required = {
  "fetch_remote_1KiB",          "fetch_remote_1MiB",
  "fetch_remote_64MiB",         "step_remote_small",
  "step_local_trivial",         "matmul_1024",
  "queue_enqueue_many",         "queue_dequeue_many",
  "train_examples_per_s_1worker", "train_examples_per_s_2workers",
  "rss_peak_ps",                "rss_peak_worker",
  // Issue 21: the console's instrumentation on against off.
  "monitoring_step_local_trivial", "monitoring_step_remote_small",
  // Issue 23: the limits of this host, and scale.
  "fetch_remote_64MiB_of_stream", "raw_tcp_rtt_polling",
  "scale_fanin_1worker", "scale_fanin_2workers", "scale_fanin_4workers",
  "scale_fanin_8workers", "scale_fanin_16workers", "scale_vars_1",
  "scale_vars_10", "scale_vars_100", "scale_vars_1000",
  // TensorFlow's transport (gRPC) measured in the same run (--quick: three
  // sizes and the round trip).
  "peer_grpc_fetch_1KiB", "peer_grpc_fetch_1MiB", "peer_grpc_fetch_64MiB",
  "peer_grpc_rtt",
  // Issue 32: the Python front end against C++ in the same run.
  "python_step_local_trivial", "python_fetch_64mib", "python_feed_64mib",
  "python_train_examples_per_s_1worker",
  // Issue 35: the convolutions against Eigen's.
  "conv2d_cnn_forward", "conv2d_cnn_train"};

/// The paths a figure that crosses processes may name.
const std::set<std::string> paths = {"tcp", "ring", "tcp (CAF)", "ring+tcp",
                                     "in_process"};

/// Live (not zombie) processes whose command line has `--parent-pid pid`:
/// the nodes and the raw TCP server a bench started.
std::vector<std::string> children_of(pid_t pid) {
  std::vector<std::string> result;
  auto who = std::to_string(pid);
  for (const auto& [name, args] : live_processes())
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--parent-pid" && args[i + 1] == who)
        result.push_back(name + ": " + args.front());
  return result;
}

} // namespace

TEST_CASE("bench: --quick prints every figure as a JSON line", "[bench]") {
  auto start = std::chrono::steady_clock::now();
  support::spawn_options opts;
  opts.capture_stderr = true;
  // The torch group has a test of its own (torch_peer_test.cpp): this one
  // would pass ctest's limit with it.
  child_process bench{{bench_path, "--quick", "--skip", "torch", "--node",
                       node_path, "--train", train_path},
                      opts};
  auto pid = bench.pid();
  auto st = bench.wait(240s);
  if (!st)
    bench.stop(5s);
  auto out = bench.out();
  INFO("stdout:\n" << out << "\nstderr:\n" << bench.err());
  INFO("ran " << seconds_since(start) << " s");
  REQUIRE(st);
  CHECK(st->success());
  auto got = bench_figures(out);
  bool have_data = std::filesystem::exists(std::string{data_dir}
                                           + "/train-images-idx3-ubyte.gz");
  for (const auto& name : required) {
    INFO("figure " << name);
    REQUIRE(got.count(name) == 1);
    const auto& f = got[name];
    for (const char* key :
         {"name", "value", "unit", "baseline", "baseline_value", "ratio"})
      CHECK(f.contains(key));
    if (!ACTORFLOW_BENCH_PEERS_BUILT && name.starts_with("peer_")) {
      CHECK(f["value"].is_null());
      CHECK_THAT(f.value("skipped", ""),
                 Catch::Contains("ACTORFLOW_BENCH_PEERS"));
      continue;
    }
    if (!ACTORFLOW_PYTHON_BUILT && name.starts_with("python_")) {
      CHECK(f["value"].is_null());
      CHECK_THAT(f.value("skipped", ""), Catch::Contains("import actorflow"));
      continue;
    }
    bool training = name.find("train_examples") != std::string::npos;
    if (!have_data && training) {
      CHECK(f["value"].is_null());
      CHECK(f.contains("skipped"));
      continue;
    }
    REQUIRE(f["value"].is_number());
    CHECK(f["value"].get<double>() > 0);
    // Every required figure has a baseline measured (or stated) in the
    // same run, hence a ratio.
    REQUIRE(f["baseline_value"].is_number());
    CHECK(f["baseline_value"].get<double>() > 0);
    REQUIRE(f["ratio"].is_number());
    if (f.value("ratio_from", "") == "pairs")
      // The median of the ratios of pairs measured back to back: not the
      // ratio of the two medians, but of the same sign.
      CHECK(f["ratio"].get<double>() > 0);
    else
      CHECK(f["ratio"].get<double>()
            == Approx(f["value"].get<double>()
                      / f["baseline_value"].get<double>())
                 .epsilon(0.01));
    CHECK_FALSE(f.contains("error"));
    // Every figure but the whole-system ones (memory, training) names
    // the path its steps or bytes took.
    if (!name.starts_with("rss_") && !training)
      CHECK(paths.count(f.value("path", "")) == 1);
  }
  // The path each fetch took is the one it must take: a peer on this
  // host hands 1 MiB over the ring of shared memory (measured against the
  // shared-memory baseline), 64 MiB is larger than the ring and goes over
  // the socket (against raw TCP); the channel's counters said so.
  CHECK(got["fetch_remote_1MiB"]["path"] == "ring");
  CHECK(got["fetch_remote_1MiB"]["baseline"] == "shm_ring");
  CHECK(got["fetch_remote_64MiB"]["path"] == "tcp");
  CHECK(got["fetch_remote_64MiB"]["baseline"] == "raw_tcp_best");
  CHECK(got["step_remote_small"]["baseline"] == "raw_tcp_rtt_polling");
  CHECK(got["step_local_trivial"]["path"] == "in_process");
  CHECK(got["monitoring_step_remote_small"]["path"] == "tcp");
  if (ACTORFLOW_BENCH_PEERS_BUILT) {
    CHECK(got["peer_grpc_fetch_64MiB"]["baseline"] == "grpc_recv_tensor");
    CHECK(got["peer_grpc_rtt"]["baseline"] == "grpc_ping_64B");
  }
  // --skip: no figure of the group skipped is printed; nor of the netsim
  // group, which runs only when named.
  for (const auto& [name, _] : got) {
    CHECK_FALSE(name.starts_with("torch_"));
    CHECK_FALSE(name.starts_with("netsim_"));
  }
  // TCP's streaming ceiling has no baseline: it is one.
  REQUIRE(got.count("tcp_stream_ceiling") == 1);
  CHECK(got["tcp_stream_ceiling"]["value"].get<double>() > 0);
  // The plot's sweep, and the readable table after the JSON lines.
  CHECK(got.count("fetch_remote_16MiB") == 1);
  CHECK_THAT(out, Catch::Contains("figure") && Catch::Contains("baseline value"));
  // Nothing left behind: the nodes and the raw TCP server are gone.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  auto left = children_of(pid);
  // Polls /proc: the nodes are the bench's children, not ours, so their end
  // is no event to wait on (bounded by the deadline).
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    left = children_of(pid);
  }
  CHECK(left.empty());
}

TEST_CASE("bench: bad command lines exit with status 2", "[bench]") {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--only", "no_such_figure"},
        std::vector<std::string>{"--skip", "torch,no_such_group"},
        std::vector<std::string>{"--frobnicate"},
        std::vector<std::string>{"--quick=1"},
        std::vector<std::string>{"--node", "/nonexistent/actorflow-node"},
        std::vector<std::string>{"--peer_host", "ns,10.0.0.1"}}) {
    args.insert(args.begin(), bench_path);
    auto result = run_process(args, 20s);
    auto flag = args[1].substr(0, args[1].find('='));
    INFO(args[1] << ": " << result.err);
    REQUIRE_FALSE(result.timed_out);
    CHECK(result.status.exited);
    CHECK(result.status.code == 2);
    CHECK_THAT(result.err, Catch::Contains(flag));
  }
  auto help = run_process({bench_path, "--help"}, 20s);
  CHECK(help.status.success());
  CHECK_THAT(help.out, Catch::Contains("--quick"));
}
