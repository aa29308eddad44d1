#pragma once

// The tensor channel's frame format (tensor_channel.cpp's header comment
// describes the wire): the prefix, its checks, and the decoding of a
// frame's key, head and message body. No sockets here: these functions see
// bytes a peer sent, so each is a decoder the fuzzers drive
// (test/fuzz/fuzz_tensor_frame.cpp) and none trusts a length it reads.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <caf/message.hpp>

#include "actorflow/graph/tensor.hpp"
#include "actorflow/graph/wire.hpp"

namespace actorflow::tensor_channel {

inline constexpr char hello[8] = {'A', 'F', 'T', 'C', 'H', 'A', 'N', '1'};
inline constexpr uint32_t frame_magic = 0x46544641; // "AFTF"
inline constexpr size_t prefix_size = 40;
inline constexpr uint32_t flag_encoded = 1;
inline constexpr uint32_t flag_message = 2;
inline constexpr uint32_t flag_ring_offer = 4;
inline constexpr uint32_t flag_in_ring = 8;
inline constexpr uint32_t flag_sender = 16;
// Where the prefix keeps the flags.
inline constexpr size_t flags_offset = 28;
inline constexpr uint32_t max_ring_path = 64;
// A sender's task name ("/job:worker/replica:0/task:12"), and more.
inline constexpr uint32_t max_sender_name = 256;
inline constexpr std::string_view run_graph_kind = "run_graph";
inline constexpr std::string_view step_reply_kind = "step_reply";
/// The key of a run_graph request's feed that travels as a tensor frame
/// of its own ahead of the request (feed_key + its position in the
/// request's feeds): no rendezvous key starts with a control character.
inline constexpr std::string_view feed_key = "\x01" "feed/";

/// Feeds that came ahead of their request, by position, for parse_message
/// to put in place.
using arrived_feeds = std::vector<std::pair<size_t, tensor>>;
inline constexpr uint32_t max_key = 1 << 16;
inline constexpr uint32_t max_header = 1 << 16;
// A string tensor's whole encoding, and any tensor's data: what one frame
// may announce before the receiver allocates for it.
inline constexpr uint64_t max_encoded = uint64_t{1} << 30;
inline constexpr uint64_t max_data = uint64_t{1} << 36;

/// A frame's fixed-size prefix.
struct frame_prefix {
  uint32_t magic = 0;
  uint32_t key_len = 0;
  uint64_t inbox = 0;
  int64_t step = 0;
  uint32_t head_len = 0;
  uint32_t flags = 0;
  uint64_t data_len = 0;
};

/// What a frame carries, by its flags.
enum class frame_kind {
  invalid,
  tensor,     // a tensor's wire header in the head, its data after
  in_ring,    // as tensor, the data in the ring (its position after)
  encoded,    // a string tensor's whole encoding in the head
  message,    // a message body in the head, its kind in the key
  ring_offer, // the key is a ring's path
  sender,     // the key is the sending task's name (name_self)
};

/// Whether `name` may name a sender: printable ASCII without spaces, at
/// most max_sender_name bytes, as a task name is (it ends up in the
/// monitor's JSON and in Prometheus labels).
bool valid_sender_name(std::string_view name);

/// Reads the prefix from `bytes` (prefix_size of them); false if short.
bool parse_prefix(std::string_view bytes, frame_prefix& p);

/// Writes a prefix.
void write_prefix(byte_writer& w, uint64_t inbox, int64_t step,
                  size_t key_len, size_t head_len, uint32_t flags,
                  uint64_t data_len);

/// The frame's kind if its prefix is well-formed and within the limits
/// (magic, flags, key, head and data lengths), else invalid.
frame_kind check_prefix(const frame_prefix& p);

/// The message of a `message` frame from its kind (the key) and body; an
/// empty message when they do not parse or the step disagrees. `feeds`,
/// for a run_graph request, go in place of the (empty) feeds at their
/// positions; a position the request has not, or whose feed is not empty,
/// makes the frame invalid too.
caf::message parse_message(std::string_view kind, int64_t step,
                           std::string_view body,
                           arrived_feeds* feeds = nullptr);

/// The tensor of a tensor, in_ring or encoded frame from its head: for
/// tensor and in_ring, its header (the data is read into `value`'s buffer
/// after); false if the head does not parse or does not match `p`.
bool decode_tensor_head(const frame_prefix& p, frame_kind kind,
                        std::string_view head, tensor& value);

/// Decodes a whole frame held in `bytes` (prefix, key, head, data) as the
/// reading thread does, without delivering it: true if it is one valid
/// frame and nothing else. For the fuzzers and the tests.
bool decode_frame(std::string_view bytes);

} // namespace actorflow::tensor_channel
