#include "fuzz_targets.hpp"

#include <algorithm>
#include <memory>

#include <string>

#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "monitor_filter.hpp"

namespace actorflow::fuzz {

namespace {

using transport_detail::monitor_access;
using transport_detail::monitor_filter;

std::shared_ptr<const monitor_access> fuzz_access() {
  static auto access = [] {
    auto a = std::make_shared<monitor_access>();
    a->allow(monitor_filter_task_id,
             {get_monitor_atom::uint_value(),
              get_stats_atom::uint_value()});
    a->allow(monitor_filter_monitor_id,
             {monitor_snapshot_atom::uint_value(),
              monitor_subscribe_atom::uint_value(),
              monitor_ping_atom::uint_value(),
              monitor_trace_atom::uint_value(),
              monitor_get_trace_atom::uint_value()});
    return a;
  }();
  return access;
}

} // namespace

bool fuzz_monitor_filter(const uint8_t* data, size_t size) {
  if (size == 0)
    return false;
  monitor_filter filter{fuzz_access()};
  // The monitor's client handshake, naming its node.
  std::string node{monitor_filter_node};
  char hello[caf::io::basp::header_size] = {};
  hello[0] = static_cast<char>(caf::io::basp::message_type::client_handshake);
  hello[7] = static_cast<char>(node.size());
  if (!filter.check(hello, sizeof(hello)).empty()
      || !filter.check(node.data(), node.size()).empty())
    return false;
  auto* bytes = reinterpret_cast<const char*>(data);
  size_t pos = 0;
  // The reads BASP asks for: a header, then the payload it announces.
  while (pos < size) {
    auto n = std::min(caf::io::basp::header_size, size - pos);
    if (!filter.check(bytes + pos, n).empty())
      return false;
    uint32_t payload = 0;
    for (size_t i = 4; i < 8; ++i)
      payload = (payload << 8) | data[pos + i];
    pos += n;
    if (payload == 0)
      continue;
    n = std::min<size_t>(payload, size - pos);
    if (!filter.check(bytes + pos, n).empty())
      return false;
    pos += n;
  }
  return true;
}

} // namespace actorflow::fuzz

#ifdef ACTORFLOW_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  actorflow::fuzz::fuzz_monitor_filter(data, size);
  return 0;
}
#endif
