#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/client/saver.hpp"
#include "actorflow/client/session.hpp"
#include "actorflow/client/session_run_hook.hpp"

/// TensorFlow's `tf.train.MonitoredTrainingSession` (python/training/
/// monitored_session.py and session_manager.py): a session that prepares
/// the model before the first run, calls hooks around every run, and
/// re-creates itself when a task of the cluster is lost.
///
/// ~~~
/// monitored_training_session_options o;
/// o.master = srv.target();
/// o.is_chief = task_index == 0;
/// o.checkpoint_dir = "/tmp/train_logs";
/// o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 10000)};
/// auto sess = monitored_training_session(o);
/// while (!sess->should_stop())
///   sess->run(train_op, {{x, batch_x}, {y, batch_y}});
/// sess->close();
/// ~~~
///
/// Preparing (TF's SessionManager): the chief restores the newest
/// checkpoint of `checkpoint_dir` that restores (saver::restore_newest: an
/// older one, logged, when the latest's files are damaged; an error when
/// none restores) or, if there is none, runs the scaffold's init_op,
/// init_feed_dict and init_fn; then (once the global variables
/// are initialized) its local_init_op; then checks that every variable is
/// initialized. Other workers create a session, run the local_init_op as
/// soon as the global variables are initialized, and wait (re-trying every
/// `recovery_wait`) until every variable is; after `max_wait` they fail
/// with DeadlineExceeded ("Session was not ready after waiting 60 secs.",
/// naming what is missing).
///
/// Recovery (TF's _RecoverableSession): a run or session creation that
/// fails with Unavailable or Aborted (a ps task lost or restarted) closes
/// the session (its coordinator's threads stop) and creates a new one as
/// above: the chief restores the latest checkpoint, the others wait for
/// it; then the run is retried with the same fetches and feeds. Any other
/// error propagates. Each (re-)creation is bounded by `max_wait`.
namespace actorflow {

class coordinator;

/// TF's `Scaffold`: the ops that prepare a model. `finalize` fills what was
/// left empty with TF's defaults, built in the graph given.
struct scaffold {
  /// Default: global_variables_initializer() ("init" made unique).
  operation init_op;
  feed_dict init_feed_dict;
  /// Called after init_op when the chief initializes (not on restore).
  std::function<void(session&)> init_fn;
  /// The variables that must be initialized for the model to be ready.
  /// Default: every global and local variable (TF's ready_op,
  /// report_uninitialized_variables()).
  std::optional<std::vector<variable>> ready_variables;
  /// Those that must be initialized before local_init_op may run.
  /// Default: every global variable (TF's ready_for_local_init_op).
  std::optional<std::vector<variable>> ready_for_local_init_variables;
  /// Default: local_variables_initializer().
  operation local_init_op;
  /// Default: a saver of every global variable (sharded).
  std::shared_ptr<actorflow::saver> saver;

  /// Builds the missing defaults and the readiness checks in `g`.
  /// Idempotent; a graph without global variables gets no saver.
  void finalize(graph& g);
  bool finalized() const noexcept {
    return finalized_;
  }

  /// What finalize builds to check readiness: an IsVariableInitialized
  /// per variable (colocated with it) and the variables' names.
  struct readiness {
    std::vector<output> checks;
    std::vector<std::string> names;
  };
  const readiness& ready_op() const noexcept {
    return ready_;
  }
  const readiness& ready_for_local_init_op() const noexcept {
    return local_ready_;
  }

private:
  bool finalized_ = false;
  readiness ready_;
  readiness local_ready_;
};

/// Where the session comes from, and how it is made ready (TF's
/// ChiefSessionCreator / WorkerSessionCreator).
struct session_creation_options {
  /// The master ("host:port", "caf://host:port", a server's target()); ""
  /// for an in-process session (a private engine, see session).
  std::string master;
  session_config config;
  /// The graph (default: the default graph when the monitored session is
  /// constructed).
  graph* g = nullptr;
  /// Finalized by the monitored session, in `g`.
  std::shared_ptr<actorflow::scaffold> scaffold;
  /// Chief only: restore from the newest checkpoint here that restores,
  /// if any (saver::restore_newest).
  std::string checkpoint_dir;
  /// Chief only: restore this checkpoint (wins over checkpoint_dir).
  std::string checkpoint_filename_with_path;
  /// How long one (re-)creation may take in total before it fails with
  /// DeadlineExceeded (TF's max_wait_secs, 7200 s).
  std::chrono::milliseconds max_wait = std::chrono::hours{2};
  /// Pause between attempts while waiting for the model or a task (TF's
  /// recovery_wait_secs is 30 s; we poll every second).
  std::chrono::milliseconds recovery_wait = std::chrono::seconds{1};
  /// Deadline of each step run while preparing (0: config's default, or
  /// 10 s if that is 0 too).
  int64_t prepare_timeout_in_ms = 0;
  log_sink log;
};

/// Makes a ready session (the chief or another worker, see above). Blocks
/// up to `max_wait`.
class session_creator {
public:
  /// Takes the default graph if `opts.g` is null.
  explicit session_creator(session_creation_options opts);
  virtual ~session_creator();
  /// Creates a session and makes it ready. Throws op_error:
  /// DeadlineExceeded after `max_wait`; FailedPrecondition when the
  /// chief's init ops leave variables uninitialized; what restore throws
  /// (DataLoss, NotFound, ...); any error of a step other than
  /// Unavailable, Aborted and DeadlineExceeded (retried until `max_wait`).
  virtual session create_session() = 0;
  const session_creation_options& options() const noexcept {
    return opts_;
  }

protected:
  session_creation_options opts_;
};

/// TF's `ChiefSessionCreator`: restores or initializes. One departure from
/// TF: a session created again after a lost task (recovery) whose model is
/// still ready (every variable initialized: the task came back with its
/// state, after a network cut or a stopped process) goes on from there
/// instead of restoring the last checkpoint or initializing again, which
/// would undo the updates since.
class chief_session_creator : public session_creator {
public:
  using session_creator::session_creator;
  session create_session() override;

private:
  int created_ = 0;
};

/// TF's `WorkerSessionCreator`: waits for the chief.
class worker_session_creator : public session_creator {
public:
  using session_creator::session_creator;
  session create_session() override;
};

using session_run_hooks = std::vector<std::shared_ptr<session_run_hook>>;

class monitored_session;

/// TF's `MonitoredSession.StepContext`: what a function given to
/// monitored_session::run_step_fn works with, valid during that call only.
class step_context {
public:
  /// The session underneath (TF's `step_context.session`): its runs call
  /// no hook and are allowed after a stop was requested, e.g. to score
  /// the test set between training steps.
  session& get_session() const noexcept {
    return *sess_;
  }

  /// monitored_session::run, with the hooks (TF's `run_with_hooks`).
  std::vector<tensor> run_with_hooks(const std::vector<fetch>& fetches,
                                     const feed_dict& feeds = {},
                                     const run_options& options = {});

  /// Asks the training to end: should_stop() is true once the function
  /// returns. (TF raises StopIteration here, ending the function at once.)
  void request_stop() noexcept {
    stop_requested_ = true;
  }

private:
  friend class monitored_session;
  step_context(monitored_session& owner, session& sess)
    : owner_(&owner), sess_(&sess) {
  }
  monitored_session* owner_;
  session* sess_;
  bool stop_requested_ = false;
};

/// TF's `MonitoredSession`: a session with hooks, queue runners and
/// recovery. Use it from one thread.
class monitored_session {
public:
  /// Calls every hook's begin(), then creates the session (blocks, see
  /// session_creator): starts the graph's queue runners (TF's
  /// QUEUE_RUNNERS collection) with a new coordinator and calls every
  /// hook's after_create_session. Throws what creation throws.
  monitored_session(std::shared_ptr<session_creator> creator,
                    session_run_hooks hooks = {},
                    std::chrono::milliseconds stop_grace_period
                    = std::chrono::seconds{120},
                    log_sink log = {});

  monitored_session(const monitored_session&) = delete;
  monitored_session& operator=(const monitored_session&) = delete;

  /// Without close(): stops the threads and closes the session without
  /// calling end() (as TF's `with` block left by an exception). Requests
  /// the coordinator's stop, closes the session (which ends steps its
  /// threads block in), then joins them, waiting up to the grace period.
  ~monitored_session();

  /// Runs `fetches` with `feeds` plus what the hooks' before_run add,
  /// passes each hook its values, and returns the caller's values. On
  /// Unavailable or Aborted, re-creates the session and runs again.
  /// Throws op_error: FailedPrecondition "Run called even after
  /// should_stop requested." or "Session is closed."; InvalidArgument
  /// "Same tensor is fed by a SessionRunHook and user." (or by two hooks),
  /// naming the tensor; any other error of the run (the coordinator's
  /// recorded error instead, when a thread of it failed first); Cancelled
  /// when `cancel` (as session::run's) asked for it, never recovered from.
  /// `metadata`, when given, receives the step's trace when `options` (or
  /// a hook's) asked for one, as TF's MonitoredSession.run(run_metadata=).
  std::vector<tensor> run(const std::vector<fetch>& fetches,
                          const feed_dict& feeds = {},
                          const run_options& options = {},
                          run_metadata* metadata = nullptr,
                          step_cancellation* cancel = nullptr);
  tensor run(const fetch& f, const feed_dict& feeds = {},
             const run_options& options = {});

  /// TF's `MonitoredSession.run_step_fn`: calls `step_fn` with the session
  /// underneath and returns what it returns. When it throws Unavailable
  /// or Aborted (a lost task), the session is re-created and `step_fn`
  /// called again, as run does; its other errors are thrown. Unlike run,
  /// it may be called after a stop was requested (not after close():
  /// FailedPrecondition "Session is closed."). Blocks as `step_fn` does.
  template <class F>
  auto run_step_fn(F&& step_fn) -> std::invoke_result_t<F&, step_context&> {
    using result = std::invoke_result_t<F&, step_context&>;
    if constexpr (std::is_void_v<result>) {
      run_step_fn_impl([&](step_context& c) { step_fn(c); });
    } else {
      std::optional<result> out;
      run_step_fn_impl([&](step_context& c) { out.emplace(step_fn(c)); });
      return std::move(*out);
    }
  }

  /// True once a hook requested a stop, or a thread of the coordinator
  /// asked for one or failed; after `close()` too. A thread that failed
  /// with Unavailable or Aborted does not stop training: the session is
  /// closed and re-created at the next run. May block while closing.
  bool should_stop();

  /// Calls every hook's end(), then stops the coordinator's threads and
  /// closes the session (see the destructor). Idempotent. Throws what
  /// end() throws (the session is closed anyway).
  void close();

  /// How many times the session was re-created after a lost task.
  int recoveries() const noexcept;

  /// The graph the sessions run.
  graph& get_graph() const;

private:
  friend class step_context;

  void run_step_fn_impl(const std::function<void(step_context&)>& step_fn);

  struct impl;
  std::unique_ptr<impl> impl_;
};

/// TF's `MonitoredTrainingSession` arguments.
struct monitored_training_session_options {
  std::string master;
  bool is_chief = true;
  /// Restore from and save checkpoints to this directory ("": neither).
  std::string checkpoint_dir;
  std::shared_ptr<actorflow::scaffold> scaffold;
  session_run_hooks hooks;
  /// Only the chief runs these.
  session_run_hooks chief_only_hooks;
  /// The chief saves every this many seconds or global steps (at most one
  /// of them; neither: every 600 s, as TF). Both 0: no checkpoint hook.
  std::optional<double> save_checkpoint_secs;
  std::optional<int64_t> save_checkpoint_steps;
  /// The chief logs global_step/sec every this many steps (0: never).
  int64_t log_step_count_steps = 100;
  session_config config;
  graph* g = nullptr;
  std::chrono::milliseconds stop_grace_period = std::chrono::seconds{120};
  std::chrono::milliseconds max_wait = std::chrono::hours{2};
  std::chrono::milliseconds recovery_wait = std::chrono::seconds{1};
  int64_t prepare_timeout_in_ms = 0;
  log_sink log;
};

/// Builds the creator (chief or worker) and the chief's default hooks
/// (step_counter_hook, checkpoint_saver_hook in `checkpoint_dir`) and
/// returns the monitored session (constructed as above: blocks until the
/// session is ready). InvalidArgument for both save_checkpoint_secs and
/// save_checkpoint_steps set, or a negative one.
std::unique_ptr<monitored_session>
monitored_training_session(monitored_training_session_options opts);

} // namespace actorflow
