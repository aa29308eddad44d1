// Optimizers end to end: each update against TF's formulas computed here,
// the global step, names and slots, convergence, and updates applied on
// the ps task for a worker's session.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/training.hpp"
#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/device_setter.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "actorflow/client/sync_replicas_hook.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

std::vector<double> values_of(const tensor& t) {
  std::vector<double> xs;
  for (auto x : t.flat<float>())
    xs.push_back(x);
  return xs;
}

void check_close(const std::vector<double>& got,
                 const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}

/// Runs `steps` updates of loss = sum(w^2) from w = [1, -2, 0.5] and
/// returns w after each.
std::vector<std::vector<double>> train(optimizer& opt, int steps) {
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, -2.0f, 0.5f}), named("w")};
  auto step = create_global_step();
  auto train_op = opt.minimize(reduce_sum(square(w)), &step);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  std::vector<std::vector<double>> result;
  for (int i = 0; i < steps; ++i) {
    sess.run(train_op);
    result.push_back(values_of(sess.run(w)));
  }
  CHECK(sess.run(step).scalar_value<int64_t>() == steps);
  return result;
}

/// TF's Adam (beta1 0.9, beta2 0.999, epsilon 1e-8) on loss = sum(w^2),
/// in double: what the variable should read after each step().
struct adam_reference {
  adam_reference(std::vector<double> w0, double lr)
    : w(std::move(w0)), m(w.size(), 0.0), v(w.size(), 0.0), lr(lr) {
    // nop
  }

  void step() {
    auto lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (size_t i = 0; i < w.size(); ++i) {
      auto g = 2 * w[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-8);
    }
    b1p *= 0.9;
    b2p *= 0.999;
  }

  std::vector<double> w;
  std::vector<double> m;
  std::vector<double> v;
  double lr;
  double b1p = 0.9;
  double b2p = 0.999;
};

// One ps and one worker on free loopback ports, both served here.
struct ps_and_worker {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}}, {"worker", {loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server worker{cluster, "worker", 0};
  /// The test's graph, the default one while the fixture lives.
  graph g;
  graph::default_guard as_default = g.as_default();
};

} // namespace

TEST_CASE("training: GradientDescent applies var -= lr * grad",
          "[training]") {
  gradient_descent_optimizer opt{0.1};
  auto ws = train(opt, 2);
  // grad = 2w: w * 0.8 per step.
  check_close(ws[0], {0.8, -1.6, 0.4});
  check_close(ws[1], {0.64, -1.28, 0.32});
}

TEST_CASE("training: exponential_decay follows TF's formula, staircase "
          "or not",
          "[training]") {
  graph g;
  auto as_default = g.as_default();
  auto step = create_global_step();
  auto smooth = exponential_decay(0.05, step, 10, 0.96);
  auto stairs = exponential_decay(0.05, step, 10, 0.96, true);
  CHECK(smooth.type() == dtype::float32);
  CHECK(smooth.name().rfind("ExponentialDecay/", 0) == 0);
  auto new_step = placeholder(dtype::int64, tensor_shape{}, "new_step");
  auto set_step = step.assign(new_step);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  for (int64_t at : {0, 5, 10, 25, 1000}) {
    INFO("global step " << at);
    sess.run(set_step, {{new_step, tensor::scalar(at)}});
    auto out = sess.run({smooth, stairs});
    CHECK(out[0].scalar_value<float>()
          == Approx(0.05 * std::pow(0.96, at / 10.0)).epsilon(1e-5));
    CHECK(out[1].scalar_value<float>()
          == Approx(0.05 * std::pow(0.96, static_cast<double>(at / 10)))
               .epsilon(1e-5));
  }
  for (int64_t bad : {0, -3}) {
    auto err = error_of([&] { exponential_decay(0.1, step, bad, 0.5); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(), Catch::Contains("decay_steps"));
  }
  CHECK(error_of([&] { exponential_decay(0.1, variable{}, 10, 0.5); }));
}

TEST_CASE("training: an optimizer's learning rate may be a tensor, read at "
          "each update",
          "[training]") {
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<double>({1.0, -2.0}), named("w")};
  auto step = create_global_step();
  // 0.1, halved after every step; cast to w's float64 for the update.
  gradient_descent_optimizer opt{exponential_decay(0.1, step, 1, 0.5, true)};
  auto train_op = opt.minimize(reduce_sum(square(w)), &step);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  std::vector<double> want{1.0, -2.0};
  double lr = 0.1;
  for (int i = 0; i < 3; ++i) {
    sess.run(train_op);
    for (auto& x : want)
      x -= lr * 2 * x;
    lr /= 2;
    auto got = sess.run(w.value()).flat<double>();
    CHECK(got[0] == Approx(want[0]));
    CHECK(got[1] == Approx(want[1]));
  }
  // Adam and Momentum take one as well; a rate that is not a scalar is
  // refused when the update is built.
  auto rate = placeholder(dtype::float32, tensor_shape{2}, "rate");
  adam_optimizer adam{rate};
  auto err = error_of([&] { adam.minimize(reduce_sum(square(w))); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(), Catch::Contains("must be a scalar"));
  auto scalar_rate = placeholder(dtype::float32, tensor_shape{}, "rate");
  momentum_optimizer momentum{scalar_rate, 0.9};
  auto m_op = momentum.minimize(reduce_sum(square(w)));
  sess.run(global_variables_initializer());
  sess.run(m_op, {{scalar_rate, tensor::scalar(0.0f)}});
  CHECK(sess.run(w.value()).flat<double>()[0] == 1.0);
}

TEST_CASE("training: Momentum and Nesterov follow TF's updates",
          "[training]") {
  for (bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    momentum_optimizer opt{0.1, 0.9, nesterov};
    auto ws = train(opt, 3);
    std::vector<double> w{1.0, -2.0, 0.5};
    std::vector<double> accum(3, 0.0);
    for (int s = 0; s < 3; ++s) {
      for (size_t i = 0; i < 3; ++i) {
        auto g = 2 * w[i];
        accum[i] = accum[i] * 0.9 + g;
        w[i] -= nesterov ? 0.1 * (g + 0.9 * accum[i]) : 0.1 * accum[i];
      }
      check_close(ws[static_cast<size_t>(s)], w);
    }
  }
}

TEST_CASE("training: Adagrad follows TF's update", "[training]") {
  adagrad_optimizer opt{0.5, 0.1};
  auto ws = train(opt, 3);
  std::vector<double> w{1.0, -2.0, 0.5};
  std::vector<double> accum(3, 0.1);
  for (int s = 0; s < 3; ++s) {
    for (size_t i = 0; i < 3; ++i) {
      auto g = 2 * w[i];
      accum[i] += g * g;
      w[i] -= 0.5 * g / std::sqrt(accum[i]);
    }
    check_close(ws[static_cast<size_t>(s)], w);
  }
}

TEST_CASE("training: Adam follows TF's update with bias correction",
          "[training]") {
  adam_optimizer opt{0.1};
  auto ws = train(opt, 3);
  adam_reference want{{1.0, -2.0, 0.5}, 0.1};
  for (int s = 0; s < 3; ++s) {
    want.step();
    check_close(ws[static_cast<size_t>(s)], want.w, 1e-4);
  }
}

TEST_CASE("training: Adam on a variable large enough for its slots to "
          "update at once follows TF's update",
          "[training]") {
  // 2^21 elements: the executor updates Adam's two slots in parallel from
  // this size on (actors/src/executor.cpp), one after the other below it.
  constexpr int64_t n = int64_t{1} << 21;
  graph g;
  auto as_default = g.as_default();
  tensor init{dtype::float32, tensor_shape{n}};
  auto w0 = init.flat<float>();
  for (int64_t i = 0; i < n; ++i)
    w0[static_cast<size_t>(i)] = static_cast<float>(i % 7 - 3) * 0.25f;
  adam_reference want{{w0.begin(), w0.end()}, 0.1};
  auto& w = want.w;
  variable var{init, named("w")};
  adam_optimizer opt{0.1};
  auto train_op = opt.minimize(reduce_sum(square(var)));
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  for (int s = 0; s < 2; ++s) {
    sess.run(train_op);
    want.step();
    auto got = sess.run(var).flat<float>();
    REQUIRE(got.size() == w.size());
    double worst = 0;
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - w[i])
                                / std::max(1.0, std::abs(w[i])));
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("training: names, slots and the global step as TF builds them",
          "[training]") {
  graph g;
  auto as_default = g.as_default();
  variable w{tensor::vec<float>({1.0f, 2.0f}), named("w")};
  variable b{0.0f, named("b")};
  auto step = create_global_step();
  CHECK(step.name() == "global_step:0");
  CHECK(step.type() == dtype::int64);
  CHECK_FALSE(step.trainable());
  CHECK(get_global_step().name() == "global_step:0");
  auto again = error_of([] { create_global_step(); });
  REQUIRE(again);
  CHECK(again->code() == error_code::invalid_argument);
  momentum_optimizer opt{0.1, 0.9};
  auto train_op = opt.minimize(add(reduce_sum(square(w)), square(b)), &step);
  CHECK(train_op.name() == "Momentum");
  CHECK(train_op.type() == "AssignAdd");
  CHECK(g.find_operation("Momentum/update_w/ApplyMomentum").valid());
  auto slot = opt.get_slot(w, "momentum");
  REQUIRE(slot.valid());
  CHECK(slot.name() == "w/Momentum:0");
  CHECK_FALSE(slot.trainable());
  CHECK(slot.shape() == tensor_shape{2});
  // Slots are global variables (initialized and saved with the model) but
  // never trained themselves.
  auto globals = global_variables();
  CHECK(globals.size() == 5); // w, b, global_step, two slots
  CHECK(trainable_variables().size() == 2);
  adam_optimizer adam;
  adam.minimize(reduce_sum(w.value()), nullptr, {w});
  CHECK(adam.get_slot(w, "m").name() == "w/Adam:0");
  CHECK(adam.get_slot(w, "v").name() == "w/Adam_1:0");
  CHECK(g.find_operation("beta1_power").valid());
  // No gradient for any variable is an error naming them.
  auto x = placeholder(dtype::float32, tensor_shape{}, "x");
  gradient_descent_optimizer gd{0.1};
  auto none = error_of([&] { gd.minimize(square(x), nullptr, {w}); });
  REQUIRE(none);
  CHECK_THAT(none->get_status().message(),
             Catch::Contains("No gradients provided for any variable"));
}

TEST_CASE("training: softmax regression learns a separable problem",
          "[training]") {
  graph g;
  auto as_default = g.as_default();
  // Two features, three classes: the class is the quadrant-ish region.
  std::vector<float> xs;
  std::vector<int32_t> ys;
  for (int i = 0; i < 60; ++i) {
    float a = static_cast<float>(i % 10) / 10.0f;
    float b = static_cast<float>(i / 10) / 6.0f;
    xs.push_back(a);
    xs.push_back(b);
    ys.push_back(a + b < 0.6f ? 0 : (a > b ? 1 : 2));
  }
  auto x = constant(tensor::from_vector(xs, tensor_shape{60, 2}));
  auto y = constant(tensor::vec(ys));
  variable w{tensor{dtype::float32, tensor_shape{2, 3}}, named("w")};
  variable b{tensor{dtype::float32, tensor_shape{3}}, named("b")};
  auto logits = bias_add(matmul(x, w), b);
  auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(y, logits));
  auto correct = equal(argmax(logits, 1), cast(y, dtype::int64));
  auto accuracy = reduce_mean(cast(correct, dtype::float32));
  adam_optimizer opt{0.1};
  auto train_op = opt.minimize(loss);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  auto before = sess.run(loss).scalar_value<float>();
  for (int i = 0; i < 300; ++i)
    sess.run(train_op);
  auto after = sess.run(loss).scalar_value<float>();
  CHECK(after < before * 0.5f);
  CHECK(sess.run(accuracy).scalar_value<float>() >= 0.9f);
}

TEST_CASE("training: a worker's updates run on the ps task's variables",
          "[training]") {
  ps_and_worker tasks;
  auto& cluster = tasks.cluster;
  auto& g = tasks.g;
  operation train_op;
  variable w;
  {
    device_scope setter{replica_device_setter(cluster)};
    w = variable{tensor::vec<float>({1.0f, -2.0f}), named("w")};
    auto step = create_global_step();
    momentum_optimizer opt{0.1, 0.9};
    train_op = opt.minimize(reduce_sum(square(w)), &step);
    auto slot = opt.get_slot(w, "momentum");
    CHECK(slot.op().device() == "/job:ps/task:0");
  }
  CHECK(w.op().device() == "/job:ps/task:0");
  CHECK(g.find_operation("Momentum/update_w/ApplyMomentum").device()
        == "/job:ps/task:0");
  session on_worker{tasks.worker.target(), bounded(), &g};
  on_worker.run(global_variables_initializer());
  on_worker.run(train_op);
  on_worker.run(train_op);
  // A session on the ps sees the updated variable: it lives there.
  session on_ps{tasks.ps.target(), bounded(), &g};
  // accum1 = 2w0, w1 = 0.8 w0; accum2 = 0.9 * 2w0 + 1.6 w0 = 3.4 w0,
  // w2 = 0.8 w0 - 0.34 w0 = 0.46 w0.
  check_close(values_of(on_ps.run(w)), {0.46, -0.92});
  CHECK(on_ps.run(get_global_step()).scalar_value<int64_t>() == 2);
}

TEST_CASE("training: the ps starts the reads it sends to a worker before "
          "the optimizer's constants, the first layer's first",
          "[training]") {
  ps_and_worker tasks;
  auto& cluster = tasks.cluster;
  auto& g = tasks.g;
  operation train_op;
  {
    device_scope setter{replica_device_setter(cluster)};
    auto w1 = variable{tensor::vec<float>({1.0f, -2.0f}), named("w1")};
    auto w2 = variable{tensor::vec<float>({0.5f, 0.5f}), named("w2")};
    auto step = create_global_step();
    adam_optimizer opt{0.01};
    train_op = opt.minimize(reduce_sum(square(w1 * w2)), &step);
  }
  session sess{tasks.worker.target(), bounded(), &g};
  sess.run(global_variables_initializer());
  // The first step looks the variables up; the order shows from then on.
  sess.run(train_op);
  run_options traced;
  traced.trace_level = run_options::full_trace;
  run_metadata md;
  sess.run(std::vector<fetch>{train_op}, {}, traced, &md);
  REQUIRE(md.has_step_stats);
  std::vector<std::string> order;
  for (auto& dev : md.stats.dev_stats)
    if (dev.device.rfind("/job:ps/", 0) == 0)
      for (auto& n : dev.node_stats)
        order.push_back(n.node_name);
  auto pos = [&](const std::string& name) {
    auto i = std::find(order.begin(), order.end(), name);
    INFO(name << " in the ps's trace");
    REQUIRE(i != order.end());
    return i - order.begin();
  };
  // Both values go to the worker's gradient computation: their reads come
  // before Adam's hyperparameters, which only the updates at the end need.
  CHECK(pos("w1/read") < pos("w2/read"));
  CHECK(pos("w2/read") < pos("Adam/update_w1/learning_rate"));
  CHECK(pos("w2/read") < pos("Adam/update_w2/beta1"));
}

namespace {

struct pipelined_run {
  /// The first layer's weights after the steps, the loss before them and
  /// the last step's.
  std::vector<double> w;
  double first_loss = 0;
  double loss = 0;
  /// Names of the nodes the last (traced) step ran, by job.
  std::vector<std::string> on_ps;
  std::vector<std::string> on_worker;
};

/// Three steps of a ReLU layer x [64, 784] -> [64, 256] whose weights
/// (784 KiB) live on the ps, trained from the worker with `opt`; the
/// first layer's weights travel to the worker and its gradient back.
pipelined_run train_large_layer(bool pipelined, bool adam) {
  ps_and_worker tasks;
  output loss;
  operation train_op;
  variable w;
  output x;
  {
    device_scope setter{replica_device_setter(tasks.cluster)};
    w = variable{random_uniform({784, 256}, -0.05, 0.05, dtype::float32, 11),
                 named("w")};
    x = placeholder(dtype::float32, tensor_shape{-1, 784}, "x");
    loss = reduce_mean(square(relu(matmul(x, w)) - 0.5f));
    auto step = create_global_step();
    if (adam) {
      adam_optimizer opt{0.001};
      train_op = opt.minimize(loss, &step);
    } else {
      gradient_descent_optimizer opt{0.5};
      train_op = opt.minimize(loss, &step);
    }
  }
  std::vector<float> xs(64 * 784);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f;
  auto batch = tensor::from_vector(xs, tensor_shape{64, 784});
  auto config = bounded();
  config.matmul_pipelining = pipelined;
  session sess{tasks.worker.target(), config, &tasks.g};
  sess.run(global_variables_initializer());
  pipelined_run result;
  result.first_loss = sess.run(loss, {{x, batch}}).scalar_value<float>();
  for (int i = 0; i < 2; ++i)
    sess.run(std::vector<fetch>{train_op}, {{x, batch}});
  run_options traced;
  traced.trace_level = run_options::full_trace;
  run_metadata md;
  result.loss = sess
                  .run(std::vector<fetch>{loss, train_op}, {{x, batch}},
                       traced, &md)
                  .at(0)
                  .scalar_value<float>();
  result.w = values_of(sess.run(w));
  for (auto& dev : md.stats.dev_stats)
    for (auto& n : dev.node_stats)
      (dev.device.rfind("/job:ps/", 0) == 0 ? result.on_ps : result.on_worker)
        .push_back(n.node_name);
  return result;
}

size_t count_containing(const std::vector<std::string>& names,
                        const std::string& part) {
  return static_cast<size_t>(
    std::count_if(names.begin(), names.end(), [&](const std::string& n) {
      return n.find(part) != std::string::npos;
    }));
}

size_t count_ending(const std::vector<std::string>& names,
                    const std::string& tail) {
  return static_cast<size_t>(
    std::count_if(names.begin(), names.end(), [&](const std::string& n) {
      return n.size() >= tail.size()
             && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
    }));
}

} // namespace

TEST_CASE("training: a large layer's weights and gradient cross between "
          "tasks in row blocks, with the values of whole tensors",
          "[training][matmul_pipelining]") {
  for (bool adam : {false, true}) {
    INFO((adam ? "Adam" : "GradientDescent"));
    auto whole = train_large_layer(false, adam);
    auto blocks = train_large_layer(true, adam);
    // Off: no block ran anywhere.
    CHECK(count_containing(whole.on_ps, "/_pipelined/") == 0);
    CHECK(count_containing(whole.on_worker, "/_pipelined/") == 0);
    // On: the worker multiplied 4 blocks of the weights, then 4 blocks of
    // the gradient, and the ps applied the gradient's 4 blocks.
    CHECK(count_containing(blocks.on_worker, "MatMul/_pipelined/matmul_")
          == 4);
    CHECK(count_containing(blocks.on_worker,
                           "MatMul_grad/MatMul_1/_pipelined/matmul_")
          == 4);
    CHECK(count_containing(blocks.on_ps, "/_pipelined/rows_") == 4);
    CHECK(count_ending(blocks.on_ps, "/_pipelined/split_b") == 1);
    // The same training, up to the order of float additions.
    CHECK(blocks.loss == Approx(whole.loss).epsilon(1e-5));
    check_close(blocks.w, whole.w, 1e-5);
    // And it did train.
    CHECK(blocks.first_loss == Approx(whole.first_loss).epsilon(1e-5));
    CHECK(whole.loss < 0.9 * whole.first_loss);
  }
}

TEST_CASE("training: synchronous replicas average both workers' gradients "
          "per step",
          "[training][sync]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}},
    {"worker", {loopback(free_port()), loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  server w1{cluster, "worker", 1};
  // Between-graph replication: each worker builds its own graph.
  struct replica {
    graph g;
    output target;
    variable w;
    variable step;
    operation train_op;
    std::unique_ptr<gradient_descent_optimizer> opt;
    std::unique_ptr<sync_replicas_optimizer> sync;
  };
  std::vector<std::unique_ptr<replica>> replicas;
  for (int task = 0; task < 2; ++task) {
    auto r = std::make_unique<replica>();
    auto as_default = r->g.as_default();
    replica_device_setter_options o;
    o.worker_device = "/job:worker/task:" + std::to_string(task);
    device_scope setter{replica_device_setter(cluster, o)};
    r->w = variable{tensor::vec<float>({0.0f, 0.0f}), named("w")};
    r->step = create_global_step();
    r->target = placeholder(dtype::float32, tensor_shape{2}, "target");
    auto loss = reduce_sum(square(sub(r->w.value(), r->target)));
    r->opt = std::make_unique<gradient_descent_optimizer>(0.25);
    r->sync = std::make_unique<sync_replicas_optimizer>(*r->opt, 2);
    r->train_op = r->sync->minimize(loss, r->step);
    replicas.push_back(std::move(r));
  }
  auto& chief = *replicas[0];
  session chief_sess{w0.target(), bounded(), &chief.g};
  session other_sess{w1.target(), bounded(), &replicas[1]->g};
  operation init;
  operation chief_local;
  operation other_local;
  {
    auto d = chief.g.as_default();
    init = global_variables_initializer();
    chief_local = local_variables_initializer();
  }
  {
    auto d = replicas[1]->g.as_default();
    other_local = local_variables_initializer();
  }
  // No initial tokens: every worker's step ends with the update of that
  // step, so the replicas run in lockstep and the result is exact.
  auto init_tokens = chief.sync->get_init_tokens_op(0);
  chief_sess.run(init);
  chief_sess.run(chief_local);
  other_sess.run(other_local);
  chief_sess.run(chief.sync->local_step_init_op());
  other_sess.run(replicas[1]->sync->local_step_init_op());
  chief_sess.run(chief.sync->chief_init_op());
  chief_sess.run(init_tokens);
  coordinator coord;
  queue_runner chief_runner{chief.g, chief.sync->chief_queue_runner()};
  chief_runner.create_threads(chief_sess, &coord);
  // Worker 0 pulls w towards [2, 2], worker 1 towards [4, 0]; each step
  // applies the mean gradient: w -= 0.25 * 2 * (w - [3, 1]). The rounds are
  // driven in lockstep: a replica that ran ahead could take the other's
  // token (as in TF), which makes the values depend on timing.
  const int steps = 3;
  for (int i = 0; i < steps; ++i) {
    auto other = std::async(std::launch::async, [&] {
      auto& r = *replicas[1];
      other_sess.run(r.train_op, {{r.target, tensor::vec<float>({4, 0})}});
    });
    chief_sess.run(chief.train_op,
                   {{chief.target, tensor::vec<float>({2, 2})}});
    REQUIRE(other.wait_for(std::chrono::seconds(30))
            == std::future_status::ready);
    other.get();
  }
  // Each step halves the distance to [3, 1]: 1 - 0.5^3 of the way there.
  auto w = chief_sess.run(chief.w);
  CHECK(std::abs(w.flat<float>()[0] - 3.0f * 0.875f) < 1e-5f);
  CHECK(std::abs(w.flat<float>()[1] - 1.0f * 0.875f) < 1e-5f);
  CHECK(chief_sess.run(chief.step).scalar_value<int64_t>() == steps);
  // The chief's thread waits in take_grad; closing its session ends it.
  coord.request_stop();
  chief_sess.close();
  CHECK_NOTHROW(coord.join(std::chrono::seconds(10)));
}

TEST_CASE("training: synchronous replicas over two ps tasks (each "
          "accumulator op sits with its accumulator)",
          "[training][sync]") {
  // The global step on ps:0, w on ps:1: the chief's init ops are built
  // beside the global step, and each must still run where its
  // accumulator is (this failed placement with "Cannot colocate nodes").
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port()), loopback(free_port())}},
    {"worker", {loopback(free_port())}}}};
  server ps0{cluster, "ps", 0};
  server ps1{cluster, "ps", 1};
  server w0{cluster, "worker", 0};
  graph g;
  operation train_op;
  variable w;
  variable step;
  std::unique_ptr<gradient_descent_optimizer> opt;
  std::unique_ptr<sync_replicas_optimizer> sync;
  output target;
  {
    auto as_default = g.as_default();
    replica_device_setter_options o;
    o.worker_device = "/job:worker/task:0";
    device_scope setter{replica_device_setter(cluster, o)};
    step = create_global_step();
    w = variable{tensor::vec<float>({0.0f, 0.0f}), named("w")};
    target = placeholder(dtype::float32, tensor_shape{2}, "target");
    auto loss = reduce_sum(square(sub(w.value(), target)));
    opt = std::make_unique<gradient_descent_optimizer>(0.25);
    sync = std::make_unique<sync_replicas_optimizer>(*opt, 1);
    train_op = sync->minimize(loss, step);
  }
  CHECK(step.op().device().find("/job:ps/task:0") != std::string::npos);
  CHECK(w.op().device().find("/job:ps/task:1") != std::string::npos);
  session sess{w0.target(), bounded(), &g};
  operation init;
  operation local;
  {
    auto d = g.as_default();
    init = global_variables_initializer();
    local = local_variables_initializer();
  }
  auto init_tokens = sync->get_init_tokens_op(0);
  sess.run(init);
  sess.run(local);
  sess.run(sync->local_step_init_op());
  sess.run(sync->chief_init_op());
  sess.run(init_tokens);
  coordinator coord;
  queue_runner chief_runner{g, sync->chief_queue_runner()};
  chief_runner.create_threads(sess, &coord);
  for (int i = 0; i < 3; ++i)
    sess.run(train_op, {{target, tensor::vec<float>({2, 2})}});
  // Each step halves the distance to [2, 2].
  auto value = sess.run(w);
  CHECK(std::abs(value.flat<float>()[0] - 2.0f * 0.875f) < 1e-5f);
  CHECK(sess.run(step).scalar_value<int64_t>() == 3);
  coord.request_stop();
  sess.close();
  CHECK_NOTHROW(coord.join(std::chrono::seconds(10)));
}

TEST_CASE("training: the accumulators name the replica a synchronous update "
          "waits for",
          "[training][sync]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}},
    {"worker", {loopback(free_port()), loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  server w1{cluster, "worker", 1};
  struct replica {
    graph g;
    output target;
    variable w;
    variable b;
    variable step;
    operation train_op;
    operation push_w_only;
    std::unique_ptr<gradient_descent_optimizer> opt;
    std::unique_ptr<sync_replicas_optimizer> sync;
  };
  std::vector<std::unique_ptr<replica>> replicas;
  for (int task = 0; task < 2; ++task) {
    auto r = std::make_unique<replica>();
    auto as_default = r->g.as_default();
    replica_device_setter_options o;
    o.worker_device = "/job:worker/task:" + std::to_string(task);
    device_scope setter{replica_device_setter(cluster, o)};
    r->w = variable{tensor::vec<float>({0.0f, 0.0f}), named("w")};
    r->step = create_global_step();
    r->b = variable{0.0f, named("b")};
    r->target = placeholder(dtype::float32, tensor_shape{2}, "target");
    auto loss = add(reduce_sum(square(sub(r->w.value(), r->target))),
                    square(r->b.value()));
    r->opt = std::make_unique<gradient_descent_optimizer>(0.25);
    r->sync = std::make_unique<sync_replicas_optimizer>(*r->opt, 2);
    r->train_op = r->sync->minimize(loss, r->step);
    if (task == 1) {
      // A step that stopped between its pushes: w's gradient for local
      // step 2 reached its accumulator, b's did not.
      auto w_acc = [] {
        device_scope on_ps{"/job:ps/task:0"};
        return conditional_accumulator{dtype::float32, tensor_shape{2},
                                       "w/grad_accum"};
      }();
      r->push_w_only
        = w_acc.apply_grad(constant(tensor::vec<float>({1, 1})),
                           constant(tensor::scalar(int64_t{2})));
    }
    replicas.push_back(std::move(r));
  }
  auto& chief = *replicas[0];
  auto& other = *replicas[1];
  REQUIRE(chief.sync->accumulator_replicas().size() == 2);
  session chief_sess{w0.target(), bounded(), &chief.g};
  session other_sess{w1.target(), bounded(), &other.g};
  {
    auto d = chief.g.as_default();
    chief_sess.run(global_variables_initializer());
    chief_sess.run(local_variables_initializer());
  }
  {
    auto d = other.g.as_default();
    other_sess.run(local_variables_initializer());
  }
  chief_sess.run(chief.sync->local_step_init_op());
  other_sess.run(other.sync->local_step_init_op());
  chief_sess.run(chief.sync->chief_init_op());
  auto init_tokens = chief.sync->get_init_tokens_op(0);
  chief_sess.run(init_tokens);
  coordinator coord;
  queue_runner chief_runner{chief.g, chief.sync->chief_queue_runner()};
  chief_runner.create_threads(chief_sess, &coord);
  const std::string t0 = "/job:worker/replica:0/task:0";
  const std::string t1 = "/job:worker/replica:0/task:1";
  auto step = [&](replica& r, session& sess) {
    return std::async(std::launch::async, [&] {
      sess.run(r.train_op, {{r.target, tensor::vec<float>({1, 1})}});
    });
  };
  // Both steps of a round end (bounded), and the global step is `global`.
  auto round_ends = [&](std::future<void>& a, std::future<void>& b,
                        int64_t global) {
    REQUIRE(a.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    REQUIRE(b.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    a.get();
    b.get();
    CHECK(chief_sess.run(chief.step).scalar_value<int64_t>() == global);
  };
  // What the update waits for, polled until it says `needle` (bounded:
  // the gradients reach the accumulators asynchronously).
  auto waiting_for = [&](const std::string& needle) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string why;
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      why = sync_replicas_waiting_for(chief_sess, *chief.sync, {t0, t1});
    } while (why.find(needle) == std::string::npos
             && std::chrono::steady_clock::now() < deadline);
    return why;
  };
  // Before any gradient: nobody has sent.
  CHECK(sync_replicas_waiting_for(chief_sess, *chief.sync, {t0, t1})
        == "waiting for gradients from (" + t0 + ": none received) and ("
             + t1 + ": none received); the update at global step 0 has 0 "
             "of 2 gradients");
  // One round with both: the update of step 0.
  {
    auto a = step(chief, chief_sess);
    auto b = step(other, other_sess);
    round_ends(a, b, 1);
  }
  // Only the chief sends for step 1; its step waits for the update, the
  // update for worker 1.
  auto pending = step(chief, chief_sess);
  const std::string prefix = "waiting for gradients from " + t1 + ": none for ";
  auto why = waiting_for(prefix);
  INFO(why);
  CHECK(why.rfind(prefix, 0) == 0);
  CHECK_THAT(why, Catch::EndsWith(" s (its last for global step 0); the "
                                  "update at global step 1 has 1 of 2 "
                                  "gradients"));
  // A replica the accumulators never heard of.
  const std::string t2 = "/job:worker/replica:0/task:2";
  CHECK_THAT(sync_replicas_waiting_for(chief_sess, *chief.sync, {t0, t1, t2}),
             Catch::Contains("(" + t2 + ": none received)"));
  CHECK(pending.wait_for(std::chrono::milliseconds(0))
        == std::future_status::timeout);
  // Worker 1 sends: the update comes, and nothing is missing but the next
  // round's gradients.
  auto late = step(other, other_sess);
  round_ends(pending, late, 2);
  // Only the replicas asked about count: with none of the waiting ones
  // named, the wait is not theirs.
  CHECK(sync_replicas_waiting_for(chief_sess, *chief.sync, {}).empty());
  // Worker 1 stops between its pushes: w's update is taken (its
  // accumulator a step ahead, with nobody's gradient yet), b's waits for
  // worker 1 alone. The chief, which sent both, is not named.
  pending = step(chief, chief_sess);
  other_sess.run(other.push_w_only);
  auto partial = waiting_for("has 1 of 2");
  INFO(partial);
  CHECK(partial.rfind(prefix, 0) == 0);
  CHECK_THAT(partial, Catch::EndsWith(" s (its last for global step 1); the "
                                      "update at global step 2 has 1 of 2 "
                                      "gradients"));
  // Its whole step then: w's gradient is stale (dropped), b's completes
  // the update.
  late = step(other, other_sess);
  round_ends(pending, late, 3);
  coord.request_stop();
  chief_sess.close();
  CHECK_NOTHROW(coord.join(std::chrono::seconds(10)));
}

TEST_CASE("training: in-graph replication, a tower per worker, averaged "
          "gradients",
          "[training]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}},
    {"worker", {loopback(free_port()), loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  server w1{cluster, "worker", 1};
  graph g;
  auto as_default = g.as_default();
  variable w;
  {
    device_scope on_ps{"/job:ps/task:0"};
    w = variable{tensor::vec<float>({1.0f, -1.0f}), named("w")};
  }
  // One client: tower i on worker i, each with half of the batch.
  std::vector<output> xs;
  grads_and_vars towers;
  gradient_descent_optimizer opt{0.5};
  std::vector<output> tower_grads;
  for (int i = 0; i < 2; ++i) {
    device_scope on_worker{"/job:worker/task:" + std::to_string(i)};
    name_scope tower{"tower_" + std::to_string(i)};
    auto x = placeholder(dtype::float32, tensor_shape{{-1, 2}}, "x");
    xs.push_back(x);
    auto pred = reduce_sum(mul(x, w.value()), std::vector<int>{1});
    auto loss = reduce_mean(square(pred));
    tower_grads.push_back(opt.compute_gradients(loss, {w}).front().first);
  }
  auto mean_grad = mul(add_n(tower_grads), constant(0.5f));
  auto train_op = opt.apply_gradients({{mean_grad, w}});
  CHECK(tower_grads[0].device() == "/job:worker/task:0");
  CHECK(tower_grads[1].device() == "/job:worker/task:1");
  session sess{w0.target(), bounded(), &g};
  sess.run(global_variables_initializer());
  auto a = tensor::from_vector<float>({1, 0, 0, 2}, tensor_shape{2, 2});
  auto b = tensor::from_vector<float>({1, 1, 2, 0}, tensor_shape{2, 2});
  sess.run(train_op, {{xs[0], a}, {xs[1], b}});
  // d/dw mean((x.w)^2) = 2 mean((x.w) x): tower 0 rows give x.w = 1, -2
  // -> (1*[1,0] + -2*[0,2]) = [1,-4]; tower 1: x.w = 0, 2 -> [4,0]; each
  // tower's gradient is 2/2 times its sum, the mean of the two is
  // [2.5, -2], and w -= 0.5 * that.
  auto v = sess.run(w);
  CHECK(std::abs(v.flat<float>()[0] - (1.0f - 1.25f)) < 1e-6f);
  CHECK(std::abs(v.flat<float>()[1] - (-1.0f + 1.0f)) < 1e-6f);
}

TEST_CASE("training: elastic synchronous replicas serve an update with fewer "
          "gradients once the replica count drops",
          "[training][sync][elastic]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}},
    {"worker", {loopback(free_port()), loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  graph g;
  auto as_default = g.as_default();
  replica_device_setter_options o;
  o.worker_device = "/job:worker/task:0";
  device_scope setter{replica_device_setter(cluster, o)};
  variable w{tensor::vec<float>({0.0f, 0.0f}), named("w")};
  auto step = create_global_step();
  auto target = placeholder(dtype::float32, tensor_shape{2}, "target");
  auto loss = reduce_sum(square(sub(w.value(), target)));
  gradient_descent_optimizer opt{0.25};
  sync_replicas_optimizer sync{opt, 2};
  // Not elastic yet: no replica count to set.
  CHECK_THROWS_AS(sync.set_replicas_op(), op_error);
  sync.set_elastic(true);
  auto train_op = sync.minimize(loss, step);
  // The graph is built: too late to change.
  CHECK_THROWS_AS(sync.set_elastic(false), op_error);
  session sess{w0.target(), bounded(), &g};
  sess.run(global_variables_initializer());
  sess.run(local_variables_initializer());
  sess.run(sync.local_step_init_op());
  sess.run(sync.chief_init_op());
  sess.run(sync.get_init_tokens_op(0));
  coordinator coord;
  queue_runner runner{g, sync.chief_queue_runner()};
  runner.create_threads(sess, &coord);
  // Worker 0 pushes its gradient; the update waits for worker 1's too.
  auto pushed = std::async(std::launch::async, [&] {
    sess.run(train_op, {{target, tensor::vec<float>({2, 2})}});
  });
  CHECK(pushed.wait_for(std::chrono::milliseconds(300))
        == std::future_status::timeout);
  // Worker 1 left: one gradient is enough for this update and the next.
  session setter_sess{w0.target(), bounded(), &g};
  setter_sess.run(std::vector<fetch>{sync.set_replicas_op()},
                  {{sync.replicas_placeholder(), tensor::scalar(int32_t{1})}});
  REQUIRE(pushed.wait_for(std::chrono::seconds(30))
          == std::future_status::ready);
  pushed.get();
  CHECK(sess.run(step).scalar_value<int64_t>() == 1);
  // w -= 0.25 * 2 * (w - [2, 2]) from [0, 0]: [1, 1].
  auto value = sess.run(w);
  CHECK(std::abs(value.flat<float>()[0] - 1.0f) < 1e-5f);
  sess.run(train_op, {{target, tensor::vec<float>({2, 2})}});
  CHECK(sess.run(step).scalar_value<int64_t>() == 2);
  coord.request_stop();
  sess.close();
  CHECK_NOTHROW(coord.join(std::chrono::seconds(10)));
}

TEST_CASE("training: raising the elastic replica count adds the difference "
          "in tokens at once, so the workers of the new count are not left "
          "waiting",
          "[training][sync][elastic]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}}, {"worker", {loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  graph g;
  auto as_default = g.as_default();
  replica_device_setter_options o;
  o.worker_device = "/job:worker/task:0";
  device_scope setter{replica_device_setter(cluster, o)};
  variable w{tensor::vec<float>({0.0f, 0.0f}), named("w")};
  auto step = create_global_step();
  auto loss = reduce_sum(square(w.value()));
  gradient_descent_optimizer opt{0.25};
  sync_replicas_optimizer sync{opt, 1};
  sync.set_elastic(true);
  // Builds the update, the token queue and set_replicas_op.
  sync.minimize(loss, step);
  // The token queue, by its shared name.
  output tokens;
  {
    device_scope on_ps{"/job:ps/task:0"};
    fifo_queue probe{-1, {dtype::int64}, {tensor_shape{}}, "sync_token_q",
                     "token_probe"};
    tokens = probe.size();
  }
  session sess{w0.target(), bounded(), &g};
  sess.run(global_variables_initializer());
  sess.run(local_variables_initializer());
  sess.run(sync.local_step_init_op());
  sess.run(sync.chief_init_op());
  sess.run(sync.get_init_tokens_op(0));
  CHECK(sess.run(tokens).scalar_value<int32_t>() == 0);
  auto set = [&](int32_t n) {
    sess.run(std::vector<fetch>{sync.set_replicas_op()},
             {{sync.replicas_placeholder(), tensor::scalar(n)}});
  };
  // One to three: two tokens, at the current global step.
  set(3);
  CHECK(sess.run(tokens).scalar_value<int32_t>() == 2);
  // Lowering or setting the same count adds none.
  set(2);
  set(2);
  CHECK(sess.run(tokens).scalar_value<int32_t>() == 2);
  set(4);
  CHECK(sess.run(tokens).scalar_value<int32_t>() == 4);
  CHECK(sess.run(step).scalar_value<int64_t>() == 0);
}
