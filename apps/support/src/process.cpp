#include "actorflow/support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace actorflow::support {

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::runtime_error sys_error(const std::string& what, int err = errno) {
  return std::runtime_error(what + ": " + std::strerror(err));
}

/// Our read ends of a spawned child's stdout and stderr pipes (-1 for a
/// stderr it shares with us).
struct piped_child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

piped_child spawn_piped(std::vector<std::string> argv, bool capture_stderr,
                        char** envp) {
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

/// Our environment with `changes` applied (spawn_options::env).
std::vector<std::string> make_env(const std::vector<std::string>& changes) {
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

// A long-running child may log without end: out() keeps the tail.
constexpr size_t max_buffer = 1 << 20;

void append(std::string& buf, std::string_view data) {
  buf.append(data);
  if (buf.size() > max_buffer)
    buf.erase(0, buf.size() - max_buffer / 2);
}

} // namespace

void write_all(int fd, std::string_view text) noexcept {
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

exit_status exit_status::decode(int raw) noexcept {
  exit_status st;
  if (WIFEXITED(raw)) {
    st.exited = true;
    st.code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    st.signal = WTERMSIG(raw);
  }
  return st;
}

std::string exit_status::to_string() const {
  if (exited)
    return "exit code " + std::to_string(code);
  if (const char* name = ::sigabbrev_np(signal))
    return std::string{"killed by SIG"} + name;
  return "killed by signal " + std::to_string(signal);
}

child_process::child_process(std::vector<std::string> argv,
                             spawn_options opts) {
  if (argv.empty())
    throw std::invalid_argument("child_process: empty argv");
  auto env = make_env(opts.env);
  std::vector<char*> envp;
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  command_ = argv[0];
  echo_stdout_ = opts.echo_stdout;
  on_line_ = std::move(opts.on_line);
  auto child = spawn_piped(std::move(argv), opts.capture_stderr,
                           envp.data());
  pid_ = child.pid;
  reader_ = std::thread{[this, out = child.out, err = child.err] {
    read_loop(out, err);
  }};
}

child_process::~child_process() {
  stop();
  reader_done_ = true;
  if (reader_.joinable())
    reader_.join();
}

std::optional<std::string>
child_process::wait_for_line(std::string_view needle, milliseconds timeout) {
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

std::optional<exit_status> child_process::wait(milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (auto st = try_reap())
      return st;
    if (steady::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

bool child_process::running() {
  return !try_reap().has_value();
}

void child_process::send_signal(int sig) noexcept {
  if (!status_ && pid_ > 0)
    ::kill(pid_, sig);
}

exit_status child_process::stop(milliseconds grace) noexcept {
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

bool child_process::drain(milliseconds timeout) {
  std::unique_lock guard{mtx_};
  return cv_.wait_for(guard, timeout, [this] { return reader_finished_; });
}

std::string child_process::out() {
  settle();
  std::lock_guard guard{mtx_};
  return out_;
}

std::string child_process::err() {
  settle();
  std::lock_guard guard{mtx_};
  return err_;
}

std::optional<exit_status> child_process::try_reap() noexcept {
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

// After the child exits, EOF on the pipes follows at once; give the reader
// a moment to pick up what was still buffered.
void child_process::settle() {
  if (try_reap())
    drain(2s);
}

void child_process::take(int stream, std::string_view chunk, bool at_end) {
  if (stream == 1 && echo_stdout_)
    write_all(2, chunk);
  {
    std::lock_guard guard{mtx_};
    append(stream == 1 ? out_ : err_, chunk);
    if (stream == 1 && at_end)
      out_eof_ = true;
    cv_.notify_all();
  }
  if (!on_line_)
    return;
  // Whole lines only, outside the lock: the handler may block on a pipe.
  auto& pending = pending_[stream - 1];
  pending.append(chunk);
  size_t begin = 0;
  for (auto nl = pending.find('\n'); nl != std::string::npos;
       nl = pending.find('\n', begin)) {
    on_line_(stream, std::string_view{pending}.substr(begin, nl - begin));
    begin = nl + 1;
  }
  pending.erase(0, begin);
  if (at_end && !pending.empty()) {
    on_line_(stream, pending);
    pending.clear();
  }
}

void child_process::read_loop(int out_fd, int err_fd) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  char chunk[4096];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    int rc = ::poll(fds, 2, 100);
    if (rc < 0 && errno != EINTR)
      break;
    if (rc <= 0) {
      // Nothing to read; only give up once the owner is done with us (the
      // child is reaped; what is left open belongs to its own children).
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
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        take(i + 1, {}, true);
      } else {
        take(i + 1, std::string_view{chunk, static_cast<size_t>(n)}, false);
      }
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0)
      ::close(p.fd);
  std::lock_guard guard{mtx_};
  out_eof_ = true;
  reader_finished_ = true;
  cv_.notify_all();
}

process_result run_process(std::vector<std::string> argv,
                           std::chrono::milliseconds timeout,
                           spawn_options opts) {
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

std::string find_program(const std::string& name,
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

} // namespace actorflow::support
