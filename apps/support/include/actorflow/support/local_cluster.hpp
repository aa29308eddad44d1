#pragma once

// Helpers shared by the seed examples and the integration tests: pick free
// loopback ports, spawn `actorflow-node` processes, wait (always with a
// deadline) for their "serving" line, and make sure every child is killed
// and reaped, also when the caller leaves by an exception.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "actorflow/client/cluster_spec.hpp"
#include "free_ports.hpp"

extern char** environ;

namespace actorflow::examples {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

inline std::runtime_error sys_error(const std::string& what, int err = errno) {
  return std::runtime_error(what + ": " + std::strerror(err));
}

/// How a child ended.
struct exit_status {
  bool exited = false;
  int code = -1;
  int signal = 0;

  static exit_status decode(int raw) {
    exit_status st;
    if (WIFEXITED(raw)) {
      st.exited = true;
      st.code = WEXITSTATUS(raw);
    } else if (WIFSIGNALED(raw)) {
      st.signal = WTERMSIG(raw);
    }
    return st;
  }

  bool success() const noexcept {
    return exited && code == 0;
  }

  std::string to_string() const {
    if (exited)
      return "exit code " + std::to_string(code);
    return "killed by signal " + std::to_string(signal);
  }
};

struct spawn_options {
  /// Pipe the child's stderr into a buffer (`err()`); otherwise the child
  /// writes to our stderr directly (the examples want the nodes' tf.Print
  /// output to show, as it would in the worker's log).
  bool capture_stderr = true;
  /// Also copy what the child writes to stdout onto our stderr (a node's
  /// log lines, e.g. log_device_placement, belong with the logs, not with
  /// what the client prints).
  bool echo_stdout = false;
  /// Environment changes: "NAME=value" sets, "NAME" alone removes.
  std::vector<std::string> env;
};

/// A child started by spawn_piped: its pid and our read ends of its
/// stdout and stderr pipes (-1 for a stderr it shares with us).
struct piped_child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

/// Starts `argv` with stdin from /dev/null, stdout into a new pipe and,
/// with `capture_stderr`, stderr into another, with no blocked signals and
/// default dispositions whatever the spawning thread has set up (an
/// ignored SIGPIPE or a blocked SIGTERM would otherwise carry over through
/// exec). Throws std::runtime_error naming argv[0].
inline piped_child spawn_piped(std::vector<std::string> argv,
                               bool capture_stderr, char** envp) {
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  // O_CLOEXEC: children spawned concurrently by other threads must not
  // inherit our ends, or EOF would never come.
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw sys_error("pipe2");
  if (capture_stderr && ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    auto err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw sys_error("pipe2", err);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  if (capture_stderr)
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGCHLD})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  piped_child child;
  int rc = ::posix_spawn(&child.pid, args[0], &actions, &attr, args.data(),
                         envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  if (err_pipe[1] >= 0)
    ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    if (err_pipe[0] >= 0)
      ::close(err_pipe[0]);
    throw sys_error("posix_spawn " + argv[0], rc);
  }
  child.out = out_pipe[0];
  child.err = err_pipe[0];
  return child;
}

/// A child process with its stdout (and optionally stderr) read by a
/// background thread, so a chatty child never blocks on a full pipe. The
/// destructor stops and reaps it.
class child_process {
public:
  child_process(std::vector<std::string> argv, spawn_options opts = {}) {
    if (argv.empty())
      throw std::invalid_argument("child_process: empty argv");
    auto env = make_env(opts.env);
    std::vector<char*> envp;
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    auto child = spawn_piped(argv, opts.capture_stderr, envp.data());
    pid_ = child.pid;
    command_ = argv[0];
    echo_stdout_ = opts.echo_stdout;
    reader_ = std::thread{[this, out = child.out, err = child.err] {
      read_loop(out, err);
    }};
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  ~child_process() {
    stop();
    reader_done_ = true;
    if (reader_.joinable())
      reader_.join();
  }

  pid_t pid() const noexcept {
    return pid_;
  }

  /// Waits until a stdout line contains `needle` and returns that line;
  /// std::nullopt at the deadline or when stdout ends first (the child
  /// exited or closed it).
  std::optional<std::string> wait_for_line(std::string_view needle,
                                           milliseconds timeout) {
    auto deadline = steady::now() + timeout;
    std::unique_lock guard{mtx_};
    for (;;) {
      size_t begin = 0;
      for (auto nl = out_.find('\n'); nl != std::string::npos;
           nl = out_.find('\n', begin)) {
        std::string_view line{out_.data() + begin, nl - begin};
        if (line.find(needle) != std::string_view::npos)
          return std::string{line};
        begin = nl + 1;
      }
      if (out_eof_)
        return std::nullopt;
      if (cv_.wait_until(guard, deadline) == std::cv_status::timeout)
        return std::nullopt;
    }
  }

  /// Waits up to `timeout` for the child to exit; std::nullopt if it still
  /// runs.
  std::optional<exit_status> wait(milliseconds timeout) {
    auto deadline = steady::now() + timeout;
    for (;;) {
      if (auto st = try_reap())
        return st;
      if (steady::now() >= deadline)
        return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
  }

  /// True while the child has not been reaped and still runs.
  bool running() {
    return !try_reap().has_value();
  }

  void send_signal(int sig) {
    if (!status_ && pid_ > 0)
      ::kill(pid_, sig);
  }

  /// SIGTERM, then SIGKILL after `grace`; always reaps. Idempotent.
  exit_status stop(milliseconds grace = 5s) noexcept {
    if (auto st = try_reap())
      return *st;
    ::kill(pid_, SIGTERM);
    if (auto st = wait(grace))
      return *st;
    ::kill(pid_, SIGKILL);
    // SIGKILL cannot be caught or ignored: this wait ends as soon as the
    // kernel has torn the process down.
    int raw = 0;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
      // retry
    }
    status_ = exit_status::decode(raw);
    return *status_;
  }

  /// Everything read from stdout / stderr so far (stderr only when
  /// captured). Waits briefly for the reader to drain the pipes if the
  /// child has exited, so a caller sees its last words.
  std::string out() {
    settle();
    std::lock_guard guard{mtx_};
    return out_;
  }
  std::string err() {
    settle();
    std::lock_guard guard{mtx_};
    return err_;
  }

  const std::string& command() const noexcept {
    return command_;
  }

private:
  static std::vector<std::string>
  make_env(const std::vector<std::string>& changes) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
      env.emplace_back(*e);
    for (const auto& change : changes) {
      auto eq = change.find('=');
      auto key = change.substr(0, eq) + "=";
      std::erase_if(env,
                    [&](const std::string& e) { return e.starts_with(key); });
      if (eq != std::string::npos)
        env.push_back(change);
    }
    return env;
  }

  std::optional<exit_status> try_reap() noexcept {
    if (status_)
      return status_;
    if (pid_ <= 0)
      return exit_status{};
    int raw = 0;
    auto rc = ::waitpid(pid_, &raw, WNOHANG);
    if (rc == pid_ || (rc < 0 && errno == ECHILD)) {
      status_ = exit_status::decode(raw);
      return status_;
    }
    return std::nullopt;
  }

  // After the child exits, EOF on the pipes follows at once; give the
  // reader a moment to pick up what was still buffered.
  void settle() {
    if (!try_reap())
      return;
    std::unique_lock guard{mtx_};
    cv_.wait_for(guard, 2s, [this] { return reader_finished_; });
  }

  static constexpr size_t max_buffer = 1 << 20;

  void append(std::string& buf, const char* data, size_t n) {
    buf.append(data, n);
    // A long-running child may log without end; keep the tail.
    if (buf.size() > max_buffer)
      buf.erase(0, buf.size() - max_buffer / 2);
  }

  static void echo(const char* data, size_t n) {
    while (n > 0) {
      auto written = ::write(2, data, n);
      if (written < 0 && errno == EINTR)
        continue;
      if (written <= 0)
        return;
      data += written;
      n -= static_cast<size_t>(written);
    }
  }

  void read_loop(int out_fd, int err_fd) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    char chunk[4096];
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      int rc = ::poll(fds, 2, 100);
      if (rc < 0 && errno != EINTR)
        break;
      if (rc == 0) {
        // Nothing to read; only give up once the owner is done with us
        // (the child is reaped, so nothing more can come).
        if (reader_done_)
          break;
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0)
          continue;
        auto n = ::read(fds[i].fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
          continue;
        std::lock_guard guard{mtx_};
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          if (i == 0)
            out_eof_ = true;
        } else {
          append(i == 0 ? out_ : err_, chunk, static_cast<size_t>(n));
          if (i == 0 && echo_stdout_)
            echo(chunk, static_cast<size_t>(n));
        }
        cv_.notify_all();
      }
    }
    std::lock_guard guard{mtx_};
    for (auto& p : fds)
      if (p.fd >= 0)
        ::close(p.fd);
    out_eof_ = true;
    reader_finished_ = true;
    cv_.notify_all();
  }

  pid_t pid_ = -1;
  std::string command_;
  bool echo_stdout_ = false;
  std::optional<exit_status> status_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::string out_;
  std::string err_;
  bool out_eof_ = false;
  bool reader_finished_ = false;
  std::atomic<bool> reader_done_ = false;
  std::thread reader_;
};

/// What `run_process` saw.
struct process_result {
  exit_status status;
  bool timed_out = false;
  std::string out;
  std::string err;
};

/// Runs a command to completion; kills it (and reports `timed_out`) if it
/// is not done within `timeout`.
inline process_result run_process(std::vector<std::string> argv,
                                  milliseconds timeout,
                                  spawn_options opts = {}) {
  child_process child{std::move(argv), std::move(opts)};
  process_result result;
  if (auto st = child.wait(timeout)) {
    result.status = *st;
  } else {
    result.timed_out = true;
    result.status = child.stop(1s);
  }
  result.out = child.out();
  result.err = child.err();
  return result;
}

/// The program `name`: `override_path` if given (it must be executable,
/// else std::invalid_argument naming `flag`), else the one next to this
/// executable, else the first on $PATH. Throws std::runtime_error if none
/// is found.
inline std::string find_program(const std::string& name,
                                const std::string& override_path,
                                const std::string& flag) {
  namespace fs = std::filesystem;
  if (!override_path.empty()) {
    if (::access(override_path.c_str(), X_OK) != 0)
      throw std::invalid_argument(flag + " " + override_path
                                  + ": not an executable file");
    return override_path;
  }
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto next_to_us = self.parent_path() / name;
    if (::access(next_to_us.c_str(), X_OK) == 0)
      return next_to_us.string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest{path};
    while (!rest.empty()) {
      auto colon = rest.find(':');
      auto dir = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view{}
                                             : rest.substr(colon + 1);
      if (dir.empty())
        continue;
      auto candidate = fs::path{std::string{dir}} / name;
      if (::access(candidate.c_str(), X_OK) == 0)
        return candidate.string();
    }
  }
  throw std::runtime_error(name + " not found next to this program nor on "
                                  "$PATH (use " + flag + " PATH)");
}

/// The `actorflow-node` launcher (see find_program). Throws
/// std::runtime_error if none is found or `override_path` is not
/// executable.
inline std::string find_node_binary(const std::string& override_path = {}) {
  try {
    return find_program("actorflow-node", override_path, "--node");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

/// The argv that starts task `task` of `job` of `spec`. `--parent-pid`
/// makes the node exit when we die without cleaning up (killed by a test
/// runner's timeout, say), so no node outlives its owner. Linux ties that
/// to the spawning *thread*: spawn from a thread that outlives the node.
inline std::vector<std::string> node_command(const std::string& node_binary,
                                             const cluster_spec& spec,
                                             const std::string& job, int task) {
  return {node_binary,      "--cluster", spec.to_json(),
          "--job",          job,         "--task",
          std::to_string(task), "--parent-pid", std::to_string(::getpid())};
}

/// The line a node prints once it serves.
inline std::string serving_marker(const std::string& job, int task) {
  return "serving /job:" + job + "/replica:0/task:" + std::to_string(task)
         + " at ";
}

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
  milliseconds startup_timeout = 15s;
  /// Another process may grab one of our free ports before the node binds
  /// it; then the whole cluster starts over on fresh ports.
  int attempts = 3;
  /// See spawn_options::env: the nodes' environment changes.
  std::vector<std::string> env;
  /// More flags for every node (e.g. --tls_cert FILE).
  std::vector<std::string> args;
};

/// A cluster of `actorflow-node` processes on free loopback ports, one per
/// task. The destructor stops and reaps them all.
class local_cluster {
public:
  /// `jobs`: job name -> number of tasks.
  local_cluster(std::string node_binary,
                std::vector<std::pair<std::string, int>> jobs,
                cluster_options opts = {})
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

  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  ~local_cluster() {
    stop();
  }

  const cluster_spec& spec() const noexcept {
    return spec_;
  }

  /// "127.0.0.1:PORT".
  const std::string& address(const std::string& job, int task) const {
    return spec_.task_address(job, task);
  }

  /// "grpc://127.0.0.1:PORT", as the seeds spell their session targets.
  std::string target(const std::string& job, int task) const {
    return "grpc://" + address(job, task);
  }

  /// The node process of a started task.
  child_process& process(const std::string& job, int task) {
    auto i = procs_.find(key(job, task));
    if (i == procs_.end())
      throw std::out_of_range("no node process for " + key(job, task));
    return *i->second;
  }

  /// Stops every node: SIGTERM to all at once, SIGKILL to those still
  /// running 5 s later; reaps all.
  void stop() noexcept {
    for (auto& [_, proc] : procs_)
      proc->send_signal(SIGTERM);
    auto deadline = steady::now() + 5s;
    for (auto& [_, proc] : procs_) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline
                                                           - steady::now());
      proc->stop(std::max(left, milliseconds{0}));
    }
    procs_.clear();
  }

private:
  static std::string key(const std::string& job, int task) {
    return "/job:" + job + "/task:" + std::to_string(task);
  }

  bool started(const std::string& job, int task) const {
    for (const auto& [j, t] : opts_.not_started)
      if (j == job && t == task)
        return false;
    return true;
  }

  std::vector<std::string> command(const std::string& job, int task) const {
    auto cmd = node_command(node_, spec_, job, task);
    cmd.insert(cmd.end(), opts_.args.begin(), opts_.args.end());
    return cmd;
  }

  bool try_start(std::string& why) {
    size_t total = 0;
    for (const auto& [_, n] : jobs_)
      total += static_cast<size_t>(n);
    auto ports = free_ports(total);
    std::map<std::string, std::vector<std::string>> dense;
    size_t next = 0;
    for (const auto& [job, n] : jobs_)
      for (int i = 0; i < n; ++i)
        dense[job].push_back("127.0.0.1:" + std::to_string(ports[next++]));
    spec_ = cluster_spec{dense};
    spawn_options sopts;
    sopts.capture_stderr = opts_.capture_stderr;
    sopts.echo_stdout = opts_.echo_stdout;
    sopts.env = opts_.env;
    // Start all first so they boot in parallel, then wait for each.
    for (const auto& [job, n] : jobs_)
      for (int i = 0; i < n; ++i)
        if (started(job, i))
          procs_.emplace(key(job, i), std::make_unique<child_process>(
                                        command(job, i), sopts));
    auto deadline = steady::now() + opts_.startup_timeout;
    for (const auto& [job, n] : jobs_) {
      for (int i = 0; i < n; ++i) {
        if (!started(job, i))
          continue;
        auto& proc = process(job, i);
        auto left = std::chrono::duration_cast<milliseconds>(deadline
                                                             - steady::now());
        if (!proc.wait_for_line(serving_marker(job, i),
                                std::max(left, milliseconds{0}))) {
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

  std::string node_;
  std::vector<std::pair<std::string, int>> jobs_;
  cluster_options opts_;
  cluster_spec spec_;
  std::map<std::string, std::unique_ptr<child_process>> procs_;
};

/// The command line every example takes: `--node PATH` (the launcher to
/// spawn) and `--help`. Returns the launcher's path; exits on --help or a
/// bad flag.
inline std::string example_node_binary(int argc, char** argv,
                                       std::string_view what) {
  std::string node;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: " << argv[0] << " [--node PATH]\n\n"
                << what << "\n\n"
                << "  --node PATH  the actorflow-node launcher to spawn "
                   "(default: next to\n"
                   "               this program, else on $PATH)\n";
      std::exit(0);
    }
    if (arg == "--node" && i + 1 < argc) {
      node = argv[++i];
    } else if (arg.starts_with("--node=")) {
      node = std::string{arg.substr(7)};
    } else {
      std::cerr << argv[0] << ": unknown or incomplete flag '" << arg
                << "' (see --help)\n";
      std::exit(2);
    }
  }
  return find_node_binary(node);
}

} // namespace actorflow::examples
