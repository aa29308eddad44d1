// actorflow-bench's simulated network (--netsim): every task in a network
// namespace of its own, the namespaces joined by a switch that gives each
// host's link a delay and a rate (link_model.hpp), and the remote figures
// measured across it.
//
// The switch is this program in the hidden `--netsim-switch` mode: it
// makes the namespaces and one TUN device in each (moved there, its file
// descriptor kept here), reads every IP packet a host sends, and writes it
// into the destination host's device when the model says it arrives. It
// is the user-space stand-in for a bridge with `tc netem delay D rate R`
// on every port, which this kernel may not offer (Firecracker's lacks
// sch_netem); whichever runs, the baselines (raw TCP, iperf3) cross the
// same links in the same run.
//
// The group runs the fetch_remote, step_remote, peers and scale groups
// again in a bench started inside host 0's namespace (--peer_host: the ps nodes and
// the baselines' servers in host 1's), and the MLP trainer with 1 ps and
// 2, 4 and 8 workers, each task on a host of its own.

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "actorflow/support/process.hpp"

#include "bench/common.hpp"
#include "bench/link_model.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

/// The simulated hosts' subnet: host i is 10.77.0.(i+1).
constexpr int max_hosts = 16;
/// Jumbo packets of up to 64 KB, as loopback's (and a NIC's segmentation
/// offload hands the stack): one packet per 64 KB keeps the switch's
/// per-packet work small enough for 10 Gbit/s on this host.
constexpr int link_mtu = 65000;
constexpr const char* switch_marker = "netsim switch ready";

std::string host_ip(int i) {
  return "10.77.0." + std::to_string(i + 1);
}

std::string netns_name(const std::string& name, int i) {
  return name + "h" + std::to_string(i);
}

std::string ip_binary() {
  return support::find_program("ip", "", "");
}

/// `ip ARGS...`, or std::runtime_error with what it said.
void ip_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ip_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto res = support::run_process(argv, 10s);
  if (res.timed_out || !res.status.success()) {
    std::string line;
    for (const auto& a : args)
      line += " " + a;
    throw std::runtime_error("netsim: ip" + line + ": "
                             + (res.timed_out ? std::string{"timed out"}
                                              : res.status.to_string())
                             + ": " + res.err);
  }
}

/// The namespaces of a switch named `name` (`hosts` of them) and their
/// devices: made by the constructor, removed by the destructor.
class sim_hosts {
public:
  sim_hosts(std::string name, int hosts) : name_(std::move(name)) {
    for (int i = 0; i < hosts; ++i) {
      auto ns = netns_name(name_, i);
      ip_command({"netns", "add", ns});
      made_.push_back(ns);
      auto dev = name_ + "t" + std::to_string(i);
      int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0)
        throw std::runtime_error("netsim: /dev/net/tun: "
                                 + std::string{std::strerror(errno)});
      fds_.push_back(fd);
      ifreq ifr{};
      ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
      std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
      if (::ioctl(fd, TUNSETIFF, &ifr) != 0)
        throw std::runtime_error("netsim: TUNSETIFF " + dev + ": "
                                 + std::strerror(errno));
      // The device goes to the host's namespace; its descriptor stays
      // here, the switch's end of the link.
      ip_command({"link", "set", "dev", dev, "netns", ns});
      ip_command({"-n", ns, "link", "set", "lo", "up"});
      ip_command({"-n", ns, "addr", "add", host_ip(i) + "/24", "dev", dev});
      ip_command({"-n", ns, "link", "set", "dev", dev, "mtu",
                  std::to_string(link_mtu), "up"});
    }
  }

  sim_hosts(const sim_hosts&) = delete;
  sim_hosts& operator=(const sim_hosts&) = delete;

  ~sim_hosts() {
    for (int fd : fds_)
      ::close(fd);
    for (const auto& ns : made_) {
      try {
        ip_command({"netns", "del", ns});
      } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
      }
    }
  }

  const std::vector<int>& fds() const noexcept {
    return fds_;
  }

private:
  std::string name_;
  std::vector<std::string> made_;
  std::vector<int> fds_;
};

/// A packet on its way: reaching the switch (`at_switch`), or its host.
struct in_flight {
  int64_t at;
  uint64_t seq;
  bool at_switch;
  int dst;
  std::vector<char> data;
};

struct later {
  bool operator()(const in_flight& a, const in_flight& b) const noexcept {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// The destination host of an IPv4 packet on the subnet, or -1.
int destination(const char* p, ssize_t n, int hosts) {
  if (n < 20 || (static_cast<unsigned char>(p[0]) >> 4) != 4)
    return -1;
  auto b = [&](int i) { return static_cast<unsigned char>(p[i]); };
  if (b(16) != 10 || b(17) != 77 || b(18) != 0)
    return -1;
  int host = b(19) - 1;
  return host >= 0 && host < hosts ? host : -1;
}

} // namespace

int serve_netsim_switch(pid_t parent, const std::string& name, int hosts,
                        int64_t delay_us, double rate_mbit) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  if (hosts < 2 || hosts > max_hosts || delay_us < 0 || !(rate_mbit > 0)) {
    std::cerr << "netsim switch: --hosts 2.." << max_hosts
              << ", --delay_us >= 0, --rate_mbit > 0\n";
    return 2;
  }
  // Timers to the microsecond: the default slack (50 us) would be half of
  // the 100 us link's delay.
  ::prctl(PR_SET_TIMERSLACK, 1UL);
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&stop, sig);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  int sfd = ::signalfd(-1, &stop, SFD_CLOEXEC);
  link_model links{static_cast<size_t>(hosts),
                   {.delay_ns = delay_us * 1000,
                    .bits_per_s = rate_mbit * 1e6,
                    .queue_bytes = uint64_t{4} << 20}};
  std::optional<sim_hosts> sim;
  try {
    sim.emplace(name, hosts);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(hosts); // the signal
  ::epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
  for (int i = 0; i < hosts; ++i) {
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, sim->fds()[i], &ev);
  }
  std::cout << switch_marker << std::endl;
  std::vector<in_flight> heap;
  std::vector<std::vector<char>> spare;
  uint64_t seq = 0, packets = 0, dropped = 0, foreign = 0;
  auto buffer = [&] {
    if (spare.empty())
      return std::vector<char>(link_mtu + 100);
    auto b = std::move(spare.back());
    spare.pop_back();
    b.resize(link_mtu + 100);
    return b;
  };
  auto push = [&](in_flight p) {
    heap.push_back(std::move(p));
    std::push_heap(heap.begin(), heap.end(), later{});
  };
  for (bool running = true; running;) {
    timespec wait{};
    timespec* timeout = nullptr;
    if (!heap.empty()) {
      auto left = std::max<int64_t>(heap.front().at - now_ns(), 0);
      wait.tv_sec = left / 1'000'000'000;
      wait.tv_nsec = left % 1'000'000'000;
      timeout = &wait;
    }
    epoll_event ready[max_hosts + 1];
    int n = ::epoll_pwait2(ep, ready, max_hosts + 1, timeout, nullptr);
    if (n < 0 && errno != EINTR)
      break;
    for (int k = 0; k < n; ++k) {
      auto src = static_cast<int>(ready[k].data.u32);
      if (src == hosts) {
        running = false;
        break;
      }
      // A burst at most, then the due packets: a busy sender does not
      // hold up the deliveries.
      for (int burst = 0; burst < 64; ++burst) {
        auto b = buffer();
        auto got = ::read(sim->fds()[src], b.data(), b.size());
        if (got <= 0) {
          spare.push_back(std::move(b));
          break;
        }
        int dst = destination(b.data(), got, hosts);
        if (dst < 0 || dst == src) {
          ++foreign; // IPv6 neighbour chatter and the like
          spare.push_back(std::move(b));
          continue;
        }
        ++packets;
        auto at = links.send(now_ns(), src, static_cast<uint64_t>(got));
        if (!at) {
          ++dropped;
          spare.push_back(std::move(b));
          continue;
        }
        b.resize(static_cast<size_t>(got));
        push({*at, seq++, true, dst, std::move(b)});
      }
    }
    for (auto now = now_ns(); !heap.empty() && heap.front().at <= now;) {
      std::pop_heap(heap.begin(), heap.end(), later{});
      auto p = std::move(heap.back());
      heap.pop_back();
      if (p.at_switch) {
        auto at = links.forward(p.at, p.dst, p.data.size());
        if (at) {
          push({*at, seq++, false, p.dst, std::move(p.data)});
          continue;
        }
        ++dropped;
      } else if (::write(sim->fds()[p.dst], p.data.data(), p.data.size())
                 < 0) {
        ++dropped;
      }
      spare.push_back(std::move(p.data));
    }
  }
  std::cerr << "netsim switch: " << packets << " packets, " << dropped
            << " dropped, " << foreign << " not for a host\n";
  ::close(ep);
  ::close(sfd);
  return 0;
}

// -- the group ----------------------------------------------------------------

namespace {

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
std::vector<std::string> inner_figures() {
  std::vector<std::string> out;
  for (const auto& g :
       {fetch_remote_group(), step_remote_group(), peers_group(),
        scale_group()})
    out.insert(out.end(), g.figures.begin(), g.figures.end());
  return out;
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
    : name_("afsim" + std::to_string(::getpid())),
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
    return {ip_binary(), "netns", "exec", netns(host)};
  }

  /// Host `host`'s device (its one link).
  std::string device(int host) const {
    return name_ + "t" + std::to_string(host);
  }

private:
  std::string name_;
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

/// The fetch_remote and step_remote figures of `only` measured by this
/// program started again in host 0 with host 1 as its peer; the wanted ones
/// added, renamed for the profile.
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
/// (and a ps for both asynchronously; actorflow's --sync keeps its ps).
figure against_torch(context& ctx, const profile& p, const sim_switch& sw,
                     const std::string& train, const std::string& mode) {
  figure f{.name = prefixed(p, torch_figure(mode)), .unit = "examples/s"};
  auto why = train.empty() ? "Fashion-MNIST not found in " + ctx.opts.data_dir
                           : torch_missing(ctx);
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
  // What --only selects: per profile the inner figures and the trainings.
  std::map<std::string, std::vector<std::string>> inner;
  std::map<std::string, std::vector<int>> trainings;
  std::set<int> any_training;
  std::map<std::string, bool> torch_runs;
  for (const auto& p : profiles) {
    for (const auto& f : inner_figures())
      if (wanted(ctx, p, f)
          || (f == "fetch_remote_64MiB"
              && wanted(ctx, p, "fetch_remote_64MiB_of_link")))
        inner[p.name].push_back(f);
    for (int w : train_workers)
      if (wanted(ctx, p, train_figure(w))) {
        trainings[p.name].push_back(w);
        any_training.insert(w);
      }
    for (const auto& mode : torch_modes)
      if (wanted(ctx, p, torch_figure(mode)))
        torch_runs[p.name] = true;
  }
  std::string train;
  std::map<int, std::pair<double, std::string>> loopback;
  bool any_torch = !torch_runs.empty();
  if ((!any_training.empty() || any_torch)
      && have_fashion_mnist(ctx.opts.data_dir)) {
    train = find_binary("actorflow-train", ctx.opts.train, "--train");
    // The baseline: the same job on loopback (without the ring, as
    // across the links), once for both profiles.
    for (int w : any_training) {
      std::string detail;
      auto rate = trainer_rate(ctx, train, w, 1, {}, detail);
      loopback[w] = {rate, detail};
    }
  }
  for (const auto& p : profiles) {
    const auto& figures = inner[p.name];
    const auto& runs = trainings[p.name];
    bool torch = torch_runs[p.name];
    if (figures.empty() && runs.empty() && !torch)
      continue;
    // Hosts: 0 the inner bench, 1 the ps, 2... the workers.
    int workers = std::max(runs.empty() ? 0 : runs.back(), torch ? 2 : 0);
    sim_switch sw{ctx, p, 2 + workers};
    if (!figures.empty())
      run_inner(ctx, p, sw, figures);
    for (int w : runs) {
      auto name = prefixed(p, train_figure(w));
      if (train.empty()) {
        ctx.out->add(figure{.name = name,
                            .unit = "examples/s",
                            .skipped = "Fashion-MNIST not found in "
                                       + ctx.opts.data_dir});
        continue;
      }
      std::string detail;
      figure f{.name = name, .unit = "examples/s",
               .baseline = "the same on loopback"};
      try {
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
    for (const auto& mode : torch_modes)
      if (wanted(ctx, p, torch_figure(mode)))
        ctx.out->add(against_torch(ctx, p, sw, train, mode));
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
