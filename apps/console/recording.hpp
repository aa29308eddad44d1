#pragma once

// actorflow-console --record FILE writes what the console receives (each
// task's updates, state changes and round trips, with when they came) as
// JSON lines, so that --replay FILE shows the run again in either UI after
// the cluster is gone. The first line says what the file is:
//
//   {"actorflow_console_recording": 1, "cluster": {...}, "interval_ms": N,
//    "started_us": N}
//   {"at_us": N, "task": I, "update": {...}}       a monitor document
//   {"at_us": N, "task": I, "state": "down", "error": "..."}
//   {"at_us": N, "task": I, "subscribed": true}   a new subscription
//   {"at_us": N, "task": I, "rtt_us": X}
//
// `I` indexes the cluster's tasks in the order of its jobs and indices. A
// recording holds a subscription's first document whole (with the task's
// history) and deltas after it: a few KB per task per interval.

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace actorflow::apps {

/// Writes a recording on a thread of its own, so that the watcher actors
/// never wait on the disk. Lines that find the writer more than
/// `max_queued` behind are dropped and counted.
class recorder {
public:
  static constexpr size_t max_queued = 10000;

  /// Opens `path` for writing (truncated) and writes the header. Throws
  /// std::runtime_error naming the file when it cannot.
  recorder(const std::string& path, const nlohmann::json& header)
    : out_(path, std::ios::trunc), path_(path) {
    if (!out_)
      throw std::runtime_error("--record " + path + ": cannot write it");
    out_ << header.dump() << '\n';
    out_.flush();
    writer_ = std::thread{[this] { run(); }};
  }

  ~recorder() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      done_ = true;
    }
    cv_.notify_all();
    writer_.join();
  }

  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;

  /// Queues one line. Never blocks on the disk.
  void write(const nlohmann::json& line) {
    auto text = line.dump();
    std::lock_guard<std::mutex> guard{mtx_};
    if (queue_.size() >= max_queued) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(text));
    cv_.notify_one();
  }

  /// Lines dropped because the disk fell behind, or failed writes.
  size_t dropped() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return dropped_;
  }

private:
  void run() {
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      cv_.wait(guard, [this] { return done_ || !queue_.empty(); });
      std::deque<std::string> batch;
      batch.swap(queue_);
      bool done = done_;
      guard.unlock();
      size_t failed = 0;
      for (auto& line : batch)
        if (!(out_ << line << '\n'))
          ++failed;
      out_.flush();
      guard.lock();
      dropped_ += failed;
      if (done && queue_.empty())
        return;
    }
  }

  std::ofstream out_;
  std::string path_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t dropped_ = 0;
  bool done_ = false;
  std::thread writer_;
};

/// Reads a recording's lines in order. Throws std::runtime_error naming
/// the file and line when it is not one.
class recording_reader {
public:
  explicit recording_reader(const std::string& path) : in_(path), path_(path) {
    if (!in_)
      throw std::runtime_error("--replay " + path + ": cannot read it");
    std::string first;
    if (!std::getline(in_, first))
      throw std::runtime_error("--replay " + path + ": empty file");
    try {
      header_ = nlohmann::json::parse(first);
    } catch (const nlohmann::json::exception&) {
      header_ = nullptr;
    }
    if (!header_.is_object()
        || header_.value("actorflow_console_recording", 0) != 1
        || !header_.contains("cluster"))
      throw std::runtime_error("--replay " + path
                               + ": not a recording of actorflow-console "
                                 "--record (its first line says what it is)");
  }

  const nlohmann::json& header() const {
    return header_;
  }

  /// The next event, or false at the end. A line that is cut (the console
  /// was killed while writing) ends the recording.
  bool next(nlohmann::json& event) {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_;
      if (line.empty())
        continue;
      try {
        event = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        return false;
      }
      if (event.is_object() && event.contains("at_us")
          && event.contains("task"))
        return true;
    }
    return false;
  }

private:
  std::ifstream in_;
  std::string path_;
  nlohmann::json header_;
  size_t line_ = 1;
};

} // namespace actorflow::apps
