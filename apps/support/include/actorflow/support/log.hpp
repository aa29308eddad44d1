#pragma once

// The apps' log lines, through spdlog (Debian's libspdlog-dev), in one
// format for every app:
//
//   actorflow-node: serving /job:ps/replica:0/task:0 at 127.0.0.1:2222
//   actorflow-node: error: --task_index: job 'ps' has no task 7
//
// "<program>: " then, for every level but info, the level ("debug: ",
// "warning: ", "error: "), then the message; one line per call, to standard
// error, written whole (tasks of --local share a terminal). --log_level
// (trace, debug, info, warning, error, off; default info) hides the levels
// below it; the lines it lets through also go to the process's log_ring
// (the console's logs view). What a program prints as its result (progress, accuracy,
// snapshots) goes to standard output and is not a log line.

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "actorflow/graph/log_ring.hpp"

namespace actorflow::support::log {

namespace detail {

/// The pattern flag %* : the level, except for info.
class level_prefix : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view text;
    switch (msg.level) {
      case spdlog::level::trace:
        text = "trace: ";
        break;
      case spdlog::level::debug:
        text = "debug: ";
        break;
      case spdlog::level::warn:
        text = "warning: ";
        break;
      case spdlog::level::err:
      case spdlog::level::critical:
        text = "error: ";
        break;
      default:
        break;
    }
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<level_prefix>();
  }
};

/// Copies each line into the process's log_ring, which the task's monitor
/// sends to the console (its logs view).
class ring_sink : public spdlog::sinks::base_sink<std::mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto level = log_level::info;
    switch (msg.level) {
      case spdlog::level::trace:
        level = log_level::trace;
        break;
      case spdlog::level::debug:
        level = log_level::debug;
        break;
      case spdlog::level::warn:
        level = log_level::warning;
        break;
      case spdlog::level::err:
      case spdlog::level::critical:
        level = log_level::error;
        break;
      default:
        break;
    }
    note_log(level, {msg.payload.data(), msg.payload.size()});
  }
  void flush_() override {
    // nop
  }
};

inline std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance;
  return instance;
}

} // namespace detail

/// The levels --log_level accepts.
inline constexpr const char* levels = "trace, debug, info, warning, error or "
                                      "off";

/// The level named `name` ("warn" too), or false.
inline bool parse_level(const std::string& name, spdlog::level::level_enum& out) {
  if (name == "warning" || name == "warn") {
    out = spdlog::level::warn;
    return true;
  }
  for (auto level : {spdlog::level::trace, spdlog::level::debug,
                     spdlog::level::info, spdlog::level::err,
                     spdlog::level::off}) {
    auto text = spdlog::level::to_string_view(level);
    if (name == std::string_view{text.data(), text.size()}
        || (level == spdlog::level::err && name == "error")) {
      out = level;
      return true;
    }
  }
  return false;
}

/// Sets up `program`'s logger at `level` (one of `levels`; info if not).
/// Call once, first thing in main; lines logged before go out at info.
inline void init(const std::string& program, const std::string& level = "info") {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<detail::level_prefix>('*').set_pattern("%n: %*%v");
  sink->set_formatter(std::move(formatter));
  auto l = std::make_shared<spdlog::logger>(
    program, spdlog::sinks_init_list{sink,
                                     std::make_shared<detail::ring_sink>()});
  auto lvl = spdlog::level::info;
  parse_level(level, lvl);
  l->set_level(lvl);
  l->flush_on(spdlog::level::trace);
  detail::logger() = std::move(l);
}

inline spdlog::logger& get() {
  if (!detail::logger())
    init("actorflow");
  return *detail::logger();
}

inline void debug(const std::string& line) {
  get().debug(line);
}
inline void info(const std::string& line) {
  get().info(line);
}
inline void warning(const std::string& line) {
  get().warn(line);
}
inline void error(const std::string& line) {
  get().error(line);
}

} // namespace actorflow::support::log
