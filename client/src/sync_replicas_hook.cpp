#include "actorflow/client/sync_replicas_hook.hpp"

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

} // namespace

std::shared_ptr<session_run_hook>
make_sync_replicas_hook(sync_replicas_optimizer& opt, bool is_chief,
                        int num_tokens, bool release_tokens_at_end) {
  return std::make_shared<sync_replicas_hook>(opt, is_chief, num_tokens,
                                              release_tokens_at_end);
}

} // namespace actorflow
