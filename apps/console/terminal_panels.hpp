#pragma once

// Pieces of actorflow-console's terminal UI (terminal_ui.hpp): writing a
// line or a wrapped text, a sparkline, and the views of the logs, the
// alerts and the topology. Each draws from copies of the watch's views
// and never waits.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#define NCURSES_NOMACROS
#include <ncurses.h>

#include "console/alerts.hpp"
#include "console/format.hpp"
#include "console/topology.hpp"

namespace actorflow::apps::tui {

/// Writes `text` on line `y`, cut to the width.
inline void line(int y, const std::string& text, int attrs = 0) {
  if (y < 0 || y >= LINES)
    return;
  ::move(y, 0);
  ::clrtoeol();
  if (attrs != 0)
    ::attron(attrs);
  ::addnstr(text.c_str(), COLS);
  if (attrs != 0)
    ::attroff(attrs);
}

/// `text` from line `y` on, cut to the screen's width, the first line
/// after `lead` and the rest indented as far; the next free line.
inline int wrapped(int y, const std::string& text, const std::string& lead,
                   int attrs = 0, int last = -1) {
  if (last < 0)
    last = LINES;
  auto width = std::max<size_t>(static_cast<size_t>(std::max(COLS, 20))
                                  - lead.size(),
                                10);
  std::string indent(lead.size(), ' ');
  for (size_t at = 0; at < text.size() && y < last; at += width)
    line(y++, (at == 0 ? lead : indent) + text.substr(at, width), attrs);
  return y;
}

/// The last `width` values as a line of ASCII levels (" .:-=+*#"), scaled
/// to their maximum; a gap where there is no value. Also the maximum.
inline std::string sparkline(const std::deque<double>& values, size_t width,
                             double& top) {
  static constexpr char levels[] = " .:-=+*#";
  top = 0;
  auto from = values.size() > width ? values.size() - width : 0;
  for (auto i = from; i < values.size(); ++i)
    if (std::isfinite(values[i]))
      top = std::max(top, values[i]);
  std::string out;
  for (auto i = from; i < values.size(); ++i) {
    auto x = values[i];
    if (!std::isfinite(x))
      out += ' ';
    else if (top <= 0)
      out += '_';
    else
      out += levels[std::clamp(static_cast<int>(x / top * 7.0 + 0.5), 1, 7)];
  }
  return out;
}

/// What the logs view shows: one task's lines or all tasks' (by time), at
/// a level and above, containing a text; `back` lines up from the newest.
struct log_filter {
  size_t task = 0; ///< 0: all tasks, else the cluster's task `task - 1`
  int min_level = 0; ///< 0 all, 1 warning and error, 2 error
  std::string search;
  size_t back = 0;
};

inline int level_rank(const std::string& level) {
  return level == "error" ? 2 : level == "warning" ? 1 : 0;
}

inline bool contains_nocase(const std::string& text, const std::string& what) {
  if (what.empty())
    return true;
  auto it = std::search(text.begin(), text.end(), what.begin(), what.end(),
                        [](char a, char b) {
                          return std::tolower(static_cast<unsigned char>(a))
                                 == std::tolower(static_cast<unsigned char>(b));
                        });
  return it != text.end();
}

/// The logs view from line `top` to `bottom` (exclusive).
inline void draw_logs(const std::vector<task_view>& tasks,
                      const log_filter& f, int top, int bottom) {
  struct entry {
    int64_t at_us;
    std::string task;
    std::string level;
    std::string text;
  };
  std::vector<entry> lines;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (f.task != 0 && f.task != t + 1)
      continue;
    for (auto& l : tasks[t].past->logs) {
      auto level = l.value("level", std::string{"info"});
      auto text = l.value("text", std::string{});
      if (level_rank(level) < f.min_level || !contains_nocase(text, f.search))
        continue;
      lines.push_back({l.value("at_us", int64_t{0}), tasks[t].task, level,
                       std::move(text)});
    }
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](auto& x, auto& y) { return x.at_us < y.at_us; });
  static const char* level_names[] = {"all levels", "warning and error",
                                      "error"};
  line(top, fmt("Logs: %s, %s%s   %zu lines   (n task, l level, / search, "
                "j/k scroll)",
                f.task == 0 || f.task > tasks.size()
                  ? "all tasks"
                  : short_task(tasks[f.task - 1].task).c_str(),
                level_names[f.min_level],
                f.search.empty() ? "" : (", \"" + f.search + "\"").c_str(),
                lines.size()),
       A_BOLD);
  int rows = bottom - top - 1;
  if (rows <= 0)
    return;
  // The newest at the bottom, `back` lines up.
  auto end = lines.size() > f.back ? lines.size() - f.back : 0;
  auto begin = end > static_cast<size_t>(rows) ? end - rows : 0;
  int y = top + 1;
  for (auto i = begin; i < end && y < bottom; ++i) {
    auto& e = lines[i];
    int attrs = e.level == "error"     ? A_BOLD
                : e.level == "warning" ? A_UNDERLINE
                                       : 0;
    auto secs = e.at_us / 1000000;
    auto lead = fmt("%02lld:%02lld:%02lld %-8s %-7s ",
                    static_cast<long long>(secs / 3600 % 24),
                    static_cast<long long>(secs / 60 % 60),
                    static_cast<long long>(secs % 60),
                    short_task(e.task).c_str(), e.level.c_str());
    y = wrapped(y, e.text, lead, attrs, bottom);
  }
  if (lines.empty())
    line(top + 1, "  (no lines match)");
}

/// The alerts view: the active ones, then those cleared lately.
inline void draw_alerts(const std::vector<alert>& active,
                        const std::deque<alert>& recent, int top,
                        int bottom) {
  line(top, fmt("Active alerts: %zu", active.size()), A_BOLD);
  int y = top + 1;
  for (auto& a : active)
    y = wrapped(y, a.message,
                fmt("  %-16s since %-5s ", a.rule.c_str(),
                    ago(a.fired_us).c_str()),
                A_BOLD, bottom);
  if (active.empty())
    line(y++, "  (none)");
  ++y;
  line(y++, fmt("Cleared lately: %zu", recent.size()), A_BOLD);
  for (auto i = recent.rbegin(); i != recent.rend() && y < bottom; ++i)
    y = wrapped(y, i->message,
                fmt("  %-16s fired %-5s ago, cleared %-5s ago  ",
                    i->rule.c_str(), ago(i->fired_us).c_str(),
                    ago(i->cleared_us).c_str()),
                A_DIM, bottom);
  if (recent.empty() && y < bottom)
    line(y, "  (none)");
}

/// The topology view: which tasks talk to which, each pair once.
inline void draw_topology(const std::vector<task_view>& tasks, int top,
                          int bottom) {
  auto edges = topology(tasks);
  line(top,
       fmt("%-10s     %-10s %-5s %-8s %11s %11s", "TASK", "TASK", "CAF",
           "CHANNEL", "A->B /S", "B->A /S"),
       A_BOLD);
  int y = top + 1;
  auto state = [](const std::optional<bool>& up) {
    return !up ? std::string{"-"} : *up ? std::string{"up"}
                                        : std::string{"DOWN"};
  };
  auto rate = [](const std::optional<double>& r) {
    return r ? bytes(*r) : std::string{"-"};
  };
  for (auto& e : edges) {
    if (y >= bottom)
      break;
    bool down = (e.caf_up && !*e.caf_up) || (e.channel_up && !*e.channel_up);
    line(y++,
         fmt("%-10s <-> %-10s %-5s %-8s %11s %11s", short_task(e.a).c_str(),
             short_task(e.b).c_str(), state(e.caf_up).c_str(),
             state(e.channel_up).c_str(), rate(e.bytes_per_s_ab).c_str(),
             rate(e.bytes_per_s_ba).c_str()),
         down ? A_BOLD : 0);
  }
  if (edges.empty())
    line(y++, "  (no task has said it talks to another yet)");
  ++y;
  // Each task's neighbours, as a person reads a map.
  for (auto& v : tasks) {
    if (y >= bottom)
      break;
    std::string peers;
    for (auto& e : edges)
      if (e.a == v.task || e.b == v.task)
        peers += (peers.empty() ? "" : ", ")
                 + short_task(e.a == v.task ? e.b : e.a);
    line(y++, fmt("%-10s %-5s talks to: %s", short_task(v.task).c_str(),
                  v.state == "up" ? "" : "DOWN",
                  peers.empty() ? "-" : peers.c_str()));
  }
}

} // namespace actorflow::apps::tui
