#include "monitor_history.hpp"

#include <algorithm>

namespace actorflow::monitoring {

std::vector<history::tier> history::default_tiers() {
  return {{1'000'000, 900}, {10'000'000, 720}, {60'000'000, 720}};
}

history::history(std::vector<tier> tiers, size_t max_series)
  : max_series_(max_series) {
  for (auto& t : tiers) {
    ring r;
    r.step_us = t.step_us;
    r.slots = std::max<size_t>(t.slots, 1);
    r.t_us.assign(r.slots, 0);
    r.data.assign(r.slots * max_series_, std::nanf(""));
    r.sum.assign(max_series_, 0);
    r.n.assign(max_series_, 0);
    rings_.push_back(std::move(r));
  }
}

size_t history::index_of(const std::string& name) {
  if (auto i = index_.find(name); i != index_.end())
    return i->second;
  if (names_.size() >= max_series_)
    return max_series_;
  index_.emplace(name, names_.size());
  names_.push_back(name);
  return names_.size() - 1;
}

void history::push(ring& r, int64_t at_us, const std::vector<double>& row) {
  r.t_us[r.next] = at_us;
  auto* slot = &r.data[r.next * max_series_];
  for (size_t i = 0; i < max_series_; ++i)
    slot[i] = static_cast<float>(row[i]);
  r.next = (r.next + 1) % r.slots;
  r.count = std::min(r.count + 1, r.slots);
}

void history::add(int64_t at_us, const values& sample) {
  std::vector<double> row(max_series_, none);
  for (auto& [name, value] : sample)
    if (auto i = index_of(name); i < max_series_)
      row[i] = value;
  ++samples_;
  if (rings_.empty())
    return;
  push(rings_[0], at_us, row);
  // The coarse tiers average their bucket's samples, each series over the
  // samples that had it; a bucket is written when the next one starts.
  for (size_t k = 1; k < rings_.size(); ++k) {
    auto& r = rings_[k];
    auto bucket = at_us / r.step_us;
    if (r.bucket >= 0 && bucket != r.bucket) {
      std::vector<double> avg(max_series_, none);
      for (size_t i = 0; i < max_series_; ++i)
        if (r.n[i] > 0)
          avg[i] = r.sum[i] / r.n[i];
      push(r, (r.bucket + 1) * r.step_us, avg);
      std::fill(r.sum.begin(), r.sum.end(), 0.0);
      std::fill(r.n.begin(), r.n.end(), 0u);
    }
    r.bucket = bucket;
    for (size_t i = 0; i < max_series_; ++i)
      if (!std::isnan(row[i])) {
        r.sum[i] += row[i];
        ++r.n[i];
      }
  }
}

void history::append(const ring& r, size_t from_oldest, points& out) const {
  auto oldest = (r.next + r.slots - r.count) % r.slots;
  for (size_t k = from_oldest; k < r.count; ++k) {
    auto slot = (oldest + k) % r.slots;
    out.t_us.push_back(r.t_us[slot]);
    const auto* row = &r.data[slot * max_series_];
    for (size_t i = 0; i < names_.size(); ++i)
      out.series[names_[i]].push_back(row[i]);
  }
}

history::points history::all() const {
  points out;
  for (auto& n : names_)
    out.series[n];
  // Coarsest first; each tier only before what the finer ones hold (the
  // finest, with none finer, whole).
  for (size_t k = rings_.size(); k-- > 0;) {
    auto& r = rings_[k];
    if (r.count == 0)
      continue;
    int64_t finer_oldest = INT64_MAX;
    for (size_t f = 0; f < k; ++f)
      if (rings_[f].count > 0) {
        auto& fr = rings_[f];
        finer_oldest = std::min(
          finer_oldest, fr.t_us[(fr.next + fr.slots - fr.count) % fr.slots]);
      }
    auto oldest = (r.next + r.slots - r.count) % r.slots;
    size_t take = 0;
    while (take < r.count && r.t_us[(oldest + take) % r.slots] < finer_oldest
           && (out.t_us.empty()
               || r.t_us[(oldest + take) % r.slots] > out.t_us.back()))
      ++take;
    // append() takes from an offset to the newest: take the first `take`.
    points part;
    for (auto& n : names_)
      part.series[n];
    append(r, 0, part);
    for (size_t j = 0; j < take; ++j) {
      out.t_us.push_back(part.t_us[j]);
      for (auto& n : names_)
        out.series[n].push_back(part.series[n][j]);
    }
  }
  return out;
}

history::points history::since(uint64_t after) const {
  points out;
  for (auto& n : names_)
    out.series[n];
  if (rings_.empty() || after >= samples_)
    return out;
  auto& r = rings_[0];
  auto wanted = std::min<uint64_t>(samples_ - after, r.count);
  append(r, r.count - static_cast<size_t>(wanted), out);
  return out;
}

} // namespace actorflow::monitoring
