// actorflow-bench: the engine's figures against baselines measured in the
// same run, on this host.
//
//   actorflow-bench             # every figure, a few minutes on 2 cores
//   actorflow-bench --quick     # a short version (CI: reported, not asserted)
//   actorflow-bench --only fetch_remote,step_remote_small --json-only
//
// Each figure prints one JSON object per line on stdout as soon as it is
// measured: {"name", "value", "unit", "baseline", "baseline_value",
// "ratio"} (ratio = value / baseline_value, or the median of pairs'
// ratios; null where a figure has none), sometimes with a "path" and a
// "note"; a readable table follows at the end (see usage_text).
//
// The remote figures run a cluster {worker: [this process], ps: [an
// actorflow-node process]} on free loopback ports: a server for
// /job:worker/task:0 lives in the bench and its session runs steps that
// touch variables and queues on /job:ps/task:0. Each is measured against
// the best this host does on the path its bytes took (the tensor
// channel's counters say which): raw TCP (bench/raw_tcp.hpp), shared
// memory (bench/shm_ring.hpp), and TensorFlow's transport, gRPC
// (bench/grpc_peer.hpp); each baseline's server is this program started
// again in a hidden mode, as are the scale group's worker processes.
// The training figures run `actorflow-train --local N`. Every child is
// stopped and reaped on every way out (including exceptions); every wait
// has a deadline.
//
// Exit status: 0 when every figure was measured (a figure skipped for a
// stated reason, such as a missing dataset, counts as measured), 1 when a
// figure failed at run time, 2 for a bad command line.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/actorflow.hpp"
#include "actorflow/transport/channel_info.hpp"
#include "actorflow/transport/transport.hpp"

#include "command_line.hpp"
#include "bench/caf_rtt.hpp"
#include "bench/eigen_mlp.hpp"
#include "bench/grpc_peer.hpp"
#include "bench/measure.hpp"
#include "bench/raw_tcp.hpp"
#include "bench/shm_ring.hpp"
#include "local_cluster.hpp"
#include "temp_dir.hpp"

namespace {

using namespace actorflow;
using namespace actorflow::apps;
using namespace actorflow::bench;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr const char* prog = "actorflow-bench";

constexpr const char* usage_text = R"usage(usage: actorflow-bench [--quick] [--only NAME[,NAME...]] [--peers] [--json-only]
                       [--node PATH] [--train PATH] [--data_dir DIR]

Measures actorflow on this host against baselines measured in the same run
and prints one JSON object per figure and line on stdout
  {"name", "value", "unit", "baseline", "baseline_value", "ratio"[,
   "ratio_from": "pairs"][, "path"][, "note"]}
then a readable table. ratio = value / baseline_value, or, with
"ratio_from": "pairs", the median of the ratios of pairs measured back to
back (engine, baseline, engine, ...). "path" is the way the figure's bytes
went, as the tensor channel's counters saw them: "tcp", "ring" (shared
memory between processes of this host), "tcp (CAF)", "ring+tcp", or
"in_process"; memory and training figures have none.

Figures (group: names):
  step_local:   step_local_trivial (us per run of a one-node graph in an
                in-process session; baseline: the 20 us target),
                step_local_large_graph (the same fetch in a graph with 1000
                unused nodes; baseline: step_local_trivial)
  matmul:       matmul_1024 (GFLOP/s of a 1024x1024 float MatMul through a
                session; baseline: the same Eigen product called directly)
  fetch_remote: fetch_remote_{1KiB,4KiB,...,64MiB} (MB/s of a session on
                the worker fetching a variable on the ps process; baseline:
                the best of this host on the path the fetch took: raw TCP
                request/reply between two processes, the better of both
                ends polling and both blocking, or a two-process ring of
                shared memory of the channel's ring size),
                tcp_stream_ceiling (MB/s of a raw TCP stream, or iperf3
                when faster), fetch_remote_64MiB_of_stream (the 64 MiB
                fetch against it)
  step_remote:  step_remote_small (us per assign_add of a scalar on the ps,
                run from the worker; baseline: the raw TCP round trip of
                64 bytes with both ends polling), step_remote_small_rate
                (steps/s), raw_tcp_rtt_polling (that round trip against
                the blocking one), caf_rtt_remote (us per round trip of a
                48-byte message between a thread here and a CAF actor in
                another process: the floor under a step over CAF)
  queue:        queue_enqueue_many, queue_dequeue_many (elements/s of
                1000x256 float batches through a FIFOQueue on the ps;
                baseline: raw TCP moving the same bytes into memory
                allocated per batch, polling or blocking), and _MBps lines
  peers:        peer_grpc_fetch_{1KiB,...,64MiB} (the fetches against a
                TF-style RecvTensor service on gRPC, the better of unary
                and streaming), peer_grpc_rtt (step_remote_small against a
                unary gRPC call of 64 bytes); needs a build with
                ACTORFLOW_BENCH_PEERS (scripts/setup.sh), else skipped
  monitoring:   monitoring_step_local_trivial, monitoring_step_remote_small
                (the two steps above with every actor instrumented for the
                console; baseline: the same with monitoring off, measured
                in alternating slices in this run)
  tls:          tls_fetch_remote_64MiB (MB/s), tls_step_remote_small (us):
                fetch_remote_64MiB and step_remote_small on a second
                cluster with mutual TLS (certificates from
                actorflow-make-certs); baseline: the same on a plain
                cluster, in alternating slices in this run
  rss:          rss_peak_ps, rss_peak_worker (peak resident MiB of each
                task while 1 GiB streams through a queue on the ps;
                baseline: the task's peak before streaming)
  scale:        scale_fanin_{1worker,2workers,...,16workers} (steps/s of
                one ps process serving that many worker processes at once;
                baseline: one worker), scale_vars_{1,10,100,1000} (us per
                step updating that many variables over 4 ps processes;
                baseline: the one-variable step times the count)
  train:        train_examples_per_s_1worker, train_examples_per_s_2workers
                (Fashion-MNIST MLP with actorflow-train --local 1 / 2;
                baseline: a single-process plain Eigen loop doing the same
                forward, backward and Adam update)
  (1 KiB = 1024 bytes, MB = 10^6 bytes)

Flags:
  --quick          short runs (CI): smaller budgets, 64 MiB streamed for rss,
                   three sizes for peers
  --only LIST      comma-separated group or figure names to run (a figure
                   name runs its group, or that size for fetch_remote and
                   peers)
  --peers          the gRPC peer group alone (--only peers)
  --json-only      no table, only the JSON lines
  --node PATH      the actorflow-node launcher (default: next to this
                   program, else on $PATH)
  --train PATH     the actorflow-train trainer (default: likewise)
  --data_dir DIR   Fashion-MNIST for the train figures (default
                   /usr/share/datasets/fashion-mnist; missing: skipped)
  --help           this text

Exit status: 0 when every figure was measured (or skipped for a stated
reason), 1 when one failed at run time, 2 for a bad command line.
)usage";

// -- signals ------------------------------------------------------------------

// The trainer launcher we are waiting for (0: none). Node processes and the
// raw TCP server die with us through PR_SET_PDEATHSIG; `actorflow-train
// --local` takes no --parent-pid, so a SIGINT/SIGTERM to the bench passes
// SIGTERM on to it (it then stops and reaps its own tasks).
std::atomic<pid_t> trainer_pid{0};

extern "C" void on_stop_signal(int sig) {
  if (auto pid = trainer_pid.load(); pid > 0)
    ::kill(pid, SIGTERM);
  ::_exit(128 + sig);
}

// -- options ------------------------------------------------------------------

struct options {
  bool quick = false;
  bool json_only = false;
  bool help = false;
  std::vector<std::string> only;
  std::string node;
  std::string train;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
};

const std::vector<std::string> groups = {"step_local", "matmul", "fetch_remote",
                                         "step_remote", "queue", "monitoring",
                                         "peers",      "tls",    "rss",
                                         "scale",
                                         "train"};

/// The fetch sizes: powers of 4 from 1 KiB to 64 MiB (the plot's x axis);
/// 1KiB, 1MiB and 64MiB are the issue's figures.
const std::vector<std::pair<std::string, int64_t>> fetch_sizes = {
  {"1KiB", int64_t{1} << 10},  {"4KiB", int64_t{4} << 10},
  {"16KiB", int64_t{16} << 10}, {"64KiB", int64_t{64} << 10},
  {"256KiB", int64_t{256} << 10}, {"1MiB", int64_t{1} << 20},
  {"4MiB", int64_t{4} << 20},  {"16MiB", int64_t{16} << 20},
  {"64MiB", int64_t{64} << 20}};

/// The worker counts of the fan-in figures and the variable counts of the
/// graph-size figures.
const std::vector<int> fanin_workers = {1, 2, 4, 8, 16};
const std::vector<int> graph_variables = {1, 10, 100, 1000};

/// Figure names -> their group, for --only.
std::map<std::string, std::string> figure_groups() {
  std::map<std::string, std::string> result{
    {"step_local_trivial", "step_local"},
    {"step_local_large_graph", "step_local"},
    {"matmul_1024", "matmul"},
    {"step_remote_small", "step_remote"},
    {"step_remote_small_rate", "step_remote"},
    {"caf_rtt_remote", "step_remote"},
    {"monitoring_step_local_trivial", "monitoring"},
    {"monitoring_step_remote_small", "monitoring"},
    {"raw_tcp_rtt_polling", "step_remote"},
    {"queue_enqueue_many", "queue"},
    {"queue_dequeue_many", "queue"},
    {"queue_enqueue_many_MBps", "queue"},
    {"queue_dequeue_many_MBps", "queue"},
    {"tls_fetch_remote_64MiB", "tls"},
    {"tls_step_remote_small", "tls"},
    {"rss_peak", "rss"},
    {"rss_peak_ps", "rss"},
    {"rss_peak_worker", "rss"},
    {"train_examples_per_s", "train"},
    {"train_examples_per_s_1worker", "train"},
    {"train_examples_per_s_2workers", "train"}};
  for (const auto& [label, _] : fetch_sizes)
    result.emplace("fetch_remote_" + label, "fetch_remote");
  result.emplace("tcp_stream_ceiling", "fetch_remote");
  for (const auto& [label, _] : fetch_sizes)
    result.emplace("peer_grpc_fetch_" + label, "peers");
  result.emplace("peer_grpc_rtt", "peers");
  result.emplace("fetch_remote_64MiB_of_stream", "fetch_remote");
  for (int n : fanin_workers)
    result.emplace("scale_fanin_" + std::to_string(n)
                     + (n == 1 ? "worker" : "workers"),
                   "scale");
  for (int n : graph_variables)
    result.emplace("scale_vars_" + std::to_string(n), "scale");
  return result;
}

options parse_args(int argc, char** argv) {
  options opts;
  flag_reader flags{argc, argv,
                    {{"--quick", false}, {"--json-only", false},
                     {"--peers", false}, {"--only"},
                     {"--node"}, {"--train"}, {"--data_dir"}}};
  apply_common(flags, prog);
  while (flags.next()) {
    const auto& name = flags.name();
    if (name == "--help") {
      opts.help = true;
      continue;
    }
    if (name == "--peers") {
      flags.no_value();
      opts.only.push_back("peers");
      continue;
    }
    if (name == "--quick" || name == "--json-only") {
      flags.no_value();
      (name == "--quick" ? opts.quick : opts.json_only) = true;
      continue;
    }
    auto value = flags.value();
    if (name == "--only") {
      auto known = figure_groups();
      for (auto& item : split_list(name, value)) {
        bool is_group = std::find(groups.begin(), groups.end(), item)
                        != groups.end();
        if (!is_group && known.count(item) == 0) {
          std::string list;
          for (const auto& g : groups)
            list += (list.empty() ? "" : ", ") + g;
          throw usage_error("--only: unknown figure '" + item
                            + "' (groups: " + list
                            + "; or a figure name from --help)");
        }
        opts.only.push_back(item);
      }
    } else {  // --node, --train, --data_dir
      if (value.empty())
        throw usage_error(name + ": empty");
      (name == "--node"    ? opts.node
       : name == "--train" ? opts.train
                           : opts.data_dir)
        = value;
    }
  }
  return opts;
}

/// `name`: `override_path` if given, else next to this program, else on
/// $PATH (examples::find_program); a bad override is a usage error.
std::string find_binary(const std::string& name,
                        const std::string& override_path,
                        const std::string& flag) {
  try {
    return examples::find_program(name, override_path, flag);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
}

std::string self_path(const char* argv0) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{argv0} : self.string();
}

// -- output -------------------------------------------------------------------

void say(const std::string& line) {
  std::cout << line << "\n" << std::flush;
}

void note(const std::string& line) {
  log::info(line);
}

/// `x` rounded to `digits` significant digits (the JSON lines stay short;
/// the measurement is not more precise than that).
double significant(double x, int digits) {
  if (x == 0 || !std::isfinite(x))
    return x;
  auto scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(
                                                std::log10(std::fabs(x)))));
  return std::round(x * scale) / scale;
}

std::string human(std::optional<double> x) {
  if (!x)
    return "-";
  std::ostringstream os;
  auto v = *x;
  if (std::fabs(v) >= 1000)
    os << std::fixed << std::setprecision(0) << v;
  else if (std::fabs(v) >= 100)
    os << std::fixed << std::setprecision(1) << v;
  else if (std::fabs(v) >= 1)
    os << std::fixed << std::setprecision(2) << v;
  else
    os << std::setprecision(3) << v;
  return os.str();
}

/// One measured figure.
struct figure {
  std::string name = {};
  std::optional<double> value = {};
  std::string unit = {};
  std::string baseline = {};
  std::optional<double> baseline_value = {};
  std::string note = {};
  /// Why there is no value (a skip), or what failed.
  std::string skipped = {};
  std::string error = {};
  /// The path the figure's bytes took, checked by the channel's counters
  /// where it crosses processes: "tcp" (a socket), "ring" (shared memory
  /// between processes of this host), "in_process"; "" where none applies.
  std::string path = {};
  /// The median of the ratios of pairs measured back to back
  /// (measure_rounds), which then is the figure's ratio instead of
  /// value / baseline_value (the medians of each side).
  std::optional<double> pair_ratio = {};

  std::optional<double> ratio() const {
    if (pair_ratio && value)
      return pair_ratio;
    if (!value || !baseline_value || *baseline_value == 0)
      return std::nullopt;
    return *value / *baseline_value;
  }

  nlohmann::ordered_json to_json() const {
    auto num = [](std::optional<double> x, int digits) -> nlohmann::ordered_json {
      if (!x)
        return nullptr;
      return significant(*x, digits);
    };
    nlohmann::ordered_json j;
    j["name"] = name;
    j["value"] = num(value, 4);
    j["unit"] = unit;
    j["baseline"] = baseline.empty() ? nlohmann::ordered_json(nullptr)
                                     : nlohmann::ordered_json(baseline);
    j["baseline_value"] = num(baseline_value, 4);
    j["ratio"] = num(ratio(), 3);
    if (pair_ratio && value)
      j["ratio_from"] = "pairs";
    if (!path.empty())
      j["path"] = path;
    if (!note.empty())
      j["note"] = note;
    if (!skipped.empty())
      j["skipped"] = skipped;
    if (!error.empty())
      j["error"] = error;
    return j;
  }
};

/// The issue's targets (for the lead; reported in the table, never
/// asserted here).
struct target {
  std::string text;
  std::function<bool(const figure&)> met;
};

/// A target on a figure's ratio: at least / at most `x`.
target at_least(double x) {
  std::ostringstream text;
  text << "ratio >= " << x;
  return {text.str(), [x](const figure& f) { return *f.ratio() >= x; }};
}

target at_most(double x) {
  std::ostringstream text;
  text << "ratio <= " << x;
  return {text.str(), [x](const figure& f) { return *f.ratio() <= x; }};
}

const std::map<std::string, target>& targets() {
  static const std::map<std::string, target> result = [] {
    std::map<std::string, target> all{
      {"fetch_remote_64MiB", at_least(0.9)},
      {"fetch_remote_1MiB", at_least(0.8)},
      {"fetch_remote_4MiB", at_least(0.8)},
      {"step_remote_small", at_most(3)},
      {"fetch_remote_64MiB_of_stream", at_least(0.8)},
      {"queue_enqueue_many", at_least(0.8)},
      {"queue_dequeue_many", at_least(0.8)},
      {"rss_peak_ps", at_most(1.5)},
      {"matmul_1024", at_least(0.95)},
      {"step_local_trivial",
       {"<= 20 us", [](const figure& f) { return *f.value <= 20.0; }}},
      {"monitoring_step_local_trivial", at_most(1.03)},
      {"monitoring_step_remote_small", at_most(1.03)},
      {"tls_fetch_remote_64MiB", at_least(0.75)},
      {"tls_step_remote_small", at_most(1.25)},
      {"peer_grpc_rtt", at_most(0.5)},
      {"train_examples_per_s_1worker", at_least(0.7)}};
    // Against TensorFlow's transport: every size.
    for (const auto& [label, bytes] : fetch_sizes)
      all.emplace("peer_grpc_fetch_" + label, at_least(1.5));
    return all;
  }();
  return result;
}

class report {
public:
  explicit report(bool json_only) : json_only_(json_only) {
  }

  /// Prints the figure's JSON line at once (a long run shows progress, and
  /// a run cut short keeps what it measured).
  void add(figure f) {
    say(f.to_json().dump());
    if (!f.error.empty())
      failed_ = true;
    figures_.push_back(std::move(f));
  }

  bool failed() const noexcept {
    return failed_;
  }

  const figure* find(const std::string& name) const {
    for (const auto& f : figures_)
      if (f.name == name)
        return &f;
    return nullptr;
  }

  void print_table() const {
    if (json_only_ || figures_.empty())
      return;
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"figure", "value", "unit", "baseline", "baseline value",
                    "ratio", "target"});
    for (const auto& f : figures_) {
      std::string goal;
      if (auto i = targets().find(f.name); i != targets().end()) {
        goal = i->second.text;
        if (f.value && (f.ratio() || f.name == "step_local_trivial"))
          goal += i->second.met(f) ? " (met)" : " (not met)";
      }
      std::string value = f.value ? human(f.value)
                          : !f.skipped.empty() ? "skipped"
                                               : "FAILED";
      rows.push_back({f.name, value, f.unit, f.baseline.empty() ? "-" : f.baseline,
                      human(f.baseline_value), human(f.ratio()), goal});
    }
    std::vector<size_t> width(rows.front().size(), 0);
    for (const auto& r : rows)
      for (size_t c = 0; c < r.size(); ++c)
        width[c] = std::max(width[c], r[c].size());
    std::ostringstream os;
    os << "\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      std::ostringstream line;
      for (size_t c = 0; c < rows[i].size(); ++c) {
        // Numbers right-aligned, words left-aligned.
        bool numeric = c == 1 || c == 4 || c == 5;
        line << (c > 0 ? "  " : "") << (numeric ? std::right : std::left)
             << std::setw(static_cast<int>(width[c])) << rows[i][c];
      }
      // The last column is padded like the others: trim it.
      auto text = line.str();
      text.erase(text.find_last_not_of(' ') + 1);
      os << text << "\n";
      if (i == 0)
        os << std::string(text.size(), '-') << "\n";
    }
    for (const auto& f : figures_) {
      if (!f.skipped.empty())
        os << f.name << ": skipped: " << f.skipped << "\n";
      if (!f.error.empty())
        os << f.name << ": failed: " << f.error << "\n";
    }
    std::cout << os.str() << std::flush;
  }

private:
  bool json_only_;
  bool failed_ = false;
  std::vector<figure> figures_;
};

// -- context ------------------------------------------------------------------

struct context {
  options opts;
  std::string self;
  report* out = nullptr;

  /// True if --only selects `name` (a figure) of `group`.
  bool wanted(const std::string& group, const std::string& name = "") const {
    if (opts.only.empty())
      return true;
    bool group_named = false;
    bool any_figure_of_group = false;
    auto known = figure_groups();
    for (const auto& item : opts.only) {
      if (item == group)
        group_named = true;
      else if (auto i = known.find(item); i != known.end() && i->second == group) {
        any_figure_of_group = true;
        if (!name.empty() && item == name)
          return true;
      }
    }
    if (group_named)
      return true;
    // A figure of the group was named: the group runs; within it only the
    // named figure where figures are separable (fetch sizes), every
    // figure otherwise.
    return any_figure_of_group
           && (name.empty()
               || (group != "fetch_remote" && group != "peers"));
  }

  seconds_d budget(double full, double quick) const {
    return seconds_d{opts.quick ? quick : full};
  }
};

// -- shared pieces ------------------------------------------------------------

/// Deadlines for every step the bench runs: a stuck step fails its figure
/// instead of hanging the bench.
session_config bounded_config() {
  session_config config;
  config.operation_timeout_in_ms = 60000;
  return config;
}

/// A baseline's server: this program started again in a hidden `mode`,
/// which prints `marker` and its port once it listens, and dies with us.
class baseline_server {
public:
  baseline_server(const std::string& self, const char* mode,
                  const char* marker, const std::string& what,
                  std::vector<std::string> args = {})
    : proc_(argv(self, mode, std::move(args)), quiet()) {
    auto line = proc_.wait_for_line(marker, 10s);
    if (!line)
      throw std::runtime_error("the " + what
                               + " baseline server did not start: "
                               + proc_.err());
    auto pos = line->find(marker) + std::strlen(marker);
    port_ = static_cast<uint16_t>(std::stoi(line->substr(pos)));
  }

  uint16_t port() const noexcept {
    return port_;
  }

  examples::child_process& process() noexcept {
    return proc_;
  }

private:
  static std::vector<std::string> argv(const std::string& self,
                                       const char* mode,
                                       std::vector<std::string> args) {
    std::vector<std::string> out{self, mode, "--parent-pid",
                                 std::to_string(::getpid())};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  static examples::spawn_options quiet() {
    examples::spawn_options o;
    o.capture_stderr = true;
    return o;
  }

  examples::child_process proc_;
  uint16_t port_ = 0;
};

/// The raw TCP baseline: a server process and a connected client. The
/// destructor hangs up (the server then exits) and reaps it.
class raw_tcp_baseline {
public:
  explicit raw_tcp_baseline(const std::string& self)
    : server_(self, "--raw-tcp-server", raw_tcp_marker, "raw TCP") {
    client_.emplace(server_.port());
    // A fresh connection starts with small windows that the kernel grows
    // as data flows (receive buffer autotuning): move some bulk both ways
    // first, so every size is measured on a connection in steady state, as
    // the engine's long-lived connections are.
    for (int i = 0; i < 4; ++i) {
      client_->round_trip(0, uint64_t{64} << 20);
      client_->round_trip(uint64_t{64} << 20, 8);
    }
  }

  ~raw_tcp_baseline() {
    client_.reset();
    server_.process().wait(2s);
  }

  /// One request of `request_bytes` and its reply of `reply_bytes`.
  void round_trip(uint64_t request_bytes, uint64_t reply_bytes,
                  raw_mode mode = {}) {
    client_->round_trip(request_bytes, reply_bytes, mode);
  }

private:
  baseline_server server_;
  std::optional<raw_tcp_client> client_;
};

/// A baseline's server process and one client of it on the calling
/// thread (Client constructed from the server's port): the CAF echo
/// server, the gRPC peer. The destructor drops the client, then stops the
/// server and reaps it.
template <class Client>
class served_baseline {
public:
  served_baseline(const std::string& self, const char* mode,
                  const char* marker, const std::string& what)
    : server_(self, mode, marker, what) {
    client_.emplace(server_.port());
  }

  ~served_baseline() {
    client_.reset();
    server_.process().stop(2s);
  }

  Client& client() {
    return *client_;
  }

private:
  baseline_server server_;
  std::optional<Client> client_;
};

/// Options for a cluster of actorflow-node processes whose output stays
/// out of the bench's (stderr kept for errors), the tasks `not_started`
/// left to the bench.
examples::cluster_options
quiet_nodes(std::vector<std::pair<std::string, int>> not_started) {
  examples::cluster_options o;
  o.not_started = std::move(not_started);
  o.capture_stderr = true;
  o.echo_stdout = false;
  return o;
}

/// The cluster of the remote figures: /job:ps/task:0 as an actorflow-node
/// process, /job:worker/task:0 as a server in this process (sessions on
/// its target are "a session on task A"). Members stop in reverse order:
/// the worker server first, then the node.
class remote_cluster {
public:
  /// `env`: the ps process's environment changes (spawn_options::env).
  explicit remote_cluster(const std::string& node,
                          std::vector<std::string> env = {})
    : nodes_(node, {{"ps", 1}, {"worker", 1}}, node_options(std::move(env))) {
    srv_.emplace(nodes_.spec(), "worker", 0);
  }

  ~remote_cluster() {
    if (srv_)
      srv_->stop();
  }

  std::string target() const {
    return srv_->target();
  }

  pid_t ps_pid() {
    return nodes_.process("ps", 0).pid();
  }

  /// Starts one, retrying on fresh ports when another process took the
  /// worker's port between picking it and binding it.
  static std::unique_ptr<remote_cluster>
  start(const std::string& node, std::vector<std::string> env = {}) {
    for (int attempt = 1;; ++attempt) {
      try {
        return std::make_unique<remote_cluster>(node, env);
      } catch (const op_error& e) {
        if (attempt >= 3)
          throw;
        note("retrying the cluster start: " + std::string{e.what()});
      }
    }
  }

private:
  static examples::cluster_options node_options(std::vector<std::string> env) {
    auto o = quiet_nodes({{"worker", 0}});
    o.env = std::move(env);
    return o;
  }

  examples::local_cluster nodes_;
  std::optional<server> srv_;
};

/// Variable options with just a name (designated initializers would leave
/// the other members to -Wmissing-field-initializers).
variable_options named(std::string name) {
  variable_options opts;
  opts.name = std::move(name);
  return opts;
}

/// `bytes` per second in MB/s (10^6 bytes).
double mb_per_s(const rate& r, double bytes) {
  return r.per_second * bytes / 1e6;
}

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

// -- step_local ---------------------------------------------------------------

void run_step_local(context& ctx) {
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f, "c");
  session sess{bounded_config(), &g};
  auto r = measure([&] { sess.run(c); }, {.budget = budget, .warmup = 10});
  auto trivial_us = 1e6 / r.per_second;
  if (ctx.wanted("step_local", "step_local_trivial")) {
    figure f{.name = "step_local_trivial",
             .value = trivial_us,
             .unit = "us/run",
             .baseline = "target_20us",
             .baseline_value = 20.0,
             .path = "in_process"};
    f.note = "in-process session, fetch of one Const; lower is better; "
             + std::to_string(r.reps) + " runs";
    ctx.out->add(f);
  }
  if (!ctx.wanted("step_local", "step_local_large_graph"))
    return;
  // The same fetch in a graph with 1000 more nodes that it does not need:
  // pruning and the per-signature cache must keep the step cost flat.
  graph big;
  auto big_default = big.as_default();
  auto c2 = constant(1.0f, "c");
  auto x = constant(0.5f, "unused");
  for (int i = 0; i < 999; ++i)
    x = tanh(x);
  session sess2{bounded_config(), &big};
  auto r2 = measure([&] { sess2.run(c2); }, {.budget = budget, .warmup = 10});
  figure f{.name = "step_local_large_graph",
           .value = 1e6 / r2.per_second,
           .unit = "us/run",
           .baseline = "step_local_trivial",
           .baseline_value = trivial_us,
           .path = "in_process"};
  f.note = "same fetch, 1000 unused nodes in the graph; lower is better";
  ctx.out->add(f);
}

// -- matmul -------------------------------------------------------------------

void run_matmul(context& ctx) {
  constexpr int64_t n = 1024;
  auto budget = ctx.budget(3.0, 0.8);
  const double flop = 2.0 * n * n * n;
  graph g;
  auto as_default = g.as_default();
  variable a{random_uniform({n, n}, -1.0, 1.0, dtype::float32, 1),
             named("a")};
  variable b{random_uniform({n, n}, -1.0, 1.0, dtype::float32, 2),
             named("b")};
  auto product = matmul(a, b);
  session sess{bounded_config(), &g};
  sess.run(global_variables_initializer());
  // The same product with Eigen directly: the kernel's own GEMM (row-major
  // maps, one thread) on the same values, into a reused output. Both in
  // alternating slices, each side's fastest: on a shared VM the GEMM's
  // speed drifts by more than the gap being measured.
  auto values = sess.run({a, b});
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                               Eigen::RowMajor>;
  Eigen::Map<const matrix> am(values[0].flat<float>().data(), n, n);
  Eigen::Map<const matrix> bm(values[1].flat<float>().data(), n, n);
  matrix om(n, n);
  auto [ours, eigen] = measure_interleaved(
    [&] { sess.run(product); }, [&] { om.noalias() = am * bm; },
    {.budget = budget, .min_reps = 1});
  figure f{.name = "matmul_1024",
           .value = ours.per_second * flop / 1e9,
           .unit = "GFLOP/s",
           .baseline = "eigen_direct",
           .baseline_value = eigen.per_second * flop / 1e9,
           .path = "in_process"};
  f.note = "in-process session, variables as inputs, one thread (as the "
           "kernel)";
  ctx.out->add(f);
}

// -- paths --------------------------------------------------------------------

/// The path tensors took into this process between two readings of the
/// channel's counters, when `expected` data bytes came in with `replies`
/// step replies: "ring" or "tcp" when all the bytes took that path (on
/// the channel's socket, as tensor frames or inside the replies when no
/// frame carried them), "tcp (CAF)" when the channel carried neither
/// (CAF's own connection did), "ring+tcp" when they split. `detail` gets
/// the bytes each way.
std::string received_path(const tensor_channel::received_totals& before,
                          const tensor_channel::received_totals& after,
                          uint64_t expected, uint64_t replies,
                          std::string* detail = nullptr) {
  auto ring = after.ring_bytes - before.ring_bytes;
  auto socket = after.socket_bytes - before.socket_bytes;
  auto messages = after.messages - before.messages;
  if (detail)
    *detail = std::to_string(ring) + " bytes through the ring, "
              + std::to_string(socket) + " through the socket as tensor "
              "frames, of " + std::to_string(expected) + "; "
              + std::to_string(messages) + " channel replies in "
              + std::to_string(replies) + " steps";
  if (ring == 0 && socket == 0)
    return messages >= replies ? "tcp" : "tcp (CAF)";
  if (ring >= expected && socket == 0)
    return "ring";
  if (socket >= expected && ring == 0)
    return "tcp";
  return "ring+tcp";
}

/// The shared-memory baseline (bench/shm_ring.hpp): a server process and
/// the region, of the channel's ring size. The destructor tells the
/// server to stop and reaps it.
class shm_ring_baseline {
public:
  shm_ring_baseline(const std::string& self, uint64_t capacity)
    : client_(std::in_place, capacity),
      server_(self, "--shm-ring-server", shm_ring_marker, "shared-memory",
              {"--shm", client_->path(), "--capacity",
               std::to_string(capacity)}) {
  }

  ~shm_ring_baseline() {
    client_.reset();
    server_.process().wait(2s);
  }

  void round_trip(uint64_t bytes) {
    client_->round_trip(bytes);
  }

private:
  std::optional<shm_ring_client> client_;
  baseline_server server_;
};

/// iperf3's rate on loopback (one stream, 1 MiB writes, for `seconds`),
/// in MB/s, or nullopt without iperf3 (`why` says).
std::optional<double> iperf3_mb_per_s(double seconds, std::string& why) {
  std::string iperf;
  try {
    iperf = examples::find_program("iperf3", "", "");
  } catch (const std::exception&) {
    why = "iperf3 not installed";
    return std::nullopt;
  }
  auto port = std::to_string(examples::free_port());
  examples::spawn_options quiet;
  quiet.capture_stderr = true;
  // --forceflush: its stdout is a pipe here, which stdio would buffer.
  examples::child_process srv({iperf, "-s", "-1", "--forceflush", "-B",
                               "127.0.0.1", "-p", port},
                              quiet);
  if (!srv.wait_for_line("Server listening", 10s)) {
    why = "iperf3 -s did not start: " + srv.err();
    srv.stop(2s);
    return std::nullopt;
  }
  auto res = examples::run_process(
    {iperf, "-c", "127.0.0.1", "-p", port, "-l", "1M", "-J", "-t",
     fixed(seconds, 1)},
    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 20000),
    quiet);
  srv.stop(2s);
  try {
    auto j = nlohmann::json::parse(res.out);
    return j.at("end").at("sum_received").at("bits_per_second").get<double>()
           / 8e6;
  } catch (const std::exception& e) {
    why = "iperf3's output unreadable (" + res.status.to_string() + ")";
    return std::nullopt;
  }
}

/// A fetch size and the float variable of that many bytes on
/// /job:ps/task:0 that a figure fetches.
using sized_variable = std::pair<std::pair<std::string, int64_t>, variable>;

/// One variable per size of `sizes` whose figure (`prefix` + size) `group`
/// wants, in the default graph, its random values made on the ps itself
/// (the graph stays small); `seed` numbers them.
std::vector<sized_variable>
fetch_variables(const context& ctx, const std::string& group,
                const std::string& prefix,
                const std::vector<std::pair<std::string, int64_t>>& sizes,
                int64_t seed) {
  std::vector<sized_variable> vars;
  device_scope on_ps{"/job:ps/task:0"};
  for (const auto& size : sizes) {
    if (!ctx.wanted(group, prefix + size.first))
      continue;
    variable v{random_uniform({size.second / 4}, 0.0, 1.0, dtype::float32,
                              ++seed),
               named(prefix + size.first)};
    vars.emplace_back(size, v);
  }
  return vars;
}

/// Fetches `v` and checks that `bytes` came back.
void fetch_checked(session& sess, const variable& v, int64_t bytes) {
  auto got = static_cast<int64_t>(sess.run(v).byte_size());
  if (got != bytes)
    throw std::runtime_error("fetched " + std::to_string(got)
                             + " bytes, expected " + std::to_string(bytes));
}

// -- fetch_remote -------------------------------------------------------------

/// Measures TCP's streaming ceiling on this host (the better of the raw
/// stream loop and iperf3) and adds its figure; returns it in MB/s.
double run_stream_ceiling(context& ctx, raw_tcp_baseline& tcp) {
  const uint64_t bytes = (ctx.opts.quick ? uint64_t{128} : uint64_t{512}) << 20;
  auto loop = measure([&] { tcp.round_trip(0, bytes, {.stream = true}); },
                      {.budget = ctx.budget(2.0, 0.3), .min_reps = 3,
                       .warmup = 1});
  auto loop_mb = mb_per_s(loop, double(bytes));
  std::string why;
  auto iperf = iperf3_mb_per_s(ctx.opts.quick ? 0.5 : 2.0, why);
  auto best = std::max(loop_mb, iperf.value_or(0.0));
  figure f{.name = "tcp_stream_ceiling",
           .value = best,
           .unit = "MB/s",
           .path = "tcp"};
  f.note = "the better of a raw stream loop (1 MiB writes into one 1 MiB "
           "read buffer, " + std::to_string(bytes >> 20) + " MiB per "
           "request): " + fixed(loop_mb, 0) + " MB/s, and iperf3 -l 1M: "
           + (iperf ? fixed(*iperf, 0) + " MB/s" : why);
  ctx.out->add(f);
  return best;
}

void run_fetch_remote(context& ctx, remote_cluster& cluster,
                      raw_tcp_baseline& tcp) {
  graph g;
  auto as_default = g.as_default();
  auto vars = fetch_variables(ctx, "fetch_remote", "fetch_remote_",
                              fetch_sizes, 10);
  std::optional<double> ceiling;
  if (ctx.wanted("fetch_remote", "fetch_remote_64MiB"))
    ceiling = run_stream_ceiling(ctx, tcp);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(global_variables_initializer());
  std::unique_ptr<shm_ring_baseline> shm;
  for (auto& [size, v] : vars) {
    const auto& [label, bytes] = size;
    auto fetch = [&] { fetch_checked(sess, v, bytes); };
    // Each size on its own: a few fetches of it first (the connection's
    // windows and the ring in the state this size leaves them), then the
    // path it takes from here on.
    for (int i = 0; i < 4; ++i)
      fetch();
    auto big = bytes >= (int64_t{16} << 20);
    measure_options mopts{.budget = ctx.budget(big ? 2.0 : 1.0,
                                               big ? 0.5 : 0.2),
                          .min_reps = 1, .warmup = 1};
    auto probe_before = tensor_channel::totals_received();
    fetch();
    auto path = received_path(probe_before, tensor_channel::totals_received(),
                              uint64_t(bytes), 1);
    std::vector<std::function<void()>> ops{fetch};
    std::string baseline;
    if (path == "ring") {
      if (!shm)
        shm = std::make_unique<shm_ring_baseline>(ctx.self,
                                                  tensor_channel::ring_capacity());
      ops.push_back([&] { shm->round_trip(uint64_t(bytes)); });
      baseline = "shm_ring";
    } else {
      // The polling one first: the blocking one then leaves the server
      // blocking again before the engine's turn (measure_rounds).
      ops.push_back([&] { tcp.round_trip(0, uint64_t(bytes), {.poll = true}); });
      ops.push_back([&] { tcp.round_trip(0, uint64_t(bytes)); });
      baseline = "raw_tcp_best";
    }
    auto before = tensor_channel::totals_received();
    auto r = measure_rounds(ops, mopts);
    auto engine_fetches = uint64_t(r.reps[0] + mopts.warmup);
    std::string moved;
    auto measured_path = received_path(before,
                                       tensor_channel::totals_received(),
                                       engine_fetches * uint64_t(bytes),
                                       engine_fetches, &moved);
    auto c = path == "ring" ? r.compare(0, {1}) : r.compare(0, {1, 2});
    auto to_mb = [&](double per_s) { return per_s * double(bytes) / 1e6; };
    figure f{.name = "fetch_remote_" + label,
             .value = to_mb(c.engine),
             .unit = "MB/s",
             .baseline = baseline,
             .baseline_value = to_mb(c.baseline),
             .path = measured_path,
             .pair_ratio = c.ratio};
    f.note = std::to_string(bytes) + " bytes per fetch, "
             + fixed(1e6 / c.engine, 1) + " us per fetch; " + moved
             + " (" + std::to_string(engine_fetches) + " fetches)";
    if (path == "ring")
      f.note += "; shm_ring: copy in, polling hand-off, copy out";
    else
      f.note += "; raw TCP blocking " + fixed(to_mb(r.median(2)), 0)
                + " MB/s, polling " + fixed(to_mb(r.median(1)), 0) + " MB/s";
    if (measured_path != path)
      f.note += "; the probe fetch took " + path;
    ctx.out->add(f);
    if (label == "64MiB" && ceiling) {
      figure s{.name = "fetch_remote_64MiB_of_stream",
               .value = f.value,
               .unit = "MB/s",
               .baseline = "tcp_stream_ceiling",
               .baseline_value = *ceiling,
               .path = measured_path};
      s.note = "fetch_remote_64MiB against TCP's streaming ceiling on this "
               "host";
      ctx.out->add(s);
    }
  }
}

// -- step_remote --------------------------------------------------------------

/// A float scalar "step_counter" on /job:ps/task:0 of the default graph:
/// what step_remote_small adds to.
variable counter_on_ps() {
  device_scope on_ps{"/job:ps/task:0"};
  return variable{0.0f, named("step_counter")};
}

void run_step_remote(context& ctx, remote_cluster& cluster,
                     raw_tcp_baseline& tcp) {
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(counter.initializer());
  // In rounds: the step, the raw round trip with both ends polling (the
  // kernel's round trip without a blocked thread's wake-up: the channel's
  // readers poll too), then blocking (64 bytes each way: a 16-byte header
  // plus 48 of payload, 64 back), which also puts the server back to
  // blocking before the step's next turn.
  auto before = tensor_channel::totals_received();
  auto r = measure_rounds({[&] { sess.run(increment); },
                           [&] { tcp.round_trip(48, 64, {.poll = true}); },
                           [&] { tcp.round_trip(48, 64); }},
                          {.budget = budget, .min_reps = 10, .warmup = 10});
  auto after = tensor_channel::totals_received();
  // The warm-up's first step registers the step's graph (over CAF): the
  // timed ones are what must have ridden the channel.
  auto steps = uint64_t(r.reps[0]);
  // A step after the first is a request to the ps's executor and its
  // answer: over the tensor channel when the answer came on it.
  auto answers = after.messages - before.messages;
  auto path = received_path(before, after, 0, steps);
  // What CAF alone costs for one round trip between two processes.
  served_baseline<caf_echo_client> caf{ctx.self, "--caf-echo-server",
                                       caf_echo_marker, "CAF"};
  auto bare = measure([&] { caf.client().round_trip(); },
                      {.budget = budget, .min_reps = 10, .warmup = 10});
  auto ours_us = 1e6 / r.median(0);
  auto polled_us = 1e6 / r.median(1);
  auto raw_us = 1e6 / r.median(2);
  auto caf_us = 1e6 / bare.per_second;
  // Latencies: the pairs' ratio of times is the inverse of their rates'.
  auto slower = [&](size_t base) {
    return rounds::median_ratio(r.rates[base], r.rates[0]);
  };
  figure f{.name = "step_remote_small",
           .value = ours_us,
           .unit = "us/step",
           .baseline = "raw_tcp_rtt_polling",
           .baseline_value = polled_us,
           .path = path,
           .pair_ratio = slower(1)};
  f.note = "assign_add on a scalar on the ps from a session on the worker; "
           "lower is better; " + fixed(r.median(0), 0) + " steps/s; "
           + fixed(slower(2), 2) + "x the blocking raw round trip, "
           + fixed(ours_us / caf_us, 2) + "x caf_rtt_remote; "
           + std::to_string(answers) + " channel messages in "
           + std::to_string(steps) + " steps";
  ctx.out->add(f);
  // Another round trip against the raw blocking one.
  auto rtt_figure = [&](std::string name, double us,
                        std::optional<double> pair, std::string note) {
    ctx.out->add(figure{.name = std::move(name),
                        .value = us,
                        .unit = "us/rtt",
                        .baseline = "raw_tcp_rtt_64B",
                        .baseline_value = raw_us,
                        .note = std::move(note),
                        .path = "tcp",
                        .pair_ratio = pair});
  };
  rtt_figure("raw_tcp_rtt_polling", polled_us,
             rounds::median_ratio(r.rates[2], r.rates[1]),
             "the raw round trip with both ends polling their socket "
             "(yielding) instead of blocking in recv: no wake-up of a "
             "blocked thread");
  rtt_figure("caf_rtt_remote", caf_us, std::nullopt,
             "a 48-byte string from a thread of the worker process to an "
             "echo actor in another process and back, over CAF with "
             "actorflow's configuration: no engine work at all");
  ctx.out->add(figure{.name = "step_remote_small_rate",
                      .value = r.median(0),
                      .unit = "steps/s",
                      .baseline = "raw_tcp_rtt_polling",
                      .baseline_value = r.median(1),
                      .path = path,
                      .pair_ratio = rounds::median_ratio(r.rates[0],
                                                         r.rates[1])});
}

// -- tls ------------------------------------------------------------------------

/// A cluster like remote_cluster with mutual TLS: the ps node with the
/// certificate `certs`/node.pem, the worker server in an actor system of
/// its own with TLS on (this process's default system stays plain, for the
/// other figures). Certificates from actorflow-make-certs (next to this
/// program, else on $PATH). Members stop in reverse order.
class tls_cluster {
public:
  explicit tls_cluster(const std::string& node)
    : certs_(make_certs(dir_.path.string())),
      sys_(system_config(cfg_)),
      nodes_(node, {{"ps", 1}, {"worker", 1}}, node_options(certs_)) {
    enable_tls(sys_, certs_);
    srv_.emplace(sys_, nodes_.spec(), "worker", 0);
  }

  ~tls_cluster() {
    if (srv_)
      srv_->stop();
  }

  caf::actor_system& system() {
    return sys_;
  }

  std::string target() const {
    return srv_->target();
  }

private:
  static tls_config make_certs(const std::string& dir) {
    auto script = find_binary("actorflow-make-certs", "", "");
    examples::spawn_options opts;
    opts.capture_stderr = true;
    opts.echo_stdout = false;
    auto res = examples::run_process({script, dir, "node:127.0.0.1,localhost"},
                                     30s, opts);
    if (!res.status.success())
      throw std::runtime_error("actorflow-make-certs failed: " + res.err);
    tls_config cfg;
    cfg.cert_file = dir + "/node.pem";
    cfg.key_file = dir + "/node.key";
    cfg.ca_file = dir + "/ca.pem";
    return cfg;
  }

  static caf::actor_system_config& system_config(caf::actor_system_config& cfg) {
    add_types(cfg);
    // They would bypass TLS (enable_tls refuses them).
    caf::put(cfg.content, "middleman.enable-automatic-connections", false);
    add_options(cfg);
    return cfg;
  }

  static examples::cluster_options node_options(const tls_config& certs) {
    auto o = quiet_nodes({{"worker", 0}});
    o.args = {"--tls_cert", certs.cert_file, "--tls_key", certs.key_file,
              "--tls_ca", certs.ca_file};
    return o;
  }

  examples::temp_dir dir_{"actorflow-bench-certs"};
  tls_config certs_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  examples::local_cluster nodes_;
  std::optional<server> srv_;
};

void run_tls(context& ctx, const std::string& node) {
  auto plain = remote_cluster::start(node);
  tls_cluster secure{node};
  graph g;
  auto as_default = g.as_default();
  constexpr int64_t bytes = int64_t{64} << 20;
  variable big;
  {
    device_scope on_ps{"/job:ps/task:0"};
    big = variable{random_uniform({bytes / 4}, 0.0, 1.0, dtype::float32, 7),
                   named("tls_fetch_64MiB")};
  }
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session plain_sess{plain->target(), bounded_config(), &g};
  session tls_sess{secure.system(), secure.target(), bounded_config(), &g};
  for (auto* s : {&plain_sess, &tls_sess}) {
    s->run(global_variables_initializer());
    for (int i = 0; i < 3; ++i)
      s->run(big);
  }
  auto check = [&](session& s) {
    if (static_cast<int64_t>(s.run(big).byte_size()) != bytes)
      throw std::runtime_error("a fetch did not return 64 MiB");
  };
  if (ctx.wanted("tls", "tls_fetch_remote_64MiB")) {
    auto before = tensor_channel::totals_received();
    auto [tls, clear] = measure_interleaved(
      [&] { check(tls_sess); }, [&] { check(plain_sess); },
      {.budget = ctx.budget(2.0, 0.5), .min_reps = 1}, slice_pick::median);
    auto fetches = uint64_t(tls.reps + clear.reps);
    figure f{.name = "tls_fetch_remote_64MiB",
             .value = mb_per_s(tls, double(bytes)),
             .unit = "MB/s",
             .baseline = "fetch_remote_64MiB_plain",
             .baseline_value = mb_per_s(clear, double(bytes)),
             .path = received_path(before, tensor_channel::totals_received(),
                                   fetches * uint64_t(bytes), fetches)};
    f.note = "path: tcp (tensor channel) with TLS 1.3 AES-128-GCM against "
             "the same path in plain TCP; 64 MiB is past the ring of shared "
             "memory either way";
    ctx.out->add(f);
  }
  if (ctx.wanted("tls", "tls_step_remote_small")) {
    auto before = tensor_channel::totals_received();
    auto [tls, clear] = measure_interleaved(
      [&] { tls_sess.run(increment); }, [&] { plain_sess.run(increment); },
      {.budget = ctx.budget(2.0, 0.4), .min_reps = 10, .warmup = 10},
      slice_pick::median);
    figure f{.name = "tls_step_remote_small",
             .value = 1e6 / tls.per_second,
             .unit = "us/step",
             .baseline = "step_remote_small_plain",
             .baseline_value = 1e6 / clear.per_second,
             .path = received_path(before, tensor_channel::totals_received(),
                                   0, uint64_t(tls.reps + clear.reps))};
    f.note = "assign_add on the ps from the worker, TLS against plain "
             "(steps after the first ride the tensor channel); lower is "
             "better";
    ctx.out->add(f);
  }
}

// -- monitoring -----------------------------------------------------------------

/// One instrumentation figure: `on` (monitoring on) against `off` in
/// alternating slices of this run.
void add_monitoring_figure(context& ctx, const std::string& name,
                           const rate& on, const rate& off,
                           const std::string& what, std::string path) {
  figure f{.name = name,
           .value = 1e6 / on.per_second,
           .unit = "us/step",
           .baseline = "monitoring_off",
           .baseline_value = 1e6 / off.per_second,
           .path = std::move(path)};
  f.note = what + ", every actor instrumented (busy time, mailbox depth, "
           "counts) against none, " + std::to_string(on.reps) + " and "
           + std::to_string(off.reps) + " steps in alternating slices; "
           "lower is better";
  ctx.out->add(f);
}

/// Actors spawned while this lives have no monitoring record.
struct monitoring_off {
  monitoring_off() {
    monitoring::set_enabled(false);
  }
  ~monitoring_off() {
    monitoring::set_enabled(true);
  }
  monitoring_off(const monitoring_off&) = delete;
  monitoring_off& operator=(const monitoring_off&) = delete;
};

void run_monitoring(context& ctx, const std::string& node) {
  auto budget = ctx.budget(2.0, 0.6);
  measure_options mopts{.budget = budget, .min_reps = 10, .warmup = 10};
  // Whether an actor is instrumented is decided when it is spawned: each
  // session's task and executors are spawned (by its first run) with the
  // flag set for it.
  if (ctx.wanted("monitoring", "monitoring_step_local_trivial")) {
    graph g;
    auto as_default = g.as_default();
    auto c = constant(1.0f, "c");
    std::optional<session> off;
    {
      monitoring_off spawned_off;
      off.emplace(bounded_config(), &g);
      off->run(c);
    }
    session on{bounded_config(), &g};
    on.run(c);
    // In process, compute-bound: the fastest slices.
    auto [r_on, r_off] = measure_interleaved([&] { on.run(c); },
                                             [&] { off->run(c); }, mopts);
    add_monitoring_figure(ctx, "monitoring_step_local_trivial", r_on, r_off,
                          "step_local_trivial's fetch of one Const",
                          "in_process");
  }
  if (!ctx.wanted("monitoring", "monitoring_step_remote_small"))
    return;
  graph g;
  auto as_default = g.as_default();
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  // The worker (this process's server) and the ps process, each off or on.
  std::unique_ptr<remote_cluster> off_cluster;
  std::optional<session> off;
  {
    monitoring_off spawned_off;
    off_cluster = remote_cluster::start(node, {"ACTORFLOW_MONITORING=0"});
    off.emplace(off_cluster->target(), bounded_config(), &g);
    off->run(counter.initializer());
    off->run(increment);
  }
  auto on_cluster = remote_cluster::start(node, {"ACTORFLOW_MONITORING=1"});
  session on{on_cluster->target(), bounded_config(), &g};
  on.run(counter.initializer());
  on.run(increment);
  // Round trips between processes: the median slices.
  auto before = tensor_channel::totals_received();
  auto [r_on, r_off] = measure_interleaved([&] { on.run(increment); },
                                           [&] { off->run(increment); }, mopts,
                                           slice_pick::median);
  add_monitoring_figure(ctx, "monitoring_step_remote_small", r_on, r_off,
                        "step_remote_small's assign_add on the ps",
                        received_path(before, tensor_channel::totals_received(),
                                      0, uint64_t(r_on.reps + r_off.reps)));
}

// -- queue --------------------------------------------------------------------

void run_queue(context& ctx, remote_cluster& cluster, raw_tcp_baseline& tcp) {
  constexpr int32_t batch = 1000;
  constexpr int64_t width = 256;
  const double batch_bytes = double(batch) * width * 4;
  // Enqueue first (time-bounded, at most max_batches), then dequeue exactly
  // what went in: each direction is timed alone, and the queue's capacity
  // bounds the ps's memory (max_batches MB).
  const int64_t max_batches = ctx.opts.quick ? 48 : 400;
  // A few batches untimed each way (the worker-to-ps direction has carried
  // little so far: see raw_tcp_baseline on the connection's windows).
  constexpr int warmup = 4;
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  queue_base q;
  {
    device_scope on_ps{"/job:ps/task:0"};
    q = fifo_queue{static_cast<int32_t>((max_batches + warmup) * batch),
                   {dtype::float32}, {tensor_shape{width}}, "bench_queue"};
  }
  auto x = placeholder(dtype::float32, {-1, width}, "x");
  auto enqueue = q.enqueue_many({x});
  auto dequeue = q.dequeue_many(batch);
  tensor values{dtype::float32, tensor_shape{batch, width}};
  {
    auto flat = values.flat<float>();
    for (size_t i = 0; i < flat.size(); ++i)
      flat[i] = static_cast<float>(i % 1009) * 0.001f;
  }
  session sess{cluster.target(), bounded_config(), &g};
  // Each direction in rounds against the raw TCP baseline that moves the
  // same bytes and stores each batch in memory allocated for it (as a
  // queue stores a fresh tensor), the better of polling and blocking
  // (measure_rounds on the order). Enqueue first, at most max_batches,
  // then dequeue exactly what went in: the queue's capacity bounds the
  // ps's memory (max_batches MB).
  constexpr int n_rounds = 9;
  auto raw_ops = [&](uint64_t up, uint64_t down) {
    return std::vector<std::function<void()>>{
      [&tcp, up, down] { tcp.round_trip(up, down, {.poll = true, .fresh = true}); },
      [&tcp, up, down] { tcp.round_trip(up, down, {.fresh = true}); }};
  };
  auto ops = raw_ops(uint64_t(batch_bytes), 8);
  ops.insert(ops.begin(), [&] { sess.run(enqueue, {{x, values}}); });
  auto totals_before = tensor_channel::totals_received();
  auto messages_before = totals_before.messages;
  auto enq = measure_rounds(ops, {.budget = budget,
                                  .max_reps = max_batches / n_rounds,
                                  .min_reps = 1, .warmup = warmup},
                            n_rounds);
  auto enq_messages = tensor_channel::totals_received().messages
                      - messages_before;
  const int64_t queued = enq.reps[0] + warmup;
  ops = raw_ops(16, uint64_t(batch_bytes));
  ops.insert(ops.begin(), [&] {
    auto t = sess.run(dequeue[0]);
    if (t.num_elements() != batch * width)
      throw std::runtime_error("dequeue_many returned "
                               + t.shape().to_string());
  });
  // Every round dequeues its share of what is there (plus a warm-up
  // batch each).
  auto deq_before = tensor_channel::totals_received();
  auto deq = measure_rounds(ops, {.budget = seconds_d{3600},
                                  .max_reps = (queued - warmup) / n_rounds,
                                  .min_reps = 1, .warmup = warmup},
                            n_rounds);
  std::string moved;
  auto deq_path = received_path(deq_before, tensor_channel::totals_received(),
                                uint64_t(deq.reps[0]) * uint64_t(batch_bytes),
                                uint64_t(deq.reps[0]), &moved);
  auto what = std::to_string(batch) + "x" + std::to_string(width)
              + " float32 per batch, FIFOQueue on the ps, session on the "
                "worker";
  // One direction's pair of figures: elements/s with its note, and MB/s.
  auto add = [&](const std::string& name, const rounds& r,
                 const std::string& baseline, const std::string& path,
                 const std::string& how) {
    if (!ctx.wanted("queue", name))
      return;
    auto c = r.compare(0, {1, 2});
    ctx.out->add(figure{.name = name,
                        .value = c.engine * batch,
                        .unit = "elements/s",
                        .baseline = baseline,
                        .baseline_value = c.baseline * batch,
                        .note = what + "; " + std::to_string(r.reps[0])
                                + " batches; " + how,
                        .path = path,
                        .pair_ratio = c.ratio});
    ctx.out->add(figure{.name = name + "_MBps",
                        .value = c.engine * batch_bytes / 1e6,
                        .unit = "MB/s",
                        .baseline = baseline,
                        .baseline_value = c.baseline * batch_bytes / 1e6,
                        .path = path,
                        .pair_ratio = c.ratio});
  };
  // The feed goes up inside the step's request: a channel message when
  // the request went on the channel, else CAF's.
  add("queue_enqueue_many", enq, "raw_tcp_upload_fresh",
      enq_messages > 0 ? "tcp" : "tcp (CAF)",
      "the feed inside the step's request (" + std::to_string(enq_messages)
        + " channel messages read here)");
  add("queue_dequeue_many", deq, "raw_tcp_download_fresh", deq_path, moved);
}

// -- peers --------------------------------------------------------------------

/// The peer figures' sizes: every fetch size, or three with --quick.
std::vector<std::pair<std::string, int64_t>> peer_sizes(const context& ctx) {
  if (!ctx.opts.quick)
    return fetch_sizes;
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& size : fetch_sizes)
    if (size.first == "1KiB" || size.first == "1MiB" || size.first == "64MiB")
      out.push_back(size);
  return out;
}

#ifdef ACTORFLOW_BENCH_PEERS

/// The engine against TensorFlow's transport, gRPC, on the same sizes and
/// the same small round trip, in rounds (each ratio the median of
/// back-to-back pairs); the peer's better variant (unary or streaming)
/// per round.
void run_peers(context& ctx, remote_cluster& cluster) {
  served_baseline<grpc_peer_client> peer{ctx.self, "--grpc-peer-server",
                                         grpc_peer_marker, "gRPC peer"};
  graph g;
  auto as_default = g.as_default();
  auto vars = fetch_variables(ctx, "peers", "peer_grpc_fetch_",
                              peer_sizes(ctx), 40);
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(global_variables_initializer());
  for (auto& [size, v] : vars) {
    const auto& [label, bytes] = size;
    auto fetch = [&] { fetch_checked(sess, v, bytes); };
    auto n = uint64_t(bytes);
    // Warm: the peer builds each size's reply on its first fetch.
    for (int i = 0; i < 3; ++i) {
      fetch();
      peer.client().recv_tensor(n);
      peer.client().recv_tensor_streaming(n);
    }
    auto big = bytes >= (int64_t{16} << 20);
    auto before = tensor_channel::totals_received();
    auto r = measure_rounds(
      {fetch, [&] { peer.client().recv_tensor(n); },
       [&] { peer.client().recv_tensor_streaming(n); }},
      {.budget = ctx.budget(big ? 1.5 : 0.8, big ? 0.5 : 0.2), .min_reps = 1,
       .warmup = 0});
    std::string moved;
    auto path = received_path(before, tensor_channel::totals_received(),
                              uint64_t(r.reps[0]) * n, uint64_t(r.reps[0]),
                              &moved);
    auto c = r.compare(0, {1, 2});
    auto to_mb = [&](double per_s) { return per_s * double(bytes) / 1e6; };
    figure f{.name = "peer_grpc_fetch_" + label,
             .value = to_mb(c.engine),
             .unit = "MB/s",
             .baseline = "grpc_recv_tensor",
             .baseline_value = to_mb(c.baseline),
             .path = path,
             .pair_ratio = c.ratio};
    f.note = "fetch_remote_" + label + " against TF-style RecvTensor over "
             "gRPC on TCP (the better per round of unary: "
             + fixed(to_mb(r.median(1)), 1) + " MB/s, and streaming: "
             + fixed(to_mb(r.median(2)), 1) + " MB/s); actorflow: " + moved;
    ctx.out->add(f);
  }
  if (!ctx.wanted("peers", "peer_grpc_rtt"))
    return;
  sess.run(counter.initializer());
  auto r = measure_rounds({[&] { sess.run(increment); },
                           [&] { peer.client().ping(); }},
                          {.budget = ctx.budget(1.5, 0.4), .min_reps = 10,
                           .warmup = 10});
  figure f{.name = "peer_grpc_rtt",
           .value = 1e6 / r.median(0),
           .unit = "us/step",
           .baseline = "grpc_ping_64B",
           .baseline_value = 1e6 / r.median(1),
           .path = "tcp",
           .pair_ratio = rounds::median_ratio(r.rates[1], r.rates[0])};
  f.note = "step_remote_small against a unary gRPC call of 48 bytes up "
           "and 64 back; lower is better";
  ctx.out->add(f);
}

#else

void run_peers(context& ctx, remote_cluster&) {
  auto why = "actorflow-bench was built without its gRPC peer (cmake "
             "-DACTORFLOW_BENCH_PEERS=ON; scripts/setup.sh turns it on)";
  for (const auto& size : peer_sizes(ctx))
    if (ctx.wanted("peers", "peer_grpc_fetch_" + size.first))
      ctx.out->add(figure{.name = "peer_grpc_fetch_" + size.first,
                          .skipped = why});
  if (ctx.wanted("peers", "peer_grpc_rtt"))
    ctx.out->add(figure{.name = "peer_grpc_rtt", .skipped = why});
}

#endif

// -- scale --------------------------------------------------------------------

/// What a fan-in worker prints once its session is warm, and then its
/// count.
constexpr const char* fanin_ready_marker = "fanin-worker ready";
constexpr const char* fanin_done_marker = "fanin-worker steps ";

/// The hidden `--fanin-worker` mode: a server for /job:worker/task:`task`
/// of `spec_json`, whose session adds 1 to a scalar of its own on
/// /job:ps/task:0 (small steps); once warm it says so and waits (at most
/// two minutes) for SIGUSR1, then steps for `duration_ms` and prints its
/// count. Dies with its parent.
int serve_fanin_worker(pid_t parent, const std::string& spec_json, int task,
                       int64_t duration_ms) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  // Blocked before CAF starts its threads, which inherit the mask: only
  // sigtimedwait below takes the start signal.
  sigset_t start;
  sigemptyset(&start);
  sigaddset(&start, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &start, nullptr);
  auto spec = cluster_spec::from_json(spec_json);
  server srv{spec, "worker", task};
  graph g;
  auto as_default = g.as_default();
  variable counter;
  {
    device_scope on_ps{"/job:ps/task:0"};
    counter = variable{0.0f, named("fanin_counter_" + std::to_string(task))};
  }
  auto increment = counter.assign_add(1.0);
  session sess{srv.target(), bounded_config(), &g};
  sess.run(counter.initializer());
  for (int i = 0; i < 20; ++i)
    sess.run(increment);
  std::cout << fanin_ready_marker << std::endl;
  timespec limit{120, 0};
  if (::sigtimedwait(&start, nullptr, &limit) != SIGUSR1)
    return 1;
  auto begin = steady::now();
  auto end = begin + milliseconds(duration_ms);
  int64_t steps = 0;
  while (steady::now() < end) {
    sess.run(increment);
    ++steps;
  }
  auto secs = seconds_d(steady::now() - begin).count();
  std::cout << fanin_done_marker << steps << " seconds " << secs << std::endl;
  srv.stop();
  return 0;
}

/// CPU seconds (user and system) process `pid` used so far, from
/// /proc/<pid>/stat; 0 if it cannot be read.
double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text;
  std::getline(in, text);
  // The fields after the command name, which may hold spaces, in parens.
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields{text.substr(close + 2)};
  std::string field;
  double ticks = 0;
  // utime and stime are fields 14 and 15; "state" (3) comes first here.
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14)
      ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// What one fan-in run saw: the workers' total rate, and the ps's CPU
/// time per step meanwhile.
struct fanin_result {
  double steps_per_s = 0;
  double ps_cpu_us_per_step = 0;
};

/// Steps/s of one ps process serving `n` worker processes at once.
fanin_result fanin_steps_per_s(context& ctx, const std::string& node, int n,
                               int64_t duration_ms) {
  std::vector<std::pair<std::string, int>> workers_left;
  for (int i = 0; i < n; ++i)
    workers_left.emplace_back("worker", i);
  examples::local_cluster nodes{node, {{"ps", 1}, {"worker", n}},
                                quiet_nodes(std::move(workers_left))};
  examples::spawn_options quiet;
  quiet.capture_stderr = true;
  std::vector<std::unique_ptr<examples::child_process>> workers;
  for (int i = 0; i < n; ++i)
    workers.push_back(std::make_unique<examples::child_process>(
      std::vector<std::string>{ctx.self, "--fanin-worker", "--parent-pid",
                               std::to_string(::getpid()), "--cluster",
                               nodes.spec().to_json(), "--task",
                               std::to_string(i), "--duration_ms",
                               std::to_string(duration_ms)},
      quiet));
  for (int i = 0; i < n; ++i)
    if (!workers[i]->wait_for_line(fanin_ready_marker, 120s))
      throw std::runtime_error("fan-in worker " + std::to_string(i) + " of "
                               + std::to_string(n) + " did not get ready: "
                               + workers[i]->err());
  auto ps_pid = nodes.process("ps", 0).pid();
  auto ps_cpu_before = cpu_seconds(ps_pid);
  for (auto& w : workers)
    w->send_signal(SIGUSR1);
  double total = 0;
  double steps_total = 0;
  for (int i = 0; i < n; ++i) {
    auto line = workers[i]->wait_for_line(fanin_done_marker,
                                          milliseconds(duration_ms) + 60s);
    if (!line)
      throw std::runtime_error("fan-in worker " + std::to_string(i)
                               + " did not finish: " + workers[i]->err());
    std::istringstream in{line->substr(line->find(fanin_done_marker)
                                       + std::strlen(fanin_done_marker))};
    double steps = 0;
    std::string word;
    double secs = 0;
    in >> steps >> word >> secs;
    if (secs <= 0)
      throw std::runtime_error("fan-in worker " + std::to_string(i)
                               + " printed: " + *line);
    total += steps / secs;
    steps_total += steps;
  }
  auto ps_cpu = cpu_seconds(ps_pid) - ps_cpu_before;
  for (auto& w : workers)
    w->wait(10s);
  return {total, steps_total > 0 ? ps_cpu * 1e6 / steps_total : 0};
}

void run_scale(context& ctx, const std::string& node) {
  // Fan-in: every worker a process of its own, all stepping at once.
  std::optional<double> one_worker;
  auto duration_ms = ctx.opts.quick ? 400 : 2000;
  for (int n : fanin_workers) {
    auto name = "scale_fanin_" + std::to_string(n)
                + (n == 1 ? "worker" : "workers");
    if (!ctx.wanted("scale", name) && n != 1)
      continue;
    auto [rate, ps_cpu_us] = fanin_steps_per_s(ctx, node, n, duration_ms);
    if (n == 1)
      one_worker = rate;
    if (!ctx.wanted("scale", name))
      continue;
    figure f{.name = name,
             .value = rate,
             .unit = "steps/s",
             .baseline = "scale_fanin_1worker",
             .baseline_value = one_worker,
             .path = "tcp"};
    f.note = std::to_string(n) + " worker processes, each assign_add on a "
             "scalar of its own on one ps process, for "
             + std::to_string(duration_ms) + " ms at once; total steps/s "
             "(ratio: the speed-up over one worker, on "
             + std::to_string(std::thread::hardware_concurrency())
             + " cores); the ps used " + fixed(ps_cpu_us, 1)
             + " us of CPU per step";
    ctx.out->add(f);
  }
  // Graph size: one step updates every variable, spread over 4 ps tasks.
  examples::local_cluster nodes{node, {{"ps", 4}, {"worker", 1}},
                                quiet_nodes({{"worker", 0}})};
  server srv{nodes.spec(), "worker", 0};
  std::optional<double> one_var_us;
  for (int n : graph_variables) {
    auto name = "scale_vars_" + std::to_string(n);
    graph g;
    auto as_default = g.as_default();
    std::vector<operation> updates;
    for (int i = 0; i < n; ++i) {
      device_scope on_ps{"/job:ps/task:" + std::to_string(i % 4)};
      variable v{0.0f, named("v" + std::to_string(i))};
      updates.push_back(v.assign_add(1.0).op());
    }
    auto step = group(updates);
    session sess{srv.target(), bounded_config(), &g};
    sess.run(global_variables_initializer());
    auto r = measure([&] { sess.run(step); },
                     {.budget = ctx.budget(1.5, 0.3), .min_reps = 5,
                      .warmup = 5});
    auto us = 1e6 / r.per_second;
    if (n == 1)
      one_var_us = us;
    if (!ctx.wanted("scale", name))
      continue;
    figure f{.name = name,
             .value = us,
             .unit = "us/step",
             .baseline = "linear_from_1var",
             .baseline_value = *one_var_us * n,
             .path = "tcp"};
    f.note = std::to_string(n) + " scalar variables round-robin over 4 ps "
             "processes, one step assign_adds every one from a session on "
             "the worker: " + fixed(us / n, 2) + " us per variable "
             "(ratio <= 1: the cost grows no faster than linearly); "
             + std::to_string(r.reps) + " steps";
    ctx.out->add(f);
  }
  srv.stop();
}

// -- rss ----------------------------------------------------------------------

void run_rss(context& ctx, const std::string& node) {
  // A cluster of its own, so that the ps's peak is this stream's and not
  // an earlier figure's.
  auto cluster = remote_cluster::start(node);
  constexpr int64_t element_floats = 262144; // 1 MiB per element
  const int64_t elements = ctx.opts.quick ? 64 : 1024;
  const auto limit = ctx.opts.quick ? 30s : 120s;
  graph g;
  auto as_default = g.as_default();
  queue_base q;
  {
    device_scope on_ps{"/job:ps/task:0"};
    q = fifo_queue{16, {dtype::float32}, {tensor_shape{element_floats}},
                   "rss_queue"};
  }
  auto x = placeholder(dtype::float32, {element_floats}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue().front();
  auto close = q.close(/*cancel_pending_enqueues=*/true);
  tensor value{dtype::float32, tensor_shape{element_floats}};
  {
    auto flat = value.flat<float>();
    for (size_t i = 0; i < flat.size(); ++i)
      flat[i] = static_cast<float>(i % 4099);
  }
  session sess{cluster->target(), bounded_config(), &g};
  // Warm up both paths, then take the peaks before streaming.
  sess.run(enqueue, {{x, value}});
  sess.run(dequeue);
  auto ps_pid = cluster->ps_pid();
  auto ps_before = proc_status_kib(ps_pid, "VmHWM");
  bool reset = reset_own_peak_rss();
  auto self_before = proc_status_kib(0, reset ? "VmHWM" : "VmRSS");
  // Producer and consumer at once, as a training input pipeline: the
  // queue's capacity (16 MiB) is all that may pile up.
  std::atomic<bool> stop{false};
  std::exception_ptr producer_error;
  auto start = steady::now();
  std::thread producer{[&] {
    try {
      for (int64_t i = 0; i < elements && !stop; ++i)
        sess.run(enqueue, {{x, value}});
    } catch (...) {
      if (!stop)
        producer_error = std::current_exception();
    }
  }};
  int64_t moved = 0;
  std::exception_ptr consumer_error;
  // The ps's resident size at each quarter of the stream: flat if its
  // memory is bounded, a slope if something keeps what passed through.
  std::string ps_trend;
  try {
    for (; moved < elements; ++moved) {
      if (steady::now() - start > limit)
        break;
      if (producer_error)
        break;
      sess.run(dequeue);
      if ((moved + 1) % (elements / 4) == 0)
        if (auto rss = proc_status_kib(ps_pid, "VmRSS"))
          ps_trend += (ps_trend.empty() ? "" : ", ") + fixed(*rss / 1024, 0);
    }
  } catch (...) {
    consumer_error = std::current_exception();
  }
  auto secs = seconds_d(steady::now() - start).count();
  stop = true;
  if (moved < elements) {
    // Unblock a producer waiting on a full queue.
    try {
      sess.run(close);
    } catch (const std::exception&) {
      // The queue may be gone with the error that stopped us.
    }
  }
  producer.join();
  if (consumer_error)
    std::rethrow_exception(consumer_error);
  if (producer_error)
    std::rethrow_exception(producer_error);
  auto ps_after = proc_status_kib(ps_pid, "VmHWM");
  auto self_after = proc_status_kib(0, reset ? "VmHWM" : "VmRSS");
  if (!ps_before || !ps_after || !self_before || !self_after)
    throw std::runtime_error("cannot read VmHWM from /proc/<pid>/status");
  auto streamed = fixed(double(moved), 0) + " MiB streamed in "
                  + fixed(secs, 1) + " s ("
                  + fixed(double(moved) * 1.048576 / secs, 0) + " MB/s)";
  if (moved < elements)
    streamed += ", stopped at the time limit";
  ctx.out->add(figure{.name = "rss_peak_ps",
                      .value = *ps_after / 1024,
                      .unit = "MiB",
                      .baseline = "peak_before_streaming",
                      .baseline_value = *ps_before / 1024,
                      .note = "the ps node holding the queue (capacity 16 "
                              "x 1 MiB); " + streamed
                              + "; its VmRSS (MiB) after each quarter: "
                              + ps_trend});
  ctx.out->add(figure{
    .name = "rss_peak_worker",
    .value = *self_after / 1024,
    .unit = "MiB",
    .baseline = reset ? "rss_before_streaming" : "rss_before_streaming_nopeakreset",
    .baseline_value = *self_before / 1024,
    .note = std::string{"the bench process (worker task and client); "}
            + (reset ? "peak reset before streaming"
                     : "VmRSS: this kernel refused to reset VmHWM")});
}

// -- train --------------------------------------------------------------------

/// Aggregate examples/s of an `actorflow-train --local` run: per worker,
/// the median of its "examples/s X" lines after the first (which includes
/// start-up: graph registration and the first steps), summed over the
/// workers.
double trainer_examples_per_s(const std::string& out, int workers,
                              std::string& detail) {
  static const std::regex pattern{
    R"(worker (\d+): step \d+\b.*examples/s ([0-9.]+))"};
  std::map<int, std::vector<double>> rates;
  std::istringstream lines{out};
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, pattern))
      rates[std::stoi(m[1].str())].push_back(std::stod(m[2].str()));
  }
  if (static_cast<int>(rates.size()) != workers)
    throw std::runtime_error("expected examples/s lines from "
                             + std::to_string(workers) + " worker(s), got "
                             + std::to_string(rates.size()));
  double total = 0;
  for (auto& [worker, xs] : rates) {
    if (xs.size() > 1)
      xs.erase(xs.begin());
    std::sort(xs.begin(), xs.end());
    auto median = xs[xs.size() / 2];
    detail += (detail.empty() ? "" : ", ") + std::string{"worker "}
              + std::to_string(worker) + " " + fixed(median, 0) + " ("
              + std::to_string(xs.size()) + " windows)";
    total += median;
  }
  return total;
}

bool have_fashion_mnist(const std::string& dir) {
  for (const char* file :
       {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!std::filesystem::is_regular_file(std::filesystem::path{dir} / file))
      return false;
  return true;
}

void run_train(context& ctx) {
  const std::vector<std::pair<std::string, int>> runs = {
    {"train_examples_per_s_1worker", 1}, {"train_examples_per_s_2workers", 2}};
  const std::string baseline = "eigen_loop_1process";
  if (!have_fashion_mnist(ctx.opts.data_dir)) {
    for (const auto& [name, _] : runs)
      ctx.out->add(figure{.name = name,
                          .unit = "examples/s",
                          .baseline = baseline,
                          .skipped = "Fashion-MNIST not found in "
                                     + ctx.opts.data_dir
                                     + " (Debian package dataset-fashion-mnist)"});
    return;
  }
  auto train = find_binary("actorflow-train", ctx.opts.train, "--train");
  // The baseline: the same MLP step as a plain Eigen loop in this process,
  // measured right before and right after each training run and averaged.
  // This shared VM's speed drifts over a run's ~15 s: measured once before
  // both runs, three consecutive one-worker ratios read 0.50, 0.71, 0.67.
  eigen_mlp mlp;
  auto plain_rate = [&] {
    float loss = 0;
    auto plain = measure([&] { loss = mlp.step(); },
                         {.budget = ctx.budget(2.0, 0.5), .min_reps = 10,
                          .warmup = 3});
    if (!std::isfinite(loss))
      throw std::runtime_error("the Eigen MLP baseline diverged");
    return plain.per_second * double(mlp.batch_size());
  };
  auto plain_before = plain_rate();
  for (const auto& [name, workers] : runs) {
    if (!ctx.wanted("train", name))
      continue;
    // Enough logged windows for a median after the first one, within a
    // bounded time (the mlp runs ~100 steps/s per worker here).
    int64_t steps = ctx.opts.quick ? 250 * workers : 2000 * workers;
    int64_t log_every = ctx.opts.quick ? 50 : 100;
    std::vector<std::string> argv{train,           "--local",
                                  std::to_string(workers),
                                  "--model",       "mlp",
                                  "--train_steps", std::to_string(steps),
                                  "--log_every",   std::to_string(log_every),
                                  "--data_dir",    ctx.opts.data_dir};
    examples::spawn_options sopts;
    sopts.capture_stderr = true;
    note("running actorflow-train --local " + std::to_string(workers)
         + " --model mlp --train_steps " + std::to_string(steps));
    examples::child_process child{argv, sopts};
    trainer_pid = child.pid();
    auto limit = ctx.opts.quick ? 90s : 240s;
    auto status = child.wait(std::chrono::duration_cast<milliseconds>(limit));
    if (!status)
      child.stop(5s);
    trainer_pid = 0;
    auto out = child.out();
    if (!status || !status->success()) {
      auto err = child.err();
      if (err.size() > 600)
        err = "..." + err.substr(err.size() - 600);
      throw std::runtime_error(
        "actorflow-train --local " + std::to_string(workers)
        + (status ? " ended with " + status->to_string()
                  : " did not finish within "
                      + std::to_string(limit.count()) + " s")
        + ": " + err);
    }
    std::string detail;
    auto ours = trainer_examples_per_s(out, workers, detail);
    auto plain_after = plain_rate();
    detail += "; eigen loop " + fixed(plain_before, 0) + " before, "
              + fixed(plain_after, 0) + " after";
    auto plain_mean = (plain_before + plain_after) / 2;
    plain_before = plain_after;
    ctx.out->add(figure{.name = name,
                        .value = ours,
                        .unit = "examples/s",
                        .baseline = baseline,
                        .baseline_value = plain_mean,
                        .note = "mlp 784-256-128-10, adam, batch 100, 1 ps + "
                                + std::to_string(workers) + " worker(s), "
                                + std::to_string(steps) + " global steps; "
                                + detail});
  }
}

// -- main ---------------------------------------------------------------------

/// The figure names a group reports, for the null lines of a group that
/// failed as a whole.
std::vector<std::string> names_of(const context& ctx, const std::string& group) {
  std::vector<std::string> result;
  for (const auto& [name, g] : figure_groups())
    if (g == group && name != "rss_peak" && name != "train_examples_per_s"
        && ctx.wanted(group, name))
      result.push_back(name);
  return result;
}

/// Runs one group; a failure becomes null lines naming the error, and the
/// bench goes on with the next group.
void run_group(context& ctx, const std::string& group,
               const std::function<void()>& body) {
  if (!ctx.wanted(group))
    return;
  note("measuring " + group);
  try {
    body();
  } catch (const std::exception& e) {
    note(group + " failed: " + e.what());
    for (const auto& name : names_of(ctx, group))
      if (ctx.out->find(name) == nullptr)
        ctx.out->add(figure{.name = name, .error = e.what()});
  }
}

int run(int argc, char** argv) {
  auto opts = parse_args(argc, argv);
  if (opts.help) {
    std::cout << usage_text << common_usage;
    return 0;
  }
  report out{opts.json_only};
  context ctx{opts, self_path(argv[0]), &out};
  // Resolve the launcher before measuring anything: a missing one is a
  // usage problem and should not surface halfway through.
  if (!opts.node.empty() && ::access(opts.node.c_str(), X_OK) != 0)
    throw usage_error("--node " + opts.node + ": not an executable file");
  std::string node;
  bool remote = ctx.wanted("fetch_remote") || ctx.wanted("step_remote")
                || ctx.wanted("queue") || ctx.wanted("rss")
                || ctx.wanted("monitoring") || ctx.wanted("tls")
                || ctx.wanted("scale") || ctx.wanted("peers");
  if (remote)
    node = examples::find_node_binary(opts.node);
  if (ctx.wanted("train") && have_fashion_mnist(opts.data_dir))
    find_binary("actorflow-train", opts.train, "--train");

  run_group(ctx, "step_local", [&] { run_step_local(ctx); });
  run_group(ctx, "matmul", [&] { run_matmul(ctx); });
  // The remote figures share one cluster and one raw TCP pair.
  {
    std::unique_ptr<remote_cluster> cluster;
    std::unique_ptr<raw_tcp_baseline> tcp;
    auto ensure = [&] {
      if (!cluster)
        cluster = remote_cluster::start(node);
      if (!tcp)
        tcp = std::make_unique<raw_tcp_baseline>(ctx.self);
    };
    run_group(ctx, "fetch_remote", [&] {
      ensure();
      run_fetch_remote(ctx, *cluster, *tcp);
    });
    run_group(ctx, "step_remote", [&] {
      ensure();
      run_step_remote(ctx, *cluster, *tcp);
    });
    run_group(ctx, "queue", [&] {
      ensure();
      run_queue(ctx, *cluster, *tcp);
    });
    run_group(ctx, "peers", [&] {
      ensure();
      run_peers(ctx, *cluster);
    });
  }
  run_group(ctx, "monitoring", [&] { run_monitoring(ctx, node); });
  run_group(ctx, "tls", [&] { run_tls(ctx, node); });
  run_group(ctx, "rss", [&] { run_rss(ctx, node); });
  run_group(ctx, "scale", [&] { run_scale(ctx, node); });
  run_group(ctx, "train", [&] { run_train(ctx); });
  out.print_table();
  return out.failed() ? 1 : 0;
}

/// The value of a hidden server mode's `--name VALUE` ("" if absent).
std::string hidden_arg(int argc, char** argv, std::string_view name) {
  for (int i = 2; i + 1 < argc; i += 2)
    if (name == argv[i])
      return argv[i + 1];
  return "";
}

/// The parent of a hidden server mode: `--parent-pid PID` (0: none).
pid_t parent_pid_arg(int argc, char** argv) {
  return static_cast<pid_t>(std::atol(hidden_arg(argc, argv, "--parent-pid").c_str()));
}

} // namespace

int main(int argc, char** argv) {
  log::init(prog);
  int code = 0;
  try {
    std::string_view mode = argc > 1 ? argv[1] : "";
    if (mode == "--raw-tcp-server") {
      code = serve_raw_tcp(parent_pid_arg(argc, argv));
    } else if (mode == "--caf-echo-server") {
      code = serve_caf_echo(parent_pid_arg(argc, argv));
#ifdef ACTORFLOW_BENCH_PEERS
    } else if (mode == "--grpc-peer-server") {
      code = serve_grpc_peer(parent_pid_arg(argc, argv));
#endif
    } else if (mode == "--fanin-worker") {
      code = serve_fanin_worker(parent_pid_arg(argc, argv),
                                hidden_arg(argc, argv, "--cluster"),
                                std::stoi(hidden_arg(argc, argv, "--task")),
                                std::stoll(hidden_arg(argc, argv,
                                                      "--duration_ms")));
    } else if (mode == "--shm-ring-server") {
      code = serve_shm_ring(parent_pid_arg(argc, argv),
                            hidden_arg(argc, argv, "--shm"),
                            std::stoull(hidden_arg(argc, argv, "--capacity")));
    } else {
      ::signal(SIGPIPE, SIG_IGN);
      struct sigaction sa {};
      sa.sa_handler = on_stop_signal;
      sigemptyset(&sa.sa_mask);
      for (int sig : {SIGINT, SIGTERM, SIGHUP})
        ::sigaction(sig, &sa, nullptr);
      code = run(argc, argv);
    }
  } catch (const usage_error& e) {
    log::error(std::string{e.what()} + " (see --help)");
    code = 2;
  } catch (const std::exception& e) {
    log::error(e.what());
    code = 1;
  }
  // As actorflow-node: CAF's threads may still be busy with the last
  // messages of peers; a process that ends here needs no static
  // destructors.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
}
