// Element-wise math (with broadcasting) and MatMul.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// -- binary ops, same shapes --------------------------------------------------

TEMPLATE_TEST_CASE("Add, Sub and Mul compute element-wise values", "[math]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  auto x = make<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto y = make<T>({6, 5, 4, 3, 2, 1}, {2, 3});
  auto add = run("Add", {x, y});
  CHECK(add.out() == make<T>({7, 7, 7, 7, 7, 7}, {2, 3}));
  auto sub = run("Sub", {x, y});
  CHECK(sub.out() == make<T>({-5, -3, -1, 1, 3, 5}, {2, 3}));
  auto mul = run("Mul", {x, y});
  CHECK(mul.out() == make<T>({6, 10, 12, 12, 10, 6}, {2, 3}));
}

TEMPLATE_TEST_CASE("binary ops accept a matching T attribute", "[math]",
                   float, int64_t) {
  using T = TestType;
  auto node = make_node("Add", {{"T", dtype_of<T>::value}});
  auto r = run(node, {tensor::scalar<T>(2), tensor::scalar<T>(3)});
  CHECK(r.out() == tensor::scalar<T>(5));
}

TEST_CASE("binary ops reject a T attribute that disagrees with the inputs",
          "[math][errors]") {
  auto node = make_node("Mul", {{"T", dtype::int32}});
  auto r = run(node, {tensor::scalar(1.0f), tensor::scalar(2.0f)});
  CHECK(r.st.code() == error_code::invalid_argument);
}

TEST_CASE("RealDiv divides floating-point tensors", "[math]") {
  auto f = run("RealDiv", {tensor::vec<float>({1, 3, -4}),
                           tensor::vec<float>({2, 4, 8})});
  CHECK(f.out() == tensor::vec<float>({0.5f, 0.75f, -0.5f}));
  auto d = run("RealDiv", {tensor::vec<double>({1, 1}),
                           tensor::vec<double>({3, 0})});
  auto ds = values<double>(d.out());
  CHECK(ds[0] == Approx(1.0 / 3.0));
  CHECK(std::isinf(ds[1]));
}

TEST_CASE("RealDiv rejects integer tensors naming the dtype",
          "[math][errors]") {
  auto r = run("RealDiv", {tensor::vec<int32_t>({4}),
                           tensor::vec<int32_t>({2})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("int32"));
}

TEMPLATE_TEST_CASE("Div truncates integer quotients toward zero", "[math]",
                   int32_t, int64_t) {
  using T = TestType;
  auto r = run("Div", {tensor::vec<T>({7, -7, 7, -7, 0}),
                       tensor::vec<T>({2, 2, -2, -2, 5})});
  CHECK(r.out() == tensor::vec<T>({3, -3, -3, 3, 0}));
}

TEST_CASE("Div divides floats exactly", "[math]") {
  auto r = run("Div", {tensor::vec<double>({7, -1}),
                       tensor::vec<double>({2, 4})});
  CHECK(r.out() == tensor::vec<double>({3.5, -0.25}));
}

TEST_CASE("integer Div by zero is InvalidArgument", "[math][errors]") {
  auto r = run("Div", {tensor::vec<int32_t>({1, 2}),
                       tensor::vec<int32_t>({1, 0})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), StartsWith("Integer division by zero"));
}

TEST_CASE("integer Div of the minimum by -1 wraps instead of trapping",
          "[math]") {
  auto lo = std::numeric_limits<int32_t>::min();
  auto r = run("Div", {tensor::scalar<int32_t>(lo),
                       tensor::scalar<int32_t>(-1)});
  CHECK(r.out() == tensor::scalar<int32_t>(lo));
}

TEST_CASE("integer Add and Mul wrap on overflow", "[math]") {
  auto hi = std::numeric_limits<int32_t>::max();
  auto lo = std::numeric_limits<int32_t>::min();
  auto add = run("Add", {tensor::scalar<int32_t>(hi),
                         tensor::scalar<int32_t>(1)});
  CHECK(add.out() == tensor::scalar<int32_t>(lo));
  auto mul = run("Mul", {tensor::scalar<int64_t>(int64_t{1} << 62),
                         tensor::scalar<int64_t>(4)});
  CHECK(mul.out() == tensor::scalar<int64_t>(0));
}

// -- broadcasting -------------------------------------------------------------

TEST_CASE("a scalar broadcasts against any shape on either side", "[math]") {
  auto m = make<float>({1, 2, 3, 4}, {2, 2});
  auto left = run("Sub", {tensor::scalar(10.0f), m});
  CHECK(left.out() == make<float>({9, 8, 7, 6}, {2, 2}));
  auto right = run("Sub", {m, tensor::scalar(10.0f)});
  CHECK(right.out() == make<float>({-9, -8, -7, -6}, {2, 2}));
  auto both = run("Mul", {tensor::scalar<int32_t>(6),
                          tensor::scalar<int32_t>(7)});
  CHECK(both.out() == tensor::scalar<int32_t>(42));
}

TEST_CASE("a row vector broadcasts over the rows of a matrix", "[math]") {
  auto m = make<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto v = tensor::vec<int32_t>({10, 20, 30});
  auto r = run("Add", {m, v});
  CHECK(r.out() == make<int32_t>({11, 22, 33, 14, 25, 36}, {2, 3}));
  auto flipped = run("Sub", {v, m});
  CHECK(flipped.out() == make<int32_t>({9, 18, 27, 6, 15, 24}, {2, 3}));
}

TEST_CASE("a column broadcasts over the columns of a matrix", "[math]") {
  auto m = make<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto c = make<double>({10, 100}, {2, 1});
  auto r = run("Mul", {m, c});
  CHECK(r.out() == make<double>({10, 20, 30, 400, 500, 600}, {2, 3}));
}

TEST_CASE("n x 1 and 1 x m broadcast to an outer product", "[math]") {
  auto col = make<int64_t>({1, 2, 3}, {3, 1});
  auto row = make<int64_t>({10, 20}, {1, 2});
  auto r = run("Mul", {col, row});
  CHECK(r.out() == make<int64_t>({10, 20, 20, 40, 30, 60}, {3, 2}));
}

TEST_CASE("broadcasting pads the lower rank with leading ones", "[math]") {
  // [2,1,3] + [4,1] -> [2,4,3]
  std::vector<float> xs(6);
  for (int i = 0; i < 6; ++i)
    xs[i] = static_cast<float>(i);
  auto x = make<float>(xs, {2, 1, 3});
  auto y = make<float>({0, 100, 200, 300}, {4, 1});
  auto r = run("Add", {x, y});
  auto& out = r.out();
  REQUIRE(out.shape() == tensor_shape{2, 4, 3});
  auto vs = values<float>(out);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        CHECK(vs[(i * 4 + j) * 3 + k] == xs[i * 3 + k] + 100.0f * j);
}

TEST_CASE("broadcasting a middle axis", "[math]") {
  // [2,3,2] * [2,1,2]
  auto x = make<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  auto y = make<int32_t>({1, -1, 2, -2}, {2, 1, 2});
  auto r = run("Mul", {x, y});
  CHECK(r.out()
        == make<int32_t>({1, -2, 3, -4, 5, -6, 14, -16, 18, -20, 22, -24},
                         {2, 3, 2}));
}

TEST_CASE("broadcasting with an empty dimension gives an empty result",
          "[math]") {
  auto x = tensor{dtype::float32, tensor_shape{0, 3}};
  auto r = run("Add", {x, tensor::vec<float>({1, 2, 3})});
  CHECK(r.out().shape() == tensor_shape{0, 3});
  auto s = run("Div", {x, tensor::scalar(0.0f)});
  CHECK(s.out().shape() == tensor_shape{0, 3});
}

TEST_CASE("incompatible shapes are InvalidArgument in TensorFlow's words",
          "[math][errors]") {
  auto r = run("Add", {tensor{dtype::float32, tensor_shape{2, 3}},
                       tensor{dtype::float32, tensor_shape{4}}});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), StartsWith("Incompatible shapes: [2,3] vs. [4]"));
  CHECK_THAT(r.st.message(), Contains("[[node n]]"));
  auto s = run("Mul", {tensor{dtype::int32, tensor_shape{2, 3}},
                       tensor{dtype::int32, tensor_shape{3, 2}}});
  CHECK(s.st.code() == error_code::invalid_argument);
}

TEST_CASE("binary ops reject operands of different dtypes",
          "[math][errors]") {
  auto r = run("Add", {tensor::scalar(1.0f), tensor::scalar<int32_t>(1)});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("float32"));
  CHECK_THAT(r.st.message(), Contains("int32"));
}

TEST_CASE("binary ops reject unsupported dtypes naming them",
          "[math][errors]") {
  auto r = run("Add", {tensor::scalar("a"), tensor::scalar("b")});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("string"));
  auto b = run("Mul", {tensor::scalar(true), tensor::scalar(false)});
  CHECK(b.st.code() == error_code::invalid_argument);
  CHECK_THAT(b.st.message(), Contains("bool"));
}

TEST_CASE("binary ops reject a wrong number of inputs", "[math][errors]") {
  CHECK(run("Add", {tensor::scalar(1.0f)}).st.code()
        == error_code::invalid_argument);
  CHECK(run("Sub", {}).st.code() == error_code::invalid_argument);
  CHECK(run("Neg", {tensor::scalar(1.0f), tensor::scalar(1.0f)}).st.code()
        == error_code::invalid_argument);
}

TEST_CASE("invalid (empty) input tensors are rejected, not dereferenced",
          "[math][errors]") {
  CHECK(run("Add", {tensor{}, tensor{}}).st.code()
        == error_code::invalid_argument);
  CHECK(run("Exp", {tensor{}}).st.code() == error_code::invalid_argument);
  CHECK(run("MatMul", {tensor{}, tensor{}}).st.code()
        == error_code::invalid_argument);
}

// -- unary ops ----------------------------------------------------------------

TEMPLATE_TEST_CASE("Neg and Square", "[math]", float, double, int32_t,
                   int64_t) {
  using T = TestType;
  auto x = make<T>({-2, 0, 3, 5}, {2, 2});
  CHECK(run("Neg", {x}).out() == make<T>({2, 0, -3, -5}, {2, 2}));
  CHECK(run("Square", {x}).out() == make<T>({4, 0, 9, 25}, {2, 2}));
}

TEMPLATE_TEST_CASE("Relu clamps negatives to zero", "[math]", float, double,
                   int32_t, int64_t) {
  using T = TestType;
  auto r = run("Relu", {tensor::vec<T>({-3, 0, 2, -1, 7})});
  CHECK(r.out() == tensor::vec<T>({0, 0, 2, 0, 7}));
}

TEMPLATE_TEST_CASE("Exp, Log, Sigmoid and Tanh", "[math]", float, double) {
  using T = TestType;
  std::vector<T> xs{-2, -0.5, 0, 1, 3};
  auto x = tensor::vec<T>(xs);
  auto ex = values<T>(run("Exp", {x}).out());
  auto sg = values<T>(run("Sigmoid", {x}).out());
  auto th = values<T>(run("Tanh", {x}).out());
  for (size_t i = 0; i < xs.size(); ++i) {
    CHECK(ex[i] == Approx(std::exp(static_cast<double>(xs[i]))));
    CHECK(sg[i] == Approx(1.0 / (1.0 + std::exp(-xs[i]))));
    CHECK(th[i] == Approx(std::tanh(static_cast<double>(xs[i]))));
  }
  auto lg = values<T>(run("Log", {tensor::vec<T>({1, 2, 10})}).out());
  CHECK(lg[0] == Approx(0.0).margin(1e-7));
  CHECK(lg[1] == Approx(std::log(2.0)));
  CHECK(lg[2] == Approx(std::log(10.0)));
}

TEST_CASE("Sigmoid saturates without NaN for large magnitudes", "[math]") {
  auto r = run("Sigmoid", {tensor::vec<float>({-1000, 1000})});
  CHECK(r.out() == tensor::vec<float>({0, 1}));
}

TEST_CASE("Log of zero and negatives follows IEEE", "[math]") {
  auto r = values<double>(run("Log", {tensor::vec<double>({0, -1})}).out());
  CHECK(std::isinf(r[0]));
  CHECK(r[0] < 0);
  CHECK(std::isnan(r[1]));
}

TEST_CASE("float-only unary ops reject integers naming the dtype",
          "[math][errors]") {
  for (auto op : {"Exp", "Log", "Sigmoid", "Tanh"}) {
    auto r = run(op, {tensor::vec<int64_t>({1})});
    CHECK(r.st.code() == error_code::invalid_argument);
    CHECK_THAT(r.st.message(), Contains("int64"));
  }
}

TEST_CASE("Floor rounds toward negative infinity and keeps NaN and inf",
          "[math]") {
  auto inf = std::numeric_limits<float>::infinity();
  auto r = values<float>(
    run("Floor", {tensor::vec<float>({1.5f, -1.5f, 2, -0.25f, inf,
                                      std::nanf("")})})
      .out());
  CHECK(r[0] == 1);
  CHECK(r[1] == -2);
  CHECK(r[2] == 2);
  CHECK(r[3] == -1);
  CHECK(r[4] == inf);
  CHECK(std::isnan(r[5]));
  CHECK(run("Floor", {tensor::vec<double>({0.999999})}).out()
        == tensor::vec<double>({0}));
  auto ints = run("Floor", {tensor::vec<int32_t>({1})});
  CHECK(ints.st.code() == error_code::invalid_argument);
  CHECK_THAT(ints.st.message(), Contains("int32"));
}

TEST_CASE("Pow raises element-wise and broadcasts", "[math]") {
  auto r = run("Pow", {make<float>({2, 3, 4, 9}, {2, 2}),
                       tensor::vec<float>({2, 0.5f})});
  REQUIRE(r.out().shape() == (tensor_shape{2, 2}));
  auto rs = values<float>(r.out());
  CHECK(rs[0] == Approx(4));
  CHECK(rs[1] == Approx(std::sqrt(3.0)));
  CHECK(rs[2] == Approx(16));
  CHECK(rs[3] == Approx(3));
  auto scalar_base = values<double>(
    run("Pow", {tensor::scalar<double>(0.5), tensor::vec<double>({0, 1, 3})})
      .out());
  CHECK(scalar_base == std::vector<double>{1, 0.5, 0.125}); // exact in binary
  // IEEE pow: a negative base to a fractional power is NaN.
  auto nan = values<float>(
    run("Pow", {tensor::scalar(-8.0f), tensor::scalar(1.0f / 3)}).out());
  CHECK(std::isnan(nan[0]));
  auto ints = run("Pow", {tensor::vec<int64_t>({2}), tensor::vec<int64_t>({3})});
  CHECK(ints.st.code() == error_code::invalid_argument);
  CHECK_THAT(ints.st.message(), Contains("int64"));
  auto shapes = run("Pow", {tensor::vec<float>({1, 2}),
                            tensor::vec<float>({1, 2, 3})});
  CHECK_THAT(shapes.st.message(), StartsWith("Incompatible shapes: [2] vs. [3]"));
}

// -- MatMul -------------------------------------------------------------------

TEMPLATE_TEST_CASE("MatMul multiplies row-major matrices", "[math][matmul]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  auto a = make<T>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = make<T>({7, 8, 9, 10, 11, 12}, {3, 2});
  auto r = run("MatMul", {a, b});
  CHECK(r.out() == make<T>({58, 64, 139, 154}, {2, 2}));
}

TEST_CASE("MatMul honours transpose_a and transpose_b", "[math][matmul]") {
  auto a = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});     // 2x3
  auto at = make<float>({1, 4, 2, 5, 3, 6}, {3, 2});    // a^T
  auto b = make<float>({7, 8, 9, 10, 11, 12}, {3, 2});  // 3x2
  auto bt = make<float>({7, 9, 11, 8, 10, 12}, {2, 3}); // b^T
  auto expected = make<float>({58, 64, 139, 154}, {2, 2});
  auto ta = make_node("MatMul", {{"transpose_a", true}});
  CHECK(run(ta, {at, b}).out() == expected);
  auto tb = make_node("MatMul", {{"transpose_b", true}});
  CHECK(run(tb, {a, bt}).out() == expected);
  auto both = make_node("MatMul",
                        {{"transpose_a", true}, {"transpose_b", true}});
  CHECK(run(both, {at, bt}).out() == expected);
  auto neither = make_node("MatMul",
                           {{"transpose_a", false}, {"transpose_b", false}});
  CHECK(run(neither, {a, b}).out() == expected);
  // a^T a is 3x3.
  auto gram = run(ta, {a, a});
  CHECK(gram.out()
        == make<float>({17, 22, 27, 22, 29, 36, 27, 36, 45}, {3, 3}));
}

TEST_CASE("MatMul agrees with a naive product on odd sizes",
          "[math][matmul]") {
  const int m = 37, k = 53, n = 29;
  std::vector<double> av(m * k), bv(k * n);
  for (int i = 0; i < m * k; ++i)
    av[i] = std::sin(i * 0.37);
  for (int i = 0; i < k * n; ++i)
    bv[i] = std::cos(i * 0.11);
  auto r = run("MatMul", {make<double>(av, {m, k}), make<double>(bv, {k, n})});
  auto& out = r.out();
  REQUIRE(out.shape() == tensor_shape{m, n});
  auto cs = values<double>(out);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += av[i * k + p] * bv[p * n + j];
      REQUIRE(cs[i * n + j] == Approx(s).margin(1e-12));
    }
}

TEST_CASE("MatMul reads only the columns of a that _a_col_begin and "
          "_a_col_count name",
          "[math][matmul]") {
  // a is 2x5; its columns 1..3 are the 2x3 matrix {1 2 3; 4 5 6}.
  auto a = make<float>({9, 1, 2, 3, 9, 9, 4, 5, 6, 9}, {2, 5});
  auto b = make<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  auto cols = make_node("MatMul", {{"_a_col_begin", int64_t{1}},
                                   {"_a_col_count", int64_t{3}}});
  CHECK(run(cols, {a, b}).out() == make<float>({58, 64, 139, 154}, {2, 2}));
  // With transpose_a those columns become the product's rows: columns
  // 1..2 of a 3x4 matrix, transposed, times a 3x2 one.
  auto at = make<float>({0, 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0}, {3, 4});
  auto ta = make_node("MatMul", {{"transpose_a", true},
                                 {"_a_col_begin", int64_t{1}},
                                 {"_a_col_count", int64_t{2}}});
  CHECK(run(ta, {at, b}).out() == make<float>({58, 64, 139, 154}, {2, 2}));
  // A range outside a, or half a range, is an error naming the node.
  for (auto [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
         {3, 3}, {-1, 2}, {0, -1}, {6, 0}}) {
    auto bad = make_node("MatMul", {{"_a_col_begin", begin},
                                    {"_a_col_count", count}});
    auto r = run(bad, {a, b});
    CHECK(r.st.code() == error_code::invalid_argument);
    CHECK_THAT(r.st.message(), Catch::Contains("not within its shape [2,5]"));
  }
  auto half = make_node("MatMul", {{"_a_col_begin", int64_t{1}}});
  CHECK(run(half, {a, b}).st.code() == error_code::invalid_argument);
}

TEST_CASE("MatMul with an inner dimension of zero gives zeros",
          "[math][matmul]") {
  auto r = run("MatMul", {tensor{dtype::float32, tensor_shape{2, 0}},
                          tensor{dtype::float32, tensor_shape{0, 3}}});
  CHECK(r.out() == make<float>({0, 0, 0, 0, 0, 0}, {2, 3}));
}

TEST_CASE("MatMul reports size-incompatible matrices",
          "[math][matmul][errors]") {
  auto r = run("MatMul", {tensor{dtype::float32, tensor_shape{2, 3}},
                          tensor{dtype::float32, tensor_shape{2, 2}}});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(),
             StartsWith("Matrix size-incompatible: In[0]: [2,3], In[1]: "
                        "[2,2]"));
  auto tb = make_node("MatMul", {{"transpose_b", true}});
  auto t = run(tb, {tensor{dtype::float32, tensor_shape{2, 3}},
                    tensor{dtype::float32, tensor_shape{3, 2}}});
  CHECK(t.st.code() == error_code::invalid_argument);
}

TEST_CASE("MatMul rejects non-matrices, mixed and bad types",
          "[math][matmul][errors]") {
  auto vec = run("MatMul", {tensor::vec<float>({1, 2}),
                            make<float>({1, 2}, {2, 1})});
  CHECK(vec.st.code() == error_code::invalid_argument);
  CHECK_THAT(vec.st.message(), Contains("In[0] is not a matrix"));
  auto mixed = run("MatMul", {make<float>({1}, {1, 1}),
                              make<double>({1}, {1, 1})});
  CHECK(mixed.st.code() == error_code::invalid_argument);
  auto str = run("MatMul", {make<std::string>({"a"}, {1, 1}),
                            make<std::string>({"b"}, {1, 1})});
  CHECK(str.st.code() == error_code::invalid_argument);
  CHECK_THAT(str.st.message(), Contains("string"));
  auto bad_attr = make_node("MatMul", {{"transpose_a", int64_t{1}}});
  auto attr = run(bad_attr, {make<float>({1}, {1, 1}),
                             make<float>({1}, {1, 1})});
  CHECK(attr.st.code() == error_code::invalid_argument);
}
