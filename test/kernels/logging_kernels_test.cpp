// Assert and Print's first_n, as TensorFlow 1.x's logging_ops (issue 34).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;

TEST_CASE("Assert passes on true and fails its step with its data on false",
          "[assert]") {
  auto node = make_node("Assert", {{"summarize", int64_t{3}}});
  auto data = std::vector<tensor>{tensor::vec<std::string>({"x is"}),
                                  tensor::vec<float>({1, 2.5f, 3, 4})};
  auto pass = run(node, {tensor::scalar(true), data[0], data[1]});
  CHECK(pass.st.ok());
  CHECK(pass.outputs.empty());
  auto fail = run(node, {tensor::scalar(false), data[0], data[1]});
  CHECK(fail.st.code() == error_code::invalid_argument);
  // TF's AssertOp: each input summarized in brackets, space-separated,
  // "..." past `summarize` elements; then the node, as every kernel error.
  CHECK(fail.st.message()
        == "assertion failed: [x is] [1 2.5 3...] [[node n]]");
  auto all = run(make_node("Assert", {{"summarize", int64_t{-1}}}),
                 {tensor::scalar(false), data[1]});
  CHECK(all.st.message() == "assertion failed: [1 2.5 3 4] [[node n]]");
  auto none = run(node, {tensor::scalar(false)});
  CHECK(none.st.message() == "assertion failed:  [[node n]]");
}

TEST_CASE("Assert rejects a condition that is not a bool scalar",
          "[assert][errors]") {
  auto node = make_node("Assert");
  auto r = run(node, {tensor::vec<bool>({true, false})});
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Catch::Matchers::Contains("scalar bool"));
  auto f = run(node, {tensor::scalar(1.0f)});
  CHECK(f.st.code() == error_code::invalid_argument);
}

TEST_CASE("Print prints its first first_n runs, counted by the caller",
          "[print]") {
  auto node = make_node("Print", {{"message", std::string{"v="}},
                                  {"first_n", int64_t{2}}});
  std::vector<tensor> inputs{tensor::scalar(7), tensor::scalar(7)};
  int64_t runs = 0;
  std::vector<std::string> printed;
  for (int i = 0; i < 4; ++i) {
    kernel_context ctx{node, inputs, {}, nullptr, {}};
    ctx.print = [&](const std::string& line) { printed.push_back(line); };
    ctx.runs = &runs;
    REQUIRE(run_kernel(ctx).ok());
    // The input passes through every time, printed or not.
    REQUIRE(ctx.outputs.size() == 1);
    CHECK(ctx.outputs[0] == inputs[0]);
  }
  CHECK(printed == std::vector<std::string>{"v=[7]", "v=[7]"});
  CHECK(runs == 2);
  // Without first_n every run prints and nothing is counted.
  auto always = make_node("Print", {{"message", std::string{"a"}}});
  runs = 0;
  for (int i = 0; i < 3; ++i) {
    kernel_context ctx{always, inputs, {}, nullptr, {}};
    ctx.print = [&](const std::string& line) { printed.push_back(line); };
    ctx.runs = &runs;
    REQUIRE(run_kernel(ctx).ok());
  }
  CHECK(printed.size() == 5);
  CHECK(runs == 0);
}
