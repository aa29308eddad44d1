// Tensors arriving at an executor from other partitions: whole (a
// message, the tensor channel) or in chunks (large values over CAF, or
// landed in place by the channel), kept until their Recv runs, or until
// the step starts here.

#include <cstring>

#include "executor.hpp"

namespace actorflow::executor_detail {

// A tensor for `key` in step `id` arrived: completes its Recv, or keeps it
// until the Recv (or the step) starts here.
void deliver(executor_self self, int64_t id, std::string key,
             tensor value) {
  auto& st = self->state;
  st.counters->bytes_in.fetch_add(value.byte_size(),
                                  std::memory_order_relaxed);
  if (st.finished.count(id) > 0)
    return;
  auto s = st.steps.find(id);
  if (s == st.steps.end()) {
    st.early[id].emplace(std::move(key), std::move(value));
    return;
  }
  auto& step = s->second;
  auto waiting = step.rendezvous.send(key, value);
  if (!waiting)
    return;
  auto i = *waiting;
  if (step.trace) {
    node_exec_stats r;
    r.node_name = "RecvTensor";
    r.all_start_micros = now_micros();
    r.timeline_label = "RecvTensor " + key;
    step.response.recv_stats.push_back(std::move(r));
  }
  resume(self, id, i, {}, {std::move(value)});
}

// All chunks of `key` in step `id` have arrived: checks and delivers the
// tensor they make up.
void complete_chunked(executor_self self, int64_t id, const std::string& key) {
  auto& st = self->state;
  auto& part = st.partials[id][key];
  auto bad = [&](status err) {
    st.partials[id].erase(key);
    fail_step(self, id, std::move(err));
  };
  tensor value;
  if (part.value.valid()) {
    value = std::move(part.value);
    if (value.type() == dtype::bool_) {
      auto* b = static_cast<const unsigned char*>(value.raw());
      for (size_t i = 0; i < value.byte_size(); ++i)
        if (b[i] > 1)
          return bad({error_code::data_loss,
                      "corrupt tensor: invalid bool byte "
                        + std::to_string(b[i]) + " in " + key});
    }
  } else if (auto err = from_bytes(part.bytes, value); !err.ok()) {
    return bad(err);
  }
  st.partials[id].erase(key);
  deliver(self, id, key, std::move(value));
}


// One chunk of a tensor sent in chunks (send_over_caf, or landed in place
// by the tensor channel's chunk_landing): collects it, and delivers the
// tensor once its last chunk is in.
void receive_chunk(executor_self self, wire_chunk& wire) {
  auto id = wire.step;
  auto& key = wire.key;
  auto total = wire.total;
  auto offset = wire.offset;
  auto& st = self->state;
  if (st.finished.count(id) > 0)
    return;
  if (wire.landed.valid()) {
    // Already in place (chunk_landing): count it.
    auto& part = st.partials[id][key];
    if (!part.value.valid()) {
      part.value = wire.landed;
      part.header_size = wire.header_size;
    } else if (part.value.raw() != wire.landed.raw()) {
      st.partials[id].erase(key);
      return fail_step(self, id,
                       {error_code::data_loss,
                        "chunks of " + key + " landed in two places"});
    }
    part.received += wire.size();
    if (part.received < total)
      return;
    return complete_chunked(self, id, key);
  }
  auto& part = st.partials[id][key];
  auto bad = [&](status err) {
    st.partials[id].erase(key);
    fail_step(self, id, std::move(err));
  };
  // Chunks only cross processes (a _Send in the same process shares
  // the tensor whole), so a chunk arrives deserialized.
  if (!wire.received.valid())
    return bad({error_code::internal,
                "chunk of " + key + " arrived without its bytes"});
  std::string_view chunk{wire.data(), wire.size()};
  if (offset > total || chunk.size() > total - offset)
    return bad({error_code::data_loss, "chunk out of range for " + key});
  if (part.received == 0 && offset == 0 && part.bytes.empty()) {
    tensor value;
    size_t header = 0;
    if (tensor_from_header(chunk, value, header, total).ok()) {
      if (header + value.byte_size() != total)
        return bad({error_code::data_loss,
                    "corrupt tensor: " + std::to_string(total)
                      + " bytes announced for " + key + ", its header "
                      + "says " + std::to_string(header
                                                 + value.byte_size())});
      part.value = std::move(value);
      part.header_size = header;
    }
  }
  if (part.value.valid() && offset >= part.header_size) {
    std::memcpy(static_cast<char*>(part.value.raw()) + offset
                  - part.header_size,
                chunk.data(), chunk.size());
  } else if (part.value.valid()) {
    // The header's chunk: its data part.
    auto skip = part.header_size - offset;
    if (skip > chunk.size())
      return bad({error_code::data_loss, "split header for " + key});
    std::memcpy(part.value.raw(), chunk.data() + skip,
                chunk.size() - skip);
  } else {
    if (part.bytes.empty())
      part.bytes.resize(total);
    std::copy(chunk.begin(), chunk.end(), part.bytes.begin() + offset);
  }
  part.received += chunk.size();
  if (part.received < total)
    return;
  complete_chunked(self, id, key);
}

} // namespace actorflow::executor_detail
