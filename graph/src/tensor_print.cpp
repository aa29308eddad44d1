// Tensors printed as Python and numpy print them (tensor::to_string).

#include "actorflow/graph/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>

namespace actorflow {

namespace {

// Python's repr of a float: shortest round-trip digits (at T's precision:
// numpy's float16 and float32 print so), ".0" for integral values, exponent
// form for very large or small magnitudes.
template <class T>
std::string float_repr(T value) {
  auto dx = static_cast<double>(static_cast<float>(value));
  if constexpr (std::is_same_v<T, double>)
    dx = value;
  if (std::isnan(dx))
    return "nan";
  if (std::isinf(dx))
    return dx < 0 ? "-inf" : "inf";
  char buf[64];
  constexpr int max_digits = std::is_same_v<T, double>  ? 17
                             : std::is_same_v<T, float> ? 9
                                                        : 5;
  auto reads_back = [&] {
    auto back = std::strtod(buf, nullptr);
    if constexpr (std::is_same_v<T, half>)
      return half(static_cast<float>(back)).bits == value.bits;
    else
      return static_cast<T>(back) == value;
  };
  int prec = 1;
  for (; prec < max_digits; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, dx);
    if (reads_back())
      break;
  }
  std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, dx);
  // Python writes positional digits for exponents -4 ... 15 ("10.0",
  // "0.0001", "1234.5") and the exponent form beyond ("1e+16", "1e-05").
  int exp = std::atoi(std::strchr(buf, 'e') + 1);
  if (exp < -4 || exp >= 16)
    return buf;
  std::snprintf(buf, sizeof(buf), "%.*f", std::max(prec - 1 - exp, 0), dx);
  std::string s = buf;
  if (s.find('.') == std::string::npos)
    s += ".0";
  return s;
}

// numpy's element form inside arrays: "1." for integral floats.
template <class T>
std::string float_elem(T x) {
  auto s = float_repr(x);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0)
    s.pop_back();
  return s;
}

// A complex number as Python prints it alone ("(1+2j)", "2j") and as numpy
// prints it in an array ("1.+2.j").
template <class T>
std::string complex_string(std::complex<T> v, bool in_array) {
  auto part = [&](T x) {
    auto s = in_array ? float_elem(x) : float_repr(x);
    if (!in_array && s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0)
      s.resize(s.size() - 2);
    return s;
  };
  auto im = part(v.imag());
  if (im[0] != '-')
    im.insert(0, "+");
  if (in_array)
    return part(v.real()) + im + "j";
  if (v.real() == T(0) && !std::signbit(v.real()))
    return im.substr(im[0] == '+' ? 1 : 0) + "j";
  return "(" + part(v.real()) + im + "j)";
}

template <class T>
std::string elem(const tensor& t, int64_t i, bool in_array) {
  auto v = t.flat<T>()[static_cast<size_t>(i)];
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) {
    return in_array ? float_elem(v) : float_repr(v);
  } else if constexpr (std::is_same_v<T, std::complex<float>>
                       || std::is_same_v<T, std::complex<double>>) {
    return complex_string(v, in_array);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else {
    return std::to_string(v);
  }
}

std::string element_string(const tensor& t, int64_t i, bool in_array) {
  switch (t.type()) {
    case dtype::float32:
      return elem<float>(t, i, in_array);
    case dtype::float64:
      return elem<double>(t, i, in_array);
    case dtype::float16:
      return elem<half>(t, i, in_array);
    case dtype::int32:
      return elem<int32_t>(t, i, in_array);
    case dtype::int64:
      return elem<int64_t>(t, i, in_array);
    case dtype::uint8:
      return elem<uint8_t>(t, i, in_array);
    case dtype::int8:
      return elem<int8_t>(t, i, in_array);
    case dtype::int16:
      return elem<int16_t>(t, i, in_array);
    case dtype::uint16:
      return elem<uint16_t>(t, i, in_array);
    case dtype::complex64:
      return elem<std::complex<float>>(t, i, in_array);
    case dtype::complex128:
      return elem<std::complex<double>>(t, i, in_array);
    case dtype::bool_:
      return elem<bool>(t, i, in_array);
    case dtype::string:
      return elem<std::string>(t, i, in_array);
    default:
      return "?";
  }
}

void print_array(std::ostringstream& out, const tensor& t, size_t axis,
                 int64_t offset, int64_t stride) {
  auto& dims = t.shape().dims();
  auto n = dims[axis];
  auto inner = stride / (n == 0 ? 1 : n);
  out << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      if (axis + 1 == dims.size()) {
        out << ' ';
      } else {
        out << std::string(dims.size() - axis - 1, '\n')
            << std::string(axis + 1, ' ');
      }
    }
    if (axis + 1 == dims.size())
      out << element_string(t, offset + i, true);
    else
      print_array(out, t, axis + 1, offset + i * inner, inner);
  }
  out << ']';
}

} // namespace

std::string tensor::to_string() const {
  if (!valid())
    return "<invalid tensor>";
  if (shape_.rank() == 0)
    return element_string(*this, 0, false);
  std::ostringstream out;
  print_array(out, *this, 0, 0, num_elements_);
  return out.str();
}

std::string tensor::debug_string() const {
  return "Tensor<type: " + std::string{actorflow::to_string(type_)}
         + " shape: " + shape_.to_string() + " values: " + to_string() + ">";
}

} // namespace actorflow
