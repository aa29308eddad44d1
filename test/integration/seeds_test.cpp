// The seeds' distributed behaviour across real node processes: seed 000
// (a variable shared by sessions on two servers, placement traces), seed
// 001 (a reduce split over two workers), seed 003 (a session on worker
// 1), and seed 004's two programs run as a user runs them (004a: queues
// shared by a loader and a trainer process; 004b: the Fashion-MNIST input
// pipeline).

#include "integration_util.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <vector>

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("seed000: sessions on both servers share var", "[seed000]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  session s1{nodes.target("local", 0), bounded(), &g};
  session s2{nodes.target("local", 1), bounded(), &g};
  s1.run(global_variables_initializer());
  s2.run(global_variables_initializer());
  CHECK(s1.run(var).scalar_value<float>() == 0.0f);
  CHECK(s2.run(var).scalar_value<float>() == 0.0f);
  s1.run(var.assign_add(1.0));
  CHECK(s1.run(var).scalar_value<float>() == 1.0f);
  CHECK(s2.run(var).scalar_value<float>() == 1.0f);
  CHECK(s2.run(var).to_string() == "1.0");
  // And back the other way.
  s2.run(var.assign_add(2.0));
  CHECK(s1.run(var).scalar_value<float>() == 3.0f);
}

TEST_CASE("seed000: placement traces", "[seed000]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
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
  session s1{nodes.target("local", 0), bounded(), &g};
  session s2{nodes.target("local", 1), bounded(), &g};
  s1.run(global_variables_initializer());
  const auto task0 = cpu0("local", 0);
  const auto task1 = cpu0("local", 1);

  SECTION("cell 12: unpinned var runs on task 0 from session 1") {
    run_metadata md;
    s1.run(var, {}, full_trace(), &md);
    INFO(trace_text(md));
    CHECK(md.has_step_stats);
    CHECK(devices_running(md, "var") == std::set{task0});
    CHECK(devices_running(md, "_SOURCE").contains(task0));
  }
  SECTION("cell 13: assign_add runs on task 0") {
    run_metadata md;
    auto inc = var.assign_add(1.0);
    s1.run(inc, {}, full_trace(), &md);
    INFO(trace_text(md));
    CHECK(devices_running(md, "var") == std::set{task0});
    CHECK(devices_running(md, inc.op().name()) == std::set{task0});
  }
  SECTION("cell 14: unpinned var still runs on task 0 from session 2") {
    run_metadata md;
    s2.run(var, {}, full_trace(), &md);
    INFO(trace_text(md));
    CHECK(devices_running(md, "var") == std::set{task0});
  }
  SECTION("cells 16-19: pinned variables run on their task") {
    for (auto* sess : {&s1, &s2}) {
      run_metadata md1;
      sess->run(var1, {}, full_trace(), &md1);
      INFO(trace_text(md1));
      CHECK(devices_running(md1, "var1") == std::set{task0});
      run_metadata md2;
      sess->run(var2, {}, full_trace(), &md2);
      INFO(trace_text(md2));
      CHECK(devices_running(md2, "var2") == std::set{task1});
    }
  }
}

TEST_CASE("seed001: reduce sum split across two workers", "[seed001]") {
  local_cluster nodes{node_path, {{"ps", 2}, {"worker", 2}}, captured()};
  const auto& cluster = nodes.spec();
  graph g;
  auto as_default = g.as_default();
  output input_array;
  {
    device_scope setter{replica_device_setter(cluster)};
    input_array = placeholder(dtype::int32, {-1});
    variable unused{0};
    CHECK(unused.device() == "/job:ps/task:0");
  }
  auto splitted = split(input_array, 2);
  std::vector<output> all_reduce;
  std::vector<std::string> reduce_names;
  for (int idx = 0; idx < 2; ++idx) {
    device_scope on_worker{"/job:worker/task:" + std::to_string(idx)};
    auto local_reduce = reduce_sum(splitted[idx]);
    reduce_names.push_back(local_reduce.op().name());
    all_reduce.push_back(print(splitted[idx], {local_reduce}, "portion is"));
  }
  auto final_result = reduce_sum(stack(all_reduce));
  CHECK(final_result.device().empty());

  session sess{nodes.target("worker", 0), bounded(), &g};
  run_metadata md;
  auto ones = tensor::vec(std::vector<int32_t>(1000, 1));
  auto result = sess.run(final_result, {{input_array, ones}}, full_trace(),
                         &md);
  INFO(trace_text(md));
  CHECK(result.type() == dtype::int32);
  CHECK(result.scalar_value<int32_t>() == 1000);
  CHECK(result.to_string() == "1000");
  CHECK(devices_running(md, reduce_names[0])
        == std::set{cpu0("worker", 0)});
  CHECK(devices_running(md, reduce_names[1])
        == std::set{cpu0("worker", 1)});
  // Unpinned nodes go to the cluster's first device by name, whichever
  // master places them: /job:ps/replica:0/task:0 sorts before the workers.
  CHECK(devices_running(md, final_result.op().name())
        == std::set{cpu0("ps", 0)});
  // Each worker's tf.Print wrote its partial sum to that node's stderr.
  auto& worker1 = nodes.process("worker", 1);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  // Polls the worker's stderr: child_process waits only for stdout lines;
  // bounded by the deadline.
  while (worker1.err().find("portion is[500]") == std::string::npos
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  CHECK_THAT(worker1.err(), Catch::Contains("portion is[500]"));
}

TEST_CASE("seed003: a session on worker 1 evaluates a * 3", "[seed003]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f);
  auto b = a + 2.0f;
  auto c = a * 3.0f;
  session sess{nodes.target("worker", 1), bounded(), &g};
  run_metadata md;
  auto value = sess.run(c, {}, full_trace(), &md);
  INFO(trace_text(md));
  CHECK(value.scalar_value<float>() == 3.0f);
  CHECK(value.to_string() == "3.0");
  CHECK(sess.run(b).scalar_value<float>() == 3.0f);
  // Nothing was pinned: everything ran on the cluster's first device (the
  // same for every master, as seed 000 shows), not on the master.
  CHECK(devices_running(md, c.op().name()) == std::set{cpu0("ps", 0)});
}

// -- seed 004: the examples, run as a user would ------------------------------
//
// Both examples start their own node process (and seed004a_queues its
// loader and trainer processes); run_process kills the example at the
// deadline, and its children die with it (--parent-pid, PR_SET_PDEATHSIG).

namespace {

/// An example built next to the launcher (build/apps/), or "" if it was
/// not built (ACTORFLOW_BUILD_EXAMPLES=OFF, or only this test target).
std::string example_path(const std::string& name) {
  auto path = std::filesystem::path{node_path}.parent_path() / name;
  return ::access(path.c_str(), X_OK) == 0 ? path.string() : std::string{};
}

/// Runs an example with a deadline; checks that it ended on its own with
/// status 0.
support::process_result run_example(const std::string& binary,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{binary, "--node", node_path};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto start = std::chrono::steady_clock::now();
  auto result = run_process(argv, 20s);
  INFO("stdout:\n" << result.out << "\nstderr:\n" << result.err);
  INFO("ran " << seconds_since(start) << " s");
  CHECK_FALSE(result.timed_out);
  CHECK(result.status.success());
  return result;
}

/// The numbers of the first line of `out` that starts with `prefix`
/// ("[ 8.  6. 16.  4. 15.]   (17 items left)" -> 8 6 16 4 15 17).
std::vector<int> numbers_after(const std::string& out,
                               const std::string& prefix) {
  std::vector<int> result;
  auto at = out.find("\n" + prefix);
  if (at == std::string::npos)
    return result;
  auto end = out.find('\n', at + 1);
  std::string line = out.substr(at + 1, end - at - 1);
  for (size_t i = 0; i < line.size();) {
    if (std::isdigit(static_cast<unsigned char>(line[i]))) {
      size_t used = 0;
      result.push_back(std::stoi(line.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  return result;
}

} // namespace

TEST_CASE("seed004a: the queues example replays the book's cells",
          "[seed004]") {
  auto binary = example_path("seed004a_queues");
  if (binary.empty()) {
    WARN("seed004a_queues is not built next to actorflow-node: not run");
    return;
  }
  auto result = run_example(binary);
  const auto& out = result.out;
  INFO(out);
  using Catch::Contains;
  // Containers: the reset container's variable must be initialized again.
  CHECK_THAT(out, Contains("x in a new session: FailedPrecondition: "
                           "Attempting to use uninitialized value x"));
  CHECK_THAT(out, Contains("y in a new session = 1.0"));
  // Loader and trainer: two processes, FIFO order, then a mini-batch of
  // the first two (not the book's [[1., 2.], [4., 5.]]) and a blocked one.
  CHECK_THAT(out, Contains("--- training_data_loader.py"));
  CHECK_THAT(out, Contains("--- trainer.py"));
  CHECK_THAT(out, Contains("exit code 0)\n[1. 2.]\n[3. 4.]\n[5. 6.]\n"
                           "[[1. 2.]\n [3. 4.]]\n"
                           "blocked waiting for another instance: "
                           "DeadlineExceeded: "));
  // Tuples.
  CHECK_THAT(out, Contains("dequeue_b])\n10\n[[1. 2.]\n [3. 4.]\n [5. 6.]]\n"));
  CHECK_THAT(out, Contains("[10 11]\n"
                           "[[[1. 2.]\n  [3. 4.]\n  [5. 6.]]\n\n"
                           " [[2. 4.]\n  [6. 8.]\n  [0. 2.]]]\n"
                           "blocked waiting for another pair: "
                           "DeadlineExceeded: "));
  // Closing.
  CHECK_THAT(out, Contains("dequeue_many(2): OutOfRange: FIFOQueue 'shared_q' "
                           "is closed and has insufficient elements "
                           "(requested 2, current size 1)"));
  CHECK_THAT(out, Contains("dequeue_up_to(2): [[5. 6.]]\n"));
  CHECK_THAT(out, Contains("enqueue after close: Cancelled: FIFOQueue "
                           "'shared_q' is closed."));
  CHECK_THAT(out, Contains("close: waits behind the pending enqueue\n"
                           "dequeue: 1.0\n"
                           "pending enqueue: done (honored)\n"
                           "close: done\n"
                           "dequeue: 2.0\n"));
  CHECK_THAT(out, Contains("pending enqueue: Cancelled: Enqueue operation "
                           "was cancelled"));
  // RandomShuffleQueue: two batches of five distinct items of 1..22, then
  // min_after_dequeue blocks the third.
  CHECK_THAT(out, Contains("(17 items left)\n"));
  CHECK_THAT(out, Contains("(12 items left)\n"));
  CHECK_THAT(out, Contains("12 - 5 < 10: blocked waiting for 3 more "
                           "instances: DeadlineExceeded: "));
  auto rsq = out.find("== RandomShuffleQueue ==");
  REQUIRE(rsq != std::string::npos);
  std::set<int> seen;
  for (const auto* left : {"(17 items left)", "(12 items left)"}) {
    auto end = out.find(left, rsq);
    REQUIRE(end != std::string::npos);
    auto begin = out.rfind('\n', end);
    auto line = out.substr(begin, end - begin);
    INFO(line);
    auto values = numbers_after(line, "[");
    REQUIRE(values.size() == 5);
    for (int v : values) {
      CHECK(v >= 1);
      CHECK(v <= 22);
      seen.insert(v);
    }
  }
  CHECK(seen.size() == 10);
  // PaddingFIFOQueue: numpy's printout of the padded 3x3x4 batch.
  CHECK_THAT(out, Contains("print(sess.run(q.dequeue_many(3)))\n"
                           "[[[1. 2. 0. 0.]\n"
                           "  [3. 4. 0. 0.]\n"
                           "  [5. 6. 0. 0.]]\n"
                           "\n"
                           " [[1. 0. 0. 0.]\n"
                           "  [0. 0. 0. 0.]\n"
                           "  [0. 0. 0. 0.]]\n"
                           "\n"
                           " [[7. 8. 9. 5.]\n"
                           "  [6. 7. 8. 9.]\n"
                           "  [0. 0. 0. 0.]]]\n"));
  // Preloading: initialized once from a feed, in no collection.
  CHECK_THAT(out, Contains("feature means (no feed needed any more): "
                           "[4. 5.]"));
  CHECK_THAT(out, Contains("global_variables(): ['w:0']"));
  CHECK_THAT(out, Contains("training_set.trainable: False"));
}

TEST_CASE("seed004b: the Fashion-MNIST input pipeline", "[seed004]") {
  auto binary = example_path("seed004b_readers");
  if (binary.empty()) {
    WARN("seed004b_readers is not built next to actorflow-node: "
         "not run");
    return;
  }
  using Catch::Contains;
  SECTION("without the dataset it says so and exits 0") {
    auto result = run_example(binary, {"--data", "/nonexistent/fashion"});
    CHECK_THAT(result.out, Contains("Fashion-MNIST not found"));
  }
  SECTION("with the dataset") {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/"
                                 "train-labels-idx1-ubyte.gz")) {
      WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): "
           "not run");
      return;
    }
    auto result = run_example(binary);
    const auto& out = result.out;
    INFO(out);
    // File order: the known first labels of the training set, each with
    // the image of the same record.
    CHECK_THAT(out, Contains("records: 0 1 2 3 4 5 6 7 8 9\n"
                             "labels:  [9 0 0 3 0 2 7 2 5 5]\n"));
    CHECK_THAT(out, Contains("image_batch: [32,28,28], label_batch: [32]"));
    for (int step = 0; step < 3; ++step) {
      auto line = "batch " + std::to_string(step)
                  + ": images (32, 28, 28), labels (32,)\n";
      auto at = out.find(line);
      REQUIRE(at != std::string::npos);
      // The next line: "  labels:  [1 1 4 ...]", 32 labels of 0..9.
      auto labels = numbers_after(out.substr(at + line.size() - 1),
                                  "  labels:  [");
      CHECK(labels.size() == 32);
      for (int label : labels) {
        CHECK(label >= 0);
        CHECK(label <= 9);
      }
    }
    size_t aligned = 0;
    for (auto at = out.find("all 32 images came with their own labels");
         at != std::string::npos;
         at = out.find("all 32 images came with their own labels", at + 1))
      ++aligned;
    CHECK(aligned == 3);
    CHECK_THAT(out, Contains("coord.request_stop(); coord.join(): done"));
  }
}
