// The tensor channel's ring of shared memory (transport/src/shared_ring.hpp):
// bytes come out as they went in, the writer never overwrites bytes whose
// lease has not ended (room comes back in order, whatever order leases
// end in), and the reader opens only a sealed ring with the writer's
// token and takes only the positions a writer could have used.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "shared_ring.hpp"

using namespace actorflow::tensor_channel;

namespace {

constexpr uint64_t capacity = 64 << 10;

std::vector<char> bytes_of(size_t n, char seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>(seed + static_cast<char>(i % 251));
  return v;
}

// A writer and a reader of one ring, as two processes would have them.
struct ring_pair {
  ring_pair() {
    REQUIRE(writer.create(capacity));
    REQUIRE(reader.open(writer.path(), capacity, writer.token()));
    writer.close_file();
  }
  ring_writer writer;
  ring_reader reader;
};

// A memfd of the ring's size holding `token`, sealed as asked.
int fake_ring(uint64_t token, bool sealed) {
  int fd = ::memfd_create("fake-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096 + capacity) == 0);
  REQUIRE(::pwrite(fd, &token, sizeof(token), 0) == sizeof(token));
  if (sealed)
    REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  return fd;
}

// Takes the `len` bytes at `pos` and copies them out, ending the lease.
bool take_copy(ring_reader& reader, uint64_t pos, uint64_t len, void* out) {
  auto lease = reader.take(pos, len);
  if (!lease)
    return false;
  std::memcpy(out, lease->data, len);
  return true;
}

std::string proc_path(int fd) {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
}

} // namespace

TEST_CASE("shared_ring: bytes come out in order and intact, wrapping "
          "around the end",
          "[shared_ring]") {
  ring_pair ring;
  // 40 frames of 5000..9900 bytes: several times around the ring.
  for (int i = 0; i < 40; ++i) {
    INFO("frame " << i);
    auto in = bytes_of(5000 + 100 * static_cast<size_t>(i),
                       static_cast<char>(i));
    auto pos = ring.writer.put(in.data(), in.size());
    REQUIRE(pos);
    CHECK(*pos % capacity + in.size() <= capacity); // never split
    std::vector<char> out(in.size());
    REQUIRE(take_copy(ring.reader, *pos, out.size(), out.data()));
    CHECK(out == in);
  }
}

TEST_CASE("shared_ring: the writer waits for the reader's room",
          "[shared_ring]") {
  ring_pair ring;
  auto block = bytes_of(capacity / 4, 'a');
  std::vector<uint64_t> at;
  for (int i = 0; i < 4; ++i) {
    auto pos = ring.writer.put(block.data(), block.size());
    REQUIRE(pos);
    at.push_back(*pos);
  }
  // Full: nothing more goes in, and what is there is untouched.
  CHECK_FALSE(ring.writer.put(block.data(), 1));
  std::vector<char> out(block.size());
  REQUIRE(take_copy(ring.reader, at[0], out.size(), out.data()));
  CHECK(out == block);
  // Taking the first frame frees exactly its room.
  auto other = bytes_of(capacity / 4, 'z');
  auto pos = ring.writer.put(other.data(), other.size());
  REQUIRE(pos);
  CHECK(*pos == capacity);
  CHECK_FALSE(ring.writer.put(other.data(), 1));
  for (size_t i = 1; i < 4; ++i) {
    REQUIRE(take_copy(ring.reader, at[i], out.size(), out.data()));
    CHECK(out == block);
  }
  REQUIRE(take_copy(ring.reader, *pos, out.size(), out.data()));
  CHECK(out == other);
  CHECK_FALSE(ring.writer.put(block.data(), capacity + 1));
  CHECK_FALSE(ring.writer.put(block.data(), 0));
}

TEST_CASE("shared_ring: the reader takes only positions a writer could "
          "have used",
          "[shared_ring]") {
  ring_pair ring;
  auto in = bytes_of(1000, 'q');
  auto pos = ring.writer.put(in.data(), in.size());
  REQUIRE(pos);
  std::vector<char> out(capacity + 64, '\0');
  CHECK_FALSE(take_copy(ring.reader, *pos + 8, in.size(), out.data())); // unaligned
  CHECK_FALSE(take_copy(ring.reader, *pos, 0, out.data()));
  CHECK_FALSE(take_copy(ring.reader, *pos, capacity + 1, out.data()));
  // Across the end of the ring, or further ahead than the ring holds.
  CHECK_FALSE(take_copy(ring.reader, capacity - 64, 128, out.data()));
  CHECK_FALSE(take_copy(ring.reader, capacity, 64, out.data()));
  REQUIRE(take_copy(ring.reader, *pos, in.size(), out.data()));
  // Again, or before what was taken.
  CHECK_FALSE(take_copy(ring.reader, *pos, in.size(), out.data()));
  auto next = ring.writer.put(in.data(), in.size());
  REQUIRE(next);
  CHECK(*next == 1024);
  REQUIRE(take_copy(ring.reader, *next, in.size(), out.data()));
  CHECK(std::memcmp(out.data(), in.data(), in.size()) == 0);
}

TEST_CASE("shared_ring: a reader opens only a sealed ring of the size "
          "and token offered",
          "[shared_ring]") {
  ring_writer writer;
  REQUIRE(writer.create(capacity));
  CHECK(writer.path().rfind("/proc/", 0) == 0);
  {
    ring_reader reader;
    CHECK_FALSE(reader.open(writer.path(), capacity, writer.token() + 1));
    CHECK_FALSE(reader);
    CHECK_FALSE(reader.open(writer.path(), capacity * 2, writer.token()));
    CHECK_FALSE(reader.open(writer.path(), capacity + 1, writer.token()));
    CHECK_FALSE(reader.open("/etc/passwd", capacity, writer.token()));
    CHECK_FALSE(reader.open("/proc/self/fd/0", capacity, writer.token()));
    CHECK_FALSE(reader.open(writer.path() + "/..", capacity, writer.token()));
    CHECK_FALSE(reader.open("/proc/999999999/fd/3", capacity, 1));
    // A file that could shrink under the reader's copy is refused.
    int loose = fake_ring(77, false);
    CHECK_FALSE(reader.open(proc_path(loose), capacity, 77));
    ::close(loose);
    int sealed = fake_ring(77, true);
    CHECK(reader.open(proc_path(sealed), capacity, 77));
    ::close(sealed);
    // One ring per reader.
    CHECK_FALSE(reader.open(writer.path(), capacity, writer.token()));
  }
  ring_reader reader;
  CHECK(reader.open(writer.path(), capacity, writer.token()));
  // Once the writer closed its file, nothing can open it by that path.
  writer.close_file();
  ring_reader late;
  CHECK_FALSE(late.open(writer.path(), capacity, writer.token()));
  CHECK_FALSE(writer.create(capacity + 1));
  CHECK_FALSE(writer);
}

TEST_CASE("shared_ring: room comes back in order, whatever order leases "
          "end in, and the ring outlives its reader",
          "[shared_ring]") {
  std::optional<ring_lease> first;
  std::optional<ring_lease> second;
  {
    ring_pair ring;
    auto block = bytes_of(capacity / 2, 'm');
    auto p0 = ring.writer.put(block.data(), block.size());
    auto p1 = ring.writer.put(block.data(), block.size());
    REQUIRE(p0);
    REQUIRE(p1);
    first = ring.reader.take(*p0, block.size());
    second = ring.reader.take(*p1, block.size());
    REQUIRE(first);
    REQUIRE(second);
    // In place: the bytes are the ring's, not a copy.
    CHECK(std::memcmp(first->data, block.data(), block.size()) == 0);
    CHECK(static_cast<char*>(second->data)
          == static_cast<char*>(first->data) + block.size());
    // The later lease ends first: its room stays held behind the other.
    second.reset();
    CHECK_FALSE(ring.writer.put(block.data(), 64));
    // Bytes a writer could only have put over the first lease's room.
    CHECK_FALSE(ring.reader.take(capacity, 64));
    first->owner.reset();
    auto again = ring.writer.put(block.data(), block.size());
    REQUIRE(again);
    CHECK(*again == capacity);
    auto held = ring.reader.take(*again, block.size());
    REQUIRE(held);
    first = std::move(held);
  }
  // Reader and writer gone from the pair: the lease still reads its bytes.
  CHECK(static_cast<const char*>(first->data)[1]
        == bytes_of(2, 'm')[1]);
  first.reset();
}
