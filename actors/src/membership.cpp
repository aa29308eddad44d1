// A master's part in elastic membership (issue 31 §2; docs/DESIGN.md,
// "Elastic workers"): the authority (membership::authority, the first ps
// task) admits a task that joins a running cluster and removes one that
// leaves or is lost, each change a new version that it sends to every
// member's master; the others forward joins and leaves to it and adopt
// the newest version they hear of. The bookkeeping is membership.hpp's.

#include <chrono>

#include "actorflow/transport/host_port.hpp"
#include "master.hpp"

namespace actorflow {

namespace {

using join_result
  = caf::result<status, std::string, int64_t, std::vector<std::string>>;

// How long a forwarded request or a broadcast tries to reach a task.
constexpr auto reach_within = std::chrono::seconds(10);

bool is_authority(const master_state& st) {
  return st.members.authority() == st.task_prefix;
}

// The master of `task`, reached first if needed, to `k` (or why not).
template <class F>
void with_master_of(master_self self, const std::string& task, F k) {
  resolve_peer(self, task, self->clock().now() + reach_within,
               [self, task, k](status err, worker_actor) mutable {
                 auto m = self->state.peer_masters.find(task);
                 if (err.ok() && m == self->state.peer_masters.end())
                   err = {error_code::unavailable,
                          "the master of " + task + " is not known"};
                 k(err, err.ok() ? m->second : master_actor{});
               });
}

// A request only the authority decides goes there; its answer reaches
// the asker directly (the promise is delegated). `fail` answers when the
// authority cannot be reached.
template <class Promise, class Fail, class... Ts>
Promise to_authority(master_self self, Promise rp, Fail fail, Ts... xs) {
  with_master_of(self, self->state.members.authority(),
                 [rp, fail, xs...](status err, master_actor m) mutable {
                   if (err.ok())
                     rp.delegate(m, xs...);
                   else
                     fail(rp, std::move(err));
                 });
  return rp;
}

// This task's copy of the members changed: the directory follows, and
// the log and the monitor name what changed.
void members_changed(master_self self, const membership::member_map& before,
                     const std::string& why, bool orderly = false) {
  auto& st = self->state;
  st.opts.cluster = st.members.directory();
  auto version = " (membership version " + std::to_string(st.members.version())
                 + ")";
  auto& reg = monitoring::registry::instance();
  // A ClusterSpec task going down or coming back is not a peer change
  // (the monitor's peers are the connections this task holds, and the one
  // that held one saw it go or come back), and only the authority logs
  // it, not for a task that shut down in order (the end of a program
  // stops each of its servers).
  bool quiet = !is_authority(st) || orderly;
  for (auto& [name, address] : st.members.members())
    if (before.count(name) == 0) {
      if (st.members.can_go_down(name)) {
        if (is_authority(st))
          log_line(self, name + " is back at " + address + version);
        continue;
      }
      log_line(self, name + " joined at " + address + version);
      reg.peer_changed(st.task_prefix, {name, address, true,
                                        monitoring::wall_us(),
                                        member_note(st, name)});
    }
  auto because = why.empty() ? "" : ": " + why;
  for (auto& [name, address] : before)
    if (st.members.members().count(name) == 0) {
      if (st.members.down(name)) {
        if (!quiet)
          log_line(self, name + " is down" + because + version
                           + "; expected back at " + address);
        continue;
      }
      auto left = "left" + because + version;
      log_line(self, name + " " + left);
      reg.peer_changed(st.task_prefix, {name, address, false,
                                        monitoring::wall_us(), left});
    }
}

// The authority tells every other member (the joiner knows already).
void broadcast(master_self self, const std::string& skip = {}) {
  auto& st = self->state;
  auto version = st.members.version();
  auto flat = st.members.flat();
  for (auto& [name, address] : st.members.members()) {
    if (name == st.task_prefix || name == skip)
      continue;
    with_master_of(self, name,
                   [self, version, flat](status err, master_actor m) {
                     // A member out of reach learns it from the next
                     // change, or when it reaches this task again
                     // (peer_reached, on_membership_update).
                     if (err.ok())
                       self->send(m, membership_update_atom_v, version, flat);
                   });
  }
}

// How long the authority waits for a member to reach it (a greeting, or
// a step) before it dials the member itself.
constexpr auto greeting_within = std::chrono::seconds(30);

// The authority dials a member it watches; one it cannot reach within
// `within` is lost ("never reached").
void dial_member(master_self self, const std::string& task,
                 caf::actor_clock::duration_type within) {
  resolve_peer(self, task, self->clock().now() + within,
               [self, task](status err, worker_actor) {
                 if (!err.ok())
                   member_lost(self, task, "never reached: " + err.message(),
                               false);
               });
}

// The authority watches a member: its worker going down (death, or
// silence past the heartbeat bound) removes it (member_lost). It does not
// dial it: the member greets it (watch_members), and the authority
// watches it through that connection. Two tasks that dial each other at
// once make CAF 0.17 close, on each side, as redundant the connection the
// other side kept, so both go and what was sent on them is lost: with 16
// workers starting at once across 1 ms links, one round in ~50 left a
// session that never started. A member not heard from within 30 s is
// dialed then (on_member_check). `at_once`: dialed now, as a restarted
// authority does with the members it learns of (they greeted its
// predecessor, and only their next step there would reach it).
void watch(master_self self, const std::string& task, bool at_once = false) {
  if (self->state.peers.count(task) > 0)
    return;
  if (at_once)
    dial_member(self, task, greeting_within);
  else
    self->delayed_send(self, greeting_within, member_check_atom_v, task);
}

// Watches each member that `pred(name, address)` selects. Over a copy: a
// watch that fails at once changes the members.
template <class Pred>
void watch_each(master_self self, Pred pred, bool at_once = false) {
  std::vector<std::string> watched;
  for (auto& [name, address] : self->state.members.members())
    if (pred(name, address))
      watched.push_back(name);
  for (auto& name : watched)
    watch(self, name, at_once);
}

// The authority reaches the ClusterSpec tasks that are down, once each:
// one that answers is back (peer_reached). Called when a task that missed
// changes reaches the authority (a restarted or resumed task tells it its
// view), not on a timer: CAF 0.17 mixes up a connection that was opened
// while its peer was stopped (SIGSTOP) with the one the peer still holds.
void reach_down_members(master_self self) {
  auto& st = self->state;
  // Not one that greeted: it is being watched through its own connection.
  for (auto& [name, address] : st.members.directory())
    if (st.members.down(name) && st.greeted.count(name) == 0)
      resolve_peer(self, name, self->clock().now() + std::chrono::seconds(5),
                   [](status, worker_actor) {
                     // Still down: the next task that reaches us tries again.
                   });
}

} // namespace

std::string member_note(const master_state& st, const std::string& task) {
  auto at = st.members.joined_at(task);
  return at == 0 ? std::string{}
                 : "joined (membership version " + std::to_string(at) + ")";
}

join_result on_join(master_self self, const std::string& job,
                    const std::string& address) {
  auto& st = self->state;
  auto refuse = [](status err) -> join_result {
    return {std::move(err), std::string{}, int64_t{0},
            std::vector<std::string>{}};
  };
  if (job.empty() || job == "ps" || job.find_first_of("/:") != std::string::npos)
    return refuse(invalid_argument(
      "job \"" + job + "\" cannot join a running cluster: only tasks "
      "without variables (workers) join; ps tasks are named by the "
      "ClusterSpec"));
  host_port hp;
  if (!host_port::parse(address, hp).ok() || hp.port == 0)
    return refuse(invalid_argument("Could not interpret \"" + address
                                   + "\" as the host:port of a task that "
                                     "joins (port 0 cannot be reached)"));
  if (!is_authority(st))
    return to_authority(
      self,
      self->make_response_promise<status, std::string, int64_t,
                                  std::vector<std::string>>(),
      [](auto& rp, status err) {
        rp.deliver(std::move(err), std::string{}, int64_t{0},
                   std::vector<std::string>{});
      },
      join_atom_v, job, address);
  std::string existing;
  auto before = st.members.members();
  auto name = st.members.join(job, address, &existing);
  if (name.empty()) {
    // The same address again: a retried join, or a member's address.
    if (!st.members.elastic(existing))
      return refuse({error_code::already_exists,
                     address + " is the address of " + existing
                       + ", a member named by the ClusterSpec"});
    return {status{}, existing, st.members.version(), st.members.flat()};
  }
  members_changed(self, before, "");
  broadcast(self, name);
  watch(self, name);
  return {status{}, name, st.members.version(), st.members.flat()};
}

caf::result<status> on_leave(master_self self, const std::string& task) {
  auto& st = self->state;
  if (!is_authority(st))
    return to_authority(
      self, self->make_response_promise<status>(),
      [](auto& rp, status err) { rp.deliver(std::move(err)); }, leave_atom_v,
      task);
  if (st.members.members().count(task) == 0)
    return status{error_code::not_found, task + " is no member"};
  if (!st.members.elastic(task))
    return status{error_code::failed_precondition,
                  task + " is named by the ClusterSpec: only a task that "
                         "joined the running cluster leaves it"};
  auto before = st.members.members();
  st.members.leave(task);
  members_changed(self, before, "it said so");
  broadcast(self);
  return status{};
}

void on_membership_update(master_self self, int64_t version,
                          const std::vector<std::string>& flat) {
  auto& st = self->state;
  auto members = membership::from_flat(flat);
  if (!members)
    return;
  if (members->count(st.task_prefix) == 0) {
    // A view without this task is an old one (from before it joined),
    // unless it is newer than the one this joined task holds: then it
    // was removed while out of reach (silent past the heartbeat bound).
    // A name is one incarnation: it does not take part again.
    if (version > st.members.version() && st.opts.joined_at > 0
        && st.removed.empty()) {
      st.removed = st.task_prefix + " was removed from the cluster "
                   "(membership version " + std::to_string(version)
                   + ", this task held " + std::to_string(st.members.version())
                   + ") while out of reach, and takes no part in it any "
                     "more: start it again to join anew";
      log_line(self, st.removed);
    }
    return;
  }
  // An older view reaches the authority from a member that missed a
  // change: it gets the current one back. It may be one that was down.
  if (is_authority(st) && version < st.members.version()) {
    self->send(caf::actor_cast<master_actor>(self->current_sender()),
               membership_update_atom_v, st.members.version(),
               st.members.flat());
    reach_down_members(self);
    return;
  }
  auto before = st.members.members();
  if (!st.members.adopt(version, std::move(*members)))
    return;
  members_changed(self, before, "");
  // An authority that learns of members (it restarted) watches them.
  if (is_authority(st))
    watch_each(
      self,
      [&](const std::string& name, const std::string&) {
        return st.members.elastic(name);
      },
      true);
}

void watch_members(master_self self) {
  auto& st = self->state;
  if (!is_authority(st)) {
    // A task the authority watches greets it (peer_reached), so that the
    // authority never dials it (watch).
    auto authority = st.members.authority();
    auto i = st.opts.cluster.find(authority);
    if ((st.members.can_go_down(st.task_prefix) || st.opts.joined_at > 0)
        && i != st.opts.cluster.end() && !i->second.empty())
      resolve_peer(self, authority, self->clock().now() + greeting_within,
                   [](status, worker_actor) {
                     // Not reached: its first step there greets it.
                   });
    return;
  }
  // A task without an address (one process, no network) cannot be
  // watched.
  watch_each(self, [&](const std::string& name, const std::string& address) {
    return name != st.task_prefix && !address.empty()
           && st.members.can_go_down(name);
  });
}

void member_lost(master_self self, const std::string& task,
                 const std::string& reason, bool orderly,
                 const master_actor& master) {
  auto& st = self->state;
  if (!is_authority(st) || task == st.task_prefix
      || (!st.members.elastic(task) && !st.members.can_go_down(task)))
    return;
  auto before = st.members.members();
  bool joined = st.members.elastic(task);
  if (!st.members.leave(task))
    return;
  members_changed(self, before, "lost (" + reason + ")", orderly);
  broadcast(self);
  // A joined task lost to silence may resume: where the connection
  // outlived the silence, the version without it waits there and tells
  // it it was removed (on_membership_update). Best effort: usually the
  // connection is gone, and it learns when it reaches the authority
  // again (peer_reached); steps it runs before either are a non-member's.
  if (joined && master)
    self->send(master, membership_update_atom_v, st.members.version(),
               st.members.flat());
}

void peer_reached(master_self self, const std::string& task,
                  const master_actor& master) {
  auto& st = self->state;
  st.peer_masters[task] = master;
  // A ClusterSpec task that was down is back.
  if (is_authority(st) && st.members.back(task)) {
    auto before = st.members.members();
    before.erase(task);
    members_changed(self, before, "");
    broadcast(self);
  }
  // The authority compares views: it takes a newer one (it restarted) and
  // answers an older one with its own (this task missed a change). The
  // name makes it a greeting: the authority watches this task through
  // this connection.
  if (task == st.members.authority())
    self->send(master, membership_update_atom_v, st.members.version(),
               st.members.flat(), st.task_prefix);
}

void on_member_greeting(master_self self, int64_t version,
                        const std::vector<std::string>& flat,
                        const std::string& task) {
  auto& st = self->state;
  auto master = caf::actor_cast<master_actor>(self->current_sender());
  // Whether the greeter is to be watched: one ask per task at a time,
  // however many greetings come.
  auto watchable = [&] {
    return is_authority(st) && master && task != st.task_prefix
           && st.peers.count(task) == 0 && st.greeted.count(task) == 0
           && st.members.directory().count(task) > 0;
  };
  // Claimed before the view when the greeter is known (an older view
  // makes the authority dial the tasks that are down, and this one needs
  // no dial), after it otherwise (a restarted authority learns the
  // greeter from it).
  bool watch_it = watchable();
  if (watch_it)
    st.greeted.insert(task);
  on_membership_update(self, version, flat);
  if (!watch_it && watchable()) {
    watch_it = true;
    st.greeted.insert(task);
  }
  if (watch_it)
    // Its worker, asked over the connection it opened.
    self->request(master, reach_within, get_worker_atom_v)
      .then(
        [self, task, master](worker_actor& worker) {
          self->state.greeted.erase(task);
          if (worker && self->state.peers.count(task) == 0)
            peer_found(self, task, master, worker);
        },
        [self, task](caf::error&) {
          // Not answered (gone, or busy past 10 s): watched once it
          // reaches this task anew, or when the check that follows a
          // watch's start or a join dials it (watch).
          self->state.greeted.erase(task);
        });
}

void on_member_check(master_self self, const std::string& task) {
  auto& st = self->state;
  if (!is_authority(st) || st.peers.count(task) > 0
      || st.members.members().count(task) == 0)
    return;
  dial_member(self, task, std::chrono::seconds(5));
}

} // namespace actorflow
