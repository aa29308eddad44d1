// The contracts kernels declare at registration: the dispatcher checks a
// node's inputs and type attributes before the kernel's body runs, with
// TensorFlow's codes and words, naming the op and the node.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;

namespace {

// A node of `op` named as a graph would name it, so that a message that
// names the node is told apart from one that merely ends in "n".
node_def named(std::string op, std::map<std::string, attr_value> attrs = {}) {
  auto node = make_node(std::move(op), std::move(attrs));
  node.name = "layer_1/op";
  return node;
}

// The status `node` fails with on `inputs`, both through the registered
// function and through run_kernel (the executor's way in).
status failure(const node_def& node, std::vector<tensor> inputs) {
  auto direct = run(node, inputs);
  kernel_context ctx{node, std::span<const tensor>{inputs}, {}, nullptr, {}};
  auto via_run_kernel = run_kernel(ctx);
  CHECK(via_run_kernel.code() == direct.st.code());
  CHECK(via_run_kernel.message() == direct.st.message());
  CHECK(ctx.outputs.empty());
  return direct.st;
}

tensor f32(float x) {
  return tensor::scalar<float>(x);
}

} // namespace

TEST_CASE("a wrong number of inputs is InvalidArgument naming the op and the "
          "node",
          "[contract][errors]") {
  auto add = failure(named("Add"), {f32(1)});
  CHECK(add.code() == error_code::invalid_argument);
  CHECK(add.message() == "Add expects 2 input(s), got 1 [[node layer_1/op]]");
  auto neg = failure(named("Neg"), {f32(1), f32(2)});
  CHECK(neg.message() == "Neg expects 1 input(s), got 2 [[node layer_1/op]]");
  auto add_n = failure(named("AddN"), {});
  CHECK(add_n.code() == error_code::invalid_argument);
  CHECK(add_n.message()
        == "AddN expects at least 1 input(s), got 0 [[node layer_1/op]]");
  auto concat = failure(named("ConcatV2"), {f32(1)});
  CHECK(concat.message()
        == "ConcatV2 expects at least 2 input(s), got 1 [[node layer_1/op]]");
}

TEST_CASE("inputs that must share a dtype but do not are InvalidArgument in "
          "TF's words",
          "[contract][errors]") {
  auto a = make<float>({1, 2, 3, 4}, {2, 2});
  auto b = make<double>({1, 2, 3, 4}, {2, 2});
  auto matmul = failure(named("MatMul"), {a, b});
  CHECK(matmul.code() == error_code::invalid_argument);
  CHECK(matmul.message()
        == "cannot compute MatMul as input #1(zero-based) was expected to be "
           "a float32 tensor but is a float64 tensor [[node layer_1/op]]");
  // MaxPoolGrad's third input must match its first too.
  auto x = make<float>({1, 2, 3, 4}, {1, 2, 2, 1});
  auto grad = failure(named("MaxPoolGrad"), {x, x, b});
  CHECK_THAT(grad.message(),
             Catch::StartsWith("cannot compute MaxPoolGrad as input "
                               "#2(zero-based) was expected to be a float32 "
                               "tensor but is a float64 tensor"));
}

TEST_CASE("an input of a fixed dtype is checked by its contract",
          "[contract][errors]") {
  auto cond = tensor::scalar<int32_t>(1);
  auto select = failure(named("Select"), {cond, f32(1), f32(2)});
  CHECK(select.code() == error_code::invalid_argument);
  CHECK(select.message()
        == "cannot compute Select as input #0(zero-based) was expected to be "
           "a bool tensor but is a int32 tensor [[node layer_1/op]]");
  auto raw = failure(named("DecodeRaw", {{"out_type", dtype::float32}}),
                     {f32(1)});
  CHECK_THAT(raw.message(),
             Catch::StartsWith("cannot compute DecodeRaw as input "
                               "#0(zero-based) was expected to be a string "
                               "tensor but is a float32 tensor"));
}

TEST_CASE("a list of inputs shares one dtype and its length N",
          "[contract][errors]") {
  auto axis = tensor::scalar<int32_t>(0);
  auto x = make<float>({1, 2}, {2});
  auto y = make<int32_t>({1, 2}, {2});
  auto mixed = failure(named("ConcatV2"), {x, y, axis});
  CHECK(mixed.message()
        == "cannot compute ConcatV2 as input #1(zero-based) was expected to "
           "be a float32 tensor but is a int32 tensor [[node layer_1/op]]");
  // The axis is not in the list: an int32 axis after float values is fine.
  CHECK(run(named("ConcatV2"), {x, x, axis}).out()
        == make<float>({1, 2, 1, 2}, {4}));
  auto n = failure(named("ConcatV2", {{"N", int64_t{3}}}), {x, x, axis});
  CHECK(n.code() == error_code::invalid_argument);
  CHECK(n.message()
        == "attribute N of ConcatV2 is 3 but it has 2 values [[node "
           "layer_1/op]]");
  auto add_n = failure(named("AddN", {{"N", int64_t{1}}}), {x, x});
  CHECK(add_n.message()
        == "attribute N of AddN is 1 but it has 2 inputs [[node layer_1/op]]");
}

TEST_CASE("a type attribute that disagrees with its input is InvalidArgument",
          "[contract][errors]") {
  auto add = failure(named("Add", {{"T", dtype::float64}}), {f32(1), f32(2)});
  CHECK(add.code() == error_code::invalid_argument);
  CHECK(add.message()
        == "attribute T of Add is float64 but the input is float32 [[node "
           "layer_1/op]]");
  // Gather's attributes name different inputs.
  auto params = make<float>({1, 2, 3}, {3});
  auto indices = make<int32_t>({0, 2}, {2});
  auto gather = failure(named("Gather", {{"Tindices", dtype::int64}}),
                        {params, indices});
  CHECK(gather.message()
        == "attribute Tindices of Gather is int64 but the input is int32 "
           "[[node layer_1/op]]");
  auto cast = failure(named("Cast", {{"SrcT", dtype::int32},
                                     {"DstT", dtype::float64}}),
                      {f32(1)});
  CHECK(cast.message()
        == "attribute SrcT of Cast is int32 but the input is float32 [[node "
           "layer_1/op]]");
}

TEST_CASE("the contract is checked in order before the body runs",
          "[contract][errors]") {
  // Arity first: a second input of another dtype is not looked at.
  auto arity = failure(named("Sub", {{"T", dtype::int32}}),
                       {f32(1), tensor::scalar<double>(2), f32(3)});
  CHECK_THAT(arity.message(), Catch::StartsWith("Sub expects 2 input(s)"));
  // Input dtypes before type attributes.
  auto dtypes = failure(named("Sub", {{"T", dtype::int32}}),
                        {f32(1), tensor::scalar<double>(2)});
  CHECK_THAT(dtypes.message(), Catch::StartsWith("cannot compute Sub"));
  // Print's body would print; its contract fails first.
  auto node = named("Print", {{"T", dtype::int32}, {"message", std::string{"m"}}});
  auto print = run(node, {f32(1), f32(2)});
  CHECK(print.st.code() == error_code::invalid_argument);
  CHECK(print.printed.empty());
  // Shape checks are the body's, after the contract passed.
  auto shapes = failure(named("Add"), {make<float>({1, 2}, {2}),
                                       make<float>({1, 2, 3}, {3})});
  CHECK_THAT(shapes.message(), Catch::StartsWith("Incompatible shapes"));
}

TEST_CASE("every kernel with a fixed number of inputs declares it",
          "[contract][errors]") {
  // No fixed count: Const and NoOp take none, DecodeCSV's follows its
  // OUT_TYPE attribute, the rest take lists.
  const std::set<std::string> unfixed{"Const", "NoOp",     "DecodeCSV",
                                      "AddN",  "ConcatV2", "Pack",
                                      "Print", "Assert"};
  std::vector<tensor> seven(7, f32(1));
  for (auto& op : builtin_kernels().ops()) {
    if (unfixed.count(op) > 0)
      continue;
    INFO(op);
    auto r = run(make_node(op), seven);
    CHECK(r.st.code() == error_code::invalid_argument);
    CHECK_THAT(r.st.message(),
               Catch::StartsWith(op + " expects ")
                 && Catch::EndsWith(" input(s), got 7 [[node n]]"));
  }
}
