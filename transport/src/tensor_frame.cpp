#include "tensor_frame.hpp"

#include <algorithm>
#include <cstring>

#include <caf/binary_deserializer.hpp>

#include "actorflow/transport/type_ids.hpp"

namespace actorflow::tensor_channel {

bool parse_prefix(std::string_view bytes, frame_prefix& p) {
  if (bytes.size() < prefix_size)
    return false;
  byte_reader r{bytes.substr(0, prefix_size)};
  r.u32(p.magic);
  r.u32(p.key_len);
  r.u64(p.inbox);
  r.i64(p.step);
  r.u32(p.head_len);
  r.u32(p.flags);
  r.u64(p.data_len);
  return r.ok();
}

void write_prefix(byte_writer& w, uint64_t inbox, int64_t step,
                  size_t key_len, size_t head_len, uint32_t flags,
                  uint64_t data_len) {
  w.u32(frame_magic);
  w.u32(static_cast<uint32_t>(key_len));
  w.u64(inbox);
  w.i64(step);
  w.u32(static_cast<uint32_t>(head_len));
  w.u32(flags);
  w.u64(data_len);
}

bool valid_sender_name(std::string_view name) {
  return !name.empty() && name.size() <= max_sender_name
         && std::all_of(name.begin(), name.end(),
                        [](char c) { return c > ' ' && c < 0x7f; });
}

frame_kind check_prefix(const frame_prefix& p) {
  if (p.magic != frame_magic || p.key_len > max_key)
    return frame_kind::invalid;
  switch (p.flags) {
    case 0:
    case flag_in_ring:
      if (p.head_len > max_header || p.data_len > max_data)
        return frame_kind::invalid;
      return p.flags == 0 ? frame_kind::tensor : frame_kind::in_ring;
    case flag_encoded:
    case flag_message:
      if (p.head_len > max_encoded || p.data_len != 0)
        return frame_kind::invalid;
      return p.flags == flag_encoded ? frame_kind::encoded
                                     : frame_kind::message;
    case flag_ring_offer:
      if (p.key_len > max_ring_path || p.head_len != 0)
        return frame_kind::invalid;
      return frame_kind::ring_offer;
    case flag_sender:
      if (p.key_len == 0 || p.key_len > max_sender_name || p.head_len != 0
          || p.data_len != 0 || p.inbox != 0)
        return frame_kind::invalid;
      return frame_kind::sender;
    default:
      return frame_kind::invalid;
  }
}

caf::message parse_message(std::string_view kind, int64_t step,
                           std::string_view body, arrived_feeds* feeds) {
  caf::binary_deserializer source{nullptr, body.data(), body.size()};
  if (kind == run_graph_kind) {
    run_graph_request req;
    if (source(req) || source.remaining() != 0 || req.step_id != step)
      return {};
    if (feeds != nullptr)
      for (auto& [pos, value] : *feeds) {
        if (pos >= req.feeds.size() || req.feeds[pos].second.num_elements() != 0
            || req.feeds[pos].second.type() != dtype::invalid)
          return {};
        req.feeds[pos].second = std::move(value);
      }
    return caf::make_message(run_graph_atom_v, std::move(req));
  }
  if (kind == step_reply_kind) {
    int64_t part = 0;
    run_graph_response resp;
    if (source(part, resp) || source.remaining() != 0)
      return {};
    return caf::make_message(step_reply_atom_v, step, part, std::move(resp));
  }
  return {};
}

bool decode_tensor_head(const frame_prefix& p, frame_kind kind,
                        std::string_view head, tensor& value) {
  if (kind == frame_kind::encoded)
    return from_bytes(head, value).ok();
  if (kind != frame_kind::tensor && kind != frame_kind::in_ring)
    return false;
  size_t header_size = 0;
  return tensor_from_header(head, value, header_size, p.data_len).ok()
         && header_size == head.size() && value.byte_size() == p.data_len;
}

bool decode_frame(std::string_view bytes) {
  frame_prefix p;
  if (!parse_prefix(bytes, p))
    return false;
  auto kind = check_prefix(p);
  if (kind == frame_kind::invalid)
    return false;
  auto rest = bytes.substr(prefix_size);
  if (rest.size() < p.key_len)
    return false;
  auto key = rest.substr(0, p.key_len);
  rest = rest.substr(p.key_len);
  if (kind == frame_kind::ring_offer)
    return rest.empty();
  if (kind == frame_kind::sender)
    return rest.empty() && valid_sender_name(key);
  if (rest.size() < p.head_len)
    return false;
  auto head = rest.substr(0, p.head_len);
  rest = rest.substr(p.head_len);
  if (kind == frame_kind::message)
    return rest.empty() && !parse_message(key, p.step, head).empty();
  tensor value;
  if (!decode_tensor_head(p, kind, head, value))
    return false;
  if (kind == frame_kind::in_ring)
    return rest.size() == 8; // the ring position; the ring is not here
  if (kind == frame_kind::tensor) {
    if (rest.size() != p.data_len)
      return false;
    if (p.data_len > 0)
      std::memcpy(value.raw(), rest.data(), p.data_len);
  } else if (!rest.empty()) {
    return false;
  }
  return check_received_data(value).ok();
}

} // namespace actorflow::tensor_channel
