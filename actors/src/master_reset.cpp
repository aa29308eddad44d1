// TensorFlow's Session.reset on the master: the steps running here end
// saying why, the sessions close, and every task of the cluster frees the
// containers.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "master.hpp"

namespace actorflow {

// Ends every session of this master: their executors on every task go,
// and their handles answer Aborted from now on.
void close_all_sessions(master_self self) {
  for (auto& [handle, sess] : self->state.sessions)
    for (auto& exec : sess.executors)
      self->send_exit(exec, caf::exit_reason::user_shutdown);
  self->state.sessions.clear();
}

// Clears `containers` on every task of the cluster, this one included.
// When some task fails, the reply has the first failure's code and says
// which tasks the reset reached and why each other one was not.
caf::typed_response_promise<status>
reset(master_self self, std::vector<std::string>& containers) {
  auto rp = self->make_response_promise<status>();
  // The steps running here end first, saying why (TF's ends them with its
  // sessions, Cancelled); a step of another master that waits on a queue
  // of these containers hears the same from the queue (freed_status).
  std::string names;
  for (auto& c : containers)
    names += (names.empty() ? "'" : ", '") + c + "'";
  auto why = containers.empty() ? std::string{"the tasks' default "
                                              "containers were reset"}
             : containers.size() == 1
               ? "container " + names + " was reset"
               : "containers " + names + " were reset";
  std::vector<int64_t> running;
  for (auto& [id, step] : self->state.steps)
    if (!step.done)
      running.push_back(id);
  for (auto id : running) {
    self->state.steps[id].expiring = false;
    run_graph_response aborted;
    aborted.result = {error_code::aborted, why};
    on_step_reply(self, id, 0, std::move(aborted));
  }
  close_all_sessions(self);
  auto& cluster = self->state.opts.cluster;
  struct outcome {
    size_t left = 0;
    std::vector<std::string> reached;
    std::vector<std::pair<std::string, status>> failed;
  };
  auto out = std::make_shared<outcome>();
  out->left = cluster.size();
  auto done = [rp, out](const std::string& task, status st) mutable {
    if (st.ok())
      out->reached.push_back(task);
    else
      out->failed.emplace_back(task, std::move(st));
    if (--out->left > 0)
      return;
    if (out->failed.empty()) {
      rp.deliver(status{});
      return;
    }
    std::string msg = "Session.reset reached "
                      + std::to_string(out->reached.size()) + " of "
                      + std::to_string(out->reached.size()
                                       + out->failed.size())
                      + " tasks (";
    for (size_t i = 0; i < out->reached.size(); ++i)
      msg += (i > 0 ? ", " : "") + out->reached[i];
    msg += "); not ";
    for (size_t i = 0; i < out->failed.size(); ++i)
      msg += (i > 0 ? "; " : "") + out->failed[i].first + ": "
             + out->failed[i].second.message();
    rp.deliver(status{out->failed.front().second.code(), std::move(msg)});
  };
  // Tasks that are up answer in milliseconds; one that is not is named.
  auto deadline = self->clock().now() + std::chrono::seconds(5);
  for (auto& [task, address] : cluster) {
    resolve_peer(self, task, deadline,
                 [self, containers, done,
                  task = task](status err, worker_actor peer) mutable {
                   if (!err.ok())
                     return done(task, err);
                   self
                     ->request(peer, std::chrono::seconds(10), cleanup_atom_v,
                               containers)
                     .then(
                       [done, task](status& st) mutable { done(task, st); },
                       [done, task](caf::error& e) mutable {
                         done(task, to_status(e, task));
                       });
                 });
  }
  return rp;
}

} // namespace actorflow
