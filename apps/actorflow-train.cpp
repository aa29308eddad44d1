// actorflow-train: distributed training on Fashion-MNIST, TensorFlow's
// "putting it all together" trainer (between-graph replication,
// asynchronous or synchronous updates) on actorflow.
//
//   actorflow-train --ps_hosts h:1 --worker_hosts h:2,h:3 --job_name ps
//                   --task_index 0
//   actorflow-train --ps_hosts h:1 --worker_hosts h:2,h:3 --job_name worker
//                   --task_index 0 --model mlp --train_steps 4000
//   actorflow-train --local 2 --model softmax     # all of it on this host
//   actorflow-train --join h:1 --model mlp       # a worker joins a running
//                                                 # job (asynchronous)
//
// A ps task serves its variables until SIGINT/SIGTERM (or its --parent-pid
// dies). A worker builds the whole model with replica_device_setter (the
// variables round-robin on the ps tasks, everything else on itself), feeds
// its own shuffled mini-batches and runs the train op until the global
// step reaches --train_steps; worker 0, the chief, initializes the
// variables first and reports the test accuracy at the end.
//
// Exit status (support/guarded_main.hpp): 0 on success (a ps: after
// SIGINT/SIGTERM), 1 for a failure at run time (data missing or
// unreadable, a server that cannot start, a lost task), 2 for a bad
// command line or configuration (an InvalidArgument of the engine's too),
// 128 + N when --local was stopped by signal N.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "actorflow/actorflow.hpp"
#include "actorflow/support/free_ports.hpp"
#include "actorflow/support/process.hpp"
#include "actorflow/support/temp_dir.hpp"

#include "cluster_flags.hpp"
#include "metrics_flags.hpp"
#include "peer_log.hpp"
#include "actorflow/train/fashion_mnist.hpp"
#include "train/local_launcher.hpp"
#include "train/options.hpp"
#include "actorflow/train/models.hpp"

namespace {

using namespace actorflow;
using namespace actorflow::apps;
using namespace actorflow::train;
using support::write_all;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// -- output -------------------------------------------------------------------

/// One line to stdout, in one write (tasks of --local share a terminal);
/// also a log line of the task (the console's logs view), as TF's
/// LoggingTensorHook logs its progress.
void say(const std::string& line) {
  write_all(1, line + "\n");
  note_log(log_level::info, line);
}

void warn(const std::string& line) {
  log::info(line);
}

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

std::string join(const std::vector<int64_t>& xs, const char* sep) {
  std::string result;
  for (size_t i = 0; i < xs.size(); ++i)
    result += (i > 0 ? sep : "") + std::to_string(xs[i]);
  return result;
}

// -- defaults -----------------------------------------------------------------

double default_learning_rate(const train_options& opts) {
  if (opts.optimizer == "sgd")
    return 0.1;
  if (opts.optimizer == "momentum")
    return 0.01;
  // Softmax regression's last steps are noisy at 0.001 (its test accuracy
  // swings between 0.838 and 0.847 near its plateau); half that converges
  // as fast in 15000 steps and ends steadier.
  return opts.model == "softmax" ? 0.0005 : 0.001;
}

// The cnn without dropout overfits: its test accuracy flattens at
// ~0.915 from ~7000 global steps with a training loss of ~0.11. With
// dropout 0.5 on a 256-wide fully connected layer and the rate halved
// every 5000 steps it passed 0.92 at ~10000 (434 s, 1 ps and 2 workers)
// and ended at 0.924 after 16000 (docs/PERFORMANCE.md, "Learning
// quality").
double default_keep_prob(const std::string& model) {
  return model == "cnn" ? 0.5 : 1.0;
}

int64_t default_decay_steps(const std::string& model) {
  return model == "cnn" ? 5000 : 0;
}

// Measured with 1 ps and 2 workers (--local 2) on a 2-core machine:
// softmax plateaus at ~0.845 test accuracy after ~12000 global steps (15 s
// for 15000); the mlp (~130 steps/s) passes 0.88 after ~6000 and is at
// 0.89-0.90 from 15000 on (2.5 min for 20000); the cnn (~24 global
// steps/s) is at ~0.89 at 2000 steps (85 s; scripts/time_to_accuracy.sh
// trains it for 14000).
int64_t default_train_steps(const std::string& model) {
  if (model == "cnn")
    return 2000;
  if (model == "mlp")
    return 20000;
  return 15000;
}

std::vector<int64_t> default_hidden(const std::string& model) {
  if (model == "cnn")
    return {256};
  if (model == "mlp")
    return {256, 128};
  return {};
}

/// The data files, or a run-time error (exit 1) saying what is missing.
void check_data(const std::string& dir) {
  auto missing = fashion_mnist::missing_files(dir);
  if (missing.empty())
    return;
  std::string list;
  for (const auto& m : missing)
    list += "\n  " + m;
  throw std::runtime_error("Fashion-MNIST not found in " + dir
                           + "; missing:" + list
                           + "\nInstall the Debian package "
                             "dataset-fashion-mnist (scripts/setup.sh "
                             "does) or pass --data_dir DIR.");
}

// -- signals ------------------------------------------------------------------

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// -- ps -----------------------------------------------------------------------

int run_ps(const train_options& opts, task_config cfg,
           const sigset_t& stop_signals) {
  const auto& address = cfg.cluster.task_address(cfg.job, cfg.task);
  auto srv = start_server(cfg);
  say(std::string{prog} + ": serving " + cfg.task_name() + " at "
      + host_port{host_of(address), srv.port()}.to_string());
  if (auto line = serve_metrics(srv, opts.metrics, prog); !line.empty())
    say(line);
  int received = 0;
  timespec tick{0, 200'000'000};
  while (received == 0) {
    siginfo_t info;
    int sig = ::sigtimedwait(&stop_signals, &info, &tick);
    if (sig > 0) {
      received = sig;
    } else if (srv.stopped()) {
      log::error(cfg.task_name() + " stopped");
      return 1;
    } else if (opts.parent.gone()) {
      received = SIGTERM;
    }
  }
  srv.stop();
  // Asked to stop: say who asked, so the last line does not read like a
  // crash.
  warn(cfg.task_name() + " stopped: SIG" + ::sigabbrev_np(received)
       + (opts.parent.pid ? " from the launcher" : ""));
  return 0;
}

// -- worker -------------------------------------------------------------------

std::unique_ptr<optimizer> make_optimizer(const train_options& opts,
                                          const hyperparameter& lr) {
  if (opts.optimizer == "sgd")
    return std::make_unique<gradient_descent_optimizer>(lr);
  if (opts.optimizer == "momentum")
    return std::make_unique<momentum_optimizer>(lr, opts.momentum);
  return std::make_unique<adam_optimizer>(lr);
}

/// Reports what each (re-)created session starts from: the chief's
/// restored checkpoint or fresh variables, the global step.
class report_hook : public session_run_hook {
public:
  report_hook(bool chief, std::string who, variable global_step)
    : chief_(chief),
      who_(std::move(who)),
      global_step_(std::move(global_step)) {
    // nop
  }

  void after_create_session(session& sess, coordinator&) override {
    global_ = sess.run(global_step_).scalar_value<int64_t>();
    // Again after a lost task: the chief restored the latest checkpoint
    // (a restarted ps), or went on with the ps's state (it came back).
    if (created_++ > 0) {
      if (chief_ && restoring_.empty())
        say(who_ + ": the ps tasks kept their state: going on from global "
                   "step " + std::to_string(global_));
      else
        say(who_ + (chief_ ? ": restored " + restoring_
                           : ": the session is back")
            + " (global step " + std::to_string(global_) + ")");
      restoring_.clear();
      return;
    }
    // The chief restored the newest checkpoint that restores, if there
    // was one (its session's last "Restoring parameters from" line).
    auto restored = chief_ ? restoring_ : std::string{};
    restoring_.clear();
    if (!restored.empty())
      say(who_ + ": restored " + restored + " (global step "
          + std::to_string(global_) + ")");
    else
      say(who_ + (chief_ ? ": initialized the variables"
                         : ": the chief has initialized the variables")
          + (global_ > 0 ? " (global step " + std::to_string(global_) + ")"
                         : std::string{}));
  }

  int64_t global_step() const noexcept {
    return global_;
  }

  /// The session's log line "Restoring parameters from F" (the chief).
  void restoring(std::string file) {
    restoring_ = std::move(file);
  }

private:
  bool chief_;
  std::string who_;
  variable global_step_;
  int64_t global_ = 0;
  int created_ = 0;
  std::string restoring_;
};

/// --trace_step: traces the run the training loop arms it for (not the
/// chief's evaluation runs) and writes it as a Chrome trace.
class trace_step_hook : public session_run_hook {
public:
  trace_step_hook(std::string who, std::string file)
    : who_(std::move(who)), file_(std::move(file)) {
    // nop
  }

  /// The next run is the one to trace.
  void arm(int64_t local_step) {
    armed_ = local_step;
  }

  session_run_args before_run(session_run_context&) override {
    session_run_args args;
    if (armed_)
      args.options.trace_level = run_options::full_trace;
    return args;
  }

  void after_run(session_run_context&,
                 const session_run_values& values) override {
    if (!armed_)
      return;
    auto step = *armed_;
    armed_.reset();
    write_chrome_trace(values.metadata, file_);
    // A device may report more than once (one entry per partition).
    std::set<std::string> devices;
    size_t ops = 0;
    for (const auto& d : values.metadata.stats.dev_stats) {
      devices.insert(d.device);
      ops += d.node_stats.size();
    }
    say(who_ + ": wrote the trace of step " + std::to_string(step) + " ("
        + std::to_string(ops) + " ops on " + std::to_string(devices.size())
        + " devices) to " + file_);
  }

private:
  std::string who_;
  std::string file_;
  std::optional<int64_t> armed_;
};

/// Test accuracy over the whole test set, in batches (`sess`: a session
/// or a monitored_session).
template <class Session>
double evaluate(Session& sess, const model& m,
                const fashion_mnist::dataset& test, int64_t batch_size) {
  double correct = 0;
  for (int64_t begin = 0; begin < test.size(); begin += batch_size) {
    auto n = std::min(batch_size, test.size() - begin);
    auto [x, y] = fashion_mnist::make_batch(test, {}, begin, n,
                                            m.image_shape);
    tensor value = sess.run(m.num_correct, {{m.x, x}, {m.y, y}});
    correct += static_cast<double>(value.scalar_value<float>());
  }
  return correct / static_cast<double>(test.size());
}

/// A worker that joined the cluster (--join) leaves it on SIGINT/SIGTERM:
/// a thread takes the (blocked) stop signals and asks the training loop
/// to end after its step; a second signal ends the process at once.
class leave_on_signal {
public:
  explicit leave_on_signal(const sigset_t& signals) : signals_(signals) {
    thread_ = std::thread{[this] {
      for (;;) {
        int sig = 0;
        if (::sigwait(&signals_, &sig) != 0 || done_.load())
          return;
        if (received_.load() != 0)
          ::_exit(128 + sig);
        received_.store(sig);
      }
    }};
  }

  ~leave_on_signal() {
    // Wakes the thread if it still waits (SIGHUP is one of the set).
    done_.store(true);
    ::pthread_kill(thread_.native_handle(), SIGHUP);
    thread_.join();
  }

  /// The signal received, or 0.
  int received() const noexcept {
    return received_.load();
  }

private:
  sigset_t signals_;
  std::atomic<int> received_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int run_worker(const train_options& opts, task_config cfg,
               const sigset_t& stop_signals) {
  // The data first: a worker without it has nothing to do.
  check_data(opts.data_dir);
  auto t0 = steady::now();
  // A worker that joins learns its index (and the cluster) here.
  auto srv = start_server(cfg);
  const bool joined = !cfg.join.empty();
  std::optional<leave_on_signal> leaving;
  if (joined)
    leaving.emplace(stop_signals);
  const bool chief = cfg.task == 0;
  const auto who = "worker " + std::to_string(cfg.task);
  const auto train_steps = opts.train_steps.value_or(
    default_train_steps(opts.model));
  const auto lr = opts.learning_rate.value_or(default_learning_rate(opts));
  const auto num_workers = cfg.cluster.num_tasks("worker");
  const auto num_ps = cfg.cluster.has_job("ps") ? cfg.cluster.num_tasks("ps")
                                                : 0;
  if (num_ps == 0)
    throw usage_error("the cluster has no ps job: the variables need a ps "
                      "task");
  if (joined && opts.sync && !opts.elastic)
    throw usage_error("--join --sync needs --elastic (on every worker of "
                      "the job): otherwise each update waits for a fixed "
                      "number of gradients");
  const auto& address = cfg.cluster.task_address(cfg.job, cfg.task);
  say(std::string{prog} + ": serving " + cfg.task_name() + " at "
      + host_port{host_of(address), srv.port()}.to_string()
      + (joined ? " (joined through " + cfg.join + ", "
                    + std::to_string(num_workers) + " workers now)"
                : std::string{}));
  auto train_set = fashion_mnist::load_split(opts.data_dir, "train");
  std::optional<fashion_mnist::dataset> test_set;
  if (chief)
    test_set = fashion_mnist::load_split(opts.data_dir, "t10k");
  if (opts.batch_size > train_set.size())
    throw usage_error("--batch_size: larger than the training set ("
                      + std::to_string(train_set.size()) + ")");
  if (auto line = serve_metrics(srv, opts.metrics, prog); !line.empty())
    say(line);
  // A lost ps shows in this worker's log as it happens.
  peer_log peers{cfg.task_name()};
  say(who + ": loaded " + std::to_string(train_set.size())
      + " training images"
      + (test_set ? " and " + std::to_string(test_set->size()) + " test images"
                  : std::string{})
      + " from " + opts.data_dir + " in "
      + fixed(std::chrono::duration<double>(steady::now() - t0).count(), 1)
      + " s");

  // The model, as every worker builds it: variables on the ps tasks
  // (round robin), the rest on this worker.
  graph g;
  auto as_default = g.as_default();
  g.set_seed(opts.seed);
  model_options mopts;
  mopts.kind = opts.model;
  mopts.hidden = opts.hidden ? widths(*opts.hidden)
                             : default_hidden(opts.model);
  mopts.filters = widths(opts.filters);
  mopts.seed = opts.seed;
  const auto keep_prob = opts.keep_prob.value_or(
    default_keep_prob(opts.model));
  const auto decay_steps = opts.decay_steps.value_or(
    default_decay_steps(opts.model));
  mopts.keep_prob = keep_prob;
  // Each worker its own dropout masks.
  mopts.dropout_seed = opts.seed * 1000 + 100 + cfg.task;
  model m;
  variable global_step;
  operation train_op;
  std::unique_ptr<optimizer> opt;
  // --sync: TF's SyncReplicasOptimizer.
  std::unique_ptr<sync_replicas_optimizer> sync;
  {
    replica_device_setter_options dopts;
    dopts.worker_device = "/job:worker/task:" + std::to_string(cfg.task);
    device_scope on_replica{replica_device_setter(cfg.cluster, dopts)};
    global_step = create_global_step();
    m = build_model(mopts);
    opt = make_optimizer(
      opts, decay_steps > 0
              ? hyperparameter{exponential_decay(lr, global_step, decay_steps,
                                                 opts.decay_rate)}
              : hyperparameter{lr});
    if (opts.sync) {
      auto replicas = static_cast<int>(
        opts.replicas_to_aggregate.value_or(num_workers));
      sync = std::make_unique<sync_replicas_optimizer>(
        *opt, replicas, static_cast<int>(num_workers));
      sync->set_elastic(opts.elastic);
      train_op = sync->minimize(m.loss, global_step);
    } else {
      train_op = opt->minimize(m.loss, &global_step);
    }
  }
  std::string shape = opts.model == "cnn"
                        ? "conv5x5x" + std::to_string(mopts.filters[0])
                            + "-pool-conv5x5x"
                            + std::to_string(mopts.filters[1]) + "-pool-"
                            + join(mopts.hidden, "-") + "-10"
                        : "784-" + join(mopts.hidden, "-")
                            + (mopts.hidden.empty() ? "" : "-") + "10";
  say(who + ": model " + opts.model + " (" + shape + ", "
      + std::to_string(m.parameters) + " parameters on " + std::to_string(num_ps)
      + " ps), optimizer " + opts.optimizer + " lr " + fixed(lr, 4)
      + (decay_steps > 0 ? " x " + fixed(opts.decay_rate, 2) + " every "
                             + std::to_string(decay_steps) + " steps"
                         : std::string{})
      + (m.keep_prob.valid() ? ", dropout keep " + fixed(keep_prob, 2)
                             : std::string{})
      + ", batch " + std::to_string(opts.batch_size) + ", train_steps "
      + std::to_string(train_steps) + ", " + std::to_string(num_workers)
      + " workers ("
      + (sync ? "sync, " + std::to_string(sync->replicas_to_aggregate())
                  + " gradients per update"
                  + (opts.elastic ? ", elastic" : "")
              : std::string{"async"})
      + ")");

  // TF's MonitoredTrainingSession: the chief initializes the variables or
  // restores the newest checkpoint of --checkpoint_dir that restores (and
  // saves one every --save_steps global steps and at the end); the others
  // wait for it. A lost ps task re-creates the session the same way, so training
  // continues from the last checkpoint.
  session_config config;
  config.operation_timeout_in_ms = static_cast<int64_t>(opts.step_timeout
                                                        * 1000);
  auto report = std::make_shared<report_hook>(chief, who, global_step);
  monitored_training_session_options mo;
  mo.master = srv.target();
  mo.is_chief = chief;
  mo.g = &g;
  mo.config = config;
  if (opts.checkpoint_dir) {
    mo.checkpoint_dir = *opts.checkpoint_dir;
    mo.save_checkpoint_steps = opts.save_steps;
  }
  // Our progress lines give examples/s; TF's global_step/sec would repeat
  // them.
  mo.log_step_count_steps = 0;
  mo.max_wait = std::chrono::milliseconds{
    static_cast<int64_t>(opts.startup_timeout * 1000)};
  mo.recovery_wait = 100ms;
  mo.prepare_timeout_in_ms = 5000;
  mo.stop_grace_period = 10s;
  mo.log = [who, report](const std::string& line) {
    constexpr std::string_view restoring = "Restoring parameters from ";
    if (line.starts_with(restoring))
      report->restoring(line.substr(restoring.size()));
    say(who + ": " + line);
  };
  mo.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, train_steps),
              report};
  // A worker that stops hands out tokens, so that no other waits for an
  // update that will not come any more.
  if (sync)
    mo.hooks.push_back(make_sync_replicas_hook(*sync, chief, -1, true));
  std::shared_ptr<trace_step_hook> tracer;
  if (chief && opts.trace_step) {
    tracer = std::make_shared<trace_step_hook>(who, *opts.trace_file);
    mo.hooks.push_back(tracer);
  }
  std::unique_ptr<monitored_session> sess;
  try {
    sess = monitored_training_session(mo);
  } catch (const op_error& e) {
    if (e.code() == error_code::deadline_exceeded)
      throw std::runtime_error(
        who + ": not ready after " + fixed(opts.startup_timeout, 0) + " s: "
        + e.what() + (chief ? "" : " (is the chief, worker 0, running?)"));
    throw;
  }

  // --elastic: the chief follows the membership; between two updates it
  // sets the number of gradients the next one aggregates (a worker that
  // left is no longer waited for).
  std::jthread replicas_watch;
  if (chief && sync && opts.elastic)
    replicas_watch = std::jthread{[&, who](std::stop_token stop) {
      auto count = static_cast<int32_t>(sync->replicas_to_aggregate());
      int64_t seen = 0;
      std::optional<session> setter;
      while (!stop.stop_requested()) {
        std::this_thread::sleep_for(100ms);
        try {
          auto [version, members] = srv.membership();
          if (version == seen)
            continue;
          int32_t workers = 0;
          for (auto& [name, address] : members)
            workers += name.starts_with("/job:worker/") ? 1 : 0;
          if (workers == count || workers < 1) {
            seen = version;
            continue;
          }
          if (!setter)
            setter.emplace(srv.target(), config, &g);
          setter->run(std::vector<fetch>{sync->set_replicas_op()},
                      {{sync->replicas_placeholder(),
                        tensor::scalar(workers)}});
          auto n = std::to_string(workers);
          say(who + ": membership version " + std::to_string(version) + ": "
              + n + (workers == 1 ? " worker" : " workers")
              + ": each update aggregates " + n
              + (workers == 1 ? " gradient" : " gradients")
              + " from now on");
          count = workers;
          seen = version;
        } catch (const std::exception& e) {
          // Tried again at the next tick (a ps failing over, say).
          warn(who + ": could not set the replicas per update: " + e.what());
          std::this_thread::sleep_for(1s);
        }
      }
      if (setter)
        setter->close();
    }};

  // Training.
  fashion_mnist::batcher batches{train_set, opts.batch_size,
                                 static_cast<uint64_t>(opts.seed) * 1'000'003u
                                   + static_cast<uint64_t>(cfg.task),
                                 m.image_shape};
  // A step's feeds: the batch, and dropout's keep_prob when it has one.
  const auto keep = tensor::scalar(static_cast<float>(keep_prob));
  auto feeds = [&](const tensor& x, const tensor& y) {
    feed_dict f{{m.x, x}, {m.y, y}};
    if (m.keep_prob.valid())
      f.emplace_back(m.keep_prob, keep);
    return f;
  };
  auto global = report->global_step();
  int64_t local_step = 0;
  auto start = steady::now();
  auto window_start = start;
  int64_t window_steps = 0;
  double window_loss = 0;
  // What the console shows (monitoring::report_training), every step.
  monitoring::training_progress progress;
  progress.task = cfg.task_name();
  // --sync: a step that times out waits for an update, which waits for
  // gradients. The accumulators on the ps know who sent theirs: the error
  // names the workers that did not (a stopped or dead one), not only the
  // device the step waited on.
  auto sync_timeout = [&](const op_error& e) {
    std::vector<std::string> workers;
    for (auto i : cfg.cluster.task_indices("worker"))
      workers.push_back(task_name("worker", i));
    std::string why;
    try {
      session probe{srv.target(), config, &g};
      why = sync_replicas_waiting_for(probe, *sync, workers, 5000);
      probe.close();
    } catch (const std::exception&) {
      // The ps is not answering either: the step's own error says so.
    }
    if (why.empty())
      return e;
    return op_error(e.code(), who + ": " + why + " ("
                                + e.get_status().message() + ")");
  };
  // A run restored past --train_steps only evaluates.
  while (global < train_steps && !sess->should_stop()) {
    if (leaving && leaving->received() != 0)
      break;
    auto [x, y] = batches.next();
    if (tracer && local_step + 1 == *opts.trace_step)
      tracer->arm(local_step + 1);
    std::vector<tensor> out;
    try {
      out = sess->run({train_op, m.loss, global_step}, feeds(x, y));
    } catch (const op_error& e) {
      if (!sync || e.code() != error_code::deadline_exceeded)
        throw;
      throw sync_timeout(e);
    }
    ++local_step;
    ++window_steps;
    window_loss += static_cast<double>(out[1].scalar_value<float>());
    global = out[2].scalar_value<int64_t>();
    progress.global_step = global;
    progress.local_step = local_step;
    progress.loss = static_cast<double>(out[1].scalar_value<float>());
    monitoring::report_training(progress);
    if (local_step % opts.log_every == 0) {
      auto now = steady::now();
      auto secs = std::chrono::duration<double>(now - window_start).count();
      auto rate = secs > 0 ? static_cast<double>(window_steps
                                                 * opts.batch_size)
                               / secs
                           : 0.0;
      say(who + ": step " + std::to_string(local_step) + " (global "
          + std::to_string(global) + ") loss "
          + fixed(window_loss / static_cast<double>(window_steps), 4)
          + " examples/s " + fixed(rate, 0));
      progress.examples_per_sec = rate;
      window_start = now;
      window_steps = 0;
      window_loss = 0;
    }
    if (chief && opts.eval_every > 0 && local_step % opts.eval_every == 0
        && !sess->should_stop()) {
      // On the session underneath, without the hooks: scoring is not a
      // training step, and another worker may reach --train_steps (the
      // stop hook's request) while the chief scores.
      auto accuracy = sess->run_step_fn([&](step_context& c) {
        return evaluate(c.get_session(), m, *test_set, opts.eval_batch_size);
      });
      // The seconds since this worker's first step, scoring included:
      // scripts/time_to_accuracy.sh reads them.
      say(who + ": step " + std::to_string(local_step) + " (global "
          + std::to_string(global) + ") test accuracy "
          + fixed(accuracy, 4) + " after "
          + fixed(std::chrono::duration<double>(steady::now() - start)
                    .count(),
                  1)
          + " s");
      progress.accuracy = accuracy;
      monitoring::report_training(progress);
      // Evaluating is not training: leave it out of examples/s.
      window_start = steady::now();
    }
  }
  if (replicas_watch.joinable()) {
    replicas_watch.request_stop();
    replicas_watch.join();
  }
  // Asked to stop after joining: leave, so that the cluster's membership
  // says so at once (not when its loss is seen).
  if (leaving && leaving->received() != 0) {
    say(who + ": SIG" + std::string{::sigabbrev_np(leaving->received())}
        + ": leaving the cluster after " + std::to_string(local_step)
        + " local steps (global step " + std::to_string(global) + ")");
    leave_if_joined(srv, cfg);
  }
  auto secs = std::chrono::duration<double>(steady::now() - start).count();
  auto epochs = static_cast<double>(local_step * opts.batch_size)
                / static_cast<double>(train_set.size());
  say(who + ": done: " + std::to_string(local_step) + " local steps ("
      + fixed(epochs, 1) + " epochs of its own shuffle), global step "
      + std::to_string(global) + ", " + fixed(secs, 1) + " s"
      + (sess->recoveries() > 0
           ? ", " + std::to_string(sess->recoveries())
               + " recoveries from a lost task"
           : std::string{}));
  if (tracer && local_step < *opts.trace_step)
    say(who + ": --trace_step " + std::to_string(*opts.trace_step)
        + ": no trace written, the chief ran " + std::to_string(local_step)
        + " steps");
  // The hooks' end: the chief's last checkpoint, the sync tokens.
  sess->close();
  if (chief) {
    session eval{srv.target(), config, &g};
    auto accuracy = evaluate(eval, m, *test_set, opts.eval_batch_size);
    say("test accuracy: " + fixed(accuracy, 4));
    progress.accuracy = accuracy;
    monitoring::report_training(progress);
    eval.close();
  }
  srv.stop();
  return 0;
}

// -- main ---------------------------------------------------------------------

int run(int argc, char** argv) {
  // Stop signals are taken by sigtimedwait (ps and --local) in the main
  // thread; CAF's threads and our readers inherit the mask. A worker lets
  // them kill it: it has nothing to clean up that the ps would miss.
  auto stop_signals = stop_signal_set();
  ::signal(SIGPIPE, SIG_IGN);

  auto parsed = parse_args(argc, argv);
  if (!parsed)
    return 0;
  auto& opts = *parsed;

  if (opts.local) {
    if (opts.cluster.any_cluster_flag() || opts.cluster.job
        || opts.cluster.task)
      throw usage_error("--local starts its own cluster: it cannot be "
                        "combined with --cluster, --ps_hosts, "
                        "--worker_hosts, --job_name or --task_index");
    if (opts.parent.pid)
      throw usage_error("--local cannot be combined with --parent-pid");
    check_data(opts.data_dir);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    local_plan plan;
    std::error_code ec;
    plan.self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec)
      plan.self = argv[0];
    plan.common_args = opts.forwarded;
    plan.num_ps = opts.local_ps;
    if (opts.cluster.replicate_variables) {
      if (opts.local_ps < 2)
        throw usage_error("--replicate_variables needs at least two ps "
                          "tasks: give --local_ps 2 or more");
      // Every task replicates; a ps that ends is started again and joins
      // as the backup of the task that took over its variables.
      plan.common_args.push_back("--replicate_variables");
      plan.restart_ps = true;
    }
    plan.num_workers = *opts.local;
    plan.startup_timeout = std::chrono::milliseconds{
      static_cast<int64_t>(opts.startup_timeout * 1000)};
    plan.free_ports = [](size_t n) { return support::free_ports(n); };
    plan.serving_marker = [](const std::string& job, int task) {
      return std::string{prog} + ": serving /job:" + job + "/replica:0/task:"
             + std::to_string(task) + " at ";
    };
    plan.log = [](const std::string& line) { warn(line); };
    // The tasks get the training flags of --config-file as flags, and its
    // CAF sections in a file of their own (its [actorflow] section could
    // say --local), removed on every way out.
    std::optional<support::temp_dir> caf_dir;
    if (!opts.caf_ini.empty()) {
      caf_dir.emplace("actorflow-train-caf");
      plan.common_args.push_back("--config-file="
                                 + caf_dir->write("caf.ini", opts.caf_ini));
    }
    return run_local(plan, stop_signals);
  }

  auto cfg = resolve(opts.cluster);
  // A worker that joins leaves on a stop signal (leave_on_signal).
  if (!cfg.join.empty())
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (cfg.job != "ps" && cfg.job != "worker")
    throw usage_error(opts.cluster.job_flag + ": expected ps or worker, got '"
                      + cfg.job + "'");
  if (cfg.job == "ps")
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  if (!opts.parent.watch()) {
    warn("parent " + std::to_string(*opts.parent.pid)
         + " is gone, not starting");
    return 0;
  }
  return cfg.job == "ps" ? run_ps(opts, cfg, stop_signals)
                         : run_worker(opts, cfg, stop_signals);
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main(prog, [&] { return run(argc, argv); });
}
