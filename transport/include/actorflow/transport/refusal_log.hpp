#pragma once

// Says refusals (connections, requests, handshakes refused) at a bounded
// rate: a flood of them must not flood the log. One class for every place
// that refuses peers: the connection guard (transport), /metrics over TLS
// (client) and the console's web UI (apps). CAF-free.

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

namespace actorflow {

/// Passes lines to `sink`: at most `burst` per `window`; the first line of
/// a later window says how many were not shown before it. Thread-safe;
/// `sink` runs under the log's lock (it must not say more itself). Never
/// blocks beyond that lock.
class refusal_log {
public:
  using clock = std::chrono::steady_clock;

  explicit refusal_log(std::function<void(const std::string&)> sink,
                       size_t burst = 5,
                       clock::duration window = std::chrono::seconds{60})
    : sink_(std::move(sink)), burst_(burst), window_(window) {
    // nop
  }

  /// Says `line` (at `now`) unless `burst` lines were said in this window.
  void say(const std::string& line, clock::time_point now = clock::now()) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (now - start_ >= window_) {
      start_ = now;
      said_ = 0;
    }
    if (said_ >= burst_) {
      ++hidden_;
      return;
    }
    ++said_;
    auto text = line;
    if (hidden_ > 0)
      text += " (and " + std::to_string(hidden_)
              + " more refusals before, not shown)";
    hidden_ = 0;
    if (sink_)
      sink_(text);
  }

private:
  std::function<void(const std::string&)> sink_;
  size_t burst_;
  clock::duration window_;
  std::mutex mtx_;
  clock::time_point start_{};
  size_t said_ = 0;
  size_t hidden_ = 0;
};

} // namespace actorflow
