#pragma once

// A task's history of its monitored series (steps/s, step times, loss,
// RSS, ...), in fixed memory: the last 15 minutes at the sampling rate
// (1 s), then averages over 10 s for 2 hours and over 1 minute for 12
// hours. The monitor actor samples into it every second from its start and
// sends it to a console when it subscribes, so the console's plots show
// the run so far. CAF-free; time is passed in.

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::monitoring {

class history {
public:
  /// One resolution: a sample per `step_us`, the last `slots` of them.
  struct tier {
    int64_t step_us;
    size_t slots;
  };

  /// 1 s x 900, 10 s x 720, 60 s x 720.
  static std::vector<tier> default_tiers();

  /// Series past the first `max_series` names are not kept.
  explicit history(std::vector<tier> tiers = default_tiers(),
                   size_t max_series = 48);

  /// A sample's value of a series; NaN for none.
  using values = std::vector<std::pair<std::string, double>>;

  /// Records the values sampled at `at_us` (increasing from call to call).
  void add(int64_t at_us, const values& sample);

  /// Samples recorded so far (the sequence number of the last one).
  uint64_t samples() const {
    return samples_;
  }

  /// A run of samples, oldest first: their times and, per series, one
  /// value per time (NaN: none then).
  struct points {
    std::vector<int64_t> t_us;
    std::map<std::string, std::vector<double>> series;
  };

  /// Everything kept: each coarser tier's samples older than the next
  /// finer tier's oldest, then the finer ones.
  points all() const;

  /// The samples after sample number `after` that the finest tier still
  /// holds (a subscriber's update: what was sampled since its last one).
  points since(uint64_t after) const;

  /// The names of the series, in the order they first came.
  const std::vector<std::string>& names() const {
    return names_;
  }

private:
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();

  struct ring {
    int64_t step_us = 0;
    size_t slots = 0;
    /// t_us[i] and row i of `data` (max_series_ floats) for slot i.
    std::vector<int64_t> t_us;
    std::vector<float> data;
    size_t next = 0;  ///< where the next sample goes
    size_t count = 0; ///< slots in use
    // The coarse tiers' bucket being filled: its start and, per series,
    // the sum and count of its values.
    int64_t bucket = -1;
    std::vector<double> sum;
    std::vector<uint32_t> n;
  };

  void push(ring& r, int64_t at_us, const std::vector<double>& row);
  void append(const ring& r, size_t from_oldest, points& out) const;
  size_t index_of(const std::string& name);

  size_t max_series_;
  std::vector<ring> rings_;
  std::vector<std::string> names_;
  std::map<std::string, size_t> index_;
  uint64_t samples_ = 0;
};

} // namespace actorflow::monitoring
