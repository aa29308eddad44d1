// monitor_filter.hpp: a monitor's BASP reads, parsed as CAF 0.17 writes
// them (its own deserializer, primitive fields only: nothing here creates
// a proxy or touches an actor).

#include "monitor_filter.hpp"

#include <algorithm>
#include <string_view>

#include <caf/atom.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

namespace actorflow::transport_detail {

namespace basp = caf::io::basp;

void monitor_access::allow(uint64_t actor, std::vector<uint64_t> atoms) {
  std::lock_guard<std::mutex> guard{mtx_};
  allowed_[actor] = std::move(atoms);
}

bool monitor_access::permits(uint64_t actor, uint64_t atom) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = allowed_.find(actor);
  return i != allowed_.end()
         && std::find(i->second.begin(), i->second.end(), atom)
              != i->second.end();
}

std::string monitor_filter::check(const char* data, size_t size) {
  if (!refused_.empty())
    return refused_;
  auto why = payload_ > 0 ? check_message(data, size)
                          : check_header(data, size);
  if (!why.empty())
    refused_ = "a monitor certificate may only watch: " + why;
  return refused_;
}

std::string monitor_filter::check_header(const char* data, size_t size) {
  if (size != basp::header_size)
    return "a read of " + std::to_string(size) + " bytes where a BASP header ("
           + std::to_string(basp::header_size) + ") was due";
  basp::header hdr;
  caf::binary_deserializer source{nullptr, data, size};
  if (auto err = source(hdr))
    return "a BASP header that does not parse";
  using mt = basp::message_type;
  // A monitor dials in: its first message is its client handshake, which
  // names its node.
  if (!greeted_ && hdr.operation != mt::client_handshake)
    return "it sent BASP operation "
           + std::to_string(static_cast<int>(hdr.operation))
           + " before its handshake";
  switch (hdr.operation) {
    case mt::client_handshake:
    case mt::monitor_message:
    case mt::down_message:
      if (hdr.payload_len == 0)
        return "it sent BASP operation "
               + std::to_string(static_cast<int>(hdr.operation))
               + " without a payload";
      break;
    case mt::heartbeat:
      break;
    case mt::server_handshake:
      return "it sent a server handshake on a connection it opened";
    case mt::direct_message:
      // By name: CAF asks every new node's spawn server for its info.
      if (hdr.has(basp::header::named_receiver_flag)
          && hdr.dest_actor != static_cast<uint64_t>(caf::atom("SpawnServ")))
        return "it sent a message to an actor by name";
      if (hdr.payload_len == 0)
        return "it sent a message without a payload";
      break;
    case mt::routed_message:
      return "it sent a routed message (one naming its own source node)";
    default:
      return "it sent BASP operation "
             + std::to_string(static_cast<int>(hdr.operation));
  }
  operation_ = static_cast<uint8_t>(hdr.operation);
  by_name_ = hdr.has(basp::header::named_receiver_flag);
  dest_ = hdr.dest_actor;
  payload_ = hdr.payload_len;
  return {};
}

std::string monitor_filter::check_message(const char* data, size_t size) {
  auto operation = static_cast<basp::message_type>(operation_);
  auto dest = dest_;
  auto expected = payload_;
  payload_ = 0;
  if (size != expected)
    return "a payload of " + std::to_string(size) + " bytes where "
           + std::to_string(expected) + " were announced";
  using mt = basp::message_type;
  std::string_view bytes{data, size};
  if (operation == mt::client_handshake) {
    // Its node, as CAF serialized it; a second handshake names the same.
    if (greeted_ && bytes != node_)
      return "it named a second node in another handshake";
    node_ = bytes;
    greeted_ = true;
    return {};
  }
  if (operation == mt::monitor_message || operation == mt::down_message) {
    // Both begin with the node they speak for (the one that watches, the
    // one whose actor is gone): the monitor's own, or it could end other
    // nodes' proxies here.
    if (!bytes.starts_with(node_))
      return "it sent a monitor or down message for another node";
    return {};
  }
  // A direct message's payload: its forwarding stages, then the message
  // (type number 0, its type names "@<>+@atom+...", its elements).
  caf::binary_deserializer source{nullptr, data, size};
  size_t stages = 0;
  if (source.begin_sequence(stages) || stages != 0)
    return "it sent a message with forwarding stages to actor "
           + std::to_string(dest);
  uint16_t type_nr = 0;
  std::string types;
  caf::atom_value first{};
  if (source.begin_object(type_nr, types) || type_nr != 0
      || types.compare(0, 9, "@<>+@atom") != 0
      || (types.size() > 9 && types[9] != '+') || source(first))
    return "it sent actor " + std::to_string(dest)
           + " a message that is not a request to watch";
  if (by_name_) {
    // What basp_broker::learned_new_node sends, and nothing else (the
    // spawn server also spawns actors).
    caf::atom_value second{};
    std::string key;
    if (types != "@<>+@atom+@atom+@str" || first != caf::atom("sys")
        || source(second, key) || second != caf::atom("get")
        || key != "info")
      return "it sent CAF's spawn server a message other than its info "
             "request";
    return {};
  }
  if (types == "@<>+@atom+@str+@strong_actor_ptr+@str"
      && first == caf::atom("ok")) {
    // The spawn server's answer to this node's info request (CAF asks
    // every node it meets, from a helper actor whose id is CAF's).
    std::string key;
    if (source(key) || key != "info")
      return "it sent actor " + std::to_string(dest)
             + " an answer other than its spawn server's info";
    return {};
  }
  if (!access_ || !access_->permits(dest, static_cast<uint64_t>(first)))
    return "it sent '" + caf::to_string(first) + "' to actor "
           + std::to_string(dest);
  return {};
}

} // namespace actorflow::transport_detail
