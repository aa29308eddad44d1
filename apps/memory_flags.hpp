#pragma once

// --memory_limit BYTES, declared here once for actorflow-node and
// actorflow-train: the process's tensor memory limit
// (actorflow/graph/tensor_memory.hpp). A step whose kernel would take the
// process's live tensors past it fails with ResourceExhausted naming the
// op, instead of the kernel's OOM killer ending the node. Without the
// flag the library's default applies: 80% of the machine's memory or of
// the cgroup's limit, whichever is lower.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "actorflow/graph/tensor_memory.hpp"
#include "command_line.hpp"

namespace actorflow::apps {

/// "18.8 GiB", "64 MiB", "512 KiB", "100 bytes".
inline std::string readable_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == static_cast<double>(static_cast<uint64_t>(value)))
    std::snprintf(text, sizeof(text), "%.0f %s", value, units[unit]);
  else
    std::snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
  return text;
}

struct memory_flag {
  std::optional<uint64_t> limit;

  /// Declares --memory_limit on `app`; returns it (actorflow-train passes
  /// it on to the tasks of --local).
  CLI::Option* add_to(CLI::App& app) {
    auto fallback = default_tensor_memory_limit();
    return app
      .add_option("--memory_limit", limit,
                  "the bytes this process's tensors may hold (K, M, G, T: "
                  "powers of 1024; 0: no limit); a step that would take "
                  "them past it fails with ResourceExhausted naming its op. "
                  "Default: 80% of the machine's memory or of the cgroup's "
                  "limit, whichever is lower (here "
                    + (fallback == 0 ? std::string{"none"}
                                     : readable_bytes(fallback))
                    + ")")
      ->type_name("BYTES")
      ->transform(support::byte_size())
      ->group("Resources");
  }

  /// Sets the process's tensor memory limit when the flag was given.
  void apply() const {
    if (limit)
      set_tensor_memory_limit(static_cast<size_t>(*limit));
  }
};

} // namespace actorflow::apps
