#pragma once

// Child processes, for the apps (actorflow-train --local, the bench), the
// seed examples and the integration tests: started with pipes, their
// output read by a thread of their own (so a chatty child never blocks on
// a full pipe), waited for with deadlines, and stopped and reaped on every
// way out of their owner (the destructor), so that none outlives it.

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace actorflow::support {

/// Writes all of `text` to `fd` in as few writes as it takes (one line per
/// call keeps the lines of several writers whole). Gives up silently when
/// `fd` fails (a reader that went away). Blocks while the pipe is full.
void write_all(int fd, std::string_view text) noexcept;

/// How a child ended.
struct exit_status {
  bool exited = false;
  int code = -1;
  int signal = 0;

  /// From a wait status of waitpid.
  static exit_status decode(int raw) noexcept;

  bool success() const noexcept {
    return exited && code == 0;
  }

  /// "exit code 3", "killed by SIGKILL".
  std::string to_string() const;
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
  std::vector<std::string> env{};
  /// Called on the reader thread with each line the child writes, without
  /// its '\n' (an unterminated last line at the end of the output), and
  /// the stream: 1 for stdout, 2 for stderr (when captured). The lines are
  /// kept for out(), err() and wait_for_line as well.
  std::function<void(int stream, std::string_view line)> on_line{};
};

/// A child process. Its stdin is /dev/null; it starts with no blocked
/// signals and default dispositions whatever the spawning thread has set
/// up (an ignored SIGPIPE or a blocked SIGTERM would otherwise carry over
/// through exec). The destructor stops and reaps it.
///
/// A child asked to die with its parent (PR_SET_PDEATHSIG, actorflow-node's
/// --parent-pid) is tied by Linux to the spawning *thread*: spawn it from
/// a thread that outlives it.
class child_process {
public:
  using milliseconds = std::chrono::milliseconds;

  /// Starts `argv[0]` (a path: no $PATH lookup) with the arguments that
  /// follow. Throws std::invalid_argument for an empty `argv`,
  /// std::runtime_error naming argv[0] if it cannot be started.
  explicit child_process(std::vector<std::string> argv,
                         spawn_options opts = {});

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Stops the child (stop()) and waits for the reader thread.
  ~child_process();

  pid_t pid() const noexcept {
    return pid_;
  }

  /// argv[0].
  const std::string& command() const noexcept {
    return command_;
  }

  /// Waits until a stdout line contains `needle` and returns that line;
  /// std::nullopt at the deadline or when stdout ends first (the child
  /// exited or closed it). Blocks.
  std::optional<std::string> wait_for_line(std::string_view needle,
                                           milliseconds timeout);

  /// Waits up to `timeout` for the child to exit (and reaps it);
  /// std::nullopt if it still runs. wait(0ms) polls.
  std::optional<exit_status> wait(milliseconds timeout);

  /// True while the child has not been reaped and still runs.
  bool running();

  /// Sends `sig` unless the child has been reaped.
  void send_signal(int sig) noexcept;

  /// SIGTERM, then SIGKILL after `grace`; always reaps. Idempotent.
  exit_status stop(milliseconds grace = std::chrono::seconds{5}) noexcept;

  /// Waits up to `timeout` until the reader has taken everything the child
  /// wrote (its pipes reached their end; on_line has seen every line).
  /// True if it has.
  bool drain(milliseconds timeout);

  /// Everything read from stdout / stderr so far (stderr only when
  /// captured; the last MiB of a long output). Waits briefly for the reader
  /// to drain the pipes if the child has exited, so a caller sees its last
  /// words.
  std::string out();
  std::string err();

private:
  std::optional<exit_status> try_reap() noexcept;
  void settle();
  void read_loop(int out_fd, int err_fd);
  void take(int stream, std::string_view chunk, bool at_end);

  pid_t pid_ = -1;
  std::string command_;
  bool echo_stdout_ = false;
  std::function<void(int, std::string_view)> on_line_;
  std::optional<exit_status> status_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::string out_;
  std::string err_;
  bool out_eof_ = false;
  bool reader_finished_ = false;
  // The reader thread's partial lines for on_line (stdout, stderr).
  std::string pending_[2];
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
/// is not done within `timeout`. Blocks. Throws as child_process does.
process_result run_process(std::vector<std::string> argv,
                           std::chrono::milliseconds timeout,
                           spawn_options opts = {});

/// The program `name`: `override_path` if given (it must be executable,
/// else std::invalid_argument naming `flag`), else the one next to this
/// executable, else the first on $PATH. Throws std::runtime_error if none
/// is found.
std::string find_program(const std::string& name,
                         const std::string& override_path,
                         const std::string& flag);

} // namespace actorflow::support
