// Every gradient function against central differences (float64, in a
// session), and tf.gradients' graph-building rules.

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "actorflow/graph/gradients.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

using builder = std::function<output(const std::vector<output>&)>;

tensor random_tensor(tensor_shape shape, std::mt19937_64& rng, double lo = -1,
                     double hi = 1) {
  tensor t{dtype::float64, shape};
  std::uniform_real_distribution<double> u{lo, hi};
  for (auto& x : t.flat<double>())
    x = u(rng);
  return t;
}

tensor copy_of(const tensor& t) {
  tensor c{t.type(), t.shape()};
  auto src = t.flat<double>();
  auto dst = c.flat<double>();
  std::copy(src.begin(), src.end(), dst.begin());
  return c;
}

// Compares d(sum(w * f(inputs)))/d(input k), for every input k marked in
// `check`, with central differences; w is a fixed random weighting so that
// every output element matters differently.
void check_gradients(const std::string& what, const builder& f,
                     std::vector<tensor> values, std::vector<bool> check = {},
                     double tolerance = 1e-6) {
  INFO(what);
  graph g;
  auto as_default = g.as_default();
  std::vector<output> xs;
  for (size_t k = 0; k < values.size(); ++k)
    xs.push_back(placeholder(values[k].type(), values[k].shape(),
                             "x" + std::to_string(k)));
  auto y = f(xs);
  REQUIRE(y.type() == dtype::float64);
  session sess{bounded(), &g};
  feed_dict feeds;
  for (size_t k = 0; k < xs.size(); ++k)
    feeds.emplace_back(xs[k], values[k]);
  auto y0 = sess.run(y, feeds);
  std::mt19937_64 rng{42};
  auto w = constant(random_tensor(y0.shape(), rng), "w");
  auto loss = reduce_sum(mul(y, w));
  std::vector<output> targets;
  std::vector<size_t> which;
  for (size_t k = 0; k < xs.size(); ++k)
    if (check.empty() || check[k]) {
      targets.push_back(xs[k]);
      which.push_back(k);
    }
  auto grads = gradients({loss}, targets);
  std::vector<fetch> fetches;
  for (auto& gr : grads) {
    REQUIRE(gr.valid());
    fetches.emplace_back(gr);
  }
  auto analytic = sess.run(fetches, feeds);
  const double h = 1e-5;
  for (size_t t = 0; t < which.size(); ++t) {
    auto k = which[t];
    INFO("input " << k);
    REQUIRE(analytic[t].shape() == values[k].shape());
    auto a = analytic[t].flat<double>();
    for (size_t i = 0; i < a.size(); ++i) {
      auto plus = copy_of(values[k]);
      auto minus = copy_of(values[k]);
      plus.flat<double>()[i] += h;
      minus.flat<double>()[i] -= h;
      auto fd = feeds;
      fd[k].second = plus;
      auto lp = sess.run(loss, fd).scalar_value<double>();
      fd[k].second = minus;
      auto lm = sess.run(loss, fd).scalar_value<double>();
      auto numeric = (lp - lm) / (2 * h);
      INFO("element " << i << ": analytic " << a[i] << ", numeric "
                      << numeric);
      CHECK(std::abs(a[i] - numeric)
            <= tolerance * std::max(1.0, std::abs(numeric)));
    }
  }
}

tensor_shape shp(std::vector<int64_t> dims) {
  return tensor_shape{dims};
}

tensor rnd(std::vector<int64_t> dims, double lo = -1, double hi = 1,
           uint64_t seed = 1) {
  std::mt19937_64 rng{seed};
  return random_tensor(shp(dims), rng, lo, hi);
}

} // namespace

TEST_CASE("gradients: arithmetic with broadcasting", "[gradients]") {
  check_gradients("add [2,3]+[3]",
                  [](auto& x) { return add(x[0], x[1]); },
                  {rnd({2, 3}), rnd({3}, -1, 1, 2)});
  check_gradients("sub [2,1]-[1,3]",
                  [](auto& x) { return sub(x[0], x[1]); },
                  {rnd({2, 1}), rnd({1, 3}, -1, 1, 2)});
  check_gradients("mul [2,3]*[]",
                  [](auto& x) { return mul(x[0], x[1]); },
                  {rnd({2, 3}), rnd({}, -1, 1, 2)});
  check_gradients("div [3]/[2,3]",
                  [](auto& x) { return div(x[0], x[1]); },
                  {rnd({3}), rnd({2, 3}, 0.5, 2, 2)});
  check_gradients("maximum and minimum",
                  [](auto& x) {
                    return add(maximum(x[0], x[1]), minimum(x[0], x[1]));
                  },
                  {rnd({2, 3}), rnd({3}, -1, 1, 2)});
  // x used twice: gradients from both uses add up (AddN).
  check_gradients("x * x + x", [](auto& x) { return add(mul(x[0], x[0]), x[0]); },
                  {rnd({4})});
}

TEST_CASE("gradients: element-wise functions", "[gradients]") {
  check_gradients("neg", [](auto& x) { return neg(x[0]); }, {rnd({3})});
  check_gradients("square", [](auto& x) { return square(x[0]); }, {rnd({3})});
  check_gradients("exp", [](auto& x) { return exp(x[0]); }, {rnd({3})});
  check_gradients("log", [](auto& x) { return log(x[0]); },
                  {rnd({3}, 0.5, 2)});
  check_gradients("log1p", [](auto& x) { return log1p(x[0]); },
                  {rnd({3}, 0.1, 2)});
  check_gradients("sqrt", [](auto& x) { return sqrt(x[0]); },
                  {rnd({3}, 0.5, 2)});
  check_gradients("reciprocal", [](auto& x) { return reciprocal(x[0]); },
                  {rnd({3}, 0.5, 2)});
  check_gradients("abs", [](auto& x) { return abs(x[0]); },
                  {rnd({3}, 0.2, 1)});
  check_gradients("relu", [](auto& x) { return relu(x[0]); },
                  {tensor::vec<double>({-0.7, 0.3, 1.2, -2.0})});
  check_gradients("sigmoid", [](auto& x) { return sigmoid(x[0]); },
                  {rnd({3})});
  check_gradients("tanh", [](auto& x) { return tanh(x[0]); }, {rnd({3})});
  check_gradients("pow [2,3]^[3]",
                  [](auto& x) { return pow(x[0], x[1]); },
                  {rnd({2, 3}, 0.5, 2), rnd({3}, -1.5, 1.5, 2)});
  check_gradients("pow with a scalar exponent",
                  [](auto& x) { return pow(x[0], x[1]); },
                  {rnd({4}, 0.5, 2), rnd({}, 0.5, 3, 2)});
  check_gradients("placeholder_with_default passes gradients through",
                  [](auto& x) {
                    return square(placeholder_with_default(x[0]));
                  },
                  {rnd({3})});
  check_gradients("select",
                  [](auto& x) {
                    return select(greater(x[0], x[1]), x[0], x[1]);
                  },
                  {rnd({4}), rnd({4}, -1, 1, 2)});
}

TEST_CASE("gradients: matmul in every transpose combination",
          "[gradients]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto a = ta ? rnd({3, 2}) : rnd({2, 3});
      auto b = tb ? rnd({4, 3}, -1, 1, 2) : rnd({3, 4}, -1, 1, 2);
      check_gradients("matmul " + std::to_string(ta) + std::to_string(tb),
                      [ta, tb](auto& x) { return matmul(x[0], x[1], ta, tb); },
                      {a, b});
    }
}

TEST_CASE("gradients: reductions and shapes", "[gradients]") {
  check_gradients("sum all", [](auto& x) { return reduce_sum(x[0]); },
                  {rnd({2, 3})});
  check_gradients("sum axis 1",
                  [](auto& x) { return reduce_sum(x[0], std::vector<int>{1}); },
                  {rnd({2, 3})});
  check_gradients("sum axis 0 keep_dims",
                  [](auto& x) {
                    return reduce_sum(x[0], std::vector<int>{0}, true);
                  },
                  {rnd({2, 3})});
  check_gradients("mean axis -1",
                  [](auto& x) {
                    return reduce_mean(x[0], std::vector<int>{-1});
                  },
                  {rnd({2, 3})});
  check_gradients("max axis 1",
                  [](auto& x) { return reduce_max(x[0], std::vector<int>{1}); },
                  {tensor::from_vector<double>({1, 5, 2, 7, 3, 4},
                                               shp({2, 3}))});
  check_gradients("min axis 0",
                  [](auto& x) { return reduce_min(x[0], std::vector<int>{0}); },
                  {tensor::from_vector<double>({1, 5, 2, 7, 3, 4},
                                               shp({2, 3}))});
  check_gradients("logsumexp axis 1",
                  [](auto& x) {
                    return reduce_logsumexp(x[0], std::vector<int>{1});
                  },
                  {rnd({2, 3})});
  check_gradients("reshape",
                  [](auto& x) { return reshape(x[0], {3, 2}); },
                  {rnd({2, 3})});
  check_gradients("transpose",
                  [](auto& x) { return transpose(x[0]); }, {rnd({2, 3})});
  check_gradients("expand_dims and squeeze",
                  [](auto& x) { return squeeze(expand_dims(x[0], 1), {1}); },
                  {rnd({2, 3})});
  check_gradients("concat axis 1",
                  [](auto& x) { return concat({x[0], x[1]}, 1); },
                  {rnd({2, 3}), rnd({2, 2}, -1, 1, 2)});
  check_gradients("stack axis 1",
                  [](auto& x) { return stack({x[0], x[1]}, 1); },
                  {rnd({2, 3}), rnd({2, 3}, -1, 1, 2)});
  check_gradients("split, one part used twice",
                  [](auto& x) {
                    auto parts = split(x[0], 2, 1);
                    return mul(parts[0], parts[1]);
                  },
                  {rnd({2, 4})});
  check_gradients("cast there and back",
                  [](auto& x) {
                    return cast(mul(cast(x[0], dtype::float32),
                                    cast(x[0], dtype::float32)),
                                dtype::float64);
                  },
                  {rnd({3})}, {}, 1e-3);
}

TEST_CASE("gradients: losses and layers", "[gradients]") {
  check_gradients("softmax", [](auto& x) { return softmax(x[0]); },
                  {rnd({2, 4})});
  check_gradients("log_softmax", [](auto& x) { return log_softmax(x[0]); },
                  {rnd({2, 4})});
  auto labels = tensor::from_vector<double>({0.1, 0.2, 0.3, 0.4, 0.25, 0.25,
                                             0.25, 0.25},
                                            shp({2, 4}));
  check_gradients("softmax_cross_entropy_with_logits",
                  [](auto& x) {
                    return softmax_cross_entropy_with_logits(x[1], x[0]);
                  },
                  {rnd({2, 4}), labels});
  check_gradients("sparse_softmax_cross_entropy_with_logits",
                  [](auto& x) {
                    return sparse_softmax_cross_entropy_with_logits(x[1], x[0]);
                  },
                  {rnd({3, 4}), tensor::vec<int32_t>({2, 0, 3})},
                  {true, false});
  check_gradients("sigmoid_cross_entropy_with_logits",
                  [](auto& x) {
                    return sigmoid_cross_entropy_with_logits(x[1], x[0]);
                  },
                  {rnd({2, 3}, -3, 3), rnd({2, 3}, 0, 1, 2)}, {true, false});
  check_gradients("l2_loss", [](auto& x) { return l2_loss(x[0]); },
                  {rnd({2, 3})});
  check_gradients("bias_add",
                  [](auto& x) { return bias_add(x[0], x[1]); },
                  {rnd({2, 3}), rnd({3}, -1, 1, 2)});
  check_gradients("gather (embedding_lookup), a row twice",
                  [](auto& x) { return embedding_lookup(x[0], x[1]); },
                  {rnd({4, 3}), tensor::vec<int32_t>({2, 0, 2})},
                  {true, false});
  check_gradients("conv2d SAME, stride 1",
                  [](auto& x) {
                    return conv2d(x[0], x[1], {1, 1, 1, 1}, "SAME");
                  },
                  {rnd({1, 4, 4, 2}), rnd({3, 3, 2, 3}, -1, 1, 2)});
  check_gradients("conv2d VALID, stride 2",
                  [](auto& x) {
                    return conv2d(x[0], x[1], {1, 2, 2, 1}, "VALID");
                  },
                  {rnd({2, 5, 5, 1}), rnd({2, 2, 1, 2}, -1, 1, 2)});
  check_gradients("max_pool 2x2",
                  [](auto& x) {
                    return max_pool(x[0], {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
                  },
                  {rnd({1, 4, 4, 2})});
}

TEST_CASE("gradients: graph rules", "[gradients]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float64, tensor_shape{2}, "x");
  auto z = placeholder(dtype::float64, tensor_shape{2}, "z");
  auto y = reduce_sum(mul(x, x));
  // An x that y does not depend on gets no gradient (TF's None).
  auto grads = gradients({y}, {x, z});
  CHECK(grads[0].valid());
  CHECK_FALSE(grads[1].valid());
  // The gradient subgraph lives under "gradients/".
  CHECK(grads[0].name().rfind("gradients/", 0) == 0);
  auto again = gradients({y}, {x});
  CHECK(again[0].name().rfind("gradients_1/", 0) == 0);
  // grad_ys weights y.
  session sess{bounded(), &g};
  auto weighted = gradients({y}, {x}, {constant(3.0)})[0];
  auto out = sess.run(weighted, {{x, tensor::vec<double>({1, 2})}});
  CHECK(out.flat<double>()[0] == 6.0);
  CHECK(out.flat<double>()[1] == 12.0);
  // Pow's gradient for the exponent is 0 where the base is not positive
  // (not NaN from log), as TF's _PowGrad.
  auto base = constant(tensor::vec<double>({-2, 0, 3}));
  auto exponent = placeholder(dtype::float64, tensor_shape{3}, "exponent");
  auto gy = gradients({reduce_sum(pow(base, exponent))}, {exponent})[0];
  auto gys = sess.run(gy, {{exponent, tensor::vec<double>({2, 2, 2})}});
  CHECK(gys.flat<double>()[0] == 0.0);
  CHECK(gys.flat<double>()[1] == 0.0);
  CHECK(gys.flat<double>()[2] == Approx(9 * std::log(3.0)));
  // Floor has no gradient (TF's None), nor does what only flows through it.
  CHECK_FALSE(gradients({floor(x)}, {x})[0].valid());
  // ArgMax has no gradient: nothing flows through it.
  auto q = cast(argmax(reshape(x, {1, 2}), 1), dtype::float64);
  CHECK_FALSE(gradients({q}, {x})[0].valid());
  // An op with no registered gradient on the path is an error naming it;
  // registering one (or declaring it not differentiable) settles it.
  node_def my;
  my.name = "my_op";
  my.op = "MyTestOp";
  auto m = g.add_node(my, {x}, {dtype::float64}, {tensor_shape{2}}).out(0);
  auto missing = error_of([&] { gradients({m}, {x}); });
  REQUIRE(missing);
  CHECK(missing->code() == error_code::invalid_argument);
  CHECK_THAT(missing->get_status().message(),
             Catch::Contains("No gradient defined for operation 'my_op' (op "
                             "type: MyTestOp)"));
  register_gradient("MyTestOp", [](const operation&, const std::vector<output>& gs) {
    return std::vector<output>{mul(gs[0], constant(5.0))};
  });
  // grad_ys given: running the gradient needs no kernel for MyTestOp.
  auto custom = gradients({m}, {x}, {constant(tensor::vec<double>({1, 1}))})[0];
  REQUIRE(custom.valid());
  auto five = sess.run(custom, {{x, tensor::vec<double>({1, 2})}});
  CHECK(five.flat<double>()[0] == 5.0);
  not_differentiable("MyTestOp");
  CHECK_FALSE(gradients({m}, {x})[0].valid());
  auto wrong = error_of([&] { gradients({y}, {x}, {constant(1.0f)}); });
  REQUIRE(wrong);
  CHECK(wrong->code() == error_code::invalid_argument);
}
