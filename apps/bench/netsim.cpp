// actorflow-bench's simulated network (--netsim): every task in a network
// namespace of its own, the namespaces joined by a switch that gives each
// host's link a delay and a rate (link_model.hpp), and the remote figures
// measured across it.
//
// The switch is this program in the hidden `--netsim-switch` mode
// (netsim_switch.cpp); the baselines (raw TCP, iperf3, the CAF echo, the
// gRPC peer) cross the same links in the same run.
//
// The group runs the fetch_remote, step_remote, peers and scale groups
// again in a bench started inside host 0's namespace (--peer_host: the ps
// nodes and the baselines' servers in host 1's), the MLP trainer with 1 ps
// and 2, 4 and 8 workers, and the torch group's job on both sides, each
// task on a host of its own.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "bench/common.hpp"
#include "bench/netsim.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

/// A simulated network: each link's one-way delay and rate. The issue's
/// two: a rack (100 us, 10 Gbit/s) and a slower, farther one (1 ms,
/// 1 Gbit/s).
struct profile {
  const char* name;
  int64_t delay_us;
  double rate_mbit;
};

const std::vector<profile> profiles = {{"10g", 100, 10000}, {"1g", 1000, 1000}};

const std::vector<int> train_workers = {2, 4, 8};

std::string prefixed(const profile& p, const std::string& figure) {
  return "netsim_" + std::string{p.name} + "_" + figure;
}

/// The figures measured again across the simulated links by a bench
/// inside host 0: fetch_remote's, step_remote's, peers' (the gRPC peer's
/// server on host 1) and scale's (its fan-in workers all on host 0,
/// sharing its link as they share the ps's). From the groups themselves:
/// registry() is not built yet when netsim_group() is called.
const std::vector<std::string>& inner_figures() {
  static const auto all = [] {
    std::vector<std::string> out;
    for (const auto& g :
         {fetch_remote_group(), step_remote_group(), peers_group(),
          scale_group()})
      out.insert(out.end(), g.figures.begin(), g.figures.end());
    return out;
  }();
  return all;
}

std::string train_figure(int workers) {
  return "train_examples_per_s_" + std::to_string(workers) + "workers";
}

/// The training job against PyTorch's across the links (torch.cpp's
/// figures): asynchronous and synchronous, 2 workers.
const std::vector<std::string> torch_modes = {"async", "sync"};

std::string torch_figure(const std::string& mode) {
  return "torch_" + mode + "_examples_per_s";
}

std::vector<std::string> netsim_figures() {
  std::vector<std::string> out;
  for (const auto& p : profiles) {
    for (const auto& f : inner_figures())
      out.push_back(prefixed(p, f));
    out.push_back(prefixed(p, "fetch_remote_64MiB_of_link"));
    for (int w : train_workers)
      out.push_back(prefixed(p, train_figure(w)));
    for (const auto& mode : torch_modes)
      out.push_back(prefixed(p, torch_figure(mode)));
  }
  return out;
}

/// Switches of bench runs that died without cleaning up leave namespaces
/// named after their pid: removed when that process is gone.
void remove_stale_namespaces() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator{"/run/netns", ec}) {
    auto name = e.path().filename().string();
    if (name.rfind("afsim", 0) != 0)
      continue;
    auto pid = std::atol(name.c_str() + 5);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      try {
        ip_command({"netns", "del", name});
      } catch (const std::exception& e) {
        note(e.what());
      }
  }
}

/// Why this host cannot simulate a network ("" if it can).
std::string cannot_simulate() {
  if (::geteuid() != 0)
    return "needs root (network namespaces and TUN devices)";
  if (::access("/dev/net/tun", R_OK | W_OK) != 0)
    return "no /dev/net/tun";
  try {
    ip_binary();
  } catch (const std::exception&) {
    return "no ip (Debian's iproute2)";
  }
  return "";
}

/// The switch process of one profile, its hosts made; stopped (and its
/// namespaces removed) by the destructor.
class sim_switch {
public:
  sim_switch(const context& ctx, const profile& p, int hosts)
    : name_("afsim" + std::to_string(::getpid())), ip_(ip_binary()),
      proc_({ctx.self, "--netsim-switch", "--parent-pid",
             std::to_string(::getpid()), "--name", name_, "--hosts",
             std::to_string(hosts), "--delay_us", std::to_string(p.delay_us),
             "--rate_mbit", fixed(p.rate_mbit, 0)}) {
    if (!proc_.wait_for_line(switch_marker, 30s))
      throw std::runtime_error("the netsim switch did not start: "
                               + proc_.err());
  }

  ~sim_switch() {
    proc_.stop(10s);
  }

  std::string netns(int host) const {
    return netns_name(name_, host);
  }

  std::vector<std::string> launcher(int host) const {
    return {ip_, "netns", "exec", netns(host)};
  }

  /// Host `host`'s device (its one link).
  std::string device(int host) const {
    return device_name(name_, host);
  }

private:
  std::string name_;
  std::string ip_;
  support::child_process proc_;
};

/// The channel's ring is shared memory between processes of one host: the
/// simulated hosts share this machine's, so every process of the group
/// goes without it (set for the group's run, restored after).
class no_ring {
public:
  no_ring() {
    if (const char* v = std::getenv(var))
      old_ = v;
    ::setenv(var, "0", 1);
  }

  ~no_ring() {
    if (old_)
      ::setenv(var, old_->c_str(), 1);
    else
      ::unsetenv(var);
  }

private:
  static constexpr const char* var = "ACTORFLOW_CHANNEL_RING_MIB";
  std::optional<std::string> old_;
};

/// Whether --only selects the figure `name` of profile `p`.
bool wanted(const context& ctx, const profile& p, const std::string& name) {
  return ctx.wanted("netsim", prefixed(p, name));
}

/// The inner figures `figures` (inner_figures()) measured by this program
/// started again in host 0 with host 1 as its peer; the wanted ones added,
/// renamed for the profile, and the 64 MiB fetch against the links' rate.
void run_inner(context& ctx, const profile& p, const sim_switch& sw,
               const std::vector<std::string>& figures) {
  auto argv = sw.launcher(0);
  std::string only;
  for (const auto& f : figures)
    only += (only.empty() ? "" : ",") + f;
  for (const auto& arg : {ctx.self, std::string{"--json-only"},
                          std::string{"--only"}, only,
                          std::string{"--node"}, ctx.node,
                          std::string{"--peer_host"},
                          sw.netns(1) + "," + host_ip(1) + "," + host_ip(0)})
    argv.push_back(arg);
  if (ctx.opts.quick)
    argv.push_back("--quick");
  note("measuring fetch_remote, step_remote, peers and scale across the "
       + std::string{p.name}
       + " links (" + std::to_string(p.delay_us) + " us, "
       + fixed(p.rate_mbit, 0) + " Mbit/s)");
  auto res = support::run_process(argv, ctx.opts.quick ? 300s : 900s);
  auto names = inner_figures();
  std::optional<double> fetch_64;
  std::istringstream lines{res.out};
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      continue; // the table after the JSON lines
    }
    auto f = figure_from_json(j);
    if (f.name == "fetch_remote_64MiB")
      fetch_64 = f.value;
    if (std::find(names.begin(), names.end(), f.name) == names.end()
        || !wanted(ctx, p, f.name))
      continue;
    if (std::find(names.begin(), names.end(), f.baseline) != names.end())
      f.baseline = prefixed(p, f.baseline);
    f.name = prefixed(p, f.name);
    f.note = "across the simulated " + std::string{p.name} + " links; "
             + f.note;
    ctx.out->add(f);
  }
  if (res.timed_out || !res.status.success())
    throw std::runtime_error("the bench in host 0 "
                             + (res.timed_out ? std::string{"timed out"}
                                              : res.status.to_string())
                             + ": " + res.err.substr(0, 800));
  if (!wanted(ctx, p, "fetch_remote_64MiB_of_link"))
    return;
  figure link{.name = prefixed(p, "fetch_remote_64MiB_of_link"),
              .value = fetch_64,
              .unit = "MB/s",
              .baseline = "link rate",
              .baseline_value = p.rate_mbit / 8,
              .path = "tcp"};
  link.note = "fetch_remote_64MiB across the " + std::string{p.name}
              + " links against the links' rate (" + fixed(p.rate_mbit, 0)
              + " Mbit/s)";
  ctx.out->add(link);
}

/// examples/s of the MLP trained by 1 ps (host 1) and `workers` workers
/// (hosts 2...), each task an actorflow-train process on a host of its
/// own, with more trainer `flags` (--sync).
double train_across(context& ctx, const std::string& train,
                    const sim_switch& sw, int workers,
                    const std::vector<std::string>& flags,
                    std::string& detail) {
  // Global steps: every worker's asynchronously, every update with --sync.
  bool sync = std::find(flags.begin(), flags.end(), "--sync") != flags.end();
  int64_t steps = (ctx.opts.quick ? 250 : 2000) * (sync ? 1 : workers);
  int64_t log_every = ctx.opts.quick ? 50 : 100;
  const std::string port = "2222";
  std::string worker_hosts;
  for (int w = 0; w < workers; ++w)
    worker_hosts += (w == 0 ? "" : ",") + host_ip(2 + w) + ":" + port;
  auto task = [&](const std::string& job, int index, int host) {
    auto argv = sw.launcher(host);
    for (const auto& arg :
         {train, std::string{"--ps_hosts"}, host_ip(1) + ":" + port,
          std::string{"--worker_hosts"}, worker_hosts,
          std::string{"--job_name"}, job, std::string{"--task_index"},
          std::to_string(index), std::string{"--parent-pid"},
          std::to_string(::getpid()), std::string{"--model"},
          std::string{"mlp"}, std::string{"--train_steps"},
          std::to_string(steps), std::string{"--log_every"},
          std::to_string(log_every), std::string{"--data_dir"},
          ctx.opts.data_dir})
      argv.push_back(arg);
    argv.insert(argv.end(), flags.begin(), flags.end());
    return std::make_unique<support::child_process>(argv);
  };
  note("training across the simulated links: 1 ps and "
       + std::to_string(workers) + " workers, " + std::to_string(steps)
       + " global steps");
  auto ps = task("ps", 0, 1);
  std::vector<std::unique_ptr<support::child_process>> procs;
  for (int w = 0; w < workers; ++w)
    procs.push_back(task("worker", w, 2 + w));
  auto deadline = std::chrono::steady_clock::now()
                  + (ctx.opts.quick ? 120s : 400s);
  std::string out;
  for (int w = 0; w < workers; ++w) {
    auto left = std::chrono::duration_cast<milliseconds>(
      deadline - std::chrono::steady_clock::now());
    auto status = procs[w]->wait(std::max(left, milliseconds{0}));
    if (!status || !status->success()) {
      auto err = procs[w]->err();
      if (err.size() > 600)
        err = "..." + err.substr(err.size() - 600);
      throw std::runtime_error(
        "worker " + std::to_string(w) + " of "
        + std::to_string(workers)
        + (status ? " ended with " + status->to_string()
                  : std::string{" did not finish in time"})
        + ": " + err);
    }
    out += procs[w]->out();
  }
  return trainer_examples_per_s(out, workers, detail);
}

/// actorflow-train against the PyTorch peer, 2 workers each on a host
/// (and a ps for both asynchronously; actorflow's --sync keeps its ps);
/// skipped for `why` unless it is empty.
figure against_torch(context& ctx, const profile& p, const sim_switch& sw,
                     const std::string& train, const std::string& mode,
                     const std::string& why) {
  figure f{.name = prefixed(p, torch_figure(mode)), .unit = "examples/s"};
  if (!why.empty()) {
    f.skipped = why;
    return f;
  }
  f.baseline = mode == "async" ? "pytorch_rpc_ps" : "pytorch_ddp_gloo";
  try {
    std::string ours, theirs;
    bool sync = mode == "sync";
    f.value = train_across(ctx, train, sw, 2,
                           sync ? std::vector<std::string>{"--sync"}
                                : std::vector<std::string>{},
                           ours);
    // The ps on host 1 and the workers on hosts 2 and 3, as ours.
    std::string hosts;
    for (int h = sync ? 2 : 1; h <= 3; ++h)
      hosts += (hosts.empty() ? "" : ";") + sw.netns(h) + "," + host_ip(h)
               + "," + sw.device(h);
    f.baseline_value = torch_peer_rate(ctx, mode, ctx.opts.quick ? 200 : 2000,
                                       ctx.opts.quick ? 50 : 100, hosts,
                                       theirs);
    f.note = "mlp, adam, batch 100, 2 workers"
             + std::string{sync ? " (synchronous)" : " and a ps"}
             + ", each process a host of the " + p.name
             + " network; actorflow-train: " + ours
             + "; PyTorch (Eigen's sgemm): " + theirs;
  } catch (const std::exception& e) {
    f.error = e.what();
  }
  return f;
}

void run_netsim(context& ctx) {
  auto why = cannot_simulate();
  if (!why.empty()) {
    skip_figures(ctx, "netsim", netsim_figures(), why);
    return;
  }
  remove_stale_namespaces();
  no_ring ring_off;
  // What --only selects of each profile.
  struct selection {
    std::vector<std::string> inner;
    std::vector<int> trainings;
    std::vector<std::string> torch_modes;
  };
  std::map<std::string, selection> selected;
  std::set<int> any_training;
  bool any_torch = false;
  for (const auto& p : profiles) {
    auto& s = selected[p.name];
    for (const auto& f : inner_figures())
      if (wanted(ctx, p, f)
          || (f == "fetch_remote_64MiB"
              && wanted(ctx, p, "fetch_remote_64MiB_of_link")))
        s.inner.push_back(f);
    for (int w : train_workers)
      if (wanted(ctx, p, train_figure(w))) {
        s.trainings.push_back(w);
        any_training.insert(w);
      }
    for (const auto& mode : torch_modes)
      if (wanted(ctx, p, torch_figure(mode)))
        s.torch_modes.push_back(mode);
    any_torch = any_torch || !s.torch_modes.empty();
  }
  // The trainer, its loopback baselines (without the ring, as across the
  // links; once for both profiles) and PyTorch, each checked once.
  std::string no_training;
  std::string train;
  std::map<int, std::pair<double, std::string>> loopback;
  if (!have_fashion_mnist(ctx.opts.data_dir)) {
    no_training = "Fashion-MNIST not found in " + ctx.opts.data_dir;
  } else if (!any_training.empty() || any_torch) {
    train = find_binary("actorflow-train", ctx.opts.train, "--train");
    for (int w : any_training) {
      std::string detail;
      auto rate = trainer_rate(ctx, train, w, 1, {}, detail);
      loopback[w] = {rate, detail};
    }
  }
  auto no_torch = !no_training.empty() ? no_training
                  : any_torch          ? torch_missing(ctx)
                                       : std::string{};
  for (const auto& p : profiles) {
    const auto& s = selected[p.name];
    if (s.inner.empty() && s.trainings.empty() && s.torch_modes.empty())
      continue;
    // Hosts: 0 the inner bench, 1 the ps, 2... the workers.
    int workers = std::max(s.trainings.empty() ? 0 : s.trainings.back(),
                           s.torch_modes.empty() ? 0 : 2);
    sim_switch sw{ctx, p, 2 + workers};
    if (!s.inner.empty())
      run_inner(ctx, p, sw, s.inner);
    for (int w : s.trainings) {
      figure f{.name = prefixed(p, train_figure(w)), .unit = "examples/s"};
      if (!no_training.empty()) {
        f.skipped = no_training;
        ctx.out->add(f);
        continue;
      }
      f.baseline = "the same on loopback";
      try {
        std::string detail;
        f.value = train_across(ctx, train, sw, w, {}, detail);
        f.baseline_value = loopback[w].first;
        f.note = "mlp, adam, batch 100, asynchronous, 1 ps + "
                 + std::to_string(w) + " workers, each a host of the "
                 + std::string{p.name} + " network: " + detail
                 + "; on loopback (actorflow-train --local, no ring): "
                 + loopback[w].second;
      } catch (const std::exception& e) {
        f.error = e.what();
      }
      ctx.out->add(f);
    }
    for (const auto& mode : s.torch_modes)
      ctx.out->add(against_torch(ctx, p, sw, train, mode, no_torch));
  }
}

} // namespace

figure_group netsim_group() {
  std::map<std::string, target> targets;
  targets.emplace("netsim_1g_fetch_remote_64MiB_of_link", at_least(0.9));
  targets.emplace("netsim_1g_step_remote_small", at_most(1.2));
  return {.name = "netsim",
          .figures = netsim_figures(),
          .targets = std::move(targets),
          .separable = true,
          .explicit_only = true,
          .needs_node = true,
          .run = run_netsim};
}

} // namespace actorflow::bench
