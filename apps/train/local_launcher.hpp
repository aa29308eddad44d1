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

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/support/process.hpp"

namespace actorflow::train {

/// One task's process (support::child_process), its output forwarded line
/// by line to ours with a prefix, "job/task: ".
class task_process {
public:
  task_process(std::string label, std::vector<std::string> argv,
               std::string serving_marker, std::mutex& out_mtx)
    : label_(std::move(label)), marker_(std::move(serving_marker)),
      out_mtx_(out_mtx), proc_(std::move(argv), forwarding()) {
    // nop
  }

  const std::string& label() const noexcept {
    return label_;
  }
  pid_t pid() const noexcept {
    return proc_.pid();
  }
  /// The child printed its serving line.
  bool serving() const noexcept {
    return serving_;
  }
  /// The child said it could not start its server (its port was taken).
  bool bind_failed() const noexcept {
    return bind_failed_;
  }

  /// How the child ended, once it has (reaps it).
  std::optional<support::exit_status> poll_exit() {
    return proc_.wait(std::chrono::milliseconds{0});
  }

  void send_signal(int sig) noexcept {
    proc_.send_signal(sig);
  }

  /// SIGTERM, then SIGKILL after 5 s; reaps. Idempotent.
  void stop() noexcept {
    proc_.stop();
  }

  /// Waits until everything the child wrote is forwarded, at most
  /// `timeout`.
  void drain(std::chrono::milliseconds timeout) {
    proc_.drain(timeout);
  }

private:
  support::spawn_options forwarding() {
    support::spawn_options opts;
    opts.capture_stderr = true;
    opts.on_line = [this](int stream, std::string_view line) {
      emit(stream, line);
    };
    return opts;
  }

  void emit(int stream, std::string_view line) {
    if (stream == 1 && line.find(marker_) != std::string_view::npos)
      serving_ = true;
    if (stream == 2 && line.find("could not start") != std::string_view::npos)
      bind_failed_ = true;
    std::string text = label_ + ": ";
    text.append(line);
    text += '\n';
    std::lock_guard guard{out_mtx_};
    support::write_all(stream, text);
  }

  std::string label_;
  std::string marker_;
  std::mutex& out_mtx_;
  std::atomic<bool> serving_ = false;
  std::atomic<bool> bind_failed_ = false;
  // Last: its reader calls emit until it is destroyed (it stops the child
  // and joins the reader first).
  support::child_process proc_;
};

/// Our exit code for a task's.
inline int exit_code_of(const support::exit_status& st) {
  return st.exited ? st.code : 1;
}

struct local_plan {
  /// This program (each task runs it with the cluster flags appended).
  std::string self;
  /// The arguments every task gets (training flags).
  std::vector<std::string> common_args;
  int num_ps = 1;
  int num_workers = 2;
  /// A ps task that ends during training is started again on its address
  /// (with replicated variables, --replicate_variables); otherwise the
  /// run stops.
  bool restart_ps = false;
  /// How long the tasks may take to print their serving lines.
  std::chrono::milliseconds startup_timeout = std::chrono::seconds{60};
  int attempts = 3;
  /// The free loopback ports, `n` of them (support::free_ports).
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
          if (auto st = p->poll_exit()) {
            p->drain(2s);
            if (p->bind_failed() && attempt < plan.attempts) {
              plan.log(p->label() + " could not bind its port; starting "
                                    "over on other ports");
              retry = true;
            } else {
              plan.log(p->label() + " ended before serving ("
                       + st->to_string() + ")");
              failed = exit_code_of(*st) == 0 ? 1 : exit_code_of(*st);
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
        plan.log("the chief failed (" + chief->to_string()
                 + "); stopping the cluster");
        stop_all();
        return exit_code_of(*chief);
      }
      for (size_t i = 0; i < ps.size(); ++i)
        if (auto st = ps[i]->poll_exit(); st && !workers_done) {
          if (plan.restart_ps) {
            plan.log(ps[i]->label() + " ended during training ("
                     + st->to_string()
                     + "); starting it again: it joins as the backup of "
                       "the task that took over its variables");
            ps[i]->drain(2s);
            ps[i] = start("ps", static_cast<int>(i));
            continue;
          }
          plan.log(ps[i]->label() + " ended during training ("
                   + st->to_string() + "); stopping the cluster");
          stop_all();
          return 1;
        }
      if (workers_done)
        break;
    }
    for (auto& p : workers) {
      p->drain(2s);
      auto st = *p->poll_exit();
      if (!st.success())
        plan.log(p->label() + " failed (" + st.to_string() + ")");
    }
    plan.log("the workers finished: stopping the ps tasks");
    stop_all();
    auto chief = *workers.front()->poll_exit();
    return exit_code_of(chief);
  }
  return 1;
}

} // namespace actorflow::train
