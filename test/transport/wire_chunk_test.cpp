// wire_chunk (transport/messages.hpp): a chunk of a large tensor's encoding,
// serialized from a view (header part + a slice of the tensor) and
// deserialized into one buffer, with its length checked against the
// message.

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actorflow/transport/type_ids.hpp"

using namespace actorflow;

namespace {

caf::actor_system_config& test_config() {
  static caf::actor_system_config cfg;
  return cfg;
}

caf::actor_system& test_system() {
  static auto* sys = new caf::actor_system{test_config()};
  return *sys;
}

std::vector<char> serialize(wire_chunk& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{test_system(), buf};
  REQUIRE(!sink(x));
  return buf;
}

} // namespace

TEST_CASE("wire_chunk: a view of header bytes and a tensor slice arrives "
          "as those bytes, in a uint8 tensor",
          "[wire_chunk]") {
  auto values = tensor::vec<int32_t>({0, 1, 2, 3, 4, 5, 6, 7});
  wire_chunk out;
  out.prefix = "HDR";
  out.source = values;
  out.data_begin = 8; // elements 2..5
  out.data_size = 16;
  CHECK(out.size() == 19);
  auto buf = serialize(out);
  wire_chunk in;
  caf::binary_deserializer source{test_system(), buf};
  REQUIRE(!source(in));
  REQUIRE(in.received.valid());
  CHECK(in.received.type() == dtype::uint8);
  REQUIRE(in.size() == 19);
  std::string bytes{in.data(), in.size()};
  CHECK(bytes.substr(0, 3) == "HDR");
  std::vector<int32_t> ints(4);
  std::memcpy(ints.data(), bytes.data() + 3, 16);
  CHECK(ints == std::vector<int32_t>{2, 3, 4, 5});
  // Received chunks serialize again as the same bytes.
  CHECK(serialize(in) == buf);
}

TEST_CASE("wire_chunk: a length beyond the message, or a slice beyond its "
          "tensor, is an error, not an allocation",
          "[wire_chunk]") {
  // A chunk's fields as its serializer writes them, claiming 2^62 bytes
  // in a message that holds 4 (without the check, the allocation itself
  // would throw).
  std::vector<char> buf;
  caf::binary_serializer fields{test_system(), buf};
  REQUIRE(!fields(int64_t{1}, std::string{"k"}, uint64_t{1} << 30,
                  uint64_t{0}, uint64_t{1} << 62));
  buf.insert(buf.end(), {'a', 'b', 'c', 'd'});
  wire_chunk in;
  caf::binary_deserializer source{test_system(), buf};
  CHECK(source(in));
  CHECK_FALSE(in.received.valid());
  wire_chunk bad;
  bad.source = tensor::vec<int32_t>({1, 2});
  bad.data_begin = 4;
  bad.data_size = 8; // past the 8 bytes of the tensor
  std::vector<char> sink_buf;
  caf::binary_serializer sink{test_system(), sink_buf};
  CHECK(sink(bad));
}

TEST_CASE("wire_chunk: chunks of one tensor land straight in one "
          "destination, made from the header in chunk 0",
          "[wire_chunk]") {
  std::vector<float> values(1000);
  std::iota(values.begin(), values.end(), 0.0f);
  auto t = tensor::vec<float>(values);
  auto header = tensor_header_bytes(t);
  REQUIRE_FALSE(header.empty());
  uint64_t total = header.size() + t.byte_size();
  // Two chunks: the header and 100 bytes of data, then the rest.
  wire_chunk first;
  first.step = 4242;
  first.key = "edge;0";
  first.total = total;
  first.prefix = header;
  first.source = t;
  first.data_size = 100;
  wire_chunk second = first;
  second.offset = header.size() + 100;
  second.prefix.clear();
  second.data_begin = 100;
  second.data_size = t.byte_size() - 100;
  auto buf1 = serialize(first);
  auto buf2 = serialize(second);
  wire_chunk in1;
  caf::binary_deserializer src1{test_system(), buf1};
  REQUIRE(!src1(in1));
  REQUIRE(in1.landed.valid());
  CHECK_FALSE(in1.received.valid());
  CHECK(in1.header_size == header.size());
  CHECK(in1.size() == header.size() + 100);
  wire_chunk in2;
  caf::binary_deserializer src2{test_system(), buf2};
  REQUIRE(!src2(in2));
  REQUIRE(in2.landed.valid());
  CHECK(in2.landed.raw() == in1.landed.raw());
  CHECK(in2.landed == t);
  // The destination is forgotten once complete: a third chunk of the
  // same key has nowhere to land and keeps its bytes.
  wire_chunk in3;
  caf::binary_deserializer src3{test_system(), buf2};
  REQUIRE(!src3(in3));
  CHECK_FALSE(in3.landed.valid());
  CHECK(in3.received.valid());
  CHECK(in3.size() == t.byte_size() - 100);
}

namespace {

/// Chunk 0 (the header only) of an int32 tensor of 8 elements, key "k",
/// deserialized by test_system(): its destination lands there. Returns
/// the header's size.
size_t land_first_chunk(int64_t step) {
  auto t = tensor::vec<int32_t>({1, 2, 3, 4, 5, 6, 7, 8});
  auto header = tensor_header_bytes(t);
  wire_chunk first;
  first.step = step;
  first.key = "k";
  first.total = header.size() + t.byte_size();
  first.prefix = header;
  auto buf = serialize(first);
  wire_chunk in;
  caf::binary_deserializer src{test_system(), buf};
  REQUIRE(!src(in));
  REQUIRE(in.landed.valid());
  return header.size();
}

} // namespace

TEST_CASE("wire_chunk: a step that ended forgets its destinations",
          "[wire_chunk]") {
  auto header_size = land_first_chunk(777);
  auto landing = chunk_landing::of(test_system());
  landing->forget(777);
  uint64_t h = 0;
  CHECK_FALSE(landing->take(777, "k", header_size, 8, h).valid());
}

TEST_CASE("wire_chunk: each actor system has destinations of its own",
          "[wire_chunk]") {
  auto header_size = land_first_chunk(778);
  caf::actor_system_config cfg;
  add_types_impl(cfg);
  caf::actor_system other{cfg};
  uint64_t h = 0;
  // Another system's step 778 with the same key is not this one's.
  CHECK_FALSE(
    chunk_landing::of(other)->take(778, "k", header_size, 8, h).valid());
  CHECK(chunk_landing::of(test_system())
          ->take(778, "k", header_size, 8, h)
          .valid());
}
