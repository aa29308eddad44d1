// Kernels under the process's tensor memory limit (issue 30 §2,
// tensor_memory.hpp): every kernel's allocations are checked, so a Fill
// past the limit is ResourceExhausted naming the node, its op, shape,
// dtype and device (where the OOM killer used to end the process), and
// leaves nothing allocated; a padded batch past it fails its dequeue and
// loses no element.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "actorflow/graph/tensor_memory.hpp"
#include "actorflow/kernels/queue_core.hpp"
#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

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

} // namespace

TEST_CASE("a Fill past the tensor memory limit is ResourceExhausted naming "
          "the node, the op, the shape and the device, and allocates "
          "nothing",
          "[memory_limit][fill]") {
  auto base = tensor_memory_in_use();
  limit_for_test limit{base + 64 * mib};
  auto node = make_node("Fill");
  node.name = "big";
  node.device = "/job:ps/replica:0/task:0/device:CPU:0";
  auto dims = tensor::vec<int64_t>({64, 1 << 20});  // 256 MiB of floats
  auto value = tensor::scalar(1.0f);
  auto in_use = tensor_memory_in_use();
  auto r = run(node, {dims, value});
  INFO(r.st.to_string());
  CHECK(r.st.code() == error_code::resource_exhausted);
  CHECK_THAT(r.st.message(),
             StartsWith("OOM when allocating tensor with shape[64,1048576] "
                        "and type float on "
                        "/job:ps/replica:0/task:0/device:CPU:0 by allocator "
                        "cpu: Fill needs 268435456 bytes, the tensor memory "
                        "limit is "
                        + std::to_string(base + 64 * mib) + " bytes and "));
  CHECK_THAT(r.st.message(), EndsWith(" [[node big]]"));
  CHECK(r.outputs.empty());
  CHECK(tensor_memory_in_use() == in_use);
  // Under the limit the same kernel runs, and its output is counted.
  auto small = run(node, {tensor::vec<int64_t>({4, 1 << 20}), value});
  REQUIRE(small.st.ok());
  CHECK(small.out().flat<float>()[12345] == 1.0f);
  CHECK(tensor_memory_in_use() == in_use + 16 * mib);
  // Every kernel is checked, not just Fill: a MatMul's output.
  auto a = tensor{dtype::float32, tensor_shape{8192, 1}};
  auto b = tensor{dtype::float32, tensor_shape{1, 8192}};
  auto mm = run("MatMul", {a, b});
  CHECK(mm.st.code() == error_code::resource_exhausted);
  CHECK_THAT(mm.st.message(), Contains("shape[8192,8192] and type float by "
                                       "allocator cpu: MatMul needs"));
}

TEST_CASE("with no limit a Fill allocates what it asks for",
          "[memory_limit][fill]") {
  limit_for_test none{0};
  auto r = run("Fill", {tensor::vec<int64_t>({16, 1 << 20}),
                        tensor::scalar(2.0f)});
  REQUIRE(r.st.ok());
  CHECK(r.out().num_elements() == 16 << 20);
}

TEST_CASE("a padded batch past the tensor memory limit fails its dequeue "
          "with ResourceExhausted and loses nothing",
          "[memory_limit][queue]") {
  limit_for_test limit{tensor_memory_in_use() + 8 * mib};
  queue_options opts;
  opts.kind = queue_kind::padding_fifo;
  opts.name = "padded";
  opts.capacity = 10;
  opts.types = {dtype::float32};
  opts.shapes = {tensor_shape{-1, -1}};
  queue_core q{opts};
  status st;
  queue_core::tuple got;
  auto done = [&](status s, queue_core::tuple values) {
    st = std::move(s);
    got = std::move(values);
  };
  // Two empty elements that pad to rows of [4096, 4096]: 128 MiB.
  q.enqueue({tensor{dtype::float32, tensor_shape{4096, 0}}}, done);
  REQUIRE(st.ok());
  q.enqueue({tensor{dtype::float32, tensor_shape{0, 4096}}}, done);
  REQUIRE(st.ok());
  q.dequeue_many(2, done);
  CHECK(st.code() == error_code::resource_exhausted);
  CHECK_THAT(st.message(),
             Contains("shape[2,4096,4096] and type float by allocator cpu: "
                      "the batch of queue 'padded' needs 134217728 bytes"));
  CHECK(q.size() == 2);
  q.dequeue(done);
  REQUIRE(st.ok());
  CHECK(got.at(0).shape() == tensor_shape{4096, 0});
}
