#pragma once

// actorflow-train's flags, each declared once with CLI11 (its validator,
// its help text): the cluster's, the metrics', --local, and the training
// flags that the tasks of --local get as given. Included by
// actorflow-train.cpp only.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/train/fashion_mnist.hpp"
#include "cluster_flags.hpp"
#include "memory_flags.hpp"
#include "metrics_flags.hpp"

namespace actorflow::apps {

inline constexpr const char* prog = "actorflow-train";

inline constexpr const char* description = R"(Trains a classifier on Fashion-MNIST with between-graph replication, as
TensorFlow 1.x's distributed trainer: ps tasks hold the variables (round
robin), each worker runs the whole model on its own mini-batches and sends
its gradients to the ps tasks, which apply them (asynchronously, or with
--sync averaged over the workers per update). Worker 0 is the chief: it
initializes (or restores) the variables and prints the test accuracy at
the end.

  actorflow-train --ps_hosts H:P,... --worker_hosts H:P,...
                  --job_name ps|worker --task_index N [training flags]
  actorflow-train --cluster JSON --job_name NAME --task_index N [...]
  TF_CONFIG='{"cluster": {...}, "task": {...}}' actorflow-train [...]
  actorflow-train --local N [training flags]
  actorflow-train --join H:P [--task_address H:P] [training flags]
                  (a worker joins a running asynchronous job; on SIGTERM
                  it leaves it)
)";

inline constexpr const char* footer = R"(Without --cluster, --*_hosts and --local, the cluster comes from TF_CONFIG.
With --local, the tasks get the training, metrics, memory and common flags.

Exit status: 0 on success (ps: after SIGINT/SIGTERM), 1 for a run-time
failure (missing data, a server that cannot start, a lost task), 2 for a
bad command line or configuration, 128 + N when --local is stopped by
signal N.)";

struct train_options {
  cluster_flags cluster;
  metrics_flags metrics;
  memory_flag memory;
  parent_flag parent;
  std::optional<int> local;
  int local_ps = 1;
  std::string model = "mlp";
  std::optional<std::string> hidden;
  std::string filters = "16,32";
  std::string optimizer = "adam";
  std::optional<double> learning_rate;
  std::optional<int64_t> decay_steps;
  double decay_rate = 0.5;
  std::optional<double> keep_prob;
  double momentum = 0.9;
  int64_t batch_size = 100;
  std::optional<int64_t> train_steps;
  int64_t log_every = 100;
  int64_t seed = 1;
  std::string data_dir = fashion_mnist::default_dir;
  int64_t eval_batch_size = 1000;
  int64_t eval_every = 0;
  std::optional<std::string> checkpoint_dir;
  int64_t save_steps = 1000;
  bool sync = false;
  /// --elastic: with --sync, the replicas per update follow the membership.
  bool elastic = false;
  std::optional<int64_t> replicas_to_aggregate;
  double startup_timeout = 60;
  double step_timeout = 60;
  std::optional<int64_t> trace_step;
  std::optional<std::string> trace_file;
  /// The CAF sections of --config-file, for the tasks of --local.
  std::string caf_ini;
  /// The flags the tasks of --local get ("--name=value"): the common
  /// flags, the metrics and training flags as given.
  std::vector<std::string> forwarded;
};

/// The widths of a list --hidden or --filters accepted ("256,128").
inline std::vector<int64_t> widths(const std::string& list) {
  std::vector<int64_t> result;
  for (const auto& item : support::split_list(list))
    result.push_back(std::stoll(item));
  return result;
}

/// The options, or std::nullopt after --help.
inline std::optional<train_options> parse_args(int argc, char** argv) {
  using support::integer_in;
  constexpr long long many = 1'000'000'000'000;
  train_options opts;
  opts.cluster.other_sources = ", or --local N";
  command_line cl{prog, description};
  cl.footer(footer);
  auto& app = cl.app();
  opts.cluster.add_cluster_to(app);
  opts.cluster.add_task_to(app, "--job_name,--job", "--task_index,--task");
  opts.parent.add_to(app);
  app.add_option("--local", opts.local,
                 "run the ps tasks and N workers as child processes on free "
                 "loopback ports; their output is shown prefixed with "
                 "job/task, the exit status is the chief's")
    ->type_name("N")
    ->check(integer_in(1, 64))
    ->group("Cluster");
  app.add_option("--local_ps", opts.local_ps,
                 "number of ps tasks with --local")
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(1, 16))
    ->group("Cluster");
  opts.metrics.add_to(app);
  auto* memory_limit = opts.memory.add_to(app);
  // The training flags, which the tasks of --local get as given.
  std::vector<CLI::Option*> training;
  auto train = [&](CLI::Option* opt) {
    training.push_back(opt->group("Training (workers)"));
    return opt;
  };
  train(app.add_option("--model", opts.model, "softmax, mlp or cnn"))
    ->type_name("NAME")
    ->capture_default_str()
    ->check(support::one_of({"softmax", "mlp", "cnn"}));
  train(app.add_option("--hidden", opts.hidden,
                       "hidden layer widths (default 256,128 for mlp, 256 "
                       "for cnn's fully connected layer)"))
    ->type_name("LIST")
    ->check(support::list_of(integer_in(1, 65536)));
  train(app.add_option("--filters", opts.filters,
                       "the cnn's two convolutions' channels"))
    ->type_name("LIST")
    ->capture_default_str()
    ->check(support::list_of(integer_in(1, 4096), 2));
  train(app.add_option("--optimizer", opts.optimizer,
                       "sgd, momentum or adam"))
    ->type_name("NAME")
    ->capture_default_str()
    ->check(support::one_of({"sgd", "momentum", "adam"}));
  train(app.add_option("--learning_rate", opts.learning_rate,
                       "default: adam 0.001 (softmax: 0.0005), momentum "
                       "0.01, sgd 0.1"))
    ->type_name("X")
    ->check(support::positive_number());
  train(app.add_option("--decay_steps", opts.decay_steps,
                       "decay the learning rate exponentially: times "
                       "--decay_rate every N global steps "
                       "(tf.train.exponential_decay; 0: constant; default: "
                       "cnn 5000, others 0)"))
    ->type_name("N")
    ->check(integer_in(0, many));
  train(app.add_option("--decay_rate", opts.decay_rate,
                       "the learning rate's factor per --decay_steps"))
    ->type_name("X")
    ->capture_default_str()
    ->check(support::positive_number())
    ->check(support::number_below(1));
  train(app.add_option("--keep_prob", opts.keep_prob,
                       "dropout after the hidden fully connected layers "
                       "(mlp, cnn): the probability of keeping a unit while "
                       "training (1: no dropout; default: cnn 0.5, "
                       "others 1)"))
    ->type_name("X")
    ->check(support::positive_number())
    ->check(support::number_at_most(1));
  train(app.add_option("--momentum", opts.momentum,
                       "for --optimizer momentum"))
    ->type_name("X")
    ->capture_default_str()
    ->check(support::positive_number())
    ->check(support::number_below(1));
  train(app.add_option("--batch_size", opts.batch_size,
                       "examples per step and worker"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(1, 10000));
  train(app.add_option("--train_steps", opts.train_steps,
                       "stop at this global step (default: softmax 15000, "
                       "mlp 20000, cnn 2000)"))
    ->type_name("N")
    ->check(integer_in(1, many));
  train(app.add_option("--log_every", opts.log_every,
                       "print progress every N local steps"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(1, many));
  train(app.add_option("--seed", opts.seed,
                       "initializer and shuffle seed (each worker shuffles "
                       "with its own seed derived from it)"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(0, many));
  train(app.add_option("--data_dir", opts.data_dir, "the gzip IDX files"))
    ->type_name("DIR")
    ->capture_default_str()
    ->check(support::non_empty());
  train(app.add_option("--eval_batch_size", opts.eval_batch_size,
                       "test images per evaluation step"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(1, many));
  train(app.add_option("--eval_every", opts.eval_every,
                       "the chief also reports the test accuracy every N "
                       "local steps (0: only at the end)"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(0, many));
  train(app.add_option("--checkpoint_dir", opts.checkpoint_dir,
                       "the chief restores the latest checkpoint there and "
                       "saves every --save_steps global steps"))
    ->type_name("DIR")
    ->check(support::non_empty());
  train(app.add_option("--save_steps", opts.save_steps,
                       "global steps between checkpoints"))
    ->type_name("N")
    ->capture_default_str()
    ->check(integer_in(1, many));
  train(app.add_flag("--sync", opts.sync,
                     "synchronous replication (SyncReplicasOptimizer)"));
  train(app.add_flag("--elastic", opts.elastic,
                     "with --sync: every update aggregates one gradient per "
                     "worker of the cluster's membership, which workers "
                     "join (--join) and leave; give it to every worker"));
  train(app.add_option("--replicas_to_aggregate", opts.replicas_to_aggregate,
                       "with --sync (default: the number of workers)"))
    ->type_name("N")
    ->check(integer_in(1, many));
  train(app.add_option("--startup_timeout", opts.startup_timeout,
                       "how long a worker waits for the ps tasks and the "
                       "chief's initialization, in seconds"))
    ->type_name("S")
    ->capture_default_str()
    ->check(support::positive_number());
  train(app.add_option("--step_timeout", opts.step_timeout,
                       "deadline of one training step, in seconds"))
    ->type_name("S")
    ->capture_default_str()
    ->check(support::positive_number());
  train(app.add_option("--trace_step", opts.trace_step,
                       "the chief traces its N-th training step (full "
                       "trace, every task's ops) ..."))
    ->type_name("N")
    ->check(integer_in(1, many));
  train(app.add_option("--trace_file", opts.trace_file,
                       "... and writes it there as Chrome trace-event JSON "
                       "(chrome://tracing, ui.perfetto.dev); both or "
                       "neither"))
    ->type_name("FILE")
    ->check(support::non_empty());
  if (!cl.parse(argc, argv))
    return std::nullopt;
  cl.apply();
  opts.caf_ini = cl.caf_ini();
  opts.forwarded = cl.common_args();
  for (auto* opt : {app.get_option("--metrics_port"),
                    app.get_option("--metrics_host"),
                    app.get_option("--metrics_tls"), memory_limit})
    training.push_back(opt);
  for (auto& arg : cl.as_args(training))
    opts.forwarded.push_back(std::move(arg));
  if (opts.replicas_to_aggregate && !opts.sync)
    throw usage_error("--replicas_to_aggregate needs --sync");
  if (opts.elastic && !opts.sync)
    throw usage_error("--elastic needs --sync (asynchronous training takes "
                      "joining workers as they come)");
  if (opts.elastic && opts.replicas_to_aggregate)
    throw usage_error("--elastic aggregates one gradient per worker: it "
                      "cannot be combined with --replicas_to_aggregate");
  if (opts.trace_step.has_value() != opts.trace_file.has_value())
    throw usage_error(opts.trace_step ? "--trace_step needs --trace_file"
                                      : "--trace_file needs --trace_step");
  opts.metrics.check(cl);
  opts.memory.apply();
  // The tasks of --local share a host: one port cannot serve them all.
  if (opts.local && opts.metrics.port && *opts.metrics.port != 0)
    throw usage_error("--metrics_port with --local: only 0 (each task picks "
                      "a free port and prints it)");
  return opts;
}

} // namespace actorflow::apps
