// What the loss of a task, of an executor in another process or of a
// step's client does to a master's steps and plans, and a client's
// cancellation of its step: each affected step fails (or is withdrawn)
// everywhere, as a failed step is (master.cpp's on_step_reply).

#include <algorithm>

#include "master.hpp"

namespace actorflow {

namespace {

// Fails with Unavailable (message `why(part)`) every running step with a
// part for which `lost(step, p)` holds, naming the first such part.
template <class Lost, class Why>
void fail_steps_on(master_self self, Lost lost, Why why) {
  auto& st = self->state;
  std::vector<std::pair<int64_t, size_t>> failed;
  for (auto& [id, step] : st.steps)
    for (size_t p = 0; p < step.parts().size(); ++p)
      if (lost(step, p)) {
        failed.emplace_back(id, p);
        break;
      }
  for (auto [id, p] : failed) {
    run_graph_response resp;
    resp.result = {error_code::unavailable, why(st.steps[id].parts()[p])};
    on_step_reply(self, id, p, std::move(resp));
  }
}

} // namespace

// A remote task went away: its steps fail now (not at their deadline)
// with Unavailable, and plans that use it are dropped so that the next run
// registers again (with a restarted task, if there is one).
void lost_task(master_self self, const std::string& task,
               const std::string& reason, const caf::actor_addr& lost) {
  auto& st = self->state;
  auto why = "Lost task " + task + " at " + st.opts.cluster[task] + " ("
             + reason + ")";
  // Replicated variables survive it: the steps that used it run again on
  // the promoted backups.
  bool replicated = lost_replicated(self, task);
  if (auto i = st.registering.find(task); i != st.registering.end()) {
    auto waiting = std::move(i->second);
    st.registering.erase(i);
    for (auto& [id, fail] : waiting)
      fail({error_code::unavailable, why});
  }
  auto on_task = [&](const std::string& device) {
    return device.rfind(task + "/", 0) == 0;
  };
  fail_steps_on(
    self,
    [&](const master_step& step, size_t p) {
      return on_task(step.parts()[p].device);
    },
    [&](const plan_part&) { return why; });
  for (auto& [handle, sess] : st.sessions)
    for (auto i = sess.plans.begin(); i != sess.plans.end();) {
      auto& parts = i->second->parts;
      bool uses = std::any_of(parts.begin(), parts.end(),
                              [&](const plan_part& p) {
                                return on_task(p.device);
                              });
      if (uses && !replicated)
        sess.lost_tasks.emplace(task, master_session::lost_task_info{
                                        reason, lost.node(), lost.id()});
      i = uses ? sess.plans.erase(i) : std::next(i);
    }
}

// An executor in another process that this master sent requests over the
// tensor channel ended: its steps fail as a CAF request to it would have.
void lost_executor(master_self self, const caf::actor_addr& exec,
                   const std::string& reason) {
  fail_steps_on(
    self,
    [&](const master_step& step, size_t p) {
      return !step.replied[p] && step.parts()[p].route
             && step.parts()[p].executor.address() == exec;
    },
    [&](const plan_part& part) {
      return "Lost connection (" + part.device + "): " + reason;
    });
}

// The client of some steps died or went silent: nobody waits for them, and
// their parts (a dequeue waiting on a queue, say) would go on for nobody.
// Each is withdrawn everywhere, as a failed step is.
void lost_requester(master_self self, const caf::actor_addr& who,
                    const std::string& reason) {
  std::vector<int64_t> orphans;
  for (auto& [id, step] : self->state.steps)
    if (!step.done && step.requester == who)
      orphans.push_back(id);
  for (auto id : orphans) {
    run_graph_response resp;
    resp.result = {error_code::cancelled,
                   "Step was withdrawn: its client was lost (" + reason + ")"};
    on_step_reply(self, id, 0, std::move(resp));
  }
}

// The requester gave up on one of its steps (Ctrl-C in Python,
// session::run's step_cancellation): withdrawn everywhere, as a failed
// step is. One not started yet fails when it starts.
void cancel_client_step(master_self self, const caf::actor_addr& who,
                        int64_t client_step) {
  auto& st = self->state;
  for (auto& [id, step] : st.steps)
    if (!step.done && step.requester == who
        && step.client_step == client_step) {
      run_graph_response resp;
      resp.result = {error_code::cancelled,
                     "Step was cancelled by its client"};
      on_step_reply(self, id, 0, std::move(resp));
      return;
    }
  constexpr size_t max_early = 64;
  if (st.cancelled_early.size() == max_early)
    st.cancelled_early.pop_front();
  st.cancelled_early.emplace_back(who, client_step);
}

// Whether the requester of this step cancelled it before it started
// (forgotten once matched).
bool cancelled_before_start(master_state& st, const caf::actor_addr& who,
                            int64_t client_step) {
  auto& early = st.cancelled_early;
  auto i = std::find(early.begin(), early.end(),
                     std::make_pair(who, client_step));
  if (i == early.end())
    return false;
  early.erase(i);
  return true;
}

} // namespace actorflow
