// actorflow-node: runs one task of a cluster (TensorFlow's
// `tf.train.Server(cluster, job_name, task_index).join()` as a process).
//
//   actorflow-node --cluster '{"worker": ["127.0.0.1:2222"]}' --job worker
//                  --task 0
//   actorflow-node --ps_hosts h:1,h:2 --worker_hosts h:3 --job_name ps
//                  --task_index 1
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}'
//     actorflow-node
//
// Exit status (support/guarded_main.hpp): 0 after SIGINT/SIGTERM, 1 if the
// server cannot start (address in use, ...), 2 for a bad command line or
// configuration.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actorflow/actorflow.hpp"

#include "cluster_flags.hpp"
#include "memory_flags.hpp"
#include "metrics_flags.hpp"
#include "peer_log.hpp"

namespace {

using namespace actorflow::apps;

constexpr const char* prog = "actorflow-node";

constexpr const char* description = R"(Runs one task of a cluster (TensorFlow's tf.train.Server) until SIGINT or
SIGTERM. Once it accepts connections it prints one line
  actorflow-node: serving /job:NAME/replica:0/task:N at HOST:PORT (...)
on stdout.

  actorflow-node --cluster JSON --job NAME [--task N]
  actorflow-node [--ps_hosts H:P,...] [--worker_hosts H:P,...]
                 --job_name NAME [--task_index N]
  TF_CONFIG='{"cluster": {...}, "task": {"type": NAME, "index": N}}'
    actorflow-node
  actorflow-node --join H:P [--job NAME] [--task_address H:P]
    (joins the running cluster of the task at H:P with the next index of
    its job, worker by default; on SIGTERM it leaves it)
)";

constexpr const char* footer = R"(Without --cluster and --*_hosts, the cluster and (unless given by flags) the
job and task come from the environment variable TF_CONFIG.

Exit status: 0 after SIGINT/SIGTERM, 1 if the server cannot start (e.g. its
address is in use), 2 for a bad command line or configuration.)";

struct options {
  cluster_flags cluster;
  metrics_flags metrics;
  memory_flag memory;
  parent_flag parent;
  /// TF's Server(config=ConfigProto(operation_timeout_in_ms=N)): the
  /// deadline of every session on this task's master that sets none.
  int64_t operation_timeout_in_ms = 0;
};

/// The options, or std::nullopt after --help.
std::optional<options> parse_args(int argc, char** argv) {
  options opts;
  command_line cl{prog, description};
  cl.footer(footer);
  auto& app = cl.app();
  opts.cluster.add_cluster_to(app);
  opts.cluster.add_task_to(app, "--job,--job_name", "--task,--task_index");
  opts.parent.add_to(app);
  app.add_option("--operation_timeout_in_ms", opts.operation_timeout_in_ms,
                 "the default deadline of every session on this task's "
                 "master that sets none (TF's Server(config=...)); 0, the "
                 "default: none")
    ->type_name("MS")
    ->check(CLI::NonNegativeNumber);
  opts.metrics.add_to(app);
  opts.memory.add_to(app);
  if (!cl.parse(argc, argv))
    return std::nullopt;
  cl.apply();
  opts.metrics.check(cl);
  opts.memory.apply();
  return opts;
}

int run(int argc, char** argv) {
  // Block the stop signals before anything starts a thread: CAF's threads
  // inherit the mask, so the signals can only be taken by sigtimedwait
  // below, in this thread, outside any signal handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Our stdout may be a pipe whose reader went away; losing the log line is
  // better than dying.
  ::signal(SIGPIPE, SIG_IGN);

  auto parsed = parse_args(argc, argv);
  if (!parsed)
    return 0;
  auto& opts = *parsed;
  // The kernel sends SIGTERM when the parent dies; if it died before this
  // line, our parent is no longer that pid and we stop right away.
  if (!opts.parent.watch()) {
    log::info("parent " + std::to_string(*opts.parent.pid)
              + " is gone, not starting");
    return 0;
  }
  auto cfg = resolve(opts.cluster);
  cfg.options.default_session_config.operation_timeout_in_ms
    = opts.operation_timeout_in_ms;
  auto srv = start_server(cfg);
  const auto& address = cfg.cluster.task_address(cfg.job, cfg.task);
  auto task_name = cfg.task_name();
  std::cout << prog << ": serving " << task_name << " at "
            << actorflow::host_port{actorflow::host_of(address), srv.port()}.to_string()
            << " (cluster: " << cfg.cluster.to_string()
            << ")" << std::endl;
  if (auto line = serve_metrics(srv, opts.metrics, prog); !line.empty())
    std::cout << line << std::endl;

  // The tasks it runs steps on, lost and back, in its log.
  peer_log peers{task_name};
  // Wait for a stop signal; wake up now and then to notice a server that
  // stopped by itself or a parent that vanished before PDEATHSIG was armed.
  int received = 0;
  timespec tick{0, 200'000'000};
  while (received == 0) {
    siginfo_t info;
    int sig = ::sigtimedwait(&stop_signals, &info, &tick);
    if (sig > 0) {
      received = sig;
    } else if (srv.stopped()) {
      log::error(task_name + " stopped");
      return 1;
    } else if (opts.parent.gone()) {
      received = SIGTERM;
    }
  }
  leave_if_joined(srv, cfg);
  srv.stop();
  log::info(task_name + " stopped on " + ::strsignal(received));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  actorflow::support::guarded_main(prog, [&] { return run(argc, argv); });
}
