// chunk_landing (type_ids.hpp): the destinations of chunked tensors, so
// that the middleman thread deserializes each chunk straight into place
// instead of into a buffer the executor then copies from.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow {

namespace {

struct landing {
  tensor dest;
  uint64_t header = 0;
  uint64_t total = 0;
  uint64_t landed = 0;
  std::chrono::steady_clock::time_point created;
};

struct landings {
  std::mutex mtx;
  std::map<std::pair<int64_t, std::string>, landing> by_key;
};

landings& registry() {
  // Never destroyed: the middleman thread may deserialize during exit.
  static auto* instance = new landings;
  return *instance;
}

// A destination whose remaining chunks never come (the sender's step
// failed, or the step ended here first and a chunk arrived after) must
// not keep its tensor forever.
constexpr auto max_age = std::chrono::minutes(1);

void drop_old(landings& r) {
  auto now = std::chrono::steady_clock::now();
  for (auto i = r.by_key.begin(); i != r.by_key.end();)
    i = now - i->second.created > max_age ? r.by_key.erase(i) : std::next(i);
}

} // namespace

void chunk_landing::add(int64_t step, const std::string& key, tensor dest,
                        uint64_t header, uint64_t total, uint64_t landed) {
  auto& r = registry();
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{r.mtx};
  drop_old(r);
  r.by_key[{step, key}] = landing{std::move(dest), header, total, landed,
                                  now};
}

tensor chunk_landing::take(int64_t step, const std::string& key,
                           uint64_t offset, uint64_t n, uint64_t& header) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto i = r.by_key.find({step, key});
  if (i == r.by_key.end())
    return {};
  auto& l = i->second;
  if (offset < l.header || offset > l.total || n > l.total - offset)
    return {};
  header = l.header;
  auto dest = l.dest;
  l.landed += n;
  if (l.landed >= l.total)
    r.by_key.erase(i);
  return dest;
}

void chunk_landing::forget(int64_t step) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto first = r.by_key.lower_bound({step, std::string{}});
  auto last = first;
  while (last != r.by_key.end() && last->first.first == step)
    ++last;
  r.by_key.erase(first, last);
  drop_old(r);
}

} // namespace actorflow
