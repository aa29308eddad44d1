// Readers, input producers and batching at graph-building time: TF's
// node names, attributes, static shapes, queue runners and build errors
// (python/training/input.py, python/ops/io_ops.py).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "actorflow/graph/input.hpp"
#include "actorflow/graph/io_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/placer.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const node_def& node(const graph& g, const std::string& name) {
  auto op = g.find_operation(name);
  REQUIRE(op.valid());
  return op.def();
}

} // namespace

TEST_CASE("reader nodes carry TF's attributes", "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  text_line_reader lines{1};
  CHECK(lines.name() == "TextLineReaderV2");
  CHECK(lines.op().def().attr<int64_t>("skip_header_lines") == 1);
  CHECK(lines.op().def().attr<std::string>("shared_name").empty());
  fixed_length_record_reader records{784, 16, 0, 0, "GZIP", "images"};
  auto& d = records.op().def();
  CHECK(d.op == "FixedLengthRecordReaderV2");
  CHECK(d.attr<int64_t>("record_bytes") == 784);
  CHECK(d.attr<int64_t>("header_bytes") == 16);
  CHECK(d.attr<std::string>("encoding") == "GZIP");
  CHECK(d.attr<std::string>("shared_name") == "images");
  whole_file_reader whole;
  CHECK(whole.handle().name() == "WholeFileReaderV2:0");
  CHECK(whole.handle().type() == dtype::string);
  text_line_reader second;
  CHECK(second.name() == "TextLineReaderV2_1");
  {
    container_scope c{"my_problem_1"};
    whole_file_reader in_container;
    CHECK(in_container.op().def().attr<std::string>("container")
          == "my_problem_1");
  }
}

TEST_CASE("reader attributes are checked at build time", "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  check_invalid(error_of([] { fixed_length_record_reader r{0}; }),
                "record_bytes must be > 0 not 0");
  check_invalid(error_of([] { fixed_length_record_reader r{4, -1}; }),
                "header_bytes must be >= 0 not -1");
  check_invalid(error_of([] { fixed_length_record_reader r{4, 0, -2}; }),
                "footer_bytes must be >= 0 not -2");
  check_invalid(error_of([] { fixed_length_record_reader r{4, 0, 0, -3}; }),
                "hop_bytes must be >= 0 not -3");
  check_invalid(error_of([] {
                  fixed_length_record_reader r{4, 0, 0, 0, "BZIP2"};
                }),
                "encoding must be");
  check_invalid(error_of([] { text_line_reader r{-1}; }),
                "skip_header_lines must be >= 0 not -1");
  // Nothing was added by the failed constructors.
  CHECK(g.num_nodes() == 0);
}

TEST_CASE("reader ops: names, outputs and static shapes", "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue files{4, {dtype::string}, {tensor_shape{}}};
  text_line_reader reader;
  auto [key, value] = reader.read(files);
  CHECK(key.name() == "ReaderReadV2:0");
  CHECK(value.name() == "ReaderReadV2:1");
  CHECK(key.type() == dtype::string);
  CHECK(value.shape() == tensor_shape{});
  auto& read = node(g, "ReaderReadV2");
  CHECK(read.inputs == std::vector<std::string>{"TextLineReaderV2",
                                                "fifo_queue"});
  auto [keys, values] = reader.read_up_to(files, 5);
  CHECK(keys.name() == "ReaderReadUpToV2:0");
  CHECK(values.shape() == tensor_shape{-1});
  CHECK(node(g, "ReaderReadUpToV2").inputs.size() == 3);
  CHECK(reader.num_records_produced().name()
        == "ReaderNumRecordsProducedV2:0");
  CHECK(reader.num_records_produced().type() == dtype::int64);
  CHECK(reader.num_work_units_completed().name()
        == "ReaderNumWorkUnitsCompletedV2:0");
  CHECK(reader.reset().name() == "ReaderResetV2");
  check_invalid(error_of([&] { reader.read_up_to(files, constant(3)); }),
                "num_records");
}

TEST_CASE("the placer puts a read with its reader and its queue",
          "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue files{4, {dtype::string}, {tensor_shape{}}};
  text_line_reader reader;
  output value;
  {
    device_scope d{"/job:worker/task:1"};
    value = reader.read(files).second;
  }
  auto def = g.def();
  placer_options opts;
  opts.devices = {"/job:worker/replica:0/task:0/device:CPU:0",
                  "/job:worker/replica:0/task:1/device:CPU:0"};
  REQUIRE(place(def, opts).ok());
  auto device_of = [&](const std::string& name) {
    for (auto& n : def.nodes)
      if (n.name == name)
        return n.device;
    return std::string{};
  };
  CHECK(device_of("ReaderReadV2") == "/job:worker/replica:0/task:1/device:CPU:0");
  CHECK(device_of("TextLineReaderV2") == device_of("ReaderReadV2"));
  CHECK(device_of("fifo_queue") == device_of("ReaderReadV2"));
}

TEST_CASE("count_up_to builds CountUpTo on int variables only",
          "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  variable counter{constant(int64_t{0}), named("counter")};
  auto c = counter.count_up_to(3);
  CHECK(c.name() == "CountUpTo:0");
  CHECK(c.type() == dtype::int64);
  auto& d = node(g, "CountUpTo");
  CHECK(d.attr<int64_t>("limit") == 3);
  CHECK(d.inputs.front() == "counter");
  variable f{constant(0.0f), named("f")};
  check_invalid(error_of([&] { f.count_up_to(3); }), "CountUpTo");
}

TEST_CASE("limit_epochs guards its value with a local epoch counter",
          "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(tensor::vec<std::string>({"a", "b"}));
  CHECK(limit_epochs(x, 0).name() == x.name());
  auto limited = limit_epochs(x, 2);
  CHECK(limited.name() == "limit_epochs:0");
  auto& id = node(g, "limit_epochs");
  CHECK(id.op == "Identity");
  CHECK(id.inputs == std::vector<std::string>{"Const", "^limit_epochs/CountUpTo"});
  CHECK(node(g, "limit_epochs/CountUpTo").attr<int64_t>("limit") == 2);
  auto locals = local_variables();
  REQUIRE(locals.size() == 1);
  CHECK(locals.front().name() == "limit_epochs/epochs:0");
  CHECK(global_variables().empty());
  CHECK(local_variables_initializer().name() == "init");
  check_invalid(error_of([&] { limit_epochs(x, -1); }),
                "num_epochs must be > 0 not -1.");
}

TEST_CASE("string_input_producer builds TF's queue and runner",
          "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  input_producer_options opts;
  opts.num_epochs = 1;
  opts.shuffle = false;
  auto q = string_input_producer({"a.txt", "b.txt"}, opts);
  CHECK(q.name() == "input_producer");
  CHECK(q.op().def().op == "FIFOQueueV2");
  CHECK(q.op().def().attr<int64_t>("capacity") == 32);
  CHECK(q.dtypes() == std::vector<dtype>{dtype::string});
  CHECK(q.shapes() == std::vector<tensor_shape>{tensor_shape{}});
  REQUIRE(g.queue_runners().size() == 1);
  auto& qr = g.queue_runners().front();
  CHECK(qr.queue_name == "input_producer");
  CHECK(qr.enqueue_op_names
        == std::vector<std::string>{
          "input_producer/input_producer_EnqueueMany"});
  CHECK(qr.close_op_name == "input_producer/input_producer_Close");
  CHECK(qr.cancel_op_name == "input_producer/input_producer_Close_1");
  CHECK(node(g, qr.cancel_op_name).attr<bool>("cancel_pending_enqueues"));
  CHECK_FALSE(node(g, qr.close_op_name).attr<bool>("cancel_pending_enqueues"));
  CHECK(local_variables().front().name()
        == "input_producer/limit_epochs/epochs:0");
  // Shuffling adds a RandomShuffle; a second producer gets its own scope.
  auto q2 = string_input_producer({"c.txt"});
  CHECK(q2.name() == "input_producer_1");
  CHECK(node(g, "input_producer_1/RandomShuffle").op == "RandomShuffle");
  check_invalid(error_of([] { string_input_producer(std::vector<std::string>{}); }),
                "requires a non-null input tensor");
  check_invalid(error_of([] { string_input_producer(constant(1.0f)); }),
                "needs a string tensor");
}

TEST_CASE("batch and shuffle_batch: names, shapes, runners, errors",
          "[input_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(std::vector<float>{1, 2, 3}, tensor_shape{3});
  auto y = constant(int32_t{7});
  batch_options opts;
  opts.num_threads = 2;
  auto b = batch({x, y}, 4, opts);
  REQUIRE(b.size() == 2);
  CHECK(b[0].name() == "batch:0");
  CHECK(b[1].name() == "batch:1");
  CHECK(b[0].shape() == tensor_shape{4, 3});
  CHECK(b[1].shape() == tensor_shape{4});
  CHECK(node(g, "batch").op == "QueueDequeueManyV2");
  CHECK(node(g, "batch/fifo_queue").op == "FIFOQueueV2");
  REQUIRE(g.queue_runners().size() == 1);
  CHECK(g.queue_runners().front().enqueue_op_names
        == std::vector<std::string>{"batch/fifo_queue_enqueue",
                                    "batch/fifo_queue_enqueue"});

  batch_options up_to;
  up_to.allow_smaller_final_batch = true;
  auto s = shuffle_batch({x}, 2, 10, 5, up_to);
  CHECK(s[0].name() == "shuffle_batch:0");
  CHECK(s[0].shape() == tensor_shape{-1, 3});
  CHECK(node(g, "shuffle_batch").op == "QueueDequeueUpToV2");
  auto& rsq = node(g, "shuffle_batch/random_shuffle_queue");
  CHECK(rsq.attr<int64_t>("min_after_dequeue") == 5);
  CHECK(rsq.attr<int64_t>("capacity") == 10);

  batch_options many;
  many.enqueue_many = true;
  auto rows = batch({x}, 2, many);
  CHECK(rows[0].shape() == tensor_shape{2});

  auto ph = placeholder(dtype::float32, tensor_shape{-1});
  batch_options pad;
  pad.dynamic_pad = true;
  auto padded = batch({ph}, 2, pad);
  CHECK(node(g, "batch_2/padding_fifo_queue").op == "PaddingFIFOQueueV2");
  CHECK(padded[0].shape() == tensor_shape{2, -1});

  check_invalid(error_of([&] { shuffle_batch({x}, 2, 10, 10); }),
                "capacity 10 must be bigger than min_after_dequeue 10.");
  check_invalid(error_of([&] { batch({ph}, 2); }),
                "All shapes must be fully defined");
  check_invalid(error_of([&] { batch({}, 2); }), "at least one tensor");
  check_invalid(error_of([&] { batch({x}, 0); }), "batch_size must be >= 1");
  check_invalid(error_of([&] { batch({y}, 2, many); }),
                "must have rank at least 1");
}
