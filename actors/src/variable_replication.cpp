// A variable's part in replicated variables (issue 31 §1;
// docs/DESIGN.md, "Replicated variables"): its role and epoch, the writes
// a primary forwards and the acknowledgements that answer them (over the
// tensor channel, or CAF's connection), what a backup takes (in order, of
// its epoch only), syncs, promotion, and the fencing of a primary that
// was superseded. The state is variable_state.hpp's; the actor that
// calls these is variable_actor.cpp.

#include <cstring>

#include "actorflow/transport/type_ids.hpp"
#include "variable_state.hpp"

namespace actorflow::variable_detail {

namespace {

status superseded(const variable_state& st, const std::string& why) {
  return {error_code::aborted,
          "Superseded: variable " + st.name + " of " + st.home + " " + why};
}

// Fails every write waiting for the backup's acknowledgement with `err`.
void fail_waiting(variable_state& st, const status& err) {
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  st.waiting_tags.clear();
  for (auto& [seq, w] : waiting)
    for (auto& rp : w.promises)
      rp.deliver(err, tensor{});
}

// Ends the pairing with the backup: the variable takes `role` (orphan:
// the backup was lost; deposed: superseded) for reason `why`, the writes
// waiting for the backup fail as writable() now says, and the worker
// learns it.
void leave_backup(variable_self self, replica_role role, std::string why) {
  auto& st = self->state;
  st.role = role;
  st.why = std::move(why);
  show_role(st);
  if (role == replica_role::deposed)
    st.cell->stale.store(true, std::memory_order_release);
  if (st.backup)
    self->demonitor(st.backup.address());
  st.backup = nullptr;
  st.backup_route = {};
  st.syncing = false;
  fail_waiting(st, writable(st));
  if (st.worker)
    self->send(caf::actor_cast<worker_actor>(st.worker), replica_lost_atom_v,
               st.home, role == replica_role::deposed);
}

// A write frame on the tensor channel: its key says "w:EPOCH:TAG:ROW".
std::string write_key(int64_t epoch, int64_t tag, int64_t row_begin) {
  return "w:" + std::to_string(epoch) + ":" + std::to_string(tag) + ":"
         + std::to_string(row_begin);
}

// The fields of a frame key after its kind ("w:1:2:3" -> 1, 2, 3); false
// for a malformed one.
bool key_fields(const std::string& key, size_t n, std::vector<int64_t>& out,
                std::string* rest = nullptr) {
  out.clear();
  size_t at = 2;
  for (size_t i = 0; i < n; ++i) {
    auto end = key.find(':', at);
    auto field = key.substr(at, end == std::string::npos ? end : end - at);
    try {
      size_t used = 0;
      out.push_back(std::stoll(field, &used));
      if (used != field.size())
        return false;
    } catch (const std::exception&) {
      return false;
    }
    if (end == std::string::npos)
      return i + 1 == n && rest == nullptr;
    at = end + 1;
  }
  if (rest != nullptr)
    *rest = key.substr(at);
  return true;
}

// A backup's answer to write `seq`, the way the write came.
void acknowledge(variable_self self, int64_t seq, const status& err) {
  auto& st = self->state;
  auto key = "a:" + std::to_string(static_cast<int>(err.code())) + ":"
             + err.message();
  if (st.primary_route
      && tensor_channel::send(st.primary_route, seq, key,
                              tensor::scalar(int64_t{0}), st.primary, true))
    return;
  if (st.primary)
    caf::anon_send(caf::actor_cast<variable_actor>(st.primary),
                   recv_tensor_atom_v, seq, std::move(key),
                   tensor::scalar(int64_t{0}));
}

// Answers the writes waiting for the backup up to `seq` (it holds them).
void answer_through(variable_state& st, int64_t seq) {
  while (!st.waiting.empty() && st.waiting.begin()->first <= seq) {
    auto w = std::move(st.waiting.begin()->second);
    st.waiting.erase(st.waiting.begin());
    st.waiting_tags.erase(w.tag);
    for (auto& rp : w.promises)
      rp.deliver(status{}, w.reply);
  }
}

// Sends the backup the whole state: epoch, last write, value and tags.
// The writes after it go over CAF's connection, which keeps them behind
// the sync, until the backup answers; then over the channel. A frame
// sent before could otherwise overtake the sync and meet a backup that
// misses the writes before it. The writes the sync holds are answered.
void sync_backup(variable_self self) {
  auto& st = self->state;
  st.backup_route = {};
  st.syncing = true;
  auto id = ++st.last_sync;
  auto seq = st.log.seq();
  self
    ->request(st.backup, caf::infinite, replica_sync_atom_v, st.log.epoch(),
              seq, st.value(), st.log.tags(), st.inbox)
    .then(
      [self, id, seq](status& ack, std::string& inbox) {
        auto& st = self->state;
        if (id != st.last_sync || !st.syncing)
          return; // a newer sync follows, or the backup is gone
        st.syncing = false;
        if (ack.ok()) {
          if (!inbox.empty())
            st.backup_route = tensor_channel::route_to(inbox,
                                                       self->home_system());
          answer_through(st, seq);
        } else if (ack.code() == error_code::aborted) {
          depose(self, "(its backup refused the sync: " + ack.message() + ")");
        } else {
          lose_backup(self, ack.message());
        }
      },
      [self, id](caf::error& err) {
        if (id == self->state.last_sync && self->state.syncing)
          lose_backup(self, to_status(err, "backup").message());
      });
}

// The backup's answer to write `seq`.
void on_ack(variable_self self, int64_t seq, const status& ack) {
  auto& st = self->state;
  auto i = st.waiting.find(seq);
  if (i == st.waiting.end())
    return;
  if (!ack.ok()) {
    if (ack.code() == error_code::aborted)
      depose(self, "(its backup refused a write: " + ack.message() + ")");
    else if (ack.code() == error_code::out_of_range) {
      // The backup misses writes before this one: it gets the whole
      // state again (once), which answers this write and those before.
      if (!st.syncing)
        sync_backup(self);
    } else
      lose_backup(self, ack.message());
    return;
  }
  auto w = std::move(i->second);
  st.waiting.erase(i);
  st.waiting_tags.erase(w.tag);
  for (auto& rp : w.promises)
    rp.deliver(status{}, w.reply);
}

} // namespace

// Whether the variable takes writes in its role.
status writable(const variable_state& st) {
  switch (st.role) {
    case replica_role::solo:
    case replica_role::primary:
      return {};
    case replica_role::orphan:
      return {error_code::unavailable,
              "Variable " + st.name + " of " + st.home
                + " has no backup: " + st.why
                + "; its writes wait until one joins"};
    case replica_role::backup:
      return superseded(st, "is a backup here (epoch "
                              + std::to_string(st.log.epoch()) + ")");
    case replica_role::deposed:
      return superseded(st, st.why);
  }
  return {};
}

// What the monitor shows of the variable: its dtype and shape, and its
// part in replication (the console's actor detail).
void show_role(variable_state& st) {
  if (st.record == nullptr)
    return;
  auto text = std::string{to_string(st.type)} + " " + st.shape.to_string();
  // Whose variable, where this task holds another's (a backup, or after a
  // failover).
  auto of = st.home.empty() || st.home == st.record->who.task
              ? std::string{}
              : " of " + st.home;
  auto epoch = " (epoch " + std::to_string(st.log.epoch()) + ")";
  switch (st.role) {
    case replica_role::solo:
      if (st.log.epoch() > 0)
        text += ", primary" + of + " alone" + epoch;
      break;
    case replica_role::primary:
      text += ", primary" + of + ", replicated" + epoch;
      break;
    case replica_role::orphan:
      text += ", primary" + of + " without a backup, writes wait" + epoch;
      break;
    case replica_role::backup:
      text += ", backup" + of + epoch;
      break;
    case replica_role::deposed:
      text += ", superseded";
      break;
  }
  st.record->set_detail(std::move(text));
}

// The backup is gone: writes wait (fail Unavailable, their steps retry)
// until the worker attaches a new one.
void lose_backup(variable_self self, const std::string& why) {
  if (self->state.role == replica_role::primary)
    leave_backup(self, replica_role::orphan,
                 "its backup was lost (" + why + ")");
}

// A newer primary exists (its backup was promoted): this one takes no
// write and serves no read again, even in its own process's executors.
void depose(variable_self self, const std::string& why) {
  if (self->state.role != replica_role::deposed)
    leave_backup(self, replica_role::deposed, why);
}

// A write whose tag was applied changes nothing and answers the value
// (once the backup holds the first one).
bool admit_write(variable_self self, int64_t tag, write_promise& rp) {
  auto& st = self->state;
  if (auto err = writable(st); !err.ok()) {
    rp.deliver(err, tensor{});
    return false;
  }
  // Tags matter only where a step may run again after a failover: a
  // replicated variable (epoch 1 on), which remembers the last 4 096.
  if (st.log.epoch() > 0 && st.log.seen(tag)) {
    if (auto w = st.waiting_tags.find(tag); w != st.waiting_tags.end())
      st.waiting[w->second].promises.push_back(rp);
    else
      rp.deliver(status{}, st.value());
    return false;
  }
  return true;
}

void commit_write(variable_self self, int64_t tag, write_promise& rp,
                  tensor reply, forwarded fw) {
  auto& st = self->state;
  if (st.log.epoch() > 0)
    st.log.record(tag);
  if (st.role != replica_role::primary) {
    rp.deliver(status{}, std::move(reply));
    return;
  }
  auto seq = st.log.next_seq();
  auto& w = st.waiting[seq];
  w.tag = tag;
  w.reply = std::move(reply);
  w.promises.push_back(rp);
  if (tag != 0)
    st.waiting_tags[tag] = seq;
  // Over the tensor channel when both ends have it: the backup answers
  // there too (an acknowledgement frame), without CAF's round trip.
  if (st.backup_route
      && tensor_channel::send(st.backup_route, seq,
                              write_key(st.log.epoch(), tag, fw.row_begin),
                              fw.payload,
                              caf::actor_cast<caf::actor>(st.backup), true))
    return;
  self
    ->request(st.backup, caf::infinite, replicate_atom_v, st.log.epoch(), seq,
              tag, fw.row_begin, std::move(fw.payload))
    .then([self, seq](status& ack) { on_ack(self, seq, ack); },
          [self, backup = st.backup](caf::error& err) {
            if (self->state.backup == backup)
              lose_backup(self, to_status(err, "backup").message());
          });
}

// A backup takes write `seq` of `epoch`: the new value, or rows from
// `row_begin` on.
status on_replicate(variable_self self, int64_t epoch, int64_t seq,
                    int64_t tag, int64_t row_begin, tensor& payload) {
  auto& st = self->state;
  if (st.role != replica_role::backup)
    return st.log.epoch() >= epoch
             ? superseded(st, "is no backup of epoch " + std::to_string(epoch)
                                + " (it is at epoch "
                                + std::to_string(st.log.epoch()) + ")")
             : status{error_code::failed_precondition,
                      "variable " + st.name + " is not a backup"};
  switch (st.log.accept(epoch, seq)) {
    case replica_log::verdict::fenced:
      return superseded(st, "refuses epoch " + std::to_string(epoch)
                              + ": it is at epoch "
                              + std::to_string(st.log.epoch()));
    case replica_log::verdict::gap:
      // OutOfRange: past the write the backup expects (its primary syncs
      // it again).
      return {error_code::out_of_range,
              "backup of " + st.name + " misses writes before "
                + std::to_string(seq) + " of epoch " + std::to_string(epoch)};
    case replica_log::verdict::duplicate:
      return {};
    case replica_log::verdict::apply:
      break;
  }
  // What a primary of this variable can send: its dtype, a shape its
  // own would accept (a frame is checked like any input from outside).
  if (payload.type() != st.type
      || (row_begin < 0 && !st.shape.is_compatible_with(payload.shape())))
    return internal_error("malformed write to the backup of " + st.name
                          + ": " + std::string{to_string(payload.type())}
                          + " " + payload.shape().to_string());
  std::lock_guard<std::mutex> guard{st.cell->mtx};
  if (row_begin < 0) {
    st.value() = std::move(payload).owned();
  } else {
    auto& v = st.value();
    auto rows = payload.shape().rank() > 0 ? payload.shape().dim(0) : -1;
    if (!v.valid() || v.shape().rank() == 0 || rows < 0
        || row_begin + rows > v.shape().dim(0) || payload.type() != v.type()
        || payload.byte_size() != v.slice(row_begin, row_begin + rows)
                                    .byte_size())
      return internal_error("malformed row write to the backup of " + st.name);
    auto next = v.unique() ? v : v.deep_copy();
    auto block = next.slice(row_begin, row_begin + rows);
    std::memcpy(block.raw(), payload.raw(), payload.byte_size());
    st.value() = std::move(next);
  }
  st.log.accepted(seq, tag);
  return {};
}

caf::result<status, std::string>
on_sync(variable_self self, int64_t epoch, int64_t seq, tensor& value,
        const std::vector<int64_t>& tags, const std::string& primary_inbox) {
  auto& st = self->state;
  if (st.role != replica_role::backup || !st.log.may_sync(epoch))
    return {superseded(st, "refuses a sync of epoch " + std::to_string(epoch)
                             + " (it is at epoch "
                             + std::to_string(st.log.epoch()) + ")"),
            std::string{}};
  st.primary = caf::actor_cast<caf::actor>(self->current_sender());
  // A sync behind writes this backup already holds (a frame overtook it)
  // would take them back: the backup keeps its newer state.
  auto behind = epoch == st.log.epoch() && seq < st.log.seq();
  st.primary_route = primary_inbox.empty()
                       ? tensor_channel::route{}
                       : tensor_channel::route_to(primary_inbox,
                                                  self->home_system());
  if (!behind) {
    {
      std::lock_guard<std::mutex> guard{st.cell->mtx};
      st.value() = value.valid() ? std::move(value).owned() : tensor{};
    }
    st.log.reset(epoch, seq, tags);
  }
  show_role(st);
  note_update(st, status{});
  return {status{}, st.inbox};
}

status on_promote(variable_self self, int64_t epoch) {
  auto& st = self->state;
  if (st.role == replica_role::deposed)
    return superseded(st, st.why);
  if (st.role == replica_role::backup) {
    if (st.log.epoch() == 0)
      return {error_code::failed_precondition,
              "the backup of " + st.name
                + " was never synced: it holds nothing to serve"};
    if (epoch <= st.log.epoch())
      return {error_code::failed_precondition,
              "promotion of " + st.name + " to epoch " + std::to_string(epoch)
                + ", which is not newer than "
                + std::to_string(st.log.epoch())};
    st.log.enter(epoch);
    st.role = replica_role::solo;
    show_role(st);
  }
  return {};
}

void on_set_backup(variable_self self, caf::actor& backup, int64_t epoch) {
  auto& st = self->state;
  if (st.role == replica_role::deposed || st.role == replica_role::backup
      || !backup)
    return;
  auto next = caf::actor_cast<variable_actor>(backup);
  if (st.role == replica_role::primary && next == st.backup
      && epoch <= st.log.epoch()) {
    // Attached again (a retried attach): the same backup, synced again;
    // the writes waiting for it are answered by the sync.
    sync_backup(self);
    return;
  }
  if (st.backup)
    self->demonitor(st.backup.address());
  fail_waiting(st, {error_code::unavailable,
                    "the backup of " + st.name + " was replaced"});
  st.log.enter(epoch);
  st.backup = std::move(next);
  st.role = replica_role::primary;
  show_role(st);
  self->monitor(st.backup);
  sync_backup(self);
}

void on_frame(variable_self self, int64_t seq, const std::string& key,
              tensor& value) {
  // A write frame at a backup, an acknowledgement at a primary (anything
  // else is dropped: the channel names no sender).
  std::vector<int64_t> f;
  if (key.rfind("w:", 0) == 0) {
    if (!key_fields(key, 3, f))
      return;
    auto err = on_replicate(self, f[0], seq, f[1], f[2], value);
    note_update(self->state, err);
    acknowledge(self, seq, err);
    return;
  }
  std::string text;
  if (key.rfind("a:", 0) == 0 && key_fields(key, 1, f, &text))
    on_ack(self, seq,
           f[0] == 0 ? status{} : status{static_cast<error_code>(f[0]), text});
}

void note_update(variable_state& st, const status& err) {
  auto* rec = st.record;
  if (rec == nullptr || !err.ok())
    return;
  constexpr auto relaxed = std::memory_order_relaxed;
  auto& value = st.value();
  rec->gauges[0].store(static_cast<int64_t>(value.byte_size()), relaxed);
  rec->gauges[1].store(value.valid() ? 1 : 0, relaxed);
  rec->gauges[2].store(rec->gauges[2].load(relaxed) + 1, relaxed);
}

} // namespace actorflow::variable_detail
