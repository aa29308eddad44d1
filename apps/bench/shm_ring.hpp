#pragma once

// The shared-memory baseline of actorflow-bench: what two processes of one
// host can do at best with a ring of shared memory of the tensor channel's
// size, against which the fetches that take the channel's ring (a peer on
// this host, docs/DESIGN.md "Tensor channel") are measured.
//
// One request/reply: the client asks for `n` bytes; the server copies
// them from its own buffer into the shared region (the copy in), then
// hands off by bumping a counter; the client copies them out into its own
// buffer (the copy out). Both sides wait for the other's counter the way
// the channel's reading threads wait for a frame: polling (yielding the
// core between polls) for up to a spin time, then blocking (a futex), so
// an idle baseline takes no core from the figures measured beside it.
//
// The client makes the region (a memfd) and the server, this program
// started again in a hidden mode (serve_shm_ring), opens it by its
// /proc/<pid>/fd path, as the channel's reader opens a ring. The server
// ends when the client says so, or when its parent dies.
//
// Blocking calls: serve_shm_ring (until told to stop), shm_ring_client's
// round_trip (one request and its reply, at most shm_ring_timeout).

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace actorflow::bench {

/// What the server prints once it mapped the region.
constexpr const char* shm_ring_marker = "shm-ring-server ready on port ";

/// How long one round trip may take before the peer counts as lost.
constexpr std::chrono::seconds shm_ring_timeout{60};

namespace detail {

/// The region's first cache lines; the data follows at shm_data_offset.
struct shm_control {
  alignas(64) std::atomic<uint32_t> request_seq{0};
  uint64_t request_bytes = 0;
  std::atomic<uint32_t> server_sleeping{0};
  alignas(64) std::atomic<uint32_t> reply_seq{0};
  std::atomic<uint32_t> client_sleeping{0};
};

constexpr uint64_t shm_data_offset = 4096;
constexpr uint64_t shm_quit = ~uint64_t{0};

inline long futex(std::atomic<uint32_t>* word, int op, uint32_t value,
                  const timespec* timeout = nullptr) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value,
                   timeout, nullptr, 0);
}

/// Waits until `word` != `old`: polls (yielding) for `spin`, then blocks
/// on the futex with `sleeping` set so that the other side wakes it.
/// False after `limit` without a change.
inline bool await_change(std::atomic<uint32_t>& word, uint32_t old,
                         std::atomic<uint32_t>& sleeping,
                         std::chrono::microseconds spin,
                         std::chrono::seconds limit) {
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  while (word.load(std::memory_order_acquire) == old) {
    auto now = clock::now();
    if (now - start > limit)
      return false;
    if (now - start < spin) {
      std::this_thread::yield();
      continue;
    }
    sleeping.store(1, std::memory_order_seq_cst);
    if (word.load(std::memory_order_seq_cst) == old) {
      timespec tick{0, 100'000'000};
      futex(&word, FUTEX_WAIT, old, &tick);
    }
    sleeping.store(0, std::memory_order_relaxed);
  }
  return true;
}

/// Bumps `word` and wakes its waiter if it sleeps.
inline void publish(std::atomic<uint32_t>& word,
                    std::atomic<uint32_t>& sleeping) {
  word.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_seq_cst) != 0)
    futex(&word, FUTEX_WAKE, 1);
}

/// The channel's reading threads poll this long before they block
/// (ACTORFLOW_CHANNEL_SPIN_US's default).
constexpr std::chrono::microseconds shm_spin{1000};

} // namespace detail

/// The server side (the hidden `--shm-ring-server` mode): maps the region
/// at `path` of `capacity` data bytes, prints shm_ring_marker (and 0 for
/// the port the marker parser expects), and serves requests until told to
/// stop. Exits (PR_SET_PDEATHSIG) when `parent` dies. Returns the exit
/// status.
inline int serve_shm_ring(pid_t parent, const std::string& path,
                          uint64_t capacity) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return 1;
  auto total = detail::shm_data_offset + capacity;
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      0);
  ::close(fd);
  if (base == MAP_FAILED)
    return 1;
  auto* ctl = static_cast<detail::shm_control*>(base);
  auto* data = static_cast<char*>(base) + detail::shm_data_offset;
  // The sender's own copy of what it sends (a variable's buffer).
  std::vector<char> source(capacity, 2);
  // The sequence before the marker: the client asks as soon as it reads
  // the marker, and a request counted in `seen` would never be answered.
  uint32_t seen = ctl->request_seq.load(std::memory_order_acquire);
  std::string line = std::string{shm_ring_marker} + "0\n";
  if (::write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return 1;
  for (;;) {
    // An idle server sleeps on the futex: bounded waits, forever.
    while (!detail::await_change(ctl->request_seq, seen, ctl->server_sleeping,
                                 detail::shm_spin, std::chrono::seconds(3600)))
      ;
    seen = ctl->request_seq.load(std::memory_order_acquire);
    auto n = ctl->request_bytes;
    if (n == detail::shm_quit)
      return 0;
    if (n > capacity)
      return 1;
    std::memcpy(data, source.data(), n);
    detail::publish(ctl->reply_seq, ctl->client_sleeping);
  }
}

/// The client side: makes the region, starts nothing itself (the caller
/// starts the server with path() and capacity()), and asks for bytes.
class shm_ring_client {
public:
  /// A region with `capacity` data bytes. Throws if the system cannot.
  explicit shm_ring_client(uint64_t capacity) : capacity_(capacity) {
    fd_ = ::memfd_create("actorflow-bench-shm", MFD_CLOEXEC);
    if (fd_ < 0)
      throw std::runtime_error(std::string{"shm ring: memfd_create: "}
                               + std::strerror(errno));
    total_ = detail::shm_data_offset + capacity;
    if (::ftruncate(fd_, static_cast<off_t>(total_)) != 0) {
      ::close(fd_);
      throw std::runtime_error("shm ring: ftruncate failed");
    }
    base_ = ::mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                   0);
    if (base_ == MAP_FAILED) {
      ::close(fd_);
      throw std::runtime_error("shm ring: mmap failed");
    }
    ctl_ = new (base_) detail::shm_control{};
    into_.resize(capacity, 0);
  }

  shm_ring_client(const shm_ring_client&) = delete;
  shm_ring_client& operator=(const shm_ring_client&) = delete;

  ~shm_ring_client() {
    // Tells the server to stop (it may be gone already: then nobody reads
    // this).
    ctl_->request_bytes = detail::shm_quit;
    detail::publish(ctl_->request_seq, ctl_->server_sleeping);
    ::munmap(base_, total_);
    ::close(fd_);
  }

  /// What the server opens.
  std::string path() const {
    return "/proc/" + std::to_string(::getpid()) + "/fd/"
           + std::to_string(fd_);
  }

  uint64_t capacity() const noexcept {
    return capacity_;
  }

  /// Asks for `n` (<= capacity) bytes and copies them out of the region.
  /// Throws when the server does not answer within shm_ring_timeout.
  void round_trip(uint64_t n) {
    if (n > capacity_)
      throw std::invalid_argument("shm ring: more than the ring holds");
    auto before = ctl_->reply_seq.load(std::memory_order_acquire);
    ctl_->request_bytes = n;
    detail::publish(ctl_->request_seq, ctl_->server_sleeping);
    if (!detail::await_change(ctl_->reply_seq, before, ctl_->client_sleeping,
                              detail::shm_spin, shm_ring_timeout))
      throw std::runtime_error("shm ring: the server did not answer");
    std::memcpy(into_.data(),
                static_cast<char*>(base_) + detail::shm_data_offset, n);
  }

private:
  uint64_t capacity_ = 0;
  uint64_t total_ = 0;
  int fd_ = -1;
  void* base_ = nullptr;
  detail::shm_control* ctl_ = nullptr;
  std::vector<char> into_;
};

} // namespace actorflow::bench
