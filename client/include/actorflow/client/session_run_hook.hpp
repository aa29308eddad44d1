#pragma once

#include <functional>
#include <string>
#include <vector>

#include "actorflow/client/session.hpp"

/// TensorFlow's `tf.train.SessionRunHook` (python/training/
/// session_run_hook.py): code that a monitored_session calls around every
/// `run`, to add fetches and feeds of its own, look at their values and ask
/// the training loop to stop.
///
/// ~~~
/// struct print_loss : session_run_hook {
///   output loss;
///   session_run_args before_run(session_run_context&) override {
///     return {{loss}};
///   }
///   void after_run(session_run_context&,
///                  const session_run_values& v) override {
///     std::cout << v.results[0].to_string() << "\n";
///   }
/// };
/// ~~~
namespace actorflow {

class coordinator;

/// What a hook adds to a run (TF's `SessionRunArgs`): more fetches (their
/// values come back in `session_run_values::results`, in this order),
/// feeds, and run options. A tensor fed by two hooks, or by a hook and the
/// caller, is an error of the run. Options merge as TF merges them: the
/// highest trace level and the longest timeout of the caller's and every
/// hook's win, so a hook that asks for a trace gets one (in
/// `session_run_values::metadata`).
struct session_run_args {
  std::vector<fetch> fetches;
  feed_dict feeds = {};
  run_options options = {};
};

/// The run being made (TF's `SessionRunContext`): the caller's fetches and
/// feeds, the session, and the stop request a hook may make.
class session_run_context {
public:
  session_run_context(session_run_args original, session& sess)
    : original_(std::move(original)), session_(&sess) {
    // nop
  }

  /// The caller's fetches and feeds.
  const session_run_args& original_args() const noexcept {
    return original_;
  }
  /// The underlying session (hooks may run extra steps on it, e.g. to read
  /// the global step).
  session& get_session() const noexcept {
    return *session_;
  }
  /// Asks the monitored session to stop after this run: its `should_stop()`
  /// is true from then on.
  void request_stop() noexcept {
    stop_requested_ = true;
  }
  bool stop_requested() const noexcept {
    return stop_requested_;
  }

private:
  session_run_args original_;
  session* session_;
  bool stop_requested_ = false;
};

/// The outcome of a run for one hook (TF's `SessionRunValues`): the values
/// of the fetches its before_run asked for, in that order (invalid tensors
/// for operations).
struct session_run_values {
  std::vector<tensor> results;
  /// The options the run was made with (merged, see session_run_args).
  run_options options;
  /// TF's `run_values.run_metadata`: the step's stats when the merged
  /// options asked for a trace; shared by every hook of the run.
  run_metadata metadata;
};

/// Where hooks and monitored sessions write their log lines (TF's
/// logging.info). Empty: standard error, one line per call.
using log_sink = std::function<void(const std::string& line)>;

/// Writes `line` to `sink`, or to standard error if it is empty.
void write_log(const log_sink& sink, const std::string& line);

/// TF's `SessionRunHook`. Every member is optional; the monitored session
/// calls them from the thread that calls it (a hook sees one call at a
/// time). An exception a hook throws propagates to the caller of the
/// monitored session's constructor, `run` or `close`.
class session_run_hook {
public:
  virtual ~session_run_hook();

  /// Once, before the session is created: the graph may still change.
  virtual void begin();
  /// After a session is created, and again after each re-creation (a lost
  /// ps task): the variables are initialized or restored, the queue
  /// runners started. `coord` stops threads the hook starts.
  virtual void after_create_session(session& sess, coordinator& coord);
  /// Before each run: what the hook adds to it.
  virtual session_run_args before_run(session_run_context& context);
  /// After each successful run, with the values of what before_run added.
  virtual void after_run(session_run_context& context,
                         const session_run_values& values);
  /// At `monitored_session::close()` after normal end (not when a run
  /// failed), with the session still open.
  virtual void end(session& sess);
};

} // namespace actorflow
