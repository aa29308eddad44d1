// Sum, Mean, Max, Min, Prod, Any and All over axes given as a tensor.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

node_def reduce_node(const std::string& op, bool keep_dims = false) {
  return make_node(op, {{"keep_dims", keep_dims}});
}

tensor axes(std::vector<int32_t> xs) {
  return tensor::vec<int32_t>(std::move(xs));
}

} // namespace

TEMPLATE_TEST_CASE("Sum over every axis of a matrix", "[reduce]", float,
                   double, int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto all = run(reduce_node("Sum"), {x, axes({0, 1})});
  CHECK(all.out() == tensor::scalar<T>(21));
  auto rows = run(reduce_node("Sum"), {x, axes({0})});
  CHECK(rows.out() == tensor::vec<T>({5, 7, 9}));
  auto cols = run(reduce_node("Sum"), {x, axes({1})});
  CHECK(cols.out() == tensor::vec<T>({6, 15}));
}

TEMPLATE_TEST_CASE("Mean and Max per axis", "[reduce]", float, double,
                   int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 8, 3, 4, -5, 6}, {2, 3});
  CHECK(run(reduce_node("Max"), {x, axes({0})}).out()
        == tensor::vec<T>({4, 8, 6}));
  CHECK(run(reduce_node("Max"), {x, axes({1})}).out()
        == tensor::vec<T>({8, 6}));
  CHECK(run(reduce_node("Max"), {x, axes({0, 1})}).out()
        == tensor::scalar<T>(8));
  auto m = make<T>({2, 4, 6, 8}, {2, 2});
  CHECK(run(reduce_node("Mean"), {m, axes({0})}).out()
        == tensor::vec<T>({4, 6}));
  CHECK(run(reduce_node("Mean"), {m, axes({0, 1})}).out()
        == tensor::scalar<T>(5));
}

TEST_CASE("integer Mean truncates, float Mean does not", "[reduce]") {
  auto xi = tensor::vec<int32_t>({1, 2});
  CHECK(run(reduce_node("Mean"), {xi, axes({0})}).out()
        == tensor::scalar<int32_t>(1));
  auto xf = tensor::vec<float>({1, 2});
  CHECK(run(reduce_node("Mean"), {xf, axes({0})}).out()
        == tensor::scalar(1.5f));
}

TEST_CASE("Max finds the largest of all-negative values", "[reduce]") {
  auto x = tensor::vec<double>({-7, -3, -9});
  CHECK(run(reduce_node("Max"), {x, axes({0})}).out()
        == tensor::scalar(-3.0));
}

TEST_CASE("keep_dims keeps reduced axes with size 1", "[reduce]") {
  auto x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = run(reduce_node("Sum", true), {x, axes({1})});
  CHECK(r.out() == make<float>({6, 15}, {2, 1}));
  auto all = run(reduce_node("Mean", true), {x, axes({0, 1})});
  CHECK(all.out() == make<float>({3.5f}, {1, 1}));
}

TEST_CASE("negative axes count from the end", "[reduce]") {
  auto x = make<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(run(reduce_node("Sum"), {x, axes({-1})}).out()
        == tensor::vec<int32_t>({6, 15}));
  CHECK(run(reduce_node("Sum"), {x, axes({-2})}).out()
        == tensor::vec<int32_t>({5, 7, 9}));
  CHECK(run(reduce_node("Sum"), {x, axes({-1, 0})}).out()
        == tensor::scalar<int32_t>(21));
}

TEST_CASE("reducing the outer and inner axes of a 3-D tensor", "[reduce]") {
  // x[i][j][k] = 100 i + 10 j + k with shape [2,3,4].
  std::vector<int64_t> xs;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        xs.push_back(100 * i + 10 * j + k);
  auto x = make<int64_t>(xs, {2, 3, 4});
  // Sum over i and k: 4*(0+100) + 2*(0+1+2+3) + 8*10 j = 412 + 80 j.
  auto r = run(reduce_node("Sum", true), {x, axes({0, 2})});
  CHECK(r.out() == make<int64_t>({412, 492, 572}, {1, 3, 1}));
  // Max over j only.
  auto m = run(reduce_node("Max"), {x, axes({1})});
  CHECK(m.out()
        == make<int64_t>({20, 21, 22, 23, 120, 121, 122, 123}, {2, 4}));
  // Mean over the middle and last axes.
  auto mean = run(reduce_node("Mean"), {x, axes({1, 2})});
  CHECK(mean.out() == tensor::vec<int64_t>({11, 111}));
}

TEST_CASE("reduction_indices may be a scalar, int32 or int64", "[reduce]") {
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  CHECK(run(reduce_node("Sum"), {x, tensor::scalar<int32_t>(0)}).out()
        == tensor::vec<float>({4, 6}));
  CHECK(run(reduce_node("Sum"), {x, tensor::scalar<int64_t>(1)}).out()
        == tensor::vec<float>({3, 7}));
  CHECK(run(reduce_node("Sum"), {x, tensor::vec<int64_t>({1, 0})}).out()
        == tensor::scalar(10.0f));
}

TEST_CASE("empty reduction_indices reduce nothing", "[reduce]") {
  auto x = make<double>({1, 2, 3, 4}, {2, 2});
  auto none = tensor{dtype::int32, tensor_shape{0}};
  CHECK(run(reduce_node("Sum"), {x, none}).out() == x);
  CHECK(run(reduce_node("Max", true), {x, none}).out() == x);
  auto s = tensor::scalar(2.5f);
  CHECK(run(reduce_node("Mean"), {s, none}).out() == s);
}

TEST_CASE("reducing axes of size 1 and the default keep_dims", "[reduce]") {
  auto x = make<float>({1, 2, 3}, {1, 3, 1});
  auto r = run(make_node("Sum"), {x, axes({0, 2})});
  CHECK(r.out() == tensor::vec<float>({1, 2, 3}));
}

TEST_CASE("reductions over empty tensors give the identity", "[reduce]") {
  auto x = tensor{dtype::float32, tensor_shape{0, 2}};
  CHECK(run(reduce_node("Sum"), {x, axes({0})}).out()
        == tensor::vec<float>({0, 0}));
  auto mx = values<float>(run(reduce_node("Max"), {x, axes({0})}).out());
  REQUIRE(mx.size() == 2);
  CHECK(std::isinf(mx[0]));
  CHECK(mx[0] < 0);
  auto mean = values<float>(run(reduce_node("Mean"), {x, axes({0})}).out());
  REQUIRE(mean.size() == 2);
  CHECK(std::isnan(mean[0]));
  auto xi = tensor{dtype::int32, tensor_shape{0}};
  CHECK(run(reduce_node("Max"), {xi, axes({0})}).out()
        == tensor::scalar(std::numeric_limits<int32_t>::lowest()));
  CHECK(run(reduce_node("Mean"), {xi, axes({0})}).out()
        == tensor::scalar<int32_t>(0));
  // The reduced result of [2,0] over axis 1 is two identities.
  auto y = tensor{dtype::int64, tensor_shape{2, 0}};
  CHECK(run(reduce_node("Sum"), {y, axes({1})}).out()
        == tensor::vec<int64_t>({0, 0}));
}

TEMPLATE_TEST_CASE("Min per axis, and an empty Min is the type's largest",
                   "[reduce]", float, double, int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 8, 3, 4, -5, 6}, {2, 3});
  CHECK(run(reduce_node("Min"), {x, axes({0})}).out()
        == tensor::vec<T>({1, -5, 3}));
  CHECK(run(reduce_node("Min"), {x, axes({-1})}).out()
        == tensor::vec<T>({1, -5}));
  CHECK(run(reduce_node("Min", true), {x, axes({0, 1})}).out()
        == make<T>({-5}, {1, 1}));
  auto empty = tensor{x.type(), tensor_shape{0, 2}};
  auto top = std::numeric_limits<T>::has_infinity
               ? std::numeric_limits<T>::infinity()
               : std::numeric_limits<T>::max();
  CHECK(run(reduce_node("Min"), {empty, axes({0})}).out()
        == tensor::vec<T>({top, top}));
}

TEST_CASE("Any and All over bools: per axis, empty ones false and true, "
          "other dtypes refused",
          "[reduce]") {
  auto b = tensor::vec<bool>({true, false, false, false, true, true});
  auto m = tensor{dtype::bool_, tensor_shape{2, 3}};
  std::copy(b.flat<bool>().begin(), b.flat<bool>().end(),
            m.flat<bool>().begin());
  auto any = make_node("Any", {{"keep_dims", false}});
  auto all = make_node("All", {{"keep_dims", false}});
  CHECK(run(any, {m, axes({0})}).out()
        == tensor::vec<bool>({true, true, true}));
  CHECK(run(all, {m, axes({0})}).out()
        == tensor::vec<bool>({false, false, false}));
  CHECK(run(any, {m, axes({1})}).out() == tensor::vec<bool>({true, true}));
  CHECK(run(all, {m, axes({1})}).out() == tensor::vec<bool>({false, false}));
  CHECK(run(all, {m, axes({0, 1})}).out() == tensor::scalar(false));
  auto empty = tensor{dtype::bool_, tensor_shape{0, 2}};
  CHECK(run(any, {empty, axes({0})}).out()
        == tensor::vec<bool>({false, false}));
  CHECK(run(all, {empty, axes({0})}).out()
        == tensor::vec<bool>({true, true}));
  auto refused = run(any, {tensor::vec<float>({1.0f}), axes({0})});
  CHECK(refused.st.code() == error_code::invalid_argument);
}

TEST_CASE("large float sums stay accurate", "[reduce]") {
  std::vector<float> xs(100000, 0.1f);
  auto r = run(reduce_node("Sum"), {tensor::vec<float>(xs), axes({0})});
  CHECK(values<float>(r.out())[0] == Approx(10000.0).epsilon(1e-3));
}

TEST_CASE("out-of-range reduction axes are InvalidArgument",
          "[reduce][errors]") {
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  auto r = run(reduce_node("Sum"), {x, axes({2})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(),
             StartsWith("Invalid reduction dimension (2 for input with 2 "
                        "dimension(s)"));
  CHECK(run(reduce_node("Max"), {x, axes({-3})}).st.code()
        == error_code::invalid_argument);
  CHECK(run(reduce_node("Mean"), {tensor::scalar(1.0f), axes({0})}).st.code()
        == error_code::invalid_argument);
}

TEST_CASE("duplicate reduction axes are InvalidArgument", "[reduce][errors]") {
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  auto r = run(reduce_node("Sum"), {x, axes({1, -1})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("duplicate dimension: 1"));
}

TEST_CASE("reductions reject bad index and data types", "[reduce][errors]") {
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  auto f = run(reduce_node("Sum"), {x, tensor::vec<float>({0})});
  CHECK(f.st.code() == error_code::invalid_argument);
  auto s = run(reduce_node("Max"),
               {tensor::vec<std::string>({"a"}), axes({0})});
  CHECK(s.st.code() == error_code::invalid_argument);
  CHECK_THAT(s.st.message(), Contains("string"));
  auto b = run(reduce_node("Sum"), {tensor::vec<bool>({true}), axes({0})});
  CHECK(b.st.code() == error_code::invalid_argument);
  CHECK(run(reduce_node("Sum"), {x}).st.code()
        == error_code::invalid_argument);
  auto bad_keep = make_node("Sum", {{"keep_dims", std::string{"yes"}}});
  CHECK(run(bad_keep, {x, axes({0})}).st.code()
        == error_code::invalid_argument);
}
