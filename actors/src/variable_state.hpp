#pragma once

// Private to actors/: the state of a variable actor, shared by
// variable_actor.cpp (its value and its updates, the actor) and
// variable_replication.cpp (its part in replicated variables: roles,
// forwarded writes, acknowledgements, fencing; docs/DESIGN.md,
// "Replicated variables").

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "actorflow/actors/monitoring.hpp"
#include "actorflow/transport/tensor_channel.hpp"
#include "replica_log.hpp"
#include "runtime.hpp"

namespace actorflow::variable_detail {

struct variable_state {
  std::string name;
  dtype type = dtype::invalid;
  tensor_shape shape;
  std::shared_ptr<variable_cell> cell;
  /// Its monitoring record (nullptr with monitoring off).
  monitoring::actor_record* record = nullptr;
  /// Only this actor writes it, holding cell->mtx (see variable_cell).
  tensor& value() {
    return cell->value;
  }
  // -- replication (docs/DESIGN.md, "Replicated variables") --------------
  replica_role role = replica_role::solo;
  replica_log log;
  /// The backup (a primary's).
  variable_actor backup;
  /// True while the last sync sent to the backup (number `last_sync`) is
  /// unanswered: writes go behind it over CAF.
  bool syncing = false;
  uint64_t last_sync = 0;
  /// Writes waiting for the backup's acknowledgement, by sequence number.
  struct waiting_write {
    int64_t tag = 0;
    tensor reply;
    std::vector<caf::typed_response_promise<status, tensor>> promises;
  };
  std::map<int64_t, waiting_write> waiting;
  /// The sequence number of a waiting write, by its tag.
  std::unordered_map<int64_t, int64_t> waiting_tags;
  /// The task whose variable this is, and why it is orphaned or deposed.
  std::string home;
  std::string why;
  /// Its worker, told when the backup is lost or this replica deposed.
  caf::actor worker;
  /// Its tensor channel inbox ("" for none), and the routes to the other
  /// replica's: a primary's writes and a backup's acknowledgements go
  /// there (CAF's connection when there is none, or the link is down).
  std::string inbox;
  tensor_channel::route backup_route;
  tensor_channel::route primary_route;
  /// A backup's primary (the sender of its sync): acknowledgements that
  /// cannot take the channel go there.
  caf::actor primary;
};

using variable_self = variable_actor::stateful_pointer<variable_state>;

using write_promise = caf::typed_response_promise<status, tensor>;

/// What a write forwards to the backup: the new value, or the rows
/// [row_begin, row_begin + n) that changed.
struct forwarded {
  int64_t row_begin = -1;
  tensor payload;
};

// -- variable_replication.cpp ------------------------------------------------

/// OK where the variable takes writes in its role; Unavailable without a
/// backup, Aborted ("Superseded: ...") for a backup or a deposed primary.
status writable(const variable_state& st);

/// Sets the monitor's detail: dtype, shape and the part in replication.
void show_role(variable_state& st);

/// The first half of a write: false when it is answered already (refused
/// by the role, or a tag seen before: answered with the value once the
/// first write is held).
bool admit_write(variable_self self, int64_t tag, write_promise& rp);

/// The second half of an applied write: remembered by its tag, answered
/// at once (not replicated, or alone) or once the backup holds it
/// (forwarded as `fw`).
void commit_write(variable_self self, int64_t tag, write_promise& rp,
                  tensor reply, forwarded fw);

/// The backup was lost (`why`): writes are refused until a new one joins.
void lose_backup(variable_self self, const std::string& why);

/// A newer primary exists: this one serves nothing from now on.
void depose(variable_self self, const std::string& why);

/// The handlers of replication's messages (variable_actor in
/// type_ids.hpp): a forwarded write, a sync, a promotion, a new backup, a
/// frame of the tensor channel (a write or an acknowledgement).
status on_replicate(variable_self self, int64_t epoch, int64_t seq,
                    int64_t tag, int64_t row_begin, tensor& payload);
caf::result<status, std::string>
on_sync(variable_self self, int64_t epoch, int64_t seq, tensor& value,
        const std::vector<int64_t>& tags, const std::string& primary_inbox);
status on_promote(variable_self self, int64_t epoch);
void on_set_backup(variable_self self, caf::actor& backup, int64_t epoch);
void on_frame(variable_self self, int64_t seq, const std::string& key,
              tensor& value);

/// After every write: the monitor's bytes, initialized and updates.
void note_update(variable_state& st, const status& err);

} // namespace actorflow::variable_detail
