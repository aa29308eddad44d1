#pragma once

// actorflow-bench's figure groups and the registry that runs them.
//
// Each group file describes its groups with a figure_group (the figures
// it prints, their targets, what it needs, the function that measures
// them), returned by an entry function declared below; registry()
// (actorflow-bench.cpp) is the one table naming them, in the order they
// run. The files (a group's own helpers stay in its file):
//
//   local.cpp     step_local, matmul, conv2d (in-process sessions)
//   fetch.cpp     fetch_remote, peers (the fetch sweeps against raw TCP,
//                 shared memory and gRPC)
//   steps.cpp     step_remote, queue (small steps and batches on the ps)
//   overhead.cpp  monitoring, tls (a second cluster against a plain one)
//   scale.cpp     scale (fan-in processes, graph size)
//   system.cpp    rss, train (whole processes)
//   python.cpp    python (the Python front end against C++)
//   torch.cpp     torch (the training job against PyTorch's)
//   netsim.cpp    netsim (the remote figures and training across a
//                 simulated network of hosts; its switch's hidden mode)
//
// Pieces several groups use (the clusters, the baselines' servers, the
// path probe) are in common.hpp; the report's output in
// actorflow-bench.cpp.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure.hpp"

namespace actorflow::bench {

/// The bench's command line.
struct options {
  bool quick = false;
  bool json_only = false;
  std::vector<std::string> only;
  /// Groups not run (--skip; a figure name stands for its group).
  std::vector<std::string> skip;
  std::string node;
  std::string train;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  /// Debian's interpreter, where python3-numpy is.
  std::string python = "/usr/bin/python3";
  /// --peer_host NETNS,IP,SELF_IP (set by the netsim group for the bench
  /// it starts in a simulated host): the far end of the remote figures in
  /// that namespace at IP, this process at SELF_IP.
  std::string peer_host;
};

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

  /// The figure's JSON line.
  nlohmann::ordered_json to_json() const;
};

/// A figure read back from its JSON line (to_json), as the netsim group
/// reads the bench it starts in a simulated host. Throws
/// nlohmann::json::exception for a line that is not one.
figure figure_from_json(const nlohmann::json& j);

/// One of the targets (for the lead; reported in the table, never
/// asserted here).
struct target {
  std::string text;
  std::function<bool(const figure&)> met;
  /// Whether `met` reads the ratio (a figure without one is not judged),
  /// or the value alone.
  bool on_ratio = true;
};

/// A target on a figure's ratio: at least / at most `x`.
target at_least(double x);
target at_most(double x);

/// The figures of a run: each printed as its JSON line when added, a
/// readable table at the end.
class report {
public:
  explicit report(bool json_only) : json_only_(json_only) {
  }

  /// Prints the figure's JSON line at once (a long run shows progress, and
  /// a run cut short keeps what it measured).
  void add(figure f);

  bool failed() const noexcept {
    return failed_;
  }

  const figure* find(const std::string& name) const;

  void print_table() const;

private:
  bool json_only_;
  bool failed_ = false;
  std::vector<figure> figures_;
};

class remote_cluster;
class raw_tcp_baseline;

/// What a group runs with.
struct context {
  options opts = {};
  std::string self = {};
  /// The actorflow-node launcher, found before anything is measured when
  /// a selected group needs it (figure_group::needs_node).
  std::string node = {};
  report* out = nullptr;
  /// The cluster and raw TCP pair that the groups marked shares_cluster
  /// use: started by the first of them to run (start_shared), dropped
  /// before the first other group after them.
  std::shared_ptr<remote_cluster> cluster = {};
  std::shared_ptr<raw_tcp_baseline> tcp = {};

  /// True if --only selects `name` (a figure) of `group`.
  bool wanted(const std::string& group, const std::string& name = "") const;

  seconds_d budget(double full, double quick) const {
    return seconds_d{opts.quick ? quick : full};
  }
};

/// A group of figures measured together.
struct figure_group {
  std::string name = {};
  /// Every figure it may print (--only accepts each; a group that fails
  /// as a whole prints a null line for each one selected).
  std::vector<std::string> figures = {};
  /// More names --only accepts for the whole group.
  std::vector<std::string> aliases = {};
  /// The targets of its figures.
  std::map<std::string, target> targets = {};
  /// Whether --only NAME runs that figure alone (the fetch sizes), not the
  /// whole group.
  bool separable = false;
  /// Whether it runs only when --only names it (or one of its figures):
  /// not in a run of every group.
  bool explicit_only = false;
  /// Whether it needs actorflow-node.
  bool needs_node = false;
  /// Whether it runs on context::cluster and context::tcp.
  bool shares_cluster = false;
  /// Measures the selected figures and adds them to ctx.out.
  void (*run)(context& ctx) = nullptr;
  /// Checks, before anything is measured, what the group would otherwise
  /// find missing halfway through (throws usage_error); may be null.
  void (*check)(const context& ctx) = nullptr;
};

/// Every group, in the order they run.
const std::vector<figure_group>& registry();

/// The group of `name` (nullptr: none).
const figure_group* find_group(const std::string& name);

/// Figure names and aliases -> their group, for --only.
const std::map<std::string, std::string>& figure_groups();

// -- the groups' entry functions ----------------------------------------------

figure_group step_local_group();  // local.cpp
figure_group matmul_group();
figure_group conv2d_group();
figure_group fetch_remote_group(); // fetch.cpp
figure_group peers_group();
figure_group step_remote_group(); // steps.cpp
figure_group queue_group();
figure_group monitoring_group(); // overhead.cpp
figure_group tls_group();
figure_group scale_group(); // scale.cpp
figure_group rss_group();   // system.cpp
figure_group train_group();
figure_group replication_group(); // replication.cpp
figure_group python_group();      // python.cpp
figure_group torch_group();       // torch.cpp
figure_group netsim_group();      // netsim.cpp

// -- what the train, python and torch groups share (system.cpp) ---------------

/// Whether `dir` holds Fashion-MNIST's four files.
bool have_fashion_mnist(const std::string& dir);

/// Aggregate examples/s of a trainer's output ("worker N: step ...
/// examples/s X" lines): per worker the median of its windows after the
/// first (start-up), summed; `detail` gets each worker's. Throws
/// std::runtime_error unless `workers` workers printed such lines.
double trainer_examples_per_s(const std::string& out, int workers,
                              std::string& detail);

/// The examples/s of one `actorflow-train --local` run of the MLP with
/// `workers` workers, `ps` ps tasks and more trainer `flags` (e.g.
/// --replicate_variables, --sync). Blocks; throws if the run fails.
double trainer_rate(context& ctx, const std::string& train, int workers,
                    int ps, const std::vector<std::string>& flags,
                    std::string& detail);

/// Why the PyTorch peer cannot run here ("" if it can; torch.cpp).
std::string torch_missing(const context& ctx);

/// Total examples/s of the PyTorch peer (torch_peer.py, Eigen's sgemm
/// preloaded) training the MLP with 2 workers, `mode` "async" (an rpc ps)
/// or "sync" (DDP), `steps` per worker, each process on a host of `hosts`
/// ("NETNS,IP,DEVICE;...", the ps first; "" for loopback); `detail` gets
/// each worker's. Blocks; throws std::runtime_error if it fails or is
/// missing.
double torch_peer_rate(const context& ctx, const std::string& mode,
                       int64_t steps, int64_t log_every,
                       const std::string& hosts, std::string& detail);

/// Prints each figure of `names` that --only selects in `group` as
/// skipped for `why` (what the group needs is missing).
void skip_figures(context& ctx, const std::string& group,
                  const std::vector<std::string>& names,
                  const std::string& why);

/// A file of the bench next to this program, else in share/actorflow/bench
/// of its prefix ("" if neither): the Python groups' scripts.
std::string bench_file(const std::string& name);

// -- what main needs of the groups --------------------------------------------

/// The hidden `--fanin-worker` mode (scale.cpp).
int serve_fanin_worker(pid_t parent, const std::string& spec_json, int task,
                       int64_t duration_ms);

/// The hidden `--netsim-switch` mode (netsim.cpp): makes `hosts` network
/// namespaces NAMEh0.. (host i at 10.77.0.(i+1)), joined by links of
/// `delay_us` one way and `rate_mbit` each (link_model.hpp); prints "netsim
/// switch ready" once they are up, forwards packets until SIGTERM (or
/// `parent`'s death), then removes them. Returns the exit status.
int serve_netsim_switch(pid_t parent, const std::string& name, int hosts,
                        int64_t delay_us, double rate_mbit);

/// The trainer launcher the train group is waiting for (0: none).
/// `actorflow-train --local` takes no --parent-pid, so a SIGINT/SIGTERM to
/// the bench passes SIGTERM on to it (actorflow-bench.cpp).
extern std::atomic<pid_t> trainer_pid;

} // namespace actorflow::bench
