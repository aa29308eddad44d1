#include "actorflow/graph/tensor.hpp"

#include "actorflow/graph/tensor_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sys/mman.h>
#include <new>
#include <utility>
#include <vector>
#include <sstream>

namespace actorflow {

// -- tensor_shape -------------------------------------------------------------

tensor_shape tensor_shape::unknown() {
  tensor_shape result;
  result.unknown_rank_ = true;
  return result;
}

bool tensor_shape::fully_defined() const noexcept {
  if (unknown_rank_)
    return false;
  for (auto d : dims_)
    if (d < 0)
      return false;
  return true;
}

namespace {

constexpr int64_t max_int64 = std::numeric_limits<int64_t>::max();

// What count_elements found.
struct element_count {
  int64_t n = 1;
  // The first negative dimension, or the two factors that overflowed.
  int64_t bad = 0;
  int64_t lhs = 0;
  enum { ok, negative, overflow } result = ok;
};

// The product of `dims`, 0 if one is 0, but only if the product of the
// non-zero ones fits in int64: then every partial product, in any order,
// fits too.
element_count count_elements(std::span<const int64_t> dims) noexcept {
  element_count c;
  int64_t nonzero = 1;
  bool zero = false;
  for (auto d : dims) {
    if (d < 0) {
      c.result = element_count::negative;
      c.bad = d;
      return c;
    }
    if (d == 0) {
      zero = true;
      continue;
    }
    if (nonzero > max_int64 / d) {
      c.result = element_count::overflow;
      c.lhs = nonzero;
      c.bad = d;
      return c;
    }
    nonzero *= d;
  }
  c.n = zero ? 0 : nonzero;
  return c;
}

std::string overflow_message(int64_t lhs, int64_t rhs,
                             const std::string& what) {
  return "Encountered overflow when multiplying " + std::to_string(lhs)
         + " with " + std::to_string(rhs) + ", result: -1 (" + what + ")";
}

} // namespace

int64_t multiply_without_overflow(int64_t a, int64_t b) noexcept {
  if (a < 0 || b < 0)
    return -1;
  if (a != 0 && b > max_int64 / a)
    return -1;
  return a * b;
}

int64_t add_without_overflow(int64_t a, int64_t b) noexcept {
  if (a < 0 || b < 0 || a > max_int64 - b)
    return -1;
  return a + b;
}

status checked_num_elements(std::span<const int64_t> dims, int64_t& out) {
  auto c = count_elements(dims);
  switch (c.result) {
    case element_count::ok:
      out = c.n;
      return {};
    case element_count::negative:
      return invalid_argument("Dimension " + std::to_string(c.bad)
                              + " must be >= 0");
    case element_count::overflow:
      break;
  }
  return invalid_argument(overflow_message(
    c.lhs, c.bad,
    "shape "
      + tensor_shape{std::vector<int64_t>(dims.begin(), dims.end())}
          .to_string()
      + " has too many elements"));
}

status checked_num_elements(const tensor_shape& shape, int64_t& out) {
  if (shape.unknown_rank())
    return invalid_argument("a shape of unknown rank has no element count");
  return checked_num_elements(std::span<const int64_t>{shape.dims()}, out);
}

status checked_tensor_size(dtype type, const tensor_shape& shape,
                           int64_t& elements, size_t& bytes) {
  int64_t n = 0;
  if (auto st = checked_num_elements(shape, n); !st.ok())
    return st;
  auto width = static_cast<int64_t>(
    type == dtype::string ? sizeof(std::string) : dtype_size(type));
  auto total = multiply_without_overflow(n, width);
  if (total < 0)
    return invalid_argument(overflow_message(
      n, width,
      "the bytes of a " + std::string{actorflow::to_string(type)}
        + " tensor of shape " + shape.to_string()));
  elements = n;
  bytes = static_cast<size_t>(total);
  return {};
}

int64_t tensor_shape::num_elements() const noexcept {
  if (unknown_rank_)
    return -1;
  auto c = count_elements(dims_);
  return c.result == element_count::ok ? c.n : -1;
}

bool tensor_shape::is_compatible_with(
  const tensor_shape& other) const noexcept {
  if (unknown_rank_ || other.unknown_rank_)
    return true;
  if (dims_.size() != other.dims_.size())
    return false;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i])
      return false;
  return true;
}

std::string tensor_shape::to_string() const {
  if (unknown_rank_)
    return "<unknown>";
  std::string result = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0)
      result += ',';
    result += dims_[i] < 0 ? std::string{"?"} : std::to_string(dims_[i]);
  }
  result += ']';
  return result;
}

// -- tensor buffer ------------------------------------------------------------

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

// The budget (tensor_memory.hpp). The counters are relaxed: they order
// nothing, and an allocation costs one add, its free one subtract.
// live_bytes changes with every tensor, on every thread: a cache line of
// its own, so that reading the limit does not wait for it.
constexpr size_t limit_unset = std::numeric_limits<size_t>::max();
alignas(64) std::atomic<size_t> live_bytes{0};
alignas(64) std::atomic<size_t> cached_bytes{0};
alignas(64) std::atomic<size_t> limit_setting{limit_unset};
thread_local const tensor_memory_check* innermost_check = nullptr;

size_t current_limit() noexcept {
  auto limit = limit_setting.load(relaxed);
  if (limit != limit_unset)
    return limit;
  static const size_t fallback = []() noexcept {
    try {
      return default_tensor_memory_limit();
    } catch (...) {
      return size_t{0};
    }
  }();
  return fallback;
}

[[noreturn, gnu::cold]] void refuse(const tensor_memory_check& check,
                                    size_t bytes, size_t in_use,
                                    size_t limit, dtype type,
                                    const tensor_shape& shape) {
  std::string msg = "OOM when allocating tensor with shape"
                    + shape.to_string() + " and type "
                    + std::string{tf_type_name(type)};
  if (!check.device().empty())
    msg += " on " + std::string{check.device()};
  msg += " by allocator cpu: ";
  msg += check.op().empty() ? std::string{"the tensor"}
                            : std::string{check.op()};
  msg += " needs " + std::to_string(bytes)
         + " bytes, the tensor memory limit is " + std::to_string(limit)
         + " bytes and " + std::to_string(in_use) + " are in use";
  throw op_error(error_code::resource_exhausted, std::move(msg));
}

// Counts `bytes` of a new buffer as in use; under a tensor_memory_check,
// throws instead (counting nothing) if they would pass the limit.
void charge(size_t bytes, dtype type, const tensor_shape& shape) {
  auto before = live_bytes.fetch_add(bytes, relaxed);
  const auto* check = innermost_check;
  if (check == nullptr)
    return;
  auto limit = current_limit();
  if (limit == 0 || (before <= limit && bytes <= limit - before))
    return;
  live_bytes.fetch_sub(bytes, relaxed);
  refuse(*check, bytes, before, limit, type, shape);
}

void refund(size_t bytes) noexcept {
  live_bytes.fetch_sub(bytes, relaxed);
}

// Element storage of 256 KiB and more comes straight from mmap, and freed
// blocks are kept for reuse, in two bounded tiers; smaller buffers come
// from malloc. Why not malloc for all:
// - glibc raises its mmap threshold to the size of each mmap'd block
//   freed (up to 32 MiB), after which ~1 MiB tensors came from the
//   per-thread arenas: streaming 1 GiB through a queue of 1 MiB elements
//   left a ps at 700+ MiB resident (memory freed on one thread's arena,
//   allocated again on another's, never returned).
// - A fresh mmap'd block is zeroed by the kernel page by page on first
//   touch; with munmap on every free, each large transfer paid that
//   again (a 64 MiB fetch was 4x slower per byte than a 16 MiB one).
// The cache takes exact sizes only: steps repeat their shapes. Its blocks
// are not counted as in use (a step gets them back at once), but it keeps
// none that would take the live tensors and the cache past the limit, and
// drops the oldest ones when a fresh block would: under a tight limit the
// memory belongs to the steps, not to the cache.
class block_cache {
public:
  static constexpr size_t mmap_min = size_t{256} << 10;
  static constexpr size_t large_min = size_t{8} << 20;

  /// `n` bytes, 64-byte aligned; `n` as rounded by round(). The caller
  /// has charged them.
  void* allocate(size_t n) {
    if (n < mmap_min)
      return std::aligned_alloc(64, n);
    if (auto* p = tier_of(n).take(n))
      return p;
    auto* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return nullptr;
    trim();
    return p;
  }

  /// The caller has refunded `n`.
  void release(void* p, size_t n) {
    if (n < mmap_min) {
      std::free(p);
      return;
    }
    if (!fits(n) || !tier_of(n).put(p, n))
      ::munmap(p, n);
  }

  /// Unmaps the oldest kept blocks, the large ones first, until the live
  /// tensors and the cache fit in the limit.
  void trim() noexcept {
    auto limit = current_limit();
    if (limit == 0)
      return;
    auto live = live_bytes.load(relaxed);
    auto room = live >= limit ? 0 : limit - live;
    if (cached_bytes.load(relaxed) <= room)
      return;
    large_.evict_to(room);
    medium_.evict_to(room);
  }

  /// The size to allocate for `n` bytes: a multiple of 64, and of the
  /// page size where mmap serves it.
  static size_t round(size_t n) {
    n = n == 0 ? 64 : ((n + 63) / 64) * 64;
    if (n >= mmap_min)
      n = ((n + 4095) / 4096) * 4096;
    return n;
  }

private:
  /// True if keeping a freed block of `n` bytes stays within the limit.
  static bool fits(size_t n) {
    auto limit = current_limit();
    if (limit == 0)
      return true;
    auto used = live_bytes.load(relaxed) + cached_bytes.load(relaxed);
    return used <= limit && n <= limit - used;
  }

  struct tier {
    tier(size_t bytes, size_t count) : max_bytes(bytes), max_blocks(count) {
      // nop
    }
    size_t max_bytes;
    size_t max_blocks;
    std::mutex mtx;
    std::vector<std::pair<size_t, void*>> blocks;
    size_t total = 0;

    void* take(size_t n) {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto i = blocks.begin(); i != blocks.end(); ++i)
        if (i->first == n) {
          auto* p = i->second;
          total -= n;
          cached_bytes.fetch_sub(n, relaxed);
          blocks.erase(i);
          return p;
        }
      return nullptr;
    }

    /// Keeps `p`, evicting the oldest blocks to make room; false if it
    /// cannot fit at all.
    bool put(void* p, size_t n) {
      if (n > max_bytes)
        return false;
      std::vector<std::pair<size_t, void*>> evicted;
      {
        std::lock_guard<std::mutex> guard{mtx};
        while (!blocks.empty()
               && (total + n > max_bytes || blocks.size() >= max_blocks)) {
          evicted.push_back(blocks.front());
          total -= blocks.front().first;
          cached_bytes.fetch_sub(blocks.front().first, relaxed);
          blocks.erase(blocks.begin());
        }
        blocks.emplace_back(n, p);
        total += n;
        cached_bytes.fetch_add(n, relaxed);
      }
      for (auto& [size, block] : evicted)
        ::munmap(block, size);
      return true;
    }

    /// Unmaps the oldest blocks until the whole cache holds at most
    /// `room` bytes, or this tier is empty.
    /// One block at a time, unmapped outside the lock; allocates nothing.
    void evict_to(size_t room) noexcept {
      for (;;) {
        std::pair<size_t, void*> oldest;
        {
          std::lock_guard<std::mutex> guard{mtx};
          if (blocks.empty() || cached_bytes.load(relaxed) <= room)
            return;
          oldest = blocks.front();
          total -= oldest.first;
          cached_bytes.fetch_sub(oldest.first, relaxed);
          blocks.erase(blocks.begin());
        }
        ::munmap(oldest.second, oldest.first);
      }
    }
  };

  tier& tier_of(size_t n) {
    return n >= large_min ? large_ : medium_;
  }

  /// 256 KiB up to 8 MiB: what a step's activations and a queue's
  /// elements are made of.
  tier medium_{size_t{32} << 20, 64};
  /// 8 MiB and more: a few whole tensors.
  tier large_{size_t{256} << 20, 8};
};

block_cache& buffer_blocks() {
  // Never destroyed: tensors may be freed during static destruction.
  static auto* cache = new block_cache;
  return *cache;
}

} // namespace

void set_tensor_memory_limit(size_t bytes) noexcept {
  limit_setting.store(bytes, relaxed);
  buffer_blocks().trim();
}

size_t tensor_memory_limit() noexcept {
  return current_limit();
}

size_t tensor_memory_in_use() noexcept {
  return live_bytes.load(relaxed);
}

size_t tensor_memory_cached() noexcept {
  return cached_bytes.load(relaxed);
}

tensor_memory_check::tensor_memory_check(std::string_view op,
                                         std::string_view device) noexcept
  : op_(op), device_(device), outer_(innermost_check) {
  innermost_check = this;
}

tensor_memory_check::~tensor_memory_check() {
  innermost_check = outer_;
}

// Element storage: 64-byte aligned so Eigen may vectorize over it; strings
// are constructed in place.
struct tensor::buffer {
  // `n_bytes`: n elements' storage, as checked_tensor_size computed it
  // for `shape`. Charged to the budget (tensor_memory.hpp) while it lives.
  buffer(dtype t, int64_t n, size_t n_bytes, const tensor_shape& shape,
         bool zero = true)
    : type(t), count(n) {
    rounded = block_cache::round(n_bytes);
    charge(rounded, t, shape);
    data = buffer_blocks().allocate(rounded);
    if (data == nullptr) {
      refund(rounded);
      throw std::bad_alloc{};
    }
    if (t == dtype::string) {
      auto strs = static_cast<std::string*>(data);
      for (int64_t i = 0; i < n; ++i)
        new (strs + i) std::string();
    } else if (n_bytes > 0 && zero) {
      std::memset(data, 0, n_bytes);
    }
  }
  // Elements of a non-string dtype that `owner` keeps (tensor::borrow).
  buffer(dtype t, int64_t n, void* external, std::shared_ptr<void> keeper)
    : type(t), count(n), data(external), owner(std::move(keeper)) {
    // nop
  }
  ~buffer() {
    if (owner)
      return;
    if (type == dtype::string) {
      auto strs = static_cast<std::string*>(data);
      for (int64_t i = 0; i < count; ++i)
        strs[i].~basic_string();
    }
    refund(rounded);
    buffer_blocks().release(data, rounded);
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  dtype type;
  int64_t count;
  size_t rounded = 0;
  void* data = nullptr;
  std::shared_ptr<void> owner;
};

tensor::tensor(dtype type, tensor_shape shape)
  : type_(type), shape_(std::move(shape)) {
  if (type == dtype::invalid)
    throw op_error(error_code::invalid_argument, "tensor of invalid dtype");
  if (!shape_.fully_defined())
    throw op_error(error_code::invalid_argument,
                   "tensor needs a fully defined shape, got "
                     + shape_.to_string());
  size_t bytes = 0;
  throw_if_error(checked_tensor_size(type, shape_, num_elements_, bytes));
  buf_ = std::make_shared<buffer>(type, num_elements_, bytes, shape_);
}

tensor tensor::uninitialized(dtype type, tensor_shape shape) {
  if (type == dtype::invalid || !shape.fully_defined())
    return tensor{type, std::move(shape)};  // throws as the constructor
  tensor result;
  result.type_ = type;
  result.shape_ = std::move(shape);
  size_t bytes = 0;
  throw_if_error(
    checked_tensor_size(type, result.shape_, result.num_elements_, bytes));
  result.buf_ = std::make_shared<buffer>(type, result.num_elements_, bytes,
                                         result.shape_, false);
  return result;
}

tensor tensor::borrow(dtype type, tensor_shape shape, void* data,
                      std::shared_ptr<void> owner) {
  if (type == dtype::string || type == dtype::invalid
      || !shape.fully_defined() || owner == nullptr)
    throw op_error(error_code::invalid_argument,
                   "a borrowed buffer needs an owner, a numeric dtype and a "
                   "fully defined shape, got "
                     + std::string{actorflow::to_string(type)} + " "
                     + shape.to_string());
  tensor result;
  result.type_ = type;
  result.shape_ = std::move(shape);
  size_t bytes = 0;
  throw_if_error(
    checked_tensor_size(type, result.shape_, result.num_elements_, bytes));
  result.buf_ = std::make_shared<buffer>(type, result.num_elements_, data,
                                         std::move(owner));
  return result;
}

bool tensor::borrowed() const noexcept {
  return buf_ != nullptr && buf_->owner != nullptr;
}

size_t tensor::byte_size() const noexcept {
  if (!valid())
    return 0;
  if (type_ != dtype::string)
    return dtype_size(type_) * static_cast<size_t>(num_elements_);
  size_t n = 0;
  for (auto& s : flat<std::string>())
    n += s.size();
  return n;
}

tensor tensor::reshaped(tensor_shape shape) const {
  if (shape.num_elements() != num_elements_)
    throw op_error(error_code::invalid_argument,
                   "cannot reshape a tensor with "
                     + std::to_string(num_elements_) + " elements to shape "
                     + shape.to_string());
  tensor result = *this;
  result.shape_ = std::move(shape);
  return result;
}

tensor tensor::deep_copy() const {
  if (!valid())
    return {};
  // Every element is overwritten below: no zero fill first.
  auto result = uninitialized(type_, shape_);
  if (type_ == dtype::string) {
    auto src = flat<std::string>();
    auto dst = result.flat<std::string>();
    for (size_t i = 0; i < src.size(); ++i)
      dst[i] = src[i];
  } else {
    std::memcpy(result.raw(), raw(), byte_size());
  }
  return result;
}

tensor tensor::slice(int64_t begin, int64_t end) const {
  if (!valid() || shape_.rank() < 1)
    throw op_error(error_code::invalid_argument,
                   "cannot slice a tensor of shape " + shape_.to_string()
                     + ": it needs at least one dimension");
  auto rows = shape_.dim(0);
  if (begin < 0 || end < begin || end > rows)
    throw op_error(error_code::invalid_argument,
                   "slice [" + std::to_string(begin) + ", "
                     + std::to_string(end) + ") is outside dimension 0 of "
                     + shape_.to_string());
  auto dims = shape_.dims();
  auto row_size = rows > 0 ? num_elements_ / rows : 0;
  dims[0] = end - begin;
  tensor result = *this;
  result.shape_ = tensor_shape{std::move(dims)};
  result.num_elements_ = (end - begin) * row_size;
  result.offset_ = offset_ + begin * row_size;
  return result;
}

tensor tensor::sub_slice(int64_t index) const {
  auto row = slice(index, index + 1);
  const auto& dims = row.shape_.dims();
  row.shape_ = tensor_shape{std::vector<int64_t>(dims.begin() + 1, dims.end())};
  return row;
}

tensor tensor::join_rows(const std::vector<tensor>& rows) {
  if (rows.empty() || !rows.front().valid())
    return {};
  const auto& first = rows.front();
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row.buf_ != first.buf_ || row.type_ != first.type_
        || !(row.shape_ == first.shape_)
        || row.offset_ != first.offset_ + static_cast<int64_t>(i)
                                            * first.num_elements_)
      return {};
  }
  std::vector<int64_t> dims{static_cast<int64_t>(rows.size())};
  const auto& row_dims = first.shape_.dims();
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  tensor result = first;
  result.shape_ = tensor_shape{std::move(dims)};
  result.num_elements_ = first.num_elements_
                         * static_cast<int64_t>(rows.size());
  return result;
}

// Element storage is in slots of the element's size: sizeof(std::string)
// for strings, as the buffer constructs them.
void* tensor::raw() noexcept {
  if (!buf_)
    return nullptr;
  auto width = type_ == dtype::string ? sizeof(std::string)
                                      : dtype_size(type_);
  return static_cast<char*>(buf_->data)
         + static_cast<size_t>(offset_) * width;
}

const void* tensor::raw() const noexcept {
  return const_cast<tensor*>(this)->raw();
}

void tensor::check_type(dtype expected) const {
  if (type_ != expected)
    throw op_error(error_code::internal,
                   "tensor of type " + std::string{actorflow::to_string(type_)}
                     + " accessed as "
                     + std::string{actorflow::to_string(expected)});
}

bool operator==(const tensor& x, const tensor& y) {
  if (x.type_ != y.type_ || !(x.shape_ == y.shape_))
    return false;
  if (!x.valid())
    return true;
  if (x.type_ == dtype::string) {
    auto xs = x.flat<std::string>();
    auto ys = y.flat<std::string>();
    return std::equal(xs.begin(), xs.end(), ys.begin());
  }
  return std::memcmp(x.raw(), y.raw(), x.byte_size()) == 0;
}

} // namespace actorflow
