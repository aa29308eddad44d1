#pragma once

// actorflow-console's view of a cluster: one watcher actor per task keeps
// that task's monitor document (transport/type_ids.hpp, monitor_actor) up to
// date through a subscription, measures the round trip, and says when the
// task is down and why. The UI thread reads copies (cluster_watch::view).
// Every request has a deadline: a dead or stopped task never blocks the
// console. It connects through transport_actor: with TLS on for its actor
// system (the console's --tls_* flags) as a client with its certificate.

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <nlohmann/json.hpp>

#include "actorflow/actors/monitoring.hpp"
#include "actorflow/graph/device_name.hpp"
#include "actorflow/transport/host_port.hpp"
#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/client/cluster_spec.hpp"

namespace actorflow::apps {

using json = nlohmann::json;

/// What the console knows of one task.
struct task_view {
  std::string task;    ///< "/job:ps/replica:0/task:0"
  std::string address; ///< "host:port"
  /// "connecting" (never reached yet), "up" or "down".
  std::string state = "connecting";
  int64_t since_us = 0; ///< when it entered that state
  double rtt_us = -1;   ///< the last ping's round trip
  /// Why it went down: the first reason, kept while it stays down.
  std::string error;
  /// The latest reason it is still down (a reconnect's failure), when
  /// that differs from `error`.
  std::string last_error;
  /// The task's monitor document, deltas merged in; each actor also gets
  /// "messages_per_s" and "busy_percent" from the last two updates.
  json node;
  bool has_node = false;
  int64_t updates = 0;
  /// Updates from the current process and subscription (rates need two).
  int64_t samples = 0;
  /// The process that sent `node` (incarnation_of), and how often the
  /// task came back as another one (a restart).
  std::string incarnation;
  int64_t restarts = 0;
  /// Set by a new subscription: its first update starts the rates over.
  bool rebase = false;
  /// When the last update came (console clock), and whether that is
  /// longer ago than two intervals while the task still counts as up (a
  /// stopped process: its values are not live any more).
  int64_t updated_us = 0;
  bool stale = false;
};

inline int64_t console_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// A counter's rate between two samples `dt` seconds apart. A counter
/// that went backwards was reset (a new process, or a new actor under a
/// reused id) and counts from zero, as Prometheus takes a reset; no rate
/// without time between the samples.
inline std::optional<double> counter_rate(double before, double after,
                                          double dt) {
  if (dt <= 0)
    return std::nullopt;
  return (after >= before ? after - before : after) / dt;
}

/// Which process sent a monitor document: its pid and start time. A task
/// restarted on its address is another incarnation, whose counters start
/// over.
inline std::string incarnation_of(const json& doc) {
  if (!doc.contains("process") || !doc["process"].is_object())
    return {};
  auto& p = doc["process"];
  return std::to_string(p.value("pid", int64_t{0})) + "@"
         + std::to_string(p.value("started_us", int64_t{0}));
}

/// Merges one monitor update into `v` (a whole document or a delta). Each
/// actor gets the rates of what only grows since the last update:
/// "messages_per_s", "busy_percent", and a variable's "updates_per_s";
/// the steps "per_s", each channel link "bytes_per_s". An update from a
/// new incarnation of the task (restarted) or the first one of a new
/// subscription (`v.rebase`) starts the rates over: they are left out
/// until the next update, never taken against the old process's counters.
inline void merge_update(task_view& v, json update) {
  auto now = update.value("now_us", int64_t{0});
  auto incarnation = incarnation_of(update);
  bool restarted = v.has_node && !incarnation.empty()
                   && !v.incarnation.empty() && v.incarnation != incarnation;
  bool same_process = v.has_node && !v.rebase && !restarted;
  if (restarted)
    ++v.restarts;
  if (!incarnation.empty())
    v.incarnation = incarnation;
  if (!same_process)
    v.samples = 0;
  v.rebase = false;
  std::map<uint64_t, json> previous;
  if (v.has_node)
    for (auto& a : v.node["actors"])
      previous[a["id"].get<uint64_t>()] = a;
  auto last_now = v.has_node ? v.node.value("now_us", int64_t{0}) : 0;
  double dt = same_process && last_now > 0 && now > last_now
                ? static_cast<double>(now - last_now) / 1e6
                : 0;
  std::map<uint64_t, json> actors;
  bool delta = update.value("delta", false) && same_process;
  if (delta) {
    // Unchanged actors are not sent: they handled nothing since.
    actors = previous;
    for (auto& [id, a] : actors) {
      a["messages_per_s"] = 0.0;
      a["busy_percent"] = 0.0;
      a["updates_per_s"] = 0.0;
    }
    for (auto& id : update.value("removed", json::array()))
      actors.erase(id.get<uint64_t>());
  }
  auto number = [](const json& j, const char* key) {
    auto i = j.find(key);
    return i != j.end() && i->is_number() ? i->get<double>() : 0.0;
  };
  for (auto& a : update["actors"]) {
    auto id = a["id"].get<uint64_t>();
    a.erase("messages_per_s");
    a.erase("busy_percent");
    a.erase("updates_per_s");
    // The same actor: the same id and the same start (ids are reused by
    // a restarted process, and by CAF within one).
    if (auto p = previous.find(id);
        p != previous.end() && dt > 0
        && p->second.value("since_us", int64_t{0})
             == a.value("since_us", int64_t{0})) {
      auto& before = p->second;
      auto gauges = a.value("gauges", json::object());
      auto old_gauges = before.value("gauges", json::object());
      if (auto r = counter_rate(number(before, "messages"),
                                number(a, "messages"), dt))
        a["messages_per_s"] = *r;
      if (auto r = counter_rate(number(before, "busy_us"),
                                number(a, "busy_us"), dt))
        a["busy_percent"] = *r / 1e4;
      if (auto r = counter_rate(number(old_gauges, "updates"),
                                number(gauges, "updates"), dt))
        a["updates_per_s"] = *r;
    }
    actors[id] = std::move(a);
  }
  // Rates of what only grows: steps and the channel's bytes.
  if (dt > 0) {
    if (update.contains("steps") && update["steps"].is_object())
      if (auto r = counter_rate(number(v.node.value("steps", json::object()),
                                       "total"),
                                number(update["steps"], "total"), dt))
        update["steps"]["per_s"] = *r;
    std::map<std::string, double> old_bytes;
    for (auto& l : v.node.value("channel", json::array()))
      old_bytes[l.value("peer", "") + l.value("direction", "")]
        = number(l, "bytes");
    for (auto& l : update["channel"]) {
      auto o = old_bytes.find(l.value("peer", "") + l.value("direction", ""));
      if (o != old_bytes.end())
        if (auto r = counter_rate(o->second, number(l, "bytes"), dt))
          l["bytes_per_s"] = *r;
    }
  }
  json list = json::array();
  for (auto& [id, a] : actors)
    list.push_back(std::move(a));
  update["actors"] = std::move(list);
  update.erase("removed");
  update["delta"] = false;
  v.node = std::move(update);
  v.has_node = true;
  ++v.updates;
  ++v.samples;
}

/// Watches every task of a cluster from `sys` (which must have actorflow's
/// types: actorflow::default_system()). Thread-safe; the destructor stops
/// the watchers.
class cluster_watch {
public:
  /// Starts watching; updates every `interval`.
  cluster_watch(caf::actor_system& sys, const cluster_spec& cluster,
                std::chrono::milliseconds interval)
    : sys_(sys), interval_(interval),
      cluster_(json::parse(cluster.to_json())) {
    for (auto& job : cluster.jobs())
      for (auto index : cluster.task_indices(job)) {
        task_view v;
        v.task = task_name(job, index);
        v.address = cluster.task_address(job, index);
        v.since_us = console_now_us();
        views_.push_back(v);
      }
    monitors_.resize(views_.size());
    for (size_t i = 0; i < views_.size(); ++i)
      watchers_.push_back(sys.spawn(watcher, this, i));
  }

  ~cluster_watch() {
    for (auto& w : watchers_)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  }

  cluster_watch(const cluster_watch&) = delete;
  cluster_watch& operator=(const cluster_watch&) = delete;

  /// A copy of every task's view, in the cluster's order, each one's
  /// `stale` set as of now.
  std::vector<task_view> view() const {
    std::vector<task_view> tasks;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      tasks = views_;
    }
    auto now = console_now_us();
    for (auto& v : tasks)
      v.stale = v.state == "up" && v.updated_us > 0
                && now - v.updated_us > 2 * interval_.count() * 1000;
    return tasks;
  }

  /// Asks task `task`'s master to trace its next step for the console
  /// (monitor_actor's mon_trace). Unavailable when the task is not up;
  /// NotFound for a task not in the cluster. Blocks up to 2 s.
  status request_trace(const std::string& task) {
    status result;
    ask(task, monitor_trace_atom_v, [&](status& st) { result = st; },
        result);
    return result;
  }

  /// The last step task `task` traced for the console: (when, in us since
  /// the epoch, 0 for never; its Chrome trace-event JSON). Errors as for
  /// request_trace.
  status last_trace(const std::string& task, int64_t& at_us,
                    std::string& chrome_json) {
    status result;
    ask(task, monitor_get_trace_atom_v,
        [&](int64_t at, std::string& text) {
          at_us = at;
          chrome_json = std::move(text);
        },
        result);
    return result;
  }

  /// True once every task is down, or up with `min_samples` documents of
  /// its current process (two give every rate) and a round trip.
  bool settled(int64_t min_samples = 1) const {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& v : views_)
      if (v.state == "connecting"
          || (v.state == "up"
              && (!v.has_node || v.samples < min_samples || v.rtt_us < 0)))
        return false;
    return true;
  }

  /// The whole cluster as one JSON document (--json): the cluster spec and
  /// every task, with its monitor document ("node") while it is up, and
  /// the last one it sent ("last_node") once it is not.
  json to_json() const {
    json tasks = json::array();
    for (auto& v : view()) {
      json t{{"task", v.task},         {"address", v.address},
             {"state", v.state},       {"since_us", v.since_us},
             {"rtt_us", v.rtt_us},     {"error", v.error},
             {"updates", v.updates},   {"restarts", v.restarts},
             {"incarnation", v.incarnation},
             {"updated_us", v.updated_us},
             {"stale", v.stale}};
      if (!v.last_error.empty())
        t["last_error"] = v.last_error;
      // A task that is not up has no current document.
      if (v.has_node && v.state == "up") {
        t["node"] = v.node;
        // The upper bounds of the step histogram's buckets (the last
        // bucket, beyond them, has none).
        if (t["node"].contains("steps") && t["node"]["steps"].is_object())
          t["node"]["steps"]["bucket_bounds_us"]
            = monitoring::step_record::bucket_bounds_us;
      } else if (v.has_node) {
        // Its last-known values (a finished trainer's accuracy, say),
        // shown as such.
        t["last_node"] = v.node;
      }
      tasks.push_back(std::move(t));
    }
    return json{{"now_us", console_now_us()},
                {"cluster", cluster_},
                {"tasks", std::move(tasks)}};
  }

private:
  using try_atom = caf::atom_constant<caf::atom("con_try")>;
  using tick_atom = caf::atom_constant<caf::atom("con_tick")>;

  struct watcher_state {
    // Not an aggregate: CAF 0.17 constructs a state from the actor's
    // pointer when it can, and C++20 would let that initialize `monitor`.
    watcher_state() = default;
    caf::actor monitor;
    int64_t last_update_us = 0;
    uint64_t generation = 0; ///< of the current connection
    static inline const char* name = "actorflow.console.watcher";
  };

  // Sends `what` to task `task`'s monitor and hands the answer to `f`;
  // `err` says why there was none.
  template <class Atom, class F>
  void ask(const std::string& task, Atom what, F f, status& err) {
    caf::actor mon;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = std::find_if(views_.begin(), views_.end(),
                            [&](const task_view& v) { return v.task == task; });
      if (i == views_.end()) {
        err = {error_code::not_found, "no task " + task + " in the cluster"};
        return;
      }
      mon = monitors_[static_cast<size_t>(i - views_.begin())];
      if (!mon) {
        err = {error_code::unavailable, task + " is not up"};
        return;
      }
    }
    caf::scoped_actor self{sys_};
    self->request(caf::actor_cast<monitor_actor>(mon),
                  std::chrono::seconds(2), what)
      .receive(f, [&](caf::error& e) { err = to_status(e, task); });
  }

  template <class F>
  void with_view(size_t i, F f) {
    std::lock_guard<std::mutex> guard{mtx_};
    f(views_[i]);
  }

  void set_monitor(size_t i, caf::actor mon) {
    std::lock_guard<std::mutex> guard{mtx_};
    monitors_[i] = std::move(mon);
  }

  void set_state(size_t i, const std::string& state,
                 const std::string& error) {
    with_view(i, [&](task_view& v) {
      if (v.state != state) {
        v.since_us = console_now_us();
        v.error = error;
        v.last_error.clear();
      } else if (error != v.error) {
        // Still down: the first reason stays, the latest is beside it.
        v.last_error = error;
      }
      v.state = state;
    });
  }

  static caf::behavior
  watcher(caf::stateful_actor<watcher_state>* self, cluster_watch* w,
          size_t i) {
    std::string address;
    w->with_view(i, [&](task_view& v) { address = v.address; });
    // A malformed address shows the task down, naming why.
    host_port hp;
    auto parsed = host_port::parse(address, hp);
    auto host = hp.host;
    auto port = hp.port;
    auto deadline = std::chrono::seconds(2);
    // Ends connection `gen` (an older attempt's failure is ignored) and
    // tries again in a second.
    auto down = [self, w, i](const std::string& why, uint64_t gen) {
      auto& st = self->state;
      if (gen != st.generation)
        return;
      if (st.monitor)
        self->demonitor(st.monitor);
      st.monitor = nullptr;
      w->set_monitor(i, nullptr);
      ++st.generation;
      w->set_state(i, "down", why);
      self->delayed_send(self, std::chrono::seconds(1), try_atom::value);
    };
    // Measures the round trip to the connected monitor (deadline: the
    // silence check in the tick decides whether the task is down).
    auto ping = [self, w, i, deadline] {
      auto& st = self->state;
      auto sent = std::chrono::steady_clock::now();
      auto gen = st.generation;
      self
        ->request(caf::actor_cast<monitor_actor>(st.monitor), deadline,
                  monitor_ping_atom_v)
        .then(
          [=](int64_t) {
            if (self->state.generation != gen)
              return;
            auto rtt = std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - sent)
                         .count();
            w->with_view(i, [&](task_view& v) { v.rtt_us = rtt; });
          },
          [](caf::error&) {
            // nop
          });
    };
    self->set_down_handler([self, down](caf::down_msg& dm) {
      if (dm.source == self->state.monitor.address())
        down("lost: " + caf::to_string(dm.reason), self->state.generation);
    });
    self->send(self, try_atom::value);
    self->send(self, tick_atom::value);
    return {
      [=](try_atom) {
        auto gen = ++self->state.generation;
        if (!parsed.ok())
          return down(parsed.message(), gen);
        // TLS when the system has it (CAF's own middleman would connect
        // in plain TCP, which a TLS cluster refuses).
        auto mm = transport_actor(self->home_system());
        self->request(mm, deadline, caf::connect_atom::value, host, port)
          .then(
            [=](const caf::node_id&, caf::strong_actor_ptr& ptr,
                const std::set<std::string>&) {
              auto task = caf::actor_cast<master_actor>(ptr);
              if (!task)
                return down("no actor published at " + address, gen);
              self->request(task, deadline, get_monitor_atom_v)
                .then(
                  [=](const monitor_actor& mon) {
                    auto handle = caf::actor_cast<caf::actor>(mon);
                    self->request(mon, deadline, monitor_subscribe_atom_v,
                                  int64_t{w->interval_.count()},
                                  caf::actor_cast<caf::actor>(self))
                      .then(
                        [=](const status& st) {
                          if (!st.ok())
                            return down(st.to_string(), gen);
                          if (self->state.generation != gen)
                            return;
                          self->state.monitor = handle;
                          w->set_monitor(i, handle);
                          self->state.last_update_us = console_now_us();
                          self->monitor(handle);
                          w->with_view(i, [](task_view& v) {
                            v.rebase = true;
                          });
                          w->set_state(i, "up", "");
                          ping();
                        },
                        [=](caf::error& err) {
                          down("subscribe: " + to_status(err).message(),
                               gen);
                        });
                  },
                  [=](caf::error& err) {
                    down("monitor: " + to_status(err).message(), gen);
                  });
            },
            [=](caf::error& err) {
              // A TLS refusal's CAF error only says the connection closed.
              auto& sys = self->home_system();
              auto why = last_tls_failure(sys, host, port);
              if (why.empty() && !tls_enabled(sys)
                  && err == caf::sec::disconnect_during_handshake)
                why = "a TLS cluster? give the console --tls_cert, --tls_key "
                      "and --tls_ca";
              down("cannot connect to " + address + ": " + sys.render(err)
                     + (why.empty() ? "" : " (" + why + ")"),
                   gen);
            });
      },
      [=](monitor_update_atom, std::string& text) {
        if (self->current_sender() != self->state.monitor)
          return;
        json update;
        try {
          update = json::parse(text);
        } catch (const json::exception&) {
          return;
        }
        auto now = console_now_us();
        self->state.last_update_us = now;
        w->with_view(i, [&](task_view& v) {
          merge_update(v, std::move(update));
          v.updated_us = now;
        });
      },
      [=](tick_atom) {
        self->delayed_send(self, w->interval_, tick_atom::value);
        auto& st = self->state;
        if (!st.monitor)
          return;
        // A stopped process (SIGSTOP, a cut link) keeps its connection
        // but sends nothing: three intervals of silence mean down.
        auto silence = console_now_us() - st.last_update_us;
        if (silence > 3 * w->interval_.count() * 1000 + 500000)
          return down("no update for "
                        + std::to_string(silence / 1000000.0).substr(0, 4)
                        + " s",
                      st.generation);
        ping();
      },
    };
  }

  caf::actor_system& sys_;
  std::chrono::milliseconds interval_;
  json cluster_;
  /// Each task's monitor while it is up (request_trace, last_trace).
  std::vector<caf::actor> monitors_;
  mutable std::mutex mtx_;
  std::vector<task_view> views_;
  std::vector<caf::actor> watchers_;
};

} // namespace actorflow::apps
