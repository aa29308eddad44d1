// Concurrent first runs across processes: many client threads run the same
// fetch of a fresh session at once, with its op placed on another process
// than the master, so that the step's first requests to the remote
// partition race each other (docs/DESIGN.md, "Concurrent first runs").
// Every thread must get its answer, every iteration; a lost request shows
// as a DeadlineExceeded instead of a hang.
//
// ACTORFLOW_STRESS=N runs N iterations (e.g. ACTORFLOW_STRESS=100
// build/test/integration/actorflow_integration_tests "[concurrency]"); the
// ordinary suite runs fewer.

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

int iterations(int ordinary) {
  if (const char* s = std::getenv("ACTORFLOW_STRESS"); s && *s)
    return std::max(1, std::atoi(s));
  return ordinary;
}

} // namespace

TEST_CASE("concurrency: first runs of one step from many threads, op on "
          "another process, all answered",
          "[concurrency]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {}, "x");
  output remote;
  {
    // On the second process: the master (task 0) sends it the feed and
    // receives its value (a _Send/_Recv pair each way).
    device_scope pin{"/job:local/task:1"};
    remote = x * 2.0f + 1.0f;
  }
  constexpr int threads = 10;
  const int rounds = iterations(100);
  for (int round = 0; round < rounds; ++round) {
    // A fresh session: its master has no plan for the signature yet.
    session sess{nodes.target("local", 0), bounded(), &g};
    std::atomic<int> ready{0};
    std::vector<std::optional<op_error>> errors(threads);
    std::vector<float> values(threads, -1.0f);
    std::vector<std::thread> clients;
    for (int t = 0; t < threads; ++t)
      clients.emplace_back([&, t] {
        // All threads ask at about the same moment.
        ready.fetch_add(1);
        while (ready.load() < threads)
          std::this_thread::yield();
        run_options options;
        // Deadline enough for a loaded machine; a lost request ends here
        // instead of hanging the suite.
        options.timeout_in_ms = 20000;
        errors[t] = error_of([&] {
          values[t] = sess.run(remote, {{x, tensor::scalar(static_cast<float>(t))}},
                               options)
                        .scalar_value<float>();
        });
      });
    for (auto& c : clients)
      c.join();
    for (int t = 0; t < threads; ++t) {
      INFO("round " << round << ", thread " << t << ": "
                    << (errors[t] ? errors[t]->what() : "ok") << "\n"
                    << nodes.process("local", 0).err());
      REQUIRE_FALSE(errors[t]);
      REQUIRE(values[t] == 2.0f * static_cast<float>(t) + 1.0f);
    }
  }
}
