// Tensor slices (tensor::slice, sub_slice, join_rows): views of dimension
// 0 that share their tensor's buffer, as TF's Tensor::Slice. Queues hand
// out enqueue_many's rows this way.

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actorflow/graph/tensor.hpp"

using namespace actorflow;

namespace {

// A [rows, 3] float tensor holding 0, 1, 2, ...
tensor counting(int64_t rows) {
  tensor t{dtype::float32, tensor_shape{rows, 3}};
  auto xs = t.flat<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const tensor& t) {
  auto xs = t.flat<float>();
  return {xs.begin(), xs.end()};
}

error_code code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const op_error& e) {
    return e.code();
  }
  return error_code::ok;
}

} // namespace

TEST_CASE("slice and sub_slice share the buffer and see their rows only",
          "[tensor]") {
  auto batch = counting(4);
  auto middle = batch.slice(1, 3);
  CHECK(middle.shape() == tensor_shape{2, 3});
  CHECK(values(middle) == std::vector<float>{3, 4, 5, 6, 7, 8});
  CHECK(middle.raw() == static_cast<const float*>(batch.raw()) + 3);
  auto row = batch.sub_slice(3);
  CHECK(row.shape() == tensor_shape{3});
  CHECK(values(row) == std::vector<float>{9, 10, 11});
  // A slice of a slice counts from its own first row.
  CHECK(values(middle.sub_slice(1)) == std::vector<float>{6, 7, 8});
  // Not unique while the batch lives: an in-place update must copy first.
  CHECK_FALSE(row.unique());
  batch = tensor{};
  middle = tensor{};
  CHECK(row.unique());
  CHECK(values(row) == std::vector<float>{9, 10, 11});
  // An empty range is a valid, empty slice.
  CHECK(counting(2).slice(2, 2).shape() == tensor_shape{0, 3});
}

TEST_CASE("deep_copy, reshape and comparison of a slice use its rows",
          "[tensor]") {
  auto batch = counting(3);
  auto row = batch.sub_slice(1);
  auto copy = row.deep_copy();
  CHECK(copy.raw() != row.raw());
  CHECK(copy.unique());
  CHECK(copy == row);
  CHECK(values(copy) == std::vector<float>{3, 4, 5});
  CHECK(values(row.reshaped(tensor_shape{1, 3})) == std::vector<float>{3, 4, 5});
  CHECK(row == tensor::from_vector<float>({3, 4, 5}, tensor_shape{3}));
  CHECK(row.byte_size() == 3 * sizeof(float));
}

TEST_CASE("slices of a string tensor", "[tensor]") {
  auto words = tensor::vec<std::string>({"a", "bb", "ccc", "dddd"});
  auto tail = words.slice(2, 4);
  CHECK(tail.flat<std::string>()[0] == "ccc");
  CHECK(tail.flat<std::string>()[1] == "dddd");
  CHECK(tail.byte_size() == 7);
  CHECK(words.sub_slice(1).flat<std::string>()[0] == "bb");
  CHECK(tail.deep_copy().flat<std::string>()[1] == "dddd");
}

TEST_CASE("slicing outside dimension 0 or a scalar is InvalidArgument",
          "[tensor]") {
  auto batch = counting(2);
  CHECK(code_of([&] { batch.slice(-1, 1); }) == error_code::invalid_argument);
  CHECK(code_of([&] { batch.slice(1, 3); }) == error_code::invalid_argument);
  CHECK(code_of([&] { batch.slice(2, 1); }) == error_code::invalid_argument);
  CHECK(code_of([&] { batch.sub_slice(2); }) == error_code::invalid_argument);
  CHECK(code_of([&] { tensor::scalar(1.0f).sub_slice(0); })
        == error_code::invalid_argument);
  CHECK(code_of([&] { tensor{}.slice(0, 0); })
        == error_code::invalid_argument);
}

TEST_CASE("join_rows gives back adjacent rows of one buffer as a view, and "
          "nothing for anything else",
          "[tensor]") {
  auto batch = counting(4);
  std::vector<tensor> rows{batch.sub_slice(1), batch.sub_slice(2),
                           batch.sub_slice(3)};
  auto joined = tensor::join_rows(rows);
  REQUIRE(joined.valid());
  CHECK(joined.shape() == tensor_shape{3, 3});
  CHECK(joined.raw() == rows[0].raw());
  CHECK(joined == batch.slice(1, 4));
  // Out of order, a gap, another buffer, another shape: the caller copies.
  CHECK_FALSE(tensor::join_rows({batch.sub_slice(2), batch.sub_slice(1)})
                .valid());
  CHECK_FALSE(tensor::join_rows({batch.sub_slice(0), batch.sub_slice(2)})
                .valid());
  auto other = counting(4);
  CHECK_FALSE(tensor::join_rows({batch.sub_slice(0), other.sub_slice(1)})
                .valid());
  CHECK_FALSE(tensor::join_rows({batch.slice(0, 1), batch.sub_slice(1)})
                .valid());
  CHECK_FALSE(tensor::join_rows({}).valid());
  // A single row is a batch of one.
  CHECK(tensor::join_rows({batch.sub_slice(0)}).shape()
        == tensor_shape{1, 3});
}
