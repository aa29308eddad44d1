#include "actorflow/actors/monitoring.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace actorflow::monitoring {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{[] {
    auto* env = std::getenv("ACTORFLOW_MONITORING");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return flag;
}

template <class T>
void store_max(std::atomic<T>& slot, T value) {
  if (value > slot.load(std::memory_order_relaxed))
    slot.store(value, std::memory_order_relaxed);
}

// Windows of 2^31 ticks: 0.6-1.1 s of a 2-3.5 GHz time-stamp counter,
// 2.1 s of the steady clock.
constexpr int window_shift = 31;

const int64_t process_start_us = wall_us();

bool tsc_is_clock_source() {
#if defined(__x86_64__)
  std::ifstream in{
    "/sys/devices/system/clocksource/clocksource0/current_clocksource"};
  std::string name;
  return std::getline(in, name) && name == "tsc";
#else
  return false;
#endif
}

} // namespace

namespace detail {
const bool use_tsc = tsc_is_clock_source();
} // namespace detail

namespace {

// The pair ns_per_tick() measures from.
const int64_t start_ns = steady_ns();
const uint64_t start_ticks = ticks();

} // namespace

const char* to_string(actor_kind kind) {
  switch (kind) {
    case actor_kind::task:
      return "task";
    case actor_kind::worker:
      return "worker";
    case actor_kind::executor:
      return "executor";
    case actor_kind::variable:
      return "variable";
    case actor_kind::queue:
      return "queue";
    case actor_kind::reader:
      return "reader";
    case actor_kind::accumulator:
      return "accumulator";
    case actor_kind::client:
      return "client";
    case actor_kind::monitor:
      return "monitor";
    case actor_kind::other:
      return "other";
  }
  return "unknown";
}

bool enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}

void set_enabled(bool on) {
  enabled_flag().store(on, std::memory_order_relaxed);
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

double ns_per_tick() {
  if (!detail::use_tsc)
    return 1.0;
  // Measured over at least a second, the ratio is as good as it gets:
  // from then on one load.
  static std::atomic<double> settled{0};
  if (auto x = settled.load(std::memory_order_relaxed); x > 0)
    return x;
  // Earlier, the ratio of the spans so far: the two reads' own time is
  // ~1e-4 of a millisecond's span. Never waits (a master calls this as a
  // step ends).
  auto ns = static_cast<double>(steady_ns() - start_ns);
  auto span = static_cast<double>(ticks() - start_ticks);
  auto ratio = span > 0 ? ns / span : 1.0;
  if (ns >= 1e9)
    settled.store(ratio, std::memory_order_relaxed);
  return ratio;
}

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// -- actor_record --------------------------------------------------------------

actor_record::actor_record(uint64_t id, identity who)
  : id(id), who(std::move(who)), started_us(wall_us()) {
  // nop
}

void actor_record::handled(uint64_t busy_ticks, uint32_t mailbox_left,
                           uint64_t now_ticks) noexcept {
  // Only this actor's thread writes: load + store, no read-modify-write.
  constexpr auto relaxed = std::memory_order_relaxed;
  messages_.store(messages_.load(relaxed) + 1, relaxed);
  busy_ticks_.store(busy_ticks_.load(relaxed) + busy_ticks, relaxed);
  mailbox_.store(mailbox_left, relaxed);
  auto w = static_cast<int64_t>(now_ticks >> window_shift);
  auto current = window_.load(relaxed);
  if (w != current) {
    bool adjacent = w == current + 1;
    busy_max_prev_.store(adjacent ? busy_max_cur_.load(relaxed) : 0, relaxed);
    mailbox_max_prev_.store(adjacent ? mailbox_max_cur_.load(relaxed) : 0,
                            relaxed);
    busy_max_cur_.store(0, relaxed);
    mailbox_max_cur_.store(0, relaxed);
    window_.store(w, relaxed);
  }
  store_max(busy_max_cur_, busy_ticks);
  store_max(mailbox_max_cur_, mailbox_left);
}

actor_record::sample actor_record::read() const {
  constexpr auto relaxed = std::memory_order_relaxed;
  auto per_tick = ns_per_tick();
  auto to_ns = [per_tick](uint64_t t) {
    return static_cast<uint64_t>(static_cast<double>(t) * per_tick);
  };
  sample s;
  s.messages = messages_.load(relaxed);
  s.busy_ns = to_ns(busy_ticks_.load(relaxed));
  s.mailbox = mailbox_.load(relaxed);
  auto w = static_cast<int64_t>(ticks() >> window_shift);
  auto last = window_.load(relaxed);
  if (last == w) {
    s.busy_max_ns = to_ns(std::max(busy_max_cur_.load(relaxed),
                                   busy_max_prev_.load(relaxed)));
    s.mailbox_max = std::max(mailbox_max_cur_.load(relaxed),
                             mailbox_max_prev_.load(relaxed));
  } else if (last + 1 == w) {
    s.busy_max_ns = to_ns(busy_max_cur_.load(relaxed));
    s.mailbox_max = mailbox_max_cur_.load(relaxed);
  }
  // The depth now is part of the recent maximum.
  s.mailbox_max = std::max(s.mailbox_max, s.mailbox);
  return s;
}

const std::array<const char*, actor_record::max_gauges>&
actor_record::gauge_names(actor_kind kind) {
  using names = std::array<const char*, max_gauges>;
  // withdrawn: operations cancelled with their step (it failed, or its
  // owner was lost); returned: elements whose step died after its dequeue
  // took them, back at the head (leases). Both count up.
  static const names queue{"size",           "capacity",
                           "closed",         "blocked_enqueues",
                           "blocked_dequeues", "withdrawn",
                           "returned"};
  static const names variable{"bytes", "initialized", "updates", "", "",
                              "", ""};
  static const names none{"", "", "", "", "", "", ""};
  switch (kind) {
    case actor_kind::queue:
      return queue;
    case actor_kind::variable:
      return variable;
    default:
      return none;
  }
}

void actor_record::set_detail(std::string text) {
  std::lock_guard<std::mutex> guard{detail_mtx_};
  detail_ = std::move(text);
}

std::string actor_record::detail() const {
  std::lock_guard<std::mutex> guard{detail_mtx_};
  return detail_;
}

// -- step_record ---------------------------------------------------------------

void step_record::finished(int64_t duration_us, int code,
                           const std::string& message) {
  constexpr auto relaxed = std::memory_order_relaxed;
  auto n = total_.load(relaxed);
  durations_[n % ring_size].store(
    static_cast<uint32_t>(std::clamp<int64_t>(duration_us, 0, UINT32_MAX)),
    relaxed);
  auto slot = static_cast<size_t>(std::clamp(code, 0, 19));
  by_code_[slot].store(by_code_[slot].load(relaxed) + 1, relaxed);
  auto bucket = static_cast<size_t>(
    std::lower_bound(bucket_bounds_us.begin(), bucket_bounds_us.end(),
                     static_cast<double>(duration_us))
    - bucket_bounds_us.begin());
  buckets_[bucket].store(buckets_[bucket].load(relaxed) + 1, relaxed);
  sum_us_.store(sum_us_.load(relaxed)
                  + static_cast<uint64_t>(std::max<int64_t>(duration_us, 0)),
                relaxed);
  // Published last: a reader never counts a duration not yet stored.
  total_.store(n + 1, std::memory_order_release);
  if (code != 0) {
    std::lock_guard<std::mutex> guard{errors_mtx_};
    errors_.push_back({wall_us(), code, message.substr(0, 300)});
    if (errors_.size() > 8)
      errors_.erase(errors_.begin());
  }
}

step_record::sample step_record::read() const {
  sample s;
  s.total = total_.load(std::memory_order_acquire);
  for (size_t c = 0; c < by_code_.size(); ++c)
    if (auto n = by_code_[c].load(std::memory_order_relaxed); n > 0) {
      s.by_code[static_cast<int>(c)] = n;
      if (c != 0)
        s.errors += n;
    }
  for (size_t b = 0; b < buckets_.size(); ++b)
    s.buckets[b] = buckets_[b].load(std::memory_order_relaxed);
  s.sum_us = static_cast<double>(sum_us_.load(std::memory_order_relaxed));
  auto kept = std::min<uint64_t>(s.total, ring_size);
  if (kept > 0) {
    std::vector<uint32_t> d(kept);
    for (size_t i = 0; i < kept; ++i)
      d[i] = durations_[i].load(std::memory_order_relaxed);
    s.last_us = durations_[(s.total - 1) % ring_size].load(
      std::memory_order_relaxed);
    auto at = [&](double q) {
      auto k = static_cast<size_t>(q * static_cast<double>(kept - 1) + 0.5);
      std::nth_element(d.begin(), d.begin() + static_cast<long>(k), d.end());
      return static_cast<double>(d[k]);
    };
    s.p50_us = at(0.5);
    s.p99_us = at(0.99);
  }
  std::lock_guard<std::mutex> guard{errors_mtx_};
  s.last_errors = errors_;
  return s;
}

void step_record::request_trace() noexcept {
  trace_wanted_.store(true);
}

bool step_record::trace_requested() const noexcept {
  return trace_wanted_.load();
}

void step_record::store_trace(std::string chrome_json) {
  std::lock_guard<std::mutex> guard{trace_mtx_};
  trace_ = {wall_us(), std::move(chrome_json)};
}

int64_t step_record::trace_at_us() const {
  std::lock_guard<std::mutex> guard{trace_mtx_};
  return trace_.at_us;
}

step_record::trace step_record::last_trace() const {
  std::lock_guard<std::mutex> guard{trace_mtx_};
  return trace_;
}

// -- registry ------------------------------------------------------------------

registry& registry::instance() {
  static auto* instance = new registry;
  return *instance;
}

std::shared_ptr<actor_record> registry::add(uint64_t id, identity who) {
  auto rec = std::make_shared<actor_record>(id, std::move(who));
  std::lock_guard<std::mutex> guard{mtx_};
  live_[id] = rec;
  return rec;
}

void registry::remove(uint64_t id, const std::string& reason) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = live_.find(id);
  if (i == live_.end())
    return;
  auto& rec = *i->second;
  ended_.push_back({rec.id, rec.who, rec.started_us, wall_us(),
                    rec.read().messages, reason});
  if (ended_.size() > max_ended)
    ended_.erase(ended_.begin());
  live_.erase(i);
}

std::vector<std::shared_ptr<actor_record>> registry::live() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<std::shared_ptr<actor_record>> out;
  out.reserve(live_.size());
  for (auto& [id, rec] : live_)
    out.push_back(rec);
  return out;
}

std::vector<ended_actor> registry::ended() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return ended_;
}

std::shared_ptr<step_record> registry::steps(const std::string& task) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = steps_[task];
  if (!slot)
    slot = std::make_shared<step_record>();
  return slot;
}

void registry::peer_changed(const std::string& task, peer_entry entry) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto& slot = peers_[task][entry.peer];
  if (entry.address.empty())
    entry.address = slot.address;
  slot = std::move(entry);
}

std::vector<peer_entry> registry::peers(const std::string& task) const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<peer_entry> out;
  if (auto i = peers_.find(task); i != peers_.end())
    for (auto& [name, entry] : i->second)
      out.push_back(entry);
  return out;
}

void registry::report_training(training_progress progress) {
  progress.updated_us = wall_us();
  std::lock_guard<std::mutex> guard{mtx_};
  training_[progress.task] = std::move(progress);
}

std::vector<training_progress> registry::training() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<training_progress> out;
  for (auto& [task, p] : training_)
    out.push_back(p);
  return out;
}

void report_training(training_progress progress) {
  registry::instance().report_training(std::move(progress));
}

// -- process -------------------------------------------------------------------

process_stats read_process_stats() {
  process_stats s;
  s.pid = static_cast<int64_t>(::getpid());
  s.started_us = process_start_us;
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream in{line};
    std::string key;
    in >> key;
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      s.rss_bytes = kb * 1024;
    } else if (key == "Threads:") {
      in >> s.threads;
    }
  }
  // utime and stime are fields 14 and 15, after the command in parentheses.
  std::ifstream stat{"/proc/self/stat"};
  std::string all{std::istreambuf_iterator<char>{stat}, {}};
  if (auto close = all.rfind(')'); close != std::string::npos) {
    std::istringstream in{all.substr(close + 2)};
    std::string field;
    uint64_t utime = 0;
    uint64_t stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
      if (i == 14)
        utime = std::strtoull(field.c_str(), nullptr, 10);
      else if (i == 15)
        stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    if (ticks > 0)
      s.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  }
  std::error_code ec;
  for (auto i = std::filesystem::directory_iterator{"/proc/self/fd", ec};
       !ec && i != std::filesystem::directory_iterator{}; i.increment(ec))
    ++s.open_fds;
  return s;
}

} // namespace actorflow::monitoring
