#pragma once

// actorflow-console's terminal UI (ncurses): views of the cluster, the
// actors (sortable, filterable, with a detail pane and its charts), steps,
// queues, variables, training, the tasks' logs, the alerts and the
// topology (terminal_panels.hpp). It redraws from copies of the
// cluster_watch's views at most every 250 ms and never waits on the
// network.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

// ncurses' function-like macros (timeout, ...) would rewrite CAF's
// members of the same names: the functions only.
#define NCURSES_NOMACROS
#include <ncurses.h>

#include "console/cluster_watch.hpp"
#include "console/format.hpp"
#include "console/terminal_panels.hpp"

namespace actorflow::apps {

class terminal_ui {
public:
  explicit terminal_ui(cluster_watch& watch) : watch_(watch) {
    // nop
  }

  /// Runs until q or `stop` becomes true (a signal).
  void run(const std::atomic<bool>& stop) {
    ::initscr();
    ::cbreak();
    ::noecho();
    ::keypad(stdscr, TRUE);
    ::curs_set(0);
    ::timeout(250);
    while (!stop) {
      draw();
      int key = ::getch();
      if (key == ERR)
        continue;
      if (!handle(key))
        break;
    }
    ::endwin();
  }

private:
  enum class view {
    cluster,
    actors,
    steps,
    queues,
    variables,
    training,
    logs,
    alerts,
    topology
  };
  static constexpr int views = 9;

  static constexpr const char* sort_names[] = {"mailbox", "msgs/s", "busy",
                                               "name"};

  struct row {
    std::string task;
    json actor;
  };

  // -- input -------------------------------------------------------------------

  bool handle(int key) {
    if (editing_filter_) {
      // The logs view searches its lines; elsewhere the actors are filtered.
      auto& text = view_ == view::logs ? logs_.search : filter_;
      if (key == '\n' || key == KEY_ENTER || key == 27) {
        editing_filter_ = false;
        if (key == 27)
          text.clear();
      } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
        if (!text.empty())
          text.pop_back();
      } else if (key >= 32 && key < 127) {
        text += static_cast<char>(key);
      }
      selected_ = 0;
      logs_.back = 0;
      return true;
    }
    if (help_) {
      help_ = false;
      return key != 'q';
    }
    switch (key) {
      case 'q':
        return false;
      case '?':
        help_ = true;
        break;
      case '1':
        view_ = view::cluster;
        break;
      case '2':
        view_ = view::actors;
        break;
      case '3':
        view_ = view::steps;
        break;
      case '4':
        view_ = view::queues;
        break;
      case '5':
        view_ = view::variables;
        break;
      case '6':
        view_ = view::training;
        break;
      case '7':
        view_ = view::logs;
        break;
      case '8':
        view_ = view::alerts;
        break;
      case '9':
        view_ = view::topology;
        break;
      case '\t':
        view_ = static_cast<view>((static_cast<int>(view_) + 1) % views);
        break;
      case 'l':
        logs_.min_level = (logs_.min_level + 1) % 3;
        logs_.back = 0;
        break;
      case 's':
        sort_ = (sort_ + 1) % 4;
        break;
      case '/':
        editing_filter_ = true;
        if (view_ == view::logs) {
          logs_.search.clear();
        } else {
          filter_.clear();
          view_ = view::actors;
        }
        break;
      case 'n':
        task_filter_ = (task_filter_ + 1) % (watch_.view().size() + 1);
        logs_.task = task_filter_;
        selected_ = 0;
        logs_.back = 0;
        break;
      case KEY_UP:
      case 'k':
        if (view_ == view::logs)
          ++logs_.back;
        else if (selected_ > 0)
          --selected_;
        break;
      case KEY_DOWN:
      case 'j':
        if (view_ == view::logs) {
          if (logs_.back > 0)
            --logs_.back;
        } else {
          ++selected_;
        }
        break;
      case '\n':
      case KEY_ENTER:
        detail_ = !detail_;
        break;
      default:
        break;
    }
    return true;
  }

  // -- drawing -------------------------------------------------------------------

  std::vector<row> actor_rows(const std::vector<task_view>& tasks,
                              const char* kind = nullptr) {
    std::vector<row> rows;
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (task_filter_ != 0 && task_filter_ != t + 1)
        continue;
      auto& v = tasks[t];
      if (!v.has_node || v.state != "up")
        continue;
      for (auto& a : v.node["actors"]) {
        auto k = a.value("kind", "");
        auto name = a.value("name", "");
        if (kind != nullptr && k != kind)
          continue;
        if (!filter_.empty() && k.find(filter_) == std::string::npos
            && name.find(filter_) == std::string::npos)
          continue;
        rows.push_back({v.task, a});
      }
    }
    auto key = [this](const row& r) {
      switch (sort_) {
        case 0:
          return r.actor.value("mailbox", 0.0) * 1e6
                 + r.actor.value("mailbox_max", 0.0);
        case 1:
          return r.actor.value("messages_per_s", 0.0);
        case 2:
          return r.actor.value("busy_percent", 0.0);
        default:
          return 0.0;
      }
    };
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const row& x, const row& y) {
                       if (sort_ == 3)
                         return x.actor.value("name", "")
                                < y.actor.value("name", "");
                       return key(x) > key(y);
                     });
    return rows;
  }

  void draw() {
    auto tasks = watch_.view();
    ::erase();
    size_t up = std::count_if(tasks.begin(), tasks.end(),
                              [](const task_view& v) {
                                return v.state == "up";
                              });
    const char* names[] = {"1 Cluster",  "2 Actors", "3 Steps",
                           "4 Queues",   "5 Variables", "6 Training",
                           "7 Logs",     "8 Alerts", "9 Topology"};
    auto alerts = watch_.active_alerts();
    auto head = fmt("actorflow-console  %zu tasks, %zu up", tasks.size(), up)
                + (alerts.empty() ? std::string{"   "}
                                  : fmt(", %zu ALERTS   ", alerts.size()));
    // Every view's name when they fit, else the current one's and digits.
    std::string tabs;
    for (int i = 0; i < views; ++i)
      tabs += i == static_cast<int>(view_)
                ? std::string{"["} + names[i] + "] "
                : std::string{" "} + names[i] + "  ";
    if (head.size() + tabs.size() > static_cast<size_t>(COLS)) {
      tabs.clear();
      for (int i = 0; i < views; ++i)
        tabs += i == static_cast<int>(view_)
                  ? std::string{"["} + names[i] + "] "
                  : std::string{names[i], 1} + " ";
    }
    tui::line(0, head + tabs, A_BOLD);
    std::string scope = task_filter_ == 0 || task_filter_ > tasks.size()
                          ? "all tasks"
                          : short_task(tasks[task_filter_ - 1].task);
    tui::line(LINES - 1,
         "q quit  ? help  1-9/Tab views  s sort(" + std::string{sort_names[sort_]}
           + ")  / filter" + (filter_.empty() ? "" : "(" + filter_ + ")")
           + "  n task(" + scope + ")  Enter detail"
           + (editing_filter_ ? "   filter: " + filter_ + "_" : ""),
         A_REVERSE);
    if (help_) {
      draw_help();
    } else {
      switch (view_) {
        case view::cluster:
          draw_cluster(tasks);
          break;
        case view::actors:
          draw_actors(tasks);
          break;
        case view::steps:
          draw_steps(tasks);
          break;
        case view::queues:
          draw_queues(tasks);
          break;
        case view::variables:
          draw_variables(tasks);
          break;
        case view::training:
          draw_training(tasks);
          break;
        case view::logs:
          tui::draw_logs(tasks, logs_, 2, LINES - 1);
          break;
        case view::alerts:
          tui::draw_alerts(alerts, watch_.recent_alerts(), 2, LINES - 1);
          break;
        case view::topology:
          tui::draw_topology(tasks, 2, LINES - 1);
          break;
      }
    }
    ::refresh();
  }

  void draw_help() {
    const char* text[] = {
      "Keys",
      "  1 Cluster   tasks, up/down and since when, round trip, process, "
      "channel bytes/s",
      "  2 Actors    every actor: mailbox now/max, messages/s, busy %",
      "  3 Steps     per master: steps, steps/s, p50/p99, errors by code",
      "  4 Queues    size/capacity, closed, blocked enqueues and dequeues",
      "  5 Variables dtype and shape, bytes, updates and updates/s",
      "  6 Training  global step, loss, examples/s, accuracy",
      "  7 Logs      the tasks' recent log lines, live (n task, l level, "
      "/ search, j/k scroll)",
      "  8 Alerts    active alerts and those cleared lately",
      "  9 Topology  which tasks talk to which: CAF and tensor channel, "
      "bytes/s",
      "  Tab         next view",
      "  s           sort actors: mailbox, msgs/s, busy, name",
      "  /           filter actors by kind or name (Enter ends, Esc clears)",
      "  n           one task at a time, or all",
      "  Up/Down j/k select an actor; Enter shows its detail and charts",
      "  q           quit (also SIGINT/SIGTERM)",
      "",
      "Any key closes this help."};
    int y = 2;
    for (auto* t : text)
      tui::line(y++, t);
  }

  void draw_cluster(const std::vector<task_view>& tasks) {
    tui::line(2,
         fmt("%-28s %-22s %-6s %6s %9s %6s %9s %8s %7s %6s", "TASK",
             "ADDRESS", "STATE", "SINCE", "RTT", "ACTORS", "RSS", "CPU s",
             "THREADS", "FDS"),
         A_BOLD);
    int y = 3;
    for (auto& v : tasks) {
      std::string rss = "-", cpu = "-", threads = "-", fds = "-";
      std::string actors = "-";
      // A task that is not up (or stale) keeps its last-known values,
      // dimmed: they are not live.
      if (v.has_node) {
        auto& p = v.node["process"];
        rss = bytes(p.value("rss_bytes", 0.0));
        cpu = fmt("%.1f", p.value("cpu_seconds", 0.0));
        threads = std::to_string(p.value("threads", 0));
        fds = std::to_string(p.value("open_fds", 0));
        actors = std::to_string(v.node["actors"].size());
      }
      bool live = v.state == "up" && !v.stale;
      auto rtt = v.rtt_us >= 0 && live ? fmt("%.0fus", v.rtt_us)
                                       : std::string{"-"};
      auto state = v.state == "down" ? "DOWN"
                   : v.state != "up" ? "..."
                   : v.stale         ? "stale"
                                     : "up";
      auto since = v.stale ? ago(v.updated_us) : ago(v.since_us);
      tui::line(y++,
           fmt("%-28s %-22s %-6s %6s %9s %6s %9s %8s %7s %6s",
               v.task.c_str(), v.address.c_str(), state, since.c_str(),
               rtt.c_str(), actors.c_str(), rss.c_str(), cpu.c_str(),
               threads.c_str(), fds.c_str()),
           live ? 0 : A_DIM);
      if (v.state == "down") {
        y = tui::wrapped(y, v.error, "    ", A_BOLD);
        if (!v.last_error.empty())
          y = tui::wrapped(y, v.last_error, "    then: ");
      }
    }
    ++y;
    tui::line(y++, "Tensor channel (between processes)", A_BOLD);
    tui::line(y++, fmt("%-10s %-4s %-22s %-5s %10s %10s %9s %9s", "TASK", "DIR",
                  "PEER", "UP", "BYTES", "BYTES/S", "FRAMES", "LAST"));
    for (auto& v : tasks) {
      if (!v.has_node || v.state != "up")
        continue;
      for (auto& l : v.node["channel"])
        tui::line(y++,
             fmt("%-10s %-4s %-22s %-5s %10s %10s %9llu %9s",
                 short_task(v.task).c_str(),
                 l.value("direction", "").c_str(),
                 l.contains("peer_task")
                   ? short_task(l["peer_task"].get<std::string>()).c_str()
                   : l.value("peer", "").c_str(),
                 l.value("orphaned", false) ? "orph"
                 : l.value("up", false)      ? "yes"
                                             : "no",
                 bytes(l.value("bytes", 0.0)).c_str(),
                 bytes(l.value("bytes_per_s", 0.0)).c_str(),
                 static_cast<unsigned long long>(l.value("frames", 0ULL)),
                 (ago(l.value("last_us", int64_t{0})) + " ago").c_str()));
    }
    ++y;
    tui::line(y++, "Peers (CAF connections a master made)", A_BOLD);
    for (auto& v : tasks) {
      if (!v.has_node || v.state != "up")
        continue;
      for (auto& p : v.node["peers"])
        tui::line(y++, fmt("%-10s -> %-28s %-22s %-4s %6s %s",
                      short_task(v.task).c_str(),
                      p.value("peer", "").c_str(),
                      p.value("address", "").c_str(),
                      p.value("up", false) ? "up" : "DOWN",
                      ago(p.value("since_us", int64_t{0})).c_str(),
                      p.value("reason", "").c_str()));
    }
  }

  void draw_actors(const std::vector<task_view>& tasks) {
    auto rows = actor_rows(tasks);
    if (!rows.empty())
      selected_ = std::min(selected_, rows.size() - 1);
    // The name takes what the other columns leave of the width (they take
    // 65), at least 15: at 80 columns every number stays on screen.
    int name_width = std::max(15, COLS - 65);
    tui::line(2,
         fmt("%-8s %-11s %-*s %7s %7s %9s %6s %10s", "TASK", "KIND",
             name_width, "NAME", "MAILBOX", "MAX", "MSGS/S", "BUSY%",
             "MESSAGES"),
         A_BOLD);
    int bottom = detail_ ? LINES - 16 : LINES - 2;
    int y = 3;
    size_t first = selected_ >= static_cast<size_t>(bottom - y)
                     ? selected_ - static_cast<size_t>(bottom - y) + 1
                     : 0;
    for (size_t i = first; i < rows.size() && y < bottom; ++i) {
      auto& a = rows[i].actor;
      tui::line(y++,
           fmt("%-8s %-11s %-*.*s %7d %7d %9.1f %6.1f %10llu",
               short_task(rows[i].task).c_str(),
               a.value("kind", "").c_str(), name_width, name_width,
               ((a.value("orphaned", false) ? "(orphaned) " : "")
                + a.value("name", ""))
                 .c_str(),
               a.value("mailbox", 0), a.value("mailbox_max", 0),
               a.value("messages_per_s", 0.0), a.value("busy_percent", 0.0),
               static_cast<unsigned long long>(a.value("messages", 0ULL))),
           i == selected_ ? A_REVERSE : 0);
    }
    if (rows.empty())
      tui::line(y, "  (no actors match)");
    if (detail_ && !rows.empty()) {
      auto& r = rows[selected_];
      auto& a = r.actor;
      int d = LINES - 15;
      tui::line(d++, "Detail", A_BOLD);
      tui::line(d++, "  kind " + a.value("kind", "") + "   id "
                  + std::to_string(a.value("id", 0ULL)) + "   task "
                  + r.task);
      tui::line(d++, "  name " + a.value("name", "") + "   container '"
                  + a.value("container", "") + "'");
      tui::line(d++, "  since " + ago(a.value("since_us", int64_t{0}))
                  + " ago   messages "
                  + std::to_string(a.value("messages", 0ULL))
                  + fmt("   busy %.3f s, longest %.3f ms (recent)",
                        a.value("busy_us", 0.0) / 1e6,
                        a.value("busy_max_us", 0.0) / 1e3));
      tui::line(d++, fmt("  mailbox %d now, %d max (recent)",
                    a.value("mailbox", 0), a.value("mailbox_max", 0)));
      if (!a["gauges"].empty()) {
        std::string gauges = "  ";
        for (auto& [k, g] : a["gauges"].items())
          gauges += k + " " + g.dump() + "   ";
        tui::line(d++, gauges);
      }
      if (!a.value("detail", "").empty())
        tui::line(d++, "  " + a.value("detail", ""));
      // Its recent figures, one column per update.
      for (auto& v : tasks) {
        if (v.task != r.task)
          continue;
        auto s = v.past->actor_history.find(a.value("id", uint64_t{0}));
        if (s == v.past->actor_history.end())
          break;
        auto width = static_cast<size_t>(std::max(COLS - 26, 10));
        for (auto [label, values] :
             {std::pair{"msgs/s", &s->second.messages_per_s},
              std::pair{"mailbox", &s->second.mailbox},
              std::pair{"busy %", &s->second.busy_percent}}) {
          double top = 0;
          auto spark = tui::sparkline(*values, width, top);
          tui::line(d++, fmt("  %-8s max %8.1f |", label, top) + spark);
        }
        break;
      }
    }
  }

  void draw_steps(const std::vector<task_view>& tasks) {
    tui::line(2,
         fmt("%-28s %10s %8s %9s %9s %9s %7s  %s", "MASTER", "STEPS",
             "STEPS/S", "P50", "P99", "LAST", "ERRORS", "BY CODE"),
         A_BOLD);
    int y = 3;
    std::vector<std::string> errors;
    for (auto& v : tasks) {
      if (!v.has_node || v.state != "up")
        continue;
      auto& s = v.node["steps"];
      std::string codes;
      for (auto& [code, n] : s["by_code"].items())
        codes += code + ":" + n.dump() + " ";
      tui::line(y++, fmt("%-28s %10llu %8.1f %7.0fus %7.0fus %7.0fus %7llu  %s",
                    v.task.c_str(),
                    static_cast<unsigned long long>(s.value("total", 0ULL)),
                    s.value("per_s", 0.0), s.value("p50_us", 0.0),
                    s.value("p99_us", 0.0), s.value("last_us", 0.0),
                    static_cast<unsigned long long>(s.value("errors", 0ULL)),
                    codes.c_str()));
      for (auto& e : s["last_errors"])
        errors.push_back(short_task(v.task) + " "
                         + ago(e.value("at_us", int64_t{0})) + " ago "
                         + e.value("code", "") + ": "
                         + e.value("message", ""));
    }
    ++y;
    tui::line(y++, "Last errors", A_BOLD);
    for (auto& e : errors)
      tui::line(y++, "  " + e);
    if (errors.empty())
      tui::line(y++, "  (none)");
  }

  void draw_queues(const std::vector<task_view>& tasks) {
    tui::line(2,
         fmt("%-8s %-30s %9s %9s %7s %9s %9s %9s %8s %7s", "TASK", "QUEUE",
             "SIZE", "CAPACITY", "CLOSED", "BLOCK ENQ", "BLOCK DEQ",
             "WITHDRAWN", "RETURNED", "MAILBOX"),
         A_BOLD);
    int y = 3;
    for (auto& r : actor_rows(tasks, "queue")) {
      auto& g = r.actor["gauges"];
      auto cap = g.value("capacity", int64_t{-1});
      tui::line(y++, fmt("%-8s %-30.30s %9lld %9s %7s %9lld %9lld %9lld %8lld %7d",
                    short_task(r.task).c_str(),
                    r.actor.value("name", "").c_str(),
                    static_cast<long long>(g.value("size", int64_t{0})),
                    cap < 0 ? "inf" : std::to_string(cap).c_str(),
                    g.value("closed", 0) != 0 ? "yes" : "no",
                    static_cast<long long>(
                      g.value("blocked_enqueues", int64_t{0})),
                    static_cast<long long>(
                      g.value("blocked_dequeues", int64_t{0})),
                    static_cast<long long>(g.value("withdrawn", int64_t{0})),
                    static_cast<long long>(g.value("returned", int64_t{0})),
                    r.actor.value("mailbox", 0)));
    }
    if (y == 3)
      tui::line(y, "  (no queues)");
  }

  void draw_variables(const std::vector<task_view>& tasks) {
    tui::line(2,
         fmt("%-8s %-34s %-22s %9s %5s %10s %9s", "TASK", "VARIABLE",
             "DTYPE SHAPE", "BYTES", "INIT", "UPDATES", "UPDATES/S"),
         A_BOLD);
    int y = 3;
    for (auto& r : actor_rows(tasks, "variable")) {
      auto& g = r.actor["gauges"];
      tui::line(y++, fmt("%-8s %-34.34s %-22.22s %9s %5s %10lld %9.1f",
                    short_task(r.task).c_str(),
                    r.actor.value("name", "").c_str(),
                    r.actor.value("detail", "").c_str(),
                    bytes(g.value("bytes", 0.0)).c_str(),
                    g.value("initialized", 0) != 0 ? "yes" : "no",
                    static_cast<long long>(g.value("updates", int64_t{0})),
                    r.actor.value("updates_per_s", 0.0)));
    }
    if (y == 3)
      tui::line(y, "  (no variables)");
  }

  void draw_training(const std::vector<task_view>& tasks) {
    tui::line(2,
         fmt("%-28s %12s %10s %8s %12s %9s %6s", "TASK", "GLOBAL STEP",
             "LOCAL", "LOSS", "EXAMPLES/S", "ACCURACY", "AGE"),
         A_BOLD);
    int y = 3;
    for (auto& v : tasks) {
      // A trainer that finished (or died) keeps its last progress, dimmed.
      if (!v.has_node)
        continue;
      bool live = v.state == "up" && !v.stale;
      for (auto& t : v.node["training"]) {
        auto acc = t.value("accuracy", -1.0);
        tui::line(y++,
             fmt("%-28s %12lld %10lld %8.4f %12.0f %9s %6s",
                 t.value("task", "").c_str(),
                 static_cast<long long>(t.value("global_step", int64_t{0})),
                 static_cast<long long>(t.value("local_step", int64_t{0})),
                 t.value("loss", 0.0), t.value("examples_per_sec", 0.0),
                 acc < 0 ? "-" : fmt("%.4f", acc).c_str(),
                 ago(t.value("updated_us", int64_t{0})).c_str()),
             live ? 0 : A_DIM);
      }
    }
    if (y == 3)
      tui::line(y, "  (no trainer has reported progress)");
  }

  cluster_watch& watch_;
  view view_ = view::cluster;
  int sort_ = 0;
  std::string filter_;
  bool editing_filter_ = false;
  size_t task_filter_ = 0;
  size_t selected_ = 0;
  bool detail_ = false;
  bool help_ = false;
  tui::log_filter logs_;
};

} // namespace actorflow::apps
