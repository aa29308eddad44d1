// The worker service of a task (TF's Worker and its ResourceMgr): graph
// registration (one executor per registered partition), the task's
// containers of variables, queues, readers and accumulators, and their
// cleanup.

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/graph/wire.hpp"
#include "actorflow/kernels/reader_core.hpp"
#include "durable_state.hpp"
#include "worker.hpp"
#include "worker_state.hpp"

namespace actorflow {

status check_container(const std::string& container) {
  static const std::regex valid{"[A-Za-z0-9.][A-Za-z0-9_.\\-/]*"};
  if (!std::regex_match(container, valid))
    return invalid_argument("container contains invalid characters: "
                            + container);
  return {};
}

namespace {

// How the console names an executor: the ops the partition runs, most
// frequent first, leaving out the transfers, constants and variables
// every partition has (what tells executors apart, so first: a narrow
// column keeps it), then the session by the task that opened it:
// "MatMul x14, BiasAdd x3, BiasAddGrad x3 (66 ops), worker/0 session 0".
std::string executor_name(const std::string& session, const graph_def& g) {
  auto field = [&](const std::string& key) {
    auto at = session.find(key);
    if (at == std::string::npos)
      return std::string{};
    at += key.size();
    return session.substr(at, session.find('/', at) - at);
  };
  auto job = field("/job:");
  auto name = job.empty() ? session
                          : job + "/" + field("/task:") + " session "
                              + field("/session:");
  static const std::set<std::string> every_partition{
    "_Send", "_Recv", "_Retval", "_Arg", "Const", "Identity", "NoOp",
    "VariableV2", "Placeholder"};
  std::map<std::string, int> ops;
  for (auto& n : g.nodes)
    if (every_partition.count(n.op) == 0)
      ++ops[n.op];
  std::vector<std::pair<int, std::string>> frequent;
  for (auto& [op, count] : ops)
    frequent.emplace_back(-count, op);
  std::sort(frequent.begin(), frequent.end());
  std::string summary;
  for (size_t i = 0; i < frequent.size() && i < 3; ++i)
    summary += (i == 0 ? "" : ", ") + frequent[i].second
               + (frequent[i].first < -1
                    ? " x" + std::to_string(-frequent[i].first)
                    : "");
  if (summary.empty())
    summary = "reads and transfers";
  return summary + " (" + std::to_string(g.nodes.size()) + " ops), " + name;
}

// Two reader nodes describe the same reader: same op and attributes,
// wherever they sit in their graphs.
bool same_reader(const node_def& x, const node_def& y) {
  auto relevant = [](const node_def& n) {
    auto attrs = n.attrs;
    attrs.erase("_class");
    attrs.erase("container");
    return attrs;
  };
  return x.op == y.op && relevant(x) == relevant(y);
}

// The node a queue or reader lookup carries (one node, encoded), after
// checking the container's name.
status resource_node(const std::string& container, const std::string& name,
                     const std::string& node_bytes, node_def& out) {
  if (auto err = check_container(container); !err.ok())
    return err;
  graph_def g;
  if (auto err = from_bytes(node_bytes, g); !err.ok() || g.nodes.size() != 1)
    return invalid_argument("malformed resource node for " + name);
  out = std::move(g.nodes.front());
  return {};
}

// Frees the resources of `containers` on this task (the job-named default
// container when the list is empty, as TF's ClearContainers). A missing
// container is fine.
void clear_containers(worker_self self, std::vector<std::string> containers) {
  auto& st = self->state;
  if (containers.empty())
    containers.push_back(st.opts.job);
  std::set<std::string> doomed(containers.begin(), containers.end());
  auto free = [&](auto& resources) {
    for (auto i = resources.begin(); i != resources.end();) {
      if (doomed.count(i->first.first) > 0) {
        auto why = "container '" + i->first.first + "' was reset";
        end_resource(self, i->second, {error_code::aborted, why},
                     freeing_reason(why));
        i = resources.erase(i);
      } else {
        ++i;
      }
    }
  };
  // Every store: a replica must not outlive what it replicates. A lookup
  // still waiting for a queue's state variable finds its entry gone.
  for (auto& [home, store] : st.stores) {
    free(store.vars);
    free(store.queues);
    free(store.accumulators);
  }
  free(st.readers);
  st.count_resources();
}

// A partition of a session's graph: its executor and its inbox on the
// tensor channel ("" for none).
caf::result<status, executor_actor, std::string>
register_graph(worker_self self, const std::string& bytes,
               const std::string& device, const std::string& session) {
  auto& st = self->state;
  graph_def g;
  if (auto err = from_bytes(bytes, g); !err.ok())
    return {err, executor_actor{}, std::string{}};
  if (auto err = check_partition_home(self, device, g); !err.ok())
    return {err, executor_actor{}, std::string{}};
  kernel_cells cells;
  for (auto& n : g.nodes) {
    if (!has_kernel_cell(n.op))
      continue;
    auto& slot = st.cells[{session, n.name}];
    auto cell = slot.lock();
    if (!cell) {
      // A seed of the wrong kind fails the registration, not the worker.
      try {
        cell = make_kernel_cell(n);
      } catch (const op_error& e) {
        return {status{e.code(), e.get_status().message() + " [[node "
                                   + n.name + "]]"},
                executor_actor{}, std::string{}};
      }
      slot = cell;
    }
    cells.emplace(n.name, std::move(cell));
  }
  for (auto i = st.cells.begin(); i != st.cells.end();)
    i = i->second.expired() ? st.cells.erase(i) : std::next(i);
  executor_options eo;
  eo.worker = caf::actor_cast<worker_actor>(self);
  eo.partition = std::move(g);
  eo.device = device;
  eo.default_container = st.opts.job;
  eo.counters = st.counters;
  eo.cells = std::move(cells);
  eo.session = session;
  eo.master = caf::actor_cast<caf::actor>(self->current_sender());
  eo.who = {.name = executor_name(session, eo.partition),
            .container = "",
            .task = st.task_prefix};
  auto exec = spawn_executor(self->system(), std::move(eo));
  self->monitor(exec);
  st.executors.push_back(exec);
  st.count_resources();
  std::string inbox;
  if (!st.channel_host.empty()) {
    inbox = tensor_channel::open_inbox(st.channel_host,
                                       caf::actor_cast<caf::actor>(exec));
    if (!inbox.empty())
      exec->attach_functor([inbox, sys = &self->system()] {
        tensor_channel::close_inbox(*sys, inbox);
      });
  }
  return {status{}, exec, std::move(inbox)};
}

caf::result<status, reader_actor>
get_reader(worker_self self, const std::string& container,
           const std::string& name, const std::string& node_bytes) {
  auto& st = self->state;
  node_def def;
  if (auto err = resource_node(container, name, node_bytes, def); !err.ok())
    return {err, reader_actor{}};
  auto key = std::make_pair(container, name);
  if (auto i = st.readers.find(key); i != st.readers.end()) {
    // Same container and shared_name: the same reader, if it agrees.
    if (!same_reader(i->second.def, def))
      return {invalid_argument("Shared reader " + name + " in container '"
                               + container + "' is a " + i->second.def.op
                               + " with other attributes than " + def.name
                               + " (" + def.op + ")"),
              reader_actor{}};
    return {status{}, i->second.handle};
  }
  std::unique_ptr<reader_core> core;
  if (auto err = reader_core::make(def, core); !err.ok())
    return {err, reader_actor{}};
  auto handle = spawn_reader(self->system(), std::move(core),
                             {.name = name,
                              .container = container,
                              .task = st.task_prefix});
  st.readers.emplace(key, worker_state::reader_entry{def, handle});
  return {status{}, handle};
}

// Delivers `err` to the lookups waiting for resource `key` of `home`'s
// store (`member`: its queues or accumulators) and forgets it.
template <class Map>
void fail_resource(worker_self self, const std::string& home,
                   Map variable_store::*member,
                   const std::pair<std::string, std::string>& key,
                   const status& err) {
  auto s = self->state.stores.find(home);
  if (s == self->state.stores.end())
    return;
  auto& map = s->second.*member;
  auto i = map.find(key);
  if (i == map.end() || i->second.handle)
    return;
  auto waiting = std::move(i->second.waiting);
  map.erase(i);
  for (auto& rp : waiting)
    rp.deliver(err, decltype(i->second.handle){});
}

// Queue or accumulator (container, name) of `home`'s store (`member`:
// its queues or accumulators), as the node in `node_bytes` describes it
// (`options_of(node)`): the one there if `check(its options, opts)`
// agrees, or a new one, `spawn(opts, durable)`. On a replicated task the new
// one's state is a variable of the store (durable_state.hpp), found
// first: a promoted backup's queue starts with what it held.
template <class Handle, class Map, class OptionsOf, class Check,
          class Spawn>
void get_resource(worker_self self,
                  caf::typed_response_promise<status, Handle> rp,
                  Map variable_store::*member, const std::string& container,
                  const std::string& name, const std::string& node_bytes,
                  const std::string& home_in, OptionsOf options_of,
                  Check check, Spawn spawn) {
  node_def def;
  if (auto err = resource_node(container, name, node_bytes, def); !err.ok()) {
    rp.deliver(err, Handle{});
    return;
  }
  auto opts = options_of(def);
  if (auto err = validate(opts); !err.ok()) {
    rp.deliver(err, Handle{});
    return;
  }
  auto& st = self->state;
  auto home = home_in.empty() ? st.task_prefix : home_in;
  if (auto err = serves_store(self, home); !err.ok()) {
    rp.deliver(err, Handle{});
    return;
  }
  auto& store = st.stores.at(home);
  auto key = std::make_pair(container, name);
  auto& map = store.*member;
  if (auto i = map.find(key); i != map.end()) {
    // Same container and shared_name: the same one, if it agrees.
    if (auto err = check(i->second.opts, opts); !err.ok())
      rp.deliver(err, Handle{});
    else if (i->second.handle)
      rp.deliver(status{}, i->second.handle);
    else
      i->second.waiting.push_back(rp);
    return;
  }
  if (!st.replicated) {
    auto handle = spawn(opts, durable_init{});
    map.emplace(key, typename Map::mapped_type{std::move(opts), handle, {}});
    rp.deliver(status{}, handle);
    return;
  }
  map.emplace(key, typename Map::mapped_type{opts, Handle{}, {rp}});
  // A vector of bytes of any length (durable_state.hpp).
  std::string any_length;
  byte_writer w{any_length};
  encode(w, tensor_shape{{-1}});
  auto fail = [self, home, member, key](const status& err) {
    fail_resource(self, home, member, key, err);
  };
  auto spawn_with = [spawn, opts](durable_init durable) {
    return spawn(opts, std::move(durable));
  };
  find_variable(
    self, container, durable_state_name(name),
    static_cast<int32_t>(dtype::uint8), any_length, home,
    [self, home, member, key, spawn = spawn_with,
     fail](status err, variable_actor var) {
      if (!err.ok())
        return fail(err);
      self->request(var, std::chrono::seconds(10), read_atom_v)
        .then(
          [self, home, member, key, spawn, fail, var](status& err,
                                                      tensor& value) {
            // Uninitialized: a new one.
            if (!err.ok() && err.code() != error_code::failed_precondition)
              return fail(err);
            if (auto why = serves_store(self, home); !why.ok())
              return fail(why);
            auto& map = self->state.stores.at(home).*member;
            auto i = map.find(key);
            if (i == map.end() || i->second.handle)
              return; // freed meanwhile (a container reset)
            i->second.handle
              = spawn(durable_init{var, err.ok() ? value : tensor{}});
            auto waiting = std::move(i->second.waiting);
            i->second.waiting.clear();
            for (auto& rp : waiting)
              rp.deliver(status{}, i->second.handle);
          },
          [fail](caf::error& err) {
            fail(to_status(err, "the variable of a replicated state"));
          });
    });
}

caf::typed_response_promise<status, queue_actor>
get_queue(worker_self self, const std::string& container,
          const std::string& name, const std::string& node_bytes,
          const std::string& home) {
  auto rp = self->make_response_promise<status, queue_actor>();
  get_resource(
    self, rp, &variable_store::queues, container, name, node_bytes, home,
    [&name](const node_def& def) { return queue_options_of(def, name); },
    [](const queue_options& have, const queue_options& want) {
      return check_compatible(have, want);
    },
    [self, container, name](const queue_options& opts,
                            durable_init durable) {
      return spawn_queue(self->system(), opts,
                         {.name = name,
                          .container = container,
                          .task = self->state.task_prefix},
                         std::move(durable));
    });
  return rp;
}

caf::typed_response_promise<status, accumulator_actor>
get_accumulator(worker_self self, const std::string& container,
                const std::string& name, const std::string& node_bytes,
                const std::string& home) {
  auto rp = self->make_response_promise<status, accumulator_actor>();
  auto check = [&name, &container](const accumulator_options& have,
                                   const accumulator_options& want) {
    if (have.type != want.type || !(have.shape == want.shape)
        || have.reduction_type != want.reduction_type)
      return invalid_argument(
        "Shared accumulator " + name + " in container '" + container
        + "' has dtype " + std::string{to_string(have.type)} + " and shape "
        + have.shape.to_string() + "; requested "
        + std::string{to_string(want.type)} + " and "
        + want.shape.to_string());
    return status{};
  };
  get_resource(
    self, rp, &variable_store::accumulators, container, name, node_bytes,
    home,
    [&name](const node_def& def) {
      return accumulator_options_of(def, name);
    },
    check,
    [self, container, name](const accumulator_options& opts,
                            durable_init durable) {
      return spawn_accumulator(self->system(), opts,
                               {.name = name,
                                .container = container,
                                .task = self->state.task_prefix},
                               std::move(durable));
    });
  return rp;
}

worker_actor::behavior_type worker(worker_self self, task_options opts,
                                   std::shared_ptr<task_counters> counters) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.task_prefix = task_name(st.opts);
  st.device = st.task_prefix + "/device:CPU:0";
  st.counters = std::move(counters);
  st.channel_host = channel_host_of(self->system(), st.opts);
  init_stores(self);
  self->set_down_handler([self](caf::down_msg& dm) {
    // A task's worker may be the primary of some stores here and the
    // backup of others.
    auto primary = lost_primary(self, dm.source, caf::to_string(dm.reason));
    if (forget_backup(self, dm.source) || primary)
      return;
    auto& xs = self->state.executors;
    xs.erase(std::remove_if(xs.begin(), xs.end(),
                            [&](const executor_actor& x) {
                              return x.address() == dm.source;
                            }),
             xs.end());
    self->state.count_resources();
  });
  // The task's executors and resources end with it (its master sends the
  // exit when the task stops).
  self->set_exit_handler([self](caf::exit_msg& em) {
    auto& st = self->state;
    for (auto& exec : st.executors)
      self->send_exit(exec, em.reason);
    status why{error_code::aborted, st.task_prefix + " stopped"};
    auto end = [&](auto& resources) {
      for (auto& [key, e] : resources)
        end_resource(self, e, why, em.reason);
    };
    for (auto& [home, store] : st.stores) {
      end(store.vars);
      end(store.queues);
      end(store.accumulators);
    }
    end(st.readers);
    self->quit(em.reason);
  });
  auto count = [self] {
    self->state.counters->messages.fetch_add(1, std::memory_order_relaxed);
  };
  return {
    [self, count](register_graph_atom, const std::string& bytes,
                  const std::string& device, const std::string& session) {
      count();
      return register_graph(self, bytes, device, session);
    },
    [self, count](get_variable_atom, const std::string& container,
                  const std::string& name, int32_t type,
                  const std::string& shape_bytes, const std::string& home) {
      count();
      return get_variable(self, container, name, type, shape_bytes, home);
    },
    [self, count](get_queue_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes,
                  const std::string& home) {
      count();
      return get_queue(self, container, name, node_bytes, home);
    },
    [self, count](get_reader_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes) {
      count();
      return get_reader(self, container, name, node_bytes);
    },
    [self, count](get_accumulator_atom, const std::string& container,
                  const std::string& name, const std::string& node_bytes,
                  const std::string& home) {
      count();
      return get_accumulator(self, container, name, node_bytes, home);
    },
    [self, count](cleanup_atom, std::vector<std::string>& containers) {
      count();
      clear_containers(self, std::move(containers));
      return status{};
    },
    [self](attach_replica_atom, const std::string& home, int64_t epoch,
           const std::string& primary, bool complete) {
      // The sender first: the promise takes it over.
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      auto rp = self->make_response_promise<status>();
      on_attach(self, rp, home, epoch, primary, complete, sender);
      return rp;
    },
    [self](get_replica_atom, const std::string& home,
           const std::string& container, const std::string& name,
           int32_t type, const std::string& shape_bytes, int64_t epoch) {
      return get_replica(self, home, container, name, type, shape_bytes,
                         epoch);
    },
    [self](promote_atom, const std::string& home) {
      return promote(self, home);
    },
    [self](serving_atom, const std::string& home) {
      auto [task, epoch] = serving(self, home);
      return caf::result<std::string, int64_t>{std::move(task), epoch};
    },
    [self](replica_lost_atom, const std::string& home, bool deposed) {
      on_replica_lost(self, home, deposed,
                      caf::actor_cast<caf::actor_addr>(self->current_sender()));
    },
    [self](replica_tick_atom) { replica_tick(self); },
    [self](find_peer_atom, caf::actor& master) {
      self->state.master = std::move(master);
      replica_tick(self);
    },
  };
}

} // namespace

std::string channel_host_of(caf::actor_system& sys, const task_options& opts) {
  auto own = opts.cluster.find(task_name(opts));
  if (own == opts.cluster.end() || own->second.empty()
      || !caf::get_or(sys.config(), "actorflow.tensor-channel", true))
    return {};
  return host_of(own->second);
}

worker_actor spawn_worker(caf::actor_system& sys, task_options opts,
                          std::shared_ptr<task_counters> counters) {
  auto prefix = task_name(opts);
  return spawn_instrumented(
    sys, {monitoring::actor_kind::worker, prefix, "", prefix}, worker,
    std::move(opts), std::move(counters));
}

} // namespace actorflow
