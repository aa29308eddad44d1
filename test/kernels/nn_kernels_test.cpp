// Training kernels: softmax and cross-entropies, L2Loss, BiasAdd, Gather,
// segment sums, activation gradients, element-wise math and comparisons,
// and the shape helpers of gradient graphs.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

tensor ints(std::vector<int32_t> xs) {
  return tensor::vec<int32_t>(std::move(xs));
}

tensor bools(std::vector<bool> xs, tensor_shape shape) {
  tensor t{dtype::bool_, std::move(shape)};
  auto dst = t.flat<bool>();
  REQUIRE(dst.size() == xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    dst[i] = xs[i];
  return t;
}

tensor bools(std::vector<bool> xs) {
  auto n = static_cast<int64_t>(xs.size());
  return bools(std::move(xs), tensor_shape{n});
}

// Fails the test unless `r` failed with InvalidArgument whose message
// contains `fragment` and names the node.
void check_invalid(const run_result& r, const std::string& fragment) {
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains(fragment));
  CHECK_THAT(r.st.message(), Contains("[[node n]]"));
}

template <class T>
std::vector<double> as_doubles(const tensor& t) {
  std::vector<double> out;
  for (auto v : t.flat<T>())
    out.push_back(static_cast<double>(v));
  return out;
}

} // namespace

// -- Softmax, LogSoftmax ------------------------------------------------------

TEMPLATE_TEST_CASE("Softmax and LogSoftmax normalise the last dimension",
                   "[nn_kernels]", float, double) {
  using T = TestType;
  auto x = make<T>({1, 2, 3, 1, 1, 1}, {2, 3});
  auto sm = run("Softmax", {x});
  REQUIRE(sm.out().shape() == tensor_shape{2, 3});
  CHECK(approx_equal(as_doubles<T>(sm.out()),
                     {0.0900305732, 0.2447284711, 0.6652409558, 1.0 / 3,
                      1.0 / 3, 1.0 / 3}));
  auto lsm = run("LogSoftmax", {x});
  CHECK(approx_equal(as_doubles<T>(lsm.out()),
                     {-2.4076059644, -1.4076059644, -0.4076059644,
                      -std::log(3.0), -std::log(3.0), -std::log(3.0)}));
  // A vector is one row.
  auto v = run("Softmax", {tensor::vec<T>({0, 0})});
  CHECK(v.out() == tensor::vec<T>({0.5, 0.5}));
}

TEMPLATE_TEST_CASE("Softmax and LogSoftmax are stable for large logits",
                   "[nn_kernels]", float, double) {
  using T = TestType;
  auto x = make<T>({1000, 1001}, {1, 2});
  auto sm = as_doubles<T>(run("Softmax", {x}).out());
  REQUIRE(!std::isnan(sm[0]));
  REQUIRE(!std::isnan(sm[1]));
  CHECK(approx_equal(sm, {0.2689414214, 0.7310585786}));
  auto lsm = as_doubles<T>(run("LogSoftmax", {x}).out());
  CHECK(approx_equal(lsm, {-1.3132616875, -0.3132616875}));
  auto neg = as_doubles<T>(
    run("Softmax", {tensor::vec<T>({-1000, -1001})}).out());
  CHECK(approx_equal(neg, {0.7310585786, 0.2689414214}));
}

TEST_CASE("Softmax rejects scalars and integers", "[nn_kernels][errors]") {
  check_invalid(run("Softmax", {tensor::scalar(1.0f)}),
                "logits must have >= 1 dimension, got []");
  check_invalid(run("LogSoftmax", {tensor::vec<int32_t>({1, 2})}), "int32");
}

// -- SoftmaxCrossEntropyWithLogits -------------------------------------------

TEMPLATE_TEST_CASE("SoftmaxCrossEntropyWithLogits yields loss and backprop",
                   "[nn_kernels]", float, double) {
  using T = TestType;
  auto features = make<T>({1, 2, 3, 0, 0, 0}, {2, 3});
  auto labels = make<T>({0, 0, 1, 0.5, 0.5, 0}, {2, 3});
  auto r = run("SoftmaxCrossEntropyWithLogits", {features, labels});
  REQUIRE(r.st.ok());
  REQUIRE(r.outputs.size() == 2);
  CHECK(r.outputs[0].shape() == tensor_shape{2});
  CHECK(r.outputs[1].shape() == tensor_shape{2, 3});
  CHECK(approx_equal(as_doubles<T>(r.outputs[0]),
                     {0.4076059644, std::log(3.0)}));
  CHECK(approx_equal(as_doubles<T>(r.outputs[1]),
                     {0.0900305732, 0.2447284711, -0.3347590442,
                      1.0 / 3 - 0.5, 1.0 / 3 - 0.5, 1.0 / 3}));
}

TEST_CASE("SoftmaxCrossEntropyWithLogits is stable for large logits",
          "[nn_kernels]") {
  auto r = run("SoftmaxCrossEntropyWithLogits",
               {make<float>({1000, 1001}, {1, 2}),
                make<float>({0, 1}, {1, 2})});
  REQUIRE(r.st.ok());
  auto loss = as_doubles<float>(r.outputs[0]);
  auto grad = as_doubles<float>(r.outputs[1]);
  REQUIRE(!std::isnan(loss[0]));
  CHECK(approx_equal(loss, {0.3132616875}));
  CHECK(approx_equal(grad, {0.2689414214, -0.2689414214}));
}

TEST_CASE("SoftmaxCrossEntropyWithLogits checks shapes",
          "[nn_kernels][errors]") {
  check_invalid(run("SoftmaxCrossEntropyWithLogits",
                    {make<float>({1, 2, 3, 4, 5, 6}, {2, 3}),
                     make<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})}),
                "logits and labels must be same size: logits_size=[2,3] "
                "labels_size=[2,4]");
  check_invalid(run("SoftmaxCrossEntropyWithLogits",
                    {tensor::vec<float>({1, 2}), tensor::vec<float>({0, 1})}),
                "logits must be 2-dimensional");
  check_invalid(run("SoftmaxCrossEntropyWithLogits",
                    {make<float>({1, 2}, {1, 2}),
                     make<double>({0, 1}, {1, 2})}),
                "float64");
}

// -- SparseSoftmaxCrossEntropyWithLogits -------------------------------------

TEMPLATE_TEST_CASE("SparseSoftmaxCrossEntropyWithLogits with int32 and int64 "
                   "labels",
                   "[nn_kernels]", int32_t, int64_t) {
  using L = TestType;
  auto features = make<double>({1, 2, 3, 0, 0, 0}, {2, 3});
  auto node = make_node("SparseSoftmaxCrossEntropyWithLogits",
                        {{"T", dtype::float64},
                         {"Tlabels", dtype_of<L>::value}});
  auto r = run(node, {features, tensor::vec<L>({2, 0})});
  REQUIRE(r.st.ok());
  REQUIRE(r.outputs.size() == 2);
  CHECK(approx_equal(values<double>(r.outputs[0]),
                     {0.4076059644, std::log(3.0)}));
  CHECK(approx_equal(values<double>(r.outputs[1]),
                     {0.0900305732, 0.2447284711, -0.3347590442,
                      1.0 / 3 - 1, 1.0 / 3, 1.0 / 3}));
}

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits is stable for large logits",
          "[nn_kernels]") {
  auto r = run("SparseSoftmaxCrossEntropyWithLogits",
               {make<float>({1000, 1001}, {1, 2}), ints({1})});
  REQUIRE(r.st.ok());
  auto loss = as_doubles<float>(r.outputs[0]);
  REQUIRE(!std::isnan(loss[0]));
  CHECK(approx_equal(loss, {0.3132616875}));
  CHECK(approx_equal(as_doubles<float>(r.outputs[1]),
                     {0.2689414214, -0.2689414214}));
}

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits rejects labels out of range",
          "[nn_kernels][errors]") {
  std::vector<float> zs(20, 0.0f);
  auto features = make<float>(zs, {2, 10});
  check_invalid(run("SparseSoftmaxCrossEntropyWithLogits",
                    {features, ints({1, 10})}),
                "Received a label value of 10 which is outside the valid "
                "range of [0, 10).  Label values: 1 10");
  check_invalid(run("SparseSoftmaxCrossEntropyWithLogits",
                    {features, tensor::vec<int64_t>({-1, 3})}),
                "Received a label value of -1 which is outside the valid "
                "range of [0, 10).  Label values: -1 3");
  check_invalid(run("SparseSoftmaxCrossEntropyWithLogits",
                    {features, ints({1, 2, 3})}),
                "logits and labels must have the same first dimension, got "
                "logits shape [2,10] and labels shape [3]");
  check_invalid(run("SparseSoftmaxCrossEntropyWithLogits",
                    {tensor::vec<float>({1, 2}), ints({1})}),
                "logits must be 2-D, but got shape [2]");
  check_invalid(run("SparseSoftmaxCrossEntropyWithLogits",
                    {features, make<int32_t>({1, 2}, {2, 1})}),
                "labels must be 1-D, but got shape [2,1]");
}

// -- L2Loss ------------------------------------------------------------------

TEMPLATE_TEST_CASE("L2Loss is half the sum of squares", "[nn_kernels]",
                   float, double) {
  using T = TestType;
  auto r = run("L2Loss", {make<T>({1, 2, 3, -1}, {2, 2})});
  CHECK(r.out() == tensor::scalar<T>(7.5));
  CHECK(run("L2Loss", {tensor::scalar<T>(2)}).out() == tensor::scalar<T>(2));
  check_invalid(run("L2Loss", {ints({1})}), "int32");
}

// -- BiasAdd, BiasAddGrad ----------------------------------------------------

TEMPLATE_TEST_CASE("BiasAdd adds along the last dimension", "[nn_kernels]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  auto value = make<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto bias = tensor::vec<T>({10, 20, 30});
  CHECK(run("BiasAdd", {value, bias}).out()
        == make<T>({11, 22, 33, 14, 25, 36}, {2, 3}));
  auto node = make_node("BiasAdd", {{"data_format", std::string{"NHWC"}}});
  auto v3 = make<T>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  CHECK(run(node, {v3, tensor::vec<T>({100, 200})}).out()
        == make<T>({101, 202, 103, 204, 105, 206, 107, 208}, {2, 2, 2}));
}

TEST_CASE("BiasAdd errors", "[nn_kernels][errors]") {
  auto value = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_invalid(run(make_node("BiasAdd",
                              {{"data_format", std::string{"NCHW"}}}),
                    {value, tensor::vec<float>({1, 2})}),
                "NHWC");
  check_invalid(run("BiasAdd", {tensor::vec<float>({1, 2}),
                                tensor::vec<float>({1, 2})}),
                "Input tensor must be at least 2D: [2]");
  check_invalid(run("BiasAdd", {value, make<float>({1, 2, 3}, {1, 3})}),
                "Biases must be 1D: [1,3]");
  check_invalid(run("BiasAdd", {value, tensor::vec<float>({1, 2, 3, 4})}),
                "Must provide as many biases as the last dimension of the "
                "input tensor: [4] vs. [2,3]");
}

TEMPLATE_TEST_CASE("BiasAddGrad sums all but the last dimension",
                   "[nn_kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  CHECK(run("BiasAddGrad", {make<T>({1, 2, 3, 4, 5, 6}, {2, 3})}).out()
        == tensor::vec<T>({5, 7, 9}));
  CHECK(run("BiasAddGrad", {make<T>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})})
          .out()
        == tensor::vec<T>({16, 20}));
  CHECK(run("BiasAddGrad", {make<T>({}, {0, 2})}).out()
        == tensor::vec<T>({0, 0}));
}

TEST_CASE("BiasAddGrad errors", "[nn_kernels][errors]") {
  check_invalid(run("BiasAddGrad", {tensor::vec<float>({1, 2})}),
                "Input tensor must be at least 2D: [2]");
  check_invalid(run(make_node("BiasAddGrad",
                              {{"data_format", std::string{"NCHW"}}}),
                    {make<float>({1, 2}, {1, 2})}),
                "NHWC");
}

// -- Gather, GatherV2 --------------------------------------------------------

TEMPLATE_TEST_CASE("GatherV2 picks slices along an axis", "[nn_kernels]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  auto params = make<T>({1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(run("GatherV2", {params, ints({2, 0}), tensor::scalar<int32_t>(0)})
          .out()
        == make<T>({5, 6, 1, 2}, {2, 2}));
  CHECK(run("GatherV2", {params, tensor::vec<int64_t>({1, 1, 0}),
                         tensor::scalar<int64_t>(1)})
          .out()
        == make<T>({2, 2, 1, 4, 4, 3, 6, 6, 5}, {3, 3}));
  CHECK(run("GatherV2", {params, ints({1}), tensor::scalar<int32_t>(-1)})
          .out()
        == make<T>({2, 4, 6}, {3, 1}));
  // Indices of any shape; a scalar index drops the axis.
  auto v = tensor::vec<T>({10, 20, 30, 40, 50});
  CHECK(run("GatherV2", {v, make<int32_t>({0, 4, 1, 1}, {2, 2}),
                         tensor::scalar<int32_t>(0)})
          .out()
        == make<T>({10, 50, 20, 20}, {2, 2}));
  CHECK(run("GatherV2", {params, tensor::scalar<int32_t>(1),
                         tensor::scalar<int32_t>(0)})
          .out()
        == tensor::vec<T>({3, 4}));
  CHECK(run("Gather", {params, ints({1, 1})}).out()
        == make<T>({3, 4, 3, 4}, {2, 2}));
  CHECK(run("Gather", {params, ints({})}).out() == make<T>({}, {0, 2}));
}

TEST_CASE("Gather works for strings", "[nn_kernels]") {
  auto r = run("Gather", {tensor::vec<std::string>({"a", "b", "c"}),
                          ints({2, 0})});
  CHECK(r.out() == tensor::vec<std::string>({"c", "a"}));
}

TEST_CASE("GatherV2 errors", "[nn_kernels][errors]") {
  auto v = tensor::vec<float>({1, 2, 3, 4, 5});
  check_invalid(run("GatherV2", {v, ints({0, 7}), tensor::scalar<int32_t>(0)}),
                "indices[1] = 7 is not in [0, 5)");
  check_invalid(run("Gather", {v, make<int64_t>({0, 1, 2, -1}, {2, 2})}),
                "indices[1,1] = -1 is not in [0, 5)");
  check_invalid(run("GatherV2", {make<float>({1, 2, 3, 4}, {2, 2}), ints({0}),
                                 tensor::scalar<int32_t>(2)}),
                "Expected axis in the range [-2, 2), but got 2");
  check_invalid(run("GatherV2", {v, ints({0}), ints({0})}),
                "axis must be scalar");
  check_invalid(run("Gather", {tensor::scalar(1.0f), ints({0})}),
                "params must be at least 1 dimensional");
}

// -- UnsortedSegmentSum ------------------------------------------------------

TEMPLATE_TEST_CASE("UnsortedSegmentSum adds rows into their segments",
                   "[nn_kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  auto data = make<T>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  // A negative id drops its row.
  auto r = run("UnsortedSegmentSum",
               {data, ints({0, 2, 0, -1}), tensor::scalar<int32_t>(3)});
  CHECK(r.out() == make<T>({6, 8, 0, 0, 3, 4}, {3, 2}));
  // Ids may cover several leading dimensions.
  auto cube = make<T>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto r2 = run("UnsortedSegmentSum",
                {cube, make<int64_t>({1, 1, 0, 1}, {2, 2}),
                 tensor::scalar<int64_t>(2)});
  CHECK(r2.out() == make<T>({5, 6, 1 + 3 + 7, 2 + 4 + 8}, {2, 2}));
  auto r3 = run("UnsortedSegmentSum",
                {tensor::vec<T>({1, 2, 3}), ints({1, 1, 1}),
                 tensor::scalar<int32_t>(2)});
  CHECK(r3.out() == tensor::vec<T>({0, 6}));
}

TEST_CASE("UnsortedSegmentSum errors", "[nn_kernels][errors]") {
  auto data = tensor::vec<float>({1, 2, 3});
  check_invalid(run("UnsortedSegmentSum",
                    {data, ints({0, 5, 1}), tensor::scalar<int32_t>(3)}),
                "segment_ids[1] = 5 is out of range [0, 3)");
  check_invalid(run("UnsortedSegmentSum",
                    {data, ints({0, 1}), tensor::scalar<int32_t>(3)}),
                "data.shape = [3] does not start with segment_ids.shape = "
                "[2]");
  check_invalid(run("UnsortedSegmentSum", {data, ints({0, 1, 2}), ints({3})}),
                "num_segments should be a scalar, not shape [1]");
  check_invalid(run("UnsortedSegmentSum",
                    {data, ints({0, 1, 2}), tensor::scalar<int32_t>(-1)}),
                "Input num_segments == -1 must not be negative.");
}

// -- activation gradients ----------------------------------------------------

TEMPLATE_TEST_CASE("ReluGrad passes gradients where features are positive",
                   "[nn_kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  auto r = run("ReluGrad", {tensor::vec<T>({1, 2, 3, 4}),
                            tensor::vec<T>({-1, 0, 2, 5})});
  CHECK(r.out() == tensor::vec<T>({0, 0, 3, 4}));
}

TEMPLATE_TEST_CASE("SigmoidGrad and TanhGrad", "[nn_kernels]", float,
                   double) {
  using T = TestType;
  auto sg = run("SigmoidGrad", {tensor::vec<T>({0.5, 0.25}),
                                tensor::vec<T>({1, 2})});
  CHECK(sg.out() == tensor::vec<T>({0.25, 0.375}));
  auto tg = run("TanhGrad", {tensor::vec<T>({0.5, -1, 0}),
                             tensor::vec<T>({2, 3, 4})});
  CHECK(tg.out() == tensor::vec<T>({1.5, 0, 4}));
}

TEST_CASE("activation gradients need equal shapes", "[nn_kernels][errors]") {
  check_invalid(run("ReluGrad", {tensor::vec<float>({1, 2}),
                                 tensor::vec<float>({1, 2, 3})}),
                "g and a must be the same size");
  check_invalid(run("SigmoidGrad", {tensor::vec<float>({1, 2}),
                                    tensor::vec<float>({1, 2, 3})}),
                "Inputs to operation n of type SigmoidGrad must have the "
                "same size and shape.  Input 0: [2] != input 1: [3]");
  check_invalid(run("TanhGrad", {tensor::vec<int32_t>({1}),
                                 tensor::vec<int32_t>({1})}),
                "int32");
}

// -- unary math --------------------------------------------------------------

TEMPLATE_TEST_CASE("Reciprocal, Log1p, Sqrt and Rsqrt", "[nn_kernels]", float,
                   double) {
  using T = TestType;
  CHECK(run("Reciprocal", {tensor::vec<T>({2, 4, -0.5})}).out()
        == tensor::vec<T>({0.5, 0.25, -2}));
  auto lp = as_doubles<T>(
    run("Log1p", {tensor::vec<T>({0, T(std::exp(1.0) - 1)})}).out());
  CHECK(approx_equal(lp, {0, 1}));
  CHECK(run("Sqrt", {tensor::vec<T>({4, 9, 0})}).out()
        == tensor::vec<T>({2, 3, 0}));
  CHECK(run("Rsqrt", {tensor::vec<T>({4, 0.25})}).out()
        == tensor::vec<T>({0.5, 2}));
}

TEST_CASE("Log1p is accurate near zero", "[nn_kernels]") {
  auto r = run("Log1p", {tensor::scalar(1e-12)});
  CHECK(r.out().scalar_value<double>() == Approx(1e-12).epsilon(1e-9));
}

TEMPLATE_TEST_CASE("Abs and Sign", "[nn_kernels]", float, double, int32_t,
                   int64_t) {
  using T = TestType;
  CHECK(run("Abs", {tensor::vec<T>({-3, 0, 5})}).out()
        == tensor::vec<T>({3, 0, 5}));
  CHECK(run("Sign", {tensor::vec<T>({-2, 0, 3})}).out()
        == tensor::vec<T>({-1, 0, 1}));
}

TEST_CASE("Abs of the integer minimum wraps", "[nn_kernels]") {
  auto lo = std::numeric_limits<int32_t>::min();
  CHECK(run("Abs", {tensor::scalar<int32_t>(lo)}).out()
        == tensor::scalar<int32_t>(lo));
}

TEST_CASE("float-only unary ops reject integers", "[nn_kernels][errors]") {
  for (auto op : {"Reciprocal", "Log1p", "Sqrt", "Rsqrt"})
    check_invalid(run(op, {ints({4})}), "int32");
}

// -- Maximum, Minimum, comparisons -------------------------------------------

TEMPLATE_TEST_CASE("Maximum and Minimum broadcast like Add", "[nn_kernels]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  CHECK(run("Maximum", {tensor::vec<T>({1, 5, 3}), tensor::vec<T>({4, 2, 3})})
          .out()
        == tensor::vec<T>({4, 5, 3}));
  CHECK(run("Maximum", {make<T>({1, -2, 3, -4}, {2, 2}), tensor::scalar<T>(0)})
          .out()
        == make<T>({1, 0, 3, 0}, {2, 2}));
  CHECK(run("Minimum", {make<T>({1, 5, 3, 2}, {2, 2}), tensor::vec<T>({2, 4})})
          .out()
        == make<T>({1, 4, 2, 2}, {2, 2}));
  CHECK(run("Minimum", {make<T>({1, 5}, {2, 1}), tensor::vec<T>({2, 4, 6})})
          .out()
        == make<T>({1, 1, 1, 2, 4, 5}, {2, 3}));
}

TEST_CASE("Maximum rejects incompatible shapes", "[nn_kernels][errors]") {
  check_invalid(run("Maximum", {tensor::vec<float>({1, 2}),
                                tensor::vec<float>({1, 2, 3})}),
                "Incompatible shapes: [2] vs. [3]");
  check_invalid(run("Less", {make<int32_t>({1, 2, 3, 4}, {2, 2}),
                             ints({1, 2, 3})}),
                "Incompatible shapes: [2,2] vs. [3]");
}

TEMPLATE_TEST_CASE("comparisons yield bools", "[nn_kernels]", float, double,
                   int32_t, int64_t) {
  using T = TestType;
  auto x = tensor::vec<T>({1, 2, 3});
  auto y = tensor::scalar<T>(2);
  CHECK(run("Equal", {x, y}).out() == bools({false, true, false}));
  CHECK(run("NotEqual", {x, y}).out() == bools({true, false, true}));
  CHECK(run("Greater", {x, y}).out() == bools({false, false, true}));
  CHECK(run("GreaterEqual", {x, y}).out() == bools({false, true, true}));
  CHECK(run("Less", {x, y}).out() == bools({true, false, false}));
  CHECK(run("LessEqual", {x, y}).out() == bools({true, true, false}));
  auto col = make<T>({1, 2}, {2, 1});
  CHECK(run("Less", {col, x}).out()
        == bools({false, true, true, false, false, true}, {2, 3}));
}

TEST_CASE("Equal compares bools and strings", "[nn_kernels]") {
  CHECK(run("Equal", {bools({true, false}), bools({true, true})}).out()
        == bools({true, false}));
  CHECK(run("Equal", {tensor::vec<std::string>({"a", "b"}),
                      tensor::scalar<std::string>("b")})
          .out()
        == bools({false, true}));
  check_invalid(run("Greater", {bools({true}), bools({false})}), "bool");
  check_invalid(run("Equal", {ints({1}), tensor::vec<float>({1})}), "float");
}

// -- Select ------------------------------------------------------------------

TEMPLATE_TEST_CASE("Select picks elements, rows or everything",
                   "[nn_kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  auto t = make<T>({1, 2, 3, 4}, {2, 2});
  auto e = make<T>({5, 6, 7, 8}, {2, 2});
  CHECK(run("Select", {bools({true, false, false, true}, {2, 2}), t, e}).out()
        == make<T>({1, 6, 7, 4}, {2, 2}));
  CHECK(run("Select", {bools({true, false}), t, e}).out()
        == make<T>({1, 2, 7, 8}, {2, 2}));
  CHECK(run("Select", {bools({false}, {}), t, e}).out() == e);
  CHECK(run("Select", {bools({false, true}), tensor::vec<T>({1, 2}),
                       tensor::vec<T>({3, 4})})
          .out()
        == tensor::vec<T>({3, 2}));
}

TEST_CASE("Select errors", "[nn_kernels][errors]") {
  auto t = make<float>({1, 2, 3, 4}, {2, 2});
  auto e = make<float>({5, 6, 7, 8}, {2, 2});
  check_invalid(run("Select", {bools({true, false, true}), t, e}),
                "Number of batches of 'then' must match size of 'cond', but "
                "saw: 2 vs. 3");
  check_invalid(run("Select", {bools({true}, {}), t,
                               tensor::vec<float>({1, 2})}),
                "'then' and 'else' must have the same size.  but received: "
                "[2,2] vs. [2]");
  check_invalid(run("Select", {bools({true, false}),
                               tensor::vec<float>({1, 2, 3}),
                               tensor::vec<float>({1, 2, 3})}),
                "Inputs to operation n of type Select must have the same "
                "size and shape.  Input 0: [2] != input 1: [3]");
  check_invalid(run("Select", {tensor::vec<float>({1, 0}), t, e}), "bool");
}

// -- ZerosLike, OnesLike, AddN -----------------------------------------------

TEMPLATE_TEST_CASE("ZerosLike and OnesLike", "[nn_kernels]", float, double,
                   int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({3, 4, 5, 6}, {2, 2});
  CHECK(run("ZerosLike", {x}).out() == make<T>({0, 0, 0, 0}, {2, 2}));
  CHECK(run("OnesLike", {x}).out() == make<T>({1, 1, 1, 1}, {2, 2}));
}

TEST_CASE("ZerosLike and OnesLike of bools", "[nn_kernels]") {
  CHECK(run("ZerosLike", {bools({true, true})}).out()
        == bools({false, false}));
  CHECK(run("OnesLike", {bools({false})}).out() == bools({true}));
}

TEMPLATE_TEST_CASE("AddN sums its inputs", "[nn_kernels]", float, double,
                   int32_t, int64_t) {
  using T = TestType;
  auto r = run(make_node("AddN", {{"N", int64_t{3}}}),
               {tensor::vec<T>({1, 2}), tensor::vec<T>({3, 4}),
                tensor::vec<T>({5, 6})});
  CHECK(r.out() == tensor::vec<T>({9, 12}));
  CHECK(run("AddN", {tensor::scalar<T>(7)}).out() == tensor::scalar<T>(7));
}

TEST_CASE("AddN sums into its first input only when nothing else holds "
          "it", "[nn_kernels]") {
  // Held here: summed into a new tensor, the input unchanged.
  auto held = tensor::vec<float>({1, 2});
  auto r = run(make_node("AddN", {{"N", int64_t{2}}}),
               {held, tensor::vec<float>({10, 20})});
  CHECK(r.out() == tensor::vec<float>({11, 22}));
  CHECK(held == tensor::vec<float>({1, 2}));
  CHECK(r.out().raw() != held.raw());
  // One buffer as every input: not unique either (the sum must not see
  // its own first partial result).
  auto thrice = run(make_node("AddN", {{"N", int64_t{3}}}),
                    std::vector<tensor>(3, tensor::vec<float>({3, 4})));
  CHECK(thrice.out() == tensor::vec<float>({9, 12}));
}

TEST_CASE("AddN errors", "[nn_kernels][errors]") {
  check_invalid(run("AddN", {tensor::vec<float>({1, 2}),
                             tensor::vec<float>({1, 2, 3})}),
                "Inputs to operation n of type AddN must have the same size "
                "and shape.  Input 0: [2] != input 1: [3]");
  check_invalid(run("AddN", {tensor::vec<float>({1}), ints({1})}), "int32");
  check_invalid(run(make_node("AddN", {{"N", int64_t{3}}}),
                    {tensor::vec<float>({1}), tensor::vec<float>({1})}),
                "attribute N");
}

// -- Shape, Size, Rank -------------------------------------------------------

TEST_CASE("Shape, Size and Rank", "[nn_kernels]") {
  tensor x{dtype::float32, tensor_shape{2, 3, 4}};
  CHECK(run("Shape", {x}).out() == ints({2, 3, 4}));
  CHECK(run(make_node("Shape", {{"out_type", dtype::int64}}), {x}).out()
        == tensor::vec<int64_t>({2, 3, 4}));
  CHECK(run("Shape", {tensor::scalar(1.0)}).out() == ints({}));
  CHECK(run("Size", {x}).out() == tensor::scalar<int32_t>(24));
  CHECK(run(make_node("Size", {{"out_type", dtype::int64}}), {x}).out()
        == tensor::scalar<int64_t>(24));
  CHECK(run("Rank", {x}).out() == tensor::scalar<int32_t>(3));
  auto s = tensor::vec<std::string>({"a", "b"});
  CHECK(run("Shape", {s}).out() == ints({2}));
  CHECK(run("Rank", {tensor::scalar<std::string>("a")}).out()
        == tensor::scalar<int32_t>(0));
  check_invalid(run(make_node("Shape", {{"out_type", dtype::float32}}), {x}),
                "out_type");
}

// -- Tile --------------------------------------------------------------------

TEMPLATE_TEST_CASE("Tile repeats along every dimension", "[nn_kernels]",
                   float, int64_t, std::string) {
  using T = TestType;
  auto elem = [](int v) {
    if constexpr (std::is_same_v<T, std::string>)
      return std::to_string(v);
    else
      return T(v);
  };
  auto x = make<T>({elem(1), elem(2), elem(3), elem(4)}, {2, 2});
  auto r = run("Tile", {x, ints({2, 3})});
  REQUIRE(r.out().shape() == tensor_shape{4, 6});
  std::vector<T> want;
  for (int v : {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4,
                3, 4, 3, 4})
    want.push_back(elem(v));
  CHECK(values<T>(r.out()) == want);
}

TEST_CASE("Tile edge cases and errors", "[nn_kernels][errors]") {
  auto x = make<int32_t>({1, 2, 3, 4}, {2, 2});
  CHECK(run("Tile", {tensor::vec<float>({1, 2}), ints({3})}).out()
        == tensor::vec<float>({1, 2, 1, 2, 1, 2}));
  CHECK(run("Tile", {x, tensor::vec<int64_t>({1, 0})}).out()
        == make<int32_t>({}, {2, 0}));
  CHECK(run("Tile", {tensor::scalar(5.0f), ints({})}).out()
        == tensor::scalar(5.0f));
  check_invalid(run("Tile", {x, ints({2})}),
                "Expected multiples argument to be a vector of length 2 but "
                "got length 1");
  check_invalid(run("Tile", {x, ints({1, -1})}),
                "Expected multiples[1] >= 0, but got -1");
}

// -- Transpose ---------------------------------------------------------------

TEST_CASE("Transpose permutes dimensions", "[nn_kernels]") {
  auto m = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(run("Transpose", {m, ints({1, 0})}).out()
        == make<float>({1, 4, 2, 5, 3, 6}, {3, 2}));
  CHECK(run("Transpose", {m, ints({0, 1})}).out() == m);
  std::vector<int64_t> xs(24);
  for (int64_t i = 0; i < 24; ++i)
    xs[static_cast<size_t>(i)] = i;
  auto x = make<int64_t>(xs, {2, 3, 4});
  auto r = run("Transpose", {x, tensor::vec<int64_t>({2, 0, 1})});
  REQUIRE(r.out().shape() == tensor_shape{4, 2, 3});
  auto got = values<int64_t>(r.out());
  std::vector<int64_t> want;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        want.push_back(i * 12 + j * 4 + k);
  CHECK(got == want);
  CHECK(run("Transpose", {tensor::vec<std::string>({"a", "b"}), ints({0})})
          .out()
        == tensor::vec<std::string>({"a", "b"}));
}

TEST_CASE("Transpose errors", "[nn_kernels][errors]") {
  auto m = make<float>({1, 2, 3, 4}, {2, 2});
  check_invalid(run("Transpose", {m, ints({0, 0})}), "1 is missing from {0,0}.");
  check_invalid(run("Transpose", {m, ints({0, 2})}),
                "2 is out of range [0 .. 2)");
  check_invalid(run("Transpose", {m, ints({0, 1, 2})}),
                "transpose expects a vector of size 2. But input(1) is a "
                "vector of size 3");
}

// -- Slice -------------------------------------------------------------------

TEMPLATE_TEST_CASE("Slice takes a box", "[nn_kernels]", float, int32_t,
                   int64_t) {
  using T = TestType;
  auto x = make<T>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  CHECK(run("Slice", {x, ints({1, 0}), ints({2, 2})}).out()
        == make<T>({4, 5, 7, 8}, {2, 2}));
  CHECK(run("Slice", {x, tensor::vec<int64_t>({1, 1}),
                      tensor::vec<int64_t>({-1, -1})})
          .out()
        == make<T>({5, 6, 8, 9}, {2, 2}));
  CHECK(run("Slice", {x, ints({0, 2}), ints({3, 1})}).out()
        == make<T>({3, 6, 9}, {3, 1}));
  CHECK(run("Slice", {x, ints({3, 0}), ints({0, 2})}).out()
        == make<T>({}, {0, 2}));
}

TEST_CASE("Slice errors", "[nn_kernels][errors]") {
  auto x = make<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  check_invalid(run("Slice", {x, ints({0, 1}), ints({1, 3})}),
                "Expected size[1] in [0, 2], but got 3");
  check_invalid(run("Slice", {x, ints({4, 0}), ints({1, 1})}),
                "Expected begin[0] in [0, 3], but got 4");
  check_invalid(run("Slice", {x, ints({0}), ints({1})}),
                "Expected begin and size arguments to be 1-D tensors of size "
                "2, but got shapes [1] and [1] instead.");
}

// -- ExpandDims, Squeeze -----------------------------------------------------

TEST_CASE("ExpandDims inserts a dimension of 1", "[nn_kernels]") {
  auto x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto shape_after = [&](tensor dim) {
    return run("ExpandDims", {x, std::move(dim)}).out().shape();
  };
  CHECK(shape_after(tensor::scalar<int32_t>(0)) == tensor_shape{1, 2, 3});
  CHECK(shape_after(tensor::scalar<int32_t>(1)) == tensor_shape{2, 1, 3});
  CHECK(shape_after(tensor::scalar<int64_t>(2)) == tensor_shape{2, 3, 1});
  CHECK(shape_after(tensor::scalar<int32_t>(-1)) == tensor_shape{2, 3, 1});
  CHECK(shape_after(tensor::scalar<int32_t>(-3)) == tensor_shape{1, 2, 3});
  CHECK(shape_after(ints({0})) == tensor_shape{1, 2, 3});
  auto r = run("ExpandDims", {x, tensor::scalar<int32_t>(1)});
  CHECK(values<float>(r.out()) == values<float>(x));
  CHECK(run("ExpandDims", {tensor::scalar(7.0), tensor::scalar<int32_t>(0)})
          .out()
        == tensor::vec<double>({7}));
  check_invalid(run("ExpandDims", {x, tensor::scalar<int32_t>(3)}),
                "Tried to expand dim index 3 for tensor with 2 dimensions.");
  check_invalid(run("ExpandDims", {x, tensor::scalar<int32_t>(-4)}),
                "Tried to expand dim index -4 for tensor with 2 dimensions.");
  check_invalid(run("ExpandDims", {x, ints({0, 1})}),
                "'dim' must be a tensor with a single value");
}

TEST_CASE("Squeeze drops dimensions of 1", "[nn_kernels]") {
  tensor x{dtype::int32, tensor_shape{1, 2, 1, 3}};
  CHECK(run("Squeeze", {x}).out().shape() == tensor_shape{2, 3});
  auto with = [&](std::vector<int64_t> dims) {
    return run(make_node("Squeeze", {{"squeeze_dims", std::move(dims)}}),
               {x});
  };
  CHECK(with({2}).out().shape() == tensor_shape{1, 2, 3});
  CHECK(with({-2}).out().shape() == tensor_shape{1, 2, 3});
  CHECK(with({0, 2}).out().shape() == tensor_shape{2, 3});
  check_invalid(with({1}),
                "Can not squeeze dim[1], expected a dimension of 1, got 2");
  check_invalid(with({4}),
                "Tried to squeeze dim index 4 for tensor with 4 dimensions.");
}

// -- ArgMax ------------------------------------------------------------------

TEMPLATE_TEST_CASE("ArgMax finds the first maximum along a dimension",
                   "[nn_kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 5, 3, 7, 2, 7}, {2, 3});
  CHECK(run("ArgMax", {x, tensor::scalar<int32_t>(1)}).out()
        == tensor::vec<int64_t>({1, 0}));
  CHECK(run("ArgMax", {x, tensor::scalar<int64_t>(0)}).out()
        == tensor::vec<int64_t>({1, 0, 1}));
  CHECK(run("ArgMax", {x, tensor::scalar<int32_t>(-1)}).out()
        == tensor::vec<int64_t>({1, 0}));
  auto node = make_node("ArgMax", {{"output_type", dtype::int32}});
  CHECK(run(node, {x, tensor::scalar<int32_t>(1)}).out() == ints({1, 0}));
  CHECK(run("ArgMax", {tensor::vec<T>({4, 9, 9}), tensor::scalar<int32_t>(0)})
          .out()
        == tensor::scalar<int64_t>(1));
}

TEST_CASE("ArgMax errors", "[nn_kernels][errors]") {
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  check_invalid(run("ArgMax", {x, tensor::scalar<int32_t>(2)}),
                "Expected dimension in the range [-2, 2), but got 2");
  check_invalid(run("ArgMax", {make<float>({}, {0, 3}),
                               tensor::scalar<int32_t>(0)}),
                "Reduction axis 0 is empty in shape [0,3]");
  check_invalid(run("ArgMax", {x, ints({0})}),
                "dim must be a scalar, but received tensor of shape: [1]");
}

// -- BroadcastGradientArgs ---------------------------------------------------

namespace {

void check_bcast_args(std::vector<int32_t> s0, std::vector<int32_t> s1,
                      std::vector<int32_t> r0, std::vector<int32_t> r1) {
  auto r = run("BroadcastGradientArgs", {ints(s0), ints(s1)});
  REQUIRE(r.st.ok());
  REQUIRE(r.outputs.size() == 2);
  CHECK(r.outputs[0] == ints(r0));
  CHECK(r.outputs[1] == ints(r1));
}

} // namespace

TEST_CASE("BroadcastGradientArgs gives TensorFlow's reduction indices",
          "[nn_kernels]") {
  // TensorFlow's documented examples.
  check_bcast_args({2, 3, 5}, {1}, {}, {0, 1, 2});
  check_bcast_args({1, 3, 5}, {2, 1, 5}, {0}, {1});
  // Identical shapes reduce nothing, even along dimensions of 1.
  check_bcast_args({2, 3}, {2, 3}, {}, {});
  check_bcast_args({1, 2}, {1, 2}, {}, {});
  check_bcast_args({}, {2, 3}, {0, 1}, {});
  check_bcast_args({2, 1}, {1, 3}, {1}, {0});
  // Dimensions where both are 1 appear in both lists.
  check_bcast_args({1, 1}, {1}, {0, 1}, {0, 1});
  check_bcast_args({5, 1, 4}, {1, 4}, {1}, {0, 1});
  auto r = run("BroadcastGradientArgs", {tensor::vec<int64_t>({4, 1}),
                                         tensor::vec<int64_t>({3})});
  REQUIRE(r.st.ok());
  CHECK(r.outputs[0] == tensor::vec<int64_t>({1}));
  CHECK(r.outputs[1] == tensor::vec<int64_t>({0}));
}

TEST_CASE("BroadcastGradientArgs rejects incompatible shapes",
          "[nn_kernels][errors]") {
  check_invalid(run("BroadcastGradientArgs", {ints({2, 3}), ints({4})}),
                "Incompatible shapes: [2,3] vs. [4]");
  check_invalid(run("BroadcastGradientArgs",
                    {make<int32_t>({1, 2}, {1, 2}), ints({2})}),
                "In[0] must be a vector.");
}

// -- Prod --------------------------------------------------------------------

TEMPLATE_TEST_CASE("Prod multiplies over the given axes", "[nn_kernels]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(run("Prod", {x, ints({0})}).out() == tensor::vec<T>({4, 10, 18}));
  CHECK(run("Prod", {x, ints({1})}).out() == tensor::vec<T>({6, 120}));
  CHECK(run("Prod", {x, ints({-1})}).out() == tensor::vec<T>({6, 120}));
  CHECK(run("Prod", {x, ints({0, 1})}).out() == tensor::scalar<T>(720));
  CHECK(run("Prod", {x, tensor::scalar<int32_t>(1)}).out()
        == tensor::vec<T>({6, 120}));
  CHECK(run("Prod", {x, ints({})}).out() == x);
  auto keep = make_node("Prod", {{"keep_dims", true}});
  CHECK(run(keep, {x, tensor::vec<int64_t>({1})}).out()
        == make<T>({6, 120}, {2, 1}));
  CHECK(run(keep, {x, ints({0, 1})}).out() == make<T>({720}, {1, 1}));
  // An empty product is 1.
  CHECK(run("Prod", {make<T>({}, {2, 0}), ints({1})}).out()
        == tensor::vec<T>({1, 1}));
  std::vector<T> big(24);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = T(i % 3 + 1);
  auto b = make<T>(big, {2, 3, 4});
  // Over axes 0 and 2 of [2,3,4]: element (i,j,k) = (12i+4j+k) % 3 + 1.
  std::vector<T> want;
  for (int j = 0; j < 3; ++j) {
    T p = 1;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k)
        p *= T((12 * i + 4 * j + k) % 3 + 1);
    want.push_back(p);
  }
  CHECK(run("Prod", {b, ints({0, 2})}).out() == tensor::vec<T>(want));
}

TEST_CASE("Prod wraps integers and checks axes", "[nn_kernels][errors]") {
  CHECK(run("Prod", {ints({65536, 65536}), ints({0})}).out()
        == tensor::scalar<int32_t>(0));
  auto x = make<float>({1, 2, 3, 4}, {2, 2});
  check_invalid(run("Prod", {x, ints({2})}),
                "Invalid reduction dimension (2 for input with 2 "
                "dimension(s)");
  check_invalid(run("Prod", {x, ints({1, -1})}),
                "Axes contains duplicate dimension: 1");
}
