// actorflow-bench's whole-process groups: rss (the peak memory of the ps
// and the worker while a stream passes through a queue) and train
// (actorflow-train's examples/s against a plain Eigen loop).

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "bench/common.hpp"
#include "bench/eigen_mlp.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// -- rss ----------------------------------------------------------------------

void run_rss(context& ctx) {
  const auto& node = ctx.node;
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

} // namespace

// -- train --------------------------------------------------------------------

// The first window of each worker includes start-up (graph registration
// and the first steps).
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

void skip_figures(context& ctx, const std::string& group,
                  const std::vector<std::string>& names,
                  const std::string& why) {
  for (const auto& name : names)
    if (ctx.wanted(group, name))
      ctx.out->add(figure{.name = name, .skipped = why});
}

std::string bench_file(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    return {};
  for (auto dir : {self.parent_path(),
                   self.parent_path().parent_path() / "share" / "actorflow"
                     / "bench"})
    if (fs::is_regular_file(dir / name))
      return (dir / name).string();
  return {};
}

bool have_fashion_mnist(const std::string& dir) {
  for (const char* file :
       {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!std::filesystem::is_regular_file(std::filesystem::path{dir} / file))
      return false;
  return true;
}

double trainer_rate(context& ctx, const std::string& train, int workers,
                    int ps, const std::vector<std::string>& flags,
                    std::string& detail) {
  // Enough logged windows for a median after the first one, within a
  // bounded time (the mlp runs ~100 steps/s per worker here). Global
  // steps: asynchronously every worker's step is one, synchronously every
  // update (one step of each worker).
  const bool sync
    = std::find(flags.begin(), flags.end(), "--sync") != flags.end();
  int64_t steps = (ctx.opts.quick ? 250 : 2000) * (sync ? 1 : workers);
  int64_t log_every = ctx.opts.quick ? 50 : 100;
  std::vector<std::string> argv{train,           "--local",
                                std::to_string(workers),
                                "--local_ps",    std::to_string(ps),
                                "--model",       "mlp",
                                "--train_steps", std::to_string(steps),
                                "--log_every",   std::to_string(log_every),
                                "--data_dir",    ctx.opts.data_dir};
  argv.insert(argv.end(), flags.begin(), flags.end());
  support::spawn_options sopts;
  sopts.capture_stderr = true;
  auto command = "actorflow-train --local " + std::to_string(workers)
                 + " --local_ps " + std::to_string(ps);
  for (const auto& flag : flags)
    command += " " + flag;
  note("running " + command + " --model mlp --train_steps "
       + std::to_string(steps));
  support::child_process child{argv, sopts};
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
      command
      + (status ? " ended with " + status->to_string()
                : " did not finish within " + std::to_string(limit.count())
                    + " s")
      + ": " + err);
  }
  return trainer_examples_per_s(out, workers, detail);
}

namespace {

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
    std::string detail;
    auto steps = ctx.opts.quick ? 250 * workers : 2000 * workers;
    auto ours = trainer_rate(ctx, train, workers, 1, {}, detail);
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
  // Replicated variables (issue 31): one worker and two ps tasks, with
  // and without --replicate_variables, one run after the other.
  if (ctx.wanted("train", "replication_train_examples_per_s_1worker")) {
    std::string plain_detail;
    std::string replicated_detail;
    auto plain = trainer_rate(ctx, train, 1, 2, {}, plain_detail);
    auto replicated = trainer_rate(ctx, train, 1, 2, {"--replicate_variables"},
                                   replicated_detail);
    ctx.out->add(figure{
      .name = "replication_train_examples_per_s_1worker",
      .value = replicated,
      .unit = "examples/s",
      .baseline = "train_examples_per_s_1worker_2ps",
      .baseline_value = plain,
      .note = "mlp 784-256-128-10, adam, batch 100, 2 ps + 1 worker, every "
              "variable replicated on the other ps (each update answered "
              "once the backup holds it) against the same cluster without "
              "replication, run before it; "
              + replicated_detail + " against " + plain_detail});
  }
}

/// A missing trainer is a usage problem: found before anything is
/// measured (without the dataset, the group is skipped and needs none).
void check_train(const context& ctx) {
  if (have_fashion_mnist(ctx.opts.data_dir))
    find_binary("actorflow-train", ctx.opts.train, "--train");
}

} // namespace

figure_group rss_group() {
  return {.name = "rss",
          .figures = {"rss_peak_ps", "rss_peak_worker"},
          .aliases = {"rss_peak"},
          .targets = {{"rss_peak_ps", at_most(1.5)}},
          .needs_node = true,
          .run = run_rss};
}

figure_group train_group() {
  return {.name = "train",
          .figures = {"train_examples_per_s_1worker",
                      "train_examples_per_s_2workers",
                      "replication_train_examples_per_s_1worker"},
          .aliases = {"train_examples_per_s"},
          // Issue 35 §1: 0.9 (a distributed step can at best hide its
          // transfers behind compute); issue 5 asked 0.7.
          .targets = {{"train_examples_per_s_1worker", at_least(0.9)},
                      {"replication_train_examples_per_s_1worker",
                       at_least(0.8)}},
          .run = run_train,
          .check = check_train};
}

} // namespace actorflow::bench
