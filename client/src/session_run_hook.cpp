#include "actorflow/client/session_run_hook.hpp"

#include <unistd.h>

namespace actorflow {

void write_log(const log_sink& sink, const std::string& line) {
  if (sink) {
    sink(line);
    return;
  }
  // One write per line: several threads and processes may share stderr.
  auto text = line + "\n";
  for (size_t done = 0; done < text.size();) {
    auto n = ::write(2, text.data() + done, text.size() - done);
    if (n <= 0)
      return;
    done += static_cast<size_t>(n);
  }
}

session_run_hook::~session_run_hook() = default;

void session_run_hook::begin() {
  // nop
}

void session_run_hook::after_create_session(session&, coordinator&) {
  // nop
}

session_run_args session_run_hook::before_run(session_run_context&) {
  return {};
}

void session_run_hook::after_run(session_run_context&,
                                 const session_run_values&) {
  // nop
}

void session_run_hook::end(session&) {
  // nop
}

} // namespace actorflow
