// The seeds' distributed behaviour across real node processes: seed 000
// (a variable shared by sessions on two servers, placement traces), seed
// 001 (a reduce split over two workers) and seed 003 (a session on
// worker 1).

#include "integration_util.hpp"

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
