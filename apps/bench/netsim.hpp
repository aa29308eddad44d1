#pragma once

// The bench's simulated network (--netsim): how its hosts are named and
// addressed, shared by the switch (netsim_switch.cpp) and the group that
// measures across it (netsim.cpp). A switch named NAME makes the network
// namespaces NAMEh0, NAMEh1, ..., host i at 10.77.0.(i+1) on its device
// NAMEt<i>.

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "actorflow/support/process.hpp"

namespace actorflow::bench {

/// What the switch prints once its hosts are up.
constexpr const char* switch_marker = "netsim switch ready";

/// At most this many hosts (the switch's --hosts).
constexpr int max_hosts = 16;

inline std::string host_ip(int i) {
  return "10.77.0." + std::to_string(i + 1);
}

inline std::string netns_name(const std::string& name, int i) {
  return name + "h" + std::to_string(i);
}

inline std::string device_name(const std::string& name, int i) {
  return name + "t" + std::to_string(i);
}

/// Debian's `ip` (iproute2), looked up once; std::invalid_argument if
/// there is none.
inline const std::string& ip_binary() {
  static const std::string path = support::find_program("ip", "", "");
  return path;
}

/// Runs `ip ARGS...` (at most 10 s), or throws std::runtime_error with
/// what it said. Blocks.
inline void ip_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ip_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto res = support::run_process(argv, std::chrono::seconds{10});
  if (res.timed_out || !res.status.success()) {
    std::string line;
    for (const auto& a : args)
      line += " " + a;
    throw std::runtime_error("netsim: ip" + line + ": "
                             + (res.timed_out ? std::string{"timed out"}
                                              : res.status.to_string())
                             + ": " + res.err);
  }
}

} // namespace actorflow::bench
