// The process's tensor memory budget (issue 30 §2, tensor_memory.hpp):
// live tensors' element storage is counted, an allocation under a
// tensor_memory_check that would pass the limit is ResourceExhausted and
// allocates nothing, dead tensors give their bytes back, and the buffer
// cache keeps no block past the limit.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/tensor.hpp"
#include "actorflow/graph/tensor_memory.hpp"

using namespace actorflow;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr size_t kib = size_t{1} << 10;
constexpr size_t mib = size_t{1} << 20;

/// Sets the limit for a test and puts the previous one back.
class limit_for_test {
public:
  explicit limit_for_test(size_t bytes) : previous_(tensor_memory_limit()) {
    set_tensor_memory_limit(bytes);
  }
  ~limit_for_test() {
    set_tensor_memory_limit(previous_);
  }

private:
  size_t previous_;
};

/// The op_error `f` throws, if it throws one.
template <class F>
std::optional<op_error> error_of(F f) {
  try {
    f();
  } catch (const op_error& e) {
    return e;
  }
  return std::nullopt;
}

tensor floats(size_t bytes) {
  return tensor{dtype::float32,
                tensor_shape{static_cast<int64_t>(bytes / 4)}};
}

} // namespace

TEST_CASE("tensor memory: an allocation past the limit under a check is "
          "ResourceExhausted naming the op, shape, dtype and device, and "
          "allocates nothing",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  limit_for_test limit{base + mib};
  REQUIRE(tensor_memory_limit() == base + mib);
  tensor_memory_check check{"Fill", "/job:ps/replica:0/task:0/device:CPU:0"};
  auto half = floats(512 * kib);
  CHECK(tensor_memory_in_use() == base + 512 * kib);
  auto err = error_of([] { floats(mib); });
  REQUIRE(err);
  CHECK(err->code() == error_code::resource_exhausted);
  CHECK(err->get_status().message()
        == "OOM when allocating tensor with shape[262144] and type float on "
           "/job:ps/replica:0/task:0/device:CPU:0 by allocator cpu: Fill "
           "needs 1048576 bytes, the tensor memory limit is "
             + std::to_string(base + mib) + " bytes and "
             + std::to_string(base + 512 * kib) + " are in use");
  CHECK(tensor_memory_in_use() == base + 512 * kib);
  // Every way of making an owned tensor is checked.
  auto shape = tensor_shape{2, 65536};
  for (auto* what : {"uninitialized", "deep_copy", "string"}) {
    INFO(what);
    auto e = error_of([&] {
      if (std::string{what} == "uninitialized")
        tensor::uninitialized(dtype::float64, shape);
      else if (std::string{what} == "deep_copy")
        half.deep_copy().deep_copy();  // the first one fits
      else
        tensor{dtype::string, tensor_shape{65536}};
    });
    REQUIRE(e);
    CHECK(e->code() == error_code::resource_exhausted);
    CHECK_THAT(e->what(), StartsWith("ResourceExhausted: OOM when "
                                     "allocating tensor with shape["));
    CHECK(tensor_memory_in_use() == base + 512 * kib);
  }
  // What fits still allocates: up to the limit exactly.
  auto rest = floats(512 * kib);
  CHECK(tensor_memory_in_use() == base + mib);
  CHECK(error_of([] { floats(64); }));
  CHECK(error_of([] { tensor::scalar(1.0f); }));
}

TEST_CASE("tensor memory: tensors give their bytes back when the last "
          "tensor sharing the buffer dies",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  limit_for_test limit{base + mib};
  tensor_memory_check check{"Fill"};
  {
    auto t = floats(768 * kib);
    auto copy = t;
    auto slice = t.slice(0, 1);
    auto reshaped = t.reshaped(tensor_shape{2, 98304});
    CHECK(tensor_memory_in_use() == base + 768 * kib);
    t = tensor{};
    copy = tensor{};
    reshaped = tensor{};
    CHECK(tensor_memory_in_use() == base + 768 * kib);
    CHECK(error_of([] { floats(512 * kib); }));
  }
  CHECK(tensor_memory_in_use() == base);
  // The memory is there again.
  auto t = floats(mib);
  CHECK(t.num_elements() == 262144);
  CHECK(tensor_memory_in_use() == base + mib);
  t = tensor{};
  CHECK(tensor_memory_in_use() == base);
  // Sizes count as allocated: 64-byte multiples.
  {
    auto one = tensor::scalar(1.0f);
    CHECK(tensor_memory_in_use() == base + 64);
    // A string tensor's slots, not its characters.
    auto strings = tensor::from_vector<std::string>(
      {std::string(1000, 'x'), "", ""}, tensor_shape{3});
    auto slots = (3 * sizeof(std::string) + 63) / 64 * 64;
    CHECK(tensor_memory_in_use() == base + 64 + slots);
  }
  CHECK(tensor_memory_in_use() == base);
}

TEST_CASE("tensor memory: outside a check tensors are counted but not "
          "refused, a borrowed buffer is not counted, and 0 is no limit",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  {
    limit_for_test limit{base + 64 * kib};
    auto big = floats(2 * mib);
    CHECK(tensor_memory_in_use() == base + 2 * mib);
    std::shared_ptr<void> storage{std::aligned_alloc(64, mib), std::free};
    auto borrowed = tensor::borrow(dtype::float32, tensor_shape{1 << 18},
                                   storage.get(), storage);
    CHECK(tensor_memory_in_use() == base + 2 * mib);
    tensor_memory_check check{"Fill"};
    CHECK(error_of([] { floats(mib); }));
    // owned() of a borrowed tensor is a checked copy.
    CHECK(error_of([&] { borrowed.owned(); }));
  }
  CHECK(tensor_memory_in_use() == base);
  limit_for_test none{0};
  CHECK(tensor_memory_limit() == 0);
  tensor_memory_check check{"Fill"};
  auto big = floats(64 * mib);
  CHECK(tensor_memory_in_use() == base + 64 * mib);
}

TEST_CASE("tensor memory: checks nest and end with their scope",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  limit_for_test limit{base + 64 * kib};
  {
    tensor_memory_check outer{"Outer"};
    {
      tensor_memory_check inner{"Inner"};
      auto err = error_of([] { floats(mib); });
      REQUIRE(err);
      CHECK_THAT(err->what(), Contains("by allocator cpu: Inner needs"));
    }
    auto err = error_of([] { floats(mib); });
    REQUIRE(err);
    CHECK_THAT(err->what(), Contains("by allocator cpu: Outer needs"));
  }
  CHECK_NOTHROW(floats(mib));
  // Another thread's check does not apply to this one.
  tensor_memory_check here{"Here"};
  std::thread other{[] { CHECK_NOTHROW(floats(mib)); }};
  other.join();
  CHECK(tensor_memory_in_use() == base);
}

TEST_CASE("tensor memory: the count is exact when many threads allocate and "
          "free, each freeing tensors the others made",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  std::vector<std::vector<tensor>> made(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < made.size(); ++i)
    threads.emplace_back([&made, i] {
      // Mostly small (malloc'd) buffers, every 100th of 300 KiB (mmap'd
      // and cached).
      for (size_t k = 0; k < 1000; ++k)
        made[i].push_back(floats(k % 100 == 0
                                   ? 300 * kib
                                   : ((k * 7919) % 1024 + 1) * 16));
    });
  for (auto& t : threads)
    t.join();
  threads.clear();
  CHECK(tensor_memory_in_use() > base);
  for (size_t i = 0; i < made.size(); ++i)
    threads.emplace_back([&made, i] {
      made[(i + 1) % made.size()].clear();
    });
  for (auto& t : threads)
    t.join();
  CHECK(tensor_memory_in_use() == base);
}

TEST_CASE("tensor memory: the buffer cache keeps no block past the limit",
          "[tensor_memory]") {
  auto base = tensor_memory_in_use();
  {
    limit_for_test none{0};
    // Freed 1 MiB and 16 MiB blocks stay in the cache for reuse.
    for (int i = 0; i < 4; ++i) {
      floats(mib);
      floats(16 * mib);
    }
  }
  CHECK(tensor_memory_cached() >= 17 * mib);
  {
    // Lowering the limit unmaps what no longer fits.
    limit_for_test tight{base + 4 * mib};
    CHECK(tensor_memory_cached() <= 4 * mib);
    // A block freed while the limit is tight is not kept when it would
    // not fit beside the live tensors and the cache.
    auto live = floats(3 * mib);
    auto cached = tensor_memory_cached();
    auto freed = floats(2 * mib);
    freed = tensor{};
    CHECK(tensor_memory_cached() <= cached);
    CHECK(tensor_memory_in_use() + tensor_memory_cached() <= base + 4 * mib);
    // A fresh block makes the cache give way.
    tensor_memory_check check{"Fill"};
    auto fresh = floats(mib - 4 * kib);
    CHECK(tensor_memory_in_use() + tensor_memory_cached() <= base + 4 * mib);
  }
}

TEST_CASE("tensor memory: the default is 80% of the machine's memory or "
          "less",
          "[tensor_memory]") {
  auto physical = static_cast<size_t>(::sysconf(_SC_PHYS_PAGES))
                  * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
  auto limit = default_tensor_memory_limit();
  CHECK(limit > 0);
  CHECK(limit <= physical / 5 * 4);
}
