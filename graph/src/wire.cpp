#include "actorflow/graph/wire.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace actorflow {

namespace {

static_assert(sizeof(bool) == 1, "bool tensors are sent as one byte each");
static_assert(sizeof(float) == 4 && sizeof(double) == 8);
static_assert(std::numeric_limits<double>::is_iec559);

constexpr bool little_endian_host = std::endian::native == std::endian::little;

// Wire tag of the shape kinds.
constexpr uint8_t shape_known_rank = 0;
constexpr uint8_t shape_unknown_rank = 1;

// Smallest encodings, used to bound counts before reserving.
constexpr size_t min_string_bytes = 8;                    // u64 length
constexpr size_t min_attr_entry_bytes = 8 + 1 + 1;        // key, tag, u8
constexpr size_t min_node_bytes = 8 + 8 + 8 + 8 + 8;      // name..attrs

// True for the numbers of the dtype enum (including dtype::invalid).
bool is_dtype_value(uint8_t x) {
  return x == static_cast<uint8_t>(dtype::invalid) || known_dtype(x);
}

// Reverses the bytes of each `width`-byte element in place.
void swap_elements(unsigned char* data, size_t n_bytes, size_t width) {
  if (width <= 1)
    return;
  for (size_t i = 0; i + width <= n_bytes; i += width)
    for (size_t lo = i, hi = i + width - 1; lo < hi; ++lo, --hi)
      std::swap(data[lo], data[hi]);
}

// The element count of a tensor shape read from the wire, checked as every
// tensor's shape is (checked_num_elements in tensor.hpp): fully defined,
// and the product of its non-zero dimensions fits in int64, whatever the
// order of zero dimensions.
bool checked_wire_elements(byte_reader& r, const tensor_shape& shape,
                           int64_t& n) {
  if (shape.unknown_rank())
    return r.fail("tensor shape of unknown rank");
  if (auto st = checked_num_elements(shape, n); !st.ok())
    return r.fail("tensor shape " + shape.to_string() + ": " + st.message());
  return true;
}

template <class T>
void encode_list(byte_writer& w, const std::vector<T>& xs) {
  w.u64(xs.size());
  for (auto& x : xs) {
    if constexpr (std::is_same_v<T, int64_t>)
      w.i64(x);
    else if constexpr (std::is_same_v<T, std::string>)
      w.bytes(x);
    else if constexpr (std::is_same_v<T, tensor_shape>)
      encode(w, x);
    else
      w.u8(static_cast<uint8_t>(x));
  }
}

bool decode_dtype(byte_reader& r, dtype& x) {
  uint8_t tag = 0;
  if (!r.u8(tag))
    return false;
  if (!is_dtype_value(tag))
    return r.fail("unknown dtype " + std::to_string(tag));
  x = static_cast<dtype>(tag);
  return true;
}

template <class T>
bool decode_list(byte_reader& r, std::vector<T>& xs) {
  constexpr size_t min_item = std::is_same_v<T, int64_t>       ? 8
                              : std::is_same_v<T, std::string> ? min_string_bytes
                                                               : 1;
  uint64_t n = 0;
  if (!r.count(n, min_item))
    return false;
  std::vector<T> result;
  result.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    T x{};
    bool ok;
    if constexpr (std::is_same_v<T, int64_t>)
      ok = r.i64(x);
    else if constexpr (std::is_same_v<T, std::string>)
      ok = r.bytes(x);
    else if constexpr (std::is_same_v<T, tensor_shape>)
      ok = decode(r, x);
    else
      ok = decode_dtype(r, x);
    if (!ok)
      return false;
    result.push_back(std::move(x));
  }
  xs = std::move(result);
  return true;
}

template <class T>
status decode_all(std::string_view in, T& x, std::string_view what) {
  auto corrupt = [&](const std::string& reason) {
    return status{error_code::data_loss,
                  "corrupt " + std::string{what} + ": " + reason};
  };
  byte_reader r{in};
  uint8_t version = 0;
  if (!r.u8(version))
    return corrupt(r.error());
  if (version != wire_format_version)
    return corrupt("unsupported wire format version "
                   + std::to_string(version) + " (expected "
                   + std::to_string(wire_format_version) + ")");
  T result;
  if (!decode(r, result))
    return corrupt(r.error());
  if (r.remaining() != 0)
    return corrupt(std::to_string(r.remaining()) + " trailing bytes after "
                   + std::to_string(r.position()) + " bytes");
  x = std::move(result);
  return status::ok_status();
}

// Why the element bytes of a bool tensor are invalid ("" if they are
// not, or it is not a bool tensor): every byte must be 0 or 1.
std::string invalid_bool(const tensor& x) {
  if (x.type() != dtype::bool_)
    return {};
  auto* data = static_cast<const unsigned char*>(x.raw());
  for (size_t i = 0; i < x.byte_size(); ++i)
    if (data[i] > 1)
      return "invalid bool byte " + std::to_string(data[i]);
  return {};
}

} // namespace

// -- byte_writer --------------------------------------------------------------

void byte_writer::u8(uint8_t x) {
  out_.push_back(static_cast<char>(x));
}

void byte_writer::u32(uint32_t x) {
  char buf[4];
  for (int i = 0; i < 4; ++i)
    buf[i] = static_cast<char>((x >> (8 * i)) & 0xFF);
  out_.append(buf, 4);
}

void byte_writer::u64(uint64_t x) {
  char buf[8];
  for (int i = 0; i < 8; ++i)
    buf[i] = static_cast<char>((x >> (8 * i)) & 0xFF);
  out_.append(buf, 8);
}

void byte_writer::i64(int64_t x) {
  u64(static_cast<uint64_t>(x));
}

void byte_writer::f64(double x) {
  u64(std::bit_cast<uint64_t>(x));
}

void byte_writer::bytes(std::string_view x) {
  u64(x.size());
  out_.append(x.data(), x.size());
}

void byte_writer::raw(const void* data, size_t n) {
  if (n > 0)
    out_.append(static_cast<const char*>(data), n);
}

void byte_writer::reserve(size_t n) {
  out_.reserve(out_.size() + n);
}

// -- byte_reader --------------------------------------------------------------

bool byte_reader::fail(std::string reason) {
  if (ok_) {
    ok_ = false;
    error_ = std::move(reason);
  }
  return false;
}

bool byte_reader::need(size_t n, std::string_view what) {
  if (!ok_)
    return false;
  if (n > remaining())
    return fail("truncated input: " + std::string{what} + " needs "
                + std::to_string(n) + " bytes at offset "
                + std::to_string(pos_) + ", " + std::to_string(remaining())
                + " remain");
  return true;
}

bool byte_reader::u8(uint8_t& x) {
  if (!need(1, "u8"))
    return false;
  x = static_cast<uint8_t>(in_[pos_++]);
  return true;
}

bool byte_reader::u32(uint32_t& x) {
  if (!need(4, "u32"))
    return false;
  uint32_t result = 0;
  for (int i = 0; i < 4; ++i)
    result |= uint32_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
  pos_ += 4;
  x = result;
  return true;
}

bool byte_reader::u64(uint64_t& x) {
  if (!need(8, "u64"))
    return false;
  uint64_t result = 0;
  for (int i = 0; i < 8; ++i)
    result |= uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * i);
  pos_ += 8;
  x = result;
  return true;
}

bool byte_reader::i64(int64_t& x) {
  uint64_t u = 0;
  if (!u64(u))
    return false;
  x = static_cast<int64_t>(u);
  return true;
}

bool byte_reader::f64(double& x) {
  uint64_t u = 0;
  if (!u64(u))
    return false;
  x = std::bit_cast<double>(u);
  return true;
}

bool byte_reader::bytes(std::string& x) {
  uint64_t n = 0;
  if (!u64(n))
    return false;
  if (n > remaining())
    return fail("truncated input: byte string of length " + std::to_string(n)
                + " at offset " + std::to_string(pos_) + ", "
                + std::to_string(remaining()) + " bytes remain");
  x.assign(in_.data() + pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return true;
}

bool byte_reader::raw(void* data, size_t n) {
  if (!need(n, "raw block"))
    return false;
  if (n > 0)
    std::memcpy(data, in_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool byte_reader::count(uint64_t& n, size_t min_item_bytes) {
  uint64_t result = 0;
  if (!u64(result))
    return false;
  if (min_item_bytes == 0)
    min_item_bytes = 1;
  if (result > remaining() / min_item_bytes)
    return fail("truncated input: count " + std::to_string(result)
                + " at offset " + std::to_string(pos_ - 8) + " exceeds the "
                + std::to_string(remaining()) + " remaining bytes");
  n = result;
  return true;
}

// -- tensor_shape -------------------------------------------------------------

void encode(byte_writer& w, const tensor_shape& x) {
  if (x.unknown_rank()) {
    w.u8(shape_unknown_rank);
    return;
  }
  w.u8(shape_known_rank);
  w.u64(x.dims().size());
  for (auto d : x.dims())
    w.i64(d);
}

bool decode(byte_reader& r, tensor_shape& x) {
  uint8_t kind = 0;
  if (!r.u8(kind))
    return false;
  if (kind == shape_unknown_rank) {
    x = tensor_shape::unknown();
    return true;
  }
  if (kind != shape_known_rank)
    return r.fail("unknown shape kind " + std::to_string(kind));
  uint64_t rank = 0;
  if (!r.count(rank, 8))
    return false;
  std::vector<int64_t> dims;
  dims.reserve(static_cast<size_t>(rank));
  for (uint64_t i = 0; i < rank; ++i) {
    int64_t d = 0;
    if (!r.i64(d))
      return false;
    if (d < -1)
      return r.fail("invalid dimension " + std::to_string(d));
    dims.push_back(d);
  }
  x = tensor_shape{std::move(dims)};
  return true;
}

// -- tensor -------------------------------------------------------------------

void encode(byte_writer& w, const tensor& x) {
  w.u8(static_cast<uint8_t>(x.type()));
  if (!x.valid())
    return;
  encode(w, x.shape());
  if (x.type() == dtype::string) {
    for (auto& s : x.flat<std::string>())
      w.bytes(s);
    return;
  }
  auto n_bytes = x.byte_size();
  w.u64(n_bytes);
  if constexpr (little_endian_host) {
    w.raw(x.raw(), n_bytes);
  } else {
    auto& out = w.buffer();
    auto offset = out.size();
    w.raw(x.raw(), n_bytes);
    swap_elements(reinterpret_cast<unsigned char*>(out.data() + offset),
                  n_bytes, dtype_size(x.type()));
  }
}

bool decode(byte_reader& r, tensor& x) {
  uint8_t tag = 0;
  if (!r.u8(tag))
    return false;
  if (tag == static_cast<uint8_t>(dtype::invalid)) {
    x = tensor{};
    return true;
  }
  if (!is_dtype_value(tag))
    return r.fail("unknown dtype " + std::to_string(tag));
  auto type = static_cast<dtype>(tag);
  tensor_shape shape;
  if (!decode(r, shape))
    return false;
  int64_t n = 0;
  if (!checked_wire_elements(r, shape, n))
    return false;
  auto count = static_cast<uint64_t>(n);
  if (type == dtype::string) {
    // Every element takes at least its length prefix on the wire.
    if (count > r.remaining() / min_string_bytes)
      return r.fail("truncated input: " + std::to_string(count)
                    + " strings cannot fit in the "
                    + std::to_string(r.remaining()) + " remaining bytes");
    tensor result{type, std::move(shape)};
    for (auto& s : result.flat<std::string>())
      if (!r.bytes(s))
        return false;
    x = std::move(result);
    return true;
  }
  auto width = dtype_size(type);
  uint64_t n_bytes = 0;
  if (!r.u64(n_bytes))
    return false;
  if (count > std::numeric_limits<uint64_t>::max() / width
      || count * width != n_bytes)
    return r.fail("tensor of shape " + shape.to_string() + " and dtype "
                  + std::string{to_string(type)} + " cannot have "
                  + std::to_string(n_bytes) + " bytes of data");
  if (n_bytes > r.remaining())
    return r.fail("truncated input: tensor data of " + std::to_string(n_bytes)
                  + " bytes, " + std::to_string(r.remaining())
                  + " bytes remain");
  auto result = tensor::uninitialized(type, std::move(shape));
  auto data = static_cast<unsigned char*>(result.raw());
  if (!r.raw(data, static_cast<size_t>(n_bytes)))
    return false;
  if constexpr (!little_endian_host)
    swap_elements(data, static_cast<size_t>(n_bytes), width);
  if (auto bad = invalid_bool(result); !bad.empty())
    return r.fail(std::move(bad));
  x = std::move(result);
  return true;
}

// -- attr_value ---------------------------------------------------------------

void encode(byte_writer& w, const attr_value& x) {
  w.u8(static_cast<uint8_t>(x.index()));
  std::visit(
    [&w](const auto& v) {
      using T = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<T, int64_t>)
        w.i64(v);
      else if constexpr (std::is_same_v<T, double>)
        w.f64(v);
      else if constexpr (std::is_same_v<T, bool>)
        w.u8(v ? 1 : 0);
      else if constexpr (std::is_same_v<T, std::string>)
        w.bytes(v);
      else if constexpr (std::is_same_v<T, dtype>)
        w.u8(static_cast<uint8_t>(v));
      else if constexpr (std::is_same_v<T, tensor_shape>
                         || std::is_same_v<T, tensor>)
        encode(w, v);
      else
        encode_list(w, v);
    },
    x);
}

namespace {

// Decodes alternative I of attr_value.
template <size_t I>
bool decode_alternative(byte_reader& r, attr_value& x) {
  using T = std::variant_alternative_t<I, attr_value>;
  T v{};
  bool ok;
  if constexpr (std::is_same_v<T, int64_t>) {
    ok = r.i64(v);
  } else if constexpr (std::is_same_v<T, double>) {
    ok = r.f64(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = 0;
    ok = r.u8(b);
    if (ok && b > 1)
      return r.fail("invalid bool byte " + std::to_string(b));
    v = b == 1;
  } else if constexpr (std::is_same_v<T, std::string>) {
    ok = r.bytes(v);
  } else if constexpr (std::is_same_v<T, dtype>) {
    ok = decode_dtype(r, v);
  } else if constexpr (std::is_same_v<T, tensor_shape>
                       || std::is_same_v<T, tensor>) {
    ok = decode(r, v);
  } else {
    ok = decode_list(r, v);
  }
  if (!ok)
    return false;
  x.emplace<I>(std::move(v));
  return true;
}

template <size_t... Is>
bool decode_attr(byte_reader& r, uint8_t tag, attr_value& x,
                 std::index_sequence<Is...>) {
  bool result = false;
  bool matched = ((tag == Is ? (result = decode_alternative<Is>(r, x), true)
                             : false)
                  || ...);
  if (!matched)
    return r.fail("unknown attr_value tag " + std::to_string(tag));
  return result;
}

} // namespace

bool decode(byte_reader& r, attr_value& x) {
  uint8_t tag = 0;
  if (!r.u8(tag))
    return false;
  return decode_attr(r, tag, x,
                     std::make_index_sequence<std::variant_size_v<attr_value>>{});
}

// -- node_def -----------------------------------------------------------------

void encode(byte_writer& w, const node_def& x) {
  w.bytes(x.name);
  w.bytes(x.op);
  encode_list(w, x.inputs);
  w.bytes(x.device);
  w.u64(x.attrs.size());
  for (auto& [key, value] : x.attrs) {
    w.bytes(key);
    encode(w, value);
  }
}

bool decode(byte_reader& r, node_def& x) {
  node_def result;
  if (!r.bytes(result.name) || !r.bytes(result.op)
      || !decode_list(r, result.inputs) || !r.bytes(result.device))
    return false;
  uint64_t n_attrs = 0;
  if (!r.count(n_attrs, min_attr_entry_bytes))
    return false;
  for (uint64_t i = 0; i < n_attrs; ++i) {
    std::string key;
    attr_value value;
    if (!r.bytes(key) || !decode(r, value))
      return false;
    if (!result.attrs.emplace(std::move(key), std::move(value)).second)
      return r.fail("duplicate attribute in node '" + result.name + "'");
  }
  x = std::move(result);
  return true;
}

// -- graph_def ----------------------------------------------------------------

void encode(byte_writer& w, const graph_def& x) {
  w.i64(x.seed);
  w.u64(x.nodes.size());
  for (auto& node : x.nodes)
    encode(w, node);
}

bool decode(byte_reader& r, graph_def& x) {
  graph_def result;
  uint64_t n_nodes = 0;
  if (!r.i64(result.seed) || !r.count(n_nodes, min_node_bytes))
    return false;
  result.nodes.reserve(static_cast<size_t>(n_nodes));
  for (uint64_t i = 0; i < n_nodes; ++i) {
    node_def node;
    if (!decode(r, node))
      return false;
    result.nodes.push_back(std::move(node));
  }
  x = std::move(result);
  return true;
}

// -- whole values -------------------------------------------------------------

std::string to_bytes(const tensor& x) {
  std::string out;
  byte_writer w{out};
  // Version, dtype, shape kind, rank, dims, byte count, then the data (plus
  // a length prefix per string).
  size_t header = 1 + 1 + 1 + 8 + 8 * x.shape().dims().size() + 8;
  size_t payload = x.byte_size();
  if (x.type() == dtype::string)
    payload += 8 * static_cast<size_t>(x.num_elements());
  w.reserve(header + payload);
  w.u8(wire_format_version);
  encode(w, x);
  return out;
}

status from_bytes(std::string_view in, tensor& x) {
  return decode_all(in, x, "tensor");
}

std::string tensor_header_bytes(const tensor& x) {
  if (!little_endian_host || !x.valid() || x.type() == dtype::string)
    return {};
  std::string out;
  byte_writer w{out};
  w.u8(wire_format_version);
  w.u8(static_cast<uint8_t>(x.type()));
  encode(w, x.shape());
  w.u64(x.byte_size());
  return out;
}

status tensor_from_header(std::string_view in, tensor& x,
                          size_t& header_size, uint64_t max_data_bytes) {
  auto corrupt = [](const std::string& reason) {
    return status{error_code::data_loss, "corrupt tensor: " + reason};
  };
  if (!little_endian_host)
    return corrupt("raw tensor data needs a little-endian host");
  byte_reader r{in};
  uint8_t version = 0;
  uint8_t tag = 0;
  if (!r.u8(version) || !r.u8(tag))
    return corrupt(r.error());
  if (version != wire_format_version)
    return corrupt("unsupported wire format version "
                   + std::to_string(version));
  if (!is_dtype_value(tag) || tag == static_cast<uint8_t>(dtype::invalid)
      || tag == static_cast<uint8_t>(dtype::string))
    return corrupt("no raw data for dtype " + std::to_string(tag));
  auto type = static_cast<dtype>(tag);
  tensor_shape shape;
  int64_t n = 0;
  uint64_t n_bytes = 0;
  if (!decode(r, shape) || !checked_wire_elements(r, shape, n)
      || !r.u64(n_bytes))
    return corrupt(r.error());
  auto width = dtype_size(type);
  if (static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / width
      || static_cast<uint64_t>(n) * width != n_bytes)
    return corrupt("tensor of shape " + shape.to_string() + " cannot have "
                   + std::to_string(n_bytes) + " bytes of data");
  if (n_bytes > max_data_bytes)
    return corrupt("truncated input: tensor data of "
                   + std::to_string(n_bytes) + " bytes, "
                   + std::to_string(max_data_bytes) + " bytes follow");
  header_size = r.position();
  x = tensor::uninitialized(type, std::move(shape));
  return status::ok_status();
}

status check_received_data(const tensor& x) {
  if (auto bad = invalid_bool(x); !bad.empty())
    return {error_code::data_loss, "corrupt tensor: " + bad};
  return status::ok_status();
}

std::string to_bytes(const graph_def& x) {
  std::string out;
  byte_writer w{out};
  w.u8(wire_format_version);
  encode(w, x);
  return out;
}

status from_bytes(std::string_view in, graph_def& x) {
  return decode_all(in, x, "graph_def");
}

} // namespace actorflow
