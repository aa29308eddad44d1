// Images of replicated queues and accumulators (durable_state.hpp): a
// version byte, a kind byte, then the fields in wire.hpp's encoding.

#include "durable_state.hpp"

#include <cstring>

#include "actorflow/graph/wire.hpp"

namespace actorflow {

namespace {

constexpr uint8_t image_version = 1;
constexpr uint8_t queue_kind_byte = 1;
constexpr uint8_t accumulator_kind_byte = 2;

void encode_tags(byte_writer& w, const std::vector<int64_t>& tags) {
  w.u64(tags.size());
  for (auto t : tags)
    w.i64(t);
}

bool decode_tags(byte_reader& r, std::vector<int64_t>& tags) {
  uint64_t n = 0;
  if (!r.count(n, 8))
    return false;
  tags.resize(n);
  for (auto& t : tags)
    if (!r.i64(t))
      return false;
  return true;
}

void encode_tuple(byte_writer& w, const queue_core::tuple& t) {
  w.u64(t.size());
  for (const auto& x : t)
    encode(w, x);
}

bool decode_tuple(byte_reader& r, queue_core::tuple& t) {
  uint64_t n = 0;
  if (!r.count(n, 1))
    return false;
  t.resize(n);
  for (auto& x : t)
    if (!decode(r, x))
      return false;
  return true;
}

// A 1-D uint8 tensor: numeric, so the variable's forwarded writes take
// the tensor channel's ring or socket as raw bytes (a string tensor is
// encoded and decoded once more on the way).
tensor as_tensor(const std::string& bytes) {
  tensor t{dtype::uint8, tensor_shape{{static_cast<int64_t>(bytes.size())}}};
  if (!bytes.empty())
    std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

// DataLoss: the image of `what` cannot be read, because `why`.
status unreadable(const std::string& what, const std::string& why) {
  return {error_code::data_loss,
          "the replicated state of " + what + " is unreadable: " + why};
}

// What ends a decoding: OK when every byte was read, else why not.
status finish(const byte_reader& r, bool ok, const std::string& what) {
  if (ok && r.remaining() == 0)
    return {};
  return unreadable(what, r.ok() ? "trailing bytes" : r.error());
}

// The image's bytes after its header, or a DataLoss naming `what`.
status open_image(const tensor& value, const std::string& what,
                  uint8_t kind, std::string& bytes, size_t& at) {
  auto bad = [&](const std::string& why) { return unreadable(what, why); };
  if (value.type() != dtype::uint8 || value.shape().rank() != 1)
    return bad("not a vector of bytes");
  bytes.assign(static_cast<const char*>(value.raw()),
               static_cast<size_t>(value.num_elements()));
  if (bytes.size() < 2 || static_cast<uint8_t>(bytes[0]) != image_version)
    return bad("unknown version");
  if (static_cast<uint8_t>(bytes[1]) != kind)
    return bad(kind == queue_kind_byte ? "not a queue's" : "not an "
                                                           "accumulator's");
  at = 2;
  return {};
}

} // namespace

std::string durable_state_name(const std::string& name) {
  return "_state/" + name;
}

tensor encode_image(const queue_image& x) {
  std::string out;
  byte_writer w{out};
  w.u8(image_version);
  w.u8(queue_kind_byte);
  w.u8(x.closed ? 1 : 0);
  w.u64(x.contents.size());
  for (const auto& t : x.contents)
    encode_tuple(w, t);
  w.u64(x.leased.size());
  for (const auto& [t, batched] : x.leased) {
    w.u8(batched ? 1 : 0);
    encode_tuple(w, t);
  }
  encode_tags(w, x.tags);
  return as_tensor(out);
}

tensor encode_image(const accumulator_image& x) {
  std::string out;
  byte_writer w{out};
  w.u8(image_version);
  w.u8(accumulator_kind_byte);
  encode(w, x.core.sum);
  w.i64(x.core.count);
  w.i64(x.core.global_step);
  w.u64(x.core.replicas.size());
  for (const auto& [name, step] : x.core.replicas) {
    w.bytes(name);
    w.i64(step);
  }
  encode_tags(w, x.tags);
  w.u64(x.takes.size());
  for (const auto& [tag, value] : x.takes) {
    w.i64(tag);
    encode(w, value);
  }
  return as_tensor(out);
}

status decode_image(const tensor& value, const std::string& what,
                    queue_image& out) {
  std::string bytes;
  size_t at = 0;
  if (auto err = open_image(value, what, queue_kind_byte, bytes, at);
      !err.ok())
    return err;
  byte_reader r{std::string_view{bytes}.substr(at)};
  queue_image x;
  uint8_t closed = 0;
  uint64_t n = 0;
  bool ok = r.u8(closed) && r.count(n, 8);
  if (ok) {
    x.contents.resize(n);
    for (auto& t : x.contents)
      if (!(ok = decode_tuple(r, t)))
        break;
  }
  ok = ok && r.count(n, 9);
  if (ok) {
    x.leased.resize(n);
    for (auto& [t, batched] : x.leased) {
      uint8_t b = 0;
      if (!(ok = r.u8(b) && decode_tuple(r, t)))
        break;
      batched = b != 0;
    }
  }
  ok = ok && decode_tags(r, x.tags);
  if (auto err = finish(r, ok, what); !err.ok())
    return err;
  x.closed = closed != 0;
  out = std::move(x);
  return {};
}

status decode_image(const tensor& value, const std::string& what,
                    accumulator_image& out) {
  std::string bytes;
  size_t at = 0;
  if (auto err = open_image(value, what, accumulator_kind_byte, bytes, at);
      !err.ok())
    return err;
  byte_reader r{std::string_view{bytes}.substr(at)};
  accumulator_image x;
  int64_t count = 0;
  uint64_t n = 0;
  bool ok = decode(r, x.core.sum) && r.i64(count)
            && r.i64(x.core.global_step) && r.count(n, 16);
  if (ok) {
    x.core.replicas.resize(n);
    for (auto& [name, step] : x.core.replicas)
      if (!(ok = r.bytes(name) && r.i64(step)))
        break;
  }
  ok = ok && decode_tags(r, x.tags) && r.count(n, 9);
  if (ok) {
    x.takes.resize(n);
    for (auto& [tag, v] : x.takes)
      if (!(ok = r.i64(tag) && decode(r, v)))
        break;
  }
  if (ok && (count < 0 || count > INT32_MAX))
    ok = r.fail("a count of " + std::to_string(count));
  if (auto err = finish(r, ok, what); !err.ok())
    return err;
  x.core.count = static_cast<int32_t>(count);
  out = std::move(x);
  return {};
}

} // namespace actorflow
