#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <cstring>
#include <map>
#include <unordered_map>

#include <Eigen/Core>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/transport/system_data.hpp"
#include "actorflow/transport/tensor_channel.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "replica_log.hpp"
#include "runtime.hpp"

namespace actorflow {

namespace {

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

// The cells of an actor system's variables, by actor id, for its
// executors (system_data.hpp).
struct cell_registry {
  struct entry {
    caf::actor_addr addr;
    std::weak_ptr<variable_cell> cell;
  };
  std::mutex mtx;
  std::unordered_map<caf::actor_id, entry> cells;
  /// Forget ended variables' entries once the map reaches this size, so
  /// spawning n variables costs O(n), not O(n^2).
  size_t next_sweep = 64;
};

status uninitialized(const variable_state& st) {
  return failed_precondition("Attempting to use uninitialized value "
                             + st.name);
}

status check_type(const variable_state& st, const tensor& x) {
  if (x.type() != st.type)
    return invalid_argument("Variable " + st.name + " holds "
                            + std::string{to_string(st.type)}
                            + ", cannot assign a "
                            + std::string{to_string(x.type())});
  return {};
}

// Element-wise x += sign * y into a buffer of our own (copy-on-write: a
// reader may still share the old one).
template <class T>
void accumulate(tensor& dst, const tensor& src, T sign) {
  auto d = dst.flat<T>();
  auto s = src.flat<T>();
  for (size_t i = 0; i < d.size(); ++i)
    d[i] += sign * s[i];
}

status add_into(variable_state& st, const tensor& delta, int sign) {
  if (!st.value().valid())
    return uninitialized(st);
  if (auto err = check_type(st, delta); !err.ok())
    return err;
  if (!(delta.shape() == st.value().shape()))
    return invalid_argument("Update of " + st.name + " needs shape "
                            + st.value().shape().to_string() + ", got "
                            + delta.shape().to_string());
  // Held while the buffer may change in place (variable_cell).
  std::lock_guard<std::mutex> guard{st.cell->mtx};
  auto next = st.value().unique() ? st.value() : st.value().deep_copy();
  switch (st.type) {
    case dtype::float32:
      accumulate<float>(next, delta, static_cast<float>(sign));
      break;
    case dtype::float64:
      accumulate<double>(next, delta, static_cast<double>(sign));
      break;
    case dtype::int32:
      accumulate<int32_t>(next, delta, sign);
      break;
    case dtype::int64:
      accumulate<int64_t>(next, delta, sign);
      break;
    default:
      return invalid_argument("Variable " + st.name + " of type "
                              + std::string{to_string(st.type)}
                              + " does not support assign_add/assign_sub");
  }
  st.value() = std::move(next);
  return {};
}

// CountUpTo: the value before the increment, or OutOfRange at the limit.
template <class T>
status count_up(variable_state& st, int64_t limit, tensor& before) {
  auto old = st.value().flat<T>()[0];
  if (static_cast<int64_t>(old) >= limit)
    return {error_code::out_of_range,
            "Reached limit of " + std::to_string(limit)};
  std::lock_guard<std::mutex> guard{st.cell->mtx};
  auto next = st.value().unique() ? st.value() : st.value().deep_copy();
  next.flat<T>()[0] = old + 1;
  st.value() = std::move(next);
  before = tensor::scalar(old);
  return {};
}

// Which apply arguments are element-wise (the variable's shape) rather
// than scalars, by kind.
std::vector<bool> elementwise_args(apply_kind kind) {
  switch (kind) {
    case apply_kind::gradient_descent:
      return {false, true};
    case apply_kind::momentum:
      return {true, false};
    case apply_kind::square_sum:
      return {true};
    case apply_kind::moving_average:
    case apply_kind::moving_square:
      return {true, false};
    case apply_kind::scaled_sqrt:
      return {false, true, true, false};
    case apply_kind::nesterov:
      return {false, true, false, true};
  }
  return {};
}

// Eigen arrays over the buffers: the loops vectorize (a plain loop over
// std::sqrt did not, and Adam's update was a tenth of a training step).
template <class T>
void apply_update(tensor& var, apply_kind kind,
                  const std::vector<tensor>& args) {
  using array = Eigen::Array<T, Eigen::Dynamic, 1>;
  auto n = static_cast<Eigen::Index>(var.num_elements());
  Eigen::Map<array> v(static_cast<T*>(var.raw()), n);
  auto arg = [&](size_t i) {
    return Eigen::Map<const array>(static_cast<const T*>(args[i].raw()), n);
  };
  auto scalar = [&](size_t i) { return args[i].flat<T>()[0]; };
  switch (kind) {
    case apply_kind::gradient_descent:
      v -= scalar(0) * arg(1);
      break;
    case apply_kind::momentum:
      v = v * scalar(1) + arg(0);
      break;
    case apply_kind::square_sum:
      v += arg(0).square();
      break;
    case apply_kind::moving_average: {
      auto beta = scalar(1);
      v = v * beta + (T{1} - beta) * arg(0);
      break;
    }
    case apply_kind::moving_square: {
      auto beta = scalar(1);
      v = v * beta + (T{1} - beta) * arg(0).square();
      break;
    }
    case apply_kind::scaled_sqrt:
      v -= scalar(0) * arg(1) / (arg(2).sqrt() + scalar(3));
      break;
    case apply_kind::nesterov:
      v -= scalar(0) * (arg(1) + scalar(2) * arg(3));
      break;
  }
}

// One training update, atomically, of the whole variable (row_begin < 0)
// or of the rows [row_begin, row_begin + n) the element-wise arguments
// hold; `updated` is what changed. An error leaves the variable unchanged.
status apply(variable_state& st, apply_kind kind,
             const std::vector<tensor>& args, int64_t row_begin,
             tensor& updated) {
  if (!st.value().valid())
    return uninitialized(st);
  if (st.type != dtype::float32 && st.type != dtype::float64)
    return invalid_argument("training updates need a float variable, "
                            + st.name + " holds "
                            + std::string{to_string(st.type)});
  auto shapes = elementwise_args(kind);
  if (shapes.empty() || args.size() != shapes.size())
    return invalid_argument("malformed update of " + st.name);
  // The shape element-wise arguments must have: the variable's, or its
  // rows [row_begin, row_begin + n) where n comes from the first one.
  auto want = st.value().shape();
  int64_t rows = 0;
  if (row_begin >= 0) {
    auto lead = std::find(shapes.begin(), shapes.end(), true);
    auto dims = want.dims();
    if (dims.empty() || lead == shapes.end())
      return invalid_argument("a row update of " + st.name
                              + " needs a variable with rows, not "
                              + want.to_string());
    auto& first = args[static_cast<size_t>(lead - shapes.begin())];
    rows = first.shape().rank() > 0 ? first.shape().dim(0) : -1;
    if (rows < 0 || row_begin + rows > dims[0])
      return invalid_argument("rows [" + std::to_string(row_begin) + ", "
                              + std::to_string(row_begin + rows)
                              + ") are outside " + st.name + " of shape "
                              + want.to_string());
    dims[0] = rows;
    want = tensor_shape{dims};
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto err = check_type(st, args[i]); !err.ok())
      return err;
    if (shapes[i] && !(args[i].shape() == want))
      return invalid_argument("var and update argument "
                              + std::to_string(i)
                              + " do not have the same shape"
                              + want.to_string() + " "
                              + args[i].shape().to_string() + " (" + st.name
                              + ")");
    if (!shapes[i] && args[i].num_elements() != 1)
      return invalid_argument("update argument " + std::to_string(i)
                              + " of " + st.name + " is not a scalar: "
                              + args[i].shape().to_string());
  }
  std::lock_guard<std::mutex> guard{st.cell->mtx};
  auto next = st.value().unique() ? st.value() : st.value().deep_copy();
  if (row_begin < 0) {
    if (st.type == dtype::float32)
      apply_update<float>(next, kind, args);
    else
      apply_update<double>(next, kind, args);
    st.value() = std::move(next);
    updated = st.value();
    return {};
  }
  auto block = next.slice(row_begin, row_begin + rows);
  if (st.type == dtype::float32)
    apply_update<float>(block, kind, args);
  else
    apply_update<double>(block, kind, args);
  st.value() = std::move(next);
  updated = std::move(block);
  return {};
}

using write_promise = caf::typed_response_promise<status, tensor>;

// What a write forwards to the backup: the new value, or the rows
// [row_begin, row_begin + n) that changed.
struct forwarded {
  int64_t row_begin = -1;
  tensor payload;
};

status superseded(const variable_state& st, const std::string& why) {
  return {error_code::aborted,
          "Superseded: variable " + st.name + " of " + st.home + " " + why};
}

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

// Fails every write waiting for the backup's acknowledgement with `err`.
void fail_waiting(variable_state& st, const status& err) {
  auto waiting = std::move(st.waiting);
  st.waiting.clear();
  st.waiting_tags.clear();
  for (auto& [seq, w] : waiting)
    for (auto& rp : w.promises)
      rp.deliver(err, tensor{});
}

// Tells the worker that this variable's replication changed (`what`:
// "lost" its backup, or "deposed").
void tell_worker(variable_self self, const std::string& what) {
  if (self->state.worker)
    self->send(caf::actor_cast<worker_actor>(self->state.worker),
               replica_lost_atom_v, self->state.home, what);
}

// The backup is gone: writes wait (fail Unavailable, their steps retry)
// until the worker attaches a new one.
void lose_backup(variable_self self, const std::string& why) {
  auto& st = self->state;
  if (st.role != replica_role::primary)
    return;
  st.role = replica_role::orphan;
  st.why = "its backup was lost (" + why + ")";
  show_role(st);
  if (st.backup)
    self->demonitor(st.backup.address());
  st.backup = nullptr;
  st.backup_route = {};
  fail_waiting(st, writable(st));
  tell_worker(self, "lost");
}

// A newer primary exists (its backup was promoted): this one takes no
// write and serves no read again, even in its own process's executors.
void depose(variable_self self, const std::string& why) {
  auto& st = self->state;
  if (st.role == replica_role::deposed)
    return;
  st.role = replica_role::deposed;
  st.why = why;
  show_role(st);
  st.cell->stale.store(true, std::memory_order_release);
  if (st.backup)
    self->demonitor(st.backup.address());
  st.backup = nullptr;
  st.backup_route = {};
  fail_waiting(st, superseded(st, why));
  tell_worker(self, "deposed");
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
    else
      lose_backup(self, ack.message());
    return;
  }
  auto w = std::move(i->second);
  st.waiting.erase(i);
  st.waiting_tags.erase(w.tag);
  for (auto& rp : w.promises)
    rp.deliver(status{}, w.reply);
}

std::string write_key(int64_t epoch, int64_t tag, int64_t row_begin);

// One write: `apply(reply, fw)` changes the value (or fails, changing
// nothing). A write whose tag was applied changes nothing and answers the
// value (once the backup holds the first one). A primary answers once
// its backup holds the write.
template <class Apply, class Updated>
write_promise write(variable_self self, int64_t tag, Updated& updated,
                    Apply apply) {
  auto rp = self->make_response_promise<status, tensor>();
  auto& st = self->state;
  if (auto err = writable(st); !err.ok()) {
    rp.deliver(err, tensor{});
    return rp;
  }
  // Tags matter only where a step may run again after a failover: a
  // replicated variable (epoch 1 on), which remembers the last 4 096.
  const bool replicated = st.log.epoch() > 0;
  if (replicated && st.log.seen(tag)) {
    if (auto w = st.waiting_tags.find(tag); w != st.waiting_tags.end())
      st.waiting[w->second].promises.push_back(rp);
    else
      rp.deliver(status{}, st.value());
    return rp;
  }
  tensor reply;
  forwarded fw;
  auto err = apply(reply, fw);
  updated(err);
  if (!err.ok()) {
    rp.deliver(err, tensor{});
    return rp;
  }
  if (replicated)
    st.log.record(tag);
  if (st.role != replica_role::primary) {
    rp.deliver(status{}, std::move(reply));
    return rp;
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
    return rp;
  self
    ->request(st.backup, caf::infinite, replicate_atom_v, st.log.epoch(), seq,
              tag, fw.row_begin, std::move(fw.payload))
    .then([self, seq](status& ack) { on_ack(self, seq, ack); },
          [self](caf::error& err) {
            lose_backup(self, to_status(err, "backup").message());
          });
  return rp;
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

// A backup takes write `seq` of `epoch`: the new value, or rows from
// `row_begin` on.
status replicate(variable_self self, int64_t epoch, int64_t seq, int64_t tag,
                 int64_t row_begin, tensor& payload) {
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
      return {error_code::failed_precondition,
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

variable_actor::behavior_type
variable(variable_self self, std::string name, dtype type, tensor_shape shape,
         std::shared_ptr<variable_cell> cell, replica_init init) {
  self->state.cell = std::move(cell);
  self->state.name = std::move(name);
  self->state.type = type;
  self->state.shape = std::move(shape);
  self->state.role = init.role;
  self->state.home = std::move(init.home);
  self->state.worker = std::move(init.worker);
  self->state.why = "none has joined yet";
  self->state.log.enter(init.epoch);
  self->state.record = record_of(self);
  show_role(self->state);
  if (!init.inbox_host.empty()) {
    auto& inbox = self->state.inbox;
    inbox = tensor_channel::open_inbox(init.inbox_host,
                                       caf::actor_cast<caf::actor>(self));
    if (!inbox.empty())
      self->attach_functor([inbox, sys = &self->system()] {
        tensor_channel::close_inbox(*sys, inbox);
      });
  }
  self->set_down_handler([self](caf::down_msg& dm) {
    if (self->state.backup && dm.source == self->state.backup.address())
      lose_backup(self, caf::to_string(dm.reason));
  });
  // After every write: the monitor's bytes, initialized and updates.
  auto updated = [self](const status& err) {
    auto* rec = self->state.record;
    if (rec == nullptr || !err.ok())
      return;
    constexpr auto relaxed = std::memory_order_relaxed;
    auto& value = self->state.value();
    rec->gauges[0].store(static_cast<int64_t>(value.byte_size()), relaxed);
    rec->gauges[1].store(value.valid() ? 1 : 0, relaxed);
    rec->gauges[2].store(rec->gauges[2].load(relaxed) + 1, relaxed);
  };
  return {
    [self](read_atom) -> caf::result<status, tensor> {
      auto& st = self->state;
      if (st.role == replica_role::backup || st.role == replica_role::deposed)
        return {writable(st), tensor{}};
      if (!st.value().valid())
        return {uninitialized(st), tensor{}};
      return {status{}, st.value()};
    },
    [self, updated](assign_atom, tensor& x, bool validate_shape,
                    int64_t tag) mutable {
      return write(self, tag, updated, [&](tensor& reply, forwarded& fw) {
        auto& st = self->state;
        if (auto err = check_type(st, x); !err.ok())
          return err;
        if (validate_shape && !st.shape.is_compatible_with(x.shape()))
          return invalid_argument("Assign requires shapes of both tensors to "
                                  "match. lhs shape= "
                                  + st.shape.to_string() + " rhs shape= "
                                  + x.shape().to_string());
        std::lock_guard<std::mutex> guard{st.cell->mtx};
        // The value stays: not in a ring's room (tensor::borrow).
        st.value() = std::move(x).owned();
        reply = fw.payload = st.value();
        return status{};
      });
    },
    [self, updated](assign_add_atom, const tensor& x, int64_t tag) mutable {
      return write(self, tag, updated, [&](tensor& reply, forwarded& fw) {
        auto err = add_into(self->state, x, 1);
        if (err.ok())
          reply = fw.payload = self->state.value();
        return err;
      });
    },
    [self, updated](assign_sub_atom, const tensor& x, int64_t tag) mutable {
      return write(self, tag, updated, [&](tensor& reply, forwarded& fw) {
        auto err = add_into(self->state, x, -1);
        if (err.ok())
          reply = fw.payload = self->state.value();
        return err;
      });
    },
    [self, updated](count_up_to_atom, int64_t limit, int64_t tag) mutable {
      return write(self, tag, updated, [&](tensor& reply, forwarded& fw) {
        auto& st = self->state;
        if (!st.value().valid())
          return uninitialized(st);
        if (st.value().shape().rank() != 0)
          return invalid_argument("Input is not a scalar: "
                                  + st.value().shape().to_string() + " ("
                                  + st.name + ")");
        status err;
        if (st.type == dtype::int32)
          err = count_up<int32_t>(st, limit, reply);
        else if (st.type == dtype::int64)
          err = count_up<int64_t>(st, limit, reply);
        else
          err = invalid_argument("CountUpTo needs an int32 or int64 "
                                 "variable, "
                                 + st.name + " holds "
                                 + std::string{to_string(st.type)});
        if (err.ok())
          fw.payload = st.value();
        return err;
      });
    },
    [self, updated](apply_atom, int32_t kind, const std::vector<tensor>& args,
                    int64_t row_begin, int64_t tag) mutable {
      return write(self, tag, updated, [&](tensor& reply, forwarded& fw) {
        auto err = apply(self->state, static_cast<apply_kind>(kind), args,
                         row_begin, reply);
        if (err.ok()) {
          fw.row_begin = row_begin;
          fw.payload = row_begin < 0 ? self->state.value() : reply;
        }
        return err;
      });
    },
    [self](is_initialized_atom) {
      return self->state.value().valid();
    },
    [self, updated](replicate_atom, int64_t epoch, int64_t seq, int64_t tag,
                    int64_t row_begin, tensor& payload) {
      auto err = replicate(self, epoch, seq, tag, row_begin, payload);
      updated(err);
      return err;
    },
    [self, updated](replica_sync_atom, int64_t epoch, int64_t seq,
                    tensor& value, const std::vector<int64_t>& tags,
                    const std::string& primary_inbox)
      -> caf::result<status, std::string> {
      auto& st = self->state;
      if (st.role != replica_role::backup || !st.log.may_sync(epoch))
        return {superseded(st, "refuses a sync of epoch "
                                 + std::to_string(epoch) + " (it is at epoch "
                                 + std::to_string(st.log.epoch()) + ")"),
                std::string{}};
      st.primary = caf::actor_cast<caf::actor>(self->current_sender());
      st.primary_route = primary_inbox.empty()
                           ? tensor_channel::route{}
                           : tensor_channel::route_to(primary_inbox,
                                                      self->home_system());
      {
        std::lock_guard<std::mutex> guard{st.cell->mtx};
        st.value() = value.valid() ? std::move(value).owned() : tensor{};
      }
      st.log.reset(epoch, seq, tags);
      show_role(st);
      updated(status{});
      return {status{}, st.inbox};
    },
    [self](promote_atom, int64_t epoch) {
      auto& st = self->state;
      if (st.role == replica_role::deposed)
        return superseded(st, st.why);
      if (st.role == replica_role::backup) {
        if (st.log.epoch() == 0)
          return status{error_code::failed_precondition,
                        "the backup of " + st.name
                          + " was never synced: it holds nothing to serve"};
        if (epoch <= st.log.epoch())
          return status{error_code::failed_precondition,
                        "promotion of " + st.name + " to epoch "
                          + std::to_string(epoch) + ", which is not newer than "
                          + std::to_string(st.log.epoch())};
        st.log.enter(epoch);
        st.role = replica_role::solo;
        show_role(st);
      }
      return status{};
    },
    [self](set_backup_atom, caf::actor& backup, int64_t epoch) {
      auto& st = self->state;
      if (st.role == replica_role::deposed || st.role == replica_role::backup
          || !backup)
        return;
      if (st.backup)
        self->demonitor(st.backup.address());
      fail_waiting(st, {error_code::unavailable,
                        "the backup of " + st.name + " was replaced"});
      st.log.enter(epoch);
      st.backup = caf::actor_cast<variable_actor>(backup);
      st.role = replica_role::primary;
      show_role(st);
      self->monitor(st.backup);
      // The whole state first; writes from now on follow it in order.
      self
        ->request(st.backup, caf::infinite, replica_sync_atom_v,
                  st.log.epoch(), st.log.seq(), st.value(), st.log.tags(),
                  st.inbox)
        .then(
          [self, backup = st.backup](status& ack, std::string& inbox) {
            auto& st = self->state;
            if (ack.ok()) {
              // Later writes take the channel (until then, CAF keeps
              // them in order behind the sync).
              if (!inbox.empty() && st.backup == backup)
                st.backup_route = tensor_channel::route_to(
                  inbox, self->home_system());
              return;
            }
            if (ack.code() == error_code::aborted)
              depose(self, "(its new backup refused the sync: "
                             + ack.message() + ")");
            else
              lose_backup(self, ack.message());
          },
          [self](caf::error& err) {
            lose_backup(self, to_status(err, "backup").message());
          });
    },
    [self](depose_atom, const std::string& why) { depose(self, why); },
    [self, updated](recv_tensor_atom, int64_t seq, const std::string& key,
                    tensor& value) {
      // A write frame at a backup, an acknowledgement at a primary
      // (anything else is dropped: the channel names no sender).
      std::vector<int64_t> f;
      if (key.rfind("w:", 0) == 0) {
        if (!key_fields(key, 3, f))
          return;
        auto err = replicate(self, f[0], seq, f[1], f[2], value);
        updated(err);
        acknowledge(self, seq, err);
        return;
      }
      std::string text;
      if (key.rfind("a:", 0) == 0 && key_fields(key, 1, f, &text))
        on_ack(self, seq,
               f[0] == 0 ? status{}
                         : status{static_cast<error_code>(f[0]), text});
    },
  };
}

} // namespace

variable_actor spawn_variable(caf::actor_system& sys, std::string name,
                              dtype type, tensor_shape shape,
                              monitoring::identity who, replica_init init) {
  auto cell = std::make_shared<variable_cell>();
  who.kind = monitoring::actor_kind::variable;
  if (who.name.empty())
    who.name = name;
  auto var = spawn_instrumented(sys, std::move(who), variable,
                                std::move(name), type, std::move(shape),
                                cell, std::move(init));
  auto cells = system_data<cell_registry>(sys);
  auto& r = *cells;
  std::lock_guard<std::mutex> guard{r.mtx};
  if (r.cells.size() >= r.next_sweep) {
    // Forget the cells of variables that ended (a container reset).
    for (auto i = r.cells.begin(); i != r.cells.end();)
      i = i->second.cell.expired() ? r.cells.erase(i) : std::next(i);
    r.next_sweep = std::max<size_t>(64, 2 * r.cells.size());
  }
  r.cells[var.id()] = {var.address(), cell};
  return var;
}

std::shared_ptr<variable_cell> variable_cell_of(const variable_actor& var) {
  if (!var)
    return nullptr;
  auto cells = system_data<cell_registry>(var->home_system());
  auto& r = *cells;
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.cells.find(var.id());
  // The address, not the id alone: a remote actor's id can equal a local
  // one's.
  if (i == r.cells.end() || i->second.addr != var.address())
    return nullptr;
  return i->second.cell.lock();
}

} // namespace actorflow
