#pragma once

// How actorflow-console writes numbers, ages and task names: shared by
// the terminal UI and the --once summary.

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>

#include "actorflow/graph/device_name.hpp"
#include "console/cluster_watch.hpp"

namespace actorflow::apps {

/// printf into a string (at most 511 characters).
inline std::string fmt(const char* format, ...)
  __attribute__((format(printf, 1, 2)));

inline std::string fmt(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

/// The clock ages are taken against: now, or a replay's time (set by the
/// console's main).
inline std::function<int64_t()>& display_clock() {
  static std::function<int64_t()> clock = console_now_us;
  return clock;
}

/// How long ago `since_us` (wall clock) was: "12s", "5m", "2h"; "-" for 0.
inline std::string ago(int64_t since_us) {
  if (since_us <= 0)
    return "-";
  auto s = (display_clock()() - since_us) / 1000000;
  if (s < 120)
    return std::to_string(s) + "s";
  if (s < 7200)
    return std::to_string(s / 60) + "m";
  return std::to_string(s / 3600) + "h";
}

/// Bytes in decimal units: "512B", "1.5MB".
inline std::string bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return fmt(u == 0 ? "%.0f%s" : "%.1f%s", b, units[u]);
}

/// "/job:ps/replica:0/task:0" -> "ps/0".
inline std::string short_task(const std::string& task) {
  device_name d;
  if (!device_name::parse(task, d).ok() || !d.job || !d.task)
    return task;
  return *d.job + "/" + std::to_string(*d.task);
}

} // namespace actorflow::apps
