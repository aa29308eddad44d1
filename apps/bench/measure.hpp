#pragma once

// Timing and memory probes of actorflow-bench.
//
// measure() runs an operation over a bounded time and reports the median
// rate of five consecutive slices of the run rather than the overall mean:
// on a 2-core machine shared with compilers, one slice that lost its core
// for a while then moves the figure by a fifth at most, not by all of it.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace actorflow::bench {

using seconds_d = std::chrono::duration<double>;
using steady = std::chrono::steady_clock;

/// What measure() saw.
struct rate {
  /// Operations per second (the median slice's; measure_interleaved:
  /// the fastest or the median round's).
  double per_second = 0;
  /// Operations timed (warm-up ones excluded).
  int64_t reps = 0;
  /// Wall time of the timed operations (measure only).
  double seconds = 0;
};

struct measure_options {
  /// Stop once this much time has passed (and min_reps are done).
  seconds_d budget{1.0};
  /// ... or once this many operations are done, whatever the time.
  int64_t max_reps = std::numeric_limits<int64_t>::max();
  /// At least this many, even past the budget (each op is bounded by its
  /// own deadline, so this bounds the figure too).
  int64_t min_reps = 1;
  /// Untimed runs first (a session's first run prunes, places, partitions
  /// and registers; later ones hit the cache).
  int warmup = 1;
};

/// The median of `rates` (reordered), 0 if empty.
inline double median_of(std::vector<double>& rates) {
  if (rates.empty())
    return 0;
  std::nth_element(rates.begin(), rates.begin() + rates.size() / 2,
                   rates.end());
  return rates[rates.size() / 2];
}

/// Runs `op` (blocking) repeatedly; see measure_options.
template <class F>
rate measure(F&& op, const measure_options& opts) {
  for (int i = 0; i < opts.warmup; ++i)
    op();
  std::vector<steady::time_point> done;
  done.reserve(1024);
  auto start = steady::now();
  for (;;) {
    auto reps = static_cast<int64_t>(done.size());
    if (reps >= opts.max_reps)
      break;
    if (reps >= opts.min_reps && !done.empty()
        && done.back() - start >= opts.budget)
      break;
    op();
    done.push_back(steady::now());
  }
  rate result;
  result.reps = static_cast<int64_t>(done.size());
  if (done.empty())
    return result;
  result.seconds = seconds_d(done.back() - start).count();
  constexpr int64_t slices = 5;
  if (result.reps < slices) {
    result.per_second = result.seconds > 0
                          ? static_cast<double>(result.reps) / result.seconds
                          : 0;
    return result;
  }
  std::vector<double> rates;
  auto slice_start = start;
  int64_t begin = 0;
  for (int64_t s = 1; s <= slices; ++s) {
    auto end = result.reps * s / slices;
    auto secs = seconds_d(done[static_cast<size_t>(end - 1)] - slice_start)
                  .count();
    if (secs > 0)
      rates.push_back(static_cast<double>(end - begin) / secs);
    slice_start = done[static_cast<size_t>(end - 1)];
    begin = end;
  }
  if (!rates.empty())
    result.per_second = median_of(rates);
  return result;
}

/// What measure_rounds saw: per operation, its rate in each round.
struct rounds {
  /// rates[op][round], operations per second.
  std::vector<std::vector<double>> rates;
  /// Operations timed per op (warm-up ones excluded).
  std::vector<int64_t> reps;

  /// The median over rounds of op `i`'s rate.
  double median(size_t i) const {
    auto copy = rates.at(i);
    return median_of(copy);
  }

  /// Per round, the best rate among `ops` (e.g. the better of a blocking
  /// and a polling baseline); one value per round.
  std::vector<double> best_of(std::initializer_list<size_t> ops) const {
    std::vector<double> out(rates.front().size(), 0.0);
    for (auto op : ops)
      for (size_t r = 0; r < out.size(); ++r)
        out[r] = std::max(out[r], rates.at(op)[r]);
    return out;
  }

  /// The median over rounds of `num[r] / den[r]` (the pairs' ratios):
  /// each ratio compares two measurements taken back to back, so a slow
  /// phase of a shared machine moves both sides of it.
  static double median_ratio(const std::vector<double>& num,
                             const std::vector<double>& den) {
    std::vector<double> ratios;
    for (size_t r = 0; r < num.size() && r < den.size(); ++r)
      if (den[r] > 0)
        ratios.push_back(num[r] / den[r]);
    return median_of(ratios);
  }

  /// Op `engine` against the best per round of `baselines`: the median
  /// rates over the rounds, and the median of the rounds' ratios
  /// (engine / baseline).
  struct comparison {
    double engine = 0;
    double baseline = 0;
    double ratio = 0;
  };

  comparison compare(size_t engine,
                     std::initializer_list<size_t> baselines) const {
    auto base = best_of(baselines);
    auto ratio = median_ratio(rates.at(engine), base);
    return {median(engine), median_of(base), ratio};
  }
};

/// Measures `ops` in rounds: in each round every op runs for its share of
/// the budget in the order given (a, b, c, a, b, c, ...), so that a slow
/// phase of a shared machine hits every side of a ratio rather than one.
/// The order is fixed on purpose: a baseline that leaves its peer polling
/// (the raw TCP server after a polling request) is followed by one that
/// puts it back to blocking before the engine's turn comes again.
/// opts.budget bounds each op's total (plus one operation per round);
/// min_reps/max_reps are per round; `warmup` untimed runs of each op
/// first.
inline rounds measure_rounds(const std::vector<std::function<void()>>& ops,
                             const measure_options& opts, int n_rounds = 9) {
  for (int i = 0; i < opts.warmup; ++i)
    for (auto& op : ops)
      op();
  rounds result;
  result.rates.assign(ops.size(), {});
  result.reps.assign(ops.size(), 0);
  auto slice_budget = opts.budget / n_rounds;
  for (int r = 0; r < n_rounds; ++r) {
    for (size_t i = 0; i < ops.size(); ++i) {
      auto start = steady::now();
      auto now = start;
      int64_t reps = 0;
      while (reps < opts.max_reps
             && (reps < opts.min_reps || now - start < slice_budget)) {
        ops[i]();
        ++reps;
        now = steady::now();
      }
      auto secs = seconds_d(now - start).count();
      result.reps[i] += reps;
      result.rates[i].push_back(secs > 0 ? static_cast<double>(reps) / secs
                                         : 0.0);
    }
  }
  return result;
}

/// Which round's rate measure_interleaved reports.
enum class slice_pick {
  /// For compute-bound operations, which interference only slows down.
  fastest,
  /// For operations that wait on the network or other processes.
  median,
};

/// `a` against `b` in fifteen rounds (measure_rounds). With
/// slice_pick::fastest, for each the rate of its fastest round (Python's
/// timeit takes the minimum for the same reason; the median of five
/// slices still moved the ratio by up to 0.1 when this VM slowed down for
/// a second): only for compute-bound operations (matmul_1024), never for
/// a bimodal one such as the raw TCP round trip, whose fastest round is
/// its rare mode; those take the median round. opts.max_reps and
/// opts.min_reps are per round.
template <class A, class B>
std::pair<rate, rate>
measure_interleaved(A&& a, B&& b, const measure_options& opts,
                    slice_pick pick = slice_pick::fastest) {
  auto r = measure_rounds({std::forward<A>(a), std::forward<B>(b)}, opts, 15);
  auto pick_rate = [&](size_t op) {
    if (pick == slice_pick::median)
      return r.median(op);
    const auto& rates = r.rates[op];
    return *std::max_element(rates.begin(), rates.end());
  };
  return {rate{pick_rate(0), r.reps[0]}, rate{pick_rate(1), r.reps[1]}};
}

/// A field of /proc/<pid>/status in KiB ("VmHWM", "VmRSS"), or nullopt if
/// the process or the field is not there.
inline std::optional<double> proc_status_kib(pid_t pid,
                                             const std::string& field) {
  std::ifstream in{"/proc/" + (pid > 0 ? std::to_string(pid) : "self")
                   + "/status"};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      try {
        return std::stod(line.substr(field.size() + 1));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

/// Resets this process's peak resident set size to its current one
/// (Linux >= 4.0: "5" > /proc/self/clear_refs), so that VmHWM afterwards
/// is the peak of what follows. False if the kernel refused.
inline bool reset_own_peak_rss() {
  std::ofstream out{"/proc/self/clear_refs"};
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

} // namespace actorflow::bench
