#pragma once

// The cluster, job and task of a process from TensorFlow-style flags,
// declared here once for actorflow-node, actorflow-train and
// actorflow-console: --cluster JSON, or --ps_hosts/--worker_hosts
// (comma-separated "host:port" lists), or the TF_CONFIG environment
// variable; --job_name/--task_index (or TF_CONFIG's task); and
// --parent-pid, the launcher a task must not outlive. Errors are
// usage_error, naming the flag or variable at fault.

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actorflow/transport/host_port.hpp"
#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/support/free_ports.hpp"
#include "actorflow/support/log.hpp"
#include "command_line.hpp"

namespace actorflow::apps {

/// The cluster flags as given (each std::nullopt when absent).
struct cluster_flags {
  std::optional<std::string> cluster_json;
  std::optional<std::string> ps_hosts;
  std::optional<std::string> worker_hosts;
  std::optional<std::string> job;
  std::string job_flag = "--job_name";
  std::optional<std::string> task;
  std::string task_flag = "--task_index";
  /// --bind_host: server_options::bind_host.
  std::string bind_host;
  /// --replicate_variables: server_options::replicate_variables (also
  /// TF_CONFIG's "replicate_variables": true).
  bool replicate_variables = false;
  /// --join HOST:PORT: join the running cluster a task of which listens
  /// there (server::join_cluster) instead of being named by a ClusterSpec.
  std::optional<std::string> join;
  /// --task_address HOST:PORT: with --join, where this task listens.
  std::optional<std::string> task_address;
  /// Other ways to give a cluster, for the "missing --cluster" message.
  std::string other_sources;

  /// True if the cluster comes from a flag (not from TF_CONFIG).
  bool any_cluster_flag() const noexcept {
    return cluster_json || ps_hosts || worker_hosts;
  }

  /// Declares --cluster, --ps_hosts and --worker_hosts on `app`.
  void add_cluster_to(CLI::App& app) {
    app.add_option("--cluster", cluster_json,
                   "the cluster, job -> list of \"host:port\" or "
                   "{\"index\": \"host:port\"}")
      ->type_name("JSON")
      ->group("Cluster");
    app.add_option("--ps_hosts", ps_hosts,
                   "comma-separated addresses of job \"ps\"")
      ->type_name("LIST")
      ->check(support::list_of(support::host_port_address()))
      ->group("Cluster");
    app.add_option("--worker_hosts", worker_hosts,
                   "comma-separated addresses of job \"worker\"")
      ->type_name("LIST")
      ->check(support::list_of(support::host_port_address()))
      ->group("Cluster");
  }

  /// Declares the job and task flags on `app`: `job_names` and
  /// `task_names` ("--job,--job_name"), whose first names messages use.
  void add_task_to(CLI::App& app, const std::string& job_names,
                   const std::string& task_names) {
    job_flag = job_names.substr(0, job_names.find(','));
    task_flag = task_names.substr(0, task_names.find(','));
    app.add_option(job_names, job, "this task's job")
      ->type_name("NAME")
      ->group("Cluster");
    app.add_option(task_names, task,
                   "this task's index; may be omitted when the job has a "
                   "single task")
      ->type_name("N")
      ->check(support::task_index())
      ->group("Cluster");
    app.add_option("--bind_host", bind_host,
                   "the address this task's port listens on (default: the "
                   "one its own entry in the cluster names, which must be "
                   "this host's; 0.0.0.0 listens on every interface, as "
                   "TensorFlow does)")
      ->type_name("ADDRESS")
      ->group("Cluster");
    app.add_option("--join", join,
                   "join the running cluster one of whose tasks listens at "
                   "HOST:PORT, as a new task of --job_name (default "
                   "worker) with the next free index; instead of --cluster "
                   "and --task_index. On SIGTERM the task leaves the "
                   "cluster; killed or silent, it is removed")
      ->type_name("HOST:PORT")
      ->check(support::host_port_address())
      ->group("Cluster");
    app.add_option("--task_address", task_address,
                   "with --join: the address the other tasks reach this "
                   "one at (default 127.0.0.1 and a free port)")
      ->type_name("HOST:PORT")
      ->check(support::host_port_address())
      ->group("Cluster");
    add_replication_to(app);
  }

  /// Declares --replicate_variables on `app`.
  void add_replication_to(CLI::App& app) {
    app.add_flag("--replicate_variables", replicate_variables,
                 "give every variable of job \"ps\" a backup on the job's "
                 "next task, which takes over when its task is lost "
                 "(cluster-wide: give it to every task; needs two ps tasks "
                 "or more)")
      ->group("Cluster");
  }
};

/// --parent-pid PID: the process (our parent, the launcher) this one must
/// not outlive.
struct parent_flag {
  std::optional<pid_t> pid;

  void add_to(CLI::App& app) {
    app.add_option("--parent-pid", pid,
                   "exit (as on SIGTERM) when process PID, our parent, "
                   "dies")
      ->type_name("PID")
      ->check(support::process_id())
      ->group("Cluster");
  }

  /// With --parent-pid: asks the kernel for SIGTERM when the parent dies
  /// (PR_SET_PDEATHSIG). False if it is gone already (our parent is no
  /// longer that process): the caller should stop without starting.
  bool watch() const {
    if (!pid)
      return true;
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    return !gone();
  }

  /// True if --parent-pid names a process that is no longer our parent (it
  /// died before PR_SET_PDEATHSIG was armed, say).
  bool gone() const {
    return pid && ::getppid() != *pid;
  }
};

/// The cluster, job and task this process serves.
struct task_config {
  cluster_spec cluster;
  std::string job;
  int task = 0;
  server_options options;
  /// --join's contact and --task_address: the cluster and the index come
  /// from the cluster when the server starts (start_server).
  std::string join;
  std::string join_address;

  std::string task_name() const {
    return actorflow::task_name(job, task);
  }
};

/// The cluster alone (the console's view), and the job and task that
/// TF_CONFIG names, if it does, in `job`/`task` with their sources; when
/// TF_CONFIG says `"replicate_variables": true`, `*replicate` is set.
inline cluster_spec resolve_cluster(const cluster_flags& flags,
                                    std::optional<std::string>& job,
                                    std::optional<std::string>& task,
                                    std::string& job_source,
                                    std::string& task_source,
                                    bool* replicate = nullptr) {
  task_config cfg;
  if (flags.cluster_json && (flags.ps_hosts || flags.worker_hosts))
    throw usage_error("--cluster cannot be combined with --ps_hosts or "
                      "--worker_hosts");
  if (flags.cluster_json) {
    try {
      cfg.cluster = cluster_spec::from_json(*flags.cluster_json);
    } catch (const op_error& e) {
      throw usage_error("--cluster: " + e.get_status().message());
    }
  } else if (flags.ps_hosts || flags.worker_hosts) {
    std::map<std::string, std::vector<std::string>> jobs;
    if (flags.ps_hosts)
      jobs["ps"] = split_list("--ps_hosts", *flags.ps_hosts);
    if (flags.worker_hosts)
      jobs["worker"] = split_list("--worker_hosts", *flags.worker_hosts);
    cfg.cluster = cluster_spec{jobs};
  } else if (const char* text = std::getenv("TF_CONFIG"); text && *text) {
    nlohmann::json tf_config;
    try {
      tf_config = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw usage_error(std::string{"TF_CONFIG: not JSON: "} + e.what());
    }
    if (!tf_config.is_object() || !tf_config.contains("cluster"))
      throw usage_error("TF_CONFIG: expected an object with a \"cluster\"");
    try {
      cfg.cluster = cluster_spec::from_json(tf_config["cluster"].dump());
    } catch (const op_error& e) {
      throw usage_error("TF_CONFIG: cluster: " + e.get_status().message());
    }
    if (tf_config.contains("replicate_variables")) {
      if (!tf_config["replicate_variables"].is_boolean())
        throw usage_error("TF_CONFIG: replicate_variables must be true or "
                          "false");
      if (replicate != nullptr && tf_config["replicate_variables"].get<bool>())
        *replicate = true;
    }
    // Flags win over TF_CONFIG's task, as TF_CONFIG is often inherited.
    if (tf_config.contains("task")) {
      const auto& t = tf_config["task"];
      if (!t.is_object())
        throw usage_error("TF_CONFIG: \"task\" must be an object");
      if (!job && t.contains("type")) {
        if (!t["type"].is_string())
          throw usage_error("TF_CONFIG: task.type must be a string");
        job = t["type"].get<std::string>();
        job_source = "TF_CONFIG task.type";
      }
      if (!task && t.contains("index")) {
        if (t["index"].is_number_integer())
          task = std::to_string(t["index"].get<long long>());
        else if (t["index"].is_string())
          task = t["index"].get<std::string>();
        else
          throw usage_error("TF_CONFIG: task.index must be an integer");
        task_source = "TF_CONFIG task.index";
      }
    }
  } else {
    throw usage_error("missing --cluster (or --ps_hosts/--worker_hosts, the "
                      "TF_CONFIG environment variable"
                      + flags.other_sources + ")");
  }
  return cfg.cluster;
}

inline task_config resolve(const cluster_flags& flags) {
  task_config cfg;
  if (flags.join) {
    if (flags.any_cluster_flag() || flags.task)
      throw usage_error("--join takes the cluster and this task's index "
                        "from the running cluster: it cannot be combined "
                        "with --cluster, --ps_hosts, --worker_hosts or "
                        + flags.task_flag);
    cfg.join = *flags.join;
    cfg.job = flags.job.value_or("worker");
    if (cfg.job == "ps")
      throw usage_error(flags.job_flag + ": ps tasks are named by the "
                        "ClusterSpec; only tasks without variables "
                        "(workers) join a running cluster");
    cfg.join_address = flags.task_address.value_or(
      "127.0.0.1:" + std::to_string(support::free_ports(1).front()));
    if (host_port hp; host_port::parse(cfg.join_address, hp).ok()
                      && hp.port == 0)
      throw usage_error("--task_address: port 0 cannot be reached by the "
                        "other tasks; name a port");
    cfg.options.replicate_variables = flags.replicate_variables;
    cfg.options.bind_host = flags.bind_host;
    return cfg;
  }
  if (flags.task_address)
    throw usage_error("--task_address is for --join: a ClusterSpec names "
                      "every task's address");
  auto job = flags.job;
  auto task = flags.task;
  auto job_source = flags.job_flag;
  auto task_source = flags.task_flag;
  cfg.options.replicate_variables = flags.replicate_variables;
  cfg.cluster = resolve_cluster(flags, job, task, job_source, task_source,
                                &cfg.options.replicate_variables);
  cfg.options.bind_host = flags.bind_host;
  if (cfg.options.replicate_variables)
    if (auto err = check_replicate_variables(cfg.cluster); !err.ok())
      throw usage_error("--" + err.message());
  if (!job || job->empty())
    throw usage_error("missing " + flags.job_flag + " (which job of the "
                      "cluster this task belongs to)");
  if (!cfg.cluster.has_job(*job)) {
    std::string known;
    for (const auto& name : cfg.cluster.jobs())
      known += (known.empty() ? "" : ", ") + name;
    throw usage_error(job_source + ": no job '" + *job
                      + "' in the cluster (jobs: " + known + ")");
  }
  cfg.job = *job;
  auto indices = cfg.cluster.task_indices(cfg.job);
  if (!task) {
    if (indices.size() != 1)
      throw usage_error("missing " + flags.task_flag + " (job '" + cfg.job
                        + "' has " + std::to_string(indices.size())
                        + " tasks)");
    cfg.task = indices.front();
    return cfg;
  }
  auto index = parse_index(*task);
  if (!index || *index > 1'000'000)
    throw usage_error(task_source + ": expected a task index, got '" + *task
                      + "'");
  cfg.task = static_cast<int>(*index);
  if (!cfg.cluster.has_task(cfg.job, cfg.task))
    throw usage_error(task_source + ": job '" + cfg.job + "' has no task "
                      + std::to_string(cfg.task));
  return cfg;
}

/// Starts the server of `cfg`'s task; blocks while it binds. Errors:
/// op_error with the server's code, its message saying "could not start
/// TASK at ADDRESS: " first (actorflow-train --local looks for that
/// phrase: a task whose port was taken meanwhile); a --tls_cert that is not
/// for the task's host is InvalidArgument "--tls_cert: FILE (certificate
/// ...) is not for HOST, the host of task ..." (exit status 2, no retry).
/// With --join, the task joins the running cluster (server::join_cluster)
/// and `cfg` gets its cluster and index; errors say "--join: " first.
inline server start_server(task_config& cfg) {
  try {
    if (!cfg.join.empty()) {
      auto srv = server::join_cluster(cfg.join, cfg.job, cfg.join_address,
                                      cfg.options);
      cfg.cluster = srv.cluster();
      cfg.task = srv.task_index();
      return srv;
    }
    return server{cfg.cluster, cfg.job, cfg.task, cfg.options};
  } catch (const op_error& e) {
    if (!cfg.join.empty())
      throw op_error(e.code(), "--join: " + e.get_status().message());
    const auto& message = e.get_status().message();
    // The TLS files are the flags' ("tls_cert: ..." names --tls_cert).
    if (e.code() == error_code::invalid_argument
        && message.starts_with("tls_"))
      throw op_error(e.code(), "--" + message);
    throw op_error(e.code(), "could not start " + cfg.task_name() + " at "
                               + cfg.cluster.task_address(cfg.job, cfg.task)
                               + ": " + message);
  }
}

/// A task that joined (--join) leaves its cluster (server::leave), so
/// that no task waits for it; a failure is logged, not thrown: the task
/// stops anyway and the cluster sees it lost. Blocks up to 15 s; does
/// nothing for a task of the ClusterSpec.
inline void leave_if_joined(server& srv, const task_config& cfg) {
  if (cfg.join.empty())
    return;
  try {
    srv.leave();
    support::log::info(cfg.task_name() + " left the cluster");
  } catch (const op_error& e) {
    support::log::warning(e.get_status().message());
  }
}

} // namespace actorflow::apps
