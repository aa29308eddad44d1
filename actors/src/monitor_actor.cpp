// A task's monitor actor: snapshots of this process's monitoring registry
// (actorflow/actors/monitoring.hpp) as JSON, and subscriptions that push
// them at an interval. Read-only by construction: it reads the registry
// and never sends anything to another actor of the task. From its start
// (with its master's) it samples the task's series every second into a
// bounded history (monitor_history.hpp); a subscriber's first update
// carries that history and the process's recent log lines (log_ring), the
// later ones what was sampled and logged since.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "actorflow/actors/instrumented.hpp"
#include "actorflow/graph/log_ring.hpp"
#include "actorflow/transport/transport.hpp"
#include "actorflow/actors/monitoring.hpp"
#include "actorflow/actors/task.hpp"
#include "actorflow/graph/device_name.hpp"
#include "monitor_history.hpp"
#include "runtime.hpp"
#include "actorflow/transport/tensor_channel.hpp"

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

// An actor belongs to a task's view when it serves that task, or the
// process (a session's client actor, an application's own).
bool in_view(const std::string& owner, const std::string& task) {
  return owner.empty() || owner == task;
}

// What a subscriber was sent last: per actor, the figures that change.
struct sent_figures {
  uint64_t messages = 0;
  uint32_t mailbox = 0;
  uint32_t mailbox_max = 0;
  std::array<int64_t, actor_record::max_gauges> gauges{};
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

/// The document of the task `opts` describe; with `sent`, only the actors
/// whose figures differ from what it holds (then updated) and those that
/// went.
json snapshot(caf::actor_system& sys, const task_options& opts,
              sent_map* sent) {
  auto& reg = registry::instance();
  bool delta = sent != nullptr && !sent->empty();
  auto task = task_name(opts);
  auto own = opts.cluster.find(task);
  json doc{{"task", task},
           {"address", own != opts.cluster.end() ? own->second : ""},
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
    if (!in_view(rec->who.task, task))
      continue;
    auto s = rec->read();
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
    if (in_view(e.who.task, task))
      ended.push_back({{"id", e.id},
                       {"kind", to_string(e.who.kind)},
                       {"name", e.who.name},
                       {"container", e.who.container},
                       {"since_us", e.started_us},
                       {"ended_us", e.ended_us},
                       {"messages", e.messages},
                       {"reason", e.reason}});
  doc["ended"] = std::move(ended);
  auto record = reg.steps(task);
  auto steps = record->read();
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
                  {"last_errors", errors},    {"buckets", steps.buckets},
                  {"sum_us", steps.sum_us}};
  doc["trace"] = {{"requested", record->trace_requested()},
                  {"at_us", record->trace_at_us()}};
  json peers = json::array();
  for (auto& e : reg.peers(task))
    peers.push_back({{"peer", e.peer},
                     {"address", e.address},
                     {"up", e.up},
                     {"since_us", e.since_us},
                     {"reason", e.reason}});
  doc["peers"] = std::move(peers);
  json links = json::array();
  for (auto& l : tensor_channel::link_stats(sys)) {
    json link{{"peer", l.peer},
              {"direction", l.outgoing ? "out" : "in"},
              {"up", l.up},
              {"bytes", l.bytes},
              {"frames", l.frames},
              {"since_us", l.since_us},
              {"last_us", l.last_us}};
    if (!l.local.empty())
      link["local"] = l.local;
    if (!l.peer_name.empty())
      link["peer_task"] = l.peer_name;
    links.push_back(std::move(link));
  }
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
  /// The history sample and log line it was sent last (0: none yet).
  uint64_t history_sent = 0;
  uint64_t log_sent = 0;
};

/// What the last history sample read of the counters that only grow, so
/// that the next one gives their rates.
struct sampler {
  int64_t at_us = 0;
  uint64_t steps = 0;
  double cpu_seconds = 0;
  std::map<std::string, uint64_t> link_bytes;
};

struct monitor_state {
  task_options opts;
  std::string task; // task_name(opts), for messages
  std::unordered_map<uint64_t, subscriber> subscribers;
  uint64_t next_key = 0;
  monitoring::history history;
  sampler last;
  caf::actor_clock::time_point sample_due;
  static inline const char* name = "actorflow.monitor";
};

/// The key of the sampling timer's ticks (subscribers' keys count up from
/// 0; a tick only comes from this actor itself).
constexpr uint64_t sample_key = UINT64_MAX;
constexpr auto sample_interval = std::chrono::seconds(1);

/// A history's points as JSON: {"t_us": [...], "series": {name: [...]}},
/// null for a sample without a value.
json points_json(const monitoring::history::points& pts) {
  json series = json::object();
  for (auto& [name, values] : pts.series) {
    json list = json::array();
    for (auto v : values)
      list.push_back(std::isnan(v) ? json(nullptr) : json(v));
    series[name] = std::move(list);
  }
  return {{"t_us", pts.t_us}, {"series", std::move(series)}};
}

/// Log lines as JSON, oldest first.
json logs_json(const std::vector<log_entry>& lines) {
  json out = json::array();
  for (auto& e : lines)
    out.push_back({{"seq", e.seq},
                   {"at_us", e.at_us},
                   {"level", std::string{to_string(e.level)}},
                   {"text", e.text}});
  return out;
}

/// The most lines a subscriber's first update carries.
constexpr size_t max_first_logs = 500;

/// One history sample of task `task` (every second): step rate and
/// times, training progress, RSS and CPU, the deepest mailbox, each
/// queue's fill and each tensor-channel link's bytes/s (named by the task
/// at its other end when known).
void sample_history(caf::actor_system& sys, const std::string& task,
                    monitoring::history& hist, sampler& last) {
  auto now = wall_us();
  double dt = last.at_us > 0 ? static_cast<double>(now - last.at_us) / 1e6
                             : 0;
  monitoring::history::values v;
  auto rate = [dt](double before, double after) {
    return after >= before ? (after - before) / dt : after / dt;
  };
  auto& reg = registry::instance();
  auto steps = reg.steps(task)->read();
  if (dt > 0 && (steps.total > 0 || last.steps > 0))
    v.emplace_back("steps_per_s", rate(static_cast<double>(last.steps),
                                       static_cast<double>(steps.total)));
  if (steps.total > 0) {
    v.emplace_back("step_p50_us", static_cast<double>(steps.p50_us));
    v.emplace_back("step_p99_us", static_cast<double>(steps.p99_us));
  }
  last.steps = steps.total;
  for (auto& t : reg.training())
    if (in_view(t.task, task) && t.global_step >= 0) {
      v.emplace_back("loss", t.loss);
      v.emplace_back("examples_per_s", t.examples_per_sec);
      v.emplace_back("global_step", static_cast<double>(t.global_step));
      if (t.accuracy >= 0)
        v.emplace_back("accuracy", t.accuracy);
      break;
    }
  auto p = read_process_stats();
  v.emplace_back("rss_bytes", static_cast<double>(p.rss_bytes));
  if (dt > 0)
    v.emplace_back("cpu_percent", rate(last.cpu_seconds, p.cpu_seconds)
                                    * 100);
  last.cpu_seconds = p.cpu_seconds;
  uint32_t deepest = 0;
  for (auto& rec : reg.live()) {
    if (!in_view(rec->who.task, task))
      continue;
    auto s = rec->read();
    deepest = std::max(deepest, s.mailbox);
    if (rec->who.kind == actor_kind::queue)
      v.emplace_back("queue:" + rec->who.name,
                     static_cast<double>(rec->gauges[0].load(
                       std::memory_order_relaxed)));
  }
  v.emplace_back("mailbox_max", deepest);
  std::map<std::string, uint64_t> bytes;
  for (auto& l : tensor_channel::link_stats(sys)) {
    auto key = std::string{l.outgoing ? "link_out:" : "link_in:"}
               + (l.peer_name.empty() ? l.peer : l.peer_name);
    bytes[key] += l.bytes;
  }
  if (dt > 0)
    for (auto& [key, b] : bytes) {
      auto i = last.link_bytes.find(key);
      v.emplace_back(key, rate(i == last.link_bytes.end()
                                 ? static_cast<double>(b)
                                 : static_cast<double>(i->second),
                               static_cast<double>(b)));
    }
  last.link_bytes = std::move(bytes);
  last.at_us = now;
  hist.add(now, v);
}

using monitor_self = monitor_actor::stateful_pointer<monitor_state>;

constexpr size_t max_subscribers = 32;

monitor_actor::behavior_type monitor(monitor_self self,
                                     task_options opts) {
  self->state.task = task_name(opts);
  self->state.opts = std::move(opts);
  // The history starts with the task, not with the first console.
  self->state.sample_due = self->clock().now();
  self->send(self, monitor_tick_atom_v, sample_key);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    for (auto i = subs.begin(); i != subs.end();)
      i = i->second.handle.address() == dm.source ? subs.erase(i)
                                                  : std::next(i);
  });
  return {
    [self](monitor_snapshot_atom) {
      return snapshot(self->system(), self->state.opts, nullptr).dump();
    },
    [self](monitor_subscribe_atom, int64_t interval_ms,
           caf::actor who) -> status {
      if (interval_ms < 50 || interval_ms > 60000)
        return invalid_argument("monitor subscription interval "
                                + std::to_string(interval_ms)
                                + " ms is outside [50, 60000] on "
                                + self->state.task);
      if (!who)
        return invalid_argument("monitor subscription without a subscriber");
      auto& subs = self->state.subscribers;
      if (subs.size() >= max_subscribers)
        return {error_code::resource_exhausted,
                "monitor of " + self->state.task + " has "
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
    [self](monitor_trace_atom) {
      registry::instance().steps(self->state.task)->request_trace();
      return status{};
    },
    [self](monitor_get_trace_atom) {
      auto t = registry::instance().steps(self->state.task)->last_trace();
      return caf::result<int64_t, std::string>{t.at_us,
                                               std::move(t.chrome_json)};
    },
    [self](monitor_tick_atom, uint64_t key) {
      auto& st = self->state;
      if (key == sample_key) {
        auto now = self->clock().now();
        if (now < st.sample_due)
          return;
        st.sample_due = now + sample_interval - sample_interval / 10;
        sample_history(self->system(), st.task, st.history, st.last);
        self->delayed_send(self, sample_interval, monitor_tick_atom_v,
                           sample_key);
        return;
      }
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
      bool first = sub.sent.empty();
      auto doc = snapshot(self->system(), st.opts, &sub.sent);
      // The history and the log: all of it first, then what is new.
      auto& hist = st.history;
      if (first)
        doc["history"] = points_json(hist.all());
      else if (hist.samples() > sub.history_sent)
        doc["history_tail"] = points_json(hist.since(sub.history_sent));
      sub.history_sent = hist.samples();
      auto& ring = log_ring::instance();
      auto lines = ring.since(sub.log_sent, first ? max_first_logs
                                                  : SIZE_MAX);
      if (!lines.empty()) {
        sub.log_sent = lines.back().seq;
        doc["logs"] = logs_json(lines);
      }
      caf::send_as(caf::actor_cast<caf::actor>(self), sub.handle,
                   monitor_update_atom_v, doc.dump());
      self->delayed_send(self, sub.interval, monitor_tick_atom_v, key);
    },
  };
}

} // namespace

monitor_actor spawn_monitor(caf::actor_system& sys, task_options opts) {
  auto self = spawn_instrumented(sys,
                                 {.kind = actor_kind::monitor,
                                  .name = "monitor",
                                  .container = "",
                                  .task = task_name(opts)},
                                 monitor, std::move(opts));
  // Everything the console asks (its timer, mon_tick, is its own).
  allow_monitors(sys, self.id(),
                 {monitor_snapshot_atom::value, monitor_subscribe_atom::value,
                  monitor_ping_atom::value, monitor_trace_atom::value,
                  monitor_get_trace_atom::value});
  return self;
}

// -- Prometheus ----------------------------------------------------------------

namespace {

/// Prometheus' text format: each family's HELP and TYPE once, then its
/// samples together.
class exposition {
public:
  using labels = std::vector<std::pair<const char*, std::string>>;

  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  void sample(const std::string& name, const labels& ls, double value) {
    out_ += name;
    if (!ls.empty()) {
      out_ += '{';
      for (size_t i = 0; i < ls.size(); ++i) {
        if (i > 0)
          out_ += ',';
        out_ += ls[i].first;
        out_ += "=\"";
        for (char c : ls[i].second) {
          if (c == '\\' || c == '"')
            out_ += '\\';
          if (c == '\n')
            out_ += "\\n";
          else
            out_ += c;
        }
        out_ += '"';
      }
      out_ += '}';
    }
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out_ += ' ';
    out_.append(buf, end);
    out_ += '\n';
  }

  std::string take() {
    return std::move(out_);
  }

private:
  std::string out_;
};

double num(const json& x) {
  return x.is_number() ? x.get<double>() : 0.0;
}

} // namespace

std::string metrics_text(caf::actor_system& sys, const task_options& opts) {
  auto doc = snapshot(sys, opts, nullptr);
  auto task = doc["task"].get<std::string>();
  exposition m;
  auto actors_of = [&](const char* kind) {
    std::vector<const json*> out;
    for (auto& a : doc["actors"])
      if (kind == nullptr || a["kind"] == kind)
        out.push_back(&a);
    return out;
  };
  auto actor_labels = [&](const json& a) -> exposition::labels {
    return {{"task", task},
            {"kind", a["kind"].get<std::string>()},
            {"actor", a["name"].get<std::string>()},
            {"actor_id", std::to_string(a["id"].get<uint64_t>())}};
  };
  // Per actor.
  struct per_actor {
    const char* name;
    const char* type;
    const char* help;
    const char* field;
    double scale;
  };
  for (auto& f : {per_actor{"actorflow_actor_mailbox_size", "gauge",
                            "Messages waiting in the actor's mailbox.",
                            "mailbox", 1},
                  per_actor{"actorflow_actor_mailbox_max", "gauge",
                            "The deepest mailbox in the last 1-4 s.",
                            "mailbox_max", 1},
                  per_actor{"actorflow_actor_messages_total", "counter",
                            "Messages the actor handled.", "messages", 1},
                  per_actor{"actorflow_actor_busy_seconds_total", "counter",
                            "Time the actor spent handling messages.",
                            "busy_us", 1e-6}}) {
    m.family(f.name, f.type, f.help);
    for (auto* a : actors_of(nullptr))
      m.sample(f.name, actor_labels(*a), num((*a)[f.field]) * f.scale);
  }
  // Queues and variables, by their gauges.
  struct per_gauge {
    const char* kind;
    const char* gauge;
    const char* name;
    const char* type;
    const char* help;
  };
  for (auto& f :
       {per_gauge{"queue", "size", "actorflow_queue_size", "gauge",
                  "Elements in the queue."},
        per_gauge{"queue", "capacity", "actorflow_queue_capacity", "gauge",
                  "The queue's capacity (-1: unbounded)."},
        per_gauge{"queue", "closed", "actorflow_queue_closed", "gauge",
                  "1 once the queue is closed."},
        per_gauge{"queue", "blocked_enqueues",
                  "actorflow_queue_blocked_enqueues", "gauge",
                  "Enqueue attempts waiting for room in the queue."},
        per_gauge{"queue", "blocked_dequeues",
                  "actorflow_queue_blocked_dequeues", "gauge",
                  "Dequeue attempts waiting for elements."},
        per_gauge{"queue", "withdrawn", "actorflow_queue_withdrawn_total",
                  "counter",
                  "Queue operations cancelled with their step (it failed, "
                  "or its client or master was lost)."},
        per_gauge{"queue", "returned", "actorflow_queue_returned_total",
                  "counter",
                  "Elements back at the head of the queue: their step died "
                  "after its dequeue took them."},
        per_gauge{"variable", "bytes", "actorflow_variable_bytes", "gauge",
                  "Bytes of the variable's value."},
        per_gauge{"variable", "initialized", "actorflow_variable_initialized",
                  "gauge", "1 once the variable holds a value."},
        per_gauge{"variable", "updates", "actorflow_variable_updates_total",
                  "counter", "Writes to the variable."}}) {
    m.family(f.name, f.type, f.help);
    for (auto* a : actors_of(f.kind))
      m.sample(f.name,
               {{"task", task},
                {f.kind, (*a)["name"].get<std::string>()},
                {"container", (*a)["container"].get<std::string>()}},
               num((*a)["gauges"][f.gauge]));
  }
  // Steps.
  auto& steps = doc["steps"];
  m.family("actorflow_steps_total", "counter",
           "Steps this master finished, by status code.");
  for (auto& [code, n] : steps["by_code"].items())
    m.sample("actorflow_steps_total", {{"task", task}, {"code", code}},
             num(n));
  m.family("actorflow_step_seconds", "histogram",
           "Durations of the steps this master finished.");
  double cumulative = 0;
  auto& buckets = steps["buckets"];
  for (size_t b = 0; b < buckets.size(); ++b) {
    cumulative += num(buckets[b]);
    std::string le = "+Inf";
    if (b < step_record::bucket_bounds_us.size()) {
      char buf[32];
      // Fixed notation, as Prometheus' client libraries write "le".
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf),
                                     step_record::bucket_bounds_us[b] / 1e6,
                                     std::chars_format::fixed);
      le.assign(buf, end);
    }
    m.sample("actorflow_step_seconds_bucket", {{"task", task}, {"le", le}},
             cumulative);
  }
  m.sample("actorflow_step_seconds_sum", {{"task", task}},
           num(steps["sum_us"]) / 1e6);
  m.sample("actorflow_step_seconds_count", {{"task", task}}, cumulative);
  // Connections.
  m.family("actorflow_peer_up", "gauge",
           "1 while this master's connection to the peer task is up.");
  for (auto& p : doc["peers"])
    m.sample("actorflow_peer_up",
             {{"task", task},
              {"peer", p["peer"].get<std::string>()},
              {"address", p["address"].get<std::string>()}},
             p["up"].get<bool>() ? 1 : 0);
  for (auto [name, field, help] :
       {std::tuple{"actorflow_peer_bytes_total", "bytes",
                   "Bytes on the tensor channel's connections of this "
                   "process."},
        std::tuple{"actorflow_peer_frames_total", "frames",
                   "Frames on the tensor channel's connections of this "
                   "process."}}) {
    m.family(name, "counter", help);
    for (auto& l : doc["channel"]) {
      exposition::labels labels{
        {"task", task},
        {"peer", l["peer"].get<std::string>()},
        {"direction", l["direction"].get<std::string>()}};
      // The task at the other end, when this process knows it.
      if (l.contains("peer_task"))
        labels.emplace_back("peer_task", l["peer_task"].get<std::string>());
      m.sample(name, labels, num(l[field]));
    }
  }
  // Training.
  for (auto [name, field, help] :
       {std::tuple{"actorflow_training_global_step", "global_step",
                   "The trainer's last global step."},
        std::tuple{"actorflow_training_loss", "loss",
                   "The trainer's last loss."},
        std::tuple{"actorflow_training_examples_per_second",
                   "examples_per_sec", "The trainer's examples per second."},
        std::tuple{"actorflow_training_accuracy", "accuracy",
                   "The trainer's last evaluated accuracy."}}) {
    m.family(name, "gauge", help);
    for (auto& t : doc["training"])
      if (num(t[field]) >= 0)
        m.sample(name, {{"task", t["task"].get<std::string>()}},
                 num(t[field]));
  }
  // The process, with the names Prometheus' client libraries use.
  auto& p = doc["process"];
  for (auto [name, type, field, scale, help] :
       {std::tuple{"process_resident_memory_bytes", "gauge", "rss_bytes", 1.0,
                   "Resident memory size in bytes."},
        std::tuple{"process_cpu_seconds_total", "counter", "cpu_seconds", 1.0,
                   "Total user and system CPU time spent in seconds."},
        std::tuple{"process_open_fds", "gauge", "open_fds", 1.0,
                   "Number of open file descriptors."},
        std::tuple{"process_threads", "gauge", "threads", 1.0,
                   "Number of OS threads in the process."},
        std::tuple{"process_start_time_seconds", "gauge", "started_us", 1e-6,
                   "Start time of the process since unix epoch in seconds."}}) {
    m.family(name, type, help);
    m.sample(name, {}, num(p[field]) * scale);
  }
  return m.take();
}

} // namespace actorflow
