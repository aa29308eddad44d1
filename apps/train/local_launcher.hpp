#pragma once

// actorflow-train --local: the cluster of a trainer run on one machine.
// Starts one process per task (this same program, with --cluster,
// --job_name, --task_index and --parent-pid) on free loopback ports,
// copies every line the children print to our stdout/stderr prefixed with
// "job/task: ", waits for the workers, stops the ps tasks and returns the
// chief's exit status.
//
// No child outlives us: each is started with --parent-pid (it exits when
// we die, through PR_SET_PDEATHSIG, which Linux ties to the spawning
// thread: all children are spawned from the calling thread, which waits
// for them), and every path out of run_local() stops and reaps them all.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "local_cluster.hpp"

extern char** environ;

namespace actorflow::train {

/// Writes all of `text` to `fd` (a line at a time keeps the lines of
/// several writers whole).
inline void write_all(int fd, std::string_view text) {
  const char* data = text.data();
  size_t n = text.size();
  while (n > 0) {
    auto written = ::write(fd, data, n);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return;
    data += written;
    n -= static_cast<size_t>(written);
  }
}

/// One task's process, its output forwarded line by line with a prefix.
class task_process {
public:
  task_process(std::string label, std::vector<std::string> argv,
               std::string serving_marker, std::mutex& out_mtx)
    : label_(std::move(label)), marker_(std::move(serving_marker)),
      out_mtx_(out_mtx) {
    auto child = examples::spawn_piped(argv, true, environ);
    pid_ = child.pid;
    reader_ = std::thread{[this, out = child.out, err = child.err] {
      read_loop(out, err);
    }};
  }

  task_process(const task_process&) = delete;
  task_process& operator=(const task_process&) = delete;

  ~task_process() {
    stop();
    if (reader_.joinable())
      reader_.join();
  }

  const std::string& label() const noexcept {
    return label_;
  }
  pid_t pid() const noexcept {
    return pid_;
  }
  /// The child printed its serving line.
  bool serving() const noexcept {
    return serving_;
  }
  /// The child said it could not start its server (its port was taken).
  bool bind_failed() const noexcept {
    return bind_failed_;
  }

  /// The raw wait status once the child has exited (reaps it).
  std::optional<int> poll_exit() noexcept {
    if (status_)
      return status_;
    if (pid_ <= 0)
      return status_ = 0;
    int raw = 0;
    auto rc = ::waitpid(pid_, &raw, WNOHANG);
    if (rc == pid_) {
      status_ = raw;
    } else if (rc < 0 && errno == ECHILD) {
      status_ = 0;
    }
    return status_;
  }

  void send_signal(int sig) noexcept {
    if (!poll_exit())
      ::kill(pid_, sig);
  }

  /// SIGTERM, then SIGKILL after `grace`; reaps. Idempotent.
  void stop(std::chrono::milliseconds grace
            = std::chrono::seconds{5}) noexcept {
    if (poll_exit())
      return;
    ::kill(pid_, SIGTERM);
    wait_exit(grace);
    if (poll_exit())
      return;
    ::kill(pid_, SIGKILL);
    int raw = 0;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
      // retry
    }
    status_ = raw;
  }

  void wait_exit(std::chrono::milliseconds timeout) noexcept {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!poll_exit() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }

  /// Waits until the reader has forwarded everything the child wrote (its
  /// pipes reached EOF), at most `timeout`.
  void drain(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!reader_finished_ && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }

private:
  void forward(int fd, std::string& pending, std::string_view chunk,
               bool flush) {
    pending.append(chunk);
    size_t begin = 0;
    for (;;) {
      auto nl = pending.find('\n', begin);
      if (nl == std::string::npos)
        break;
      emit(fd, std::string_view{pending}.substr(begin, nl - begin));
      begin = nl + 1;
    }
    pending.erase(0, begin);
    if (flush && !pending.empty()) {
      emit(fd, pending);
      pending.clear();
    }
  }

  void emit(int fd, std::string_view line) {
    if (fd == 1 && !marker_.empty()
        && line.find(marker_) != std::string_view::npos)
      serving_ = true;
    if (fd == 2 && line.find("could not start") != std::string_view::npos)
      bind_failed_ = true;
    std::string text = label_ + ": ";
    text.append(line);
    text += '\n';
    std::lock_guard guard{out_mtx_};
    write_all(fd, text);
  }

  void read_loop(int out_fd, int err_fd) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    std::string pending[2];
    char chunk[4096];
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      int rc = ::poll(fds, 2, -1);
      if (rc < 0) {
        if (errno == EINTR)
          continue;
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0)
          continue;
        auto n = ::read(fds[i].fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          forward(i + 1, pending[i], {}, true);
        } else {
          forward(i + 1, pending[i],
                  std::string_view{chunk, static_cast<size_t>(n)}, false);
        }
      }
    }
    for (auto& p : fds)
      if (p.fd >= 0)
        ::close(p.fd);
    reader_finished_ = true;
  }

  std::string label_;
  std::string marker_;
  std::mutex& out_mtx_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::atomic<bool> serving_ = false;
  std::atomic<bool> bind_failed_ = false;
  std::atomic<bool> reader_finished_ = false;
  std::thread reader_;
};

/// "exit code N" / "killed by signal N" for a raw wait status.
inline std::string describe_status(int raw) {
  if (WIFEXITED(raw))
    return "exit code " + std::to_string(WEXITSTATUS(raw));
  if (WIFSIGNALED(raw))
    return std::string{"killed by signal "} + ::strsignal(WTERMSIG(raw));
  return "status " + std::to_string(raw);
}

/// Our exit code for a child's raw wait status.
inline int exit_code_of(int raw) {
  if (WIFEXITED(raw))
    return WEXITSTATUS(raw);
  return 1;
}

struct local_plan {
  /// This program (each task runs it with the cluster flags appended).
  std::string self;
  /// The arguments every task gets (training flags).
  std::vector<std::string> common_args;
  int num_ps = 1;
  int num_workers = 2;
  /// How long the tasks may take to print their serving lines.
  std::chrono::milliseconds startup_timeout = std::chrono::seconds{60};
  int attempts = 3;
  /// The free loopback ports, `n` of them (local_cluster.hpp's
  /// free_ports).
  std::function<std::vector<uint16_t>(size_t)> free_ports;
  /// "serving /job:J/replica:0/task:T at " for a task.
  std::function<std::string(const std::string&, int)> serving_marker;
  /// Our own log lines (to stderr).
  std::function<void(const std::string&)> log;
};

/// Runs the local cluster; returns the chief's exit code (or 128 + the
/// signal that stopped us, or 1 if the cluster could not start or a ps
/// task died during training). `stop_signals` are blocked in every thread
/// and taken here with sigtimedwait.
inline int run_local(const local_plan& plan, const sigset_t& stop_signals) {
  using namespace std::chrono_literals;
  std::mutex out_mtx;
  for (int attempt = 1; attempt <= plan.attempts; ++attempt) {
    auto ports = plan.free_ports(static_cast<size_t>(plan.num_ps
                                                     + plan.num_workers));
    std::string json = "{\"ps\": [";
    size_t next = 0;
    for (int i = 0; i < plan.num_ps; ++i)
      json += std::string{i > 0 ? ", " : ""} + "\"127.0.0.1:"
              + std::to_string(ports[next++]) + "\"";
    json += "], \"worker\": [";
    for (int i = 0; i < plan.num_workers; ++i)
      json += std::string{i > 0 ? ", " : ""} + "\"127.0.0.1:"
              + std::to_string(ports[next++]) + "\"";
    json += "]}";
    std::vector<std::unique_ptr<task_process>> ps;
    std::vector<std::unique_ptr<task_process>> workers;
    auto stop_all = [&] {
      for (auto& p : workers)
        p->send_signal(SIGTERM);
      for (auto& p : ps)
        p->send_signal(SIGTERM);
      for (auto& p : workers)
        p->stop();
      for (auto& p : ps)
        p->stop();
      for (auto& p : workers)
        p->drain(2s);
      for (auto& p : ps)
        p->drain(2s);
    };
    auto start = [&](const std::string& job, int task) {
      auto argv = std::vector<std::string>{plan.self};
      argv.insert(argv.end(), plan.common_args.begin(),
                  plan.common_args.end());
      for (auto arg : {"--cluster", json.c_str(), "--job_name", job.c_str()})
        argv.emplace_back(arg);
      argv.push_back("--task_index");
      argv.push_back(std::to_string(task));
      argv.push_back("--parent-pid");
      argv.push_back(std::to_string(::getpid()));
      auto label = job + "/" + std::to_string(task);
      auto proc = std::make_unique<task_process>(
        label, std::move(argv), plan.serving_marker(job, task), out_mtx);
      plan.log("started /job:" + job + "/task:" + std::to_string(task)
               + " (pid " + std::to_string(proc->pid()) + ")");
      return proc;
    };
    try {
      for (int i = 0; i < plan.num_ps; ++i)
        ps.push_back(start("ps", i));
      for (int i = 0; i < plan.num_workers; ++i)
        workers.push_back(start("worker", i));
    } catch (...) {
      stop_all();
      throw;
    }
    plan.log("cluster " + json);

    // Every task serves (or one failed to start: its port may have been
    // taken by someone else meanwhile; start over on fresh ports).
    auto deadline = std::chrono::steady_clock::now() + plan.startup_timeout;
    bool retry = false;
    std::optional<int> failed;
    for (;;) {
      bool all = true;
      for (auto* group : {&ps, &workers})
        for (auto& p : *group) {
          if (p->serving())
            continue;
          all = false;
          if (auto raw = p->poll_exit()) {
            p->drain(2s);
            if (p->bind_failed() && attempt < plan.attempts) {
              plan.log(p->label() + " could not bind its port; starting "
                                    "over on other ports");
              retry = true;
            } else {
              plan.log(p->label() + " ended before serving ("
                       + describe_status(*raw) + ")");
              failed = exit_code_of(*raw) == 0 ? 1 : exit_code_of(*raw);
            }
          }
        }
      if (all || retry || failed)
        break;
      if (std::chrono::steady_clock::now() >= deadline) {
        plan.log("the cluster did not start within "
                 + std::to_string(plan.startup_timeout.count() / 1000)
                 + " s");
        failed = 1;
        break;
      }
      timespec tick{0, 50'000'000};
      siginfo_t info;
      if (int sig = ::sigtimedwait(&stop_signals, &info, &tick); sig > 0) {
        plan.log(std::string{"stopping on "} + ::strsignal(sig));
        stop_all();
        return 128 + sig;
      }
    }
    if (retry) {
      stop_all();
      continue;
    }
    if (failed) {
      stop_all();
      return *failed;
    }

    // Training: wait for the workers. The chief's failure or a lost ps
    // ends the run for everyone.
    for (;;) {
      timespec tick{0, 100'000'000};
      siginfo_t info;
      if (int sig = ::sigtimedwait(&stop_signals, &info, &tick); sig > 0) {
        plan.log(std::string{"stopping on "} + ::strsignal(sig));
        stop_all();
        return 128 + sig;
      }
      bool workers_done = true;
      for (auto& p : workers)
        if (!p->poll_exit())
          workers_done = false;
      auto chief = workers.front()->poll_exit();
      if (chief && exit_code_of(*chief) != 0 && !workers_done) {
        plan.log("the chief failed (" + describe_status(*chief)
                 + "); stopping the cluster");
        stop_all();
        return exit_code_of(*chief);
      }
      for (auto& p : ps)
        if (auto raw = p->poll_exit(); raw && !workers_done) {
          plan.log(p->label() + " ended during training ("
                   + describe_status(*raw) + "); stopping the cluster");
          stop_all();
          return 1;
        }
      if (workers_done)
        break;
    }
    for (auto& p : workers) {
      p->drain(2s);
      auto raw = *p->poll_exit();
      if (exit_code_of(raw) != 0 || !WIFEXITED(raw))
        plan.log(p->label() + " failed (" + describe_status(raw) + ")");
    }
    plan.log("the workers finished: stopping the ps tasks");
    stop_all();
    auto chief = *workers.front()->poll_exit();
    return exit_code_of(chief);
  }
  return 1;
}

} // namespace actorflow::train
