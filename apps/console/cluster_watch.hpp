#pragma once

// actorflow-console's view of a cluster: one watcher actor per task keeps
// that task's monitor document (transport/type_ids.hpp, monitor_actor) up to
// date through a subscription, measures the round trip, and says when the
// task is down and why. The UI thread reads copies (cluster_watch::view).
// Every request has a deadline: a dead or stopped task never blocks the
// console. It connects through transport_actor: with TLS on for its actor
// system (the console's --tls_* flags) as a client with its certificate.
// What the watchers receive can be recorded (--record) and a recording
// replayed instead of a live cluster (--replay): both UIs read the same
// views. Alerts (alerts.hpp) are judged on every change.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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
#include "console/alerts.hpp"
#include "console/recording.hpp"
#include "console/task_view.hpp"
#include "console/topology.hpp"

namespace actorflow::apps {

using json = nlohmann::json;

/// Watches every task of a cluster from `sys` (which must have actorflow's
/// types: actorflow::default_system()). Thread-safe; the destructor stops
/// the watchers.
class cluster_watch {
public:
  /// Starts watching; updates every `interval`. With `record_path`, what
  /// comes is written there too (recording.hpp; throws
  /// std::runtime_error when it cannot be written).
  cluster_watch(caf::actor_system& sys, const cluster_spec& cluster,
                std::chrono::milliseconds interval, alert_rules rules = {},
                const std::string& record_path = {})
    : sys_(&sys), interval_(interval),
      cluster_(json::parse(cluster.to_json())), alerts_(rules) {
    add_views();
    if (!record_path.empty())
      recorder_ = std::make_unique<recorder>(
        record_path, json{{"actorflow_console_recording", 1},
                          {"cluster", cluster_},
                          {"interval_ms", interval_.count()},
                          {"started_us", console_now_us()}});
    monitors_.resize(views_.size());
    for (size_t i = 0; i < views_.size(); ++i)
      watchers_.push_back(sys.spawn(watcher, this, i));
  }

  /// Replays the recording at `path` (recording.hpp) at `speed` times its
  /// pace, from a thread of its own; its views stay at the end. Throws
  /// std::runtime_error naming the file when it is not a recording.
  cluster_watch(const std::string& path, double speed, alert_rules rules = {})
    : interval_(1000), alerts_(rules) {
    auto reader = std::make_shared<recording_reader>(path);
    auto& header = reader->header();
    cluster_ = header["cluster"];
    interval_ = std::chrono::milliseconds{header.value("interval_ms", 1000)};
    add_views();
    replay_.file = path;
    replay_.speed = speed;
    replay_.position_us = header.value("started_us", int64_t{0});
    replay_thread_ = std::jthread{[this, reader](std::stop_token stop) {
      run_replay(*reader, stop);
    }};
  }

  ~cluster_watch() {
    for (auto& w : watchers_)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    if (replay_thread_.joinable()) {
      replay_thread_.request_stop();
      replay_thread_.join();
    }
  }

  cluster_watch(const cluster_watch&) = delete;
  cluster_watch& operator=(const cluster_watch&) = delete;

  /// A copy of every task's view, in the cluster's order, each one's
  /// `stale` set as of now.
  std::vector<task_view> view() const {
    auto s = take_snapshot(false);
    return finish_views(std::move(s.views), s.now_us);
  }

  /// Whether a replay has shown its recording's last event (false live).
  bool replay_ended() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return replay_.ended;
  }

  /// The console's clock: now, or in a replay the recording's time.
  int64_t now() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return now_us();
  }

  /// The alerts active and lately cleared (alerts.hpp).
  json alerts_json() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return alerts_.to_json();
  }

  /// The active alerts.
  std::vector<alert> active_alerts() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return alerts_.active();
  }

  /// The alerts cleared lately, oldest first.
  std::deque<alert> recent_alerts() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return alerts_.recent();
  }

  /// Every task's history, as /api/history serves it: {"tasks": {task:
  /// {"t": [unix seconds], "series": {name: [...]}}}}.
  json history_json() const {
    json tasks = json::object();
    for (auto& v : view()) {
      auto& h = v.past->history;
      if (!h.contains("t_us"))
        continue;
      json t = json::array();
      for (auto& at : h["t_us"])
        t.push_back(at.get<double>() / 1e6);
      tasks[v.task] = {{"t", std::move(t)},
                       {"series", h.value("series", json::object())}};
    }
    return {{"tasks", std::move(tasks)}};
  }

  /// Task `task`'s log lines after seq `after`: {"task", "lines": [...]}.
  /// NotFound for a task not in the cluster.
  status logs_json(const std::string& task, uint64_t after, json& out) const {
    for (auto& v : view())
      if (v.task == task) {
        json lines = json::array();
        for (auto& l : v.past->logs)
          if (l.value("seq", uint64_t{0}) > after)
            lines.push_back(l);
        out = {{"task", task}, {"lines", std::move(lines)}};
        return {};
      }
    return {error_code::not_found, "no task " + task + " in the cluster"};
  }

  /// The recent figures of actor `id` of task `task`: {"t": [unix
  /// seconds], "messages_per_s", "mailbox", "busy_percent"}. NotFound
  /// when the task or the actor is not known.
  status actor_history_json(const std::string& task, uint64_t id,
                            json& out) const {
    for (auto& v : view()) {
      if (v.task != task)
        continue;
      auto i = v.past->actor_history.find(id);
      if (i == v.past->actor_history.end())
        break;
      auto& s = i->second;
      auto list = [](const std::deque<double>& xs) {
        json out = json::array();
        for (auto x : xs)
          out.push_back(std::isfinite(x) ? json(x) : json(nullptr));
        return out;
      };
      json t = json::array();
      for (auto at : s.t_us)
        t.push_back(static_cast<double>(at) / 1e6);
      out = {{"t", std::move(t)},
             {"messages_per_s", list(s.messages_per_s)},
             {"mailbox", list(s.mailbox)},
             {"busy_percent", list(s.busy_percent)}};
      return {};
    }
    return {error_code::not_found,
            "no actor " + std::to_string(id) + " on " + task};
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
    // One snapshot: the clock, the views and the alerts agree (a task is
    // not "healthy" beside an alert raised after its view was copied).
    auto s = take_snapshot(true);
    auto views = finish_views(std::move(s.views), s.now_us);
    json tasks = json::array();
    for (auto& v : views) {
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
    json doc{{"now_us", s.now_us},
             {"cluster", cluster_},
             {"tasks", std::move(tasks)},
             {"alerts", std::move(s.alerts)},
             {"healthy", apps::healthy(views, s.active)},
             {"topology", apps::to_json(topology(views))}};
    if (s.replay)
      doc["replay"] = std::move(*s.replay);
    return doc;
  }

private:
  /// What the console shows, copied under one lock.
  struct snapshot {
    std::vector<task_view> views;
    int64_t now_us = 0;
    json alerts;
    std::vector<alert> active;
    std::optional<json> replay;
  };

  snapshot take_snapshot(bool with_alerts) const {
    snapshot s;
    std::lock_guard<std::mutex> guard{mtx_};
    s.views = views_;
    s.now_us = now_us();
    if (with_alerts) {
      s.alerts = alerts_.to_json();
      s.active = alerts_.active();
      if (!replay_.file.empty())
        s.replay = json{{"file", replay_.file},
                        {"position_us", replay_.position_us},
                        {"speed", replay_.speed},
                        {"ended", replay_.ended}};
    }
    return s;
  }

  /// The copied views with `stale` set as of `now`, links named and
  /// orphans marked.
  std::vector<task_view> finish_views(std::vector<task_view> tasks,
                                      int64_t now) const {
    for (auto& v : tasks)
      v.stale = v.state == "up" && v.updated_us > 0
                && now - v.updated_us > 2 * interval_.count() * 1000;
    name_links(tasks);
    mark_orphans(tasks);
    return tasks;
  }

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
    if (sys_ == nullptr) {
      err = {error_code::unavailable,
             "a replay has no live tasks to ask (" + task + ")"};
      return;
    }
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
    caf::scoped_actor self{*sys_};
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

  // -- what a watcher (or a replay) saw -----------------------------------------

  // The views of the cluster's tasks, in its order.
  void add_views() {
    auto cluster = cluster_spec::from_json(cluster_.dump());
    for (auto& job : cluster.jobs())
      for (auto index : cluster.task_indices(job)) {
        task_view v;
        v.task = task_name(job, index);
        v.address = cluster.task_address(job, index);
        v.since_us = console_now_us();
        views_.push_back(v);
      }
  }

  // The console's clock, under mtx_.
  int64_t now_us() const {
    return sys_ != nullptr ? console_now_us() : replay_.position_us;
  }

  static void apply_state(task_view& v, const std::string& state,
                          const std::string& error, int64_t at_us) {
    if (v.state != state) {
      v.since_us = at_us;
      v.error = error;
      v.last_error.clear();
    } else if (error != v.error) {
      // Still down: the first reason stays, the latest is beside it.
      v.last_error = error;
    }
    v.state = state;
  }

  // Applies one event (a recording's line) to task `i` at `at_us`, under
  // mtx_, and judges the alerts.
  void apply(size_t i, const json& event, int64_t at_us) {
    auto& v = views_[i];
    if (auto u = event.find("update"); u != event.end()) {
      merge_update(v, *u);
      v.updated_us = at_us;
    } else if (auto st = event.find("state"); st != event.end()) {
      apply_state(v, st->get<std::string>(), event.value("error", ""),
                  at_us);
    } else if (event.contains("subscribed")) {
      // Its first update starts the rates over.
      v.rebase = true;
      apply_state(v, "up", "", at_us);
    } else if (auto r = event.find("rtt_us"); r != event.end()) {
      v.rtt_us = r->get<double>();
      return;
    }
    alerts_.evaluate(views_, at_us);
  }

  // A live event of task `i`: recorded when recording, then applied.
  void on_event(size_t i, json event) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto at = console_now_us();
    if (recorder_) {
      event["at_us"] = at;
      event["task"] = i;
      recorder_->write(event);
    }
    apply(i, event, at);
  }

  void set_state(size_t i, const std::string& state,
                 const std::string& error) {
    on_event(i, {{"state", state}, {"error", error}});
  }

  // Plays a recording: each event when its time comes (scaled by the
  // speed), the clock moving between them.
  void run_replay(recording_reader& reader, std::stop_token stop) {
    json event;
    int64_t first = -1;
    auto start = std::chrono::steady_clock::now();
    while (!stop.stop_requested() && reader.next(event)) {
      auto at = event["at_us"].get<int64_t>();
      auto i = event["task"].get<size_t>();
      if (first < 0)
        first = at;
      for (;;) {
        auto elapsed = std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count()
                       * replay_.speed;
        auto clock = first + static_cast<int64_t>(elapsed);
        {
          std::lock_guard<std::mutex> guard{mtx_};
          replay_.position_us = std::min(clock, at);
        }
        if (clock >= at || stop.stop_requested())
          break;
        auto wait = (at - clock) / replay_.speed;
        std::this_thread::sleep_for(std::chrono::microseconds(
          std::clamp<int64_t>(static_cast<int64_t>(wait), 1, 50000)));
      }
      std::lock_guard<std::mutex> guard{mtx_};
      replay_.position_us = at;
      if (i < views_.size())
        apply(i, event, at);
    }
    std::lock_guard<std::mutex> guard{mtx_};
    replay_.ended = true;
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
            w->on_event(i, {{"rtt_us", rtt}});
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
                          w->on_event(i, {{"subscribed", true}});
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
        self->state.last_update_us = console_now_us();
        w->on_event(i, {{"update", std::move(update)}});
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

  /// Null in a replay.
  caf::actor_system* sys_ = nullptr;
  std::chrono::milliseconds interval_;
  json cluster_;
  alert_book alerts_;
  std::unique_ptr<recorder> recorder_;
  struct {
    std::string file;
    double speed = 1;
    int64_t position_us = 0;
    bool ended = false;
  } replay_;
  std::jthread replay_thread_;
  /// Each task's monitor while it is up (request_trace, last_trace).
  std::vector<caf::actor> monitors_;
  mutable std::mutex mtx_;
  std::vector<task_view> views_;
  std::vector<caf::actor> watchers_;
};

} // namespace actorflow::apps
