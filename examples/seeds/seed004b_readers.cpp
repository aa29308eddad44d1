// Seed 004, part b (Hands-On ML, ch. 12, after seed004a_queues' part),
// "Reading the training data directly from the graph": an in-graph input
// pipeline over Fashion-MNIST's gzip IDX files. Two string_input_producers
// feed two FixedLengthRecordReaders (images: 784-byte records after a
// 16-byte header; labels: 1-byte records after an 8-byte header, both read
// through GZIP); DecodeRaw, Cast and Reshape make a [28, 28] float32 image
// scaled to [0, 1] and an int32 label; shuffle_batch's queue runner fills a
// RandomShuffleQueue, and the client pulls mini-batches of 32.
//
// The pipeline runs on machine A, one `actorflow-node` process (job
// "local", task 0): the node reads the files, as TensorFlow's readers run
// where they are placed; only the mini-batches travel to this client.
//
// The data comes from the Debian package dataset-fashion-mnist
// (/usr/share/datasets/fashion-mnist/, installed by scripts/setup.sh);
// `--data DIR` reads it from elsewhere. Without it the example says so and
// exits with status 0.

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/flags.hpp"
#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/local_cluster.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

constexpr const char* default_data_dir = "/usr/share/datasets/fashion-mnist";
constexpr const char* images_file = "train-images-idx3-ubyte.gz";
constexpr const char* labels_file = "train-labels-idx1-ubyte.gz";

constexpr const char* class_names[] = {
  "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

session_config bounded() {
  session_config config;
  config.operation_timeout_in_ms = 20000;
  return config;
}

// One example, as read in one step: the two readers' keys
// ("<file>:<record index>") come along so the client can check that each
// image travels with its own label.
struct example {
  output image;
  output label;
  output image_key;
  output label_key;
};

// The reading half of the pipeline, in the default graph.
example read_example(const std::string& dir) {
  input_producer_options files;
  files.shuffle = false;
  auto image_files = string_input_producer({dir + "/" + images_file}, files);
  auto label_files = string_input_producer({dir + "/" + labels_file}, files);

  // IDX: images have a 16-byte header (magic, count, rows, cols), labels
  // an 8-byte one (magic, count).
  fixed_length_record_reader image_reader{28 * 28, 16, 0, 0, "GZIP"};
  fixed_length_record_reader label_reader{1, 8, 0, 0, "GZIP"};
  auto [image_key, image_bytes] = image_reader.read(image_files);
  auto [label_key, label_bytes] = label_reader.read(label_files);

  auto pixels = cast(decode_raw(image_bytes, dtype::uint8), dtype::float32);
  auto image = reshape(mul(pixels, constant(1.0f / 255.0f)), {28, 28});
  auto label = reshape(cast(decode_raw(label_bytes, dtype::uint8),
                            dtype::int32),
                       {});
  return {image, label, image_key, label_key};
}

std::string py_shape(const tensor_shape& shape) {
  std::string result = "(";
  for (int i = 0; i < shape.rank(); ++i)
    result += (i > 0 ? ", " : "") + std::to_string(shape.dim(i));
  return result + (shape.rank() == 1 ? ",)" : ")");
}

// "…/train-labels-idx1-ubyte.gz:41" -> 41.
int64_t record_index(const std::string& key) {
  return std::stoll(key.substr(key.rfind(':') + 1));
}

std::string join(const std::vector<int64_t>& xs) {
  std::string result;
  for (size_t i = 0; i < xs.size(); ++i)
    result += (i > 0 ? " " : "") + std::to_string(xs[i]);
  return result;
}

// Checks every example of a batch: image record i came with label record
// i. Returns the record indices.
std::vector<int64_t> aligned_records(const tensor& image_keys,
                                     const tensor& label_keys) {
  std::vector<int64_t> records;
  auto images = image_keys.flat<std::string>();
  auto labels = label_keys.flat<std::string>();
  for (size_t i = 0; i < images.size(); ++i) {
    auto r = record_index(images[i]);
    if (r != record_index(labels[i]))
      throw std::runtime_error("misaligned example: image " + images[i]
                               + " with label " + labels[i]);
    records.push_back(r);
  }
  return records;
}

// A coarse look at one image (every other row, blank rows at the top and
// bottom left out), so one can see that the decoded bytes are a picture of
// the label's class.
void draw(const tensor& images, int64_t which) {
  static constexpr std::string_view ramp = " .:-=+*#%@";
  auto pixels = images.flat<float>().subspan(
    static_cast<size_t>(which * 28 * 28), 28 * 28);
  std::vector<std::string> lines;
  for (int r = 0; r < 28; r += 2) {
    std::string line;
    for (int c = 0; c < 28; ++c) {
      auto v = pixels[static_cast<size_t>(r * 28 + c)];
      auto level = static_cast<size_t>(v * static_cast<float>(ramp.size()));
      line += ramp[std::min(level, ramp.size() - 1)];
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty())
    lines.pop_back();
  bool started = false;
  for (const auto& line : lines) {
    started = started || !line.empty();
    if (started)
      std::cout << "    |" << line << '\n';
  }
}

// Runs the queue runners of `g` in a session on `target`, calls `body`,
// then stops and joins the threads.
template <class F>
void with_pipeline(const std::string& target, graph& g, F&& body) {
  session sess{target, bounded(), &g};
  coordinator coord;
  auto threads = start_queue_runners(sess, coord);
  std::cout << "started " << threads << " queue-runner threads" << std::endl;
  try {
    body(sess);
  } catch (...) {
    coord.request_stop(std::current_exception());
  }
  coord.request_stop();
  coord.join(10s);
}

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 004b: an in-graph input pipeline reading Fashion-MNIST (gzip IDX)\n"
    "with FixedLengthRecordReaders into shuffle_batch, on one node "
    "process."};
  std::string data_dir = default_data_dir;
  flags.app()
    .add_option("--data", data_dir, "the dataset's gzip IDX files")
    ->type_name("DIR")
    ->capture_default_str()
    ->check(support::non_empty());
  if (!flags.parse(argc, argv))
    return 0;
  auto node = flags.node_binary();

  namespace fs = std::filesystem;
  for (const auto* file : {images_file, labels_file}) {
    if (!fs::exists(fs::path{data_dir} / file)) {
      std::cout << "Fashion-MNIST not found: " << data_dir << "/" << file
                << " is missing.\n"
                   "Install the Debian package dataset-fashion-mnist "
                   "(scripts/setup.sh does) or pass --data DIR.\n"
                   "Nothing to do."
                << std::endl;
      return 0;
    }
  }

  support::local_cluster nodes{node, {{"local", 1}}};
  auto target = nodes.target("local", 0);
  std::cout << "machine A: " << target << " (/job:local/task:0)\n"
            << "data: " << data_dir << std::endl;

  // 1. File order: the same reading pipeline into a plain FIFO batch,
  //    so the first labels can be checked against the known ones.
  std::cout << "\n== In file order: batch(..., batch_size=10) ==" << std::endl;
  {
    graph g;
    auto as_default = g.as_default();
    auto ex = read_example(data_dir);
    batch_options opts;
    opts.num_threads = 1;
    auto xs = batch({ex.image, ex.label, ex.image_key, ex.label_key}, 10,
                    opts);
    with_pipeline(target, g, [&](session& sess) {
      auto vals = sess.run({xs[0], xs[1], xs[2], xs[3]});
      auto records = aligned_records(vals[2], vals[3]);
      std::cout << "records: " << join(records) << '\n'
                << "labels:  " << vals[1].to_string() << '\n';
      for (int64_t i = 0; i < 3; ++i)
        std::cout << "  " << vals[1].flat<int32_t>()[i] << " = "
                  << class_names[vals[1].flat<int32_t>()[i]] << '\n';
      std::cout << "record 0 (" << class_names[vals[1].flat<int32_t>()[0]]
                << "), every other row:\n";
      draw(vals[0], 0);
      std::cout << std::flush;
    });
  }

  // 2. The shuffled pipeline. The two reads (image and label) are ops of
  //    one step, the step the queue runner's enqueue runs, so with one
  //    thread image i and label i are always read together. With several
  //    threads, two steps could interleave their reads (thread 1 reads
  //    image i, thread 2 image i+1 and label i, thread 1 label i+1) and
  //    pair images with wrong labels: hence num_threads = 1. The readers'
  //    keys ride along in the batch to check it.
  std::cout << "\n== shuffle_batch(..., batch_size=32, capacity=196, "
               "min_after_dequeue=100) =="
            << std::endl;
  {
    graph g;
    auto as_default = g.as_default();
    auto ex = read_example(data_dir);
    const int32_t batch_size = 32;
    const int32_t min_after_dequeue = 100;
    const int32_t capacity = min_after_dequeue + 3 * batch_size;
    batch_options opts;
    opts.num_threads = 1;
    opts.seed = 42;
    auto xs = shuffle_batch({ex.image, ex.label, ex.image_key,
                             ex.label_key},
                            batch_size, capacity, min_after_dequeue, opts);
    auto image_batch = xs[0];
    auto label_batch = xs[1];
    std::cout << "image_batch: " << image_batch.shape().to_string()
              << ", label_batch: " << label_batch.shape().to_string()
              << std::endl;
    with_pipeline(target, g, [&](session& sess) {
      for (int step = 0; step < 3; ++step) {
        auto vals = sess.run({image_batch, label_batch, xs[2], xs[3]});
        auto records = aligned_records(vals[2], vals[3]);
        std::vector<int64_t> first(records.begin(), records.begin() + 8);
        std::cout << "batch " << step << ": images "
                  << py_shape(vals[0].shape()) << ", labels "
                  << py_shape(vals[1].shape()) << '\n'
                  << "  labels:  " << vals[1].to_string() << '\n'
                  << "  records: " << join(first) << " ...\n"
                  << "  all 32 images came with their own labels"
                  << std::endl;
      }
    });
  }
  std::cout << "\ncoord.request_stop(); coord.join(): done" << std::endl;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed004b_readers",
                        [&] { return run(argc, argv); });
}
