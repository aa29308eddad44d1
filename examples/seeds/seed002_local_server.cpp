// Seed 002: "First Insight of TensorFlow Architecture". A single-process
// cluster (create_local_server) says hello; then a cluster of two ps and
// three worker tasks (five `actorflow-node` processes) holds a two-layer
// net: weights on the ps tasks, compute on worker 2.

#include <iostream>
#include <string>
#include <vector>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/local_cluster.hpp"

using namespace actorflow;

namespace {

// variable_options with just a name (designated initializers would trip
// -Wmissing-field-initializers on the other members).
variable_options named(const std::string& name) {
  variable_options opts;
  opts.name = name;
  return opts;
}

std::string py_list(const std::vector<std::string>& xs) {
  std::string result = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    result += (i > 0 ? ", '" : "'") + xs[i] + "'";
  return result + "]";
}

std::string py_shape(const tensor_shape& shape) {
  std::string result = "(";
  for (int i = 0; i < shape.rank(); ++i)
    result += (i > 0 ? ", " : "") + std::to_string(shape.dim(i));
  return result + (shape.rank() == 1 ? ",)" : ")");
}

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 002: a local server says hello; a two-layer net on a cluster of\n"
    "two ps and three worker tasks (five node processes)."};
  if (!flags.parse(argc, argv))
    return 0;
  auto node = flags.node_binary();

  // Start a server as a single-process cluster and run a session on it.
  {
    auto c = constant("Hello, distributed TensorFlow!");
    auto local = server::create_local_server();
    session sess{local.target()};
    std::cout << sess.run(c).to_string() << '\n' << std::endl;
  }

  // Create a cluster: two ps and three worker tasks on this machine.
  support::local_cluster nodes{node, {{"ps", 2}, {"worker", 3}}};
  const auto& cluster = nodes.spec();
  std::cout << ">>> cluster.jobs\n" << py_list(cluster.jobs()) << '\n';
  std::cout << ">>> cluster.as_cluster_def()\n" << cluster.as_cluster_def();
  std::cout << ">>> cluster.as_dict()\n" << to_string(cluster.as_dict())
            << '\n';
  std::vector<std::string> worker_tasks;
  for (const auto& t : cluster.job_tasks("worker"))
    worker_tasks.push_back(t.value_or(""));
  std::cout << ">>> cluster.job_tasks('worker')\n" << py_list(worker_tasks)
            << '\n';
  std::cout << ">>> cluster.num_tasks('worker')\n"
            << cluster.num_tasks("worker") << '\n';
  std::cout << ">>> cluster.task_address('worker', 2)\n'"
            << cluster.task_address("worker", 2) << "'\n";
  std::cout << ">>> cluster.task_indices('worker')\n[";
  auto indices = cluster.task_indices("worker");
  for (size_t i = 0; i < indices.size(); ++i)
    std::cout << (i > 0 ? ", " : "") << indices[i];
  std::cout << "]\n" << std::endl;

  // Specifying distributed devices in the model.
  reset_default_graph();
  const int64_t n_in = 4;
  const int64_t n_hidden = 8;
  const int64_t n_out = 3;
  variable w1;
  variable b1;
  variable w2;
  variable b2;
  {
    device_scope on_ps0{"/job:ps/task:0"};
    w1 = variable{random_normal({n_in, n_hidden}, 0.0, 1.0, dtype::float32,
                                1),
                  named("w1")};
    b1 = variable{zeros({n_hidden}), named("b1")};
  }
  {
    device_scope on_ps1{"/job:ps/task:1"};
    w2 = variable{random_normal({n_hidden, n_out}, 0.0, 1.0,
                                dtype::float32, 2),
                  named("w2")};
    b2 = variable{zeros({n_out}), named("b2")};
  }
  output input;
  output logits;
  {
    device_scope on_worker2{"/job:worker/task:2"};
    input = placeholder(dtype::float32, {-1, n_in}, "input");
    auto layer_1 = relu(matmul(input, w1) + b1);
    logits = relu(matmul(layer_1, w2) + b2, "logits");
  }

  std::cout << "# requested devices:\n";
  for (const auto& node_def : default_graph().def().nodes)
    std::cout << node_def.name << ": "
              << (node_def.device.empty() ? "(none)" : node_def.device)
              << '\n';
  std::cout << std::endl;

  // log_device_placement: worker 2 (the master) logs the placement to
  // its own stderr, as TF logs it in the server's log.
  session_config config;
  config.log_device_placement = true;
  session sess{nodes.target("worker", 2), config};
  sess.run(global_variables_initializer());

  const int64_t batch = 5;
  std::vector<float> rows;
  for (int64_t i = 0; i < batch * n_in; ++i)
    rows.push_back(static_cast<float>(i % 7) / 7.0f);
  auto batch_tensor = tensor::from_vector(rows, {batch, n_in});
  run_options options;
  options.trace_level = run_options::full_trace;
  run_metadata metadata;
  auto out = sess.run(logits, {{input, batch_tensor}}, options, &metadata);

  std::cout << "# placement of the step:\n";
  for (const auto& device : metadata.stats.dev_stats)
    for (const auto& stats : device.node_stats)
      std::cout << stats.node_name << ": " << device.device << '\n';
  std::cout << std::endl;
  std::cout << "logits shape: " << py_shape(out.shape()) << std::endl;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed002_local_server",
                        [&] { return run(argc, argv); });
}
