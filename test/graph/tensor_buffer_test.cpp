// Tensor element storage (graph/src/tensor.cpp): buffers of 256 KiB and
// more come from mmap and are reused through a bounded cache. A reused
// block must look new, and memory must stay bounded however many tensors
// pass through, even when each is allocated on one thread and freed on
// another (what a queue between a receiving and a sending thread does).
// A borrowed buffer (tensor::borrow) is someone else's memory, kept alive
// by its owner.

#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/tensor.hpp"

using namespace actorflow;

namespace {

double resident_mib() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

} // namespace

TEST_CASE("tensor buffers: zero-filled and 64-byte aligned at every size, "
          "also when a freed block is reused",
          "[tensor]") {
  for (int64_t bytes : {int64_t{64}, int64_t{255} << 10, int64_t{256} << 10,
                        int64_t{1} << 20, (int64_t{1} << 20) + 4,
                        int64_t{8} << 20, int64_t{9} << 20}) {
    INFO(bytes << " bytes");
    auto n = bytes / 4;
    for (int round = 0; round < 3; ++round) {
      tensor t{dtype::float32, tensor_shape{n}};
      auto* data = t.flat<float>().data();
      CHECK(reinterpret_cast<std::uintptr_t>(data) % 64 == 0);
      bool zero = true;
      for (int64_t i = 0; i < n; ++i)
        zero = zero && data[i] == 0.0f;
      CHECK(zero);
      // Dirty it: the next round may get this very block back.
      for (int64_t i = 0; i < n; ++i)
        data[i] = 1.5f;
    }
    auto u = tensor::uninitialized(dtype::float32, tensor_shape{n});
    CHECK(u.num_elements() == n);
    CHECK(reinterpret_cast<std::uintptr_t>(u.flat<float>().data()) % 64
          == 0);
  }
}

TEST_CASE("tensor buffers: 2 GiB of 1 MiB tensors allocated on one thread "
          "and freed on another leave memory bounded",
          "[tensor]") {
#ifdef __SANITIZE_ADDRESS__
  // ASan keeps freed memory in its quarantine (256 MiB): resident memory
  // says nothing about the buffers' reuse there (scripts/sanitize.sh).
  WARN("built with AddressSanitizer: resident-memory bound not checked");
  return;
#endif
  auto before = resident_mib();
  REQUIRE(before > 0);
  constexpr int count = 2048;
  std::deque<tensor> handed;
  std::mutex mtx;
  std::thread consumer{[&] {
    int freed = 0;
    while (freed < count) {
      std::deque<tensor> batch;
      {
        std::lock_guard<std::mutex> guard{mtx};
        batch.swap(handed);
      }
      freed += static_cast<int>(batch.size());
      batch.clear(); // frees on this thread
      std::this_thread::yield();
    }
  }};
  double peak = before;
  for (int i = 0; i < count; ++i) {
    auto t = tensor::uninitialized(dtype::float32, tensor_shape{1 << 18});
    t.flat<float>()[0] = static_cast<float>(i); // touch it
    for (auto& x : t.flat<float>())
      x = 1.0f;
    for (;;) {
      std::lock_guard<std::mutex> guard{mtx};
      if (handed.size() < 16) { // a queue of 16 elements, as the bench's
        handed.push_back(std::move(t));
        break;
      }
    }
    if (i % 64 == 0)
      peak = std::max(peak, resident_mib());
  }
  consumer.join();
  peak = std::max(peak, resident_mib());
  INFO("resident before " << before << " MiB, peak " << peak << " MiB");
  // Live: at most ~17 MiB in the queue; cached: at most 32 MiB.
  CHECK(peak - before < 96.0);
}

TEST_CASE("tensor buffers: a borrowed buffer is read in place and its "
          "owner lives while any tensor shares it",
          "[tensor][borrow]") {
  alignas(64) float data[6] = {1, 2, 3, 4, 5, 6};
  auto owner = std::make_shared<int>(0);
  std::weak_ptr<int> alive = owner;
  {
    auto t = tensor::borrow(dtype::float32, tensor_shape{3, 2}, data, owner);
    owner.reset();
    CHECK(t.borrowed());
    CHECK(t.raw() == data);
    CHECK(t == tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
    // A slice shares it; owned() is a copy.
    auto rows = t.slice(1, 3);
    CHECK(rows.borrowed());
    auto copy = t.owned();
    CHECK_FALSE(copy.borrowed());
    CHECK(copy.raw() != data);
    CHECK(copy == t);
    // Also when the borrowed tensor itself is handed over.
    auto handed = rows;
    auto moved = std::move(handed).owned();
    CHECK_FALSE(moved.borrowed());
    CHECK(moved.raw() != rows.raw());
    CHECK(moved == rows);
    t = tensor{};
    CHECK_FALSE(alive.expired());
    CHECK(rows.flat<float>()[0] == 3);
  }
  CHECK(alive.expired());
  auto plain = tensor::vec<float>({1});
  CHECK_FALSE(plain.borrowed());
  CHECK(plain.owned().raw() == plain.raw()); // not copied
  auto plain_data = plain.raw();
  CHECK(std::move(plain).owned().raw() == plain_data); // moved
  CHECK_FALSE(tensor{}.borrowed());
  auto keeper = std::make_shared<int>(0);
  CHECK_THROWS_AS(tensor::borrow(dtype::string, tensor_shape{1}, data, keeper),
                  op_error);
  CHECK_THROWS_AS(tensor::borrow(dtype::float32, tensor_shape{-1}, data, keeper),
                  op_error);
  CHECK_THROWS_AS(tensor::borrow(dtype::float32, tensor_shape{1}, data, nullptr),
                  op_error);
}
