#pragma once

#include <complex>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "actorflow/graph/status.hpp"

namespace actorflow {

/// Element types, numbered as TensorFlow's DataType enum.
enum class dtype : uint8_t {
  invalid = 0,
  float32 = 1,
  float64 = 2,
  int32 = 3,
  uint8 = 4,
  int16 = 5,
  int8 = 6,
  string = 7,
  complex64 = 8,
  int64 = 9,
  bool_ = 10,
  uint16 = 17,
  complex128 = 18,
  float16 = 19,
};

/// IEEE 754 binary16, TensorFlow's `half` (the layout of Eigen::half and
/// numpy's float16). Tensors store it; conversions go through float,
/// rounding to nearest even; kernels compute on Eigen::half.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float x) noexcept;
  explicit operator float() const noexcept;
  /// Compares as the floats they stand for (NaN unequal, -0 == +0).
  friend bool operator==(half x, half y) noexcept {
    return static_cast<float>(x) == static_cast<float>(y);
  }
  friend bool operator<(half x, half y) noexcept {
    return static_cast<float>(x) < static_cast<float>(y);
  }
};

/// True if `x` numbers one of the dtypes above (not dtype::invalid): for
/// decoders that read a dtype as a byte.
bool known_dtype(uint8_t x);

/// TensorFlow's name of a dtype: "float32", "int64", "bool", ...
std::string_view to_string(dtype t);

/// TensorFlow's C++ name of a dtype (DataTypeString), as its kernels print
/// it in messages: "float", "double", "half", "int32", "int64", "bool",
/// "string".
std::string_view tf_type_name(dtype t);

/// Parses a dtype name ("float32", "float", "double", "half", "int32",
/// "complex64", ...).
/// Returns dtype::invalid for an unknown name.
dtype parse_dtype(std::string_view name);

/// Size of one element in bytes; 0 for strings.
size_t dtype_size(dtype t);

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> : std::integral_constant<dtype, dtype::float32> {};
template <>
struct dtype_of<double> : std::integral_constant<dtype, dtype::float64> {};
template <>
struct dtype_of<int32_t> : std::integral_constant<dtype, dtype::int32> {};
template <>
struct dtype_of<int64_t> : std::integral_constant<dtype, dtype::int64> {};
template <>
struct dtype_of<uint8_t> : std::integral_constant<dtype, dtype::uint8> {};
template <>
struct dtype_of<int8_t> : std::integral_constant<dtype, dtype::int8> {};
template <>
struct dtype_of<int16_t> : std::integral_constant<dtype, dtype::int16> {};
template <>
struct dtype_of<uint16_t> : std::integral_constant<dtype, dtype::uint16> {};
template <>
struct dtype_of<half> : std::integral_constant<dtype, dtype::float16> {};
template <>
struct dtype_of<std::complex<float>>
  : std::integral_constant<dtype, dtype::complex64> {};
template <>
struct dtype_of<std::complex<double>>
  : std::integral_constant<dtype, dtype::complex128> {};
template <>
struct dtype_of<bool> : std::integral_constant<dtype, dtype::bool_> {};
template <>
struct dtype_of<std::string> : std::integral_constant<dtype, dtype::string> {
};

/// A shape whose rank or dimensions may be unknown (-1), as placeholders
/// allow. A default-constructed shape is a scalar.
class tensor_shape {
public:
  tensor_shape() = default;
  tensor_shape(std::initializer_list<int64_t> dims) : dims_(dims) {
    // nop
  }
  explicit tensor_shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {
    // nop
  }
  /// A shape of unknown rank.
  static tensor_shape unknown();

  bool unknown_rank() const noexcept {
    return unknown_rank_;
  }
  /// Number of dimensions, -1 when the rank is unknown.
  int rank() const noexcept {
    return unknown_rank_ ? -1 : static_cast<int>(dims_.size());
  }
  int64_t dim(int i) const {
    return dims_.at(static_cast<size_t>(i));
  }
  const std::vector<int64_t>& dims() const noexcept {
    return dims_;
  }
  bool fully_defined() const noexcept;
  /// Product of the dimensions (1 for a scalar); -1 unless fully defined,
  /// and -1 if the product of its non-zero dimensions exceeds int64 (no
  /// tensor has such a shape; checked_num_elements says why).
  int64_t num_elements() const noexcept;
  /// True if some fully defined shape matches both.
  bool is_compatible_with(const tensor_shape& other) const noexcept;
  /// "[2,3]", "[?,3]", "<unknown>".
  std::string to_string() const;

  friend bool operator==(const tensor_shape& x, const tensor_shape& y) {
    return x.unknown_rank_ == y.unknown_rank_ && x.dims_ == y.dims_;
  }

private:
  std::vector<int64_t> dims_;
  bool unknown_rank_ = false;
};

// -- checked sizes --------------------------------------------------------------
//
// Every tensor's shape keeps one invariant: its dimensions are >= 0 and the
// product of its non-zero dimensions fits in int64. Then no product of some
// of its dimensions, in any order (strides, blocks, row sizes), overflows.
// Dimensions that come from outside (a peer's bytes, a file, an input
// tensor's values, a client's list) go through checked_num_elements before
// any arithmetic on them; the tensor constructors check it again, with the
// byte size, and throw op_error (InvalidArgument) where it fails.

/// The number of elements of a shape with dimensions `dims` (0 if one of
/// them is 0), checked as TensorFlow's TensorShape checks dimensions built
/// from untrusted values: InvalidArgument "Dimension -3 must be >= 0" for a
/// negative dimension, "Encountered overflow when multiplying A with B,
/// result: -1 (shape [...] has too many elements)" when the product of the
/// non-zero dimensions exceeds int64. `out` is untouched on failure.
status checked_num_elements(std::span<const int64_t> dims, int64_t& out);

/// As above for a shape; a shape of unknown rank is InvalidArgument too.
status checked_num_elements(const tensor_shape& shape, int64_t& out);

/// The elements and the bytes of element storage (sizeof(std::string) per
/// string) of a tensor of `type` and `shape`, checked: the element count as
/// checked_num_elements, and the bytes must fit in int64 (InvalidArgument
/// "Encountered overflow when multiplying N with W, result: -1 (the bytes
/// of a float32 tensor of shape [...])"). `type` must not be invalid.
status checked_tensor_size(dtype type, const tensor_shape& shape,
                           int64_t& elements, size_t& bytes);

/// a * b for a, b >= 0; -1 if the product exceeds int64 or an operand is
/// negative (TensorFlow's MultiplyWithoutOverflow).
int64_t multiply_without_overflow(int64_t a, int64_t b) noexcept;

/// a + b for a, b >= 0; -1 if the sum exceeds int64 or an operand is
/// negative.
int64_t add_without_overflow(int64_t a, int64_t b) noexcept;

/// A typed n-dimensional array. Copies share the buffer (a tensor is
/// immutable once handed to another owner); `unique()` tells whether it may
/// be updated in place.
class tensor {
public:
  /// An empty, invalid tensor (dtype::invalid).
  tensor() = default;
  /// A zero-filled (or empty-string-filled) tensor. The shape must be fully
  /// defined.
  tensor(dtype type, tensor_shape shape);
  /// As above, but the element bytes of a non-string tensor are left
  /// unspecified: for a caller about to overwrite all of them (decoding,
  /// receiving). Strings are still empty.
  static tensor uninitialized(dtype type, tensor_shape shape);
  /// A tensor over `data`, which it does not own (a received tensor in a
  /// ring of shared memory): `owner` lives while any tensor shares this
  /// buffer, and what it frees on its end is up to it. `data` must hold
  /// the elements of a non-string dtype, aligned for it (64 bytes, as
  /// the tensors this class allocates, is best for Eigen). Throws
  /// op_error (InvalidArgument) for a string dtype, a shape that is not
  /// fully defined or no owner.
  static tensor borrow(dtype type, tensor_shape shape, void* data,
                       std::shared_ptr<void> owner);
  /// True if the buffer is borrowed (see borrow): whoever keeps such a
  /// tensor for long (a variable's value, a queue's element, a fetched
  /// result) keeps owned() instead, so that its owner's room is not held.
  bool borrowed() const noexcept;
  /// This tensor, or a deep copy of it when its buffer is borrowed. On
  /// an rvalue a tensor that is not borrowed moves (no copy of its shape).
  tensor owned() const& {
    return borrowed() ? deep_copy() : *this;
  }
  tensor owned() && {
    return borrowed() ? deep_copy() : std::move(*this);
  }

  template <class T>
  static tensor scalar(T value) {
    using U = storage_t<T>;
    tensor t{dtype_of<U>::value, tensor_shape{}};
    t.flat<U>()[0] = U(std::move(value));
    return t;
  }

  template <class T>
  static tensor from_vector(std::vector<T> values, tensor_shape shape) {
    using U = storage_t<T>;
    tensor t{dtype_of<U>::value, std::move(shape)};
    auto dst = t.flat<U>();
    if (dst.size() != values.size())
      throw op_error(error_code::invalid_argument,
                     "tensor of shape " + t.shape().to_string() + " needs "
                       + std::to_string(dst.size()) + " values, got "
                       + std::to_string(values.size()));
    for (size_t i = 0; i < values.size(); ++i)
      dst[i] = U(values[i]);
    return t;
  }

  /// A 1-D tensor.
  template <class T>
  static tensor vec(std::vector<T> values) {
    auto n = static_cast<int64_t>(values.size());
    return from_vector(std::move(values), tensor_shape{n});
  }

  bool valid() const noexcept {
    return type_ != dtype::invalid;
  }
  dtype type() const noexcept {
    return type_;
  }
  const tensor_shape& shape() const noexcept {
    return shape_;
  }
  int64_t num_elements() const noexcept {
    return num_elements_;
  }
  /// Bytes of element data (for strings: the sum of their lengths).
  size_t byte_size() const noexcept;
  /// True if no other tensor shares this buffer.
  bool unique() const noexcept {
    return buf_.use_count() <= 1;
  }
  /// The same buffer under another shape with as many elements.
  tensor reshaped(tensor_shape shape) const;
  /// A deep copy with a buffer of its own.
  tensor deep_copy() const;
  /// Rows [begin, end) of dimension 0, sharing this tensor's buffer (TF's
  /// Tensor::Slice): nothing is copied, and the buffer lives as long as
  /// any slice of it. Throws op_error (InvalidArgument) for a scalar or a
  /// range outside [0, dim 0].
  tensor slice(int64_t begin, int64_t end) const;
  /// Row `index` of dimension 0, shaped as the remaining dimensions (TF's
  /// Tensor::SubSlice), sharing the buffer. Throws as slice.
  tensor sub_slice(int64_t index) const;
  /// If `rows` are adjacent sub_slices of one buffer, in order and all of
  /// the same shape (what slicing a batch row by row leaves), the batch
  /// they form, shaped [rows.size(), row dims...], as one view of that
  /// buffer; an invalid tensor otherwise (then the caller copies).
  static tensor join_rows(const std::vector<tensor>& rows);

  /// Typed view of the elements in row-major order. Throws `op_error`
  /// (Internal) if T does not match the dtype.
  template <class T>
  std::span<T> flat() {
    check_type(dtype_of<std::remove_const_t<T>>::value);
    return {static_cast<T*>(raw()), static_cast<size_t>(num_elements_)};
  }
  template <class T>
  std::span<const T> flat() const {
    check_type(dtype_of<T>::value);
    return {static_cast<const T*>(raw()),
            static_cast<size_t>(num_elements_)};
  }
  /// The single element of a scalar (or one-element) tensor.
  template <class T>
  T scalar_value() const {
    auto xs = flat<T>();
    if (xs.size() != 1)
      throw op_error(error_code::invalid_argument,
                     "expected a scalar, got shape " + shape_.to_string());
    return xs[0];
  }

  /// Raw element bytes (not for strings).
  void* raw() noexcept;
  const void* raw() const noexcept;

  /// The values as TensorFlow (numpy) prints them: "3.0", "[1. 2.]",
  /// "[[1 2]\n [3 4]]", "Hello".
  std::string to_string() const;
  /// "Tensor<type: float32 shape: [2] values: ...>".
  std::string debug_string() const;

  /// Element-wise equality of dtype, shape and values.
  friend bool operator==(const tensor& x, const tensor& y);

private:
  template <class T>
  using storage_t = std::conditional_t<
    std::is_same_v<std::decay_t<T>, const char*>
      || std::is_same_v<std::decay_t<T>, char*>
      || std::is_same_v<std::decay_t<T>, std::string_view>,
    std::string, std::decay_t<T>>;
  void check_type(dtype expected) const;
  struct buffer;
  dtype type_ = dtype::invalid;
  tensor_shape shape_;
  int64_t num_elements_ = 0;
  /// Where this tensor's elements start in buf_ (non-zero for slices).
  int64_t offset_ = 0;
  std::shared_ptr<buffer> buf_;
};

} // namespace actorflow
