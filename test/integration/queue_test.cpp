// A queue shared across processes: it lives on the ps task; a loader
// session on worker 0 enqueues while a trainer session on worker 1 waits
// for mini-batches (seed 004's setup, with real processes).

#include "integration_util.hpp"

#include <future>

#include "actorflow/graph/queue_ops.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("queue: loader and trainer processes share a queue on the ps task",
          "[queue]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  queue_base q;
  {
    device_scope on_ps{"/job:ps/task:0"};
    q = fifo_queue{100, {dtype::float32, dtype::int32},
                   {tensor_shape{2}, tensor_shape{}}, "training_data"};
  }
  auto features = placeholder(dtype::float32, {-1, 2}, "features");
  auto labels = placeholder(dtype::int32, {-1}, "labels");
  auto load = q.enqueue_many({features, labels});
  auto batch = q.dequeue_many(2);
  CHECK(q.op().device() == "/job:ps/task:0");
  session loader{nodes.target("worker", 0), bounded(), &g};
  session trainer{nodes.target("worker", 1), bounded(), &g};
  // The trainer asks first and waits inside the queue actor on ps.
  auto first = std::async(std::launch::async,
                          [&] { return trainer.run({batch[0], batch[1]}); });
  CHECK(first.wait_for(std::chrono::milliseconds(100))
        == std::future_status::timeout);
  loader.run(load, {{features, tensor::from_vector<float>(
                                 {1, 2, 3, 4, 5, 6}, tensor_shape{3, 2})},
                    {labels, tensor::vec<int32_t>({10, 20, 30})}});
  auto got = first.get();
  CHECK(got[0] == tensor::from_vector<float>({1, 2, 3, 4}, tensor_shape{2, 2}));
  CHECK(got[1] == tensor::vec<int32_t>({10, 20}));
  CHECK(trainer.run(q.size()).scalar_value<int32_t>() == 1);
}
