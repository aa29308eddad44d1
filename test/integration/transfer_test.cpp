// Tensors between processes: large ones cross the wire in ~1 MiB chunks
// (Send to Recv between two node processes) and arrive intact.

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("transfer: an 8 MiB tensor moves between two tasks intact",
          "[transfer]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  // 2M floats = 8 MiB, made on the ps task and reduced on the worker: the
  // Send/Recv pair between them carries the whole tensor.
  output big;
  {
    device_scope on_ps{"/job:ps/task:0"};
    big = random_uniform({2048, 1024}, 0.0, 1.0, dtype::float32, 7);
  }
  output total;
  output corner;
  {
    device_scope on_worker{"/job:worker/task:0"};
    total = reduce_sum(big);
    corner = reshape(big, {-1});
  }
  session sess{nodes.target("worker", 0), bounded(), &g};
  run_metadata md;
  auto values = sess.run({total, corner, big}, {}, full_trace(), &md);
  INFO(trace_text(md));
  CHECK(devices_running(md, total.op().name()) == std::set{cpu0("worker", 0)});
  auto& flat = values[1];
  REQUIRE(flat.num_elements() == 2048 * 1024);
  // The sum computed on the worker equals the sum of what reached the
  // client, and the fetched tensor equals the worker's reshaped copy.
  double sum = 0;
  for (auto x : flat.flat<float>())
    sum += x;
  CHECK(values[0].scalar_value<float>() == Approx(sum).epsilon(1e-4));
  CHECK(values[2].reshaped(tensor_shape{2048 * 1024}) == flat);
  // Uniform values: the mean is near 1/2 (not zeros from a lost chunk).
  CHECK(sum / flat.num_elements() == Approx(0.5).epsilon(0.01));
}
