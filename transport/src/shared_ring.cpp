// A ring of shared memory for the tensor channel (shared_ring.hpp).
//
// Layout of the file: a 4096-byte header (the token at offset 0, the
// reader's position at 64, on a cache line of its own), then the ring.
// Positions are running byte counts; a position's place in the ring is
// the count modulo the capacity. The writer's bytes may go from `pos` to
// `pos + len` only when that is at most `capacity` past the reader's
// published position, so it never overwrites bytes not yet taken.

#include "shared_ring.hpp"

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace actorflow::tensor_channel {

namespace {

constexpr uint64_t header_size = 4096;
constexpr uint64_t position_offset = 64;
// Each frame's bytes start on a cache line.
constexpr uint64_t alignment = 64;

std::atomic_ref<uint64_t> published(char* base) {
  return std::atomic_ref<uint64_t>{
    *reinterpret_cast<uint64_t*>(base + position_offset)};
}

uint64_t round_up(uint64_t n) {
  return (n + alignment - 1) / alignment * alignment;
}

// Where bytes of length `len` that could follow position `head` start:
// at `head`, or at the ring's start when they would not fit before its
// end.
uint64_t place(uint64_t head, uint64_t len, uint64_t capacity) {
  auto offset = head % capacity;
  return offset + len > capacity ? head + (capacity - offset) : head;
}

void* map_shared(int fd, uint64_t capacity) {
  auto* p = ::mmap(nullptr, header_size + capacity, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// "/proc/<digits>/fd/<digits>" and nothing else: a peer names a ring, not
// any file it likes.
bool is_proc_fd_path(const std::string& path) {
  auto digits = [&](size_t from, size_t to) {
    return to > from
           && path.find_first_not_of("0123456789", from) >= to;
  };
  constexpr std::string_view proc = "/proc/";
  constexpr std::string_view fd = "/fd/";
  if (path.size() > 64 || path.compare(0, proc.size(), proc) != 0)
    return false;
  auto mid = path.find(fd, proc.size());
  return mid != std::string::npos && digits(proc.size(), mid)
         && digits(mid + fd.size(), path.size());
}

} // namespace

// -- writer -------------------------------------------------------------------

ring_writer::~ring_writer() {
  reset();
}

bool ring_writer::create(uint64_t capacity) {
  reset();
  if (capacity == 0 || capacity % 4096 != 0)
    return false;
  int fd = ::memfd_create("actorflow-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return false;
  void* p = nullptr;
  if (::ftruncate(fd, static_cast<off_t>(header_size + capacity)) != 0
      || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
           != 0
      || (p = map_shared(fd, capacity)) == nullptr) {
    ::close(fd);
    return false;
  }
  base_ = static_cast<char*>(p);
  capacity_ = capacity;
  head_ = 0;
  fd_ = fd;
  std::random_device rd;
  token_ = (uint64_t{rd()} << 32) ^ rd();
  std::memcpy(base_, &token_, sizeof(token_));
  published(base_).store(0, std::memory_order_release);
  path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
  return true;
}

void ring_writer::close_file() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void ring_writer::reset() {
  close_file();
  if (base_ != nullptr)
    ::munmap(base_, header_size + capacity_);
  base_ = nullptr;
  capacity_ = 0;
}

std::optional<uint64_t> ring_writer::put(const void* data, uint64_t len) {
  if (base_ == nullptr || len == 0 || len > capacity_)
    return std::nullopt;
  auto pos = place(head_, len, capacity_);
  auto read = published(base_).load(std::memory_order_acquire);
  if (pos + len - read > capacity_)
    return std::nullopt;
  std::memcpy(base_ + header_size + pos % capacity_, data, len);
  head_ = round_up(pos + len);
  return pos;
}

// -- reader -------------------------------------------------------------------

// The reader's mapping, shared with its leases. Leases may end in any
// order; their room goes back in the order it was taken.
struct ring_reader::mapping {
  mapping(char* base, uint64_t capacity) : base(base), capacity(capacity) {
    // nop
  }
  ~mapping() {
    ::munmap(base, header_size + capacity);
  }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;

  // Frees the room of lease `seq` and of the leases after it that ended
  // before it, once every lease before it has ended.
  void end_lease(uint64_t seq) {
    std::lock_guard<std::mutex> guard{mtx};
    leases[seq - first_seq].ended = true;
    bool freed = false;
    while (!leases.empty() && leases.front().ended) {
      released = leases.front().end;
      leases.pop_front();
      ++first_seq;
      freed = true;
    }
    if (freed)
      published(base).store(released, std::memory_order_release);
  }

  struct lease_state {
    uint64_t end;
    bool ended;
  };

  char* base;
  uint64_t capacity;
  std::mutex mtx;
  uint64_t next = 0;              // where the bytes not yet taken start
  std::deque<lease_state> leases; // taken and not freed, in order
  uint64_t first_seq = 0;         // the number of leases.front()
  uint64_t released = 0;          // the room is free up to here
};

bool ring_reader::open(const std::string& path, uint64_t capacity,
                       uint64_t token) {
  if (map_ != nullptr || capacity == 0 || capacity % 4096 != 0
      || capacity > (uint64_t{1} << 32) || !is_proc_fd_path(path))
    return false;
  // What the /proc link resolves to is checked below: a regular file of
  // the ring's size that cannot shrink, holding the token.
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct stat st {};
  void* p = nullptr;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
            && static_cast<uint64_t>(st.st_size) == header_size + capacity
            && (::fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) != 0
            && (p = map_shared(fd, capacity)) != nullptr;
  ::close(fd);
  if (!ok)
    return false;
  auto m = std::make_shared<mapping>(static_cast<char*>(p), capacity);
  uint64_t found = 0;
  std::memcpy(&found, p, sizeof(found));
  if (found != token)
    return false;
  map_ = std::move(m);
  return true;
}

std::optional<ring_lease> ring_reader::take(uint64_t pos, uint64_t len) {
  if (map_ == nullptr)
    return std::nullopt;
  auto& m = *map_;
  auto capacity = m.capacity;
  std::unique_lock<std::mutex> guard{m.mtx};
  // The writer starts each frame's bytes on a cache line at or after the
  // previous frame's end, wrapping only when they would not fit, and
  // never over the room that leases still hold.
  if (len == 0 || len > capacity || pos < m.next || pos % alignment != 0
      || pos != place(pos, len, capacity) || pos - m.next >= capacity
      || pos + len - m.released > capacity)
    return std::nullopt;
  m.next = pos + len;
  auto seq = m.first_seq + m.leases.size();
  m.leases.push_back({pos + len, false});
  guard.unlock();
  ring_lease lease;
  lease.data = m.base + header_size + pos % capacity;
  lease.owner = std::shared_ptr<void>(lease.data,
                                      [map = map_, seq](void*) {
                                        map->end_lease(seq);
                                      });
  return lease;
}

} // namespace actorflow::tensor_channel
