#pragma once

// actorflow-console's alerts: rules over what the console knows of each
// task (task_view.hpp), mostly over the history the task keeps of its
// series, so that a console that just connected (or --once) judges the
// run so far and not only what it saw itself. Each rule fires for a task
// when its condition holds and clears when it stops holding; both moments
// are kept. CAF-free; time is passed in.
//
// Rules, on by default (--alert NAME=VALUE sets one, NAME=off turns it off):
//   task_down          a task is down (VALUE: on/off)
//   step_stalled_s     the global step of a task that trained has not moved
//                      for VALUE s (default 60) while the task is up
//   loss_nan           a trainer's loss is NaN or infinite (on/off)
//   loss_jump          the loss went above VALUE (default 10) times the
//                      median of its previous 30 samples
//   mailbox_growing    the deepest mailbox grew in each of the last VALUE
//                      samples (default 10)
//   rss_growing_s      RSS grew steadily over the last VALUE s (default
//                      300): by 10 % or more, and in 80 % of the samples

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "console/task_view.hpp"

namespace actorflow::apps {

struct alert_rules {
  bool task_down = true;
  double step_stalled_s = 60;
  bool loss_nan = true;
  double loss_jump = 10;
  int mailbox_growing = 10;
  double rss_growing_s = 300;

  /// The rule names --alert takes.
  static constexpr const char* names = "task_down, step_stalled_s, loss_nan, "
                                       "loss_jump, mailbox_growing, "
                                       "rss_growing_s";

  /// Sets one rule from "NAME=VALUE" (VALUE a positive number, or on/off).
  /// Throws std::invalid_argument naming what is wrong.
  void set(const std::string& assignment) {
    auto eq = assignment.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("--alert " + assignment
                                  + ": expected NAME=VALUE with NAME one of "
                                  + names);
    auto name = assignment.substr(0, eq);
    auto value = assignment.substr(eq + 1);
    bool off = value == "off" || value == "0";
    bool on = value == "on";
    double number = 0;
    if (!off && !on) {
      size_t used = 0;
      try {
        number = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || !(number > 0) || !std::isfinite(number))
        throw std::invalid_argument("--alert " + assignment + ": " + value
                                    + " is not a positive number, on or off");
    }
    auto flag = [&](bool& rule) {
      if (!off && !on)
        throw std::invalid_argument("--alert " + assignment + ": " + name
                                    + " takes on or off");
      rule = on;
    };
    auto limit = [&](auto& rule, double fallback) {
      using T = std::decay_t<decltype(rule)>;
      rule = off ? T{0} : static_cast<T>(on ? fallback : number);
    };
    if (name == "task_down")
      flag(task_down);
    else if (name == "loss_nan")
      flag(loss_nan);
    else if (name == "step_stalled_s")
      limit(step_stalled_s, 60.0);
    else if (name == "loss_jump")
      limit(loss_jump, 10.0);
    else if (name == "mailbox_growing")
      limit(mailbox_growing, 10.0);
    else if (name == "rss_growing_s")
      limit(rss_growing_s, 300.0);
    else
      throw std::invalid_argument("--alert " + assignment + ": no rule "
                                  + name + " (rules: " + names + ")");
  }
};

struct alert {
  std::string rule;
  std::string task;
  std::string message;
  int64_t fired_us = 0;
  int64_t cleared_us = 0; ///< 0 while active
};

namespace detail {

/// Series `name` of a task's history, as (time, value) pairs without the
/// samples that lack it.
inline std::vector<std::pair<int64_t, double>>
history_series(const task_view& v, const std::string& name) {
  std::vector<std::pair<int64_t, double>> out;
  auto& h = v.past->history;
  if (!h.contains("series") || !h["series"].contains(name))
    return out;
  auto& t = h["t_us"];
  auto& values = h["series"][name];
  for (size_t i = 0; i < t.size() && i < values.size(); ++i)
    if (values[i].is_number())
      out.emplace_back(t[i].get<int64_t>(), values[i].get<double>());
  return out;
}

inline std::string short_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", x);
  return buf;
}

} // namespace detail

/// The message of each rule that holds for task `v` at `now_us`, by rule.
inline std::map<std::string, std::string>
alert_conditions(const alert_rules& rules, const task_view& v,
                 int64_t now_us) {
  using detail::history_series;
  using detail::short_number;
  std::map<std::string, std::string> out;
  if (v.state == "down") {
    if (rules.task_down)
      out["task_down"] = v.task + " is down: " + v.error;
    return out; // its series are not live
  }
  if (v.state != "up" || !v.has_node || !v.node.is_object())
    return out;
  if (rules.step_stalled_s > 0) {
    auto steps = history_series(v, "global_step");
    if (steps.size() >= 2) {
      // When the step last moved, and whether it ever did.
      auto last_change = steps.front().first;
      bool moved = false;
      for (size_t i = 1; i < steps.size(); ++i)
        if (steps[i].second != steps[i - 1].second) {
          last_change = steps[i].first;
          moved = true;
        }
      auto still = static_cast<double>(now_us - last_change) / 1e6;
      if (moved && still >= rules.step_stalled_s)
        out["step_stalled"] = v.task + ": global step "
                              + short_number(steps.back().second)
                              + " has not moved for "
                              + short_number(std::floor(still)) + " s";
    }
  }
  if (rules.loss_nan)
    for (auto& t : v.node.value("training", json::array()))
      if (t.value("global_step", int64_t{-1}) >= 0) {
        // JSON has no NaN: the task's document says null.
        auto& loss = t["loss"];
        if (loss.is_null()
            || (loss.is_number() && !std::isfinite(loss.get<double>())))
          out["loss_nan"] = v.task + ": the loss of "
                            + t.value("task", std::string{}) + " is NaN";
      }
  if (rules.loss_jump > 0) {
    auto loss = history_series(v, "loss");
    if (loss.size() >= 6) {
      std::vector<double> before;
      for (size_t i = loss.size() > 31 ? loss.size() - 31 : 0;
           i + 1 < loss.size(); ++i)
        before.push_back(loss[i].second);
      std::nth_element(before.begin(), before.begin() + before.size() / 2,
                       before.end());
      auto median = before[before.size() / 2];
      auto now = loss.back().second;
      if (median > 0 && now > rules.loss_jump * median)
        out["loss_jump"] = v.task + ": loss " + short_number(now) + " is "
                           + short_number(now / median)
                           + "x its recent median "
                           + short_number(median);
    }
  }
  if (rules.mailbox_growing > 0) {
    auto depth = history_series(v, "mailbox_max");
    auto n = static_cast<size_t>(rules.mailbox_growing);
    if (depth.size() > n) {
      bool growing = true;
      for (size_t i = depth.size() - n; i < depth.size(); ++i)
        growing = growing && depth[i].second > depth[i - 1].second;
      if (growing) {
        // Name the deepest actor now.
        std::string who;
        uint64_t deepest = 0;
        for (auto& a : v.node.value("actors", json::array()))
          if (a.value("mailbox", uint64_t{0}) >= deepest) {
            deepest = a.value("mailbox", uint64_t{0});
            who = a.value("kind", std::string{}) + " "
                  + a.value("name", std::string{});
          }
        out["mailbox_growing"] = v.task + ": the deepest mailbox grew for "
                                 + std::to_string(n) + " samples, to "
                                 + short_number(depth.back().second)
                                 + (who.empty() ? "" : " (" + who + ")");
      }
    }
  }
  if (rules.rss_growing_s > 0) {
    auto rss = history_series(v, "rss_bytes");
    auto from = now_us - static_cast<int64_t>(rules.rss_growing_s * 1e6);
    // The window must be covered: the first sample at or before its start.
    auto first = std::find_if(rss.begin(), rss.end(),
                              [&](auto& p) { return p.first >= from; });
    if (first != rss.begin() && first != rss.end()) {
      --first;
      auto n = static_cast<size_t>(rss.end() - first);
      size_t ups = 0;
      for (auto i = first + 1; i != rss.end(); ++i)
        ups += i->second >= (i - 1)->second ? 1 : 0;
      auto grew = rss.back().second / std::max(first->second, 1.0);
      if (n >= 5 && grew >= 1.1 && ups * 10 >= (n - 1) * 8)
        out["rss_growing"] = v.task + ": RSS grew "
                             + short_number((grew - 1) * 100) + " % in "
                             + short_number(rules.rss_growing_s) + " s, to "
                             + short_number(rss.back().second / 1e6) + " MB";
    }
  }
  return out;
}

/// Whether every task is up and no alert is active (what --once's exit
/// status and the documents' "healthy" say).
inline bool healthy(const std::vector<task_view>& tasks,
                    const std::vector<alert>& active) {
  return active.empty()
         && std::all_of(tasks.begin(), tasks.end(),
                        [](const task_view& v) { return v.state == "up"; });
}

/// The alerts of a cluster: which are active, and those that cleared
/// lately (the last `max_recent`).
class alert_book {
public:
  static constexpr size_t max_recent = 50;

  explicit alert_book(alert_rules rules = {}) : rules_(rules) {
    // nop
  }

  const alert_rules& rules() const {
    return rules_;
  }

  /// Fires what holds now and was not active, clears what was and does
  /// not hold any more (a message that changes keeps its firing time).
  void evaluate(const std::vector<task_view>& tasks, int64_t now_us) {
    std::map<std::pair<std::string, std::string>, std::string> holding;
    for (auto& v : tasks)
      for (auto& [rule, message] : alert_conditions(rules_, v, now_us))
        holding[{rule, v.task}] = message;
    for (auto i = active_.begin(); i != active_.end();) {
      auto h = holding.find({i->rule, i->task});
      if (h == holding.end()) {
        i->cleared_us = now_us;
        recent_.push_back(*i);
        if (recent_.size() > max_recent)
          recent_.pop_front();
        i = active_.erase(i);
      } else {
        i->message = h->second;
        holding.erase(h);
        ++i;
      }
    }
    for (auto& [key, message] : holding)
      active_.push_back({key.first, key.second, message, now_us, 0});
  }

  const std::vector<alert>& active() const {
    return active_;
  }

  /// Cleared alerts, oldest first.
  const std::deque<alert>& recent() const {
    return recent_;
  }

  /// {"active": [...], "recent": [...]}.
  json to_json() const {
    auto one = [](const alert& a) {
      json j{{"rule", a.rule},
             {"task", a.task},
             {"message", a.message},
             {"fired_us", a.fired_us}};
      if (a.cleared_us != 0)
        j["cleared_us"] = a.cleared_us;
      return j;
    };
    json active = json::array();
    for (auto& a : active_)
      active.push_back(one(a));
    json recent = json::array();
    for (auto& a : recent_)
      recent.push_back(one(a));
    return {{"active", std::move(active)}, {"recent", std::move(recent)}};
  }

private:
  alert_rules rules_;
  std::vector<alert> active_;
  std::deque<alert> recent_;
};

} // namespace actorflow::apps
