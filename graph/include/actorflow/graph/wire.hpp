#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "actorflow/graph/graph_def.hpp"
#include "actorflow/graph/status.hpp"
#include "actorflow/graph/tensor.hpp"

/// The binary wire format for tensors and graphs, as exchanged between
/// processes.
///
/// All integers are fixed-width little-endian; doubles are their IEEE-754
/// bit pattern as a u64; byte strings are a u64 length followed by the raw
/// bytes. Layouts:
///
/// - tensor_shape: u8 kind (0 = known rank, 1 = unknown rank); for a known
///   rank, u64 rank then one i64 per dimension (-1 = unknown dimension).
/// - tensor: u8 dtype (TensorFlow's DataType number). dtype::invalid ends
///   the encoding (the default tensor). Otherwise the shape, then for
///   numeric and bool tensors a u64 byte count followed by the element
///   bytes as one little-endian row-major block; for string tensors one
///   byte string per element.
/// - attr_value: u8 tag (the variant index) then the alternative: i64,
///   f64, u8 bool, byte string, u8 dtype, shape, tensor, or a u64 count
///   followed by i64s, byte strings or u8 dtypes.
/// - node_def: name, op, u64 input count + inputs, device, u64 attr count +
///   (key, attr_value) pairs in key order.
/// - graph_def: i64 seed, u64 node count, nodes.
/// - to_bytes(): u8 format version (`wire_format_version`) then the value.
namespace actorflow {

/// The version byte at the start of `to_bytes` output.
inline constexpr uint8_t wire_format_version = 1;

/// Appends little-endian fixed-width integers, doubles and length-prefixed
/// byte strings to a std::string. Never fails (other than by bad_alloc).
class byte_writer {
public:
  /// Appends to `out`, which must outlive the writer.
  explicit byte_writer(std::string& out) : out_(out) {
    // nop
  }
  void u8(uint8_t x);
  void u32(uint32_t x);
  void u64(uint64_t x);
  /// Two's complement, as a u64.
  void i64(int64_t x);
  /// The IEEE-754 bit pattern, as a u64.
  void f64(double x);
  /// A u64 length followed by the bytes.
  void bytes(std::string_view x);
  /// `n` bytes from `data`, verbatim (no length prefix).
  void raw(const void* data, size_t n);
  /// Reserves room for `n` more bytes.
  void reserve(size_t n);
  /// The buffer written to.
  std::string& buffer() noexcept {
    return out_;
  }

private:
  std::string& out_;
};

/// Reads what byte_writer wrote. Every read checks bounds: on truncated or
/// corrupt input it returns false, leaves its output argument untouched and
/// puts the reader in a sticky failed state in which every further read
/// returns false. It never reads past the end of the input and never
/// allocates more than the remaining input could justify.
class byte_reader {
public:
  /// Reads from `in`, which must outlive the reader.
  explicit byte_reader(std::string_view in) : in_(in) {
    // nop
  }
  bool u8(uint8_t& x);
  bool u32(uint32_t& x);
  bool u64(uint64_t& x);
  bool i64(int64_t& x);
  bool f64(double& x);
  /// A u64 length then that many bytes. Fails if the length exceeds the
  /// remaining input (checked before allocating).
  bool bytes(std::string& x);
  /// Exactly `n` bytes into `data`.
  bool raw(void* data, size_t n);
  /// A u64 element count for a sequence whose elements take at least
  /// `min_item_bytes` (> 0) each on the wire. Fails if the remaining input
  /// cannot hold that many, so callers may reserve `n` safely.
  bool count(uint64_t& n, size_t min_item_bytes);

  /// Marks the input corrupt with a reason (kept only for the first
  /// failure) and returns false.
  bool fail(std::string reason);

  /// False once any read failed.
  bool ok() const noexcept {
    return ok_;
  }
  /// Bytes not consumed yet.
  size_t remaining() const noexcept {
    return in_.size() - pos_;
  }
  /// Bytes consumed so far.
  size_t position() const noexcept {
    return pos_;
  }
  /// Why the first failure happened ("" while ok()).
  const std::string& error() const noexcept {
    return error_;
  }

private:
  // Checks that `n` bytes remain; fails with a "truncated" reason if not.
  bool need(size_t n, std::string_view what);

  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

/// Shape encoding. decode() rejects an unknown kind byte and dimensions
/// below -1.
void encode(byte_writer& w, const tensor_shape& x);
bool decode(byte_reader& r, tensor_shape& x);

/// Tensor encoding; numeric element data is written as one block. decode()
/// rejects unknown dtypes, shapes that are not fully defined or whose
/// element count overflows int64, byte counts that do not match the shape,
/// bool bytes other than 0 and 1, and element data longer than the
/// remaining input — all before allocating the tensor.
void encode(byte_writer& w, const tensor& x);
bool decode(byte_reader& r, tensor& x);

/// Attribute encoding (tag byte then the alternative). decode() rejects
/// unknown tags and dtype values outside the dtype enum.
void encode(byte_writer& w, const attr_value& x);
bool decode(byte_reader& r, attr_value& x);

/// Node encoding. decode() rejects duplicate attribute keys.
void encode(byte_writer& w, const node_def& x);
bool decode(byte_reader& r, node_def& x);

/// Graph encoding.
void encode(byte_writer& w, const graph_def& x);
bool decode(byte_reader& r, graph_def& x);

/// The version byte followed by the tensor's encoding.
std::string to_bytes(const tensor& x);
/// Decodes the whole of `in` as written by to_bytes(). On failure returns
/// DataLoss "corrupt tensor: <reason>" (unsupported version, truncated or
/// invalid data, trailing bytes) and leaves `x` untouched.
status from_bytes(std::string_view in, tensor& x);

/// For sending a non-string tensor in pieces without encoding it whole:
/// the bytes to_bytes(x) writes before the element data (which follow as
/// the tensor's raw bytes). Empty for string or invalid tensors and on a
/// big-endian host (use to_bytes there).
std::string tensor_header_bytes(const tensor& x);
/// Reads a header written by tensor_header_bytes (or the start of
/// to_bytes) from the front of `in`: sets `x` to a tensor of that dtype
/// and shape whose element bytes are for the caller to write (all
/// x.byte_size() of them; bools must be 0 or 1) and `header_size` to the
/// header's length. DataLoss "corrupt tensor: ..." for a truncated or
/// invalid header, a string tensor, or more data than `max_data_bytes`
/// (what the caller can still receive: checked before allocating); `x`
/// is untouched then.
status tensor_from_header(std::string_view in, tensor& x,
                          size_t& header_size, uint64_t max_data_bytes);
/// For a tensor whose element bytes the caller wrote after
/// tensor_from_header: DataLoss "corrupt tensor: invalid bool byte N" if
/// a bool element is neither 0 nor 1 (every other dtype's bytes are valid).
status check_received_data(const tensor& x);

/// The version byte followed by the graph's encoding.
std::string to_bytes(const graph_def& x);
/// Decodes the whole of `in` as written by to_bytes(). On failure returns
/// DataLoss "corrupt graph_def: <reason>" and leaves `x` untouched.
status from_bytes(std::string_view in, graph_def& x);

} // namespace actorflow
