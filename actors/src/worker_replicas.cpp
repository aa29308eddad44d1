// A worker's stores of variables and their replication (issue 31 §1;
// docs/DESIGN.md, "Replicated variables"): each task of a replicated job
// keeps its own variables as their primary and a backup of the previous
// task's; a primary's worker attaches its backup (the whole state, then
// every write); a backup is promoted when a master lost its primary, and
// serves those variables from then on, in a newer epoch that fences the
// old primary.

#include <algorithm>
#include <functional>
#include <iostream>

#include "actorflow/graph/log_ring.hpp"
#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/text_util.hpp"
#include "node_class.hpp"
#include "worker.hpp"
#include "worker_state.hpp"

namespace actorflow {

namespace {

using role_t = variable_store::role_t;

/// A store's variables with their keys, to hand over one at a time.
using var_list = std::vector<
  std::pair<std::pair<std::string, std::string>, variable_store::entry>>;

/// How often a store without its backup tries to attach one.
constexpr auto tick_interval = std::chrono::milliseconds(250);

void log_line(worker_self self, const std::string& text) {
  std::cerr << "actorflow: " + self->state.task_prefix + ": " + text + "\n"
            << std::flush;
  note_log(log_level_of(text), self->state.task_prefix + ": " + text);
}

void schedule_tick(worker_self self) {
  if (self->state.ticking)
    return;
  self->state.ticking = true;
  self->delayed_send(self, tick_interval, replica_tick_atom_v);
}

status superseded(worker_self self, const std::string& home,
                  const variable_store* s) {
  std::string where = "no longer served here";
  if (s != nullptr && s->role == role_t::backup && !s->primary_task.empty())
    where = "served by " + s->primary_task + " (epoch "
            + std::to_string(s->epoch) + ")";
  return {error_code::aborted, "Superseded: the variables of " + home
                                 + " are " + where + ", not by "
                                 + self->state.task_prefix};
}

// Ends the queues and accumulators of store `s` (it no longer serves
// them: their state lives on in the variables of the task that does).
// Their waiting operations end Cancelled, and lookups still waiting for
// one are told `why`.
void end_resources(worker_self self, variable_store& s, const status& why) {
  auto end = [&](auto& resources) {
    for (auto& [key, e] : resources)
      end_resource(self, e, why);
    resources.clear();
  };
  end(s.queues);
  end(s.accumulators);
}

// Ends the variables, queues and accumulators of store `s` (it becomes
// another primary's backup, or is left behind).
void end_vars(worker_self self, variable_store& s) {
  end_resources(self, s,
                {error_code::aborted, "Superseded: the store was handed "
                                      "over"});
  for (auto& [key, e] : s.vars)
    self->send_exit(e.handle, caf::exit_reason::user_shutdown);
  s.vars.clear();
}

// The store stops serving: a newer primary exists. Its variables refuse
// everything from now on.
void depose_store(worker_self self, const std::string& home,
                  variable_store& s, const std::string& why) {
  if (s.role == role_t::deposed)
    return;
  s.role = role_t::deposed;
  for (auto& [key, e] : s.vars)
    self->send(e.handle, depose_atom_v, why);
  end_resources(self, s, superseded(self, home, &s));
  log_line(self, "no longer serves the variables of " + home + ": " + why);
  self->state.count_resources();
}

// Calls `k` with the worker of `task`, reached through this task's
// master (at most a second's try), or `fail` (no master yet, or the task
// cannot be reached).
template <class OnWorker, class OnFail>
void with_worker_of(worker_self self, const std::string& task, OnWorker k,
                    OnFail fail) {
  auto& st = self->state;
  if (!st.master)
    return fail();
  self
    ->request(caf::actor_cast<master_actor>(st.master),
              std::chrono::seconds(5), find_peer_atom_v, task, int64_t{1000})
    .then(
      [k, fail](status& err, worker_actor& w) mutable {
        if (!err.ok())
          return fail();
        k(w);
      },
      [fail](caf::error&) mutable { fail(); });
}

// Gives variable `key` of store `home` its backup on the store's backup
// worker (a variable created after the store's backup joined), then
// calls `done` either way (the variable's first write is replicated when
// it succeeded; otherwise the variable learns that its backup is gone
// from its writes).
void replicate_var(worker_self self, const std::string& home,
                   const std::pair<std::string, std::string>& key,
                   const variable_store::entry& e,
                   std::function<void()> done = [] {}) {
  auto& store = self->state.stores.at(home);
  auto epoch = store.epoch;
  store.replicated_keys.insert(key);
  self
    ->request(store.backup, std::chrono::seconds(5), get_replica_atom_v, home,
              key.first, key.second, e.type, e.shape_bytes, epoch)
    .then(
      [self, var = e.handle, epoch, done](status& err, caf::actor& replica) {
        if (err.ok())
          self->send(var, set_backup_atom_v, replica, epoch);
        done();
      },
      [done](caf::error&) { done(); });
}

// Spawns variable (container, name) of `home` in this worker's store as
// `role` of `epoch`.
variable_actor spawn_store_var(worker_self self, const std::string& home,
                               const std::string& container,
                               const std::string& name, int32_t type,
                               const std::string& shape_bytes,
                               replica_role role, int64_t epoch) {
  auto& st = self->state;
  tensor_shape shape = tensor_shape::unknown();
  byte_reader r{shape_bytes};
  decode(r, shape);
  replica_init init;
  init.role = role;
  init.epoch = epoch;
  init.home = home;
  init.worker = caf::actor_cast<caf::actor>(self);
  if (st.replicated)
    init.inbox_host = st.channel_host;
  auto var = spawn_variable(self->system(), name, static_cast<dtype>(type),
                            shape,
                            {.name = name,
                             .container = container,
                             .task = st.task_prefix},
                            std::move(init));
  st.stores.at(home).vars.emplace(std::make_pair(container, name),
                                  variable_store::entry{var, type,
                                                        shape_bytes});
  st.count_resources();
  return var;
}

// Unavailable: this task is starting and does not serve its variables
// yet.
status starting_error(const worker_state& st, const variable_store& s) {
  return {error_code::unavailable,
          st.task_prefix + " is starting: it waits for " + s.backup_task
            + " to learn who serves its variables"};
}

// The last steps of attaching `backup` to store `home`: the variables
// one by one (a backup variable each, then the primary syncs it), then
// "complete".
void attach_vars(worker_self self, const std::string& home,
                 worker_actor backup, int64_t epoch,
                 var_list pending) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s == st.stores.end() || s->second.role != role_t::primary
      || s->second.epoch != epoch)
    return;
  auto fail = [self, home](const std::string& why) {
    auto s = self->state.stores.find(home);
    if (s == self->state.stores.end())
      return;
    s->second.attaching = false;
    log_line(self, "could not attach the backup of " + home + ": " + why);
    schedule_tick(self);
  };
  if (pending.empty()) {
    self
      ->request(backup, std::chrono::seconds(5), attach_replica_atom_v, home,
                epoch, st.task_prefix, true)
      .then(
        [self, home, backup, epoch, fail](status& err) {
          auto s = self->state.stores.find(home);
          if (s == self->state.stores.end() || s->second.epoch != epoch)
            return;
          if (!err.ok())
            return fail(err.message());
          auto& store = s->second;
          store.attaching = false;
          store.alone = false;
          store.backup = backup;
          self->monitor(backup);
          // Variables created while it attached join it now.
          for (auto& [key, e] : store.vars)
            if (store.replicated_keys.count(key) == 0)
              replicate_var(self, home, key, e);
          log_line(self, "the variables of " + home + " (epoch "
                           + std::to_string(epoch) + ", "
                           + std::to_string(store.vars.size())
                           + ") are replicated on " + store.backup_task);
        },
        [fail](caf::error& err) { fail(to_status(err).message()); });
    return;
  }
  auto [key, e] = std::move(pending.back());
  pending.pop_back();
  self
    ->request(backup, std::chrono::seconds(5), get_replica_atom_v, home,
              key.first, key.second, e.type, e.shape_bytes, epoch)
    .then(
      [self, home, backup, epoch, pending = std::move(pending),
       handle = e.handle, key = key, fail](status& err,
                                           caf::actor& replica) mutable {
        if (!err.ok())
          return fail(err.message());
        self->send(handle, set_backup_atom_v, replica, epoch);
        if (auto s = self->state.stores.find(home);
            s != self->state.stores.end())
          s->second.replicated_keys.insert(key);
        attach_vars(self, home, backup, epoch, std::move(pending));
      },
      [fail](caf::error& err) { fail(to_status(err).message()); });
}

// Store `home` has no backup: find the task that should hold it and hand
// it the variables.
void attach_backup(worker_self self, const std::string& home) {
  auto& st = self->state;
  auto& s = st.stores.at(home);
  if (s.attaching || !st.master)
    return;
  s.attaching = true;
  auto epoch = s.epoch;
  auto fail = [self, home] {
    if (auto s = self->state.stores.find(home); s != self->state.stores.end())
      s->second.attaching = false;
    schedule_tick(self);
  };
  with_worker_of(
    self, s.backup_task,
    [self, home, epoch, fail](worker_actor& backup) {
      self
        ->request(backup, std::chrono::seconds(5), attach_replica_atom_v,
                  home, epoch, self->state.task_prefix, false)
        .then(
          [self, home, epoch, backup, fail](status& err) {
            auto s = self->state.stores.find(home);
            if (s == self->state.stores.end())
              return;
            if (err.code() == error_code::aborted) {
              s->second.attaching = false;
              depose_store(self, home, s->second, err.message());
              return;
            }
            if (!err.ok())
              return fail();
            s->second.replicated_keys.clear();
            attach_vars(self, home, backup, epoch,
                        var_list(s->second.vars.begin(),
                                 s->second.vars.end()));
          },
          [fail](caf::error&) { fail(); });
    },
    fail);
}

// This task restarted while its backup still holds its variables as a
// backup: that one is promoted, and this task becomes its backup.
void promote_backup_of_self(worker_self self) {
  auto& st = self->state;
  auto& s = st.stores.at(st.task_prefix);
  s.attaching = true;
  auto own = st.task_prefix;
  auto fail = [self, own] {
    self->state.stores.at(own).attaching = false;
    schedule_tick(self);
  };
  with_worker_of(
    self, s.backup_task,
    [self, own, fail](worker_actor& backup) {
      self->request(backup, std::chrono::seconds(5), promote_atom_v, own)
        .then(
          [self, own](status& err, int64_t epoch) {
            auto& s = self->state.stores.at(own);
            s.attaching = false;
            if (s.role != role_t::starting)
              return;
            if (!err.ok()) {
              // No complete replica: what this task served is lost.
              log_line(self, "restarted, and no replica of its variables "
                             "survived ("
                               + err.message() + ")");
              s.role = role_t::primary;
              return schedule_tick(self);
            }
            s.role = role_t::backup;
            s.epoch = 0;
            s.primary_task = s.backup_task;
            log_line(self, "restarted: " + s.backup_task
                             + " was promoted to serve its variables "
                               "(epoch "
                             + std::to_string(epoch)
                             + "); this task becomes their backup");
          },
          [fail](caf::error&) { fail(); });
    },
    fail);
}

// A replicated task that has just started asks its backup whether that
// serves this task's variables (this task was replaced): then it becomes
// that primary's backup; otherwise it serves them itself.
void resolve_start(worker_self self) {
  auto& st = self->state;
  auto& s = st.stores.at(st.task_prefix);
  if (s.attaching || !st.master)
    return;
  s.attaching = true;
  auto fail = [self] {
    auto& st = self->state;
    st.stores.at(st.task_prefix).attaching = false;
    schedule_tick(self);
  };
  with_worker_of(
    self, s.backup_task,
    [self, fail](worker_actor& backup) {
      auto own = self->state.task_prefix;
      self->request(backup, std::chrono::seconds(5), serving_atom_v, own)
        .then(
          [self, own](std::string& task, int64_t epoch) {
            auto& s = self->state.stores.at(own);
            s.attaching = false;
            if (s.role != role_t::starting)
              return;
            if (task.empty()) {
              s.role = role_t::primary;
              s.epoch = std::max<int64_t>(s.epoch, epoch + 1);
              schedule_tick(self);
              return;
            }
            if (task == own) {
              // Restarted before any master noticed: the backup holds
              // what this task served, so it takes over.
              promote_backup_of_self(self);
              return;
            }
            // Replaced: the backup that took over feeds this task now.
            s.role = role_t::backup;
            s.epoch = 0;
            s.primary_task = task;
            log_line(self, "restarted: " + task + " serves its variables "
                             "(epoch "
                             + std::to_string(epoch)
                             + "); this task becomes their backup");
          },
          [fail](caf::error&) { fail(); });
    },
    fail);
}

} // namespace

std::vector<std::string> replica_ring(const task_options& opts) {
  std::vector<std::pair<int, std::string>> tasks;
  if (!opts.replicate_variables)
    return {};
  for (auto& [task, address] : opts.cluster) {
    device_name d;
    if (device_name::parse(task, d).ok() && d.job == "ps" && d.task)
      tasks.emplace_back(*d.task, task);
  }
  if (tasks.size() < 2)
    return {};
  std::sort(tasks.begin(), tasks.end());
  std::vector<std::string> ring;
  for (auto& [index, task] : tasks)
    ring.push_back(task);
  return ring;
}

std::string backup_task_of(const std::vector<std::string>& ring,
                           const std::string& home,
                           const std::string& acting) {
  if (home != acting)
    return home;
  auto i = std::find(ring.begin(), ring.end(), home);
  if (i == ring.end())
    return {};
  return ++i == ring.end() ? ring.front() : *i;
}

void init_stores(worker_self self) {
  auto& st = self->state;
  st.ring = replica_ring(st.opts);
  st.replicated = !st.ring.empty() && st.opts.job == "ps";
  auto& own = st.stores[st.task_prefix];
  if (!st.replicated)
    return;
  own.role = role_t::starting;
  own.alone = false;
  own.backup_task = backup_task_of(st.ring, st.task_prefix, st.task_prefix);
}

status serves_store(worker_self self, const std::string& home) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s != st.stores.end() && s->second.role == role_t::primary)
    return {};
  if (s != st.stores.end() && s->second.role == role_t::starting)
    return starting_error(st, s->second);
  return superseded(self, home, s == st.stores.end() ? nullptr : &s->second);
}

void find_variable(worker_self self, const std::string& container,
                   const std::string& name, int32_t type,
                   const std::string& shape_bytes, const std::string& home_in,
                   std::function<void(status, variable_actor)> k) {
  auto& st = self->state;
  if (auto err = check_container(container); !err.ok())
    return k(err, variable_actor{});
  const auto& home = home_in.empty() ? st.task_prefix : home_in;
  if (auto err = serves_store(self, home); !err.ok())
    return k(err, variable_actor{});
  auto& store = st.stores.at(home);
  auto key = std::make_pair(container, name);
  if (auto i = store.vars.find(key); i != store.vars.end())
    return k(status{}, i->second.handle);
  // Unreplicated: epoch 0 (no tags remembered, no promise per write).
  auto var = spawn_store_var(self, home, container, name, type, shape_bytes,
                             !st.replicated || store.alone
                               ? replica_role::solo
                               : replica_role::orphan,
                             st.replicated ? store.epoch : 0);
  if (!st.replicated || store.alone) {
    k(status{}, var);
  } else if (!store.backup || store.attaching) {
    // Attached with the others (attach_vars) when the backup joins.
    k(status{}, var);
    schedule_tick(self);
  } else {
    // The backup variable first: the first write is replicated.
    replicate_var(self, home, key, store.vars.at(key),
                  [k = std::move(k), var] { k(status{}, var); });
  }
}

caf::typed_response_promise<status, variable_actor>
get_variable(worker_self self, const std::string& container,
             const std::string& name, int32_t type,
             const std::string& shape_bytes, const std::string& home) {
  auto rp = self->make_response_promise<status, variable_actor>();
  find_variable(self, container, name, type, shape_bytes, home,
                [rp](status err, variable_actor var) mutable {
                  rp.deliver(std::move(err), std::move(var));
                });
  return rp;
}

status check_partition_home(worker_self self, const std::string& device,
                            const graph_def& g) {
  auto& st = self->state;
  auto home = task_of_device(device);
  auto s = st.stores.find(home);
  if (home == st.task_prefix) {
    if (!st.replicated || s->second.role == role_t::primary)
      return {};
    if (s->second.role == role_t::starting)
      return starting_error(st, s->second);
    return superseded(self, home, &s->second);
  }
  if (std::find(st.ring.begin(), st.ring.end(), home) == st.ring.end())
    return invalid_argument("partition for " + device + " sent to "
                            + st.device);
  if (s == st.stores.end() || s->second.role != role_t::primary)
    return superseded(self, home, s == st.stores.end() ? nullptr : &s->second);
  for (auto& n : g.nodes)
    if (classify(n, "", st.opts.job).kind == node_kind::reader)
      return {error_code::unavailable,
              "The " + std::string{n.op} + " '" + log_escape(n.name)
                + "' was lost with " + home
                + ": readers are not replicated (" + st.task_prefix
                + " serves its variables, queues and accumulators now)"};
  return {};
}

void on_attach(worker_self self, caf::typed_response_promise<status> rp,
               const std::string& home, int64_t epoch,
               const std::string& primary, bool complete,
               const caf::actor& primary_worker) {
  auto& st = self->state;
  if (!st.replicated
      || std::find(st.ring.begin(), st.ring.end(), home) == st.ring.end()) {
    rp.deliver(invalid_argument(st.task_prefix + " holds no replicas of "
                                + home));
    return;
  }
  auto found = st.stores.find(home);
  if (found == st.stores.end()) {
    found = st.stores.emplace(home, variable_store{}).first;
    found->second.role = role_t::backup;
    found->second.epoch = 0;
  }
  auto& s = found->second;
  if (complete) {
    if (s.role == role_t::backup && s.epoch == epoch
        && s.primary_task == primary)
      s.complete = true;
    rp.deliver(s.complete ? status{}
                          : superseded(self, home, &s));
    return;
  }
  // A newer primary only: an older one is fenced.
  if (s.epoch > epoch
      || (s.role == role_t::primary && s.epoch >= epoch)) {
    rp.deliver(status{error_code::aborted,
                      "Superseded: " + st.task_prefix + " holds the variables of "
                        + home + " at epoch " + std::to_string(s.epoch)
                        + ", newer than " + primary + "'s "
                        + std::to_string(epoch)});
    return;
  }
  if (s.role == role_t::primary || s.role == role_t::deposed)
    log_line(self, "becomes the backup of " + primary + " for the variables of "
                     + home + " (epoch " + std::to_string(epoch) + ")");
  end_vars(self, s);
  // Its primary is watched: when that task is lost, this backup takes
  // over at once (a primary wrongly suspected is fenced by the epoch).
  if (s.primary_worker)
    self->demonitor(s.primary_worker);
  s.primary_worker = primary_worker.address();
  if (primary_worker)
    self->monitor(primary_worker);
  s.role = role_t::backup;
  s.epoch = epoch;
  s.alone = false;
  s.primary_task = primary;
  s.complete = false;
  s.backup = nullptr;
  s.attaching = false;
  st.count_resources();
  rp.deliver(status{});
}

caf::result<status, caf::actor>
get_replica(worker_self self, const std::string& home,
            const std::string& container, const std::string& name,
            int32_t type, const std::string& shape_bytes, int64_t epoch) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s == st.stores.end() || s->second.role != role_t::backup
      || s->second.epoch != epoch)
    return {status{error_code::aborted,
                   "Superseded: " + st.task_prefix
                     + " is no backup of the variables of " + home
                     + " at epoch " + std::to_string(epoch)},
            caf::actor{}};
  auto& store = s->second;
  auto key = std::make_pair(container, name);
  if (auto i = store.vars.find(key); i != store.vars.end())
    return {status{}, caf::actor_cast<caf::actor>(i->second.handle)};
  // Epoch 0 until its primary syncs it.
  return {status{},
          caf::actor_cast<caf::actor>(spawn_store_var(
            self, home, container, name, type, shape_bytes,
            replica_role::backup, 0))};
}

status promote_store(worker_self self, const std::string& home,
                     const std::string& why, int64_t& epoch) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s != st.stores.end() && s->second.role == role_t::primary) {
    epoch = s->second.epoch; // already (another master asked)
    return {};
  }
  if (s == st.stores.end() || s->second.role != role_t::backup
      || !s->second.complete)
    return {error_code::unavailable,
            "No replica of the variables of " + home + " on "
              + st.task_prefix
              + (s != st.stores.end() && s->second.role == role_t::backup
                   ? " is complete yet"
                   : "")
              + ": they were lost with it"};
  auto& store = s->second;
  store.epoch += 1;
  store.role = role_t::primary;
  store.alone = true;
  store.backup_task = backup_task_of(st.ring, home, st.task_prefix);
  store.backup = nullptr;
  if (store.primary_worker)
    self->demonitor(store.primary_worker);
  store.primary_worker = nullptr;
  for (auto& [key, e] : store.vars)
    caf::anon_send(e.handle, promote_atom_v, store.epoch);
  log_line(self, "promoted: serves the variables of " + home + " (epoch "
                   + std::to_string(store.epoch) + ", "
                   + std::to_string(store.vars.size())
                   + " variables) in place of " + store.primary_task + " ("
                   + why + ")");
  store.primary_task.clear();
  st.count_resources();
  schedule_tick(self);
  epoch = store.epoch;
  return {};
}

caf::result<status, int64_t> promote(worker_self self,
                                     const std::string& home) {
  int64_t epoch = 0;
  auto err = promote_store(self, home, "asked by a master or its restart",
                           epoch);
  return {std::move(err), epoch};
}

bool lost_primary(worker_self self, const caf::actor_addr& source,
                  const std::string& reason) {
  std::vector<std::string> homes;
  for (auto& [home, s] : self->state.stores)
    if (s.role == role_t::backup && s.primary_worker == source)
      homes.push_back(home);
  for (auto& home : homes) {
    auto& s = self->state.stores.at(home);
    s.primary_worker = nullptr;
    auto primary = s.primary_task;
    int64_t epoch = 0;
    auto err = promote_store(self, home, "lost: " + reason, epoch);
    if (!err.ok())
      log_line(self, "lost " + primary + ", the primary of the variables of "
                       + home + ": " + err.message());
  }
  return !homes.empty();
}

std::pair<std::string, int64_t> serving(worker_self self,
                                        const std::string& home) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s == st.stores.end())
    return {"", 0};
  switch (s->second.role) {
    case role_t::primary:
      return {st.task_prefix, s->second.epoch};
    case role_t::backup:
      return {s->second.primary_task, s->second.epoch};
    default:
      return {"", s->second.epoch};
  }
}

void on_replica_lost(worker_self self, const std::string& home,
                     bool deposed, const caf::actor_addr& var) {
  auto& st = self->state;
  auto s = st.stores.find(home);
  if (s == st.stores.end())
    return;
  if (deposed) {
    depose_store(self, home, s->second,
                 "a backup was promoted in its place");
    return;
  }
  // Lost while the store attaches its backup: the attach gives it its
  // backup again when it completes (the others' are whole).
  for (auto& [key, e] : s->second.vars)
    if (e.handle.address() == var)
      s->second.replicated_keys.erase(key);
  if (s->second.role == role_t::primary && s->second.backup) {
    self->demonitor(s->second.backup.address());
    s->second.backup = nullptr;
    log_line(self, "lost the backup of the variables of " + home + " on "
                     + s->second.backup_task
                     + "; their writes wait until it is back");
  }
  schedule_tick(self);
}

bool forget_backup(worker_self self, const caf::actor_addr& source) {
  bool any = false;
  for (auto& [home, s] : self->state.stores)
    if (s.backup && s.backup.address() == source) {
      s.backup = nullptr;
      any = true;
    }
  if (any)
    schedule_tick(self);
  return any;
}

void replica_tick(worker_self self) {
  auto& st = self->state;
  st.ticking = false;
  bool again = false;
  for (auto& [home, s] : st.stores) {
    if (s.role == role_t::starting) {
      resolve_start(self);
      again = true;
    } else if (s.role == role_t::primary && st.replicated && !s.backup) {
      attach_backup(self, home);
      again = true;
    }
  }
  if (again)
    schedule_tick(self);
}

} // namespace actorflow
