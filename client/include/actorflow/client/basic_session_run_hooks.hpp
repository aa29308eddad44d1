#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/client/saver.hpp"
#include "actorflow/client/session_run_hook.hpp"

/// The hooks of TensorFlow's python/training/basic_session_run_hooks.py
/// that a training loop needs: stop at a step, save checkpoints, count
/// steps per second, log tensors, stop on a NaN loss. Each reads the graph's
/// global step (get_global_step()) where TF's does; constructors check
/// their arguments and throw op_error (InvalidArgument) naming the one at
/// fault, `begin()` throws op_error (FailedPrecondition) when the global
/// step the hook needs is missing.
namespace actorflow {

/// TF's `SecondOrStepTimer`: triggers every `every_secs` seconds or every
/// `every_steps` steps (exactly one of them is set).
class second_or_step_timer {
public:
  /// InvalidArgument unless exactly one of them is given, positive.
  second_or_step_timer(std::optional<double> every_secs,
                       std::optional<int64_t> every_steps);

  /// True if never triggered, or (at a step other than the last trigger's)
  /// the interval has passed.
  bool should_trigger_for_step(int64_t step) const;
  /// Records a trigger at `step`; returns the seconds and steps since the
  /// previous one (std::nullopt for the first).
  std::optional<std::pair<double, int64_t>>
  update_last_triggered_step(int64_t step);
  /// The step of the last trigger, if any.
  std::optional<int64_t> last_triggered_step() const noexcept {
    return last_step_;
  }
  void reset() noexcept {
    last_step_.reset();
  }

private:
  std::optional<double> every_secs_;
  std::optional<int64_t> every_steps_;
  std::optional<int64_t> last_step_;
  std::chrono::steady_clock::time_point last_time_;
};

/// TF's `StopAtStepHook`: requests a stop once the global step reaches
/// `last_step`, or `num_steps` steps past the global step found when the
/// session was (first) created. Exactly one of them is set
/// (InvalidArgument otherwise, or for a negative value).
class stop_at_step_hook : public session_run_hook {
public:
  stop_at_step_hook(std::optional<int64_t> num_steps,
                    std::optional<int64_t> last_step);

  void begin() override;
  void after_create_session(session& sess, coordinator& coord) override;
  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;

  /// The step at which the hook stops (known after the first session).
  std::optional<int64_t> last_step() const noexcept {
    return last_step_;
  }

private:
  std::optional<int64_t> num_steps_;
  std::optional<int64_t> last_step_;
  variable global_step_;
};

/// TF's `CheckpointSaverHook`: saves "<checkpoint_dir>/<basename>-<global
/// step>" with `saver` (default: a saver of every global variable, built
/// in begin()) when a session is created, then every `save_secs` seconds
/// or `save_steps` global steps, and at end() unless the last save was at
/// the final step. Logs "Saving checkpoints for <step> into <prefix>.".
/// Creates `checkpoint_dir` if needed (a failure is the saver's error) and
/// removes what interrupted saves left there
/// (remove_checkpoint_leftovers) in begin(). Departure from TF: a session
/// just restored from the checkpoint it would save when created (the
/// saver's last_restored()) is not saved again ("Not saving checkpoints
/// for <step>: the session was just restored from <path>.").
class checkpoint_saver_hook : public session_run_hook {
public:
  struct options {
    std::string checkpoint_dir;
    std::optional<double> save_secs;
    std::optional<int64_t> save_steps;
    /// Shared with the session's scaffold, typically; built in begin()
    /// when empty.
    std::shared_ptr<actorflow::saver> saver;
    std::string checkpoint_basename = "model.ckpt";
    log_sink log;
  };
  /// InvalidArgument: an empty checkpoint_dir, not exactly one of
  /// save_secs and save_steps.
  explicit checkpoint_saver_hook(options opts);

  void begin() override;
  void after_create_session(session& sess, coordinator& coord) override;
  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;
  void end(session& sess) override;

  /// The saver in use (after begin()).
  const std::shared_ptr<saver>& get_saver() const noexcept {
    return opts_.saver;
  }

private:
  void save(session& sess, int64_t step);

  options opts_;
  second_or_step_timer timer_;
  variable global_step_;
  std::string prefix_;
};

/// TF's `StepCounterHook`: logs "global_step/sec: <rate>" every
/// `every_n_steps` global steps (default 100) or `every_n_secs` seconds.
class step_counter_hook : public session_run_hook {
public:
  /// InvalidArgument unless exactly one is set (every_n_steps defaults to
  /// 100 when neither is).
  explicit step_counter_hook(std::optional<int64_t> every_n_steps = 100,
                             std::optional<double> every_n_secs = {},
                             log_sink log = {});

  void begin() override;
  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;

  /// The last rate logged, if any.
  std::optional<double> last_rate() const noexcept {
    return last_rate_;
  }

private:
  second_or_step_timer timer_;
  log_sink log_;
  variable global_step_;
  std::optional<double> last_rate_;
};

/// TF's `LoggingTensorHook`: logs "<tag> = <value>, <tag> = <value>" (the
/// values as numpy prints them), followed by " (<t> sec)" since the
/// previous line, every `every_n_iter` runs of this session or
/// `every_n_secs` seconds, and with `at_end` once more at end().
class logging_tensor_hook : public session_run_hook {
public:
  /// `tensors`: tag and tensor, logged in this order. InvalidArgument for
  /// an empty list or not exactly one of every_n_iter and every_n_secs.
  logging_tensor_hook(std::vector<std::pair<std::string, output>> tensors,
                      std::optional<int64_t> every_n_iter,
                      std::optional<double> every_n_secs = {},
                      bool at_end = false, log_sink log = {});

  void begin() override;
  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;
  void end(session& sess) override;

private:
  void log_values(const std::vector<tensor>& values);

  std::vector<std::pair<std::string, output>> tensors_;
  second_or_step_timer timer_;
  bool at_end_;
  log_sink log_;
  int64_t iter_count_ = 0;
  bool triggered_ = false;
};

/// TF's `ProfilerHook`: traces a run (full trace) every `save_steps`
/// global steps or `save_secs` seconds, the first after that interval has
/// passed since the first run, and writes it as Chrome trace-event JSON
/// (chrome://tracing, Perfetto) to `<output_dir>/timeline-<global step>.json`
/// (the global step after the run), logging "Saving timeline for STEP
/// into 'FILE'.". Creates `output_dir` if needed; a file that cannot be
/// written is an op_error (Internal, naming it) from the run that traced.
class profiler_hook : public session_run_hook {
public:
  struct options {
    std::optional<int64_t> save_steps;
    std::optional<double> save_secs;
    /// Empty: the current directory.
    std::string output_dir;
    log_sink log = {};
  };

  /// InvalidArgument unless exactly one of save_steps and save_secs is
  /// set, positive.
  explicit profiler_hook(options opts);

  void begin() override;
  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;

  /// The files written so far, oldest first.
  const std::vector<std::string>& written() const noexcept {
    return written_;
  }

private:
  options opts_;
  second_or_step_timer timer_;
  variable global_step_;
  std::optional<int64_t> next_step_;
  bool request_ = false;
  std::vector<std::string> written_;
};

/// Writes `metadata`'s step as Chrome trace-event JSON to `path` (replacing
/// it). Internal (naming the file) if it cannot be written, or if the run
/// was not traced (no step stats). Blocks on the file system.
void write_chrome_trace(const run_metadata& metadata, const std::string& path);

/// TF's `NanTensorHook`: after each run, checks the scalar `loss`; on NaN
/// it throws op_error (InvalidArgument, TF's NanLossDuringTrainingError
/// "NaN loss during training.") or, with `fail_on_nan_loss` false, logs
/// "Model diverged with loss = NaN." and requests a stop.
class nan_tensor_hook : public session_run_hook {
public:
  explicit nan_tensor_hook(output loss, bool fail_on_nan_loss = true,
                           log_sink log = {});

  session_run_args before_run(session_run_context& context) override;
  void after_run(session_run_context& context,
                 const session_run_values& values) override;

private:
  output loss_;
  bool fail_;
  log_sink log_;
};

} // namespace actorflow
