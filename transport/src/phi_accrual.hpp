#pragma once

// Private to transport/: how long a CAF connection's peer may stay silent
// before it is taken for lost. An accrual failure detector (Hayashibara et
// al., "The phi accrual failure detector", 2004; as Akka and Cassandra use
// it): it learns the intervals between the peer's heartbeats (CAF sends
// one every `middleman.heartbeat-interval` on every connection), and phi,
// the suspicion, grows with the silence measured against them. The
// silence it tolerates is where phi reaches the threshold: about the
// heartbeat interval plus `acceptable_pause` when heartbeats came like
// clockwork, longer when they came irregularly because the peer (or this
// process, which read them late) was busy. So a busy task is given time a
// dead one is not; silence past `max_silence` is loss whatever the
// history.
//
// CAF-free, time passed in (test/transport/phi_accrual_test.cpp).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <deque>

namespace actorflow {

struct phi_settings {
  /// phi at which the peer is suspected: 8 is a 1e-8 chance that a
  /// heartbeat is still on its way under the learnt distribution.
  double threshold = 8.0;
  /// The heartbeat interval: the first estimate, before any was measured.
  std::chrono::milliseconds heartbeat_interval{500};
  /// Silence tolerated beyond the intervals' mean (pauses of garbage
  /// collection, page faults, a descheduled VM).
  std::chrono::milliseconds acceptable_pause{3000};
  /// The spread never assumed smaller: a perfect clock would make a few
  /// milliseconds late a loss.
  std::chrono::milliseconds min_std_dev{100};
  /// Silence that is loss whatever the history.
  std::chrono::milliseconds max_silence{10'000};
  /// Intervals remembered (100 at 0.5 s: the last 50 s).
  size_t window = 100;
};

class phi_accrual {
public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;
  using duration = std::chrono::nanoseconds;

  explicit phi_accrual(phi_settings s = {}) : s_(s) {
    // As Akka: two intervals a quarter of the interval either side of it,
    // so the first estimate has a mean and a spread.
    auto first = seconds(s_.heartbeat_interval);
    add(first - first / 4);
    add(first + first / 4);
  }

  /// A heartbeat arrived at `now`.
  void beat(time_point now) {
    if (last_ != time_point{})
      add(seconds(now - last_));
    last_ = now;
  }

  /// The suspicion `now`, from the last heartbeat (0 before the first).
  double phi(time_point now) const {
    if (last_ == time_point{})
      return 0;
    return phi_of(seconds(now - last_));
  }

  /// The silence after a heartbeat at which phi reaches the threshold,
  /// at most max_silence.
  duration tolerated() const {
    // phi grows with the silence: bisect on it.
    double lo = 0;
    double hi = seconds(s_.max_silence);
    if (phi_of(hi) < s_.threshold)
      return s_.max_silence;
    for (int i = 0; i < 60; ++i) {
      double mid = (lo + hi) / 2;
      (phi_of(mid) < s_.threshold ? lo : hi) = mid;
    }
    return std::chrono::duration_cast<duration>(
      std::chrono::duration<double>(hi));
  }

  /// The intervals' mean and standard deviation, in seconds.
  double mean() const {
    return sum_ / static_cast<double>(intervals_.size());
  }
  double std_dev() const {
    auto m = mean();
    auto var = squares_ / static_cast<double>(intervals_.size()) - m * m;
    return std::sqrt(std::max(var, 0.0));
  }

  const phi_settings& settings() const noexcept {
    return s_;
  }

private:
  template <class Duration>
  static double seconds(Duration d) {
    return std::chrono::duration<double>(d).count();
  }

  void add(double interval) {
    intervals_.push_back(interval);
    sum_ += interval;
    squares_ += interval * interval;
    while (intervals_.size() > std::max<size_t>(s_.window, 2)) {
      auto old = intervals_.front();
      intervals_.pop_front();
      sum_ -= old;
      squares_ -= old * old;
    }
  }

  // Akka's approximation of the normal distribution's tail (logistic,
  // error below 1e-4): phi = -log10(P(a heartbeat comes later than t)).
  double phi_of(double t) const {
    auto mu = mean() + seconds(s_.acceptable_pause);
    auto sigma = std::max(std_dev(), seconds(s_.min_std_dev));
    auto y = (t - mu) / sigma;
    auto e = std::exp(-y * (1.5976 + 0.070566 * y * y));
    if (t > mu)
      return -std::log10(e / (1.0 + e));
    return -std::log10(1.0 - 1.0 / (1.0 + e));
  }

  phi_settings s_;
  std::deque<double> intervals_;
  double sum_ = 0;
  double squares_ = 0;
  time_point last_{};
};

} // namespace actorflow
