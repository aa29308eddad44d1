#pragma once

// Logs when a task this process's task connected to goes down or comes
// back (monitoring::registry's peers, which the task actor keeps): a
// warning "lost /job:ps/replica:0/task:0 at 10.0.0.5:2222 (reason)" (info
// when it shut down in order) and "reconnected to ..." (info). A thread
// of its own polls every 100 ms; the destructor stops it.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "actorflow/actors/monitoring.hpp"
#include "actorflow/support/log.hpp"

namespace actorflow::apps {

namespace log = support::log;

class peer_log {
public:
  /// Watches the peers of task `task` ("/job:J/replica:0/task:T").
  explicit peer_log(std::string task)
    : thread_{[this, task = std::move(task)](std::stop_token stop) {
        run(stop, task);
      }} {
    // nop
  }

private:
  void run(std::stop_token stop, const std::string& task) {
    std::map<std::string, bool> up;
    std::mutex mtx;
    std::condition_variable_any cv;
    std::unique_lock guard{mtx};
    while (!stop.stop_requested()) {
      for (const auto& p : monitoring::registry::instance().peers(task)) {
        auto [i, first] = up.emplace(p.peer, p.up);
        if (!first && i->second == p.up)
          continue;
        i->second = p.up;
        auto where = p.peer + (p.address.empty() ? "" : " at " + p.address);
        // A member that left the cluster: the master's log says so.
        if (!p.up && p.reason.starts_with("left"))
          continue;
        auto text = "lost " + where
                    + (p.reason.empty() ? "" : " (" + p.reason + ")");
        // A task that shut down in order (its process ended its actors:
        // a worker done training, a node stopped) is no failure.
        if (!p.up && p.reason.find("user_shutdown") != std::string::npos)
          log::info(text);
        else if (!p.up)
          log::warning(text);
        else if (!first)
          log::info("reconnected to " + where);
      }
      cv.wait_for(guard, stop, std::chrono::milliseconds(100),
                  [] { return false; });
    }
  }

  std::jthread thread_;
};

} // namespace actorflow::apps
