#pragma once

// actorflow-console --once without --json: the cluster in a few lines of
// text for a person (or a log): each task's state, round trip, memory and
// CPU, its steps, the trainers' progress, the deepest mailboxes, why a
// task is down, the active alerts, and a last line saying whether the
// cluster is healthy.

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "console/cluster_watch.hpp"
#include "console/format.hpp"

namespace actorflow::apps {

/// The text --once prints.
inline std::string once_summary(const std::vector<task_view>& tasks,
                                const std::vector<alert>& active = {}) {
  size_t up = 0;
  for (auto& v : tasks)
    up += v.state == "up" ? 1 : 0;
  std::string out = fmt("actorflow cluster: %zu tasks, %zu up, %zu not up\n",
                        tasks.size(), up, tasks.size() - up);
  out += fmt("%-28s %-10s %6s %9s %9s %7s %9s %9s %9s %8s\n", "TASK", "STATE",
             "SINCE", "RTT", "RSS", "CPU", "STEPS", "STEPS/S", "P50", "RESTARTS");
  for (auto& v : tasks) {
    auto field = [&](const char* section, const char* key) {
      if (!v.has_node || v.state != "up" || !v.node.contains(section))
        return std::string{"-"};
      auto& s = v.node[section];
      auto i = s.find(key);
      if (i == s.end() || !i->is_number())
        return std::string{"-"};
      return fmt("%.0f", i->get<double>());
    };
    auto rss = v.has_node && v.state == "up"
                 ? bytes(v.node["process"].value("rss_bytes", 0.0))
                 : std::string{"-"};
    auto cpu = v.has_node && v.state == "up"
                 ? fmt("%.1fs", v.node["process"].value("cpu_seconds", 0.0))
                 : std::string{"-"};
    // No step yet: no percentile either.
    auto steps = field("steps", "total");
    auto p50 = steps == "0" ? std::string{"-"} : field("steps", "p50_us");
    out += fmt("%-28s %-10s %6s %9s %9s %7s %9s %9s %9s %8lld\n",
               v.task.c_str(), v.state.c_str(), ago(v.since_us).c_str(),
               v.rtt_us >= 0 ? fmt("%.2fms", v.rtt_us / 1000).c_str() : "-",
               rss.c_str(), cpu.c_str(), steps.c_str(),
               field("steps", "per_s").c_str(),
               p50 == "-" ? "-" : (p50 + "us").c_str(),
               static_cast<long long>(v.restarts));
  }
  // The trainers' progress, as each task reports it.
  for (auto& v : tasks) {
    if (!v.has_node || v.state != "up")
      continue;
    for (auto& t : v.node.value("training", json::array())) {
      auto acc = t.value("accuracy", -1.0);
      out += fmt("training %s: global step %lld, loss %.4f, %.0f examples/s%s\n",
                 t.value("task", v.task).c_str(),
                 static_cast<long long>(t.value("global_step", int64_t{0})),
                 t.value("loss", 0.0), t.value("examples_per_sec", 0.0),
                 acc < 0 ? "" : fmt(", accuracy %.4f", acc).c_str());
    }
  }
  // The deepest mailboxes of the cluster: where work piles up.
  std::vector<std::tuple<int64_t, std::string, std::string>> deepest;
  for (auto& v : tasks)
    if (v.has_node && v.state == "up")
      for (auto& a : v.node.value("actors", json::array()))
        if (auto depth = a.value("mailbox", int64_t{0}); depth > 0)
          deepest.emplace_back(depth, short_task(v.task),
                               a.value("name", a.value("kind", "")));
  std::sort(deepest.rbegin(), deepest.rend());
  if (deepest.size() > 5)
    deepest.resize(5);
  for (auto& [depth, task, name] : deepest)
    out += fmt("mailbox %lld on %s: %s\n", static_cast<long long>(depth),
               task.c_str(), name.c_str());
  // Why tasks are not up: the first reason, then the latest.
  size_t down = 0;
  for (auto& v : tasks) {
    if (v.state == "up")
      continue;
    ++down;
    out += v.task + " is " + (v.state == "down" ? "DOWN" : v.state)
           + (v.error.empty() ? "" : ": " + v.error) + "\n";
    if (!v.last_error.empty())
      out += "  then: " + v.last_error + "\n";
  }
  for (auto& a : active)
    out += "ALERT " + a.rule + " since " + ago(a.fired_us) + ": " + a.message
           + "\n";
  if (healthy(tasks, active))
    out += "healthy\n";
  else if (down > 0)
    out += fmt("unhealthy: %zu of %zu tasks not up%s\n", down, tasks.size(),
               active.empty() ? ""
                              : fmt(", %zu alerts", active.size()).c_str());
  else
    out += fmt("unhealthy: %zu alerts\n", active.size());
  return out;
}

} // namespace actorflow::apps
