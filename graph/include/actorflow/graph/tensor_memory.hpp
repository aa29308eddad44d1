#pragma once

// The process's budget of tensor memory (issue 30 §2). Every tensor's
// element storage is counted while the tensor lives (its bytes, rounded
// as allocated; a borrowed buffer is its owner's, a string's characters
// are the string's own: neither is counted). Where a kernel computes a
// tensor (each kernel runs under a tensor_memory_check) or a queue builds
// a batch, an allocation that would take the count past the limit fails
// with op_error (ResourceExhausted), which the step reports naming its
// node, instead of the kernel's OOM killer ending the process:
//
//   OOM when allocating tensor with shape[67108864] and type float on
//   /job:ps/replica:0/task:0/device:CPU:0 by allocator cpu: Fill needs
//   268435456 bytes, the tensor memory limit is 67108864 bytes and
//   4096 are in use [[node big]]
//
// Tensors made elsewhere (decoded from the network, fed by a client,
// built by the API) are counted but never refused: their senders bound
// them (the transport's own budget of bytes in flight), and their paths
// (CAF's deserializer, the tensor channel's reading thread) have no step
// to fail. Freed blocks the buffer cache keeps for reuse are not counted
// against the limit (they are handed out again at once), but a block is
// not kept, and kept ones are unmapped, while the live tensors and the
// cache together would exceed the limit: the process's tensor memory
// stays within it.
//
// Nothing here blocks; every function may be called from any thread.
// Counting costs each owned tensor one relaxed atomic add and one
// subtract.

#include <cstddef>
#include <string_view>

namespace actorflow {

/// Sets the limit of the bytes that live tensors may hold, for tensors
/// allocated from now on; 0 means no limit. Lowering it below what is in
/// use frees nothing: later checked allocations fail until enough
/// tensors die. Until it is first called the limit is
/// default_tensor_memory_limit(). actorflow-node and actorflow-train set
/// it from `--memory_limit`.
void set_tensor_memory_limit(size_t bytes) noexcept;

/// The limit in force (0: none).
size_t tensor_memory_limit() noexcept;

/// 80% of the machine's physical memory or of the memory limit of the
/// process's cgroup (cgroup v2 `memory.max`, v1
/// `memory.limit_in_bytes`, along the process's cgroup path up to the
/// root), whichever is lower; 0 (no limit) if neither can be read.
/// Reads /proc and /sys on every call.
size_t default_tensor_memory_limit();

/// The bytes the element storage of live tensors holds now (their
/// buffers, as allocated: multiples of 64 bytes, of 4 KiB from 256 KiB
/// on).
size_t tensor_memory_in_use() noexcept;

/// The bytes of freed buffers the cache keeps for reuse now.
size_t tensor_memory_cached() noexcept;

/// While one lives, the tensors this thread allocates are checked
/// against the limit: one that would take tensor_memory_in_use() past it
/// throws op_error (ResourceExhausted, "OOM when allocating tensor with
/// shape[...] and type float on DEVICE by allocator cpu: OP needs N bytes,
/// the tensor memory limit is L bytes and U are in use"), allocating
/// nothing. `op` and `device` name who allocates in that message (either
/// may be empty) and must outlive the check. Checks nest; the innermost
/// names. Not copyable; destroy it on the thread that made it.
class tensor_memory_check {
public:
  explicit tensor_memory_check(std::string_view op = {},
                               std::string_view device = {}) noexcept;
  ~tensor_memory_check();
  tensor_memory_check(const tensor_memory_check&) = delete;
  tensor_memory_check& operator=(const tensor_memory_check&) = delete;

  std::string_view op() const noexcept {
    return op_;
  }
  std::string_view device() const noexcept {
    return device_;
  }

private:
  std::string_view op_;
  std::string_view device_;
  const tensor_memory_check* outer_;
};

} // namespace actorflow
