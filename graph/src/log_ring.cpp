#include "actorflow/graph/log_ring.hpp"

#include <algorithm>
#include <chrono>

namespace actorflow {

std::string_view to_string(log_level level) {
  switch (level) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
  }
  return "info";
}

log_ring::log_ring(size_t capacity, size_t max_line)
  : capacity_(std::max<size_t>(capacity, 1)), max_line_(max_line) {
  // nop
}

log_ring& log_ring::instance() {
  static log_ring ring;
  return ring;
}

void log_ring::add(log_level level, std::string_view text, int64_t at_us) {
  if (at_us == 0)
    at_us = std::chrono::duration_cast<std::chrono::microseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count();
  // One line per entry: a trailing newline is the writer's, not the text's.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.remove_suffix(1);
  std::lock_guard<std::mutex> guard{mtx_};
  auto seq = ++last_;
  // Grown as lines come: a process that logs little keeps little.
  auto index = seq % capacity_;
  if (index >= ring_.size())
    ring_.resize(std::min(capacity_, std::max(index + 1, ring_.size() * 2)));
  auto& e = ring_[index];
  e.seq = seq;
  e.at_us = at_us;
  e.level = level;
  e.text.assign(text.substr(0, max_line_));
}

std::vector<log_entry> log_ring::since(uint64_t after, size_t max) const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<log_entry> out;
  if (last_ == 0 || after >= last_ || max == 0)
    return out;
  auto kept = std::min<uint64_t>(last_, capacity_);
  auto first = std::max<uint64_t>({after + 1, last_ - kept + 1,
                                   last_ >= max ? last_ - max + 1 : 1});
  out.reserve(last_ - first + 1);
  for (auto seq = first; seq <= last_; ++seq)
    out.push_back(ring_[seq % capacity_]);
  return out;
}

uint64_t log_ring::last_seq() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return last_;
}

} // namespace actorflow
