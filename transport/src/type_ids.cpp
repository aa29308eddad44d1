#include "actorflow/transport/type_ids.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <caf/io/middleman.hpp>

#include "actorflow/transport/env_number.hpp"
#include "scheduler.hpp"

namespace actorflow {

void add_types_impl(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::actorflow>();
  cfg.load<caf::io::middleman>();
}

namespace {

template <class T>
void set_default(caf::actor_system_config& cfg, caf::string_view key,
                 T value) {
  if (caf::get_if(&cfg.content, key) == nullptr)
    cfg.set(key, std::move(value));
}

} // namespace

int64_t env_number(const char* name, int64_t lo, int64_t hi,
                   int64_t fallback) {
  auto* env = std::getenv(name);
  if (env == nullptr)
    return fallback;
  auto n = std::strtoll(env, nullptr, 10);
  return n >= lo && n <= hi ? n : fallback;
}

void add_options_impl(caf::actor_system_config& cfg) {
  // Measured on 2-core machines (docs/DESIGN.md): the sharing scheduler
  // and no middleman workers cut a loopback round trip from ~360 µs to
  // ~140 µs; work stealing sleeps between polls and each middleman worker
  // adds a scheduler hop per received message.
  // On top of work sharing, one idle worker spins for a while before it
  // sleeps (scheduler.hpp), and a session's caller polls for its reply as
  // long: a trivial local step ~10 us instead of ~40 (docs/PERFORMANCE.md).
  // An application that chose one of CAF's policies keeps it.
  if (caf::get_if(&cfg.content, "scheduler.policy") == nullptr) {
    cfg.set("scheduler.policy", caf::atom("spinning"));
    load_spinning_scheduler(cfg);
  }
  auto spin_us = env_number("ACTORFLOW_SCHEDULER_SPIN_US", 0, 1000000, 50);
  // Not a declared CAF option (actor_system_config::set would refuse it),
  // so straight into the dictionary that get_or reads.
  if (caf::get_if(&cfg.content, "actorflow.scheduler-spin") == nullptr)
    caf::put(cfg.content, "actorflow.scheduler-spin",
             caf::timespan{std::chrono::microseconds(spin_us)});
  // As many scheduler threads as cores, at most 4, unless told otherwise
  // (docs/PERFORMANCE.md). A step is a chain of messages between actors
  // and every hand-over to another thread is a wake-up: on 2 cores, CAF's
  // default of 4 threads made a trivial local step ~70 us, 2 threads
  // ~33 us; 1 thread was fast on a busy machine but ~85 us on an idle
  // one (waking an idle core is slow on these VMs).
  auto cores = static_cast<size_t>(std::thread::hardware_concurrency());
  auto threads = static_cast<size_t>(
    env_number("ACTORFLOW_SCHEDULER_MAX_THREADS", 1, 1024,
               static_cast<int64_t>(std::clamp(cores, size_t{1}, size_t{4}))));
  set_default(cfg, "scheduler.max-threads", threads);
  set_default(cfg, "middleman.workers", size_t{0});
  // `_Send` values between processes over the tensor channel (a TCP
  // connection beside CAF's, tensor_channel.hpp) unless set to false, or
  // ACTORFLOW_TENSOR_CHANNEL=0 (docs/PERFORMANCE.md).
  if (caf::get_if(&cfg.content, "actorflow.tensor-channel") == nullptr)
    caf::put(cfg.content, "actorflow.tensor-channel",
             env_number("ACTORFLOW_TENSOR_CHANNEL", 0, 1, 1) == 1);
  // Off: CAF 0.17's automatic connections open a second BASP port on every
  // interface (it takes no address for it), which would let any host reach
  // a task on a cluster bound to loopback. Send/Recv between workers go over
  // the tensor channel, directly; a CAF message between two tasks that
  // never connected goes through the master that introduced them.
  set_default(cfg, "middleman.enable-automatic-connections", false);
  // A peer cut off by the network is otherwise never noticed. Heartbeats
  // every 0.5 s; actorflow's connections judge their silence by the
  // heartbeats' history (connection_guard.hpp, phi_accrual.hpp: ~4 s for
  // a peer whose heartbeats came regularly, up to actorflow.idle-timeout
  // for one that was busy). CAF's own fixed timeout, checked at each
  // heartbeat, would take a busy peer for a dead one: it stays only as
  // the backstop of connections made through CAF's own middleman API.
  set_default(cfg, "middleman.heartbeat-interval",
              caf::timespan{std::chrono::milliseconds(500)});
  set_default(cfg, "middleman.connection-timeout",
              caf::timespan{std::chrono::seconds(30)});
}

status to_status(const caf::error& err, const std::string& what) {
  auto suffix = what.empty() ? std::string{} : " (" + what + ")";
  if (err.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(err.code())) {
      case caf::sec::request_timeout:
        return {error_code::deadline_exceeded,
                "Timed out waiting for a reply" + suffix};
      case caf::sec::request_receiver_down:
      case caf::sec::remote_linking_failed:
      case caf::sec::cannot_connect_to_node:
      case caf::sec::no_route_to_receiving_node:
      case caf::sec::connection_timeout:
        return {error_code::unavailable, "Lost connection" + suffix + ": "
                                           + caf::to_string(err)};
      default:
        break;
    }
  }
  if (err.category() == caf::atom("exit"))
    return {error_code::unavailable,
            "Peer terminated" + suffix + ": " + caf::to_string(err)};
  return {error_code::internal, caf::to_string(err) + suffix};
}

} // namespace actorflow
