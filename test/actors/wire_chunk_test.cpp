// wire_chunk (actors/messages.hpp): a chunk of a large tensor's encoding,
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

#include "actorflow/actors/type_ids.hpp"

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
  wire_chunk out;
  out.prefix = "abcd";
  auto buf = serialize(out);
  // Claim 1 GiB of bytes in a message that holds 4.
  uint64_t huge = uint64_t{1} << 30;
  std::memcpy(buf.data(), &huge, sizeof(huge));
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
