// Kernels that build shapes from their inputs' values (Fill, the random
// ops, Reshape, Tile, ConcatV2, broadcasting, UnsortedSegmentSum, the
// padding queue's batches) refuse sizes that overflow with InvalidArgument
// instead of allocating a short buffer and writing past it (issue 30).

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "actorflow/kernels/queue_core.hpp"
#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr int64_t two_62 = int64_t{1} << 62;

void check_overflow(const run_result& r) {
  INFO(r.st.to_string());
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(),
             StartsWith("Encountered overflow when multiplying"));
  CHECK_THAT(r.st.message(), Contains("[[node n]]"));
}

} // namespace

TEST_CASE("Fill of 2^62+1 floats is InvalidArgument, not a 4-byte buffer",
          "[checked_size][fill]") {
  // 4 * (2^62 + 1) wraps to 4 bytes: the kernel used to fill 2^62 + 1
  // elements into them (SIGSEGV).
  auto r = run("Fill", {tensor::vec<int64_t>({two_62 + 1}),
                        tensor::scalar(1.0f)});
  check_overflow(r);
  CHECK_THAT(r.st.message(),
             Contains("4611686018427387905 with 4, result: -1 (the bytes of "
                      "a float32 tensor of shape [4611686018427387905])"));
  check_overflow(run("Fill", {tensor::vec<int64_t>({int64_t{1} << 61}),
                              tensor::scalar(1.0)}));
  check_overflow(run("Fill", {tensor::vec<int64_t>({int64_t{1} << 59}),
                              tensor::scalar("s")}));
  // The element count itself overflows.
  auto count = run("Fill", {tensor::vec<int64_t>({two_62, 4}),
                            tensor::scalar(1.0f)});
  check_overflow(count);
  CHECK_THAT(count.st.message(), Contains("has too many elements"));
  auto negative = run("Fill", {tensor::vec<int32_t>({2, -3}),
                               tensor::scalar(1.0f)});
  CHECK(negative.st.code() == error_code::invalid_argument);
  CHECK(negative.st.message() == "Dimension -3 must be >= 0 [[node n]]");
}

TEST_CASE("Fill whose bytes fit but cannot be allocated is ResourceExhausted",
          "[checked_size][fill]") {
  // 2^62 + 1 bytes: more than any address space.
  auto r = run("Fill", {tensor::vec<int64_t>({two_62 + 1}),
                        tensor::scalar(true)});
  CHECK(r.st.code() == error_code::resource_exhausted);
  CHECK_THAT(r.st.message(), Contains("OOM when allocating"));
}

TEST_CASE("Fill of large empty shapes is a correct empty tensor",
          "[checked_size][fill]") {
  const int64_t big = (int64_t{1} << 32) + 5;
  auto r = run("Fill", {tensor::vec<int64_t>({big, 0}), tensor::scalar(1.0f)});
  CHECK(r.out().shape() == tensor_shape{big, 0});
  CHECK(r.out().num_elements() == 0);
}

TEST_CASE("the random ops refuse shapes whose size overflows",
          "[checked_size][random]") {
  std::mt19937_64 rng{7};
  for (const char* op : {"RandomUniform", "RandomStandardNormal",
                         "TruncatedNormal"}) {
    INFO(op);
    auto node = make_node(op, {{"dtype", dtype::float32}});
    check_overflow(run(node, {tensor::vec<int64_t>({two_62 + 1})}, &rng));
    check_overflow(
      run(node, {tensor::vec<int64_t>({int64_t{1} << 40, int64_t{1} << 40})},
          &rng));
    auto negative = run(node, {tensor::vec<int32_t>({-1})}, &rng);
    CHECK(negative.st.code() == error_code::invalid_argument);
  }
}

TEST_CASE("Reshape refuses a requested shape whose count overflows",
          "[checked_size][reshape]") {
  tensor empty{dtype::float32, tensor_shape{0}};
  auto r = run("Reshape",
               {empty, tensor::vec<int64_t>({0, int64_t{1} << 32,
                                             int64_t{1} << 32})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(),
             StartsWith("Requested shape [0,4294967296,4294967296]: "
                        "Encountered overflow"));
  auto unknown = run("Reshape", {tensor::vec<float>({1, 2}),
                                 tensor::vec<int64_t>({-1, two_62, 4})});
  CHECK(unknown.st.code() == error_code::invalid_argument);
  // Still fine: an empty tensor to a large empty shape.
  auto ok = run("Reshape", {empty, tensor::vec<int64_t>({two_62, 0})});
  CHECK(ok.out().shape() == tensor_shape{two_62, 0});
}

TEST_CASE("Tile refuses multiples whose product overflows, and tiles empty "
          "tensors into large empty ones",
          "[checked_size][tile]") {
  tensor x{dtype::float32, tensor_shape{2, 0}};
  auto r = run("Tile", {x, tensor::vec<int64_t>({two_62, 1})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(),
             StartsWith("Encountered overflow when multiplying 2 with "
                        "4611686018427387904"));
  // [1,0] tiled [2^62, 2^62] is [2^62, 0]: empty, whatever the walk's
  // dims multiply to.
  auto empty = run("Tile", {tensor{dtype::float32, tensor_shape{1, 0}},
                            tensor::vec<int64_t>({two_62, two_62})});
  CHECK(empty.out().shape() == tensor_shape{two_62, 0});
  // A filled output whose bytes overflow.
  check_overflow(run("Tile", {tensor::vec<float>({1}),
                              tensor::vec<int64_t>({two_62 + 1})}));
}

TEST_CASE("ConcatV2 refuses an output dimension past int64",
          "[checked_size][concat]") {
  tensor a{dtype::float32, tensor_shape{0, two_62}};
  tensor b{dtype::float32, tensor_shape{0, two_62}};
  auto r = run("ConcatV2", {a, b, tensor::scalar<int32_t>(1)});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("overflows int64"));
  // Just below: an empty result.
  tensor c{dtype::float32, tensor_shape{0, two_62 - 1}};
  auto ok = run("ConcatV2", {a, c, tensor::scalar<int32_t>(1)});
  CHECK(ok.out().shape() == tensor_shape{0, std::numeric_limits<int64_t>::max()});
}

TEST_CASE("broadcasting two empty operands to a shape past int64 is "
          "InvalidArgument",
          "[checked_size][broadcast]") {
  tensor x{dtype::float32, tensor_shape{two_62, 1, 0}};
  tensor y{dtype::float32, tensor_shape{1, two_62, 0}};
  auto r = run("Add", {x, y});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), StartsWith("Incompatible shapes: "));
  CHECK_THAT(r.st.message(), Contains("Encountered overflow"));
  // Empty results that fit are fine.
  tensor z{dtype::float32, tensor_shape{1, 1 << 20, 0}};
  CHECK(run("Add", {tensor{dtype::float32, tensor_shape{1 << 20, 1, 0}}, z})
          .out()
          .shape()
        == tensor_shape{1 << 20, 1 << 20, 0});
}

TEST_CASE("UnsortedSegmentSum refuses a num_segments whose output overflows",
          "[checked_size][segment]") {
  auto r = run("UnsortedSegmentSum",
               {tensor::vec<float>({1, 2}), tensor::vec<int32_t>({0, 1}),
                tensor::scalar<int64_t>(two_62 + 1)});
  check_overflow(r);
}

TEST_CASE("a padded batch whose shape overflows fails its dequeue and loses "
          "nothing",
          "[checked_size][queue]") {
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
  // Two empty elements that pad to rows of [2^28, 2^28]: a batch of 2^57
  // floats, whose 2^59 bytes no address space holds.
  q.enqueue({tensor{dtype::float32, tensor_shape{int64_t{1} << 28, 0}}}, done);
  REQUIRE(st.ok());
  q.enqueue({tensor{dtype::float32, tensor_shape{0, int64_t{1} << 28}}}, done);
  REQUIRE(st.ok());
  q.dequeue_many(2, done);
  CHECK(st.code() == error_code::resource_exhausted);
  CHECK(q.size() == 2);
  // Padded to [2^62, 2^62]: the count overflows.
  queue_core p{opts};
  p.enqueue({tensor{dtype::float32, tensor_shape{two_62, 0}}}, done);
  p.enqueue({tensor{dtype::float32, tensor_shape{0, two_62}}}, done);
  p.dequeue_many(2, done);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Contains("Encountered overflow"));
  CHECK(p.size() == 2);
  // The elements are still there, in order.
  p.dequeue(done);
  REQUIRE(st.ok());
  CHECK(got.at(0).shape() == tensor_shape{two_62, 0});
}
