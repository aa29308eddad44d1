#pragma once

// Shared bits of the integration tests: the launcher's path, error capture
// and trace queries.

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "actorflow/actorflow.hpp"

#include "local_cluster.hpp"
#include "common/test_util.hpp"
#include "common/session_util.hpp"

namespace actorflow::testing {

using namespace std::chrono_literals;
using examples::child_process;
using examples::local_cluster;
using examples::run_process;

/// The launcher built alongside the tests.
inline const std::string node_path = ACTORFLOW_NODE_PATH;

/// Devices on which the traced step ran node `name`.
inline std::set<std::string> devices_running(const run_metadata& md,
                                             const std::string& name) {
  std::set<std::string> result;
  for (const auto& dev : md.stats.dev_stats)
    for (const auto& node : dev.node_stats)
      if (node.node_name == name)
        result.insert(dev.device);
  return result;
}

/// The trace as the seed prints it, for failure messages.
inline std::string trace_text(const run_metadata& md) {
  std::string result;
  for (const auto& dev : md.stats.dev_stats) {
    result += dev.device + "\n";
    for (const auto& node : dev.node_stats)
      result += "   " + node.node_name + "\n";
  }
  return result;
}

inline run_options full_trace() {
  run_options opts;
  opts.trace_level = run_options::full_trace;
  return opts;
}

inline std::string cpu0(const std::string& job, int task) {
  return "/job:" + job + "/replica:0/task:" + std::to_string(task)
         + "/device:CPU:0";
}

/// Nodes whose stderr we keep, so a failing test can show it.
inline examples::cluster_options captured() {
  examples::cluster_options opts;
  opts.capture_stderr = true;
  opts.echo_stdout = false;
  return opts;
}

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now()
                                       - start)
    .count();
}

} // namespace actorflow::testing
