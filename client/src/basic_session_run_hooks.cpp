#include "actorflow/client/basic_session_run_hooks.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "actorflow/graph/training.hpp"

namespace actorflow {

namespace {

using steady = std::chrono::steady_clock;

[[noreturn]] void invalid(std::string msg) {
  throw op_error(error_code::invalid_argument, std::move(msg));
}

/// TF's training_util._get_or_create_global_step_read, minus the creation:
/// the hooks need the graph's global step.
variable require_global_step(const char* hook) {
  auto step = get_global_step();
  if (!step.valid())
    throw op_error(error_code::failed_precondition,
                   std::string{"Global step should be created to use "}
                     + hook + ".");
  return step;
}

int64_t step_of(const tensor& t) {
  return t.scalar_value<int64_t>();
}

std::string format_number(const char* fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

} // namespace

// -- second_or_step_timer ------------------------------------------------------

second_or_step_timer::second_or_step_timer(std::optional<double> every_secs,
                                           std::optional<int64_t> every_steps)
  : every_secs_(every_secs), every_steps_(every_steps) {
  if (every_secs.has_value() == every_steps.has_value())
    invalid("exactly one of every_secs and every_steps should be provided.");
  if (every_secs && !(*every_secs > 0))
    invalid("every_secs must be positive, got "
            + format_number("%g", *every_secs));
  if (every_steps && *every_steps <= 0)
    invalid("every_steps must be positive, got "
            + std::to_string(*every_steps));
}

bool second_or_step_timer::should_trigger_for_step(int64_t step) const {
  if (!last_step_)
    return true;
  if (*last_step_ == step)
    return false;
  if (every_secs_
      && steady::now() >= last_time_
                            + std::chrono::duration_cast<steady::duration>(
                              std::chrono::duration<double>(*every_secs_)))
    return true;
  return every_steps_ && step >= *last_step_ + *every_steps_;
}

std::optional<std::pair<double, int64_t>>
second_or_step_timer::update_last_triggered_step(int64_t step) {
  auto now = steady::now();
  std::optional<std::pair<double, int64_t>> elapsed;
  if (last_step_)
    elapsed.emplace(std::chrono::duration<double>(now - last_time_).count(),
                    step - *last_step_);
  last_step_ = step;
  last_time_ = now;
  return elapsed;
}

// -- stop_at_step_hook ---------------------------------------------------------

stop_at_step_hook::stop_at_step_hook(std::optional<int64_t> num_steps,
                                     std::optional<int64_t> last_step)
  : num_steps_(num_steps), last_step_(last_step) {
  if (num_steps.has_value() == last_step.has_value())
    invalid("Exactly one of num_steps or last_step must be provided.");
  if (num_steps && *num_steps < 0)
    invalid("num_steps must be non-negative, got "
            + std::to_string(*num_steps));
  if (last_step && *last_step < 0)
    invalid("last_step must be non-negative, got "
            + std::to_string(*last_step));
}

void stop_at_step_hook::begin() {
  global_step_ = require_global_step("StopAtStepHook");
}

void stop_at_step_hook::after_create_session(session& sess, coordinator&) {
  // Only the first session fixes the last step: a session re-created after
  // a lost task continues toward the same one.
  if (!last_step_)
    last_step_ = step_of(sess.run(global_step_)) + *num_steps_;
}

session_run_args stop_at_step_hook::before_run(session_run_context&) {
  return {{global_step_}};
}

void stop_at_step_hook::after_run(session_run_context& context,
                                  const session_run_values& values) {
  // The value read may precede this run's increment: check again.
  auto step = step_of(values.results.at(0)) + 1;
  if (step >= *last_step_
      && step_of(context.get_session().run(global_step_)) >= *last_step_)
    context.request_stop();
}

// -- checkpoint_saver_hook ------------------------------------------------------

checkpoint_saver_hook::checkpoint_saver_hook(options opts)
  : opts_(std::move(opts)), timer_(opts_.save_secs, opts_.save_steps) {
  if (opts_.checkpoint_dir.empty())
    invalid("CheckpointSaverHook: checkpoint_dir is empty");
}

void checkpoint_saver_hook::begin() {
  global_step_ = require_global_step("CheckpointSaverHook");
  if (!opts_.saver)
    opts_.saver = std::make_shared<actorflow::saver>();
  prefix_ = (std::filesystem::path{opts_.checkpoint_dir}
             / opts_.checkpoint_basename)
              .string();
  // Before the first save, so that a missing parent is reported once,
  // naming the directory (the saver would name the file).
  std::error_code ec;
  std::filesystem::create_directories(opts_.checkpoint_dir, ec);
  if (ec)
    throw op_error(error_code::permission_denied,
                   "CheckpointSaverHook: cannot create checkpoint_dir "
                     + opts_.checkpoint_dir + ": " + ec.message());
  // What saves of an earlier run left when they were killed: the chief is
  // the only one saving here, and it has not started to.
  auto removed = remove_checkpoint_leftovers(opts_.checkpoint_dir);
  if (!removed.empty()) {
    std::string names;
    for (auto& f : removed)
      names += (names.empty() ? "" : ", ")
               + std::filesystem::path{f}.filename().string();
    write_log(opts_.log, "Removed " + std::to_string(removed.size())
                           + " leftover file(s) of interrupted saves from "
                           + opts_.checkpoint_dir + ": " + names);
  }
  // Take over the checkpoints of an earlier run, so that max_to_keep
  // deletes them in turn.
  if (auto state = get_checkpoint_state(opts_.checkpoint_dir))
    opts_.saver->recover_last_checkpoints(state->all_model_checkpoint_paths);
}

void checkpoint_saver_hook::after_create_session(session& sess,
                                                 coordinator&) {
  // TF saves right away: a checkpoint of the start (or of the restored
  // state) exists before the first step. Not the checkpoint the session
  // was just restored from, though: it holds these values already.
  auto step = step_of(sess.run(global_step_));
  timer_.update_last_triggered_step(step);
  auto path = prefix_ + "-" + std::to_string(step);
  const auto& restored = opts_.saver->last_restored();
  if (!restored.empty()
      && std::filesystem::path{restored}.lexically_normal()
           == std::filesystem::path{path}.lexically_normal()) {
    write_log(opts_.log, "Not saving checkpoints for " + std::to_string(step)
                           + ": the session was just restored from "
                           + restored + ".");
    return;
  }
  save(sess, step);
}

session_run_args checkpoint_saver_hook::before_run(session_run_context&) {
  return {{global_step_}};
}

void checkpoint_saver_hook::after_run(session_run_context& context,
                                      const session_run_values& values) {
  auto stale = step_of(values.results.at(0));
  if (!timer_.should_trigger_for_step(stale + 1))
    return;
  auto& sess = context.get_session();
  auto step = step_of(sess.run(global_step_));
  if (timer_.should_trigger_for_step(step)) {
    timer_.update_last_triggered_step(step);
    save(sess, step);
  }
}

void checkpoint_saver_hook::end(session& sess) {
  auto step = step_of(sess.run(global_step_));
  if (timer_.last_triggered_step() != step)
    save(sess, step);
}

void checkpoint_saver_hook::save(session& sess, int64_t step) {
  write_log(opts_.log, "Saving checkpoints for " + std::to_string(step)
                         + " into " + prefix_ + ".");
  opts_.saver->save(sess, prefix_, step);
}

// -- step_counter_hook ----------------------------------------------------------

step_counter_hook::step_counter_hook(std::optional<int64_t> every_n_steps,
                                     std::optional<double> every_n_secs,
                                     log_sink log)
  : timer_(every_n_secs, every_n_secs ? std::nullopt : every_n_steps),
    log_(std::move(log)) {
  if (every_n_steps && every_n_secs)
    invalid("exactly one of every_n_steps and every_n_secs should be "
            "provided.");
}

void step_counter_hook::begin() {
  global_step_ = require_global_step("StepCounterHook");
}

session_run_args step_counter_hook::before_run(session_run_context&) {
  return {{global_step_}};
}

void step_counter_hook::after_run(session_run_context& context,
                                  const session_run_values& values) {
  auto stale = step_of(values.results.at(0));
  if (!timer_.should_trigger_for_step(stale + 1))
    return;
  auto step = step_of(context.get_session().run(global_step_));
  if (!timer_.should_trigger_for_step(step))
    return;
  auto elapsed = timer_.update_last_triggered_step(step);
  if (!elapsed || elapsed->first <= 0)
    return;
  last_rate_ = static_cast<double>(elapsed->second) / elapsed->first;
  write_log(log_, "global_step/sec: " + format_number("%g", *last_rate_));
}

// -- profiler_hook ---------------------------------------------------------------

void write_chrome_trace(const run_metadata& metadata,
                        const std::string& path) {
  if (!metadata.has_step_stats)
    throw op_error(error_code::internal,
                   "no step stats to write to " + path
                     + ": the run was not traced");
  auto text = metadata.to_chrome_trace();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f != nullptr
            && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f != nullptr && std::fclose(f) != 0)
    ok = false;
  if (!ok)
    throw op_error(error_code::internal,
                   "could not write the trace to " + path + ": "
                     + std::generic_category().message(errno));
}

profiler_hook::profiler_hook(options opts)
  : opts_(std::move(opts)), timer_(opts_.save_secs, opts_.save_steps) {
  // nop
}

void profiler_hook::begin() {
  global_step_ = require_global_step("ProfilerHook");
  next_step_.reset();
}

session_run_args profiler_hook::before_run(session_run_context&) {
  request_ = next_step_ && timer_.should_trigger_for_step(*next_step_);
  session_run_args args{{global_step_}};
  if (request_)
    args.options.trace_level = run_options::full_trace;
  return args;
}

void profiler_hook::after_run(session_run_context& context,
                              const session_run_values& values) {
  auto stale = step_of(values.results.at(0));
  // The interval starts at the first run, not at the first trace.
  if (!next_step_)
    timer_.update_last_triggered_step(stale);
  auto step = stale + 1;
  if (request_) {
    step = step_of(context.get_session().run(global_step_));
    timer_.update_last_triggered_step(step);
    if (!opts_.output_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(opts_.output_dir, ec);
    }
    auto file = (std::filesystem::path{opts_.output_dir}
                 / ("timeline-" + std::to_string(step) + ".json"))
                  .string();
    write_log(opts_.log, "Saving timeline for " + std::to_string(step)
                           + " into '" + file + "'.");
    write_chrome_trace(values.metadata, file);
    written_.push_back(file);
  }
  next_step_ = step + 1;
}

// -- logging_tensor_hook ---------------------------------------------------------

logging_tensor_hook::logging_tensor_hook(
  std::vector<std::pair<std::string, output>> tensors,
  std::optional<int64_t> every_n_iter, std::optional<double> every_n_secs,
  bool at_end, log_sink log)
  : tensors_(std::move(tensors)),
    timer_(every_n_secs, every_n_iter),
    at_end_(at_end),
    log_(std::move(log)) {
  if (tensors_.empty())
    invalid("LoggingTensorHook: no tensors to log");
  for (const auto& [tag, t] : tensors_)
    if (!t.valid())
      invalid("LoggingTensorHook: tensor '" + tag + "' is invalid");
}

void logging_tensor_hook::begin() {
  timer_.reset();
  iter_count_ = 0;
}

session_run_args logging_tensor_hook::before_run(session_run_context&) {
  triggered_ = timer_.should_trigger_for_step(iter_count_);
  if (!triggered_)
    return {};
  session_run_args args;
  for (const auto& [tag, t] : tensors_)
    args.fetches.emplace_back(t);
  return args;
}

void logging_tensor_hook::after_run(session_run_context&,
                                    const session_run_values& values) {
  if (triggered_)
    log_values(values.results);
  ++iter_count_;
}

void logging_tensor_hook::end(session& sess) {
  if (!at_end_)
    return;
  std::vector<fetch> fetches;
  for (const auto& [tag, t] : tensors_)
    fetches.emplace_back(t);
  log_values(sess.run(fetches));
}

void logging_tensor_hook::log_values(const std::vector<tensor>& values) {
  auto elapsed = timer_.update_last_triggered_step(iter_count_);
  std::string line;
  for (size_t i = 0; i < tensors_.size() && i < values.size(); ++i)
    line += (i > 0 ? ", " : "") + tensors_[i].first + " = "
            + values[i].to_string();
  if (elapsed)
    line += " (" + format_number("%.3f", elapsed->first) + " sec)";
  write_log(log_, line);
}

// -- nan_tensor_hook --------------------------------------------------------------

nan_tensor_hook::nan_tensor_hook(output loss, bool fail_on_nan_loss,
                                 log_sink log)
  : loss_(std::move(loss)), fail_(fail_on_nan_loss), log_(std::move(log)) {
  if (!loss_.valid())
    invalid("NanTensorHook: the loss tensor is invalid");
}

session_run_args nan_tensor_hook::before_run(session_run_context&) {
  return {{loss_}};
}

void nan_tensor_hook::after_run(session_run_context& context,
                                const session_run_values& values) {
  const auto& loss = values.results.at(0);
  double x = loss.type() == dtype::float64
               ? loss.scalar_value<double>()
               : static_cast<double>(loss.scalar_value<float>());
  if (!std::isnan(x))
    return;
  if (fail_)
    throw op_error(error_code::invalid_argument,
                   "NaN loss during training (" + loss_.name() + ").");
  write_log(log_, "Model diverged with loss = NaN.");
  context.request_stop();
}

} // namespace actorflow
