// A client process for the replication tests (replication_test.cpp): N
// steps through the master at TARGET, each adding 1 to the variables
// "c0" (on /job:ps/task:0), "c1" (on /job:ps/task:1) and "global_step"
// (on /job:ps/task:0), while the test kills, stops and restarts ps
// tasks. With replicated variables no step may fail: every error is
// printed ("error: <what>") and counted.
//
//   counter_client TARGET init        creates and zeroes the variables
//   counter_client TARGET run N       prints "done N errors E"
//   counter_client TARGET read        prints "c0 X c1 Y global_step Z"
//
// Exit status 0, or 1 when a step failed.

#include <iostream>
#include <string>

#include "actorflow/actorflow.hpp"

using namespace actorflow;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: counter_client TARGET init|run N|read\n";
    return 2;
  }
  std::string target = argv[1];
  std::string what = argv[2];
  graph g;
  auto as_default = g.as_default();
  auto on = [](const char* device, const char* name) {
    device_scope d{device};
    return variable{int64_t{0}, {.name = name}};
  };
  auto c0 = on("/job:ps/task:0", "c0");
  auto c1 = on("/job:ps/task:1", "c1");
  auto gs = on("/job:ps/task:0", "global_step");
  auto step = group({c0.assign_add(1.0).op(), c1.assign_add(1.0).op(),
                     gs.assign_add(1.0).op()});
  session_config config;
  config.operation_timeout_in_ms = 60000;
  int errors = 0;
  try {
    session sess{target, config, &g};
    if (what == "init") {
      sess.run(global_variables_initializer());
      std::cout << "initialized" << std::endl;
    } else if (what == "run" && argc > 3) {
      auto n = std::stoi(argv[3]);
      for (int i = 0; i < n; ++i) {
        try {
          sess.run(step);
        } catch (const op_error& e) {
          ++errors;
          std::cout << "error: " << e.what() << std::endl;
        }
      }
      std::cout << "done " << n << " errors " << errors << std::endl;
    } else if (what == "read") {
      auto values = sess.run({c0.value(), c1.value(), gs.value()});
      std::cout << "c0 " << values[0].scalar_value<int64_t>() << " c1 "
                << values[1].scalar_value<int64_t>() << " global_step "
                << values[2].scalar_value<int64_t>() << std::endl;
    } else {
      std::cerr << "counter_client: unknown operation " << what << "\n";
      return 2;
    }
  } catch (const op_error& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  return errors == 0 ? 0 : 1;
}
