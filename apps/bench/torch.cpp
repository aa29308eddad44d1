// actorflow-bench's torch group (issue 35 §1): the training job a user
// would otherwise run in PyTorch, done both ways in the same run as
// actorflow-train does it. Asynchronous: actorflow-train --local 2
// against a torch.distributed.rpc parameter server (1 ps applying Adam,
// 2 workers); synchronous: actorflow-train --local 2 --sync against
// DistributedDataParallel on gloo (2 workers). Same MLP (784-256-128-10),
// data (Fashion-MNIST), optimizer (Adam 0.001), batch (100) and steps.
//
// The PyTorch side is bench/torch_peer.py (installed as
// actorflow-bench-torch), run by Debian's python3 with Debian's
// python3-torch, twice: stock, and with libactorflow-eigen-sgemm.so
// preloaded (BLAS's sgemm_ over Eigen, the GEMM actorflow multiplies
// with; Debian's PyTorch calls the reference BLAS). Each figure's
// baseline is the faster of the two; the note gives both.

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;

/// What the PyTorch side needs; `missing` says why it cannot run.
struct torch_side {
  std::string python;
  std::string script;
  std::string sgemm;
  std::string missing;
};

/// Whether `python` can import torch: asked once per interpreter (an import
/// takes seconds; the torch and netsim groups ask for every run).
bool imports_torch(const std::string& python) {
  static std::map<std::string, bool> known;
  auto [at, fresh] = known.try_emplace(python, false);
  if (fresh)
    at->second = support::run_process({python, "-c", "import torch"}, 60s)
                   .status.success();
  return at->second;
}

torch_side find_torch(const context& ctx) {
  torch_side t;
  t.python = ctx.opts.python;
  t.script = bench_file("actorflow-bench-torch");
  t.sgemm = bench_file("libactorflow-eigen-sgemm.so");
  if (::access(t.python.c_str(), X_OK) != 0)
    t.missing = t.python + " is not an executable file (--python)";
  else if (t.script.empty() || t.sgemm.empty())
    t.missing = "actorflow-bench-torch or libactorflow-eigen-sgemm.so not "
                "found next to this program nor in share/actorflow/bench";
  else if (!imports_torch(t.python))
    t.missing = t.python + " cannot import torch (Debian's python3-torch; "
                           "scripts/setup.sh installs it)";
  return t;
}

/// One run of the PyTorch peer: its JSON line.
struct peer_result {
  double total = 0;
  std::vector<double> per_worker;
  std::optional<double> seconds_to_target;
  double best = 0;
};

peer_result run_peer(const context& ctx, const torch_side& t,
                     const std::string& mode, bool eigen_gemm, int64_t steps,
                     int64_t log_every, int64_t eval_every, double stop_at,
                     std::chrono::seconds limit,
                     const std::string& hosts = "") {
  support::spawn_options o;
  if (eigen_gemm)
    o.env.push_back("LD_PRELOAD=" + t.sgemm);
  auto what = "actorflow-bench-torch " + mode
              + (eigen_gemm ? " (Eigen sgemm)" : " (stock BLAS)");
  note("running " + what + " --steps " + std::to_string(steps));
  auto done = support::run_process(
    {t.python, t.script, mode, "--workers", "2", "--steps",
     std::to_string(steps), "--log_every", std::to_string(log_every),
     "--eval_every", std::to_string(eval_every), "--stop_at",
     std::to_string(stop_at), "--data_dir", ctx.opts.data_dir, "--timeout",
     std::to_string(limit.count()), "--hosts", hosts},
    limit + 30s, o);
  if (done.timed_out || !done.status.success()) {
    auto err = done.err;
    if (err.size() > 600)
      err = "..." + err.substr(err.size() - 600);
    throw std::runtime_error(what
                             + (done.timed_out
                                  ? std::string{" did not finish in time"}
                                  : " ended with " + done.status.to_string())
                             + ": " + err);
  }
  auto at = done.out.rfind('{');
  if (at == std::string::npos)
    throw std::runtime_error(what + " printed no result line: "
                             + done.err.substr(0, 600));
  auto j = nlohmann::json::parse(done.out.substr(at));
  peer_result r;
  r.total = j.at("examples_per_s").get<double>();
  r.per_worker = j.at("per_worker").get<std::vector<double>>();
  if (!j.at("seconds_to_target").is_null())
    r.seconds_to_target = j.at("seconds_to_target").get<double>();
  if (!j.at("best_accuracy").is_null())
    r.best = j.at("best_accuracy").get<double>();
  return r;
}

std::string per_worker(const std::vector<double>& xs) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : " + ") + fixed(x, 0);
  return out;
}

/// actorflow-train --local 2 --model mlp scoring every `eval_every` chief
/// steps until the chief's test accuracy reaches `target` (then stopped),
/// its steps end, or `limit` passes: the chief's seconds to it (since its
/// first step, scoring included), its best score, and whether the limit
/// ended it.
std::tuple<std::optional<double>, double, bool>
actorflow_to_accuracy(context& ctx, const std::string& train, bool sync,
                      double target, int64_t eval_every,
                      std::chrono::seconds limit) {
  // 20000 steps of each worker, as the peer's: global steps are every
  // worker's asynchronously, updates synchronously.
  std::vector<std::string> argv{train,           "--local",
                                "2",             "--model",
                                "mlp",           "--train_steps",
                                sync ? "20000" : "40000",
                                "--eval_every",  std::to_string(eval_every),
                                "--log_every",   "1000",
                                "--data_dir",    ctx.opts.data_dir};
  if (sync)
    argv.push_back("--sync");
  note(std::string{"running actorflow-train --local 2 --model mlp"}
       + (sync ? " --sync" : "") + " until test accuracy "
       + fixed(target, 2));
  support::spawn_options o;
  o.capture_stderr = true;
  support::child_process child{argv, o};
  trainer_pid = child.pid();
  static const std::regex scored{
    R"(worker 0: step \d+ \(global \d+\) test accuracy ([0-9.]+) after ([0-9.]+) s)"};
  std::optional<double> reached;
  double best = 0;
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::optional<support::exit_status> ended;
  while (!reached && !ended && std::chrono::steady_clock::now() < deadline) {
    ended = child.wait(250ms);
    auto out = child.out();
    for (std::sregex_iterator i{out.begin(), out.end(), scored}, end;
         i != end; ++i) {
      auto accuracy = std::stod((*i)[1].str());
      best = std::max(best, accuracy);
      if (!reached && accuracy >= target)
        reached = std::stod((*i)[2].str());
    }
  }
  const bool out_of_time = !reached && !ended;
  if (!ended)
    child.stop(5s);
  trainer_pid = 0;
  if (ended && !ended->success())
    throw std::runtime_error("actorflow-train ended with "
                             + ended->to_string() + ": "
                             + child.err().substr(0, 600));
  return {reached, best, out_of_time};
}

const std::vector<std::string> torch_figures = {
  "torch_async_examples_per_s", "torch_sync_examples_per_s",
  "torch_async_seconds_to_0.88", "torch_sync_seconds_to_0.88"};

void run_torch(context& ctx) {
  if (!have_fashion_mnist(ctx.opts.data_dir)) {
    skip_figures(ctx, "torch", torch_figures,
                 "Fashion-MNIST not found in " + ctx.opts.data_dir
                   + " (Debian package dataset-fashion-mnist)");
    return;
  }
  auto t = find_torch(ctx);
  if (!t.missing.empty()) {
    skip_figures(ctx, "torch", torch_figures, t.missing);
    return;
  }
  auto train = find_binary("actorflow-train", ctx.opts.train, "--train");
  const bool quick = ctx.opts.quick;
  for (const std::string mode : {"async", "sync"}) {
    auto name = "torch_" + mode + "_examples_per_s";
    if (!ctx.wanted("torch", name))
      continue;
    // One after the other: actorflow, PyTorch with Eigen's GEMM, stock
    // PyTorch (fewer steps: it is several times slower, and examples/s
    // is the median of its windows).
    std::string detail;
    std::vector<std::string> flags;
    if (mode == "sync")
      flags.push_back("--sync");
    auto ours = trainer_rate(ctx, train, 2, 1, flags, detail);
    auto eigen = run_peer(ctx, t, mode, true, quick ? 200 : 2000,
                          quick ? 50 : 100, 0, 0, quick ? 120s : 300s);
    auto stock = run_peer(ctx, t, mode, false, quick ? 100 : 500,
                          quick ? 25 : 50, 0, 0, quick ? 120s : 300s);
    const bool eigen_faster = eigen.total >= stock.total;
    auto peer = mode == "async"
                  ? std::string{"torch.distributed.rpc parameter server "
                                "(1 ps applying Adam, 2 workers, one "
                                "update-and-fetch RPC per step)"}
                  : std::string{"DistributedDataParallel on gloo "
                                "(2 workers, all-reduced gradients)"};
    ctx.out->add(figure{
      .name = name,
      .value = ours,
      .unit = "examples/s",
      .baseline = mode == "async" ? "pytorch_rpc_ps" : "pytorch_ddp_gloo",
      .baseline_value = std::max(eigen.total, stock.total),
      .note = "mlp 784-256-128-10, adam 0.001, batch 100, 2 workers, total "
              "examples/s (medians of each worker's windows after the "
              "first, summed); actorflow-train --local 2"
              + std::string{mode == "sync" ? " --sync" : ""} + ": " + detail
              + "; PyTorch " + peer + ", 1 intra-op thread per process, "
              + "baseline the faster of: with Eigen's sgemm "
              + fixed(eigen.total, 0) + " (" + per_worker(eigen.per_worker)
              + "), stock (reference BLAS) " + fixed(stock.total, 0) + " ("
              + per_worker(stock.per_worker) + ")"
              + (eigen_faster ? "" : "; stock was faster")
              + "; no process pinned on either side"});
  }
  for (const std::string mode : {"async", "sync"}) {
    auto name = "torch_" + mode + "_seconds_to_0.88";
    if (!ctx.wanted("torch", name))
      continue;
    if (quick) {
      ctx.out->add(figure{.name = name,
                          .unit = "s",
                          .baseline = "pytorch_" + mode,
                          .skipped = "not in --quick (trains to 0.88 test "
                                     "accuracy on both sides, minutes)"});
      continue;
    }
    // Scored every 500 of the chief's (worker 0's) steps on both sides.
    // The same budget on both sides: 20000 steps of each worker, 600 s.
    auto [ours, ours_best, ours_timed_out] = actorflow_to_accuracy(
      ctx, train, mode == "sync", 0.88, 500, 600s);
    auto peer = run_peer(ctx, t, mode, true, 20000, 1000, 500, 0.88, 600s);
    figure f{.name = name,
             .unit = "s",
             .baseline = "pytorch_" + mode,
             .note = "seconds of worker 0 from its first step to its first "
                     "test accuracy >= 0.88 (scoring the 10000 test images "
                     "every 500 of its steps, included); actorflow-train "
                     "--local 2" + std::string{mode == "sync" ? " --sync" : ""}
                     + " (best " + fixed(ours_best, 4)
                     + ") against PyTorch with Eigen's sgemm (best "
                     + fixed(peer.best, 4) + ")"};
    if (ours)
      f.value = *ours;
    if (peer.seconds_to_target)
      f.baseline_value = *peer.seconds_to_target;
    if (!ours || !peer.seconds_to_target)
      f.error = std::string{!ours ? "actorflow" : "PyTorch"}
                + " did not reach 0.88 in "
                + (!ours && ours_timed_out ? "600 s" : "20000 steps a worker");
    ctx.out->add(std::move(f));
  }
}

} // namespace

std::string torch_missing(const context& ctx) {
  return find_torch(ctx).missing;
}

double torch_peer_rate(const context& ctx, const std::string& mode,
                       int64_t steps, int64_t log_every,
                       const std::string& hosts, std::string& detail) {
  auto t = find_torch(ctx);
  if (!t.missing.empty())
    throw std::runtime_error(t.missing);
  auto r = run_peer(ctx, t, mode, true, steps, log_every, 0, 0.0,
                    std::chrono::seconds{600}, hosts);
  detail = per_worker(r.per_worker);
  return r.total;
}

figure_group torch_group() {
  return {.name = "torch",
          .figures = torch_figures,
          .aliases = {"pytorch"},
          .targets = {{"torch_async_examples_per_s", at_least(2.5)},
                      {"torch_sync_examples_per_s", at_least(2.5)},
                      {"torch_async_seconds_to_0.88", at_most(1.0)},
                      {"torch_sync_seconds_to_0.88", at_most(1.0)}},
          .run = run_torch};
}

} // namespace actorflow::bench
