// What a monitor certificate's CAF connection may send (monitor_filter.hpp),
// on bytes CAF's own serializer writes as BASP would: requests to watch
// pass, anything else closes the connection, and a payload a peer forged
// is refused, not trusted.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/make_message.hpp>
#include <caf/system_messages.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "monitor_filter.hpp"

using namespace actorflow;
using namespace actorflow::transport_detail;
namespace basp = caf::io::basp;

namespace {

constexpr uint64_t task_id = 7;
constexpr uint64_t monitor_id = 9;
constexpr uint64_t other_id = 11;

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg.add_message_types<caf::id_block::actorflow>()};
  std::shared_ptr<monitor_access> access = std::make_shared<monitor_access>();

  fixture() {
    access->allow(task_id, {get_monitor_atom::uint_value(),
                            get_stats_atom::uint_value()});
    access->allow(monitor_id,
                  {monitor_ping_atom::uint_value()});
  }

  std::vector<char> header(basp::message_type op, uint32_t payload,
                           uint64_t dest, uint8_t flags = 0) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    basp::header hdr{op, flags, payload, 0, 1, dest};
    REQUIRE_FALSE(sink(hdr));
    REQUIRE(buf.size() == basp::header_size);
    return buf;
  }

  // A direct message's payload as BASP writes it: stages, then `msg`.
  std::vector<char> payload(const caf::message& msg, size_t stages = 0) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    std::vector<caf::strong_actor_ptr> fwd(stages);
    REQUIRE_FALSE(sink(fwd, const_cast<caf::message&>(msg)));
    return buf;
  }

  // A filter that saw the monitor's client handshake, naming `node`.
  monitor_filter greeted() {
    monitor_filter filter{access};
    auto head = header(basp::message_type::client_handshake,
                       static_cast<uint32_t>(node.size()), 0);
    REQUIRE(filter.check(head.data(), head.size()).empty());
    REQUIRE(filter.check(node.data(), node.size()).empty());
    return filter;
  }

  // This system's node id as CAF's handshake carries it.
  std::vector<char> node_bytes() {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto id = sys.node();
    REQUIRE_FALSE(sink(id));
    return buf;
  }

  std::vector<char> node = node_bytes();

  // The filter's verdict on one direct message to `dest` (an actor's id,
  // or with `flags` its name), after the handshake: "" if it passes.
  std::string send(const caf::message& msg, uint64_t dest,
                   size_t stages = 0, uint8_t flags = 0) {
    auto filter = greeted();
    auto body = payload(msg, stages);
    auto head = header(basp::message_type::direct_message,
                       static_cast<uint32_t>(body.size()), dest, flags);
    auto why = filter.check(head.data(), head.size());
    if (!why.empty())
      return why;
    return filter.check(body.data(), body.size());
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "monitor filter: requests to watch pass",
                 "[monitor_filter]") {
  CHECK(send(caf::make_message(get_monitor_atom::value), task_id).empty());
  CHECK(send(caf::make_message(get_stats_atom::value), task_id).empty());
  CHECK(send(caf::make_message(monitor_ping_atom::value), monitor_id).empty());
  // What CAF sends every node it meets: its spawn server's info.
  CHECK(send(caf::make_message(caf::sys_atom::value, caf::get_atom::value,
                               std::string{"info"}),
             static_cast<uint64_t>(caf::atom("SpawnServ")), 0,
             basp::header::named_receiver_flag)
          .empty());
  // And the answer to the node's own, to a helper actor of CAF's.
  CHECK(send(caf::make_message(caf::ok_atom::value, std::string{"info"},
                               caf::strong_actor_ptr{}, std::string{"name"}),
             other_id)
          .empty());
  // Heartbeats, and the bookkeeping of its own node's proxies: its
  // monitor and down messages begin with its node.
  auto filter = greeted();
  auto beat = header(basp::message_type::heartbeat, 0, 0);
  CHECK(filter.check(beat.data(), beat.size()).empty());
  for (auto op : {basp::message_type::monitor_message,
                  basp::message_type::down_message}) {
    std::vector<char> body;
    caf::binary_serializer sink{sys, body};
    auto self = sys.node();
    auto other = sys.node();
    REQUIRE_FALSE(sink(self, other));
    auto head = header(op, static_cast<uint32_t>(body.size()), task_id);
    CHECK(filter.check(head.data(), head.size()).empty());
    CHECK(filter.check(body.data(), body.size()).empty());
  }
  // The same handshake again (CAF's select-connection) is the same node.
  auto hello = header(basp::message_type::client_handshake,
                      static_cast<uint32_t>(node.size()), 0);
  CHECK(filter.check(hello.data(), hello.size()).empty());
  CHECK(filter.check(node.data(), node.size()).empty());
  CHECK_FALSE(filter.refused());
}

TEST_CASE_METHOD(fixture,
                 "monitor filter: a monitor speaks for its own node only, "
                 "after its handshake",
                 "[monitor_filter]") {
  using Catch::Contains;
  // Anything before the handshake, and a server's handshake.
  {
    monitor_filter filter{access};
    auto beat = header(basp::message_type::heartbeat, 0, 0);
    CHECK_THAT(filter.check(beat.data(), beat.size()),
               Contains("BASP operation 6 before its handshake"));
  }
  {
    monitor_filter filter{access};
    auto head = header(basp::message_type::client_handshake,
                       static_cast<uint32_t>(node.size()), 0);
    head[0] = static_cast<char>(basp::message_type::server_handshake);
    CHECK_THAT(filter.check(head.data(), head.size()),
               Contains("before its handshake"));
  }
  // Another node's down message would end this node's proxies of it.
  auto other = node;
  other.back() = static_cast<char>(other.back() ^ 0x5a);
  for (auto op : {basp::message_type::monitor_message,
                  basp::message_type::down_message}) {
    auto filter = greeted();
    auto body = other;
    body.insert(body.end(), node.begin(), node.end());
    auto head = header(op, static_cast<uint32_t>(body.size()), task_id);
    REQUIRE(filter.check(head.data(), head.size()).empty());
    CHECK_THAT(filter.check(body.data(), body.size()),
               Contains("a monitor or down message for another node"));
  }
  // A second handshake naming another node.
  auto filter = greeted();
  auto hello = header(basp::message_type::client_handshake,
                      static_cast<uint32_t>(other.size()), 0);
  REQUIRE(filter.check(hello.data(), hello.size()).empty());
  CHECK_THAT(filter.check(other.data(), other.size()),
             Contains("a second node"));
  // And a server handshake once greeted.
  auto server = greeted();
  auto head = header(basp::message_type::server_handshake, 4, 0);
  CHECK_THAT(server.check(head.data(), head.size()),
             Contains("a server handshake"));
}

TEST_CASE_METHOD(fixture,
                 "monitor filter: running a graph, another actor or an exit "
                 "message closes the connection",
                 "[monitor_filter]") {
  using Catch::Contains;
  // The task's other requests: a session, a step, a reset.
  CHECK_THAT(send(caf::make_message(create_session_atom::value,
                                    session_config{}),
                  task_id),
             Contains("a monitor certificate may only watch: it sent "
                      "'new_sess' to actor 7"));
  CHECK_THAT(send(caf::make_message(reset_atom::value,
                                    std::vector<std::string>{}),
                  task_id),
             Contains("to actor 7"));
  // An atom allowed for one actor is not for another.
  CHECK_THAT(send(caf::make_message(get_monitor_atom::value), monitor_id),
             Contains("to actor 9"));
  CHECK_THAT(send(caf::make_message(monitor_ping_atom::value), other_id),
             Contains("to actor 11"));
  // Not a request at all: an exit message, a message led by a string.
  CHECK_THAT(send(caf::make_message(caf::exit_msg{
                    nullptr, caf::exit_reason::kill}),
                  task_id),
             Contains("a message that is not a request to watch"));
  CHECK_THAT(send(caf::make_message(std::string{"get_mon"}), task_id),
             Contains("not a request to watch"));
  // Forwarding stages would send the reply elsewhere.
  CHECK_THAT(send(caf::make_message(get_monitor_atom::value), task_id, 1),
             Contains("forwarding stages"));
}

TEST_CASE_METHOD(fixture,
                 "monitor filter: routed messages, names and forged headers "
                 "are refused, and a refusal sticks",
                 "[monitor_filter]") {
  using Catch::Contains;
  auto filter = greeted();
  auto routed = header(basp::message_type::routed_message, 10, task_id);
  CHECK_THAT(filter.check(routed.data(), routed.size()),
             Contains("routed message"));
  // Every read after a refusal is refused.
  auto beat = header(basp::message_type::heartbeat, 0, 0);
  CHECK_FALSE(filter.check(beat.data(), beat.size()).empty());
  CHECK(filter.refused());

  // The spawn server spawns as well; other names are not asked at all.
  auto spawn_serv = static_cast<uint64_t>(caf::atom("SpawnServ"));
  CHECK_THAT(send(caf::make_message(caf::spawn_atom::value,
                                    std::string{"anything"}, caf::message{}),
                  spawn_serv, 0, basp::header::named_receiver_flag),
             Contains("a message other than its info request"));
  CHECK_THAT(send(caf::make_message(caf::sys_atom::value,
                                    caf::get_atom::value,
                                    std::string{"other"}),
                  spawn_serv, 0, basp::header::named_receiver_flag),
             Contains("a message other than its info request"));
  CHECK_THAT(send(caf::make_message(caf::get_atom::value,
                                    std::string{"middleman.app-identifiers"}),
                  static_cast<uint64_t>(caf::atom("ConfigServ")), 0,
                  basp::header::named_receiver_flag),
             Contains("by name"));

  // Anything else led by 'ok' is no answer of CAF's.
  CHECK_THAT(send(caf::make_message(caf::ok_atom::value, std::string{"x"},
                                    caf::strong_actor_ptr{}, std::string{}),
                  other_id),
             Contains("an answer other than its spawn server's info"));
  CHECK_THAT(send(caf::make_message(caf::ok_atom::value, std::string{"info"}),
                  other_id),
             Contains("it sent 'ok' to actor 11"));

  auto unknown = greeted();
  auto bad_op = header(basp::message_type::heartbeat, 0, 0);
  bad_op[0] = 0x42;
  CHECK_THAT(unknown.check(bad_op.data(), bad_op.size()),
             Contains("BASP operation 66"));

  auto short_read = greeted();
  CHECK_THAT(short_read.check(beat.data(), 5), Contains("a read of 5 bytes"));

  // A payload cut short, or one whose type names claim more than it holds.
  auto body = payload(caf::make_message(get_monitor_atom::value));
  for (size_t cut : {size_t{0}, size_t{1}, size_t{3}, body.size() - 1}) {
    auto f = greeted();
    auto head = header(basp::message_type::direct_message,
                       static_cast<uint32_t>(cut), task_id);
    if (cut == 0) {
      CHECK_THAT(f.check(head.data(), head.size()),
                 Contains("without a payload"));
      continue;
    }
    REQUIRE(f.check(head.data(), head.size()).empty());
    INFO("cut at " << cut);
    CHECK_FALSE(f.check(body.data(), cut).empty());
  }
  auto forged = body;
  forged[3] = 0x7f; // the type names' length, past the payload's end
  auto f = greeted();
  auto head = header(basp::message_type::direct_message,
                     static_cast<uint32_t>(forged.size()), task_id);
  REQUIRE(f.check(head.data(), head.size()).empty());
  CHECK_FALSE(f.check(forged.data(), forged.size()).empty());
}
