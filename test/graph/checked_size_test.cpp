// Tensor sizes computed from dimensions that come from outside are checked
// (issue 30): checked_num_elements and checked_tensor_size, the tensor
// constructors, the wire decoder, the graph builders that take a shape
// (fill, zeros, ones, the random ops).

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/wire.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr int64_t two_62 = int64_t{1} << 62;
constexpr int64_t max_int64 = std::numeric_limits<int64_t>::max();

status count(std::vector<int64_t> dims, int64_t& n) {
  return checked_num_elements(dims, n);
}

} // namespace

// -- checked_num_elements -------------------------------------------------------

TEST_CASE("checked_num_elements counts a shape's elements", "[checked_size]") {
  int64_t n = -7;
  REQUIRE(count({}, n).ok());
  CHECK(n == 1);
  REQUIRE(count({2, 3, 4}, n).ok());
  CHECK(n == 24);
  REQUIRE(count({3, 0, 5}, n).ok());
  CHECK(n == 0);
  REQUIRE(count({two_62 + 1}, n).ok());
  CHECK(n == two_62 + 1);
  REQUIRE(count({max_int64}, n).ok());
  CHECK(n == max_int64);
  // Zero elements, and the non-zero dims multiply to 2^62: fine in any
  // order.
  REQUIRE(count({0, int64_t{1} << 31, int64_t{1} << 31}, n).ok());
  CHECK(n == 0);
  REQUIRE(count({int64_t{1} << 31, int64_t{1} << 31, 0}, n).ok());
  CHECK(n == 0);
}

TEST_CASE("checked_num_elements refuses negative dimensions and overflow "
          "with TensorFlow's messages",
          "[checked_size][errors]") {
  int64_t n = -7;
  auto st = count({2, -3}, n);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "Dimension -3 must be >= 0");
  CHECK(n == -7);
  st = count({two_62, 4}, n);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message()
        == "Encountered overflow when multiplying 4611686018427387904 with "
           "4, result: -1 (shape [4611686018427387904,4] has too many "
           "elements)");
  CHECK(n == -7);
  // A zero dimension does not make an overflowing product safe: every
  // partial product of a tensor's dims must fit (strides, row sizes), in
  // whatever order they are taken.
  st = count({int64_t{1} << 32, int64_t{1} << 32, 0}, n);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), StartsWith("Encountered overflow when multiplying"));
  st = count({0, int64_t{1} << 32, int64_t{1} << 32}, n);
  CHECK(st.code() == error_code::invalid_argument);
  // A shape of unknown rank has no count.
  CHECK(checked_num_elements(tensor_shape::unknown(), n).code()
        == error_code::invalid_argument);
}

TEST_CASE("tensor_shape::num_elements is -1 where the count overflows",
          "[checked_size]") {
  CHECK(tensor_shape{2, 3}.num_elements() == 6);
  CHECK(tensor_shape{int64_t{1} << 32, int64_t{1} << 32}.num_elements()
        == -1);
  CHECK(tensor_shape{int64_t{1} << 32, int64_t{1} << 32, 0}.num_elements()
        == -1);
  CHECK(tensor_shape{-1, 3}.num_elements() == -1);
  CHECK(tensor_shape{3, 0}.num_elements() == 0);
}

TEST_CASE("multiply_without_overflow and add_without_overflow",
          "[checked_size]") {
  CHECK(multiply_without_overflow(6, 7) == 42);
  CHECK(multiply_without_overflow(0, max_int64) == 0);
  CHECK(multiply_without_overflow(max_int64, 1) == max_int64);
  CHECK(multiply_without_overflow(two_62, 2) == -1);
  CHECK(multiply_without_overflow(two_62 + 1, 4) == -1);
  CHECK(multiply_without_overflow(-1, 2) == -1);
  CHECK(add_without_overflow(2, 3) == 5);
  CHECK(add_without_overflow(max_int64, 0) == max_int64);
  CHECK(add_without_overflow(max_int64, 1) == -1);
  CHECK(add_without_overflow(-2, 1) == -1);
}

TEST_CASE("checked_tensor_size refuses a count whose bytes overflow",
          "[checked_size][errors]") {
  int64_t n = 0;
  size_t bytes = 0;
  REQUIRE(checked_tensor_size(dtype::float32, tensor_shape{2, 3}, n, bytes)
            .ok());
  CHECK(n == 6);
  CHECK(bytes == 24);
  REQUIRE(checked_tensor_size(dtype::bool_, tensor_shape{two_62 + 1}, n,
                              bytes)
            .ok());
  CHECK(bytes == static_cast<size_t>(two_62 + 1));
  // 4 * (2^62 + 1) is 2^64 + 4: 4 bytes, once wrapped.
  auto st = checked_tensor_size(dtype::float32, tensor_shape{two_62 + 1}, n,
                                bytes);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message()
        == "Encountered overflow when multiplying 4611686018427387905 with "
           "4, result: -1 (the bytes of a float32 tensor of shape "
           "[4611686018427387905])");
  // Strings take a std::string each.
  st = checked_tensor_size(dtype::string, tensor_shape{int64_t{1} << 59}, n,
                           bytes);
  CHECK(st.code() == error_code::invalid_argument);
}

// -- the tensor constructors --------------------------------------------------------

TEST_CASE("a tensor whose size overflows is InvalidArgument, not a short "
          "buffer",
          "[checked_size][errors]") {
  auto overflow = [](auto make) {
    auto err = error_of(make);
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->what(), Contains("Encountered overflow when multiplying"));
  };
  overflow([] { tensor{dtype::float32, tensor_shape{two_62 + 1}}; });
  overflow([] { tensor::uninitialized(dtype::float32, {two_62 + 1}); });
  overflow([] { tensor{dtype::int64, tensor_shape{int64_t{1} << 61}}; });
  overflow([] { tensor{dtype::string, tensor_shape{int64_t{1} << 59}}; });
  overflow([] {
    tensor{dtype::float32, tensor_shape{int64_t{1} << 32, int64_t{1} << 32}};
  });
  overflow([] {
    tensor{dtype::float32,
           tensor_shape{int64_t{1} << 32, int64_t{1} << 32, 0}};
  });
  overflow([] {
    static float cell = 0;
    tensor::borrow(dtype::float32, tensor_shape{two_62 + 1}, &cell,
                   std::make_shared<int>(0));
  });
  // Empty tensors with large dimensions are fine.
  tensor empty{dtype::float32, tensor_shape{two_62, 0}};
  CHECK(empty.num_elements() == 0);
  CHECK(empty.byte_size() == 0);
  // Reshaping to a shape whose count overflows never matches.
  CHECK(error_of([&] {
          (void) empty.reshaped(tensor_shape{0, int64_t{1} << 32,
                                             int64_t{1} << 32});
        }).has_value());
}

// -- the wire ---------------------------------------------------------------------

namespace {

// A wire tensor: version, dtype, a known-rank shape, a byte count and
// `data` (as graph/wire.hpp lays them out).
std::string wire_tensor(uint8_t type, std::vector<int64_t> dims,
                        uint64_t n_bytes, const std::string& data) {
  std::string out;
  byte_writer w{out};
  w.u8(wire_format_version);
  w.u8(type);
  encode(w, tensor_shape{std::move(dims)});
  w.u64(n_bytes);
  w.raw(data.data(), data.size());
  return out;
}

} // namespace

TEST_CASE("the wire refuses tensors whose size overflows", "[checked_size]") {
  tensor x;
  // [2^62 + 1] floats claiming the 4 bytes the wrapped product gives.
  auto st = from_bytes(wire_tensor(1, {two_62 + 1}, 4, "abcd"), x);
  CHECK(st.code() == error_code::data_loss);
  CHECK_FALSE(x.valid());
  st = from_bytes(wire_tensor(1, {int64_t{1} << 32, int64_t{1} << 32, 0}, 0,
                              ""),
                  x);
  CHECK(st.code() == error_code::data_loss);
  CHECK_THAT(st.message(), Contains("Encountered overflow"));
  st = from_bytes(wire_tensor(1, {3, -1}, 0, ""), x);
  CHECK(st.code() == error_code::data_loss);
  CHECK_THAT(st.message(), Contains("Dimension -1 must be >= 0"));
  size_t header = 0;
  auto raw = wire_tensor(1, {two_62 + 1}, 4, "");
  st = tensor_from_header(raw, x, header, uint64_t{1} << 30);
  CHECK(st.code() == error_code::data_loss);
  CHECK_FALSE(x.valid());
}

// -- the graph builders -------------------------------------------------------------

TEST_CASE("fill, zeros and ones keep dimensions past int32 as int64",
          "[checked_size][ops]") {
  graph g;
  auto as_default = g.as_default();
  const int64_t big = (int64_t{1} << 32) + 5;
  auto f = fill({big}, constant(1.0f), "f");
  auto dims = f.op().inputs()[0];
  REQUIRE(dims.op().type() == "Const");
  auto& value = dims.op().def().attr<tensor>("value");
  CHECK(value == tensor::vec<int64_t>({big}));
  CHECK(f.shape() == tensor_shape{big});
  // Small shapes stay int32, as Python's convert_to_tensor makes them.
  auto small = ones({2, 3});
  CHECK(small.op().inputs()[0].type() == dtype::int32);
  auto z = zeros({big, 0});
  CHECK(z.op().inputs()[0].op().def().attr<tensor>("value")
        == tensor::vec<int64_t>({big, 0}));
  auto r = random_uniform({big, 0}, 0, 1, dtype::float32, 1, "r");
  auto raw = g.find_operation("r/RandomUniform");
  REQUIRE(raw.valid());
  CHECK(raw.inputs()[0].type() == dtype::int64);
  CHECK(raw.def().attr<dtype>("T") == dtype::int64);
  CHECK(r.shape() == tensor_shape{big, 0});
}

TEST_CASE("fill, zeros, ones and the random ops refuse shapes no tensor can "
          "have",
          "[checked_size][ops][errors]") {
  graph g;
  auto as_default = g.as_default();
  check_invalid(error_of([] { fill({2, -3}, constant(1.0f)); }),
                "Fill 'Fill': Dimension -3 must be >= 0");
  check_invalid(error_of([] { zeros({-1}); }), "Dimension -1 must be >= 0");
  check_invalid(error_of([] { ones({two_62, 4}); }),
                "Encountered overflow when multiplying 4611686018427387904 "
                "with 4");
  check_invalid(error_of([] { random_normal({two_62, 2, 2}); }),
                "Encountered overflow");
  check_invalid(error_of([] { truncated_normal({-2}); }),
                "Dimension -2 must be >= 0");
  check_invalid(error_of([] {
                  reshape(constant(tensor::vec<float>({1, 2})),
                          {two_62, 4});
                }),
                "Cannot reshape a tensor with 2 elements");
  // Nothing was added for the refused ones but their constants' inputs.
  CHECK_FALSE(g.find_operation("Fill").valid());
}
