// Seed 003 (Hands-On ML, ch. 12): control dependencies, then a session
// opened on one server of a cluster of one ps and two worker tasks (three
// `actorflow-node` processes; the book's machines A and B).

#include <iostream>
#include <string>
#include <vector>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/local_cluster.hpp"

using namespace actorflow;

namespace {

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 003: control dependencies; a session on worker 1 of a cluster of\n"
    "one ps and two workers (three node processes) evaluates a * 3."};
  if (!flags.parse(argc, argv))
    return 0;
  auto node = flags.node_binary();

  // x and y run only after a and b, though neither reads them.
  {
    auto a = constant(1.0f);
    auto b = a + 2.0f;
    output x;
    output y;
    {
      control_dependencies after{a, b};
      x = constant(3.0f);
      y = constant(4.0f);
    }
    auto z = x + y;
    session sess;
    std::cout << "z = " << sess.run(z).to_string() << '\n';
    std::cout << "control inputs of x (" << x.op().name() << "): [";
    auto deps = x.op().control_inputs();
    for (size_t i = 0; i < deps.size(); ++i)
      std::cout << (i > 0 ? ", " : "") << "'" << deps[i] << "'";
    std::cout << "]\n" << std::endl;
  }

  // The cluster: one ps task and two worker tasks.
  support::local_cluster nodes{node, {{"ps", 1}, {"worker", 2}}};
  std::cout << nodes.spec() << '\n' << std::endl;

  // Nothing is pinned. The book says the master places everything on its
  // own device; TensorFlow actually picks the cluster's first device by
  // name (seed 000 shows the same), here /job:ps/task:0, and the master
  // (worker 1) receives the result.
  reset_default_graph();
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  auto c = a * 3.0f;
  (void) b;
  session sess{nodes.target("worker", 1)};
  run_options options;
  options.trace_level = run_options::full_trace;
  run_metadata metadata;
  auto value = sess.run(c, {}, options, &metadata);
  std::cout << value.to_string() << '\n' << std::endl;
  for (const auto& device : metadata.stats.dev_stats) {
    std::cout << device.device << '\n';
    for (const auto& stats : device.node_stats)
      std::cout << "   " << stats.node_name << '\n';
  }
  std::cout << std::flush;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed003_control_deps",
                        [&] { return run(argc, argv); });
}
