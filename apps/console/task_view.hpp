#pragma once

// What actorflow-console knows of one task, and how a monitor update
// (monitor_actor's document, whole or a delta) is merged into it: the
// task's state, its document with the rates of what only grows, its
// history and recent log lines, each actor's recent figures. CAF-free:
// the watcher (cluster_watch.hpp) and a replay (recording.hpp) feed it.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace actorflow::apps {

using json = nlohmann::json;

/// The recent figures of one actor, for its charts in the detail views.
struct actor_series {
  int64_t since_us = 0; ///< the actor's start (ids are reused)
  std::deque<int64_t> t_us;
  std::deque<double> messages_per_s;
  std::deque<double> mailbox;
  std::deque<double> busy_percent;
};

inline constexpr size_t max_history_points = 4000;
inline constexpr size_t max_log_lines = 2000;
inline constexpr size_t max_actor_points = 300;

/// What the console keeps of a task's past.
struct task_past {
  /// The task's history (monitor_history on the task): {"t_us": [...],
  /// "series": {name: [...]}}, all of it from the subscription's first
  /// update, then each update's new samples; at most max_history_points.
  json history = json::object();
  /// Its recent log lines ({seq, at_us, level, text}), oldest first, at
  /// most max_log_lines.
  std::deque<json> logs;
  /// Per actor (by id): its recent messages/s, mailbox and busy %, one
  /// point per update, at most max_actor_points.
  std::map<uint64_t, actor_series> actor_history;
};

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
  /// Its history, log lines and actors' series: shared by the copies the
  /// UIs take (cluster_watch::view), copied when changed while shared.
  std::shared_ptr<task_past> past = std::make_shared<task_past>();
};

/// `v`'s past, to change: its own copy when a reader still has the one
/// it holds. Call with the lock that guards `v`.
inline task_past& mutable_past(task_view& v) {
  if (v.past.use_count() > 1)
    v.past = std::make_shared<task_past>(*v.past);
  return *v.past;
}

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

/// Takes an update's history ("history": all of it, "history_tail": new
/// samples) and log lines ("logs") out of it into `v`, bounded.
inline void merge_history(task_view& v, json& update) {
  if (!update.contains("history") && !update.contains("history_tail")
      && !update.contains("logs"))
    return;
  auto& past = mutable_past(v);
  if (auto h = update.find("history"); h != update.end()) {
    past.history = std::move(*h);
    update.erase(h);
  } else if (auto t = update.find("history_tail"); t != update.end()) {
    auto& tail = *t;
    if (!past.history.contains("t_us"))
      past.history = {{"t_us", json::array()}, {"series", json::object()}};
    auto& times = past.history["t_us"];
    auto& series = past.history["series"];
    auto before = times.size();
    auto tail_times = tail.value("t_us", json::array());
    for (auto& at : tail_times)
      times.push_back(at);
    auto added = times.size() - before;
    // A series new in the tail has no values before it.
    if (!tail.contains("series") || !tail["series"].is_object())
      tail["series"] = json::object();
    for (auto& [name, values] : tail["series"].items())
      if (!series.contains(name))
        series[name] = json(std::vector<json>(before, nullptr));
    for (auto& [name, values] : series.items()) {
      auto in_tail = tail["series"].find(name);
      for (size_t k = 0; k < added; ++k)
        values.push_back(in_tail != tail["series"].end()
                             && k < in_tail->size()
                           ? (*in_tail)[k]
                           : json(nullptr));
    }
    if (times.size() > max_history_points) {
      auto drop = static_cast<std::ptrdiff_t>(times.size()
                                              - max_history_points);
      times.erase(times.begin(), times.begin() + drop);
      for (auto& [name, values] : series.items())
        values.erase(values.begin(),
                     values.begin()
                       + std::min<std::ptrdiff_t>(
                         drop, static_cast<std::ptrdiff_t>(values.size())));
    }
    update.erase(t);
  }
  if (auto l = update.find("logs"); l != update.end()) {
    // A new subscription to the same process sends its recent lines
    // again; a new process counts its lines from 1.
    bool same_process = v.has_node && incarnation_of(update) == v.incarnation;
    auto& logs = past.logs;
    auto last = logs.empty() ? 0 : logs.back().value("seq", uint64_t{0});
    for (auto& line : *l)
      if (!same_process || line.value("seq", uint64_t{0}) > last)
        logs.push_back(std::move(line));
    while (logs.size() > max_log_lines)
      logs.pop_front();
    update.erase(l);
  }
}

/// Adds actor `a`'s figures of this update (at `now_us`) to its series.
inline void note_actor(task_past& past, int64_t now_us, const json& a) {
  auto id = a["id"].get<uint64_t>();
  auto since = a.value("since_us", int64_t{0});
  auto& s = past.actor_history[id];
  if (s.since_us != since)
    s = actor_series{since, {}, {}, {}, {}};
  auto value = [&](const char* key) {
    auto i = a.find(key);
    return i != a.end() && i->is_number()
             ? i->get<double>()
             : std::numeric_limits<double>::quiet_NaN();
  };
  s.t_us.push_back(now_us);
  s.messages_per_s.push_back(value("messages_per_s"));
  s.mailbox.push_back(value("mailbox"));
  s.busy_percent.push_back(value("busy_percent"));
  if (s.t_us.size() > max_actor_points) {
    s.t_us.pop_front();
    s.messages_per_s.pop_front();
    s.mailbox.pop_front();
    s.busy_percent.pop_front();
  }
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
  merge_history(v, update);
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
  auto& past = mutable_past(v);
  for (auto& [id, a] : actors) {
    note_actor(past, now, a);
    list.push_back(std::move(a));
  }
  std::erase_if(past.actor_history,
                [&](auto& e) { return !actors.count(e.first); });
  update["actors"] = std::move(list);
  update.erase("removed");
  update["delta"] = false;
  v.node = std::move(update);
  v.has_node = true;
  ++v.updates;
  ++v.samples;
}

} // namespace actorflow::apps
