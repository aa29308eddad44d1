// A task's monitor actor: snapshots of this process's monitoring registry
// (actorflow/actors/monitoring.hpp) as JSON, and subscriptions that push
// them at an interval. Read-only by construction: it reads the registry
// and never sends anything to another actor of the task.

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "actorflow/actors/monitoring.hpp"
#include "actorflow/graph/device_name.hpp"
#include "instrumented.hpp"
#include "runtime.hpp"
#include "tensor_channel.hpp"

namespace actorflow {

namespace {

using json = nlohmann::json;
using namespace monitoring;

// "/job:ps/replica:0/task:0" -> address, as {"ps": [addresses by index]}.
json job_map(const std::map<std::string, std::string>& cluster) {
  json jobs = json::object();
  for (auto& [task, address] : cluster) {
    device_name d;
    if (!device_name::parse(task, d).ok() || !d.job || !d.task
        || *d.task < 0)
      continue;
    auto& list = jobs[*d.job];
    if (list.is_null())
      list = json::array();
    while (list.size() <= static_cast<size_t>(*d.task))
      list.push_back("");
    list[static_cast<size_t>(*d.task)] = address;
  }
  return jobs;
}

json actor_json(const actor_record& rec, const actor_record::sample& s) {
  json a{{"id", rec.id},
         {"kind", to_string(rec.who.kind)},
         {"name", rec.who.name},
         {"container", rec.who.container},
         {"task", rec.who.task},
         {"since_us", rec.started_us},
         {"messages", s.messages},
         {"busy_us", s.busy_ns / 1000},
         {"busy_max_us", s.busy_max_ns / 1000},
         {"mailbox", s.mailbox},
         {"mailbox_max", s.mailbox_max}};
  auto& names = actor_record::gauge_names(rec.who.kind);
  json gauges = json::object();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i][0] != '\0')
      gauges[names[i]] = rec.gauges[i].load(std::memory_order_relaxed);
  a["gauges"] = std::move(gauges);
  a["detail"] = rec.detail();
  return a;
}

// An actor belongs to a task's view when it serves that task, or no task
// in particular (spawned without one).
bool in_view(const std::string& owner, const std::string& task) {
  return owner.empty() || owner == task;
}

// What a subscriber was sent last: per actor, the figures that change.
struct sent_figures {
  uint64_t messages = 0;
  uint32_t mailbox = 0;
  uint32_t mailbox_max = 0;
  std::array<int64_t, 4> gauges{};
  bool operator==(const sent_figures&) const = default;
};
using sent_map = std::unordered_map<uint64_t, sent_figures>;

sent_figures figures_of(const actor_record& rec,
                        const actor_record::sample& s) {
  sent_figures f{s.messages, s.mailbox, s.mailbox_max, {}};
  for (size_t i = 0; i < f.gauges.size(); ++i)
    f.gauges[i] = rec.gauges[i].load(std::memory_order_relaxed);
  return f;
}

/// The task's document; with `sent`, only the actors whose figures differ
/// from what it holds (then updated) and those that went.
json snapshot(const monitor_options& opts, sent_map* sent) {
  auto& reg = registry::instance();
  auto now_ns = steady_ns();
  bool delta = sent != nullptr && !sent->empty();
  json doc{{"task", opts.task},
           {"address", opts.address},
           {"cluster", job_map(opts.cluster)},
           {"now_us", wall_us()},
           {"delta", delta}};
  auto p = read_process_stats();
  doc["process"] = {{"pid", p.pid},
                    {"rss_bytes", p.rss_bytes},
                    {"cpu_seconds", p.cpu_seconds},
                    {"threads", p.threads},
                    {"open_fds", p.open_fds},
                    {"started_us", p.started_us}};
  json actors = json::array();
  sent_map now_sent;
  for (auto& rec : reg.live()) {
    if (!in_view(rec->who.task, opts.task))
      continue;
    auto s = rec->read(now_ns);
    if (sent != nullptr) {
      auto f = figures_of(*rec, s);
      auto i = sent->find(rec->id);
      bool same = delta && i != sent->end() && i->second == f;
      now_sent[rec->id] = f;
      if (same)
        continue;
    }
    actors.push_back(actor_json(*rec, s));
  }
  doc["actors"] = std::move(actors);
  if (sent != nullptr) {
    json removed = json::array();
    for (auto& [id, f] : *sent)
      if (!now_sent.count(id))
        removed.push_back(id);
    if (delta)
      doc["removed"] = std::move(removed);
    *sent = std::move(now_sent);
  }
  json ended = json::array();
  for (auto& e : reg.ended())
    if (in_view(e.who.task, opts.task))
      ended.push_back({{"id", e.id},
                       {"kind", to_string(e.who.kind)},
                       {"name", e.who.name},
                       {"container", e.who.container},
                       {"since_us", e.started_us},
                       {"ended_us", e.ended_us},
                       {"messages", e.messages},
                       {"reason", e.reason}});
  doc["ended"] = std::move(ended);
  auto steps = reg.steps(opts.task)->read();
  json by_code = json::object();
  for (auto& [code, n] : steps.by_code)
    by_code[std::string{to_string(static_cast<error_code>(code))}] = n;
  json errors = json::array();
  for (auto& e : steps.last_errors)
    errors.push_back(
      {{"at_us", e.at_us},
       {"code", std::string{to_string(static_cast<error_code>(e.code))}},
       {"message", e.message}});
  doc["steps"] = {{"total", steps.total},     {"errors", steps.errors},
                  {"by_code", by_code},       {"p50_us", steps.p50_us},
                  {"p99_us", steps.p99_us},   {"last_us", steps.last_us},
                  {"last_errors", errors}};
  json peers = json::array();
  for (auto& e : reg.peers(opts.task))
    peers.push_back({{"peer", e.peer},
                     {"address", e.address},
                     {"up", e.up},
                     {"since_us", e.since_us},
                     {"reason", e.reason}});
  doc["peers"] = std::move(peers);
  json links = json::array();
  for (auto& l : tensor_channel::link_stats())
    links.push_back({{"peer", l.peer},
                     {"direction", l.outgoing ? "out" : "in"},
                     {"up", l.up},
                     {"bytes", l.bytes},
                     {"frames", l.frames},
                     {"since_us", l.since_us}});
  doc["channel"] = std::move(links);
  json training = json::array();
  for (auto& t : reg.training())
    training.push_back({{"task", t.task},
                        {"global_step", t.global_step},
                        {"local_step", t.local_step},
                        {"loss", t.loss},
                        {"examples_per_sec", t.examples_per_sec},
                        {"accuracy", t.accuracy},
                        {"updated_us", t.updated_us}});
  doc["training"] = std::move(training);
  return doc;
}

struct subscriber {
  caf::actor handle;
  std::chrono::milliseconds interval{1000};
  /// When the next tick is due: a tick that comes early (not this actor's
  /// own timer) is ignored, so that no one can start a second timer.
  caf::actor_clock::time_point due;
  sent_map sent;
};

struct monitor_state {
  monitor_options opts;
  std::unordered_map<uint64_t, subscriber> subscribers;
  uint64_t next_key = 0;
  static inline const char* name = "actorflow.monitor";
};

using monitor_self = monitor_actor::stateful_pointer<monitor_state>;

constexpr size_t max_subscribers = 32;

monitor_actor::behavior_type monitor(monitor_self self,
                                     monitor_options opts) {
  self->state.opts = std::move(opts);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    for (auto i = subs.begin(); i != subs.end();)
      i = i->second.handle.address() == dm.source ? subs.erase(i)
                                                  : std::next(i);
  });
  return {
    [self](monitor_snapshot_atom) {
      return snapshot(self->state.opts, nullptr).dump();
    },
    [self](monitor_subscribe_atom, int64_t interval_ms,
           caf::actor who) -> status {
      if (interval_ms < 50 || interval_ms > 60000)
        return invalid_argument("monitor subscription interval "
                                + std::to_string(interval_ms)
                                + " ms is outside [50, 60000] on "
                                + self->state.opts.task);
      if (!who)
        return invalid_argument("monitor subscription without a subscriber");
      auto& subs = self->state.subscribers;
      if (subs.size() >= max_subscribers)
        return {error_code::resource_exhausted,
                "monitor of " + self->state.opts.task + " has "
                  + std::to_string(max_subscribers) + " subscribers"};
      auto key = self->state.next_key++;
      auto& sub = subs[key];
      sub.handle = who;
      sub.interval = std::chrono::milliseconds{interval_ms};
      self->monitor(who);
      sub.due = self->clock().now();
      self->send(caf::actor_cast<monitor_actor>(self), monitor_tick_atom_v,
                 key);
      return {};
    },
    [](monitor_ping_atom) { return wall_us(); },
    [self](monitor_tick_atom, uint64_t key) {
      auto i = self->state.subscribers.find(key);
      if (i == self->state.subscribers.end())
        return;
      auto& sub = i->second;
      auto now = self->clock().now();
      if (now < sub.due)
        return;
      sub.due = now + sub.interval - sub.interval / 10;
      // As this actor (untyped: the subscriber is), so that the
      // subscriber knows whose update it is.
      caf::send_as(caf::actor_cast<caf::actor>(self), sub.handle,
                   monitor_update_atom_v,
                   snapshot(self->state.opts, &sub.sent).dump());
      self->delayed_send(self, sub.interval, monitor_tick_atom_v, key);
    },
  };
}

} // namespace

monitor_actor spawn_monitor(caf::actor_system& sys, monitor_options opts) {
  auto task = opts.task;
  return spawn_instrumented(sys, {actor_kind::monitor, "monitor", "", task},
                            monitor, std::move(opts));
}

std::string monitor_snapshot_json(const monitor_options& opts) {
  return snapshot(opts, nullptr).dump();
}

} // namespace actorflow
