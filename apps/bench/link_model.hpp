#pragma once

// The links of the bench's simulated network (--netsim, netsim.cpp): every
// host has one full-duplex link to a switch, with a one-way delay and a
// rate, as `tc netem delay D rate R` on each host's interface would give
// (this model is what the switch process applies in user space where the
// kernel has no netem). A packet from host A to host B is serialized on
// A's uplink after what A sent before it, travels half the delay to the
// switch, waits for B's downlink, is serialized on it and travels the
// other half: one way it takes the delay plus two serializations, a round
// trip twice the delay. A link whose queue holds more than its limit of
// unsent bytes drops the packet (tail drop, as a full qdisc does).
//
// Pure: time is passed in (nanoseconds of any clock), nothing blocks.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

namespace actorflow::bench {

class link_model {
public:
  struct params {
    /// One-way host-to-host delay, half on each link.
    int64_t delay_ns = 0;
    /// Each link's rate, each way.
    double bits_per_s = 1e9;
    /// Unsent bytes a link queues before it drops.
    uint64_t queue_bytes = uint64_t{4} << 20;
  };

  /// `hosts` links. Throws std::invalid_argument for no hosts, a negative
  /// delay or a rate that is not positive.
  link_model(size_t hosts, params p) : p_(p), up_(hosts, 0), down_(hosts, 0) {
    if (hosts == 0 || p.delay_ns < 0 || !(p.bits_per_s > 0))
      throw std::invalid_argument("link_model: hosts, delay or rate invalid");
    queue_ns_ = serialization_ns(p.queue_bytes);
  }

  size_t hosts() const noexcept {
    return up_.size();
  }

  const params& parameters() const noexcept {
    return p_;
  }

  /// Nanoseconds a link takes to put `bytes` on the wire.
  int64_t serialization_ns(uint64_t bytes) const noexcept {
    return static_cast<int64_t>(static_cast<double>(bytes) * 8e9
                                / p_.bits_per_s);
  }

  /// Host `src` hands its link a packet of `bytes` at `now`: when the
  /// packet reaches the switch, or nullopt when the uplink's queue is full
  /// (dropped). Calls for one host come in time order.
  std::optional<int64_t> send(int64_t now, size_t src, uint64_t bytes) {
    return enqueue(up_.at(src), now, bytes);
  }

  /// The packet reaches the switch at `at` (what send returned) for host
  /// `dst`: when `dst` receives it, or nullopt when the downlink's queue
  /// is full (dropped). Calls come in the order of `at`.
  std::optional<int64_t> forward(int64_t at, size_t dst, uint64_t bytes) {
    return enqueue(down_.at(dst), at, bytes);
  }

private:
  std::optional<int64_t> enqueue(int64_t& free_at, int64_t now,
                                 uint64_t bytes) {
    auto start = std::max(now, free_at);
    if (queue_ns_ < start - now)
      return std::nullopt;
    free_at = start + serialization_ns(bytes);
    return free_at + p_.delay_ns / 2;
  }

  params p_;
  /// How long a full queue takes to drain.
  int64_t queue_ns_ = 0;
  /// When each uplink and downlink is free to send the next packet.
  std::vector<int64_t> up_;
  std::vector<int64_t> down_;
};

} // namespace actorflow::bench
