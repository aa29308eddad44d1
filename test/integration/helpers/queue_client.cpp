// A client process for the tests of steps that die with their owner
// (owners_test.cpp): one operation on the queue "shared" (FIFO, float32
// scalars, capacity 1) of /job:ps/task:0, through the master at TARGET,
// waiting up to 60 s. The test kills or stops it while it waits.
//
//   queue_client TARGET dequeue          prints "dequeued V"
//   queue_client TARGET enqueue V        prints "enqueued"
//
// Prints "error: <what>" and exits 1 on an op_error.

#include <iostream>
#include <string>

#include "actorflow/actorflow.hpp"

using namespace actorflow;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: queue_client TARGET dequeue|enqueue [V]\n";
    return 2;
  }
  std::string target = argv[1];
  std::string what = argv[2];
  try {
    graph g;
    auto as_default = g.as_default();
    device_scope on_ps{"/job:ps/task:0"};
    fifo_queue q{1, {dtype::float32}, {tensor_shape{}}, "shared"};
    session_config config;
    config.operation_timeout_in_ms = 60000;
    session sess{target, config, &g};
    if (what == "dequeue") {
      auto value = sess.run(q.dequeue().front()).scalar_value<float>();
      std::cout << "dequeued " << value << std::endl;
    } else if (what == "enqueue" && argc > 3) {
      sess.run(q.enqueue({constant(std::stof(argv[3]))}));
      std::cout << "enqueued" << std::endl;
    } else {
      std::cerr << "queue_client: unknown operation " << what << "\n";
      return 2;
    }
  } catch (const op_error& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
