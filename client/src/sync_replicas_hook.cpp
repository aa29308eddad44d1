#include "actorflow/client/sync_replicas_hook.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "actorflow/client/queue_runner.hpp"

namespace actorflow {

namespace {

/// TF's _SyncReplicasOptimizerHook.
class sync_replicas_hook : public session_run_hook {
public:
  sync_replicas_hook(sync_replicas_optimizer& opt, bool is_chief,
                     int num_tokens, bool release_at_end)
    : opt_(&opt),
      chief_(is_chief),
      num_tokens_(num_tokens),
      release_at_end_(release_at_end) {
    // nop
  }

  void begin() override {
    // Built before the first session: the graph is complete when threads
    // start running it.
    local_step_init_ = opt_->local_step_init_op();
    if (chief_) {
      chief_init_ = opt_->chief_init_op();
      init_tokens_ = opt_->get_init_tokens_op(num_tokens_);
      runner_.emplace(default_graph(), opt_->chief_queue_runner());
    }
    if (release_at_end_)
      release_tokens_ = opt_->get_init_tokens_op(opt_->total_num_replicas());
  }

  void after_create_session(session& sess, coordinator& coord) override {
    // The scaffold's readiness check ran already: the global step is
    // initialized (or restored).
    sess.run(local_step_init_);
    if (!chief_)
      return;
    sess.run(chief_init_);
    sess.run(init_tokens_);
    runner_->create_threads(sess, &coord);
  }

  void end(session& sess) override {
    if (release_at_end_)
      sess.run(release_tokens_);
  }

private:
  sync_replicas_optimizer* opt_;
  bool chief_;
  int num_tokens_;
  bool release_at_end_;
  operation local_step_init_;
  operation chief_init_;
  operation init_tokens_;
  operation release_tokens_;
  std::optional<queue_runner> runner_;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

} // namespace

std::string sync_replicas_waiting_for(session& sess,
                                      const sync_replicas_optimizer& opt,
                                      const std::vector<std::string>& replicas,
                                      int64_t timeout_ms) {
  const auto& ops = opt.accumulator_replicas();
  std::vector<fetch> fetches;
  for (const auto& op : ops)
    for (int k = 0; k < 5; ++k)
      fetches.emplace_back(op.out(k));
  run_options options;
  options.timeout_in_ms = timeout_ms;
  auto out = sess.run(fetches, {}, options);
  // Per replica: whether it has sent for the waited update to every
  // accumulator at it, its last local step there (elsewhere if it sent
  // to none of them) and the seconds since its latest gradient anywhere.
  struct seen {
    bool missing = false;
    bool known = false;
    bool seen_waited = false;
    int64_t last_step = 0;
    double idle = 0;
  };
  std::map<std::string, seen> by_name;
  for (const auto& name : replicas)
    by_name[name];
  // The update waited for: the lowest global step of any accumulator, and
  // the fewest gradients among those at it. A worker's step pushes to
  // every accumulator one by one, so one that stopped in between leaves
  // some accumulators served (a step ahead, with nobody's gradient for
  // the next update yet) and the others waiting for it alone: only those
  // at the waited step tell who is missing.
  int64_t step = 0;
  int32_t have = -1;
  for (size_t a = 0; a < ops.size(); ++a) {
    auto global = out[a * 5 + 3].scalar_value<int64_t>();
    auto count = out[a * 5 + 4].scalar_value<int32_t>();
    if (have < 0 || global < step || (global == step && count < have)) {
      step = global;
      have = count;
    }
  }
  for (size_t a = 0; a < ops.size(); ++a) {
    const auto* t = &out[a * 5];
    auto names = t[0].flat<std::string>();
    auto steps = t[1].flat<int64_t>();
    auto idle = t[2].flat<double>();
    auto global = t[3].scalar_value<int64_t>();
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < names.size(); ++i)
      index[names[i]] = i;
    const bool waited = global == step;
    for (auto& [name, s] : by_name) {
      auto i = index.find(name);
      if (i == index.end()) {
        s.missing = s.missing || waited;
        continue;
      }
      auto j = i->second;
      // Silent since its latest gradient anywhere; its last step is the
      // one the waited accumulators saw.
      if (!s.known || idle[j] < s.idle) {
        s.idle = idle[j];
        if (!s.seen_waited)
          s.last_step = steps[j];
      }
      if (waited && (!s.seen_waited || steps[j] < s.last_step)) {
        s.last_step = steps[j];
        s.seen_waited = true;
      }
      s.known = true;
      if (waited && steps[j] < global)
        s.missing = true;
    }
  }
  std::vector<std::string> missing;
  for (const auto& [name, s] : by_name) {
    if (!s.missing)
      continue;
    if (!s.known)
      missing.push_back(name + ": none received");
    else
      missing.push_back(name + ": none for " + seconds(s.idle)
                        + " (its last for global step "
                        + std::to_string(s.last_step) + ")");
  }
  if (missing.empty())
    return {};
  std::string text = "waiting for gradients from ";
  if (missing.size() == 1) {
    text += missing.front();
  } else {
    for (size_t i = 0; i < missing.size(); ++i)
      text += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ")
              + std::string{"("} + missing[i] + ")";
  }
  return text + "; the update at global step " + std::to_string(step)
         + " has " + std::to_string(std::max(have, 0)) + " of "
         + std::to_string(opt.replicas_to_aggregate()) + " gradients";
}

std::shared_ptr<session_run_hook>
make_sync_replicas_hook(sync_replicas_optimizer& opt, bool is_chief,
                        int num_tokens, bool release_tokens_at_end) {
  return std::make_shared<sync_replicas_hook>(opt, is_chief, num_tokens,
                                              release_tokens_at_end);
}

} // namespace actorflow
