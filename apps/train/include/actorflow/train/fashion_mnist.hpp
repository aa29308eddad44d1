#pragma once

// Fashion-MNIST (and MNIST) from their gzip IDX files, as actorflow-train
// reads them (installed for programs of your own: CMake target
// actorflow::train, which links zlib): the images stay bytes in memory (47 MB for the training set) and become
// float32 in [0, 1] one mini-batch at a time; labels are int32.
//
//   auto train = fashion_mnist::load_split(dir, "train");  // 60000
//   auto test = fashion_mnist::load_split(dir, "t10k");    // 10000
//   fashion_mnist::batcher batches{train, 100, seed};
//   auto [x, y] = batches.next();   // [100, 784] float32, [100] int32
//
// Errors are std::runtime_error naming the file: missing, not gzip or
// truncated, a wrong IDX magic number or dimensions, or image and label
// counts that differ.

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph/tensor.hpp"

namespace actorflow::fashion_mnist {

inline constexpr const char* default_dir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t rows = 28;
inline constexpr int64_t cols = 28;
inline constexpr int64_t pixels = rows * cols;
inline constexpr int num_classes = 10;

/// One split (train or test) as read from disk.
struct dataset {
  /// `size() * pixels` bytes, row-major images one after the other.
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;

  int64_t size() const noexcept {
    return static_cast<int64_t>(labels.size());
  }
};

/// "<dir>/<split>-images-idx3-ubyte.gz" and the labels next to it.
inline std::string images_path(const std::string& dir,
                               const std::string& split) {
  return (std::filesystem::path{dir} / (split + "-images-idx3-ubyte.gz"))
    .string();
}
inline std::string labels_path(const std::string& dir,
                               const std::string& split) {
  return (std::filesystem::path{dir} / (split + "-labels-idx1-ubyte.gz"))
    .string();
}

/// The four files of the dataset that are missing from `dir` (empty if all
/// are there).
inline std::vector<std::string> missing_files(const std::string& dir) {
  std::vector<std::string> result;
  for (const char* split : {"train", "t10k"})
    for (const auto& path : {images_path(dir, split), labels_path(dir, split)})
      if (!std::filesystem::is_regular_file(path))
        result.push_back(path);
  return result;
}

namespace detail {

/// A whole gzip file (a plain file is read as is, as zlib does).
inline std::vector<uint8_t> read_gzip(const std::string& path) {
  if (!std::filesystem::is_regular_file(path))
    throw std::runtime_error(path + ": no such file");
  gzFile file = ::gzopen(path.c_str(), "rb");
  if (file == nullptr)
    throw std::runtime_error(path + ": cannot open");
  ::gzbuffer(file, 1 << 17);
  std::vector<uint8_t> data;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    int n = ::gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      std::string why = ::gzerror(file, &code);
      ::gzclose(file);
      throw std::runtime_error(path + ": corrupt gzip data (" + why + ")");
    }
    if (n == 0)
      break;
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
  ::gzclose(file);
  return data;
}

inline uint32_t big_endian(const std::vector<uint8_t>& data, size_t at) {
  return (uint32_t{data[at]} << 24) | (uint32_t{data[at + 1]} << 16)
         | (uint32_t{data[at + 2]} << 8) | uint32_t{data[at + 3]};
}

} // namespace detail

/// An IDX3 file of 28x28 uint8 images: the pixel bytes.
inline std::vector<uint8_t> read_images(const std::string& path,
                                        int64_t& count) {
  auto data = detail::read_gzip(path);
  if (data.size() < 16 || detail::big_endian(data, 0) != 0x0803)
    throw std::runtime_error(path + ": not an IDX file of uint8 images "
                             "(magic number 2051 expected)");
  count = detail::big_endian(data, 4);
  auto r = detail::big_endian(data, 8);
  auto c = detail::big_endian(data, 12);
  if (r != rows || c != cols)
    throw std::runtime_error(path + ": images are " + std::to_string(r) + "x"
                             + std::to_string(c) + ", expected 28x28");
  auto want = static_cast<size_t>(count * pixels);
  if (data.size() - 16 != want)
    throw std::runtime_error(path + ": " + std::to_string(data.size() - 16)
                             + " bytes of pixels for "
                             + std::to_string(count) + " images (expected "
                             + std::to_string(want) + ")");
  data.erase(data.begin(), data.begin() + 16);
  return data;
}

/// An IDX1 file of uint8 labels, as int32 (each checked to be < 10).
inline std::vector<int32_t> read_labels(const std::string& path) {
  auto data = detail::read_gzip(path);
  if (data.size() < 8 || detail::big_endian(data, 0) != 0x0801)
    throw std::runtime_error(path + ": not an IDX file of uint8 labels "
                             "(magic number 2049 expected)");
  auto count = detail::big_endian(data, 4);
  if (data.size() - 8 != count)
    throw std::runtime_error(path + ": " + std::to_string(data.size() - 8)
                             + " labels, the header says "
                             + std::to_string(count));
  std::vector<int32_t> labels(data.begin() + 8, data.end());
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw std::runtime_error(path + ": label " + std::to_string(labels[i])
                               + " of example " + std::to_string(i)
                               + " is not a class 0..9");
  return labels;
}

/// Split "train" or "t10k" of the dataset in `dir`.
inline dataset load_split(const std::string& dir, const std::string& split) {
  dataset ds;
  int64_t count = 0;
  ds.images = read_images(images_path(dir, split), count);
  ds.labels = read_labels(labels_path(dir, split));
  if (count != ds.size())
    throw std::runtime_error(images_path(dir, split) + " has "
                             + std::to_string(count) + " images but "
                             + labels_path(dir, split) + " "
                             + std::to_string(ds.size()) + " labels");
  return ds;
}

/// Examples [begin, begin + n) of `ds` picked through `order` (identity if
/// empty): images [n, 784] (or `image_shape` with n in front) float32 in
/// [0, 1], labels [n] int32.
inline std::pair<tensor, tensor>
make_batch(const dataset& ds, const std::vector<int64_t>& order,
           int64_t begin, int64_t n, const std::vector<int64_t>& image_shape
                                     = {pixels}) {
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), image_shape.begin(), image_shape.end());
  // Every element is written below: no zero fill first.
  auto x = tensor::uninitialized(dtype::float32, tensor_shape{dims});
  auto y = tensor::uninitialized(dtype::int32, tensor_shape{n});
  auto xs = x.flat<float>();
  auto ys = y.flat<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    auto example = order.empty() ? begin + i
                                 : order[static_cast<size_t>(begin + i)];
    const auto* src = ds.images.data() + example * pixels;
    auto* dst = xs.data() + i * pixels;
    for (int64_t p = 0; p < pixels; ++p)
      dst[p] = static_cast<float>(src[p]) * (1.0f / 255.0f);
    ys[static_cast<size_t>(i)] = ds.labels[static_cast<size_t>(example)];
  }
  return {std::move(x), std::move(y)};
}

/// Shuffled mini-batches over epochs: every epoch visits each example once
/// in a new order drawn from `seed`; a batch never spans two epochs (the
/// last examples of an epoch that do not fill a batch wait for the next
/// shuffle, as `tf.data`'s drop_remainder).
class batcher {
public:
  batcher(const dataset& ds, int64_t batch_size, uint64_t seed,
          std::vector<int64_t> image_shape = {pixels})
    : ds_(ds), batch_size_(batch_size), rng_(seed),
      image_shape_(std::move(image_shape)),
      order_(static_cast<size_t>(ds.size())) {
    if (batch_size <= 0 || batch_size > ds.size())
      throw std::invalid_argument("batch size "
                                  + std::to_string(batch_size)
                                  + " must be in 1.."
                                  + std::to_string(ds.size()));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    shuffle();
  }

  std::pair<tensor, tensor> next() {
    if (pos_ + batch_size_ > ds_.size()) {
      shuffle();
      ++epoch_;
    }
    auto batch = make_batch(ds_, order_, pos_, batch_size_, image_shape_);
    pos_ += batch_size_;
    return batch;
  }

  /// Completed passes over the data.
  int64_t epoch() const noexcept {
    return epoch_;
  }

private:
  void shuffle() {
    std::shuffle(order_.begin(), order_.end(), rng_);
    pos_ = 0;
  }

  const dataset& ds_;
  int64_t batch_size_;
  std::mt19937_64 rng_;
  std::vector<int64_t> image_shape_;
  std::vector<int64_t> order_;
  int64_t pos_ = 0;
  int64_t epoch_ = 0;
};

} // namespace actorflow::fashion_mnist
