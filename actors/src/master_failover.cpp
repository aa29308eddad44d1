// A master's side of replicated variables (issue 31 §1; docs/DESIGN.md,
// "Replicated variables"): which task serves each ps task's variables,
// the failover to a backup when the serving task is lost or superseded,
// and the retry of the steps that failed meanwhile, with their identity
// (tag) and inside their own deadline, so that the caller sees no error.

#include <algorithm>
#include <iostream>

#include "actorflow/graph/log_ring.hpp"
#include "actorflow/graph/device_name.hpp"
#include "master.hpp"
#include "worker.hpp"

namespace actorflow {

namespace {

// Backoff between attempts: 50 ms doubling to 1 s.
caf::timespan backoff(int attempts) {
  auto ms = std::min<int64_t>(int64_t{50} << std::min(attempts, 5), 1000);
  return std::chrono::milliseconds(ms);
}

// Forgets the plans with a partition of `home`'s (their executors serve
// a store that moved): the next run registers again where it is served.
void drop_plans_of(master_self self, const std::string& home) {
  for (auto& [handle, sess] : self->state.sessions)
    for (auto i = sess.plans.begin(); i != sess.plans.end();) {
      auto& parts = i->second->parts;
      bool uses = std::any_of(parts.begin(), parts.end(),
                              [&](const plan_part& p) {
                                return p.device.rfind(home + "/", 0) == 0;
                              });
      i = uses ? sess.plans.erase(i) : std::next(i);
    }
}

// Run `id` waits `delay` for its next attempt.
void schedule(master_self self, int64_t id, caf::timespan delay) {
  self->delayed_send(self, delay, retry_step_atom_v, id);
}

// The run gives up: its caller gets the last error.
void give_up(master_self self, int64_t id) {
  auto& st = self->state;
  auto run = st.retries.find(id);
  if (run == st.retries.end())
    return;
  deliver_error(run->second.rp, run->second.retry.last_error);
  st.retries.erase(run);
}

// Attempt again later, or give up past the deadline.
void again_later(master_self self, int64_t id) {
  auto& st = self->state;
  auto run = st.retries.find(id);
  if (run == st.retries.end())
    return;
  auto& retry = run->second.retry;
  auto delay = backoff(retry.attempts++);
  if (self->clock().now() + delay >= retry.deadline)
    return give_up(self, id);
  schedule(self, id, delay);
}

// Moves `home`'s variables to the task that holds their other copy, then
// runs `id` again. Candidates, in order: the backup of the task this
// master believes serves them, then that task itself (it may hold the
// backup of a primary this master never heard of, lost since).
void fail_over(master_self self, int64_t id, const std::string& home,
               bool second = false) {
  auto& st = self->state;
  auto acting = route_of(st, home);
  auto backup = second ? acting : backup_task_of(st.ring, home, acting);
  auto deadline = std::min(st.retries.at(id).retry.deadline,
                           self->clock().now() + std::chrono::seconds(2));
  auto next = [self, id, home, second](status err) {
    auto& st = self->state;
    auto run = st.retries.find(id);
    if (run == st.retries.end())
      return;
    run->second.retry.last_error = std::move(err);
    if (!second)
      return fail_over(self, id, home, true);
    // Neither holds a complete replica: the next attempt asks the serving
    // task again (it may be starting).
    st.failover_needed.erase(home);
    again_later(self, id);
  };
  resolve_peer(
    self, backup, deadline,
    [self, id, home, acting, backup, next](status err, worker_actor w) {
      auto& st = self->state;
      if (st.retries.count(id) == 0)
        return;
      if (!err.ok())
        return next(err);
      self->request(w, std::chrono::seconds(5), promote_atom_v, home)
        .then(
          [self, id, home, acting, backup, next](status& err, int64_t epoch) {
            auto& st = self->state;
            if (!err.ok())
              return next(err);
            if (route_of(st, home) != backup) {
              if (backup == home)
                st.routes.erase(home);
              else
                st.routes[home] = backup;
              log_line(self, "failover: the variables of " + home
                               + " are served by " + backup + " (epoch "
                               + std::to_string(epoch) + ") in place of "
                               + acting);
            }
            st.failover_needed.erase(home);
            drop_plans_of(self, home);
            on_retry(self, id);
          },
          [next](caf::error& err) { next(to_status(err)); });
    });
}

} // namespace

void log_line(master_self self, const std::string& text) {
  std::cerr << "actorflow: " + self->state.task_prefix + ": " + text + "\n"
            << std::flush;
  note_log(log_level_of(text), self->state.task_prefix + ": " + text);
}

std::string route_of(const master_state& st, const std::string& home) {
  auto i = st.routes.find(home);
  return i == st.routes.end() ? home : i->second;
}

std::string replicated_home(const master_state& st,
                            const std::string& device) {
  auto home = task_of_device(device);
  return std::find(st.ring.begin(), st.ring.end(), home) != st.ring.end()
           ? home
           : std::string{};
}

bool retry_run(master_self self, pending_run& run, const std::string& device,
               const status& err) {
  auto& st = self->state;
  if (st.ring.empty())
    return false;
  auto home = replicated_home(st, device);
  if (home.empty())
    return false;
  bool superseded = err.code() == error_code::aborted
                    && err.message().rfind("Superseded", 0) == 0;
  if (err.code() != error_code::unavailable && !superseded)
    return false;
  // Superseded, or its serving task is out of reach: its backup takes
  // over (or says it cannot). Otherwise (a store waiting for its backup)
  // the same task is asked again.
  if (superseded
      || (route_of(st, home) != st.task_prefix
          && st.peers.count(route_of(st, home)) == 0))
    st.failover_needed.insert(home);
  auto now = self->clock().now();
  if (run.retry.deadline == caf::actor_clock::time_point{})
    run.retry.deadline = now
                         + std::chrono::milliseconds(
                           run.timeout_ms > 0 ? run.timeout_ms : 30000);
  if (now >= run.retry.deadline)
    return false;
  auto id = st.next_retry++;
  auto delay = backoff(run.retry.attempts++);
  run.retry.last_error = err;
  st.retries.emplace(id, std::move(run));
  // A failover goes at once; a store waiting for its backup gets a moment.
  schedule(self, id,
           st.failover_needed.count(home) > 0 ? caf::timespan{0} : delay);
  return true;
}

void on_retry(master_self self, int64_t id) {
  auto& st = self->state;
  auto i = st.retries.find(id);
  if (i == st.retries.end())
    return;
  if (self->clock().now() >= i->second.retry.deadline)
    return give_up(self, id);
  // Every ps task whose serving task was lost moves first (a lost task
  // may have served two: its own variables and those it took over).
  if (!st.failover_needed.empty())
    return fail_over(self, id, *st.failover_needed.begin());
  auto run = std::move(i->second);
  st.retries.erase(i);
  auto s = st.sessions.find(run.req.session_handle);
  if (s == st.sessions.end())
    return deliver_error(run.rp, {error_code::aborted,
                                  "Session " + run.req.session_handle
                                    + " is not found."});
  run_planned(self, std::move(run.rp), s->second, std::move(run.req),
              run.retry);
}

bool lost_replicated(master_self self, const std::string& task) {
  auto& st = self->state;
  if (st.ring.empty())
    return false;
  bool any = false;
  for (auto& home : st.ring)
    if (route_of(st, home) == task) {
      st.failover_needed.insert(home);
      any = true;
    }
  return any;
}

} // namespace actorflow
