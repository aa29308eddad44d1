// The dtypes' names and sizes, and float16's conversions (tensor.hpp).

#include "actorflow/graph/tensor.hpp"

#include <array>
#include <cstring>

#include <Eigen/Core>

namespace actorflow {

namespace {

// Every dtype with its TensorFlow (numpy) name and its C++ name as
// TensorFlow's DataTypeString prints it.
struct dtype_names {
  dtype type;
  std::string_view name;
  std::string_view tf_name;
  size_t size;
};

constexpr dtype_names all_dtypes[] = {
  {dtype::float32, "float32", "float", 4},
  {dtype::float64, "float64", "double", 8},
  {dtype::int32, "int32", "int32", 4},
  {dtype::uint8, "uint8", "uint8", 1},
  {dtype::int16, "int16", "int16", 2},
  {dtype::int8, "int8", "int8", 1},
  {dtype::string, "string", "string", 0},
  {dtype::complex64, "complex64", "complex64", 8},
  {dtype::int64, "int64", "int64", 8},
  {dtype::bool_, "bool", "bool", 1},
  {dtype::uint16, "uint16", "uint16", 2},
  {dtype::complex128, "complex128", "complex128", 16},
  {dtype::float16, "float16", "half", 2},
};

// all_dtypes by enum value: dtype_size and to_string run for every tensor
// made, so a lookup rather than a scan.
constexpr auto by_number = [] {
  std::array<const dtype_names*, 32> table{};
  for (auto& d : all_dtypes)
    table[static_cast<size_t>(d.type)] = &d;
  return table;
}();

const dtype_names* find_dtype(dtype t) {
  auto i = static_cast<size_t>(t);
  return i < by_number.size() ? by_number[i] : nullptr;
}

} // namespace

std::string_view to_string(dtype t) {
  auto d = find_dtype(t);
  return d ? d->name : "invalid";
}

bool known_dtype(uint8_t x) {
  return find_dtype(static_cast<dtype>(x)) != nullptr;
}

std::string_view tf_type_name(dtype t) {
  auto d = find_dtype(t);
  return d ? d->tf_name : "invalid";
}

dtype parse_dtype(std::string_view name) {
  for (auto& d : all_dtypes)
    if (d.name == name || d.tf_name == name)
      return d.type;
  return dtype::invalid;
}

size_t dtype_size(dtype t) {
  auto d = find_dtype(t);
  return d ? d->size : 0;
}

// Eigen::half has this layout (one uint16_t); it rounds to nearest even.
static_assert(sizeof(Eigen::half) == sizeof(half));

half::half(float x) noexcept {
  Eigen::half h(x);
  std::memcpy(&bits, &h, sizeof bits);
}

half::operator float() const noexcept {
  return static_cast<float>(Eigen::half(Eigen::half_impl::raw_uint16_to_half(bits)));
}

} // namespace actorflow
