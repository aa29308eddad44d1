// The README's "Using it" snippets, compiled and run, so the docs stay
// true. Servers run in this process on free loopback ports.

#include "integration_util.hpp"

#include <fstream>

#include "common/temp_dir.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("readme: building graphs", "[readme]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  auto c = a * 3;
  auto x = placeholder(dtype::float32, {-1, 784}, "x");
  variable_options w_opts;
  w_opts.name = "w";
  auto w = variable{
    random_normal({784, 10}, 0.0, 0.1, dtype::float32, /*seed=*/42), w_opts};
  auto logits = relu(matmul(x, w) + variable{zeros({10}), named("b")});
  auto total = reduce_sum(logits, {1}, /*keep_dims=*/true);
  auto parts = split(x, 2, /*axis=*/0);
  auto both = concat(parts, 0);
  auto packed = stack({reduce_sum(parts[0]), reduce_sum(parts[1])});
  auto hello = constant("Hello, distributed TensorFlow!");
  CHECK(g.find_operation("add/y").valid());
  CHECK(b.op().name() == "add");
  CHECK(c.op().name() == "mul");
  session sess{session_config{}, &g};
  sess.run(global_variables_initializer());
  auto batch = tensor{dtype::float32, tensor_shape{4, 784}};
  auto values = sess.run({total, both, packed, hello}, {{x, batch}});
  CHECK(values[0].shape() == tensor_shape{4, 1});
  CHECK(values[1].shape() == tensor_shape{4, 784});
  CHECK(values[2].shape() == tensor_shape{2});
  CHECK(values[3].to_string() == "Hello, distributed TensorFlow!");
  CHECK(sess.run(c).to_string() == "3.0");
}

TEST_CASE("readme: scopes", "[readme]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  {
    device_scope ps{"/job:ps/task:0"};
    control_dependencies deps{a, b};
    name_scope layer{"layer1"};
    container_scope c{"my_problem_1"};
    auto v = variable{0.0f};
    colocate_with near{v.op()};
    auto y = identity(v);
    CHECK(v.op().name() == "layer1/Variable");
    CHECK(v.device() == "/job:ps/task:0");
    CHECK(std::get<std::string>(v.op().def().attrs.at("container"))
          == "my_problem_1");
    CHECK(y.device() == v.device());
  }
  CHECK(g.to_text().find("layer1/Variable = VariableV2()") != std::string::npos);
  CHECK(g.to_dot().rfind("digraph", 0) == 0);
}

TEST_CASE("readme: cluster, servers, sessions, placement, tracing",
          "[readme]") {
  auto ports = support::free_ports(3);
  auto addr = [&](size_t i) {
    return "127.0.0.1:" + std::to_string(ports[i]);
  };
  auto cluster = cluster_spec::from_json(R"({"ps": [")" + addr(0)
                                         + R"("], "worker": [")" + addr(1)
                                         + R"(", ")" + addr(2) + R"("]})");
  CHECK(cluster.jobs() == std::vector<std::string>{"ps", "worker"});
  CHECK(cluster.task_address("worker", 1) == addr(2));
  CHECK(cluster.as_cluster_def().rfind("job {\n  name: \"ps\"", 0) == 0);
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  server w1{cluster, "worker", 1};
  auto local = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  auto hello = constant("Hello, distributed TensorFlow!");
  {
    session sess{local.target(), session_config{}, &g};
    CHECK(sess.run(hello).to_string() == "Hello, distributed TensorFlow!");
  }
  output x = placeholder(dtype::float32, {-1, 784}, "x");
  variable w1v;
  variable w2v;
  {
    device_scope setter{replica_device_setter(cluster)};
    w1v = variable{random_normal({784, 100})};
    w2v = variable{random_normal({100, 10})};
  }
  CHECK(w1v.device() == "/job:ps/task:0");
  auto total = reduce_sum(matmul(matmul(x, w1v), w2v));
  session_config config;
  config.allow_soft_placement = true;
  config.log_device_placement = true;
  session s{w0.target(), config, &g};
  s.run(global_variables_initializer());
  run_options opts;
  opts.trace_level = run_options::full_trace;
  opts.timeout_in_ms = 20000;
  run_metadata md;
  auto batch = tensor{dtype::float32, tensor_shape{2, 784}};
  auto values = s.run({total, w2v}, {{x, batch}}, opts, &md);
  CHECK(values[0].scalar_value<float>() == 0.0f);
  CHECK(values[1].shape() == tensor_shape{100, 10});
  CHECK(md.has_step_stats);
  CHECK(!md.stats.dev_stats.empty());
  CHECK(md.to_chrome_trace().rfind("{\"traceEvents\":[", 0) == 0);
  CHECK(ps.stats().steps_run >= 1);
  ps.stop();
  CHECK(ps.stopped());
}

TEST_CASE("readme: training on a ps task", "[readme]") {
  auto ports = support::free_ports(2);
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {"127.0.0.1:" + std::to_string(ports[0])}},
    {"worker", {"127.0.0.1:" + std::to_string(ports[1])}}}};
  server ps{cluster, "ps", 0};
  server worker{cluster, "worker", 0};
  graph g;
  auto as_default = g.as_default();
  // The README's snippet, as written there.
  auto x = placeholder(dtype::float32, tensor_shape{{-1, 784}}, "x");
  auto y = placeholder(dtype::int32, tensor_shape{{-1}}, "y");
  operation train_op;
  {
    device_scope setter{replica_device_setter(cluster)};
    variable w{truncated_normal({784, 10}, 0.0, 0.1)};
    variable b{zeros({10})};
    auto logits = bias_add(matmul(x, w), b);
    auto loss = reduce_mean(sparse_softmax_cross_entropy_with_logits(y, logits));
    auto step = create_global_step();
    adam_optimizer opt{0.001};
    train_op = opt.minimize(loss, &step);
  }
  CHECK(train_op.name() == "Adam");
  session sess{worker.target(), bounded(), &g};
  sess.run(global_variables_initializer());
  sess.run(train_op, {{x, tensor{dtype::float32, tensor_shape{2, 784}}},
                      {y, tensor::vec<int32_t>({1, 2})}});
  CHECK(sess.run(get_global_step()).scalar_value<int64_t>() == 1);
  CHECK(get_global_step().op().device() == "/job:ps/task:0");

  // The monitored training snippet, as written there (in a scratch
  // directory, with a quiet log).
  temp_dir logs{"actorflow-readme"};
  auto srv = std::move(worker);
  int task_index = 0;
  auto batch_x = tensor{dtype::float32, tensor_shape{2, 784}};
  auto batch_y = tensor::vec<int32_t>({1, 2});
  monitored_training_session_options o;
  o.master = srv.target();
  o.is_chief = task_index == 0;
  o.checkpoint_dir = logs.path.string();
  o.save_checkpoint_steps = 1000;
  o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 5)};
  o.log = [](const std::string&) {};
  auto msess = monitored_training_session(o);
  int runs = 0;
  while (!msess->should_stop()) {
    msess->run(train_op, {{x, batch_x}, {y, batch_y}});
    ++runs;
  }
  msess->close();
  // The plain session had trained one step; the chief found no
  // checkpoint and initialized again, so five runs reach step 5.
  CHECK(runs == 5);
  CHECK(latest_checkpoint(logs.path.string()) == logs / "model.ckpt-5");
}
