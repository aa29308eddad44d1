#pragma once

// A process's recent log lines, kept for the monitoring console: the
// engine's and the apps' lines go to stderr as always and also here, into
// a bounded ring (the oldest line goes when it is full), from which a
// task's monitor sends them on (monitor_actor). Thread-safe; adding a
// line takes a mutex for a copy, never blocks on I/O.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow {

enum class log_level : uint8_t { trace, debug, info, warning, error };

/// "trace", "debug", "info", "warning" or "error".
std::string_view to_string(log_level level);

struct log_entry {
  uint64_t seq = 0; ///< 1 for the process's first line, then one more each
  int64_t at_us = 0; ///< wall clock, us since the epoch
  log_level level = log_level::info;
  std::string text;
};

class log_ring {
public:
  /// Keeps the last `capacity` lines, each cut at `max_line` bytes.
  explicit log_ring(size_t capacity = 2000, size_t max_line = 2000);

  /// The process's ring (what the engine and the apps log).
  static log_ring& instance();

  /// Adds `text` at `level`, taken at `at_us` (0: now).
  void add(log_level level, std::string_view text, int64_t at_us = 0);

  /// The lines after `after` (a seq; 0 for all kept), oldest first, at
  /// most the last `max` of them.
  std::vector<log_entry> since(uint64_t after, size_t max = SIZE_MAX) const;

  /// The seq of the last line added (0: none yet).
  uint64_t last_seq() const;

private:
  mutable std::mutex mtx_;
  size_t capacity_;
  size_t max_line_;
  std::vector<log_entry> ring_; ///< ring_[seq % capacity_]
  uint64_t last_ = 0;
};

/// The level of an engine line said without one (the task actors' notes on
/// replicas and membership): a warning when it tells of a loss or a
/// failure, info otherwise.
inline log_level log_level_of(std::string_view text) {
  for (auto word : {"lost", "could not", "cannot", "no longer", "failed"})
    if (text.find(word) != std::string_view::npos)
      return log_level::warning;
  return log_level::info;
}

/// Adds a line to the process's ring (log_ring::instance()).
inline void note_log(log_level level, std::string_view text) {
  log_ring::instance().add(level, text);
}

} // namespace actorflow
