// The default of the tensor memory limit (tensor_memory.hpp): 80% of the
// machine's memory or of the process's cgroup limit, whichever is lower.
// The counting and the checks are in tensor.cpp, beside the buffers.

#include "actorflow/graph/tensor_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace actorflow {

namespace {

/// The number in `path` ("max", a missing file or a limit of 2^62 and
/// more, which the kernels print for "none": std::nullopt).
std::optional<uint64_t> read_limit(const std::string& path) {
  std::ifstream in{path};
  std::string text;
  if (!in || !(in >> text))
    return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                   value);
  if (ec != std::errc{} || end != text.data() + text.size()
      || value >= (uint64_t{1} << 62))
    return std::nullopt;
  return value;
}

/// The lowest limit in `file` of the cgroup directories from
/// `root` + `path` up to `root`.
std::optional<uint64_t> lowest_on_path(const std::string& root,
                                       std::string path,
                                       const std::string& file) {
  std::optional<uint64_t> lowest;
  for (;;) {
    while (path.size() > 1 && path.back() == '/')
      path.pop_back();
    auto dir = path == "/" || path.empty() ? root : root + path;
    if (auto limit = read_limit(dir + "/" + file))
      lowest = lowest ? std::min(*lowest, *limit) : *limit;
    if (path.empty() || path == "/")
      return lowest;
    auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/"
                                                    : path.substr(0, slash);
  }
}

/// The memory limit of this process's cgroup, v2 or v1.
std::optional<uint64_t> cgroup_limit() {
  std::optional<uint64_t> lowest;
  auto consider = [&lowest](std::optional<uint64_t> limit) {
    if (limit)
      lowest = lowest ? std::min(*lowest, *limit) : *limit;
  };
  std::ifstream in{"/proc/self/cgroup"};
  std::string line;
  // "0::/path" (v2), "4:memory:/path" or "5:cpuacct,memory:/path" (v1).
  while (std::getline(in, line)) {
    auto first = line.find(':');
    auto second = first == std::string::npos ? first
                                             : line.find(':', first + 1);
    if (second == std::string::npos)
      continue;
    auto controllers = "," + line.substr(first + 1, second - first - 1)
                       + ",";
    auto path = line.substr(second + 1);
    if (controllers == ",,") {
      consider(lowest_on_path("/sys/fs/cgroup", path, "memory.max"));
      consider(
        lowest_on_path("/sys/fs/cgroup/unified", path, "memory.max"));
    } else if (controllers.find(",memory,") != std::string::npos) {
      consider(lowest_on_path("/sys/fs/cgroup/memory", path,
                              "memory.limit_in_bytes"));
    }
  }
  // A container's own cgroup may be mounted as the root while
  // /proc/self/cgroup names the host's path.
  consider(read_limit("/sys/fs/cgroup/memory.max"));
  consider(read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  return lowest;
}

} // namespace

size_t default_tensor_memory_limit() {
  std::optional<uint64_t> memory;
  auto pages = ::sysconf(_SC_PHYS_PAGES);
  auto page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0)
    memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  if (auto cgroup = cgroup_limit())
    memory = memory ? std::min(*memory, *cgroup) : *cgroup;
  if (!memory)
    return 0;
  return static_cast<size_t>(*memory / 5 * 4);
}

} // namespace actorflow
