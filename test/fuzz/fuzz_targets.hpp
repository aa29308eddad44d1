#pragma once

// The decoders of bytes that come from the network, as fuzz targets: each
// takes any bytes, must never crash, hang or leak, and returns whether
// they decoded. libFuzzer drives them (scripts/fuzz.sh builds each with
// -DACTORFLOW_LIBFUZZER and clang's -fsanitize=fuzzer); the ordinary test
// suite replays their corpora and every crash they ever found
// (test/actors/fuzz_replay_test.cpp).
//
// - fuzz_wire: the tensor and graph wire format (graph/wire.hpp): the
//   first byte picks from_bytes(tensor), from_bytes(graph_def) or
//   tensor_from_header; what decodes must encode back to the same bytes.
// - fuzz_tensor_frame: a whole tensor channel frame (prefix, key, head,
//   data; run_graph and step_reply message bodies as CAF reads them).
// - fuzz_caf_message: a caf::message as CAF's binary deserializer reads
//   one from a peer, with every type actorflow registers.
// - fuzz_monitor_filter: what a peer with a monitor certificate sends over
//   a CAF connection (transport/src/monitor_filter.hpp), read as BASP asks
//   for it (a header, then the payload it announces) after a handshake of
//   its own: true if every read passes. The task's id, its monitor's and
//   the monitor's node are the constants below.

#include <cstddef>
#include <cstdint>

namespace actorflow::fuzz {

bool fuzz_wire(const uint8_t* data, size_t size);
bool fuzz_tensor_frame(const uint8_t* data, size_t size);
bool fuzz_caf_message(const uint8_t* data, size_t size);
bool fuzz_monitor_filter(const uint8_t* data, size_t size);

inline constexpr uint64_t monitor_filter_task_id = 7;
inline constexpr uint64_t monitor_filter_monitor_id = 9;
/// The node the monitor's handshake named (the target feeds that
/// handshake first): its monitor and down messages begin with these bytes.
inline constexpr char monitor_filter_node[] = "fuzz monitor node";

} // namespace actorflow::fuzz
