#pragma once

// Private to actors/: a ring of shared memory through which a tensor
// channel's link hands a frame's element bytes to a reading thread of
// another process on the same host. The frame itself still goes over
// the TCP connection, with the ring position in place of the bytes: the
// connection keeps the order and wakes the reader, the ring saves the
// kernel's two copies through socket buffers and the link thread's
// wake-up (docs/DESIGN.md, "Tensor channel").
//
// The writer makes the ring as a sealed memfd (it cannot shrink, so a
// reader's copy never faults) and offers it by its /proc path; a reader
// in the same host and PID namespace can open it, any other cannot and
// says so. The writer puts each frame's bytes after the previous ones,
// wrapping to the start when they would not fit whole before the end;
// the reader takes them in the same order, in place: each comes with a
// lease, and the room of the leases that ended, up to the first that has
// not, goes back to the writer.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace actorflow::tensor_channel {

/// The sending end of a ring. Not thread-safe: one writer at a time.
class ring_writer {
public:
  ring_writer() = default;
  ring_writer(const ring_writer&) = delete;
  ring_writer& operator=(const ring_writer&) = delete;
  ~ring_writer();

  /// Makes and maps a ring of `capacity` bytes (a multiple of 4096); false
  /// (and no ring) if the system cannot.
  bool create(uint64_t capacity);

  /// What a reader opens, "/proc/<pid>/fd/<fd>", while the file is open.
  const std::string& path() const {
    return path_;
  }

  /// The random number at the ring's start: a reader that finds it there
  /// opened this ring and not another process's file of the same path.
  uint64_t token() const {
    return token_;
  }

  uint64_t capacity() const {
    return capacity_;
  }

  /// Closes the file (the mapping stays), once the reader opened it or
  /// said it cannot.
  void close_file();

  /// Unmaps the ring: the reader could not open it.
  void reset();

  explicit operator bool() const noexcept {
    return base_ != nullptr;
  }

  /// Copies `len` bytes from `data` into the ring if they fit now; the
  /// position the reader gets them from, or nothing when the reader has
  /// not freed enough room yet. Never blocks.
  std::optional<uint64_t> put(const void* data, uint64_t len);

private:
  char* base_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t head_ = 0; // where the next bytes go (a running count)
  uint64_t token_ = 0;
  int fd_ = -1;
  std::string path_;
};

/// Bytes taken from a ring, in place: they stay as they are until
/// `owner` (and every copy of it) has ended, which frees their room. The
/// ring stays mapped while any lease lives, its reader gone or not.
struct ring_lease {
  void* data = nullptr;
  std::shared_ptr<void> owner;
};

/// The reading end of a ring. take() from one thread; leases may end on
/// any.
class ring_reader {
public:
  ring_reader() = default;
  ring_reader(const ring_reader&) = delete;
  ring_reader& operator=(const ring_reader&) = delete;

  /// Maps the ring a writer offered: `path` must be "/proc/<pid>/fd/<fd>"
  /// naming a memfd of exactly `capacity` bytes of ring that cannot
  /// shrink and starts with `token`. False (and no ring) otherwise.
  bool open(const std::string& path, uint64_t capacity, uint64_t token);

  explicit operator bool() const noexcept {
    return map_ != nullptr;
  }

  /// The `len` bytes at `pos`, in place, under a lease. Nothing when they
  /// are not the next bytes a writer could have put there without
  /// overwriting a lease's (the peer broke the protocol). Never blocks
  /// beyond a short lock that ending leases take too.
  std::optional<ring_lease> take(uint64_t pos, uint64_t len);

private:
  struct mapping;
  std::shared_ptr<mapping> map_;
};

} // namespace actorflow::tensor_channel
