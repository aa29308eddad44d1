// actorflow-bench's python group (issue 32): the Python front end's
// figures, each measured in the same run as its C++ counterpart: a local
// trivial step, a 64 MiB float32 fetch and feed through numpy, and
// one-worker MLP training driven from Python against actorflow-train.
//
// The Python side runs in processes of its own: python_client.py
// (installed as actorflow-bench-python) and examples/python/train_mnist.py
// (as actorflow-bench-python-train), both found next to this program or in
// <prefix>/share/actorflow/bench, run by Debian's /usr/bin/python3 (or
// --python). In the build tree the package is <build>/python, which the
// children get as PYTHONPATH; installed, python3 finds it by itself.

#include <filesystem>

#include <nlohmann/json.hpp>

#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// What the Python side needs: the interpreter, the scripts and the
/// environment that lets them import actorflow; `missing` says why not.
struct python_side {
  std::string python;
  std::string client;
  std::string trainer;
  std::vector<std::string> env;
  std::string missing;
};

python_side find_python(const context& ctx) {
  python_side py;
  py.python = ctx.opts.python;
  if (::access(py.python.c_str(), X_OK) != 0) {
    py.missing = py.python + " is not an executable file (--python)";
    return py;
  }
  py.client = bench_file("actorflow-bench-python");
  py.trainer = bench_file("actorflow-bench-python-train");
  if (py.client.empty() || py.trainer.empty()) {
    py.missing = "actorflow-bench-python(-train) not found next to this "
                 "program nor in share/actorflow/bench";
    return py;
  }
  // The build tree's package: <build>/apps/actorflow-bench and
  // <build>/python/actorflow.
  auto build_package = fs::path{py.client}.parent_path().parent_path()
                       / "python";
  if (fs::is_regular_file(build_package / "actorflow" / "__init__.py"))
    py.env.push_back("PYTHONPATH=" + build_package.string());
  auto probe = support::run_process({py.python, "-c", "import actorflow"},
                                    30s, [&] {
                                      support::spawn_options o;
                                      o.env = py.env;
                                      return o;
                                    }());
  if (!probe.status.success())
    py.missing = "python3 cannot import actorflow (build it with "
                 "ACTORFLOW_PYTHON=ON, or install it): "
                 + probe.err.substr(0, 300);
  return py;
}

/// Runs the Python client in `mode` and returns its JSON line.
nlohmann::json run_client(const python_side& py, std::vector<std::string> args,
                          std::chrono::milliseconds limit) {
  std::vector<std::string> argv{py.python, py.client};
  argv.insert(argv.end(), args.begin(), args.end());
  support::spawn_options o;
  o.env = py.env;
  auto done = support::run_process(argv, limit, o);
  if (done.timed_out || !done.status.success())
    throw std::runtime_error(
      "actorflow-bench-python " + args.front()
      + (done.timed_out ? " did not finish in time"
                        : " ended with " + done.status.to_string())
      + ": " + done.err.substr(0, 600));
  auto line = done.out.substr(0, done.out.find('\n'));
  return nlohmann::json::parse(line);
}

// -- the figures --------------------------------------------------------------

/// The in-process trivial step, C++ right before and after Python's run.
void local_step(context& ctx, const python_side& py) {
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f, "c");
  session sess{bounded_config(), &g};
  auto cpp_us = [&] {
    return 1e6
           / measure([&] { sess.run(c); }, {.budget = budget, .warmup = 10})
               .per_second;
  };
  auto before = cpp_us();
  auto out = run_client(py, {"step_local", "--seconds",
                             std::to_string(budget.count())},
                        60s);
  auto after = cpp_us();
  auto cpp = (before + after) / 2;
  figure f{.name = "python_step_local_trivial",
           .value = out.at("us_per_run").get<double>(),
           .unit = "us/run",
           .baseline = "step_local_trivial_cpp",
           .baseline_value = cpp,
           .path = "in_process"};
  f.note = "sess.run(c) from Python (tf.Session(), one Const), "
           + std::to_string(out.at("runs").get<int64_t>())
           + " runs, against the same step from C++ measured before ("
           + fixed(before, 1) + " us) and after (" + fixed(after, 1)
           + " us); lower is better";
  ctx.out->add(f);
}

/// A 64 MiB float32 variable on the ps fetched, and a 64 MiB array fed to
/// a reduce_sum on the ps, by a session on a worker task of the client's
/// process: this process (worker 0) and a Python one (worker 1) in turn.
void transfers(context& ctx, const python_side& py) {
  constexpr int mib = 64;
  constexpr int64_t n = int64_t{mib} << 18; // floats
  auto budget = ctx.budget(2.0, 0.5);
  support::local_cluster nodes{ctx.node,
                               {{"ps", 1}, {"worker", 2}},
                               quiet_nodes({{"worker", 0}, {"worker", 1}})};
  server srv{nodes.spec(), "worker", 0};
  graph g;
  auto as_default = g.as_default();
  variable v{zeros({n}), named("python_transfer_64mib")};
  output fed;
  output total;
  {
    auto on_ps = device_scope{"/job:ps/task:0"};
    fed = placeholder(dtype::float32, {n}, "fed");
    total = reduce_sum(fed);
  }
  session sess{srv.target(), bounded_config(), &g};
  sess.run(v.initializer());
  auto values = tensor::from_vector(std::vector<float>(size_t(n), 1.0f),
                                    tensor_shape{n});
  auto cpp = [&](std::string& path) {
    auto before = tensor_channel::totals_received();
    auto fetch = measure([&] { sess.run(v); },
                         {.budget = budget, .min_reps = 5, .warmup = 2});
    path = received_path(before, tensor_channel::totals_received(),
                         uint64_t(n) * 4 * uint64_t(fetch.reps + 2),
                         uint64_t(fetch.reps + 2));
    auto feed = measure([&] { sess.run(total, {{fed, values}}); },
                        {.budget = budget, .min_reps = 5, .warmup = 2});
    return std::pair{mb_per_s(fetch, double(n) * 4),
                     mb_per_s(feed, double(n) * 4)};
  };
  std::string path;
  auto before = cpp(path);
  auto out = run_client(py, {"transfer", "--seconds",
                             std::to_string(budget.count()), "--cluster",
                             nodes.spec().to_json(), "--mib",
                             std::to_string(mib)},
                        120s);
  auto after = cpp(path);
  auto add = [&](const char* name, const char* key, double cpp_before,
                 double cpp_after, const std::string& what) {
    figure f{.name = name,
             .value = out.at(key).get<double>(),
             .unit = "MB/s",
             .baseline = std::string{name}.replace(0, 6, "cpp"),
             .baseline_value = (cpp_before + cpp_after) / 2,
             .path = path};
    f.note = what + "; C++ " + fixed(cpp_before, 0) + " MB/s before, "
             + fixed(cpp_after, 0)
             + " after (worker 0, this process); Python as worker 1 of the "
               "same cluster in its own process; the path is the C++ "
               "side's";
    ctx.out->add(f);
  };
  add("python_fetch_64mib", "fetch_mb_per_s", before.first, after.first,
      "sess.run(v) of a 64 MiB float32 variable on the ps into numpy");
  add("python_feed_64mib", "feed_mb_per_s", before.second, after.second,
      "sess.run(reduce_sum(x), {x: 64 MiB float32 array}) with x on the ps");
  srv.stop();
}

/// One worker and one ps training the MLP: actorflow-train --local 1, then
/// examples/python/train_mnist.py --local 1 (its examples/s lines are the
/// trainer's).
void training(context& ctx, const python_side& py) {
  if (!have_fashion_mnist(ctx.opts.data_dir)) {
    ctx.out->add(figure{.name = "python_train_examples_per_s_1worker",
                        .unit = "examples/s",
                        .skipped = "Fashion-MNIST not found in "
                                   + ctx.opts.data_dir});
    return;
  }
  auto train = find_binary("actorflow-train", ctx.opts.train, "--train");
  std::string cpp_detail;
  auto cpp = trainer_rate(ctx, train, 1, 1, {}, cpp_detail);
  int64_t steps = ctx.opts.quick ? 250 : 2000;
  int64_t log_every = ctx.opts.quick ? 50 : 100;
  support::spawn_options o;
  o.env = py.env;
  auto limit = ctx.opts.quick ? 120s : 300s;
  note("running train_mnist.py --local 1 --train_steps "
       + std::to_string(steps));
  auto done = support::run_process(
    {py.python, py.trainer, "--local", "1", "--train_steps",
     std::to_string(steps), "--log_every", std::to_string(log_every),
     "--data_dir", ctx.opts.data_dir},
    limit, o);
  if (done.timed_out || !done.status.success())
    throw std::runtime_error(
      "train_mnist.py --local 1 "
      + (done.timed_out ? std::string{"did not finish in time"}
                        : "ended with " + done.status.to_string())
      + ": " + done.err.substr(0, 600));
  std::string py_detail;
  auto ours = trainer_examples_per_s(done.out, 1, py_detail);
  ctx.out->add(figure{
    .name = "python_train_examples_per_s_1worker",
    .value = ours,
    .unit = "examples/s",
    .baseline = "train_examples_per_s_1worker_cpp",
    .baseline_value = cpp,
    .note = "mlp 784-256-128-10, adam, batch 100, 1 ps + 1 worker, "
            + std::to_string(steps)
            + " steps: examples/python/train_mnist.py "
              "(MonitoredTrainingSession, numpy batches) against "
              "actorflow-train run just before; Python "
            + py_detail + ", C++ " + cpp_detail});
}

const std::vector<std::string> python_figures = {
  "python_step_local_trivial", "python_fetch_64mib", "python_feed_64mib",
  "python_train_examples_per_s_1worker"};

void run_python(context& ctx) {
  auto py = find_python(ctx);
  if (!py.missing.empty()) {
    skip_figures(ctx, "python", python_figures, py.missing);
    return;
  }
  if (ctx.wanted("python", "python_step_local_trivial"))
    local_step(ctx, py);
  if (ctx.wanted("python", "python_fetch_64mib")
      || ctx.wanted("python", "python_feed_64mib"))
    transfers(ctx, py);
  if (ctx.wanted("python", "python_train_examples_per_s_1worker"))
    training(ctx, py);
}

} // namespace

figure_group python_group() {
  return {.name = "python",
          .figures = python_figures,
          .targets = {{"python_step_local_trivial",
                       {"<= 2x C++ + 5 us",
                        [](const figure& f) {
                          return f.value && f.baseline_value
                                 && *f.value <= 2 * *f.baseline_value + 5;
                        },
                        /*on_ratio=*/false}},
                      {"python_fetch_64mib", at_least(0.8)},
                      {"python_feed_64mib", at_least(0.8)},
                      {"python_train_examples_per_s_1worker",
                       at_least(0.9)}},
          .needs_node = true,
          .run = run_python};
}

} // namespace actorflow::bench
