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
// Exit codes: 0 after SIGINT/SIGTERM, 1 if the server cannot start (address
// in use, ...), 2 for a bad command line or configuration.

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
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

namespace {

constexpr const char* prog = "actorflow-node";

constexpr const char* usage_text = R"(usage: actorflow-node --cluster JSON --job NAME [--task N]
       actorflow-node [--ps_hosts H:P,...] [--worker_hosts H:P,...]
                      --job_name NAME [--task_index N]
       TF_CONFIG='{"cluster": {...}, "task": {"type": NAME, "index": N}}'
         actorflow-node

Runs one task of a cluster (TensorFlow's tf.train.Server) until SIGINT or
SIGTERM. Once it accepts connections it prints one line
  actorflow-node: serving /job:NAME/replica:0/task:N at HOST:PORT (...)
on stdout.

  --cluster JSON       the cluster, job -> list of "host:port" or
                       {"index": "host:port"}
  --job NAME           this task's job (alias --job_name)
  --task N             this task's index (alias --task_index); may be
                       omitted when the job has a single task
  --ps_hosts LIST      comma-separated addresses of job "ps"
  --worker_hosts LIST  comma-separated addresses of job "worker"
  --parent-pid PID     exit (as on SIGTERM) when process PID, our parent,
                       dies
  --help               this text

Without --cluster and --*_hosts, the cluster and (unless given by flags) the
job and task come from the environment variable TF_CONFIG.

Exit status: 0 after SIGINT/SIGTERM, 1 if the server cannot start (e.g. its
address is in use), 2 for a bad command line or configuration.
)";

/// A bad command line or configuration; exit code 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct options {
  std::optional<std::string> cluster_json;
  std::optional<std::string> ps_hosts;
  std::optional<std::string> worker_hosts;
  std::optional<std::string> job;
  std::string job_flag = "--job";
  std::optional<std::string> task;
  std::string task_flag = "--task";
  std::optional<std::string> parent_pid;
  bool help = false;
};

/// A strict non-negative decimal integer: "1x", "-1", "" and "+1" fail.
std::optional<long long> parse_index(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                   value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0
      || text.empty())
    return std::nullopt;
  return value;
}

options parse_args(int argc, char** argv) {
  options opts;
  // Flags that take a value, and where each one's value goes.
  auto slot = [&](std::string_view name) -> std::optional<std::string>* {
    if (name == "--cluster")
      return &opts.cluster_json;
    if (name == "--ps_hosts")
      return &opts.ps_hosts;
    if (name == "--worker_hosts")
      return &opts.worker_hosts;
    if (name == "--job" || name == "--job_name") {
      opts.job_flag = std::string{name};
      return &opts.job;
    }
    if (name == "--task" || name == "--task_index") {
      opts.task_flag = std::string{name};
      return &opts.task;
    }
    if (name == "--parent-pid")
      return &opts.parent_pid;
    return nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      opts.help = true;
      continue;
    }
    auto eq = arg.find('=');
    auto name = arg.substr(0, eq);
    auto* dst = arg.starts_with("--") ? slot(name) : nullptr;
    if (dst == nullptr)
      throw usage_error("unknown argument '" + std::string{arg} + "'");
    if (dst->has_value())
      throw usage_error(std::string{name} + " given twice");
    if (eq != std::string_view::npos)
      *dst = std::string{arg.substr(eq + 1)};
    else if (i + 1 < argc)
      *dst = std::string{argv[++i]};
    else
      throw usage_error(std::string{name} + " needs a value");
  }
  return opts;
}

/// "a,b,c" -> {a, b, c}; empty entries are an error naming the flag.
std::vector<std::string> split_hosts(const std::string& flag,
                                     const std::string& list) {
  std::vector<std::string> result;
  size_t begin = 0;
  for (;;) {
    auto comma = list.find(',', begin);
    auto item = list.substr(begin, comma == std::string::npos
                                     ? std::string::npos
                                     : comma - begin);
    if (item.empty())
      throw usage_error(flag + ": empty address in '" + list + "'");
    result.push_back(item);
    if (comma == std::string::npos)
      return result;
    begin = comma + 1;
  }
}

/// The cluster, job and task this process serves.
struct task_config {
  actorflow::cluster_spec cluster;
  std::string job;
  int task = 0;
};

task_config resolve(const options& opts) {
  task_config cfg;
  auto job = opts.job;
  auto task = opts.task;
  // Where job and task came from, for error messages.
  auto job_source = opts.job_flag;
  auto task_source = opts.task_flag;
  if (opts.cluster_json && (opts.ps_hosts || opts.worker_hosts))
    throw usage_error("--cluster cannot be combined with --ps_hosts or "
                      "--worker_hosts");
  if (opts.cluster_json) {
    try {
      cfg.cluster = actorflow::cluster_spec::from_json(*opts.cluster_json);
    } catch (const actorflow::op_error& e) {
      throw usage_error("--cluster: " + e.get_status().message());
    }
  } else if (opts.ps_hosts || opts.worker_hosts) {
    std::map<std::string, std::vector<std::string>> jobs;
    if (opts.ps_hosts)
      jobs["ps"] = split_hosts("--ps_hosts", *opts.ps_hosts);
    if (opts.worker_hosts)
      jobs["worker"] = split_hosts("--worker_hosts", *opts.worker_hosts);
    cfg.cluster = actorflow::cluster_spec{jobs};
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
      cfg.cluster = actorflow::cluster_spec::from_json(
        tf_config["cluster"].dump());
    } catch (const actorflow::op_error& e) {
      throw usage_error("TF_CONFIG: cluster: " + e.get_status().message());
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
    throw usage_error("missing --cluster (or --ps_hosts/--worker_hosts, or "
                      "the TF_CONFIG environment variable)");
  }
  if (!job || job->empty())
    throw usage_error("missing " + opts.job_flag + " (which job of the "
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
    // As TF's Server: a job with a single task needs no index.
    if (indices.size() != 1)
      throw usage_error("missing " + opts.task_flag + " (job '" + cfg.job
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

/// "host" of "host:port" (IPv6 brackets kept).
std::string host_of(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos
      || address.find(']', colon) != std::string::npos)
    return address;
  return address.substr(0, colon);
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

  auto opts = parse_args(argc, argv);
  if (opts.help) {
    std::cout << usage_text << std::flush;
    return 0;
  }
  std::optional<pid_t> parent;
  if (opts.parent_pid) {
    auto pid = parse_index(*opts.parent_pid);
    if (!pid || *pid <= 1)
      throw usage_error("--parent-pid: expected a process id, got '"
                        + *opts.parent_pid + "'");
    parent = static_cast<pid_t>(*pid);
    // The kernel sends SIGTERM when the parent dies; if it died before
    // this line, our parent is no longer that pid and we stop right away.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != *parent) {
      std::cerr << prog << ": parent " << *parent << " is gone, not starting"
                << std::endl;
      return 0;
    }
  }
  auto cfg = resolve(opts);
  const auto& address = cfg.cluster.task_address(cfg.job, cfg.task);
  auto task_name = "/job:" + cfg.job + "/replica:0/task:"
                   + std::to_string(cfg.task);

  std::optional<actorflow::server> srv;
  try {
    srv.emplace(cfg.cluster, cfg.job, cfg.task);
  } catch (const actorflow::op_error& e) {
    std::cerr << prog << ": could not start " << task_name << " at "
              << address << ": " << e.what() << std::endl;
    return e.code() == actorflow::error_code::invalid_argument ? 2 : 1;
  }
  std::cout << prog << ": serving " << task_name << " at " << host_of(address)
            << ':' << srv->port() << " (cluster: " << cfg.cluster.to_string()
            << ")" << std::endl;

  // Wait for a stop signal; wake up now and then to notice a server that
  // stopped by itself or a parent that vanished before PDEATHSIG was armed.
  int received = 0;
  timespec tick{0, 200'000'000};
  while (received == 0) {
    siginfo_t info;
    int sig = ::sigtimedwait(&stop_signals, &info, &tick);
    if (sig > 0) {
      received = sig;
    } else if (srv->stopped()) {
      std::cerr << prog << ": " << task_name << " stopped" << std::endl;
      return 1;
    } else if (parent && ::getppid() != *parent) {
      received = SIGTERM;
    }
  }
  srv->stop();
  // One write, so lines of several nodes sharing a terminal don't mix.
  std::cerr << (std::string{prog} + ": " + task_name + " stopped on "
                + ::strsignal(received) + "\n")
            << std::flush;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const usage_error& e) {
    std::cerr << prog << ": " << e.what() << " (see --help)" << std::endl;
    code = 2;
  } catch (const actorflow::op_error& e) {
    std::cerr << prog << ": " << e.what() << std::endl;
    code = e.code() == actorflow::error_code::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << prog << ": " << e.what() << std::endl;
    code = 1;
  }
  // The server is stopped (unpublished, its actors told to exit) by now,
  // but CAF's threads may still be taking the last messages of peers.
  // Running static destructors under them buys nothing for a process that
  // ends here, so leave without them: the exit code says what happened,
  // not how shutdown went.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(code);
}
