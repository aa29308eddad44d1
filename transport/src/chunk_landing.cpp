// chunk_landing (type_ids.hpp): the destinations of chunked tensors, so
// that the middleman thread deserializes each chunk straight into place
// instead of into a buffer the executor then copies from.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "actorflow/transport/system_data.hpp"
#include "actorflow/transport/type_ids.hpp"

namespace actorflow {

namespace {

// A destination whose remaining chunks never come (the sender's step
// failed, or the step ended here first and a chunk arrived after) must
// not keep its tensor forever.
constexpr auto max_age = std::chrono::minutes(1);

} // namespace

std::shared_ptr<chunk_landing> chunk_landing::of(caf::actor_system& sys) {
  return system_data<chunk_landing>(sys);
}

void chunk_landing::drop_old() {
  auto now = std::chrono::steady_clock::now();
  for (auto i = by_key_.begin(); i != by_key_.end();)
    i = now - i->second.created > max_age ? by_key_.erase(i) : std::next(i);
}

void chunk_landing::add(int64_t step, const std::string& key, tensor dest,
                        uint64_t header, uint64_t total, uint64_t landed) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{mtx_};
  drop_old();
  by_key_[{step, key}] = landing{std::move(dest), header, total, landed, now};
}

tensor chunk_landing::take(int64_t step, const std::string& key,
                           uint64_t offset, uint64_t n, uint64_t& header) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = by_key_.find({step, key});
  if (i == by_key_.end())
    return {};
  auto& l = i->second;
  if (offset < l.header || offset > l.total || n > l.total - offset)
    return {};
  header = l.header;
  auto dest = l.dest;
  l.landed += n;
  if (l.landed >= l.total)
    by_key_.erase(i);
  return dest;
}

void chunk_landing::forget(int64_t step) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto first = by_key_.lower_bound({step, std::string{}});
  auto last = first;
  while (last != by_key_.end() && last->first.first == step)
    ++last;
  by_key_.erase(first, last);
  drop_old();
}

} // namespace actorflow
