// Readers end to end: reader actors on a task pulling file names from a
// queue actor, input producers, CountUpTo and RandomShuffle in sessions
// (tf_semantics: readers; python/kernel_tests/reader_ops_test.py).

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "actorflow/graph/input.hpp"
#include "actorflow/graph/io_ops.hpp"
#include "actorflow/graph/parsing_ops.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/temp_dir.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
namespace fs = std::filesystem;

namespace {

error_code code_of(const std::optional<op_error>& e) {
  return e ? e->code() : error_code::ok;
}

std::string str(const tensor& t) {
  return t.scalar_value<std::string>();
}

std::vector<std::string> strs(const tensor& t) {
  auto xs = t.flat<std::string>();
  return {xs.begin(), xs.end()};
}

/// A filename queue holding `files`, closed.
struct filename_queue {
  explicit filename_queue(const std::vector<std::string>& files,
                          const std::string& shared_name = "")
    : q(32, {dtype::string}, {tensor_shape{}}, shared_name) {
    fill = q.enqueue_many({constant(tensor::vec(files))});
    close = q.close();
  }
  fifo_queue q;
  operation fill;
  operation close;
};

} // namespace

TEST_CASE("reader: TextLineReader reads every line of every file, keyed "
          "file:line, then fails OutOfRange",
          "[reader][engine]") {
  temp_dir dir;
  auto a = dir.write("a.csv", "h1,h2\n1,2\n3,4\n");
  auto b = dir.write("b.csv", "head\n5,6\r\n7,8");
  graph g;
  auto as_default = g.as_default();
  filename_queue files{{a, b}};
  text_line_reader reader{1};
  auto [key, value] = reader.read(files.q);
  auto produced = reader.num_records_produced();
  auto completed = reader.num_work_units_completed();
  session sess{bounded(), &g};
  sess.run(files.fill);
  sess.run(files.close);
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (int i = 0; i < 4; ++i) {
    auto kv = sess.run({key, value});
    keys.push_back(str(kv[0]));
    values.push_back(str(kv[1]));
  }
  CHECK(keys
        == std::vector<std::string>{a + ":2", a + ":3", b + ":2", b + ":3"});
  CHECK(values == std::vector<std::string>{"1,2", "3,4", "5,6", "7,8"});
  CHECK(sess.run(produced).scalar_value<int64_t>() == 4);
  CHECK(sess.run(completed).scalar_value<int64_t>() == 1);
  auto err = error_of([&] { sess.run(value); });
  CHECK(code_of(err) == error_code::out_of_range);
  REQUIRE(err);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("is closed and has insufficient elements"));
  CHECK(sess.run(completed).scalar_value<int64_t>() == 2);
  // ReaderReset zeroes the counters.
  sess.run(reader.reset());
  CHECK(sess.run(produced).scalar_value<int64_t>() == 0);
}

TEST_CASE("reader: read_up_to stops at the end of a file, fixed-length "
          "records with header and footer",
          "[reader][engine]") {
  temp_dir dir;
  auto f1 = dir.write("r1.bin", "HHaabbccF");
  auto f2 = dir.write("r2.bin", "HHddF");
  graph g;
  auto as_default = g.as_default();
  filename_queue files{{f1, f2}};
  fixed_length_record_reader reader{2, 2, 1};
  auto [keys, values] = reader.read_up_to(files.q, 2);
  session sess{bounded(), &g};
  sess.run(files.fill);
  sess.run(files.close);
  auto first = sess.run({keys, values});
  CHECK(strs(first[0]) == std::vector<std::string>{f1 + ":0", f1 + ":1"});
  CHECK(strs(first[1]) == std::vector<std::string>{"aa", "bb"});
  // Only one record left in r1: read_up_to returns it alone.
  CHECK(strs(sess.run(values)) == std::vector<std::string>{"cc"});
  CHECK(strs(sess.run(values)) == std::vector<std::string>{"dd"});
  CHECK(code_of(error_of([&] { sess.run(values); }))
        == error_code::out_of_range);
}

TEST_CASE("reader: WholeFileReader gives one record per file, a missing "
          "file is NotFound naming it",
          "[reader][engine]") {
  temp_dir dir;
  auto a = dir.write("whole.txt", "all\nof it");
  auto missing = (dir.path / "nope.txt").string();
  graph g;
  auto as_default = g.as_default();
  filename_queue files{{a}};
  whole_file_reader whole;
  auto [key, value] = whole.read(files.q);
  fifo_queue more{4, {dtype::string}, {tensor_shape{}}};
  auto add_missing = more.enqueue({constant(missing)});
  text_line_reader lines;
  auto line = lines.read(more).second;
  session sess{bounded(), &g};
  sess.run(files.fill);
  auto kv = sess.run({key, value});
  CHECK(str(kv[0]) == a);
  CHECK(str(kv[1]) == "all\nof it");
  sess.run(add_missing);
  auto err = error_of([&] { sess.run(line); });
  CHECK(code_of(err) == error_code::not_found);
  REQUIRE(err);
  CHECK_THAT(err->get_status().message(), Catch::Contains(missing));
}

TEST_CASE("reader: a read waiting for a file name honours the deadline and "
          "loses nothing",
          "[reader][engine]") {
  temp_dir dir;
  auto a = dir.write("late.txt", "x\ny\n");
  graph g;
  auto as_default = g.as_default();
  fifo_queue files{4, {dtype::string}, {tensor_shape{}}};
  auto name = placeholder(dtype::string, tensor_shape{}, "name");
  auto add = files.enqueue({name});
  text_line_reader reader;
  auto value = reader.read(files).second;
  session sess{bounded(), &g};
  run_options quick;
  quick.timeout_in_ms = 200;
  CHECK(code_of(error_of([&] { sess.run(value, {}, quick); }))
        == error_code::deadline_exceeded);
  // The cancelled dequeue took nothing: the file added now is read whole.
  sess.run(add, {{name, tensor::scalar(a)}});
  CHECK(str(sess.run(value)) == "x");
  CHECK(str(sess.run(value)) == "y");
  CHECK(sess.run(files.size()).scalar_value<int32_t>() == 0);
}

TEST_CASE("reader: a shared_name reader keeps one position for every "
          "session of the cluster",
          "[reader][engine]") {
  temp_dir dir;
  auto a = dir.write("shared.txt", "1\n2\n3\n4\n");
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  filename_queue files{{a}, "shared_files"};
  text_line_reader reader{0, "shared_lines"};
  auto value = reader.read(files.q).second;
  session s1{srv.target(), bounded(), &g};
  session s2{srv.target(), bounded(), &g};
  s1.run(files.fill);
  CHECK(str(s1.run(value)) == "1");
  CHECK(str(s2.run(value)) == "2");
  CHECK(str(s1.run(value)) == "3");
  // A private reader (no shared_name) in another session starts over.
  text_line_reader own;
  auto own_value = own.read(files.q).second;
  s2.run(files.fill);
  CHECK(str(s2.run(own_value)) == "1");
  CHECK(str(s1.run(value)) == "4");
}

TEST_CASE("reader: a container reset ends a read blocked on its queue",
          "[reader][reset]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue files{4, {dtype::string}, {tensor_shape{}}, "blocked_files"};
  text_line_reader reader{0, "blocked_reader"};
  auto value = reader.read(files).second;
  auto blocked = std::async(std::launch::async, [&] {
    session s{srv.target(), bounded(), &g};
    return code_of(error_of([&] { s.run(value); }));
  });
  // Wait until the read is pending in the queue, then reset.
  REQUIRE(blocked.wait_for(std::chrono::milliseconds(300))
          == std::future_status::timeout);
  session::reset(srv.target());
  REQUIRE(blocked.wait_for(std::chrono::seconds(20))
          == std::future_status::ready);
  auto code = blocked.get();
  CHECK((code == error_code::cancelled || code == error_code::aborted));
}

TEST_CASE("reader: string_input_producer with num_epochs, CountUpTo and "
          "RandomShuffle in a session",
          "[reader][engine]") {
  graph g;
  auto as_default = g.as_default();
  g.set_seed(5);
  input_producer_options opts;
  opts.num_epochs = 2;
  auto q = string_input_producer({"a", "b", "c"}, opts);
  auto& runner = g.queue_runners().front();
  auto enqueue = g.find_operation(runner.enqueue_op_names.front());
  auto dequeue = q.dequeue().front();
  session sess{bounded(), &g};
  // The epoch counter is a local variable.
  CHECK(code_of(error_of([&] { sess.run(enqueue); }))
        == error_code::failed_precondition);
  sess.run(local_variables_initializer());
  sess.run(enqueue);
  sess.run(enqueue);
  auto err = error_of([&] { sess.run(enqueue); });
  CHECK(code_of(err) == error_code::out_of_range);
  REQUIRE(err);
  CHECK_THAT(err->get_status().message(), Catch::Contains("Reached limit of 2"));
  std::vector<std::string> epoch1;
  std::vector<std::string> epoch2;
  for (int i = 0; i < 3; ++i)
    epoch1.push_back(str(sess.run(dequeue)));
  for (int i = 0; i < 3; ++i)
    epoch2.push_back(str(sess.run(dequeue)));
  std::sort(epoch1.begin(), epoch1.end());
  std::sort(epoch2.begin(), epoch2.end());
  CHECK(epoch1 == std::vector<std::string>{"a", "b", "c"});
  CHECK(epoch2 == epoch1);
  // The close op of the runner closes the queue: dequeue fails after.
  sess.run(g.find_operation(runner.close_op_name));
  CHECK(code_of(error_of([&] { sess.run(dequeue); }))
        == error_code::out_of_range);
}

TEST_CASE("reader: Fashion-MNIST labels through FixedLengthRecordReader "
          "(GZIP) and decode_raw",
          "[reader][engine]") {
  std::string labels = "/usr/share/datasets/fashion-mnist/"
                       "train-labels-idx1-ubyte.gz";
  if (!fs::exists(labels)) {
    WARN("dataset-fashion-mnist is not installed; skipped");
    return;
  }
  graph g;
  auto as_default = g.as_default();
  filename_queue files{{labels}};
  fixed_length_record_reader reader{1, 8, 0, 0, "GZIP"};
  auto [keys, values] = reader.read_up_to(files.q, 4);
  auto label = decode_raw(values, dtype::uint8);
  session sess{bounded(), &g};
  sess.run(files.fill);
  auto out = sess.run({keys, label});
  CHECK(strs(out[0]).front() == labels + ":0");
  auto ls = out[1].flat<uint8_t>();
  REQUIRE(ls.size() == 4);
  CHECK(std::vector<int>(ls.begin(), ls.end()) == std::vector<int>{9, 0, 0, 3});
}
