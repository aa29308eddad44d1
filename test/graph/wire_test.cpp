#include "actorflow/graph/wire.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using namespace std::string_literals;

namespace {

template <class T>
T round_trip(const T& x) {
  std::string buf;
  byte_writer w{buf};
  encode(w, x);
  byte_reader r{buf};
  T result{};
  REQUIRE(decode(r, result));
  REQUIRE(r.ok());
  REQUIRE(r.remaining() == 0);
  return result;
}

tensor round_trip_bytes(const tensor& x) {
  auto buf = to_bytes(x);
  REQUIRE(static_cast<uint8_t>(buf[0]) == wire_format_version);
  tensor result;
  auto st = from_bytes(buf, result);
  INFO(st.to_string());
  REQUIRE(st.ok());
  return result;
}

void check_same_node(const node_def& x, const node_def& y) {
  CHECK(x.name == y.name);
  CHECK(x.op == y.op);
  CHECK(x.inputs == y.inputs);
  CHECK(x.device == y.device);
  CHECK(x.attrs == y.attrs);
}

void check_same_graph(const graph_def& x, const graph_def& y) {
  CHECK(x.seed == y.seed);
  REQUIRE(x.nodes.size() == y.nodes.size());
  for (size_t i = 0; i < x.nodes.size(); ++i)
    check_same_node(x.nodes[i], y.nodes[i]);
}

// Every alternative of attr_value, in variant order.
std::vector<attr_value> all_attr_values() {
  return {
    attr_value{int64_t{-42}},
    attr_value{3.25},
    attr_value{true},
    attr_value{"VALID\0x"s},
    attr_value{dtype::int64},
    attr_value{tensor_shape{-1, 3}},
    attr_value{tensor::from_vector<float>({1, 2, 3, 4, 5, 6},
                                          tensor_shape{2, 3})},
    attr_value{std::vector<int64_t>{1, -2, std::numeric_limits<int64_t>::max()}},
    attr_value{std::vector<std::string>{"a", "", "b\0c"s}},
    attr_value{std::vector<dtype>{dtype::float32, dtype::string, dtype::bool_}},
    attr_value{std::vector<tensor_shape>{tensor_shape{}, tensor_shape{-1, 3},
                                         tensor_shape::unknown()}},
  };
}

node_def sample_node() {
  node_def n;
  n.name = "train/update_w";
  n.op = "ApplyGradientDescent";
  n.inputs = {"w", "train/learning_rate", "grads/MatMul_grad:1", "^init",
              "^global_step"};
  n.device = "/job:ps/replica:0/task:1/device:CPU:0";
  n.attrs["T"] = dtype::float32;
  n.attrs["use_locking"] = false;
  n.attrs["shape"] = tensor_shape::unknown();
  n.attrs["partial"] = tensor_shape{-1, 784};
  n.attrs["value"] = tensor::vec<std::string>({"x", "", "y\0z"s});
  n.attrs["strides"] = std::vector<int64_t>{1, 2, 2, 1};
  n.attrs["rate"] = 0.01;
  n.attrs["seed2"] = int64_t{87654321};
  n.attrs["padding"] = "SAME"s;
  n.attrs["names"] = std::vector<std::string>{"a", "b"};
  n.attrs["Tlist"] = std::vector<dtype>{dtype::int32, dtype::float64};
  return n;
}

graph_def sample_graph() {
  graph_def g;
  g.seed = 1234;
  node_def x;
  x.name = "x";
  x.op = "Placeholder";
  x.attrs["dtype"] = dtype::float32;
  x.attrs["shape"] = tensor_shape{-1, 4};
  g.nodes.push_back(x);
  node_def c;
  c.name = "c";
  c.op = "Const";
  c.device = "/device:CPU:0";
  c.attrs["dtype"] = dtype::int32;
  c.attrs["value"] = tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8},
                                                  tensor_shape{2, 2, 1, 2});
  g.nodes.push_back(c);
  node_def s;
  s.name = "s";
  s.op = "Const";
  s.attrs["dtype"] = dtype::string;
  s.attrs["value"] = tensor::vec<std::string>({"", "hello", "\0\0"s});
  g.nodes.push_back(s);
  g.nodes.push_back(sample_node());
  node_def init;
  init.name = "init";
  init.op = "NoOp";
  init.inputs = {"^x", "^c"};
  g.nodes.push_back(init);
  return g;
}

// Rough bytes of memory a decoded value holds, to check that decoding
// allocates in proportion to its input.
size_t footprint(const tensor& t) {
  if (!t.valid())
    return 0;
  size_t n = t.shape().dims().size() * sizeof(int64_t) + 64;
  auto count = static_cast<size_t>(t.num_elements());
  if (t.type() == dtype::string)
    n += count * sizeof(std::string) + t.byte_size();
  else
    n += t.byte_size();
  return n;
}

size_t footprint(const attr_value& v) {
  size_t n = sizeof(attr_value);
  if (auto p = std::get_if<std::string>(&v))
    n += p->size();
  else if (auto p = std::get_if<tensor_shape>(&v))
    n += p->dims().size() * sizeof(int64_t);
  else if (auto p = std::get_if<tensor>(&v))
    n += footprint(*p);
  else if (auto p = std::get_if<std::vector<int64_t>>(&v))
    n += p->size() * sizeof(int64_t);
  else if (auto p = std::get_if<std::vector<std::string>>(&v))
    for (auto& s : *p)
      n += sizeof(std::string) + s.size();
  else if (auto p = std::get_if<std::vector<dtype>>(&v))
    n += p->size();
  return n;
}

size_t footprint(const graph_def& g) {
  size_t n = g.nodes.size() * sizeof(node_def);
  for (auto& node : g.nodes) {
    n += node.name.size() + node.op.size() + node.device.size();
    for (auto& in : node.inputs)
      n += sizeof(std::string) + in.size();
    for (auto& [k, v] : node.attrs)
      n += 64 + sizeof(std::string) + k.size() + footprint(v);
  }
  return n;
}

// The wire encoding (without version byte) of a value.
template <class T>
std::string encoded(const T& x) {
  std::string buf;
  byte_writer w{buf};
  encode(w, x);
  return buf;
}

} // namespace

TEST_CASE("byte_writer writes little-endian fixed-width values", "[wire]") {
  std::string buf;
  byte_writer w{buf};
  w.u8(0xAB);
  w.u32(0x01020304u);
  w.u64(0x0102030405060708ull);
  w.i64(-2);
  w.f64(1.5);
  w.bytes("hi\0"s);
  w.raw("xyz", 3);
  REQUIRE(buf.size() == 1 + 4 + 8 + 8 + 8 + (8 + 3) + 3);
  CHECK(buf.substr(0, 5) == "\xAB\x04\x03\x02\x01"s);
  CHECK(buf.substr(5, 8) == "\x08\x07\x06\x05\x04\x03\x02\x01"s);
  CHECK(buf.substr(13, 8) == "\xFE\xFF\xFF\xFF\xFF\xFF\xFF\xFF"s);
  byte_reader r{buf};
  uint8_t a = 0;
  uint32_t b = 0;
  uint64_t c = 0;
  int64_t d = 0;
  double e = 0;
  std::string f;
  char g[3];
  REQUIRE(r.u8(a));
  REQUIRE(r.u32(b));
  REQUIRE(r.u64(c));
  REQUIRE(r.i64(d));
  REQUIRE(r.f64(e));
  REQUIRE(r.bytes(f));
  REQUIRE(r.raw(g, 3));
  CHECK(a == 0xAB);
  CHECK(b == 0x01020304u);
  CHECK(c == 0x0102030405060708ull);
  CHECK(d == -2);
  CHECK(e == 1.5);
  CHECK(f == "hi\0"s);
  CHECK(std::string(g, 3) == "xyz");
  CHECK(r.remaining() == 0);
  CHECK(r.ok());
  CHECK(r.error().empty());
}

TEST_CASE("byte_reader failures are sticky and leave outputs alone",
          "[wire]") {
  std::string buf = "\x01\x02\x03"s;
  byte_reader r{buf};
  uint32_t x = 77;
  CHECK_FALSE(r.u32(x));
  CHECK(x == 77);
  CHECK_FALSE(r.ok());
  CHECK(r.error().find("truncated") != std::string::npos);
  uint8_t y = 5;
  CHECK_FALSE(r.u8(y)); // would fit, but the reader already failed
  CHECK(y == 5);
  CHECK(r.remaining() == 3);
}

TEST_CASE("byte_reader rejects lengths and counts beyond the input",
          "[wire]") {
  std::string buf;
  byte_writer w{buf};
  w.u64(std::numeric_limits<uint64_t>::max());
  w.raw("abcdefgh", 8);
  {
    byte_reader r{buf};
    std::string s = "keep";
    CHECK_FALSE(r.bytes(s));
    CHECK(s == "keep");
  }
  {
    byte_reader r{buf};
    uint64_t n = 0;
    CHECK_FALSE(r.count(n, 1));
    CHECK(n == 0);
  }
  std::string two;
  byte_writer w2{two};
  w2.u64(2);
  w2.raw("0123456789abcdef", 16);
  byte_reader ok_reader{two};
  uint64_t n = 0;
  CHECK(ok_reader.count(n, 8));
  CHECK(n == 2);
  byte_reader bad_reader{two};
  CHECK_FALSE(bad_reader.count(n, 9));
}

TEST_CASE("tensors of every dtype round-trip", "[wire]") {
  auto nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<tensor> xs{
    tensor::from_vector<float>({1.5f, -0.0f, nan,
                                std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::denorm_min(), 7},
                               tensor_shape{2, 3}),
    tensor::vec<double>({3.141592653589793, -1e300, 5e-324}),
    tensor::vec<int32_t>({0, -1, std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max()}),
    tensor::vec<int64_t>({std::numeric_limits<int64_t>::min(), 0,
                          std::numeric_limits<int64_t>::max()}),
    tensor::vec<bool>({true, false, false, true, true}),
    tensor::from_vector<std::string>({"", "hello", "\0"s, "a\0b\0"s, "",
                                      std::string(1000, 'z')},
                                     tensor_shape{3, 2}),
  };
  for (auto& x : xs) {
    INFO(x.debug_string());
    auto y = round_trip(x);
    CHECK(y == x);
    CHECK(y.type() == x.type());
    CHECK(y.shape() == x.shape());
    auto z = round_trip_bytes(x);
    CHECK(z == x);
  }
  // NaN payloads survive bit for bit.
  auto y = round_trip_bytes(xs[0]);
  CHECK(std::isnan(y.flat<float>()[2]));
  CHECK(std::signbit(y.flat<float>()[1]));
  auto strings = round_trip_bytes(xs[5]);
  auto s = strings.flat<std::string>();
  CHECK(s[2] == "\0"s);
  CHECK(s[2].size() == 1);
  CHECK(s[3] == "a\0b\0"s);
  CHECK(s[0].empty());
}

TEST_CASE("scalar, empty and rank-4 tensors round-trip", "[wire]") {
  std::vector<tensor> xs{
    tensor::scalar(2.5f),
    tensor::scalar(int64_t{-9}),
    tensor::scalar("scalar string"),
    tensor::scalar(true),
    tensor{dtype::float32, tensor_shape{0}},
    tensor{dtype::int64, tensor_shape{3, 0, 2}},
    tensor{dtype::string, tensor_shape{0, 5}},
    tensor{dtype::bool_, tensor_shape{0}},
  };
  std::vector<double> vals(2 * 3 * 4 * 5);
  for (size_t i = 0; i < vals.size(); ++i)
    vals[i] = static_cast<double>(i) * 0.5 - 10;
  xs.push_back(tensor::from_vector(vals, tensor_shape{2, 3, 4, 5}));
  for (auto& x : xs) {
    INFO(x.debug_string());
    auto y = round_trip_bytes(x);
    CHECK(y == x);
    CHECK(y.shape() == x.shape());
    CHECK(y.num_elements() == x.num_elements());
  }
  CHECK(round_trip_bytes(xs[0]).shape().rank() == 0);
  CHECK(round_trip_bytes(xs.back()).shape().rank() == 4);
}

TEST_CASE("the invalid tensor round-trips", "[wire]") {
  tensor x;
  auto y = round_trip(x);
  CHECK_FALSE(y.valid());
  CHECK(y == x);
  auto bytes = to_bytes(x);
  CHECK(bytes.size() == 2);
  tensor z = tensor::scalar(1.0f);
  REQUIRE(from_bytes(bytes, z).ok());
  CHECK_FALSE(z.valid());
}

TEST_CASE("a 4 MiB float tensor encodes as 4 MiB plus a small header",
          "[wire]") {
  constexpr size_t n = 1 << 20;
  tensor t{dtype::float32, tensor_shape{static_cast<int64_t>(n)}};
  auto xs = t.flat<float>();
  for (size_t i = 0; i < n; ++i)
    xs[i] = static_cast<float>(i) * 0.25f;
  auto bytes = to_bytes(t);
  constexpr size_t payload = 4 * 1024 * 1024;
  REQUIRE(bytes.size() > payload);
  auto header = bytes.size() - payload;
  CHECK(header <= 64);
  // version, dtype, shape kind, rank, one dim, byte count.
  CHECK(header == 1 + 1 + 1 + 8 + 8 + 8);
  if constexpr (std::endian::native == std::endian::little)
    CHECK(std::memcmp(bytes.data() + header, t.raw(), payload) == 0);
  tensor u;
  REQUIRE(from_bytes(bytes, u).ok());
  CHECK(u == t);
}

TEST_CASE("shapes round-trip, including unknown rank and dimensions",
          "[wire]") {
  std::vector<tensor_shape> xs{tensor_shape{},
                               tensor_shape::unknown(),
                               tensor_shape{-1},
                               tensor_shape{-1, 3, -1},
                               tensor_shape{0},
                               tensor_shape{1, 2, 3, 4, 5, 6, 7, 8}};
  for (auto& x : xs) {
    INFO(x.to_string());
    auto y = round_trip(x);
    CHECK(y == x);
    CHECK(y.rank() == x.rank());
    CHECK(y.unknown_rank() == x.unknown_rank());
  }
}

TEST_CASE("every attr_value alternative round-trips", "[wire]") {
  auto xs = all_attr_values();
  REQUIRE(xs.size() == std::variant_size_v<attr_value>);
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO("alternative " << i);
    REQUIRE(xs[i].index() == i);
    auto y = round_trip(xs[i]);
    CHECK(y.index() == i);
    CHECK(y == xs[i]);
  }
  // Unknown shapes and empty lists, too.
  std::vector<attr_value> more{
    attr_value{tensor_shape::unknown()}, attr_value{tensor_shape{}},
    attr_value{false},                   attr_value{""s},
    attr_value{std::vector<int64_t>{}},  attr_value{std::vector<std::string>{}},
    attr_value{std::vector<dtype>{}},    attr_value{tensor{}},
    attr_value{std::vector<tensor_shape>{}},
    attr_value{dtype::invalid},          attr_value{-0.0},
  };
  for (auto& x : more) {
    auto y = round_trip(x);
    CHECK(y == x);
  }
  auto unknown = round_trip(attr_value{tensor_shape::unknown()});
  CHECK(std::get<tensor_shape>(unknown).unknown_rank());
}

TEST_CASE("a node_def round-trips", "[wire]") {
  auto n = sample_node();
  auto m = round_trip(n);
  check_same_node(m, n);
  CHECK(m.inputs[3] == "^init");
  CHECK(m.attr<dtype>("T") == dtype::float32);
  CHECK(m.attr<tensor_shape>("shape").unknown_rank());
  CHECK(m.attr<tensor_shape>("partial") == (tensor_shape{-1, 784}));
  CHECK(round_trip(node_def{}).name.empty());
}

TEST_CASE("a graph_def round-trips with its seed", "[wire]") {
  auto g = sample_graph();
  auto bytes = to_bytes(g);
  CHECK(static_cast<uint8_t>(bytes[0]) == wire_format_version);
  graph_def h;
  auto st = from_bytes(bytes, h);
  INFO(st.to_string());
  REQUIRE(st.ok());
  check_same_graph(h, g);
  CHECK(h.seed == 1234);
  graph_def empty;
  graph_def e2;
  e2.seed = 5;
  REQUIRE(from_bytes(to_bytes(empty), e2).ok());
  CHECK(e2.seed == 0);
  CHECK(e2.nodes.empty());
}

TEST_CASE("from_bytes rejects bad versions and trailing bytes", "[wire]") {
  auto bytes = to_bytes(tensor::scalar(1.0f));
  tensor t;
  CHECK(from_bytes(bytes, t).ok());
  auto wrong_version = bytes;
  wrong_version[0] = static_cast<char>(wire_format_version + 1);
  auto st = from_bytes(wrong_version, t);
  CHECK(st.code() == error_code::data_loss);
  CHECK(st.message().rfind("corrupt tensor: ", 0) == 0);
  CHECK(st.message().find("version") != std::string::npos);
  auto trailing = bytes + "x";
  st = from_bytes(trailing, t);
  CHECK(st.code() == error_code::data_loss);
  CHECK(st.message().find("trailing") != std::string::npos);
  st = from_bytes("", t);
  CHECK(st.code() == error_code::data_loss);
  graph_def g;
  st = from_bytes("", g);
  CHECK(st.code() == error_code::data_loss);
  CHECK(st.message().rfind("corrupt graph_def: ", 0) == 0);
}

TEST_CASE("decoding rejects invalid tensor contents", "[wire]") {
  auto expect_corrupt = [](const std::string& body, std::string_view why) {
    tensor t = tensor::scalar(9);
    auto st = from_bytes(std::string(1, char(wire_format_version)) + body, t);
    INFO(st.to_string());
    CHECK(st.code() == error_code::data_loss);
    CHECK(st.message().find(why) != std::string::npos);
    CHECK(t == tensor::scalar(9)); // untouched
  };
  auto header = [](uint8_t type, std::vector<int64_t> dims) {
    std::string buf;
    byte_writer w{buf};
    w.u8(type);
    encode(w, tensor_shape{std::move(dims)});
    return buf;
  };
  SECTION("unknown dtype") {
    expect_corrupt(header(42, {1}) + std::string(12, '\0'), "dtype 42");
  }
  SECTION("negative dimension") {
    auto body = header(1, {-1});
    body += std::string(8, '\0');
    expect_corrupt(body, "Dimension -1 must be >= 0");
  }
  SECTION("unknown rank") {
    std::string buf;
    byte_writer w{buf};
    w.u8(1);
    encode(w, tensor_shape::unknown());
    w.u64(0);
    expect_corrupt(buf, "unknown rank");
  }
  SECTION("byte count does not match the shape") {
    auto body = header(1, {3});
    byte_writer w{body};
    w.u64(8);
    w.raw("01234567", 8);
    expect_corrupt(body, "cannot have 8 bytes");
  }
  SECTION("bool bytes other than 0 and 1") {
    auto body = header(10, {2});
    byte_writer w{body};
    w.u64(2);
    w.u8(1);
    w.u8(2);
    expect_corrupt(body, "bool");
  }
  SECTION("element count overflows int64") {
    auto body = header(1, {int64_t{1} << 32, int64_t{1} << 32, 0});
    byte_writer w{body};
    w.u64(0);
    expect_corrupt(body, "too many elements");
  }
  SECTION("shape kind") {
    std::string body = "\x01\x07"s;
    expect_corrupt(body, "shape kind");
  }
}

TEST_CASE("decoding rejects duplicate attributes and bad tags", "[wire]") {
  std::string buf;
  byte_writer w{buf};
  w.bytes("n");
  w.bytes("Op");
  w.u64(0);
  w.bytes("");
  w.u64(2);
  w.bytes("k");
  encode(w, attr_value{int64_t{1}});
  w.bytes("k");
  encode(w, attr_value{int64_t{2}});
  byte_reader r{buf};
  node_def n;
  n.name = "before";
  CHECK_FALSE(decode(r, n));
  CHECK(r.error().find("duplicate") != std::string::npos);
  CHECK(n.name == "before");

  std::string bad_tag = "\x63"s + std::string(16, '\0');
  byte_reader r2{bad_tag};
  attr_value v = int64_t{7};
  CHECK_FALSE(decode(r2, v));
  CHECK(r2.error().find("tag") != std::string::npos);
  CHECK(v == attr_value{int64_t{7}});

  std::string bad_dtype = "\x04\x0b"s; // dtype alternative, dtype 11 (qint8)
  byte_reader r3{bad_dtype};
  CHECK_FALSE(decode(r3, v));
  std::string bad_bool = "\x02\x02"s;
  byte_reader r4{bad_bool};
  CHECK_FALSE(decode(r4, v));
}

TEST_CASE("every truncation of a valid encoding fails cleanly", "[wire]") {
  auto g = sample_graph();
  auto bytes = to_bytes(g);
  for (size_t len = 0; len < bytes.size(); ++len) {
    graph_def h;
    h.seed = -7;
    auto st = from_bytes(std::string_view{bytes}.substr(0, len), h);
    INFO("prefix length " << len << " of " << bytes.size());
    REQUIRE(st.code() == error_code::data_loss);
    REQUIRE(h.seed == -7);
    REQUIRE(h.nodes.empty());
  }
  // Low-level decoders, too: every prefix of each value's encoding.
  auto check_prefixes = [](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    auto buf = encoded(x);
    for (size_t len = 0; len < buf.size(); ++len) {
      byte_reader r{std::string_view{buf}.substr(0, len)};
      T y{};
      INFO("prefix length " << len << " of " << buf.size());
      REQUIRE_FALSE(decode(r, y));
      REQUIRE_FALSE(r.ok());
    }
  };
  for (auto& v : all_attr_values())
    check_prefixes(v);
  check_prefixes(sample_node());
  check_prefixes(tensor_shape{-1, 5});
  check_prefixes(tensor::vec<std::string>({"", "abc", ""}));
  check_prefixes(tensor::from_vector<double>({1, 2, 3, 4}, tensor_shape{2, 2}));
  auto t = to_bytes(tensor::vec<int64_t>({1, 2, 3}));
  for (size_t len = 0; len < t.size(); ++len) {
    tensor u;
    REQUIRE(from_bytes(std::string_view{t}.substr(0, len), u).code()
            == error_code::data_loss);
  }
}

TEST_CASE("random byte flips never crash or allocate absurdly", "[wire]") {
  std::mt19937_64 rng{20240611};
  auto g = sample_graph();
  auto graph_bytes = to_bytes(g);
  auto tensor_bytes
    = to_bytes(tensor::from_vector<std::string>({"ab", "", "cde", "\0"s},
                                                tensor_shape{2, 2}));
  auto float_bytes = to_bytes(
    tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, tensor_shape{1, 2, 3}));
  size_t graph_ok = 0;
  size_t graph_failed = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    auto& original = iteration % 4 == 0   ? tensor_bytes
                     : iteration % 4 == 1 ? float_bytes
                                          : graph_bytes;
    auto bytes = original;
    auto flips = 1 + rng() % 4;
    for (uint64_t i = 0; i < flips; ++i) {
      auto pos = 1 + rng() % (bytes.size() - 1); // keep the version byte
      switch (rng() % 4) {
        case 0:
          bytes[pos] = static_cast<char>(rng() & 0xFF);
          break;
        case 1:
          bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << (rng() % 8)));
          break;
        case 2:
          bytes[pos] = '\xFF';
          break;
        default:
          bytes[pos] = '\0';
          break;
      }
    }
    if (rng() % 8 == 0)
      bytes.resize(1 + rng() % bytes.size());
    INFO("iteration " << iteration);
    if (&original == &graph_bytes) {
      graph_def h;
      status st;
      REQUIRE_NOTHROW(st = from_bytes(bytes, h));
      if (st.ok()) {
        ++graph_ok;
        REQUIRE(footprint(h) <= 64 * bytes.size() + 4096);
      } else {
        ++graph_failed;
        REQUIRE(st.code() == error_code::data_loss);
        REQUIRE(h.nodes.empty());
      }
    } else {
      tensor t;
      status st;
      REQUIRE_NOTHROW(st = from_bytes(bytes, t));
      if (st.ok()) {
        REQUIRE(footprint(t) <= 64 * bytes.size() + 4096);
        // A decoded tensor is fully usable.
        REQUIRE_NOTHROW(t.debug_string());
        REQUIRE(t == t.deep_copy());
      } else {
        REQUIRE(st.code() == error_code::data_loss);
        REQUIRE_FALSE(t.valid());
      }
    }
  }
  // Both outcomes occur: the mutations exercise the success and the
  // failure paths.
  CHECK(graph_failed > 0);
  CHECK(graph_ok > 0);
}

TEST_CASE("a huge declared length fails fast", "[wire]") {
  auto version = std::string(1, static_cast<char>(wire_format_version));
  SECTION("string tensor with a huge string length") {
    std::string body;
    byte_writer w{body};
    w.u8(static_cast<uint8_t>(dtype::string));
    encode(w, tensor_shape{1});
    w.u64(uint64_t{1} << 62);
    w.raw("abc", 3);
    tensor t;
    status st;
    REQUIRE_NOTHROW(st = from_bytes(version + body, t));
    CHECK(st.code() == error_code::data_loss);
  }
  SECTION("float tensor whose shape claims 64 GiB") {
    std::string body;
    byte_writer w{body};
    w.u8(static_cast<uint8_t>(dtype::float32));
    encode(w, tensor_shape{int64_t{1} << 34});
    w.u64(uint64_t{1} << 36);
    w.raw("0123456789", 10);
    tensor t;
    status st;
    REQUIRE_NOTHROW(st = from_bytes(version + body, t));
    CHECK(st.code() == error_code::data_loss);
    CHECK(st.message().find("truncated") != std::string::npos);
  }
  SECTION("byte count wrapping around to match the shape") {
    // 2^62 int64 elements would be 2^65 bytes; a byte count of 0 must not
    // pass as the wrapped product.
    std::string body;
    byte_writer w{body};
    w.u8(static_cast<uint8_t>(dtype::int64));
    encode(w, tensor_shape{int64_t{1} << 62});
    w.u64(0);
    tensor t;
    status st;
    REQUIRE_NOTHROW(st = from_bytes(version + body, t));
    CHECK(st.code() == error_code::data_loss);
  }
  SECTION("string tensor with a billion elements") {
    std::string body;
    byte_writer w{body};
    w.u8(static_cast<uint8_t>(dtype::string));
    encode(w, tensor_shape{1000000000});
    w.u64(0);
    tensor t;
    status st;
    REQUIRE_NOTHROW(st = from_bytes(version + body, t));
    CHECK(st.code() == error_code::data_loss);
  }
  SECTION("shape of huge rank") {
    std::string body;
    byte_writer w{body};
    w.u8(0);
    w.u64(uint64_t{1} << 60);
    byte_reader r{body};
    tensor_shape s;
    REQUIRE_NOTHROW(decode(r, s));
    CHECK_FALSE(r.ok());
  }
  SECTION("graph with a huge node count and list lengths") {
    std::string body;
    byte_writer w{body};
    w.i64(1);
    w.u64(std::numeric_limits<uint64_t>::max() / 2);
    graph_def g;
    status st;
    REQUIRE_NOTHROW(st = from_bytes(version + body, g));
    CHECK(st.code() == error_code::data_loss);

    for (auto tag : {7, 8, 9}) { // the list alternatives
      std::string attr;
      byte_writer wa{attr};
      wa.u8(static_cast<uint8_t>(tag));
      wa.u64(uint64_t{1} << 40);
      byte_reader r{attr};
      attr_value v;
      REQUIRE_NOTHROW(decode(r, v));
      CHECK_FALSE(r.ok());
    }
  }
}

TEST_CASE("wire: check_received_data rejects bool bytes other than 0 and 1",
          "[wire]") {
  auto flags = tensor::vec<bool>({true, false, true});
  CHECK(check_received_data(flags).ok());
  CHECK(check_received_data(tensor::vec<uint8_t>({0, 7, 255})).ok());
  static_cast<unsigned char*>(flags.raw())[1] = 2;
  auto st = check_received_data(flags);
  CHECK(st.code() == error_code::data_loss);
  CHECK(st.message() == "corrupt tensor: invalid bool byte 2");
}
