#pragma once

// A cluster of `actorflow-node` processes on free loopback ports, for the
// seed examples, the bench and the integration tests: each node is a
// child_process (process.hpp), started with --parent-pid so it dies with
// us, waited for (with a deadline) until it prints its serving line, and
// stopped and reaped by the destructor, also when the caller leaves by an
// exception.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/support/free_ports.hpp"
#include "actorflow/support/process.hpp"

namespace actorflow::support {

/// The `actorflow-node` launcher (see find_program; `override_path` is
/// --node's). Throws std::runtime_error if none is found or
/// `override_path` is not executable.
std::string find_node_binary(const std::string& override_path = {});

/// The argv that starts task `task` of `job` of `spec`. `--parent-pid`
/// makes the node exit when we die without cleaning up (killed by a test
/// runner's timeout, say), so no node outlives its owner. Linux ties that
/// to the spawning *thread*: spawn from a thread that outlives the node.
std::vector<std::string> node_command(const std::string& node_binary,
                                      const cluster_spec& spec,
                                      const std::string& job, int task);

/// The line a node prints once it serves.
std::string serving_marker(const std::string& job, int task);

/// Where a task of a local_cluster runs (cluster_options::host).
struct task_host {
  /// The address its cluster entry names (with a free port).
  std::string ip = "127.0.0.1";
  /// The command its node starts under, e.g. {"/usr/sbin/ip", "netns",
  /// "exec", NAME} for a network namespace; empty: started directly.
  std::vector<std::string> launcher = {};
};

struct cluster_options {
  /// Tasks that are in the spec but not started: their ports stay closed,
  /// for tests of unreachable peers.
  std::vector<std::pair<std::string, int>> not_started;
  /// See spawn_options::capture_stderr.
  bool capture_stderr = false;
  /// See spawn_options::echo_stdout. On by default: whoever watches an
  /// example sees the nodes' logs, as in a real cluster's terminals.
  bool echo_stdout = true;
  /// How long all nodes together may take to print their serving line.
  std::chrono::milliseconds startup_timeout = std::chrono::seconds{15};
  /// Another process may grab one of our free ports before the node binds
  /// it; then the whole cluster starts over on fresh ports.
  int attempts = 3;
  /// See spawn_options::env: the nodes' environment changes.
  std::vector<std::string> env;
  /// More flags for every node (e.g. --tls_cert FILE).
  std::vector<std::string> args;
  /// Where each task runs (the bench's simulated hosts); unset: every task
  /// on loopback, started directly.
  std::function<task_host(const std::string& job, int task)> host;
};

/// A cluster of `actorflow-node` processes on free loopback ports (or
/// where cluster_options::host places them), one per task. The destructor
/// stops and reaps them all.
class local_cluster {
public:
  /// Starts the nodes of `jobs` (job name -> number of tasks) and waits
  /// until every started one serves, at most `opts.startup_timeout` per
  /// attempt. Blocks. Throws std::runtime_error saying which node did not
  /// serve (and why) after `opts.attempts` attempts.
  local_cluster(std::string node_binary,
                std::vector<std::pair<std::string, int>> jobs,
                cluster_options opts = {});

  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  ~local_cluster();

  const cluster_spec& spec() const noexcept {
    return spec_;
  }

  /// "127.0.0.1:PORT" (or the task's host's address).
  const std::string& address(const std::string& job, int task) const {
    return spec_.task_address(job, task);
  }

  /// "grpc://127.0.0.1:PORT", as the seeds spell their session targets.
  std::string target(const std::string& job, int task) const {
    return "grpc://" + address(job, task);
  }

  /// The node process of a started task; std::out_of_range for another.
  child_process& process(const std::string& job, int task);

  /// Stops every node: SIGTERM to all at once, SIGKILL to those still
  /// running 5 s later; reaps all. Blocks until they are gone.
  void stop() noexcept;

private:
  bool started(const std::string& job, int task) const;
  bool try_start(std::string& why);

  std::string node_;
  std::vector<std::pair<std::string, int>> jobs_;
  cluster_options opts_;
  cluster_spec spec_;
  std::map<std::string, std::unique_ptr<child_process>> procs_;
};

/// The command line of a seed program (CLI11): --node PATH, the
/// actorflow-node to spawn, and --help, besides the flags the program
/// declares on app().
class example_flags {
public:
  /// `description` opens the help.
  explicit example_flags(std::string description);

  CLI::App& app() noexcept {
    return app_;
  }

  /// Parses argv. False after --help (the help is on stdout). usage_error
  /// naming the flag.
  bool parse(int argc, char** argv);

  /// The launcher: --node, else the one next to this program, else the
  /// first on $PATH. Throws std::runtime_error if none is found.
  std::string node_binary() const;

private:
  CLI::App app_;
  std::string node_;
};

} // namespace actorflow::support
