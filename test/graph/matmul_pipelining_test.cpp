// The rewrite that sends a large MatMul operand or result between tasks in
// row blocks (graph/matmul_pipelining.hpp): which MatMuls qualify, what
// they become, and that every other graph is left as it was.

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "actorflow/graph/matmul_pipelining.hpp"
#include "common/graph_def_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string ps = "/job:ps/replica:0/task:0/device:CPU:0";
const std::string worker = "/job:worker/replica:0/task:0/device:CPU:0";

node_def with_shape(node_def n, tensor_shape shape) {
  n.attrs["shape"] = shape;
  n.attrs["dtype"] = dtype::float32;
  return n;
}

node_def matmul(std::string name, std::string a, std::string b,
                std::string device, bool transpose_a = false,
                bool transpose_b = false) {
  auto n = make(std::move(name), "MatMul", {std::move(a), std::move(b)},
                std::move(device));
  n.attrs["T"] = dtype::float32;
  n.attrs["transpose_a"] = transpose_a;
  n.attrs["transpose_b"] = transpose_b;
  return n;
}

// x [?, in] on the worker times the ps's w [in, out] (through its read).
graph_def first_layer(int64_t in, int64_t out, std::string w_device = ps) {
  graph_def g;
  g.nodes.push_back(with_shape(make("w", "VariableV2", {}, w_device),
                               tensor_shape{in, out}));
  g.nodes.push_back(make("w/read", "Identity", {"w"}, w_device));
  g.nodes.push_back(
    with_shape(make("x", "Placeholder", {}, worker), tensor_shape{-1, in}));
  g.nodes.push_back(matmul("h", "x", "w/read", worker));
  g.nodes.push_back(make("h/relu", "Relu", {"h"}, worker));
  return g;
}

// The int32 scalar a Const node holds.
int32_t const_value(const graph_def& g, const std::string& name) {
  auto* n = find(g, parse_input(name).node);
  REQUIRE(n);
  REQUIRE(n->op == "Const");
  return n->attr<tensor>("value").scalar_value<int32_t>();
}

} // namespace

TEST_CASE("matmul_pipelining: a large operand from another task is split "
          "into row blocks, its MatMul into a sum of block products",
          "[matmul_pipelining]") {
  auto g = first_layer(784, 256); // 784 KiB
  CHECK(pipeline_cut_matmuls(g) == 1);
  CHECK(inputs_first(g));
  // The weights are split by rows on the ps (views); x's column blocks
  // are not cut out (a Split would copy them): each product reads its
  // columns of x in place.
  auto splits = of_op(g, "Split");
  REQUIRE(splits.size() == 1);
  const node_def* on_ps = splits[0];
  CHECK(on_ps->device == ps);
  CHECK(on_ps->inputs.at(1) == "w/read");
  CHECK(const_value(g, on_ps->inputs.at(0)) == 0);
  CHECK(on_ps->attr<int64_t>("num_split") == 4);
  // h keeps its name and its consumer: it is now the sum of 4 products,
  // columns [196j, 196j + 196) of x times block j of w, on the worker.
  auto* h = find(g, "h");
  REQUIRE(h);
  CHECK(h->op == "AddN");
  CHECK(h->attr<int64_t>("N") == 4);
  CHECK(h->device == worker);
  REQUIRE(h->inputs.size() == 4);
  for (int j = 0; j < 4; ++j) {
    auto* piece = find(g, h->inputs[static_cast<size_t>(j)]);
    REQUIRE(piece);
    CHECK(piece->op == "MatMul");
    CHECK(piece->device == worker);
    CHECK(piece->inputs
          == std::vector<std::string>{"x", input_name(on_ps->name, j)});
    CHECK(piece->attr<int64_t>("_a_col_begin") == 196 * j);
    CHECK(piece->attr<int64_t>("_a_col_count") == 196);
  }
  CHECK(find(g, "h/relu")->inputs == std::vector<std::string>{"h"});
}

TEST_CASE("matmul_pipelining: graphs that do not qualify stay unchanged",
          "[matmul_pipelining]") {
  auto unchanged = [](graph_def g) {
    auto before = g.nodes.size();
    CHECK(pipeline_cut_matmuls(g) == 0);
    CHECK(g.nodes.size() == before);
    CHECK(find(g, "h")->op == "MatMul");
  };
  SECTION("same task") {
    unchanged(first_layer(784, 256, worker));
  }
  SECTION("another device of the same task") {
    unchanged(first_layer(784, 256,
                          "/job:worker/replica:0/task:0/device:CPU:1"));
  }
  SECTION("below the size worth cutting") {
    unchanged(first_layer(128, 128)); // 64 KiB
  }
  SECTION("rows divisible by neither 4, 3 nor 2") {
    unchanged(first_layer(787, 256));
  }
  SECTION("transposed operand") {
    auto g = first_layer(784, 256);
    for (auto& n : g.nodes)
      if (n.name == "h")
        n.attrs["transpose_b"] = true;
    unchanged(g);
  }
  SECTION("unknown shape") {
    auto g = first_layer(784, 256);
    for (auto& n : g.nodes)
      if (n.name == "w")
        n.attrs["shape"] = tensor_shape{-1, 256};
    unchanged(g);
  }
  SECTION("switched off") {
    auto g = first_layer(784, 256);
    matmul_pipelining_options opts;
    opts.pieces = 1;
    CHECK(pipeline_cut_matmuls(g, opts) == 0);
  }
}

TEST_CASE("matmul_pipelining: rows that 4 does not divide take 3 or 2 "
          "blocks", "[matmul_pipelining]") {
  auto g = first_layer(783, 256); // 3 x 261
  CHECK(pipeline_cut_matmuls(g) == 1);
  CHECK(find(g, "h")->attr<int64_t>("N") == 3);
}

namespace {

// The worker's gradient dw = x^T dh [784, 256] goes to the ps, where
// `consumer` (an op taking it as input `slot`) uses it.
graph_def gradient_to_ps(node_def consumer, size_t slot) {
  auto g = first_layer(784, 256);
  g.nodes.push_back(make("dh", "ReluGrad", {"h/relu", "h"}, worker));
  g.nodes.push_back(matmul("dw", "x", "dh", worker, true));
  consumer.inputs.at(slot) = "dw";
  g.nodes.push_back(std::move(consumer));
  return g;
}

node_def apply_adam() {
  auto n = make("w/ApplyAdam", "ApplyAdam",
                {"w", "w/m", "w/v", "b1p", "b2p", "lr", "b1", "b2", "eps",
                 "", "^ctl"},
                ps);
  n.attrs["T"] = dtype::float32;
  return n;
}

// The nodes an ApplyAdam on the ps reads besides its gradient.
void add_adam_inputs(graph_def& g) {
  std::vector<node_def> extra;
  for (auto name : {"w/m", "w/v"})
    extra.push_back(with_shape(make(name, "VariableV2", {}, ps),
                               tensor_shape{784, 256}));
  for (auto name : {"b1p", "b2p", "lr", "b1", "b2", "eps"})
    extra.push_back(make(name, "Const", {}, ps));
  extra.push_back(make("ctl", "NoOp", {}, ps));
  g.nodes.insert(g.nodes.begin(), extra.begin(), extra.end());
}

} // namespace

TEST_CASE("matmul_pipelining: a gradient for a training op on another task "
          "is applied block by block as the blocks arrive",
          "[matmul_pipelining]") {
  auto g = gradient_to_ps(apply_adam(), 9);
  add_adam_inputs(g);
  g.nodes.push_back(make("update", "NoOp", {"^w/ApplyAdam"}, ps));
  // Both MatMuls qualify: h's operand and dw's result.
  CHECK(pipeline_cut_matmuls(g) == 2);
  CHECK(inputs_first(g));
  CHECK(of_op(g, "ConcatV2").empty());
  CHECK(find(g, "dw") == nullptr); // nothing on the worker uses it whole
  // The ApplyAdam is now a NoOp (the update's control input still names
  // it) over 4 updates of rows 0, 196, 392, 588, each taking one block.
  auto* group = find(g, "w/ApplyAdam");
  REQUIRE(group);
  CHECK(group->op == "NoOp");
  CHECK(group->device == ps);
  REQUIRE(group->inputs.size() == 4);
  std::set<int64_t> firsts;
  std::set<int64_t> columns;
  for (auto& in : group->inputs) {
    REQUIRE(in[0] == '^');
    auto* block = find(g, in.substr(1));
    REQUIRE(block);
    CHECK(block->op == "ApplyAdam");
    CHECK(block->device == ps);
    firsts.insert(block->attr<int64_t>("_row_begin"));
    // The same inputs but the gradient, and the op's control input.
    CHECK(block->inputs.at(0) == "w");
    CHECK(block->inputs.at(8) == "eps");
    CHECK(block->inputs.at(10) == "^ctl");
    auto* piece = find(g, block->inputs.at(9));
    REQUIRE(piece);
    CHECK(piece->op == "MatMul");
    CHECK(piece->device == worker);
    CHECK(piece->attr<bool>("transpose_a"));
    CHECK(piece->inputs.at(1) == "dh");
    // Rows of dw are columns of x, read in place as by the forward's
    // products.
    CHECK(piece->inputs.at(0) == "x");
    CHECK(piece->attr<int64_t>("_a_col_count") == 196);
    columns.insert(piece->attr<int64_t>("_a_col_begin"));
    CHECK(piece->attr<int64_t>("_a_col_begin")
          == block->attr<int64_t>("_row_begin"));
  }
  CHECK(firsts == std::set<int64_t>{0, 196, 392, 588});
  CHECK(columns == firsts);
  // Only the ps's weights are split (into row views).
  CHECK(of_op(g, "Split").size() == 1);
}

TEST_CASE("matmul_pipelining: any other consumer on another task gets the "
          "blocks joined there, the result stays where its task uses it",
          "[matmul_pipelining]") {
  SECTION("an ordinary op") {
    auto g = gradient_to_ps(make("dw/copy", "Identity", {""}, ps), 0);
    CHECK(pipeline_cut_matmuls(g) == 2);
    CHECK(inputs_first(g));
    CHECK(find(g, "dw") == nullptr);
    auto concats = of_op(g, "ConcatV2");
    REQUIRE(concats.size() == 1);
    CHECK(concats[0]->device == ps);
    CHECK(concats[0]->attr<int64_t>("N") == 4);
    CHECK(const_value(g, concats[0]->inputs.back()) == 0);
    CHECK(find(g, "dw/copy")->inputs
          == std::vector<std::string>{concats[0]->name});
  }
  SECTION("a training op whose output is used as data") {
    auto g = gradient_to_ps(apply_adam(), 9);
    add_adam_inputs(g);
    g.nodes.push_back(make("after", "Identity", {"w/ApplyAdam"}, ps));
    CHECK(pipeline_cut_matmuls(g) == 2);
    CHECK(find(g, "w/ApplyAdam")->op == "ApplyAdam");
    CHECK(of_op(g, "ConcatV2").size() == 1);
  }
  SECTION("a consumer on the worker too") {
    auto g = gradient_to_ps(make("dw/copy", "Identity", {""}, ps), 0);
    g.nodes.push_back(make("dw/local", "Neg", {"dw"}, worker));
    CHECK(pipeline_cut_matmuls(g) == 2);
    auto* dw = find(g, "dw");
    REQUIRE(dw);
    CHECK(dw->op == "ConcatV2");
    CHECK(dw->device == worker);
    CHECK(of_op(g, "ConcatV2").size() == 2);
    CHECK(inputs_first(g));
  }
}
