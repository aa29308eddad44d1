#include "actorflow/client/monitored_session.hpp"

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include "actorflow/client/basic_session_run_hooks.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/queue_runner.hpp"

namespace actorflow {

namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// TF's _PREEMPTION_ERRORS: a task of the cluster was lost or restarted.
bool is_preemption(error_code code) {
  return code == error_code::unavailable || code == error_code::aborted;
}

bool is_preemption(const std::exception_ptr& ex) {
  if (!ex)
    return false;
  try {
    std::rethrow_exception(ex);
  } catch (const op_error& e) {
    return is_preemption(e.code());
  } catch (...) {
    return false;
  }
}

std::string what_of(const std::exception_ptr& ex) {
  try {
    std::rethrow_exception(ex);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

std::string seconds_text(milliseconds d) {
  return std::to_string((d.count() + 500) / 1000);
}

scaffold::readiness build_checks(const std::vector<variable>& vars) {
  scaffold::readiness r;
  for (const auto& v : vars) {
    r.checks.push_back(is_variable_initialized(v));
    r.names.push_back(v.op().name());
  }
  return r;
}

// -- TF's SessionManager ----------------------------------------------------------

/// Prepares sessions for one creator's options.
class session_manager {
public:
  explicit session_manager(const session_creation_options& opts)
    : opts_(opts), sc_(*opts.scaffold) {
    auto ms = opts.prepare_timeout_in_ms > 0
                ? opts.prepare_timeout_in_ms
                : opts.config.operation_timeout_in_ms;
    quick_.timeout_in_ms = ms > 0 ? ms : 10000;
  }

  /// TF's `prepare_session`: restore or initialize, run the local init op,
  /// check readiness; `recovering` and ready: nothing (chief_session_creator).
  session prepare_session(bool recovering = false) {
    return retry([this, recovering](session& s) -> std::optional<std::string> {
      // Recovering and still ready: the lost task kept its state.
      if (recovering && !not_ready(s, sc_.ready_op())) {
        write_log(opts_.log, "The model is still initialized (the lost task "
                             "came back with its state): continuing without "
                             "restoring or initializing.");
        return std::nullopt;
      }
      // A given checkpoint, or the newest of checkpoint_dir that restores
      // (an older one when the latest is damaged, saying why).
      bool restored = false;
      const auto& ckpt = opts_.checkpoint_filename_with_path;
      if (sc_.saver && !ckpt.empty()) {
        write_log(opts_.log, "Restoring parameters from " + ckpt);
        sc_.saver->restore(s, ckpt);
        restored = true;
      } else if (sc_.saver && !opts_.checkpoint_dir.empty()) {
        restored = !sc_.saver
                      ->restore_newest(s, opts_.checkpoint_dir, opts_.log)
                      .empty();
      }
      if (!restored) {
        if (!sc_.init_op.valid() && !sc_.init_fn
            && !sc_.local_init_op.valid())
          throw op_error(error_code::failed_precondition,
                         "Model is not initialized and no init_op or "
                         "init_fn or local_init_op was given");
        if (sc_.init_op.valid())
          s.run(sc_.init_op, sc_.init_feed_dict, quick_);
        if (sc_.init_fn)
          sc_.init_fn(s);
      }
      // A ps restarted between the init op and here loses what it got:
      // that is worth another attempt, not an error.
      if (auto msg = try_local_init(s))
        return "ready_for_local_init_op: " + *msg;
      if (auto msg = not_ready(s, sc_.ready_op()))
        throw op_error(error_code::failed_precondition,
                       "Init operations did not make model ready. "
                       "Init op: "
                         + (sc_.init_op.valid() ? sc_.init_op.name()
                                                : std::string{"None"})
                         + ", error: " + *msg);
      return std::nullopt;
    });
  }

  /// TF's `wait_for_session`: the chief prepares the model; wait for it.
  session wait_for_session() {
    return retry([this](session& s) -> std::optional<std::string> {
      if (auto msg = try_local_init(s))
        return "ready_for_local_init_op: " + *msg;
      if (auto msg = not_ready(s, sc_.ready_op()))
        return "ready: " + *msg;
      return std::nullopt;
    });
  }

private:
  session make_session() const {
    return opts_.master.empty() ? session{opts_.config, opts_.g}
                                : session{opts_.master, opts_.config,
                                          opts_.g};
  }

  /// Why the variables of `r` are not ready ("Variables not initialized:
  /// w, b"), or nothing if they are.
  std::optional<std::string> not_ready(session& s,
                                       const scaffold::readiness& r) const {
    if (r.checks.empty())
      return std::nullopt;
    std::vector<fetch> fetches(r.checks.begin(), r.checks.end());
    auto flags = s.run(fetches, {}, quick_);
    std::string missing;
    for (size_t i = 0; i < flags.size(); ++i)
      if (!flags[i].scalar_value<bool>())
        missing += (missing.empty() ? "" : ", ") + r.names[i];
    if (missing.empty())
      return std::nullopt;
    return "Variables not initialized: " + missing;
  }

  /// A reason for the periodic waiting line: a list of uninitialized
  /// variables as its length and first two names (the error at the
  /// deadline keeps the whole list).
  static std::string brief(const std::string& why) {
    static const std::string marker = "Variables not initialized: ";
    auto at = why.find(marker);
    if (at == std::string::npos)
      return why;
    auto names = why.substr(at + marker.size());
    auto count = 1 + std::count(names.begin(), names.end(), ',');
    auto second = names.find(", ");
    if (second != std::string::npos)
      second = names.find(", ", second + 2);
    if (second != std::string::npos)
      names = names.substr(0, second) + ", ...";
    return why.substr(0, at) + marker + std::to_string(count) + " (" + names
           + ")";
  }

  /// TF's `_try_run_local_init_op`.
  std::optional<std::string> try_local_init(session& s) const {
    if (!sc_.local_init_op.valid())
      return std::nullopt;
    if (auto msg = not_ready(s, sc_.ready_for_local_init_op()))
      return msg;
    s.run(sc_.local_init_op, {}, quick_);
    return std::nullopt;
  }

  /// Creates sessions and runs `attempt` on them until it reports nothing
  /// missing, retrying every `recovery_wait` on a lost task, a step past
  /// its deadline or a model not ready yet, for at most `max_wait`.
  template <class Attempt>
  session retry(Attempt attempt) {
    auto start = steady::now();
    auto deadline = start + opts_.max_wait;
    auto next_log = start;
    std::string last;
    for (;;) {
      try {
        auto s = make_session();
        auto missing = attempt(s);
        if (!missing)
          return s;
        last = *missing;
        s.close();
      } catch (const op_error& e) {
        if (!is_preemption(e.code())
            && e.code() != error_code::deadline_exceeded)
          throw;
        last = e.what();
      }
      auto now = steady::now();
      if (now + opts_.recovery_wait >= deadline)
        throw op_error(error_code::deadline_exceeded,
                       "Session was not ready after waiting "
                         + seconds_text(opts_.max_wait) + " secs. " + last);
      // TF logs every attempt; with our short pause, every 10 s is enough.
      if (now >= next_log) {
        write_log(opts_.log, "Waiting for model to be ready. " + brief(last));
        next_log = now + std::chrono::seconds{10};
      }
      std::this_thread::sleep_for(opts_.recovery_wait);
    }
  }

  const session_creation_options& opts_;
  scaffold& sc_;
  run_options quick_;
};

} // namespace

// -- scaffold ---------------------------------------------------------------------

void scaffold::finalize(graph& g) {
  if (finalized_)
    return;
  graph::default_guard guard{g};
  if (!init_op.valid())
    init_op = global_variables_initializer();
  auto globals = global_variables();
  if (!ready_variables) {
    auto vars = globals;
    for (auto& v : local_variables())
      vars.push_back(v);
    ready_variables = std::move(vars);
  }
  if (!ready_for_local_init_variables)
    ready_for_local_init_variables = globals;
  if (!local_init_op.valid())
    local_init_op = local_variables_initializer();
  if (!saver && !globals.empty())
    saver = std::make_shared<actorflow::saver>();
  ready_ = build_checks(*ready_variables);
  local_ready_ = build_checks(*ready_for_local_init_variables);
  finalized_ = true;
}

// -- session creators ---------------------------------------------------------------

session_creator::session_creator(session_creation_options opts)
  : opts_(std::move(opts)) {
  if (!opts_.g)
    opts_.g = &default_graph();
  if (!opts_.scaffold)
    opts_.scaffold = std::make_shared<scaffold>();
}

session_creator::~session_creator() = default;

session chief_session_creator::create_session() {
  opts_.scaffold->finalize(*opts_.g);
  auto recovering = created_++ > 0;
  return session_manager{opts_}.prepare_session(recovering);
}

session worker_session_creator::create_session() {
  opts_.scaffold->finalize(*opts_.g);
  return session_manager{opts_}.wait_for_session();
}

// -- monitored_session --------------------------------------------------------------

struct monitored_session::impl {
  std::shared_ptr<session_creator> creator;
  session_run_hooks hooks;
  milliseconds grace;
  log_sink log;
  graph* g = nullptr;
  std::optional<session> sess;
  // Declared after `sess`: destroyed first, joining threads that use it.
  std::unique_ptr<coordinator> coord;
  bool stop_requested = false;
  bool closed = false;
  int recoveries = 0;

  /// TF's _CoordinatedSessionCreator.create_session, retried as
  /// _RecoverableSession._create_session on a lost task.
  void create() {
    for (int attempt = 1;; ++attempt) {
      try {
        sess.emplace(creator->create_session());
        // As TF: every exception of a thread is an error.
        coord = std::make_unique<coordinator>(std::vector<error_code>{});
        if (!g->queue_runners().empty())
          start_queue_runners(*sess, *coord);
        for (auto& h : hooks)
          h->after_create_session(*sess, *coord);
        return;
      } catch (const op_error& e) {
        if (!is_preemption(e.code()) || attempt >= 10)
          throw;
        write_log(log, "An error was raised while a session was being "
                       "created. This may be due to a preemption of a "
                       "connected worker or parameter server. A new "
                       "session will be created. Error: "
                         + std::string{e.what()});
        close_internal();
      }
    }
  }

  /// Stops the threads and closes the session; errors that only say the
  /// session or a task is gone are logged, as TF's _RecoverableSession.
  void close_internal() {
    if (coord)
      coord->request_stop();
    // Before joining: closing ends the steps the threads block in.
    if (sess) {
      try {
        sess->close();
      } catch (const std::exception& e) {
        write_log(log, std::string{"Error closing the session: "} + e.what());
      }
    }
    if (coord) {
      try {
        coord->join(grace, true);
      } catch (const std::exception& e) {
        if (!is_preemption(std::current_exception()))
          write_log(log, std::string{"A thread of the session failed: "}
                           + e.what());
      }
    }
    coord.reset();
    sess.reset();
  }

  void recover(const std::string& why) {
    write_log(log, "An error was raised. This may be due to a preemption in "
                   "a connected worker or parameter server. The current "
                   "session will be closed and a new session will be "
                   "created. Error: "
                     + why);
    close_internal();
    ++recoveries;
  }

  /// TF's _HookedSession.run.
  std::vector<tensor> hooked_run(const std::vector<fetch>& fetches,
                                 const feed_dict& feeds,
                                 const run_options& options,
                                 run_metadata* caller_metadata,
                                 step_cancellation* cancel) {
    session_run_context context{{fetches, feeds}, *sess};
    auto all_fetches = fetches;
    auto all_feeds = feeds;
    std::set<std::string> user_fed;
    std::set<std::string> hook_fed;
    for (const auto& [x, value] : feeds)
      user_fed.insert(x.name());
    std::vector<std::pair<size_t, size_t>> ranges;
    auto merged = options;
    for (auto& h : hooks) {
      auto args = h->before_run(context);
      // TF's _call_hook_before_run merges the options the same way.
      merged.trace_level = std::max(merged.trace_level,
                                    args.options.trace_level);
      merged.timeout_in_ms = std::max(merged.timeout_in_ms,
                                      args.options.timeout_in_ms);
      ranges.emplace_back(all_fetches.size(), args.fetches.size());
      for (auto& f : args.fetches)
        all_fetches.push_back(std::move(f));
      for (auto& [x, value] : args.feeds) {
        auto name = x.name();
        if (user_fed.count(name) > 0)
          throw op_error(error_code::invalid_argument,
                         "Same tensor is fed by a SessionRunHook and user: "
                           + name);
        if (!hook_fed.insert(name).second)
          throw op_error(error_code::invalid_argument,
                         "Same tensor is fed by two hooks: " + name);
        all_feeds.emplace_back(x, std::move(value));
      }
    }
    run_metadata metadata;
    auto out = sess->run(all_fetches, all_feeds, merged,
                         merged.trace_level > run_options::no_trace
                           ? &metadata
                           : nullptr,
                         cancel);
    if (caller_metadata != nullptr)
      *caller_metadata = metadata;
    for (size_t i = 0; i < hooks.size(); ++i) {
      session_run_values values;
      values.metadata = metadata;
      auto [first, count] = ranges[i];
      values.results.assign(
        std::make_move_iterator(out.begin() + static_cast<ptrdiff_t>(first)),
        std::make_move_iterator(out.begin()
                                + static_cast<ptrdiff_t>(first + count)));
      values.options = merged;
      hooks[i]->after_run(context, values);
    }
    stop_requested = stop_requested || context.stop_requested();
    out.resize(fetches.size());
    return out;
  }

  /// TF's _CoordinatedSession.run: a thread's error explains a failed run
  /// better than the run's own (often Cancelled or Aborted) error, and is
  /// thrown instead.
  std::vector<tensor> coordinated_run(const std::vector<fetch>& fetches,
                                      const feed_dict& feeds,
                                      const run_options& options,
                                      run_metadata* caller_metadata,
                                      step_cancellation* cancel) {
    try {
      return hooked_run(fetches, feeds, options, caller_metadata, cancel);
    } catch (const op_error& e) {
      auto thread_error = coord ? coord->requested_exception() : nullptr;
      if (!thread_error || is_preemption(e.code()))
        throw;
      std::rethrow_exception(thread_error);
    }
  }
};

monitored_session::monitored_session(std::shared_ptr<session_creator> creator,
                                     session_run_hooks hooks,
                                     milliseconds stop_grace_period,
                                     log_sink log)
  : impl_(std::make_unique<impl>()) {
  if (!creator)
    throw op_error(error_code::invalid_argument,
                   "monitored_session: no session creator");
  impl_->creator = std::move(creator);
  impl_->hooks = std::move(hooks);
  impl_->grace = stop_grace_period;
  impl_->log = std::move(log);
  impl_->g = impl_->creator->options().g;
  for (const auto& h : impl_->hooks)
    if (!h)
      throw op_error(error_code::invalid_argument,
                     "monitored_session: a hook is null");
  {
    graph::default_guard guard{*impl_->g};
    for (auto& h : impl_->hooks)
      h->begin();
  }
  impl_->create();
}

monitored_session::~monitored_session() {
  if (impl_ && !impl_->closed)
    impl_->close_internal();
}

std::vector<tensor> monitored_session::run(const std::vector<fetch>& fetches,
                                           const feed_dict& feeds,
                                           const run_options& options,
                                           run_metadata* metadata,
                                           step_cancellation* cancel) {
  auto& d = *impl_;
  if (d.closed)
    throw op_error(error_code::failed_precondition, "Session is closed.");
  if (d.stop_requested)
    throw op_error(error_code::failed_precondition,
                   "Run called even after should_stop requested.");
  for (;;) {
    if (!d.sess)
      d.create();
    try {
      return d.coordinated_run(fetches, feeds, options, metadata, cancel);
    } catch (const op_error& e) {
      if (!is_preemption(e.code()))
        throw;
      d.recover(e.what());
    }
  }
}

tensor monitored_session::run(const fetch& f, const feed_dict& feeds,
                              const run_options& options) {
  return run(std::vector<fetch>{f}, feeds, options).front();
}

void monitored_session::run_step_fn_impl(
  const std::function<void(step_context&)>& step_fn) {
  auto& d = *impl_;
  if (d.closed)
    throw op_error(error_code::failed_precondition, "Session is closed.");
  for (;;) {
    if (!d.sess)
      d.create();
    step_context context{*this, *d.sess};
    try {
      step_fn(context);
    } catch (const op_error& e) {
      // As run: a lost task re-creates the session, and the function runs
      // again on the new one (TF's _RecoverableSession.run_step_fn).
      if (!is_preemption(e.code()))
        throw;
      d.recover(e.what());
      continue;
    }
    d.stop_requested = d.stop_requested || context.stop_requested_;
    return;
  }
}

std::vector<tensor> step_context::run_with_hooks(
  const std::vector<fetch>& fetches, const feed_dict& feeds,
  const run_options& options) {
  // Without run's recovery: a lost task ends the step function, which
  // run_step_fn calls again on a new session (this context's is gone).
  auto& d = *owner_->impl_;
  if (d.stop_requested)
    throw op_error(error_code::failed_precondition,
                   "Run called even after should_stop requested.");
  return d.coordinated_run(fetches, feeds, options, nullptr, nullptr);
}

bool monitored_session::should_stop() {
  auto& d = *impl_;
  if (d.closed || d.stop_requested)
    return true;
  if (!d.coord)
    return false;
  if (auto ex = d.coord->requested_exception()) {
    if (is_preemption(ex)) {
      // Not the end of training: the next run re-creates the session.
      d.recover(what_of(ex));
      return false;
    }
    return true;
  }
  return d.coord->should_stop();
}

void monitored_session::close() {
  auto& d = *impl_;
  if (d.closed)
    return;
  d.closed = true;
  std::exception_ptr err;
  if (d.sess) {
    try {
      for (auto& h : d.hooks)
        h->end(*d.sess);
    } catch (...) {
      err = std::current_exception();
    }
  }
  d.close_internal();
  if (err)
    std::rethrow_exception(err);
}

int monitored_session::recoveries() const noexcept {
  return impl_->recoveries;
}

graph& monitored_session::get_graph() const {
  return *impl_->g;
}

// -- monitored_training_session ------------------------------------------------------

std::unique_ptr<monitored_session>
monitored_training_session(monitored_training_session_options opts) {
  auto secs = opts.save_checkpoint_secs;
  auto steps = opts.save_checkpoint_steps;
  if (secs && steps && *secs > 0 && *steps > 0)
    throw op_error(error_code::invalid_argument,
                   "MonitoredTrainingSession: at most one of "
                   "save_checkpoint_secs and save_checkpoint_steps may be "
                   "set");
  if ((secs && *secs < 0) || (steps && *steps < 0))
    throw op_error(error_code::invalid_argument,
                   "MonitoredTrainingSession: save_checkpoint_secs and "
                   "save_checkpoint_steps must not be negative");
  if (!secs && !steps)
    secs = 600;

  session_creation_options co;
  co.master = opts.master;
  co.config = opts.config;
  co.g = opts.g ? opts.g : &default_graph();
  co.scaffold = opts.scaffold ? opts.scaffold : std::make_shared<scaffold>();
  co.max_wait = opts.max_wait;
  co.recovery_wait = opts.recovery_wait;
  co.prepare_timeout_in_ms = opts.prepare_timeout_in_ms;
  co.log = opts.log;
  // The checkpoint hook saves with the scaffold's saver: build it now.
  co.scaffold->finalize(*co.g);

  session_run_hooks hooks;
  std::shared_ptr<session_creator> creator;
  if (opts.is_chief) {
    co.checkpoint_dir = opts.checkpoint_dir;
    creator = std::make_shared<chief_session_creator>(std::move(co));
    hooks = opts.chief_only_hooks;
    for (auto& h : opts.hooks)
      hooks.push_back(h);
    if (opts.log_step_count_steps > 0)
      hooks.push_back(std::make_shared<step_counter_hook>(
        opts.log_step_count_steps, std::nullopt, opts.log));
    bool save_by_secs = secs && *secs > 0;
    bool save_by_steps = steps && *steps > 0;
    if (!opts.checkpoint_dir.empty() && (save_by_secs || save_by_steps)) {
      checkpoint_saver_hook::options ho;
      ho.checkpoint_dir = opts.checkpoint_dir;
      if (save_by_secs)
        ho.save_secs = secs;
      else
        ho.save_steps = steps;
      ho.saver = creator->options().scaffold->saver;
      ho.log = opts.log;
      hooks.push_back(std::make_shared<checkpoint_saver_hook>(std::move(ho)));
    }
  } else {
    creator = std::make_shared<worker_session_creator>(std::move(co));
    hooks = opts.hooks;
  }
  return std::make_unique<monitored_session>(std::move(creator),
                                             std::move(hooks),
                                             opts.stop_grace_period,
                                             opts.log);
}

} // namespace actorflow
