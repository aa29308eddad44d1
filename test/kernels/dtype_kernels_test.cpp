// The dtypes beyond the first seven (issue 34): float16, int8, int16,
// uint16, complex64, complex128 — names, printing, the wire, Cast and the
// arithmetic TensorFlow's CPU kernels have for them.

#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "actorflow/graph/wire.hpp"
#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;
using c64 = std::complex<float>;
using c128 = std::complex<double>;

namespace {

std::vector<half> halves(std::initializer_list<float> xs) {
  std::vector<half> out;
  for (auto x : xs)
    out.emplace_back(x);
  return out;
}

std::vector<float> floats(const tensor& t) {
  std::vector<float> out;
  for (auto h : t.flat<half>())
    out.push_back(static_cast<float>(h));
  return out;
}

tensor cast(const tensor& x, dtype to) {
  return run(make_node("Cast", {{"DstT", to}}), {x}).out();
}

} // namespace

TEST_CASE("the new dtypes have TensorFlow's numbers, names and sizes",
          "[dtype]") {
  struct row {
    dtype t;
    int number;
    const char* name;
    const char* tf_name;
    size_t size;
  };
  for (auto r : {row{dtype::float16, 19, "float16", "half", 2},
                 row{dtype::int8, 6, "int8", "int8", 1},
                 row{dtype::int16, 5, "int16", "int16", 2},
                 row{dtype::uint16, 17, "uint16", "uint16", 2},
                 row{dtype::complex64, 8, "complex64", "complex64", 8},
                 row{dtype::complex128, 18, "complex128", "complex128", 16}}) {
    CAPTURE(r.name);
    CHECK(static_cast<int>(r.t) == r.number);
    CHECK(to_string(r.t) == r.name);
    CHECK(tf_type_name(r.t) == r.tf_name);
    CHECK(parse_dtype(r.name) == r.t);
    CHECK(parse_dtype(r.tf_name) == r.t);
    CHECK(dtype_size(r.t) == r.size);
    CHECK(known_dtype(static_cast<uint8_t>(r.number)));
  }
  CHECK_FALSE(known_dtype(11)); // qint8: not an actorflow dtype
  CHECK(parse_dtype("bfloat16") == dtype::invalid);
}

TEST_CASE("half rounds to nearest even and keeps infinities and NaN",
          "[dtype]") {
  CHECK(half(1.0f).bits == 0x3c00);
  CHECK(half(-2.0f).bits == 0xc000);
  CHECK(half(65504.0f).bits == 0x7bff);       // the largest half
  CHECK(half(65520.0f).bits == 0x7c00);       // rounds up to infinity
  CHECK(half(1.0f + 0x1p-11f).bits == 0x3c00); // a tie: to even
  CHECK(half(1.0f + 0x1p-10f).bits == 0x3c01);
  CHECK(static_cast<float>(half(0.1f)) == 0.0999755859375f);
  CHECK(static_cast<float>(half(6e-8f)) == 0x1p-24f); // the smallest subnormal
  auto nan = half(std::numeric_limits<float>::quiet_NaN());
  CHECK_FALSE(nan == nan);
  CHECK(half(-0.0f) == half(0.0f));
}

TEST_CASE("tensors of the new dtypes print as numpy prints them", "[dtype]") {
  CHECK(tensor::scalar(half(0.1f)).to_string() == "0.1");
  // As float32 arrays print (ops_test), at half's shortest digits.
  CHECK(make<half>(halves({1, 2.5f, 0.1f}), {3}).to_string()
        == "[1. 2.5 0.1]");
  CHECK(tensor::scalar(c64(1, 2)).to_string() == "(1+2j)");
  CHECK(tensor::scalar(c128(0, -3)).to_string() == "-3j");
  CHECK(tensor::scalar(c128(1.5, -0.5)).to_string() == "(1.5-0.5j)");
  CHECK(make<c64>({c64(1, 2), c64(3, -4)}, {2}).to_string()
        == "[1.+2.j 3.-4.j]");
  CHECK(tensor::scalar(int8_t{-128}).to_string() == "-128");
  CHECK(make<uint16_t>({65535, 7}, {2}).to_string() == "[65535 7]");
}

TEST_CASE("tensors of the new dtypes cross the wire unchanged", "[dtype]") {
  std::vector<tensor> xs{
    make<half>(halves({1, -0.5f, 65504}), {3}),
    make<int8_t>({-128, 0, 127}, {3}),
    make<int16_t>({-32768, 1, 32767}, {1, 3}),
    make<uint16_t>({0, 1, 65535}, {3, 1}),
    make<c64>({c64(1, 2), c64(-3, 4)}, {2}),
    tensor::scalar(c128(1e300, -1e-300))};
  for (auto& x : xs) {
    CAPTURE(x.debug_string());
    tensor back;
    REQUIRE(from_bytes(to_bytes(x), back).ok());
    CHECK(back.type() == x.type());
    CHECK(back == x);
  }
}

TEST_CASE("Cast converts between the new dtypes as TensorFlow does",
          "[dtype][cast]") {
  // float -> half rounds; half -> float is exact.
  auto h = cast(make<float>({0.1f, 70000.0f, -1.5f}, {3}), dtype::float16);
  CHECK(h.type() == dtype::float16);
  CHECK(floats(h)
        == std::vector<float>{0.0999755859375f,
                              std::numeric_limits<float>::infinity(), -1.5f});
  CHECK(cast(h, dtype::float64).flat<double>()[2] == -1.5);
  // Floats to small integers saturate; integers wrap as C++ converts.
  CHECK(values<int8_t>(cast(make<float>({300.0f, -300.0f, 1.9f}, {3}),
                            dtype::int8))
        == std::vector<int8_t>{127, -128, 1});
  CHECK(values<uint16_t>(cast(make<int32_t>({-1, 65536, 7}, {3}),
                              dtype::uint16))
        == std::vector<uint16_t>{65535, 0, 7});
  CHECK(values<int16_t>(cast(make<half>(halves({-2.5f, 40000}), {2}),
                             dtype::int16))
        == std::vector<int16_t>{-2, 32767});
  // Real -> complex: imaginary part 0; complex -> real: the real part.
  CHECK(values<c64>(cast(make<int32_t>({3, -4}, {2}), dtype::complex64))
        == std::vector<c64>{c64(3, 0), c64(-4, 0)});
  CHECK(values<float>(cast(make<c128>({c128(2.5, 9), c128(-1, 1)}, {2}),
                           dtype::float32))
        == std::vector<float>{2.5f, -1.0f});
  CHECK(values<c128>(cast(tensor::scalar(c64(1, -2)), dtype::complex128))
        == std::vector<c128>{c128(1, -2)});
  CHECK(values<bool>(cast(make<c64>({c64(0, 0), c64(0, 1)}, {2}),
                          dtype::bool_))
        == std::vector<bool>{false, true});
  CHECK(values<int8_t>(cast(make<bool>({true, false}, {2}), dtype::int8))
        == std::vector<int8_t>{1, 0});
}

TEST_CASE("Add, Sub and Mul on small integers wrap as TensorFlow's do",
          "[dtype][math]") {
  auto x = make<int8_t>({127, -128, 5}, {3});
  auto y = make<int8_t>({1, -1, 3}, {3});
  CHECK(values<int8_t>(run("Add", {x, y}).out())
        == std::vector<int8_t>{-128, 127, 8});
  CHECK(values<int8_t>(run("Sub", {x, y}).out())
        == std::vector<int8_t>{126, -127, 2});
  CHECK(values<int8_t>(run("Mul", {x, y}).out())
        == std::vector<int8_t>{127, -128, 15});
  auto a = make<uint16_t>({65535, 2}, {2});
  CHECK(values<uint16_t>(run("Add", {a, tensor::scalar(uint16_t{1})}).out())
        == std::vector<uint16_t>{0, 3});
  auto s = make<int16_t>({-7, 7}, {2});
  CHECK(values<int16_t>(run("Div", {s, tensor::scalar(int16_t{2})}).out())
        == std::vector<int16_t>{-3, 3});
  auto zero = run("Div", {s, tensor::scalar(int16_t{0})});
  CHECK(zero.st.code() == error_code::invalid_argument);
  CHECK(values<int16_t>(run("Neg", {s}).out())
        == std::vector<int16_t>{7, -7});
  CHECK(values<int8_t>(run("Abs", {make<int8_t>({-128, -3}, {2})}).out())
        == std::vector<int8_t>{-128, 3});
}

TEST_CASE("float16 arithmetic rounds to half precision", "[dtype][math]") {
  auto x = make<half>(halves({1, 2048, 0.5f}), {3});
  auto y = make<half>(halves({0.0001f, 1, 0.25f}), {3});
  // 1 + 0.0001 is 1 in half; 2048 + 1 ties to even (2048).
  CHECK(floats(run("Add", {x, y}).out())
        == std::vector<float>{1, 2048, 0.75f});
  CHECK(floats(run("Mul", {x, y}).out())
        == std::vector<float>{static_cast<float>(half(0.0001f)), 2048,
                              0.125f});
  CHECK(floats(run("RealDiv", {x, y}).out())[2] == 2.0f);
  CHECK(floats(run("Square", {y}).out())[2] == 0.0625f);
  CHECK(floats(run("Maximum", {x, y}).out())
        == std::vector<float>{1, 2048, 0.5f});
  CHECK(values<bool>(run("Greater", {x, y}).out())
        == std::vector<bool>{true, true, true});
  CHECK(values<bool>(run("Equal", {x, x}).out())
        == std::vector<bool>{true, true, true});
  CHECK(floats(run("Sign", {make<half>(halves({-3, 0, 2}), {3})}).out())
        == std::vector<float>{-1, 0, 1});
  // Functions TF has no CPU half kernel for here say so.
  auto exp = run("Exp", {x});
  CHECK(exp.st.code() == error_code::invalid_argument);
  CHECK_THAT(exp.st.message(), Catch::Matchers::Contains("float16"));
}

TEST_CASE("complex arithmetic, comparisons for equality and MatMul",
          "[dtype][math]") {
  auto x = make<c64>({c64(1, 2), c64(3, -1)}, {2});
  auto y = make<c64>({c64(0, 1), c64(2, 2)}, {2});
  CHECK(values<c64>(run("Add", {x, y}).out())
        == std::vector<c64>{c64(1, 3), c64(5, 1)});
  CHECK(values<c64>(run("Mul", {x, y}).out())
        == std::vector<c64>{c64(-2, 1), c64(8, 4)});
  auto q = values<c64>(run("RealDiv", {x, y}).out());
  CHECK(q[0] == c64(2, -1));
  CHECK(values<bool>(run("Equal", {x, y}).out())
        == std::vector<bool>{false, false});
  CHECK(values<bool>(run("NotEqual", {x, x}).out())
        == std::vector<bool>{false, false});
  // Complex numbers are not ordered.
  CHECK(run("Greater", {x, y}).st.code() == error_code::invalid_argument);
  auto a = make<c128>({c128(1, 1), c128(0, 2), c128(3, 0), c128(1, -1)},
                      {2, 2});
  auto b = make<c128>({c128(0, 1), c128(1, 0)}, {2, 1});
  auto m = run(make_node("MatMul"), {a, b}).out();
  CHECK(m.shape() == tensor_shape{2, 1});
  CHECK(values<c128>(m) == std::vector<c128>{c128(-1, 3), c128(1, 2)});
  auto ha = make<half>(halves({1, 2, 3, 4}), {2, 2});
  CHECK(floats(run(make_node("MatMul"), {ha, ha}).out())
        == std::vector<float>{7, 10, 15, 22});
}

TEST_CASE("Sum, Mean and Max reduce the new dtypes", "[dtype][reduction]") {
  auto axis = tensor::vec<int32_t>({0});
  auto h = make<half>(halves({1, 2, 3, 4}), {2, 2});
  CHECK(floats(run("Sum", {h, axis}).out()) == std::vector<float>{4, 6});
  CHECK(floats(run("Mean", {h, axis}).out()) == std::vector<float>{2, 3});
  CHECK(floats(run("Max", {h, axis}).out()) == std::vector<float>{3, 4});
  auto c = make<c64>({c64(1, 1), c64(3, -1)}, {2});
  CHECK(values<c64>(run("Sum", {c, axis}).out()) == std::vector<c64>{c64(4, 0)});
  CHECK(values<c64>(run("Mean", {c, axis}).out())
        == std::vector<c64>{c64(2, 0)});
  CHECK(values<c64>(run("Prod", {c, axis}).out())
        == std::vector<c64>{c64(4, 2)});
  auto i8 = make<int8_t>({100, 100, -7}, {3});
  CHECK(values<int8_t>(run("Sum", {i8, axis}).out())
        == std::vector<int8_t>{-63}); // 193 wraps to -63
  CHECK(values<int16_t>(run("Min", {make<int16_t>({5, -9}, {2}), axis}).out())
        == std::vector<int16_t>{-9});
  CHECK(run("Max", {c, axis}).st.code() == error_code::invalid_argument);
}

TEST_CASE("array kernels move the new dtypes", "[dtype][array]") {
  auto x = make<c128>({c128(1, 0), c128(2, 0), c128(3, 0), c128(4, 0)}, {2, 2});
  auto axis = tensor::scalar<int32_t>(0);
  auto concat = run(make_node("ConcatV2", {{"N", int64_t{2}}}), {x, x, axis});
  CHECK(concat.out().shape() == tensor_shape{4, 2});
  CHECK(concat.out().flat<c128>()[6] == c128(3, 0));
  auto g = run(make_node("GatherV2"), {make<int8_t>({10, 20, 30}, {3}),
                                       tensor::vec<int32_t>({2, 0}),
                                       tensor::scalar<int32_t>(0)});
  CHECK(values<int8_t>(g.out()) == std::vector<int8_t>{30, 10});
}
