// Tensors between processes (Send to Recv between two node processes)
// arrive intact: over the tensor channel (docs/DESIGN.md), and with it
// turned off over CAF, where large ones cross in ~1 MiB chunks.

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

// The nodes' transport: the tensor channel (the default) or CAF alone.
support::cluster_options with_transport(const std::string& transport) {
  auto opts = captured();
  if (transport == "caf")
    opts.env.push_back("ACTORFLOW_TENSOR_CHANNEL=0");
  return opts;
}

} // namespace

TEST_CASE("transfer: an 8 MiB tensor moves between two tasks intact",
          "[transfer]") {
  auto transport = GENERATE(as<std::string>{}, "channel", "caf");
  INFO("transport " << transport);
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}},
                      with_transport(transport)};
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

TEST_CASE("transfer: chunked bools, odd sizes and strings arrive intact",
          "[transfer]") {
  auto transport = GENERATE(as<std::string>{}, "channel", "caf");
  INFO("transport " << transport);
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}},
                      with_transport(transport)};
  graph g;
  auto as_default = g.as_default();
  // Made on the ps, consumed on the worker: each crosses as chunks. The
  // bools (3 MiB + 5 bytes) and int64s end mid-chunk; strings take the
  // encoded path (no raw data to cut).
  output flags;
  output counts;
  output words;
  {
    device_scope on_ps{"/job:ps/task:0"};
    flags = greater(random_uniform({3 * 1024 * 1024 + 5}, 0.0, 1.0,
                                   dtype::float32, 3),
                    constant(0.5f));
    counts = cast(random_uniform({300001}, 0.0, 1000.0, dtype::float32, 4),
                  dtype::int64);
    words = tile(reshape(constant(std::string(1000, 'w')), {1}),
                 constant(tensor::vec<int32_t>({2500})));
  }
  output flags_here;
  output counts_sum;
  output words_here;
  {
    device_scope on_worker{"/job:worker/task:0"};
    flags_here = identity(flags);
    counts_sum = reduce_sum(counts);
    words_here = identity(words);
  }
  session sess{nodes.target("worker", 0), bounded(), &g};
  // The ps's values fetched directly (from the ps partition) against the
  // worker's copies (through the chunks).
  auto v = sess.run({flags, flags_here, counts, counts_sum, words,
                     words_here});
  CHECK(v[0] == v[1]);
  int64_t ones = 0;
  for (auto b : v[1].flat<bool>())
    ones += b ? 1 : 0;
  CHECK(ones > 1400000);
  CHECK(ones < 1750000);
  int64_t sum = 0;
  for (auto x : v[2].flat<int64_t>())
    sum += x;
  CHECK(v[3].scalar_value<int64_t>() == sum);
  CHECK(v[4] == v[5]);
  REQUIRE(v[5].num_elements() == 2500);
  CHECK(v[5].flat<std::string>()[2499] == std::string(1000, 'w'));
}

TEST_CASE("transfer: a large MatMul operand crosses processes in row "
          "blocks and gives the whole product", "[transfer]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  // 784 x 256 floats (784 KiB) on the ps, multiplied on the worker:
  // matmul_pipelining sends them as 4 row blocks of 196.
  output w;
  {
    device_scope on_ps{"/job:ps/task:0"};
    w = random_uniform({784, 256}, -1.0, 1.0, dtype::float32, 5);
  }
  output x;
  output product;
  {
    device_scope on_worker{"/job:worker/task:0"};
    x = placeholder(dtype::float32, tensor_shape{-1, 784}, "x");
    product = matmul(x, w);
  }
  std::vector<float> xs(8 * 784);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = static_cast<float>(i % 13) - 6.0f;
  auto batch = tensor::from_vector(xs, tensor_shape{8, 784});
  auto whole_config = bounded();
  whole_config.matmul_pipelining = false;
  session whole{nodes.target("worker", 0), whole_config, &g};
  session blocks{nodes.target("worker", 0), bounded(), &g};
  run_metadata md;
  auto got = blocks.run({product, w}, {{x, batch}}, full_trace(), &md);
  INFO(trace_text(md));
  CHECK(devices_running(md, product.op().name() + "/_pipelined/matmul_3")
        == std::set{cpu0("worker", 0)});
  CHECK(devices_running(md, product.op().name() + "/_pipelined/split_b")
        == std::set{cpu0("ps", 0)});
  auto want = whole.run(product, {{x, batch}});
  REQUIRE(got[0].shape() == want.shape());
  // The same product up to the order of the float additions, and the
  // product of the weights the client fetched.
  auto a = got[0].flat<float>();
  auto b = want.flat<float>();
  auto wv = got[1].flat<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).epsilon(1e-4).margin(1e-3));
  }
  double direct = 0;
  for (size_t k = 0; k < 784; ++k)
    direct += double(xs[k]) * double(wv[k * 256]);
  CHECK(a[0] == Approx(direct).epsilon(1e-4).margin(1e-3));
}
