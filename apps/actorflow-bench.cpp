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
// "note"; a readable table follows at the end (see the help's description).
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
// This file holds the command line (each flag declared once with CLI11,
// on support::command_line), the registry of the figure groups
// (bench/groups.hpp: each group's figures are measured in a file of its
// own under bench/, its shared pieces in bench/common.cpp) and the output.
//
// Exit status (support/guarded_main.hpp): 0 when every figure was measured
// (a figure skipped for a stated reason, such as a missing dataset, counts
// as measured), 1 when a figure failed at run time, 2 for a bad command
// line or configuration.

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actorflow/support/command_line.hpp"
#include "actorflow/support/flags.hpp"
#include "actorflow/support/guarded_main.hpp"

#include "bench/caf_rtt.hpp"
#include "bench/common.hpp"
#include "bench/groups.hpp"
#include "bench/grpc_peer.hpp"
#include "bench/raw_tcp.hpp"
#include "bench/shm_ring.hpp"

namespace actorflow::bench {

using support::command_line;

// -- the registry -------------------------------------------------------------

const std::vector<figure_group>& registry() {
  // The groups that share one cluster and one raw TCP pair
  // (shares_cluster) stay next to each other: run stops the pair at the
  // first other group after them.
  static const std::vector<figure_group> all = {
    step_local_group(),   // local.cpp
    matmul_group(),
    conv2d_group(),
    fetch_remote_group(), // fetch.cpp
    step_remote_group(),  // steps.cpp
    queue_group(),
    peers_group(),        // fetch.cpp
    monitoring_group(),   // overhead.cpp
    tls_group(),
    replication_group(),  // replication.cpp
    rss_group(),          // system.cpp
    scale_group(),        // scale.cpp
    train_group(),        // system.cpp
    python_group(),       // python.cpp
    torch_group(),        // torch.cpp
    netsim_group()};      // netsim.cpp
  return all;
}

const figure_group* find_group(const std::string& name) {
  for (const auto& g : registry())
    if (g.name == name)
      return &g;
  return nullptr;
}

const std::map<std::string, std::string>& figure_groups() {
  static const auto all = [] {
    std::map<std::string, std::string> result;
    for (const auto& g : registry()) {
      for (const auto& name : g.figures)
        result.emplace(name, g.name);
      for (const auto& name : g.aliases)
        result.emplace(name, g.name);
    }
    return result;
  }();
  return all;
}

bool context::wanted(const std::string& group, const std::string& name) const {
  const auto& known = figure_groups();
  for (const auto& item : opts.skip)
    if (item == group
        || (known.count(item) != 0 && known.at(item) == group))
      return false;
  const auto* g = find_group(group);
  if (opts.only.empty())
    return g == nullptr || !g->explicit_only;
  bool group_named = false;
  bool any_figure_of_group = false;
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
         && (name.empty() || g == nullptr || !g->separable);
}

// -- signals ------------------------------------------------------------------

// Node processes and the raw TCP server die with us through
// PR_SET_PDEATHSIG; the trainer launcher is told (it then stops and reaps
// its own tasks).
std::atomic<pid_t> trainer_pid{0};

namespace {

extern "C" void on_stop_signal(int sig) {
  if (auto pid = trainer_pid.load(); pid > 0)
    ::kill(pid, SIGTERM);
  ::_exit(128 + sig);
}

constexpr const char* prog = "actorflow-bench";

// R"text(: the text holds )".
constexpr const char* description = R"text(Measures actorflow on this host against baselines measured in the same run
and prints one JSON object per figure and line on stdout
  {"name", "value", "unit", "baseline", "baseline_value", "ratio"[,
   "ratio_from": "pairs"][, "path"][, "note"]}
then a readable table. ratio = value / baseline_value, or, with
"ratio_from": "pairs", the median of the ratios of pairs measured back to
back (engine, baseline, engine, ...). "path" is the way the figure's bytes
went, as the tensor channel's counters saw them: "tcp", "ring" (shared
memory between processes of this host), "tcp (CAF)", "ring+tcp", or
"in_process"; memory and training figures have none. The figures and
their groups, the names --only takes, are listed below the flags.

  actorflow-bench [--quick] [--only NAME[,NAME...]] [--skip NAME[,NAME...]]
                  [--peers] [--netsim] [--json-only]
                  [--node PATH] [--train PATH] [--data_dir DIR]
                  [--python PATH]
)text";

constexpr const char* footer = R"(Figures (group: names):
  step_local:   step_local_trivial (us per run of a one-node graph in an
                in-process session; baseline: the 20 us target),
                step_local_large_graph (the same fetch in a graph with 1000
                unused nodes; baseline: step_local_trivial)
  matmul:       matmul_1024 (GFLOP/s of a 1024x1024 float MatMul through a
                session; baseline: the same Eigen product called directly)
  conv2d:       conv2d_cnn_forward, conv2d_cnn_train (GFLOP/s of the
                CNN trainer's two 5x5 convolutions, batch 100, forward and
                a training step's forward and gradients, through a
                session; baseline: Eigen's image patches and contraction,
                TensorFlow's CPU formulation, one thread)
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
  replication:  replication_step_remote_small (us; baseline: the same
                step on a two-ps cluster without replicated variables, in
                alternating slices in this run),
                replication_queue_step_remote (us per step through a
                replicated queue on ps:0; the same baseline),
                replication_failover_ms
                (a ps's SIGKILL to the first step on its promoted backup),
                elastic_join_first_step_ms (a worker joins the running
                cluster: join, server, session and first step)
  train:        train_examples_per_s_1worker, train_examples_per_s_2workers
                (Fashion-MNIST MLP with actorflow-train --local 1 / 2;
                baseline: a single-process plain Eigen loop doing the same
                forward, backward and Adam update)
  python:       python_step_local_trivial (us per run of the one-node
                step from Python; baseline: the same from C++, measured
                before and after), python_fetch_64mib, python_feed_64mib
                (MB/s of a 64 MiB float32 fetch into numpy and feed from
                numpy by a session on a worker of a Python process;
                baseline: the same from this process's worker of the same
                cluster), python_train_examples_per_s_1worker
                (examples/python/train_mnist.py --local 1; baseline:
                actorflow-train --local 1 just before); needs the Python
                package (ACTORFLOW_PYTHON), else skipped
  torch:        torch_async_examples_per_s, torch_sync_examples_per_s
                (actorflow-train --local 2, asynchronous and --sync;
                baseline: the same job in PyTorch, a torch.distributed.rpc
                parameter server and DistributedDataParallel on gloo, the
                faster of stock and with Eigen's sgemm preloaded),
                torch_async_seconds_to_0.88, torch_sync_seconds_to_0.88
                (worker 0's seconds to 0.88 test accuracy on both sides;
                not in --quick); needs Debian's python3-torch, else
                skipped
  netsim:       netsim_{10g,1g}_<figure> for every fetch_remote,
                step_remote, peers and scale figure, measured again with the
                worker and the ps on two hosts of a simulated network
                (each task in a network namespace of its own, a switch
                giving every link 100 us and 10 Gbit/s, or 1 ms and
                1 Gbit/s, one way; no shared-memory ring; the fan-in
                workers share host 0), netsim_{10g,1g}_fetch_remote_
                64MiB_of_link (against the links' rate),
                netsim_{10g,1g}_train_examples_per_s_{2,4,8}workers (the
                MLP with 1 ps and that many workers, each on a host;
                baseline: the same on loopback without the ring),
                netsim_{10g,1g}_torch_{async,sync}_examples_per_s (the
                torch group's job, every process on a host, PyTorch's
                TensorPipe on TCP alone); only
                when named (--netsim, --only netsim); needs root, else
                skipped
  (1 KiB = 1024 bytes, MB = 10^6 bytes)

Exit status: 0 when every figure was measured (or skipped for a stated
reason), 1 when one failed at run time, 2 for a bad command line or
configuration.)";

// -- options ------------------------------------------------------------------

/// A group or figure name (registry()): "unknown figure 'x' (groups: ...;
/// or a figure name from --help)".
CLI::Validator figure_name() {
  return CLI::Validator{
    [](std::string& name) -> std::string {
      if (find_group(name) != nullptr || figure_groups().count(name) != 0)
        return {};
      std::string list;
      for (const auto& g : registry())
        list += (list.empty() ? "" : ", ") + g.name;
      return "unknown figure '" + name + "' (groups: " + list
             + "; or a figure name from --help)";
    },
    ""};
}

/// The options, or std::nullopt after --help.
std::optional<options> parse_args(int argc, char** argv) {
  options opts;
  std::optional<std::string> only;
  std::optional<std::string> skip;
  bool peers = false;
  bool netsim = false;
  command_line cl{prog, description};
  cl.footer(footer);
  auto& app = cl.app();
  app.add_flag("--quick", opts.quick,
               "short runs (CI): smaller budgets, 64 MiB streamed for rss, "
               "three sizes for peers");
  app.add_option("--only", only,
                 "comma-separated group or figure names to run (a figure "
                 "name runs its group, or that size for fetch_remote and "
                 "peers)")
    ->type_name("LIST")
    ->check(support::list_of(figure_name()));
  app.add_option("--skip", skip,
                 "comma-separated groups not to run (a figure name skips "
                 "its group), e.g. --quick --skip torch")
    ->type_name("LIST")
    ->check(support::list_of(figure_name()));
  app.add_flag("--peers", peers,
               "the peer groups alone: gRPC and PyTorch (--only peers,torch)");
  app.add_flag("--netsim", netsim,
               "the netsim group alone (--only netsim; root): the remote "
               "figures and training across a simulated network of hosts");
  app.add_option("--peer_host", opts.peer_host,
                 "run the far end of the remote figures in network "
                 "namespace NETNS at IP, this process being at SELF_IP "
                 "(the netsim group starts the bench so)")
    ->type_name("NETNS,IP,SELF_IP")
    ->check(support::non_empty());
  app.add_flag("--json-only", opts.json_only,
               "no table, only the JSON lines");
  // Checked here, not when the first group needs it: a missing launcher
  // is a usage problem and should not surface halfway through.
  app.add_option("--node", opts.node,
                 "the actorflow-node launcher (default: next to this "
                 "program, else on $PATH)")
    ->type_name("PATH")
    ->check(support::non_empty())
    ->check(support::executable_file());
  // Only the train group runs it: its check (system.cpp) resolves it.
  app.add_option("--train", opts.train,
                 "the actorflow-train trainer (default: likewise)")
    ->type_name("PATH")
    ->check(support::non_empty());
  app.add_option("--data_dir", opts.data_dir,
                 "Fashion-MNIST for the train figures (missing: skipped)")
    ->type_name("DIR")
    ->capture_default_str()
    ->check(support::non_empty());
  app.add_option("--python", opts.python,
                 "the Python interpreter for the python figures")
    ->type_name("PATH")
    ->capture_default_str()
    ->check(support::non_empty());
  if (!cl.parse(argc, argv))
    return std::nullopt;
  cl.apply();
  if (only)
    opts.only = support::split_list(*only);
  if (skip)
    opts.skip = support::split_list(*skip);
  if (peers) {
    opts.only.push_back("peers");
    opts.only.push_back("torch");
  }
  if (netsim)
    opts.only.push_back("netsim");
  if (!opts.peer_host.empty()) {
    auto parts = support::split_list(opts.peer_host);
    if (parts.size() != 3)
      throw support::usage_error("--peer_host: expected NETNS,IP,SELF_IP, "
                                 "got '" + opts.peer_host + "'");
    // A bench started in a simulated host by the netsim group ends with
    // it (its own children then end with it).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    set_peer({.ip = parts[1],
              .self_ip = parts[2],
              .launcher = {support::find_program("ip", "", "--peer_host"),
                           "netns", "exec", parts[0]}});
  }
  return opts;
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

/// The target of figure `name` (nullptr: none).
const target* find_target(const std::string& name) {
  for (const auto& g : registry())
    if (auto i = g.targets.find(name); i != g.targets.end())
      return &i->second;
  return nullptr;
}

} // namespace

nlohmann::ordered_json figure::to_json() const {
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

figure figure_from_json(const nlohmann::json& j) {
  auto number = [&](const char* key) -> std::optional<double> {
    if (!j.contains(key) || j.at(key).is_null())
      return std::nullopt;
    return j.at(key).get<double>();
  };
  auto text = [&](const char* key) {
    return j.contains(key) && j.at(key).is_string()
             ? j.at(key).get<std::string>()
             : std::string{};
  };
  figure f{.name = j.at("name").get<std::string>(),
           .value = number("value"),
           .unit = text("unit"),
           .baseline = text("baseline"),
           .baseline_value = number("baseline_value"),
           .note = text("note"),
           .skipped = text("skipped"),
           .error = text("error"),
           .path = text("path")};
  if (text("ratio_from") == "pairs")
    f.pair_ratio = number("ratio");
  return f;
}

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

// Prints the figure's JSON line at once (a long run shows progress, and a
// run cut short keeps what it measured).
void report::add(figure f) {
  say(f.to_json().dump());
  if (!f.error.empty())
    failed_ = true;
  figures_.push_back(std::move(f));
}

const figure* report::find(const std::string& name) const {
  for (const auto& f : figures_)
    if (f.name == name)
      return &f;
  return nullptr;
}

void report::print_table() const {
  if (json_only_ || figures_.empty())
    return;
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"figure", "value", "unit", "baseline", "baseline value",
                  "ratio", "target"});
  for (const auto& f : figures_) {
    std::string goal;
    if (const auto* t = find_target(f.name)) {
      goal = t->text;
      if (f.value && (f.ratio() || !t->on_ratio))
        goal += t->met(f) ? " (met)" : " (not met)";
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

// -- main ---------------------------------------------------------------------

namespace {

/// The figure names a group reports, for the null lines of a group that
/// failed as a whole (in name order).
std::vector<std::string> names_of(const context& ctx, const figure_group& g) {
  std::vector<std::string> result;
  for (const auto& name : g.figures)
    if (ctx.wanted(g.name, name))
      result.push_back(name);
  std::sort(result.begin(), result.end());
  return result;
}

/// Runs one group; a failure becomes null lines naming the error, and the
/// bench goes on with the next group.
void run_group(context& ctx, const figure_group& g) {
  if (!ctx.wanted(g.name))
    return;
  note("measuring " + g.name);
  try {
    if (g.shares_cluster)
      start_shared(ctx);
    g.run(ctx);
  } catch (const std::exception& e) {
    note(g.name + " failed: " + e.what());
    for (const auto& name : names_of(ctx, g))
      if (ctx.out->find(name) == nullptr)
        ctx.out->add(figure{.name = name, .error = e.what()});
  }
}

int run(int argc, char** argv) {
  auto parsed = parse_args(argc, argv);
  if (!parsed)
    return 0;
  const auto& opts = *parsed;
  report out{opts.json_only};
  context ctx{.opts = opts, .self = self_path(argv[0]), .out = &out};
  const auto& groups = registry();
  if (std::any_of(groups.begin(), groups.end(), [&](const auto& g) {
        return g.needs_node && ctx.wanted(g.name);
      }))
    ctx.node = support::find_node_binary(opts.node);
  for (const auto& g : groups)
    if (g.check && ctx.wanted(g.name))
      g.check(ctx);
  for (const auto& g : groups) {
    // The shared cluster and raw TCP pair stop once their groups are done.
    if (!g.shares_cluster) {
      ctx.tcp.reset();
      ctx.cluster.reset();
    }
    run_group(ctx, g);
  }
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

/// The address a hidden server mode listens on: `--bind IP`, else
/// loopback.
std::string bind_arg(int argc, char** argv) {
  auto ip = hidden_arg(argc, argv, "--bind");
  return ip.empty() ? "127.0.0.1" : ip;
}

/// A hidden server mode (argv[1]: this program started again as a
/// baseline's server or a fan-in worker), else the bench.
int dispatch(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "--raw-tcp-server")
    return serve_raw_tcp(parent_pid_arg(argc, argv), bind_arg(argc, argv));
  if (mode == "--caf-echo-server")
    return serve_caf_echo(parent_pid_arg(argc, argv), bind_arg(argc, argv));
#ifdef ACTORFLOW_BENCH_PEERS
  if (mode == "--grpc-peer-server")
    return serve_grpc_peer(parent_pid_arg(argc, argv), bind_arg(argc, argv));
#endif
  if (mode == "--fanin-worker")
    return serve_fanin_worker(parent_pid_arg(argc, argv),
                              hidden_arg(argc, argv, "--cluster"),
                              std::stoi(hidden_arg(argc, argv, "--task")),
                              std::stoll(hidden_arg(argc, argv,
                                                    "--duration_ms")));
  if (mode == "--netsim-switch")
    return serve_netsim_switch(parent_pid_arg(argc, argv),
                               hidden_arg(argc, argv, "--name"),
                               std::stoi(hidden_arg(argc, argv, "--hosts")),
                               std::stoll(hidden_arg(argc, argv, "--delay_us")),
                               std::stod(hidden_arg(argc, argv, "--rate_mbit")));
  if (mode == "--shm-ring-server")
    return serve_shm_ring(parent_pid_arg(argc, argv),
                          hidden_arg(argc, argv, "--shm"),
                          std::stoull(hidden_arg(argc, argv, "--capacity")));
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
  return run(argc, argv);
}

} // namespace

} // namespace actorflow::bench

int main(int argc, char** argv) {
  using namespace actorflow::bench;
  actorflow::support::guarded_main(prog, [&] { return dispatch(argc, argv); });
}
