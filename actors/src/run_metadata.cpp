#include "actorflow/transport/messages.hpp"

#include <algorithm>

namespace actorflow {

namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (auto c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

} // namespace

std::string run_metadata::to_chrome_trace() const {
  // Trace-event format: one process per device entry ("M" metadata names
  // it), one complete event ("X") per node.
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  auto emit = [&](const std::string& event) {
    if (!first)
      out += ",";
    out += event;
    first = false;
  };
  int64_t origin = 0;
  for (auto& d : stats.dev_stats)
    for (auto& n : d.node_stats)
      if (origin == 0 || (n.all_start_micros > 0 && n.all_start_micros < origin))
        origin = n.all_start_micros;
  for (size_t pid = 0; pid < stats.dev_stats.size(); ++pid) {
    auto& d = stats.dev_stats[pid];
    emit("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":"
         + std::to_string(pid) + ",\"args\":{\"name\":\""
         + json_escape(d.device) + "\"}}");
    for (auto& n : d.node_stats) {
      auto dur = std::max<int64_t>(n.all_end_rel_micros, 0);
      emit("{\"name\":\"" + json_escape(n.node_name)
           + "\",\"ph\":\"X\",\"pid\":" + std::to_string(pid)
           + ",\"tid\":0,\"ts\":"
           + std::to_string(n.all_start_micros - origin)
           + ",\"dur\":" + std::to_string(dur) + ",\"args\":{\"label\":\""
           + json_escape(n.timeline_label) + "\"}}");
    }
  }
  out += "]}";
  return out;
}

} // namespace actorflow
