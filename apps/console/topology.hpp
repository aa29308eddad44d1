#pragma once

// actorflow-console's topology: which tasks talk to which, from what each
// task says of its connections: its CAF connections to other tasks
// ("peers") and its tensor-channel links ("channel"). A link is named by
// the task at its other end: an outgoing link by the task it was told
// (peer_task), or by the task that sees this link's own end (its "local"
// address) as an incoming connection; an incoming link by the task whose
// outgoing link has that address as its own end. CAF-free.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/device_name.hpp"
#include "console/task_view.hpp"

namespace actorflow::apps {

/// Sets "peer_task" on every tensor-channel link of `tasks` whose other
/// end is known, matching the two ends of each connection across tasks.
inline void name_links(std::vector<task_view>& tasks) {
  // Each outgoing link's own end, by the task that has it.
  std::map<std::string, std::string> by_local;
  // Each incoming connection's far end, by the task that accepted it.
  std::map<std::string, std::string> by_incoming_peer;
  for (auto& v : tasks) {
    if (!v.has_node)
      continue;
    for (auto& l : v.node.value("channel", json::array())) {
      if (l.value("direction", "") == "out" && l.contains("local"))
        by_local[l["local"].get<std::string>()] = v.task;
      if (l.value("direction", "") == "in")
        by_incoming_peer[l.value("peer", "")] = v.task;
    }
  }
  for (auto& v : tasks) {
    if (!v.has_node || !v.node.contains("channel"))
      continue;
    for (auto& l : v.node["channel"]) {
      if (l.value("direction", "") == "in") {
        if (auto i = by_local.find(l.value("peer", "")); i != by_local.end())
          l["peer_task"] = i->second;
      } else if (l.contains("local")) {
        // What the far end saw is what happened; peer_task what was said.
        if (auto i = by_incoming_peer.find(l["local"].get<std::string>());
            i != by_incoming_peer.end())
          l["peer_task"] = i->second;
      }
    }
  }
}

/// Marks what a task that is up still holds for a task that is down
/// ("orphaned": true): a tensor-channel link to it (shown up until a send
/// fails) and the executors of its sessions (named "..., worker/1 session
/// 0"), which its master registered. The engine drops them when it learns
/// of the loss (the executors when their master's process is lost, within
/// the heartbeat bound); until then a person sees they are leftovers.
inline void mark_orphans(std::vector<task_view>& tasks) {
  std::set<std::string> down;
  for (auto& v : tasks)
    if (v.state == "down")
      down.insert(v.task);
  if (down.empty())
    return;
  std::set<std::string> down_short;
  for (auto& t : down) {
    device_name d;
    if (device_name::parse(t, d).ok() && d.job && d.task)
      down_short.insert(*d.job + "/" + std::to_string(*d.task));
  }
  for (auto& v : tasks) {
    if (v.state != "up" || !v.has_node)
      continue;
    for (auto& l : v.node["channel"])
      if (down.count(l.value("peer_task", "")))
        l["orphaned"] = true;
    for (auto& a : v.node["actors"]) {
      if (a.value("kind", "") != "executor")
        continue;
      auto name = a.value("name", "");
      auto at = name.rfind(" session ");
      auto comma = name.rfind(", ", at);
      if (at == std::string::npos || comma == std::string::npos)
        continue;
      if (down_short.count(name.substr(comma + 2, at - comma - 2)))
        a["orphaned"] = true;
    }
  }
}

/// One pair of tasks that talk: over CAF (up, down, or unknown) and the
/// tensor channel's bytes/s each way (a to b, b to a).
struct topology_edge {
  std::string a; ///< the smaller task name
  std::string b;
  std::optional<bool> caf_up;
  std::optional<bool> channel_up;
  std::optional<double> bytes_per_s_ab;
  std::optional<double> bytes_per_s_ba;
};

/// The edges between `tasks` (links named first: name_links). Only what
/// tasks that are up say counts; a task that is down has no edges but
/// those its peers report, and those are down whatever they say.
inline std::vector<topology_edge>
topology(const std::vector<task_view>& tasks) {
  std::map<std::pair<std::string, std::string>, topology_edge> edges;
  auto edge = [&](const std::string& x, const std::string& y)
    -> std::pair<topology_edge*, bool> {
    bool forward = x < y;
    auto key = forward ? std::pair{x, y} : std::pair{y, x};
    auto& e = edges[key];
    e.a = key.first;
    e.b = key.second;
    return {&e, forward};
  };
  for (auto& v : tasks) {
    if (v.state != "up" || !v.has_node)
      continue;
    for (auto& p : v.node.value("peers", json::array())) {
      auto peer = p.value("peer", "");
      if (peer.empty() || peer == v.task)
        continue;
      auto [e, forward] = edge(v.task, peer);
      bool up = p.value("up", false);
      e->caf_up = e->caf_up ? (*e->caf_up && up) : up;
    }
    for (auto& l : v.node.value("channel", json::array())) {
      auto peer = l.value("peer_task", "");
      if (peer.empty() || peer == v.task)
        continue;
      auto [e, forward] = edge(v.task, peer);
      bool up = l.value("up", false);
      e->channel_up = e->channel_up ? (*e->channel_up && up) : up;
      // Each direction counted once: by the sender's outgoing link.
      if (l.value("direction", "") != "out")
        continue;
      auto& slot = forward ? e->bytes_per_s_ab : e->bytes_per_s_ba;
      if (auto r = l.find("bytes_per_s"); r != l.end() && r->is_number())
        slot = slot.value_or(0) + r->get<double>();
      else if (!slot)
        slot = 0.0;
    }
  }
  std::set<std::string> down;
  for (auto& v : tasks)
    if (v.state == "down")
      down.insert(v.task);
  std::vector<topology_edge> out;
  for (auto& [key, e] : edges) {
    if (down.count(e.a) || down.count(e.b)) {
      if (e.caf_up)
        e.caf_up = false;
      if (e.channel_up)
        e.channel_up = false;
    }
    out.push_back(e);
  }
  return out;
}

inline json to_json(const std::vector<topology_edge>& edges) {
  json out = json::array();
  auto opt = [](const auto& x) { return x ? json(*x) : json(nullptr); };
  for (auto& e : edges)
    out.push_back({{"a", e.a},
                   {"b", e.b},
                   {"caf_up", opt(e.caf_up)},
                   {"channel_up", opt(e.channel_up)},
                   {"bytes_per_s_ab", opt(e.bytes_per_s_ab)},
                   {"bytes_per_s_ba", opt(e.bytes_per_s_ba)}});
  return out;
}

} // namespace actorflow::apps
