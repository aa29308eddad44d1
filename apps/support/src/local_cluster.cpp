#include "actorflow/support/local_cluster.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "actorflow/support/flags.hpp"

namespace actorflow::support {

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

std::string key(const std::string& job, int task) {
  return "/job:" + job + "/task:" + std::to_string(task);
}

milliseconds left_until(steady::time_point deadline) {
  return std::max(std::chrono::duration_cast<milliseconds>(deadline
                                                           - steady::now()),
                  milliseconds{0});
}

} // namespace

std::string find_node_binary(const std::string& override_path) {
  try {
    return find_program("actorflow-node", override_path, "--node");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

std::vector<std::string> node_command(const std::string& node_binary,
                                      const cluster_spec& spec,
                                      const std::string& job, int task) {
  return {node_binary,      "--cluster", spec.to_json(),
          "--job",          job,         "--task",
          std::to_string(task), "--parent-pid", std::to_string(::getpid())};
}

std::string serving_marker(const std::string& job, int task) {
  return "serving /job:" + job + "/replica:0/task:" + std::to_string(task)
         + " at ";
}

local_cluster::local_cluster(std::string node_binary,
                             std::vector<std::pair<std::string, int>> jobs,
                             cluster_options opts)
  : node_(std::move(node_binary)), jobs_(std::move(jobs)),
    opts_(std::move(opts)) {
  std::string why;
  for (int attempt = 0; attempt < opts_.attempts; ++attempt) {
    if (try_start(why))
      return;
    stop();
  }
  throw std::runtime_error("could not start the local cluster: " + why);
}

local_cluster::~local_cluster() {
  stop();
}

child_process& local_cluster::process(const std::string& job, int task) {
  auto i = procs_.find(key(job, task));
  if (i == procs_.end())
    throw std::out_of_range("no node process for " + key(job, task));
  return *i->second;
}

void local_cluster::stop() noexcept {
  for (auto& [_, proc] : procs_)
    proc->send_signal(SIGTERM);
  auto deadline = steady::now() + 5s;
  for (auto& [_, proc] : procs_)
    proc->stop(left_until(deadline));
  procs_.clear();
}

bool local_cluster::started(const std::string& job, int task) const {
  for (const auto& [j, t] : opts_.not_started)
    if (j == job && t == task)
      return false;
  return true;
}

bool local_cluster::try_start(std::string& why) {
  size_t total = 0;
  for (const auto& [_, n] : jobs_)
    total += static_cast<size_t>(n);
  auto ports = free_ports(total);
  std::map<std::string, std::vector<std::string>> dense;
  size_t next = 0;
  auto host = [&](const std::string& job, int task) {
    return opts_.host ? opts_.host(job, task) : task_host{};
  };
  for (const auto& [job, n] : jobs_)
    for (int i = 0; i < n; ++i)
      dense[job].push_back(host(job, i).ip + ":"
                           + std::to_string(ports[next++]));
  spec_ = cluster_spec{dense};
  spawn_options sopts;
  sopts.capture_stderr = opts_.capture_stderr;
  sopts.echo_stdout = opts_.echo_stdout;
  sopts.env = opts_.env;
  // Start all first so they boot in parallel, then wait for each.
  for (const auto& [job, n] : jobs_)
    for (int i = 0; i < n; ++i)
      if (started(job, i)) {
        auto cmd = host(job, i).launcher;
        auto node = node_command(node_, spec_, job, i);
        cmd.insert(cmd.end(), node.begin(), node.end());
        cmd.insert(cmd.end(), opts_.args.begin(), opts_.args.end());
        procs_.emplace(key(job, i),
                       std::make_unique<child_process>(std::move(cmd), sopts));
      }
  auto deadline = steady::now() + opts_.startup_timeout;
  for (const auto& [job, n] : jobs_) {
    for (int i = 0; i < n; ++i) {
      if (!started(job, i))
        continue;
      auto& proc = process(job, i);
      if (!proc.wait_for_line(serving_marker(job, i), left_until(deadline))) {
        auto st = proc.wait(0ms);
        why = key(job, i) + " at " + address(job, i) + " did not serve ("
              + (st ? st->to_string() : "no serving line in time") + ")";
        if (opts_.capture_stderr)
          why += ": " + proc.err();
        return false;
      }
    }
  }
  return true;
}

example_flags::example_flags(std::string description)
  : app_(std::move(description) + "\n") {
  app_.set_help_flag("-h,--help", "this text");
  app_.formatter(help_formatter());
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  app_.add_option("--node", node_,
                  "the actorflow-node launcher to spawn (default: next to "
                  "this program, else on $PATH)")
    ->type_name("PATH")
    ->check(executable_file());
}

bool example_flags::parse(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (!args.empty())
    app_.name(std::filesystem::path{args.front()}.filename().string());
  return parse_flags(app_, std::move(args));
}

std::string example_flags::node_binary() const {
  return find_node_binary(node_);
}

} // namespace actorflow::support
