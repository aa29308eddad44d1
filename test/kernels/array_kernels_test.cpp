// Const, Identity, NoOp, Print, Split, ConcatV2, Pack, Reshape, Cast, Fill.

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// -- registry -----------------------------------------------------------------

TEST_CASE("every op of the contract has a built-in kernel", "[registry]") {
  auto& reg = builtin_kernels();
  for (auto op :
       {"Const", "Identity", "NoOp", "Print", "Add", "Sub", "Mul", "RealDiv",
        "Div", "Neg", "Square", "Exp", "Log", "MatMul", "Relu", "Sigmoid",
        "Tanh", "Sum", "Mean", "Max", "Split", "ConcatV2", "Pack", "Reshape",
        "Cast", "Fill", "RandomStandardNormal", "TruncatedNormal",
        "RandomUniform"})
    CHECK(reg.contains(op));
  CHECK_FALSE(reg.contains("VariableV2"));
}

TEST_CASE("run_kernel dispatches by op and names the node on errors",
          "[registry]") {
  auto node = make_node("Add");
  node.name = "my_add";
  std::vector<tensor> inputs{tensor::scalar(1.0f), tensor::scalar(2.0f)};
  kernel_context ctx{node, inputs, {}, nullptr, {}};
  REQUIRE(run_kernel(ctx).ok());
  CHECK(ctx.outputs.at(0) == tensor::scalar(3.0f));
  std::vector<tensor> bad{tensor::vec<float>({1, 2}),
                          tensor::vec<float>({1, 2, 3})};
  kernel_context bad_ctx{node, bad, {}, nullptr, {}};
  auto st = run_kernel(bad_ctx);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "Incompatible shapes: [2] vs. [3] [[node my_add]]");
  auto unknown = make_node("NoSuchOp");
  kernel_context unknown_ctx{unknown, {}, {}, nullptr, {}};
  CHECK(run_kernel(unknown_ctx).code() == error_code::unimplemented);
}

// -- Const, Identity, NoOp ----------------------------------------------------

TEST_CASE("Const outputs its value attribute", "[array]") {
  auto value = make<int32_t>({1, 2, 3, 4}, {2, 2});
  auto r = run(make_node("Const", {{"value", value}, {"dtype", dtype::int32}}),
               {});
  CHECK(r.out() == value);
  auto s = run(make_node("Const", {{"value", tensor::scalar("hi")}}), {});
  CHECK(s.out() == tensor::scalar("hi"));
}

TEST_CASE("Const rejects a missing value or a dtype mismatch",
          "[array][errors]") {
  auto missing = run(make_node("Const", {{"dtype", dtype::float32}}), {});
  CHECK(missing.st.code() == error_code::invalid_argument);
  auto mismatch = run(make_node("Const", {{"value", tensor::scalar(1.0f)},
                                          {"dtype", dtype::int64}}),
                      {});
  CHECK(mismatch.st.code() == error_code::invalid_argument);
  CHECK_THAT(mismatch.st.message(), Contains("float32"));
  CHECK_THAT(mismatch.st.message(), Contains("int64"));
  auto wrong_kind = run(make_node("Const", {{"value", int64_t{3}}}), {});
  CHECK(wrong_kind.st.code() == error_code::invalid_argument);
}

TEST_CASE("Identity forwards tensors of every dtype", "[array]") {
  for (auto& t : {tensor::vec<float>({1.5f}), tensor::vec<double>({2}),
                  tensor::vec<int32_t>({3}), tensor::vec<int64_t>({4}),
                  tensor::vec<bool>({true, false}),
                  tensor::vec<std::string>({"a", "b"})})
    CHECK(run("Identity", {t}).out() == t);
  CHECK(run("Identity", {}).st.code() == error_code::invalid_argument);
}

TEST_CASE("PlaceholderWithDefault forwards its default of the declared "
          "dtype", "[array]") {
  auto t = tensor::vec<int64_t>({4, 5});
  auto node = make_node("PlaceholderWithDefault", {{"dtype", dtype::int64}});
  CHECK(run(node, {t}).out() == t);
  auto wrong = make_node("PlaceholderWithDefault", {{"dtype", dtype::float32}});
  auto r = run(wrong, {t});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Contains("int64"));
}

TEST_CASE("NoOp has no outputs", "[array]") {
  auto r = run("NoOp", {});
  CHECK(r.st.ok());
  CHECK(r.outputs.empty());
}

// -- Print --------------------------------------------------------------------

TEST_CASE("Print writes the message and its data, and forwards input 0",
          "[array][print]") {
  auto node = make_node("Print", {{"message", std::string{"portion is"}}});
  auto x = tensor::vec<float>({1, 2});
  auto r = run(node, {x, tensor::scalar<int32_t>(500)});
  CHECK(r.out() == x);
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "portion is[500]");
}

TEST_CASE("Print summarizes the first 3 elements by default",
          "[array][print]") {
  auto node = make_node("Print", {{"message", std::string{"x: "}}});
  auto x = tensor::vec<int64_t>({1, 2, 3, 4, 5});
  auto r = run(node, {x, x, tensor::vec<int64_t>({7, 8})});
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0] == "x: [1 2 3...][7 8]");
}

TEST_CASE("Print honours summarize and flattens matrices", "[array][print]") {
  auto m = make<double>({1.5, -2, 0.25, 1e20}, {2, 2});
  auto two = make_node("Print", {{"message", std::string{"m"}},
                                 {"summarize", int64_t{2}}});
  CHECK(run(two, {m, m}).printed.at(0) == "m[1.5 -2...]");
  auto all = make_node("Print", {{"message", std::string{"m"}},
                                 {"summarize", int64_t{-1}}});
  CHECK(run(all, {m, m}).printed.at(0) == "m[1.5 -2 0.25 1e+20]");
  auto ten = make_node("Print", {{"summarize", int64_t{10}},
                                 {"first_n", int64_t{-1}}});
  CHECK(run(ten, {m, m}).printed.at(0) == "[1.5 -2 0.25 1e+20]");
}

TEST_CASE("Print formats every dtype as TensorFlow 1.x does",
          "[array][print]") {
  auto node = make_node("Print", {{"message", std::string{"v"}}});
  auto x = tensor::scalar(0);
  CHECK(run(node, {x, tensor::vec<float>({0.1f, 3, 1.0f / 3})}).printed.at(0)
        == "v[0.1 3 0.333333343]");
  CHECK(run(node, {x, tensor::vec<bool>({true, false})}).printed.at(0)
        == "v[1 0]");
  CHECK(run(node, {x, tensor::vec<std::string>({"a b", "q\"\n"})})
          .printed.at(0)
        == "v[a b q\\\"\\n]");
  CHECK(run(node, {x, tensor{dtype::float32, tensor_shape{0}}}).printed.at(0)
        == "v[]");
  CHECK(run(node, {x}).printed.at(0) == "v");
}

TEST_CASE("Print writes to std::cerr when no sink is set", "[array][print]") {
  auto node = make_node("Print", {{"message", std::string{"to stderr"}}});
  std::vector<tensor> inputs{tensor::scalar(1), tensor::scalar(2)};
  kernel_context ctx{node, inputs, {}, nullptr, {}};
  std::ostringstream captured;
  auto old = std::cerr.rdbuf(captured.rdbuf());
  auto st = builtin_kernels().find("Print")(ctx);
  std::cerr.rdbuf(old);
  REQUIRE(st.ok());
  CHECK(captured.str() == "to stderr[2]\n");
  CHECK(ctx.outputs.at(0) == tensor::scalar(1));
}

TEST_CASE("Print without inputs is InvalidArgument", "[array][print][errors]") {
  auto r = run(make_node("Print", {{"message", std::string{"m"}}}), {});
  CHECK(r.st.code() == error_code::invalid_argument);
  auto bad = run(make_node("Print", {{"summarize", std::string{"3"}}}),
                 {tensor::scalar(1)});
  CHECK(bad.st.code() == error_code::invalid_argument);
  CHECK(bad.printed.empty());
}

// -- Split --------------------------------------------------------------------

namespace {

node_def split_node(int64_t n) {
  return make_node("Split", {{"num_split", n}});
}

} // namespace

TEST_CASE("Split cuts along an axis into equal parts", "[array][split]") {
  auto x = make<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  auto cols = run(split_node(3), {tensor::scalar<int32_t>(1), x});
  REQUIRE(cols.st.ok());
  REQUIRE(cols.outputs.size() == 3);
  CHECK(cols.outputs[0] == make<int32_t>({1, 2, 7, 8}, {2, 2}));
  CHECK(cols.outputs[1] == make<int32_t>({3, 4, 9, 10}, {2, 2}));
  CHECK(cols.outputs[2] == make<int32_t>({5, 6, 11, 12}, {2, 2}));
  auto rows = run(split_node(2), {tensor::scalar<int32_t>(0), x});
  REQUIRE(rows.outputs.size() == 2);
  CHECK(rows.outputs[0] == make<int32_t>({1, 2, 3, 4, 5, 6}, {1, 6}));
  CHECK(rows.outputs[1] == make<int32_t>({7, 8, 9, 10, 11, 12}, {1, 6}));
  auto neg = run(split_node(2), {tensor::scalar<int32_t>(-1), x});
  REQUIRE(neg.outputs.size() == 2);
  CHECK(neg.outputs[1] == make<int32_t>({4, 5, 6, 10, 11, 12}, {2, 3}));
  auto one = run(split_node(1), {tensor::scalar<int32_t>(0), x});
  REQUIRE(one.outputs.size() == 1);
  CHECK(one.outputs[0] == x);
}

TEST_CASE("Split's row blocks are views of the input, not copies",
          "[array][split]") {
  auto x = make<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 6, 2});
  // Along axis 1 behind a leading 1, as along axis 0: contiguous blocks.
  auto r = run(split_node(3), {tensor::scalar<int32_t>(1), x});
  REQUIRE(r.st.ok());
  REQUIRE(r.outputs.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(r.outputs[k].shape() == tensor_shape{1, 2, 2});
    CHECK(r.outputs[k].raw()
          == static_cast<const float*>(x.raw()) + 4 * static_cast<int>(k));
  }
  CHECK(r.outputs[1] == make<float>({5, 6, 7, 8}, {1, 2, 2}));
  CHECK_FALSE(x.unique()); // the blocks share its buffer
  // A split behind a dimension above 1 still copies.
  auto y = make<float>({1, 2, 3, 4}, {2, 2});
  auto cols = run(split_node(2), {tensor::scalar<int32_t>(1), y});
  REQUIRE(cols.st.ok());
  CHECK(cols.outputs[0] == make<float>({1, 3}, {2, 1}));
  CHECK(cols.outputs[0].raw() != y.raw());
}

TEST_CASE("Split works for strings and bools", "[array][split]") {
  auto s = tensor::vec<std::string>({"a", "b", "c", "d"});
  auto r = run(split_node(2), {tensor::scalar<int32_t>(0), s});
  REQUIRE(r.outputs.size() == 2);
  CHECK(r.outputs[0] == tensor::vec<std::string>({"a", "b"}));
  CHECK(r.outputs[1] == tensor::vec<std::string>({"c", "d"}));
  auto b = tensor::vec<bool>({true, false, false, true});
  auto rb = run(split_node(4), {tensor::scalar<int64_t>(0), b});
  REQUIRE(rb.outputs.size() == 4);
  CHECK(rb.outputs[3] == tensor::vec<bool>({true}));
}

TEST_CASE("Split errors", "[array][split][errors]") {
  auto x = tensor{dtype::float32, tensor_shape{2, 3}};
  auto uneven = run(split_node(2), {tensor::scalar<int32_t>(1), x});
  CHECK(uneven.st.code() == error_code::invalid_argument);
  CHECK_THAT(uneven.st.message(),
             StartsWith("Number of ways to split should evenly divide the "
                        "split dimension, but got split_dim 1 (size = 3) and "
                        "num_split 2"));
  auto range = run(split_node(1), {tensor::scalar<int32_t>(2), x});
  CHECK(range.st.code() == error_code::invalid_argument);
  CHECK_THAT(range.st.message(), Contains("but got 2"));
  CHECK(run(split_node(0), {tensor::scalar<int32_t>(0), x}).st.code()
        == error_code::invalid_argument);
  CHECK(run(make_node("Split"), {tensor::scalar<int32_t>(0), x}).st.code()
        == error_code::invalid_argument);
  CHECK(run(split_node(2), {tensor::vec<int32_t>({0}), x}).st.code()
        == error_code::invalid_argument);
  CHECK(run(split_node(1), {tensor::scalar<int32_t>(0), tensor::scalar(1.0f)})
          .st.code()
        == error_code::invalid_argument);
}

// -- ConcatV2 -----------------------------------------------------------------

TEST_CASE("ConcatV2 joins along an axis", "[array][concat]") {
  auto a = make<float>({1, 2, 3, 4}, {2, 2});
  auto b = make<float>({5, 6}, {2, 1});
  auto c = make<float>({7, 8, 9, 10}, {2, 2});
  auto cols = run(make_node("ConcatV2", {{"N", int64_t{3}}}),
                  {a, b, c, tensor::scalar<int32_t>(1)});
  CHECK(cols.out()
        == make<float>({1, 2, 5, 7, 8, 3, 4, 6, 9, 10}, {2, 5}));
  auto rows = run("ConcatV2", {a, c, tensor::scalar<int32_t>(0)});
  CHECK(rows.out() == make<float>({1, 2, 3, 4, 7, 8, 9, 10}, {4, 2}));
  auto neg = run("ConcatV2", {a, b, tensor::scalar<int64_t>(-1)});
  CHECK(neg.out() == make<float>({1, 2, 5, 3, 4, 6}, {2, 3}));
  auto single = run("ConcatV2", {a, tensor::scalar<int32_t>(0)});
  CHECK(single.out() == a);
}

TEST_CASE("ConcatV2 works for strings, bools and empty parts",
          "[array][concat]") {
  auto s = run("ConcatV2", {tensor::vec<std::string>({"x"}),
                            tensor::vec<std::string>({"y", "z"}),
                            tensor::scalar<int32_t>(0)});
  CHECK(s.out() == tensor::vec<std::string>({"x", "y", "z"}));
  auto b = run("ConcatV2", {tensor::vec<bool>({true}),
                            tensor{dtype::bool_, tensor_shape{0}},
                            tensor::vec<bool>({false}),
                            tensor::scalar<int32_t>(0)});
  CHECK(b.out() == tensor::vec<bool>({true, false}));
}

TEST_CASE("ConcatV2 errors", "[array][concat][errors]") {
  auto a = tensor{dtype::int32, tensor_shape{2, 3}};
  auto b = tensor{dtype::int32, tensor_shape{3, 3}};
  auto dims = run("ConcatV2", {a, b, tensor::scalar<int32_t>(1)});
  CHECK(dims.st.code() == error_code::invalid_argument);
  CHECK_THAT(dims.st.message(),
             StartsWith("ConcatOp : Dimensions of inputs should match: "
                        "shape[0] = [2,3] vs. shape[1] = [3,3]"));
  auto range = run("ConcatV2", {a, a, tensor::scalar<int32_t>(2)});
  CHECK_THAT(range.st.message(),
             StartsWith("ConcatOp : Expected concatenating dimensions in the "
                        "range [-2, 2), but got 2"));
  auto scalars = run("ConcatV2", {tensor::scalar(1), tensor::scalar(2),
                                  tensor::scalar<int32_t>(0)});
  CHECK(scalars.st.code() == error_code::invalid_argument);
  auto ranks = run("ConcatV2", {a, tensor::vec<int32_t>({1}),
                                tensor::scalar<int32_t>(0)});
  CHECK(ranks.st.code() == error_code::invalid_argument);
  auto types = run("ConcatV2", {a, tensor{dtype::float32, tensor_shape{2, 3}},
                                tensor::scalar<int32_t>(0)});
  CHECK(types.st.code() == error_code::invalid_argument);
  auto n = run(make_node("ConcatV2", {{"N", int64_t{3}}}),
               {a, a, tensor::scalar<int32_t>(0)});
  CHECK(n.st.code() == error_code::invalid_argument);
  auto axis = run("ConcatV2", {a, a, tensor::scalar(0.0f)});
  CHECK(axis.st.code() == error_code::invalid_argument);
  CHECK(run("ConcatV2", {a}).st.code() == error_code::invalid_argument);
}

// -- Pack ---------------------------------------------------------------------

TEST_CASE("Pack stacks along a new axis", "[array][pack]") {
  auto a = tensor::vec<int64_t>({1, 2, 3});
  auto b = tensor::vec<int64_t>({4, 5, 6});
  auto rows = run(make_node("Pack", {{"N", int64_t{2}}, {"axis", int64_t{0}}}),
                  {a, b});
  CHECK(rows.out() == make<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  auto cols = run(make_node("Pack", {{"axis", int64_t{1}}}), {a, b});
  CHECK(cols.out() == make<int64_t>({1, 4, 2, 5, 3, 6}, {3, 2}));
  auto last = run(make_node("Pack", {{"axis", int64_t{-1}}}), {a, b});
  CHECK(last.out() == cols.out());
  auto scalars = run("Pack", {tensor::scalar(1.5f), tensor::scalar(2.5f),
                              tensor::scalar(3.5f)});
  CHECK(scalars.out() == tensor::vec<float>({1.5f, 2.5f, 3.5f}));
  auto m = make<int32_t>({1, 2, 3, 4}, {2, 2});
  auto mid = run(make_node("Pack", {{"axis", int64_t{1}}}), {m, m});
  CHECK(mid.out() == make<int32_t>({1, 2, 1, 2, 3, 4, 3, 4}, {2, 2, 2}));
}

TEST_CASE("Pack works for strings and bools", "[array][pack]") {
  auto s = run("Pack", {tensor::scalar("a"), tensor::scalar("b")});
  CHECK(s.out() == tensor::vec<std::string>({"a", "b"}));
  auto b = run(make_node("Pack", {{"axis", int64_t{1}}}),
               {tensor::vec<bool>({true, true}),
                tensor::vec<bool>({false, false})});
  CHECK(b.out() == make<bool>({true, false, true, false}, {2, 2}));
}

TEST_CASE("Pack errors", "[array][pack][errors]") {
  auto shapes = run("Pack", {tensor::vec<float>({1, 2}),
                             tensor::vec<float>({1, 2, 3})});
  CHECK(shapes.st.code() == error_code::invalid_argument);
  CHECK_THAT(shapes.st.message(),
             StartsWith("Shapes of all inputs must match: values[0].shape = "
                        "[2] != values[1].shape = [3]"));
  auto axis = run(make_node("Pack", {{"axis", int64_t{2}}}),
                  {tensor::vec<float>({1}), tensor::vec<float>({2})});
  CHECK(axis.st.code() == error_code::invalid_argument);
  CHECK_THAT(axis.st.message(), StartsWith("axis = 2 not in [-2, 2)"));
  auto types = run("Pack", {tensor::scalar(1.0f), tensor::scalar(1.0)});
  CHECK(types.st.code() == error_code::invalid_argument);
  CHECK(run("Pack", {}).st.code() == error_code::invalid_argument);
}

// -- Reshape ------------------------------------------------------------------

TEST_CASE("Reshape keeps the values and changes the shape",
          "[array][reshape]") {
  auto x = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = run("Reshape", {x, tensor::vec<int32_t>({3, 2})});
  CHECK(r.out() == make<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  auto infer = run("Reshape", {x, tensor::vec<int64_t>({-1, 3, 1})});
  CHECK(infer.out().shape() == tensor_shape{2, 3, 1});
  auto flat = run("Reshape", {x, tensor::vec<int32_t>({-1})});
  CHECK(flat.out() == tensor::vec<float>({1, 2, 3, 4, 5, 6}));
  auto scalar = run("Reshape", {tensor::vec<std::string>({"s"}),
                                tensor{dtype::int32, tensor_shape{0}}});
  CHECK(scalar.out() == tensor::scalar("s"));
  auto empty = run("Reshape", {tensor{dtype::bool_, tensor_shape{0, 4}},
                               tensor::vec<int32_t>({2, 0})});
  CHECK(empty.out().shape() == tensor_shape{2, 0});
}

TEST_CASE("Reshape errors", "[array][reshape][errors]") {
  auto x = tensor{dtype::float32, tensor_shape{2, 3}};
  auto count = run("Reshape", {x, tensor::vec<int32_t>({2, 2})});
  CHECK(count.st.code() == error_code::invalid_argument);
  CHECK_THAT(count.st.message(),
             StartsWith("Input to reshape is a tensor with 6 values, but the "
                        "requested shape has 4"));
  auto multiple = run("Reshape", {x, tensor::vec<int32_t>({-1, 4})});
  CHECK_THAT(multiple.st.message(),
             StartsWith("Input to reshape is a tensor with 6 values, but the "
                        "requested shape requires a multiple of 4"));
  auto two = run("Reshape", {x, tensor::vec<int32_t>({-1, -1})});
  CHECK_THAT(two.st.message(),
             StartsWith("Only one input size may be -1, not both 0 and 1"));
  auto negative = run("Reshape", {x, tensor::vec<int32_t>({-2, -3})});
  CHECK_THAT(negative.st.message(),
             StartsWith("Size 0 must be non-negative, not -2"));
  auto zero = run("Reshape", {x, tensor::vec<int32_t>({0, -1})});
  CHECK(zero.st.code() == error_code::invalid_argument);
  auto matrix = run("Reshape", {x, make<int32_t>({2, 3}, {1, 2})});
  CHECK(matrix.st.code() == error_code::invalid_argument);
  auto floats = run("Reshape", {x, tensor::vec<float>({6})});
  CHECK(floats.st.code() == error_code::invalid_argument);
  auto huge = run("Reshape",
                  {x, tensor::vec<int64_t>({int64_t{1} << 40,
                                            int64_t{1} << 40})});
  CHECK(huge.st.code() == error_code::invalid_argument);
}

// -- Cast ---------------------------------------------------------------------

namespace {

node_def cast_node(dtype src, dtype dst) {
  return make_node("Cast", {{"SrcT", src}, {"DstT", dst}});
}

} // namespace

TEST_CASE("Cast from floats to integers truncates toward zero",
          "[array][cast]") {
  auto x = tensor::vec<float>({1.7f, -1.7f, 0.2f, 3});
  CHECK(run(cast_node(dtype::float32, dtype::int32), {x}).out()
        == tensor::vec<int32_t>({1, -1, 0, 3}));
  CHECK(run(cast_node(dtype::float32, dtype::int64), {x}).out()
        == tensor::vec<int64_t>({1, -1, 0, 3}));
}

TEST_CASE("Cast between numeric types", "[array][cast]") {
  auto i = tensor::vec<int32_t>({1, -2, 3});
  CHECK(run(cast_node(dtype::int32, dtype::float32), {i}).out()
        == tensor::vec<float>({1, -2, 3}));
  CHECK(run(cast_node(dtype::int32, dtype::float64), {i}).out()
        == tensor::vec<double>({1, -2, 3}));
  CHECK(run(cast_node(dtype::int32, dtype::int64), {i}).out()
        == tensor::vec<int64_t>({1, -2, 3}));
  auto d = tensor::vec<double>({0.1, 1e300});
  auto f = values<float>(
    run(cast_node(dtype::float64, dtype::float32), {d}).out());
  CHECK(f[0] == 0.1f);
  CHECK(std::isinf(f[1]));
  // int64 -> int32 keeps the low 32 bits, as a C++ conversion does.
  auto big = tensor::vec<int64_t>({(int64_t{1} << 32) + 5, -1});
  CHECK(run(cast_node(dtype::int64, dtype::int32), {big}).out()
        == tensor::vec<int32_t>({5, -1}));
}

TEST_CASE("Cast to and from bool", "[array][cast]") {
  auto x = tensor::vec<double>({0, -0.5, 2, 0});
  CHECK(run(cast_node(dtype::float64, dtype::bool_), {x}).out()
        == tensor::vec<bool>({false, true, true, false}));
  auto i = tensor::vec<int64_t>({0, 7});
  CHECK(run(cast_node(dtype::int64, dtype::bool_), {i}).out()
        == tensor::vec<bool>({false, true}));
  auto b = tensor::vec<bool>({true, false});
  CHECK(run(cast_node(dtype::bool_, dtype::float32), {b}).out()
        == tensor::vec<float>({1, 0}));
  CHECK(run(cast_node(dtype::bool_, dtype::int32), {b}).out()
        == tensor::vec<int32_t>({1, 0}));
}

TEST_CASE("Cast saturates out-of-range floats and maps NaN to 0",
          "[array][cast]") {
  auto nan = std::numeric_limits<float>::quiet_NaN();
  auto inf = std::numeric_limits<float>::infinity();
  auto x = tensor::vec<float>({nan, inf, -inf, 3e9f, -3e9f});
  auto i32 = std::numeric_limits<int32_t>::max();
  auto l32 = std::numeric_limits<int32_t>::min();
  CHECK(run(cast_node(dtype::float32, dtype::int32), {x}).out()
        == tensor::vec<int32_t>({0, i32, l32, i32, l32}));
  CHECK(run(cast_node(dtype::float32, dtype::int64), {x}).out()
        == tensor::vec<int64_t>({0, std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min(),
                                 3000000000, -3000000000}));
}

TEST_CASE("Cast to the same type forwards the input", "[array][cast]") {
  auto s = tensor::vec<std::string>({"a"});
  CHECK(run(cast_node(dtype::string, dtype::string), {s}).out() == s);
  auto f = tensor::vec<float>({1.25f});
  CHECK(run(make_node("Cast", {{"DstT", dtype::float32}}), {f}).out() == f);
}

TEST_CASE("Cast errors", "[array][cast][errors]") {
  auto s = tensor::vec<std::string>({"1"});
  auto from_string = run(cast_node(dtype::string, dtype::int32), {s});
  CHECK(from_string.st.code() == error_code::invalid_argument);
  CHECK_THAT(from_string.st.message(), Contains("string"));
  auto to_string = run(cast_node(dtype::float32, dtype::string),
                       {tensor::scalar(1.0f)});
  CHECK(to_string.st.code() == error_code::invalid_argument);
  auto src = run(cast_node(dtype::int32, dtype::float32),
                 {tensor::scalar(1.0f)});
  CHECK(src.st.code() == error_code::invalid_argument);
  auto no_dst = run(make_node("Cast"), {tensor::scalar(1.0f)});
  CHECK(no_dst.st.code() == error_code::invalid_argument);
}

// -- Fill ---------------------------------------------------------------------

TEST_CASE("Fill repeats a scalar over a shape", "[array][fill]") {
  CHECK(run("Fill", {tensor::vec<int32_t>({2, 3}), tensor::scalar(1.5f)})
          .out()
        == make<float>({1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}, {2, 3}));
  CHECK(run("Fill", {tensor::vec<int64_t>({2}), tensor::scalar("ab")}).out()
        == tensor::vec<std::string>({"ab", "ab"}));
  CHECK(run("Fill", {tensor::vec<int32_t>({1, 2}), tensor::scalar(true)})
          .out()
        == make<bool>({true, true}, {1, 2}));
  CHECK(run("Fill", {tensor{dtype::int32, tensor_shape{0}},
                     tensor::scalar<int64_t>(7)})
          .out()
        == tensor::scalar<int64_t>(7));
  CHECK(run("Fill", {tensor::vec<int32_t>({3, 0}), tensor::scalar(1.0)})
          .out()
          .shape()
        == tensor_shape{3, 0});
}

TEST_CASE("Fill errors", "[array][fill][errors]") {
  auto matrix = run("Fill", {make<int32_t>({1, 2}, {1, 2}),
                             tensor::scalar(1.0f)});
  CHECK(matrix.st.code() == error_code::invalid_argument);
  auto value = run("Fill", {tensor::vec<int32_t>({2}),
                            tensor::vec<float>({1, 2})});
  CHECK(value.st.code() == error_code::invalid_argument);
  CHECK_THAT(value.st.message(), StartsWith("value must be a scalar"));
  auto negative = run("Fill", {tensor::vec<int32_t>({2, -1}),
                               tensor::scalar(1.0f)});
  CHECK(negative.st.code() == error_code::invalid_argument);
  auto overflow = run("Fill",
                      {tensor::vec<int64_t>({int64_t{1} << 40,
                                             int64_t{1} << 40}),
                       tensor::scalar(1.0f)});
  CHECK(overflow.st.code() == error_code::invalid_argument);
  auto floats = run("Fill", {tensor::vec<float>({2}), tensor::scalar(1.0f)});
  CHECK(floats.st.code() == error_code::invalid_argument);
}
