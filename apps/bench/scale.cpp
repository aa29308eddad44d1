// actorflow-bench's scale group: one ps process serving many worker
// processes at once (fan-in; each worker is this program started again in
// the hidden --fanin-worker mode), and steps that update many variables
// over four ps processes (graph size).

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "bench/common.hpp"

namespace actorflow::bench {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

/// The worker counts of the fan-in figures and the variable counts of the
/// graph-size figures.
const std::vector<int> fanin_workers = {1, 2, 4, 8, 16};
const std::vector<int> graph_variables = {1, 10, 100, 1000};

/// What a fan-in worker prints once its session is warm, and then its
/// count.
constexpr const char* fanin_ready_marker = "fanin-worker ready";
constexpr const char* fanin_done_marker = "fanin-worker steps ";

} // namespace

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

namespace {

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
  support::local_cluster nodes{node, {{"ps", 1}, {"worker", n}},
                               quiet_nodes(std::move(workers_left))};
  support::spawn_options quiet;
  quiet.capture_stderr = true;
  std::vector<std::unique_ptr<support::child_process>> workers;
  for (int i = 0; i < n; ++i)
    workers.push_back(std::make_unique<support::child_process>(
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

void run_scale(context& ctx) {
  const auto& node = ctx.node;
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
  support::local_cluster nodes{node, {{"ps", 4}, {"worker", 1}},
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

} // namespace

figure_group scale_group() {
  figure_group g{.name = "scale", .figures = {}, .needs_node = true,
                 .run = run_scale};
  for (int n : fanin_workers)
    g.figures.push_back("scale_fanin_" + std::to_string(n)
                        + (n == 1 ? "worker" : "workers"));
  for (int n : graph_variables)
    g.figures.push_back("scale_vars_" + std::to_string(n));
  return g;
}

} // namespace actorflow::bench
