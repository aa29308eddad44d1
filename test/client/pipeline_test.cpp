// In-graph input pipelines end to end: file names -> reader -> decode ->
// batch queue, filled by queue-runner threads under a coordinator, read
// until the epochs run out (TF's python/training/input_test.py shapes).

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "actorflow/graph/input.hpp"
#include "actorflow/graph/io_ops.hpp"
#include "actorflow/graph/parsing_ops.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/temp_dir.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
namespace fs = std::filesystem;

namespace {

/// Two CSV files with a header: rows (i, 10 * i) for i in 0..6.
struct csv_files {
  csv_files() {
    for (int f = 0; f < 2; ++f) {
      std::string rows = "id,value\n";
      for (int i = f * 4; i < std::min(7, f * 4 + 4); ++i)
        rows += std::to_string(i) + "," + std::to_string(10 * i) + "\n";
      names.push_back(dir.write("part" + std::to_string(f) + ".csv", rows));
    }
  }
  temp_dir dir{"actorflow-pipeline"};
  std::vector<std::string> names;
};

/// Runs `batch` until OutOfRange; returns every id seen and the sizes of
/// the batches. Fails the test if it takes more than `limit` batches.
std::pair<std::vector<int32_t>, std::vector<int64_t>>
drain(session& sess, const std::vector<output>& batch, int limit = 100) {
  std::vector<int32_t> ids;
  std::vector<int64_t> sizes;
  for (int i = 0; i < limit; ++i) {
    std::vector<tensor> out;
    try {
      out = sess.run(std::vector<fetch>{batch[0], batch[1]});
    } catch (const op_error& e) {
      CHECK(e.code() == error_code::out_of_range);
      return {ids, sizes};
    }
    auto xs = out[0].flat<int32_t>();
    auto ys = out[1].flat<int32_t>();
    REQUIRE(xs.size() == ys.size());
    for (size_t k = 0; k < xs.size(); ++k) {
      CHECK(ys[k] == 10 * xs[k]);
      ids.push_back(xs[k]);
    }
    sizes.push_back(out[0].shape().dim(0));
  }
  FAIL("the pipeline never ran out");
  return {ids, sizes};
}

std::vector<output> csv_pipeline(const std::vector<std::string>& files,
                                 int64_t epochs) {
  input_producer_options in;
  in.num_epochs = epochs;
  in.shuffle = false;
  auto names = string_input_producer(files, in);
  text_line_reader reader{1};
  auto line = reader.read(names).second;
  return decode_csv(line, {tensor::scalar(int32_t{0}),
                           tensor::scalar(int32_t{0})});
}

} // namespace

TEST_CASE("pipeline: batch with allow_smaller_final_batch reads every "
          "line of every epoch, then OutOfRange",
          "[pipeline][engine]") {
  csv_files csv;
  graph g;
  auto as_default = g.as_default();
  auto cols = csv_pipeline(csv.names, 2);
  batch_options opts;
  opts.allow_smaller_final_batch = true;
  auto b = batch(cols, 3, opts);
  session sess{bounded(), &g};
  sess.run(local_variables_initializer());
  coordinator coord;
  CHECK(start_queue_runners(sess, coord) == 4);
  auto [ids, sizes] = drain(sess, b);
  coord.request_stop();
  coord.join(std::chrono::seconds(10));
  // One thread, no shuffling: file order, twice; 14 rows as 3+3+3+3+2.
  CHECK(ids
        == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6});
  CHECK(sizes == std::vector<int64_t>{3, 3, 3, 3, 2});
}

TEST_CASE("pipeline: shuffle_batch with two threads mixes and loses "
          "nothing, dequeue_many drops no element but fails the short "
          "batch",
          "[pipeline][engine]") {
  csv_files csv;
  graph g;
  auto as_default = g.as_default();
  g.set_seed(3);
  auto cols = csv_pipeline(csv.names, 3);
  batch_options opts;
  opts.num_threads = 2;
  opts.allow_smaller_final_batch = true;
  auto b = shuffle_batch(cols, 4, 20, 5, opts);
  session sess{bounded(), &g};
  sess.run(local_variables_initializer());
  coordinator coord;
  start_queue_runners(sess, coord);
  auto [ids, sizes] = drain(sess, b);
  coord.request_stop();
  coord.join(std::chrono::seconds(10));
  REQUIRE(ids.size() == 21);
  std::map<int32_t, int> counts;
  for (auto id : ids)
    ++counts[id];
  for (int32_t i = 0; i < 7; ++i)
    CHECK(counts[i] == 3);
  // 21 = 5 x 4 + 1.
  CHECK(sizes.back() == 1);
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(ids != sorted);
}

TEST_CASE("pipeline: request_stop unblocks runners waiting on a full "
          "queue, join returns within the grace period",
          "[pipeline][engine]") {
  csv_files csv;
  graph g;
  auto as_default = g.as_default();
  // Endless epochs into a small queue that nobody reads: the runner
  // blocks on a full queue until the coordinator's cancel op.
  auto cols = csv_pipeline(csv.names, 0);
  batch_options opts;
  opts.capacity = 2;
  auto b = batch(cols, 2, opts);
  session sess{bounded(), &g};
  coordinator coord;
  start_queue_runners(sess, coord);
  auto first = sess.run(b[0]);
  CHECK(first.shape() == tensor_shape{2});
  coord.request_stop();
  CHECK_NOTHROW(coord.join(std::chrono::seconds(10)));
}

TEST_CASE("pipeline: a bad record stops the coordinator with "
          "InvalidArgument naming it",
          "[pipeline][engine]") {
  csv_files csv;
  {
    std::ofstream out{csv.names[1], std::ios::app};
    out << "7,not-a-number\n";
  }
  graph g;
  auto as_default = g.as_default();
  auto cols = csv_pipeline(csv.names, 1);
  batch_options opts;
  opts.allow_smaller_final_batch = true;
  auto b = batch(cols, 100, opts);
  session sess{bounded(), &g};
  sess.run(local_variables_initializer());
  coordinator coord;
  start_queue_runners(sess, coord);
  REQUIRE(coord.wait_for_stop(std::chrono::seconds(20)));
  coord.request_stop();
  auto err = error_of([&] { coord.join(std::chrono::seconds(10)); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(), Catch::Contains("not-a-number"));
}

TEST_CASE("pipeline: readers and queues on a server, runners in one "
          "session, batches fetched by another",
          "[pipeline][engine]") {
  csv_files csv;
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  input_producer_options in;
  in.num_epochs = 1;
  in.shuffle = false;
  in.shared_name = "files";
  auto names = string_input_producer(csv.names, in);
  text_line_reader reader{1, "lines"};
  auto line = reader.read(names).second;
  auto cols = decode_csv(line, {tensor::scalar(int32_t{0}),
                                tensor::scalar(int32_t{0})});
  batch_options opts;
  opts.allow_smaller_final_batch = true;
  opts.shared_name = "batches";
  auto b = batch(cols, 4, opts);
  session feeder{srv.target(), bounded(), &g};
  session trainer{srv.target(), bounded(), &g};
  feeder.run(local_variables_initializer());
  coordinator coord;
  start_queue_runners(feeder, coord);
  auto [ids, sizes] = drain(trainer, b);
  coord.request_stop();
  coord.join(std::chrono::seconds(10));
  CHECK(ids == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(sizes == std::vector<int64_t>{4, 3});
}
