// A variable as an actor: its value (in a cell its own process's executors
// read), its updates (assign, assign_add/sub, CountUpTo, the training ops'
// pieces, with Eigen), and its messages. Its part in replication is
// variable_replication.cpp's; its state is variable_state.hpp.

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <Eigen/Core>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/transport/system_data.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "variable_state.hpp"

namespace actorflow {

namespace {

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

} // namespace

} // namespace actorflow

namespace actorflow::variable_detail {

namespace {

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

// One write: `apply(reply, fw)` changes the value (or fails, changing
// nothing). An unreplicated variable answers at once; otherwise
// admit_write and commit_write are replication's part
// (variable_replication.cpp), and a primary answers once its backup holds
// the write.
template <class Apply>
caf::result<status, tensor> write(variable_self self, int64_t tag,
                                  Apply apply) {
  tensor reply;
  forwarded fw;
  auto& st = self->state;
  if (st.role == replica_role::solo && st.log.epoch() == 0) {
    auto err = apply(reply, fw);
    note_update(st, err);
    return {err, err.ok() ? std::move(reply) : tensor{}};
  }
  auto rp = self->make_response_promise<status, tensor>();
  if (!admit_write(self, tag, rp))
    return rp;
  auto err = apply(reply, fw);
  note_update(st, err);
  if (!err.ok()) {
    rp.deliver(err, tensor{});
    return rp;
  }
  commit_write(self, tag, rp, std::move(reply), std::move(fw));
  return rp;
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
  return {
    [self](read_atom) -> caf::result<status, tensor> {
      auto& st = self->state;
      if (st.role == replica_role::backup || st.role == replica_role::deposed)
        return {writable(st), tensor{}};
      if (!st.value().valid())
        return {uninitialized(st), tensor{}};
      return {status{}, st.value()};
    },
    [self](assign_atom, tensor& x, bool validate_shape,
                    int64_t tag) {
      return write(self, tag, [&](tensor& reply, forwarded& fw) {
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
    [self](assign_add_atom, const tensor& x, int64_t tag) {
      return write(self, tag, [&](tensor& reply, forwarded& fw) {
        auto err = add_into(self->state, x, 1);
        if (err.ok())
          reply = fw.payload = self->state.value();
        return err;
      });
    },
    [self](assign_sub_atom, const tensor& x, int64_t tag) {
      return write(self, tag, [&](tensor& reply, forwarded& fw) {
        auto err = add_into(self->state, x, -1);
        if (err.ok())
          reply = fw.payload = self->state.value();
        return err;
      });
    },
    [self](count_up_to_atom, int64_t limit, int64_t tag) {
      return write(self, tag, [&](tensor& reply, forwarded& fw) {
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
    [self](apply_atom, int32_t kind, const std::vector<tensor>& args,
                    int64_t row_begin, int64_t tag) {
      return write(self, tag, [&](tensor& reply, forwarded& fw) {
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
    [self](replicate_atom, int64_t epoch, int64_t seq, int64_t tag,
           int64_t row_begin, tensor& payload) {
      auto err = on_replicate(self, epoch, seq, tag, row_begin, payload);
      note_update(self->state, err);
      return err;
    },
    [self](replica_sync_atom, int64_t epoch, int64_t seq, tensor& value,
           const std::vector<int64_t>& tags, const std::string& inbox) {
      return on_sync(self, epoch, seq, value, tags, inbox);
    },
    [self](promote_atom, int64_t epoch) { return on_promote(self, epoch); },
    [self](set_backup_atom, caf::actor& backup, int64_t epoch) {
      on_set_backup(self, backup, epoch);
    },
    [self](depose_atom, const std::string& why) { depose(self, why); },
    [self](recv_tensor_atom, int64_t seq, const std::string& key,
           tensor& value) { on_frame(self, seq, key, value); },
  };
}

} // namespace

} // namespace actorflow::variable_detail

namespace actorflow {

using namespace variable_detail;

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
