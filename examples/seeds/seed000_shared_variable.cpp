// Seed 000: sharing a variable between sessions. Two private sessions share
// nothing (cells 3-4); sessions on two servers of one cluster share `var`
// (cells 9-10); placement traces show where nodes run (cells 12-19).
//
// The two servers are separate `actorflow-node` processes, as the seed's
// comment asks us to pretend; this program is the client.

#include <iostream>

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

float value_of(session& sess, const variable& v) {
  return sess.run(v).scalar_value<float>();
}

std::string show(session& sess, const variable& v) {
  return tensor::scalar(value_of(sess, v)).to_string();
}

// The seed's run_with_location_trace: runs `what` with a full trace and
// prints every device of the step with the nodes it ran.
void run_with_location_trace(session& sess, const fetch& what) {
  run_options options;
  options.trace_level = run_options::full_trace;
  run_metadata metadata;
  sess.run(what, {}, options, &metadata);
  for (const auto& device : metadata.stats.dev_stats) {
    std::cout << device.device << '\n';
    for (const auto& node : device.node_stats)
      std::cout << "   " << node.node_name << '\n';
  }
  std::cout << std::endl;
}

void cell(const char* label) {
  std::cout << "In [" << label << "]:" << std::endl;
}

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 000: private sessions share nothing; sessions on two servers of\n"
    "one cluster share a variable; placement traces."};
  if (!flags.parse(argc, argv))
    return 0;
  auto node = flags.node_binary();

  // Cells 2-4: each tf.Session() is its own execution engine.
  cell("3-4");
  variable var{0.0f};
  session sess1;
  session sess2;
  sess1.run(global_variables_initializer());
  sess2.run(global_variables_initializer());
  std::cout << "Initial value of var in session 1: " << show(sess1, var)
            << '\n'
            << "Initial value of var in session 2: " << show(sess2, var)
            << '\n';
  sess1.run(var.assign_add(1.0));
  std::cout << "Incremented var in session 1\n"
            << "Value of var in session 1: " << show(sess1, var) << '\n'
            << "Value of var in session 2: " << show(sess2, var) << '\n'
            << std::endl;

  // Cells 5-8: a cluster of two tasks of job "local", one process each.
  cell("5-8");
  support::local_cluster nodes{node, {{"local", 2}}};
  const auto& cluster = nodes.spec();
  std::cout << cluster << '\n' << std::endl;

  // Cells 9-10: the same variable name on both servers is one variable.
  cell("9-10");
  reset_default_graph();
  var = variable{0.0f, named("var")};
  session s1{nodes.target("local", 0)};
  session s2{nodes.target("local", 1)};
  s1.run(global_variables_initializer());
  s2.run(global_variables_initializer());
  std::cout << "Initial value of var in session 1: " << show(s1, var)
            << '\n'
            << "Initial value of var in session 2: " << show(s2, var)
            << '\n';
  s1.run(var.assign_add(1.0));
  std::cout << "Incremented var in session 1\n"
            << "Value of var in session 1: " << show(s1, var) << '\n'
            << "Value of var in session 2: " << show(s2, var) << '\n'
            << std::endl;

  // Cells 12-14: unpinned nodes land on the first task, whichever
  // session runs them.
  cell("12");
  run_with_location_trace(s1, var);
  cell("13");
  run_with_location_trace(s1, var.assign_add(1.0));
  cell("14");
  run_with_location_trace(s2, var);

  // Cell 15: pin one variable to each task.
  cell("15");
  variable var1;
  variable var2;
  {
    device_scope on_task0{"/job:local/task:0"};
    var1 = variable{0.0f, named("var1")};
  }
  {
    device_scope on_task1{"/job:local/task:1"};
    var2 = variable{0.0f, named("var2")};
  }
  s1.run(global_variables_initializer());
  std::cout << "var1.device: " << var1.device() << '\n'
            << "var2.device: " << var2.device() << '\n'
            << std::endl;

  // Cells 16-19: a pinned variable runs on its task from either session.
  cell("16");
  run_with_location_trace(s1, var1);
  cell("17");
  run_with_location_trace(s1, var2);
  cell("18");
  run_with_location_trace(s2, var2);
  cell("19");
  run_with_location_trace(s2, var1);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed000_shared_variable",
                        [&] { return run(argc, argv); });
}
