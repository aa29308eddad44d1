#pragma once

// Private to actors/: the tensor channel. `_Send` values between executors
// of different processes go over a TCP connection of their own, beside
// CAF's: a frame header, then the tensor's bytes written straight from its
// buffer and read straight into the receiving tensor. CAF's BASP path
// copies each message into a buffer on both sides and serializes every
// message its broker has queued before it writes the first
// (docs/DESIGN.md, "Tensor channel"). A step's later `run_graph` requests
// to an executor in another process, and its answers, go the same way:
// CAF's path costs a hop through each side's network thread both ways.
// Between processes of one host a tensor's bytes go through a ring of
// shared memory instead of the socket (shared_ring.hpp).

#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "actorflow/transport/channel_info.hpp"
#include "actorflow/graph/tensor.hpp"

namespace actorflow {
struct run_graph_request;
struct run_graph_response;
} // namespace actorflow

namespace actorflow::tensor_channel {

/// Opens an inbox for executor `exec` on the listener of `exec`'s actor
/// system for `host` (bound to that host on a free port when first
/// needed; each actor system has listeners, inboxes and links of its own,
/// system_data.hpp). Returns the inbox's address ("host:port/id") for the
/// executors that send to `exec`, or "" when no listener can be bound
/// there (said once on stderr): those senders then use CAF. With TLS on
/// for `exec`'s system, the listener speaks it (tls_socket.hpp). Does not
/// block beyond bind().
std::string open_inbox(const std::string& host, const caf::actor& exec);

/// Closes an inbox that open_inbox returned for an actor of `sys`. When it
/// returns, nothing is being or will be delivered to its executor; later
/// frames for it are read and dropped.
void close_inbox(caf::actor_system& sys, const std::string& address);

class link;

/// Where a sender's frames go: the connection to the process of an inbox
/// (shared by every executor of this actor system that sends there) and the
/// inbox's id on it.
struct route {
  std::shared_ptr<link> to;
  uint64_t inbox = 0;
  explicit operator bool() const noexcept {
    return to != nullptr;
  }
};

/// The route from an executor of `sys` to the inbox at `address` (from
/// open_inbox in some process): `sys`'s link to that process, made on
/// first use, on the link's own thread, with TLS if `sys` has it on; an
/// empty route for a malformed address. Never blocks.
route route_to(const std::string& address, caf::actor_system& sys);

/// Sends `value` as the tensor of `key` in step `step` to the executor
/// behind `r`. Never blocks. With `write_now`, the caller's thread writes
/// what the socket takes at once (when nothing is queued before it) and
/// the link's thread the rest; without, the link's thread writes it all,
/// beside the caller's work. Either way, data from 16 KiB up to half the
/// link's ring (a peer on this host) is copied there by the caller's
/// thread when nothing is queued before it and the ring has room. False
/// when the link is down (it could not connect, or broke): the caller
/// then sends over CAF. A frame that was
/// queued when the link went down goes to `fallback` as one CAF message
/// instead.
bool send(const route& r, int64_t step, const std::string& key,
          const tensor& value, const caf::actor& fallback, bool write_now);

/// Sends a later step's request to the executor behind `r`, which gets
/// (run_graph_atom, req) and answers with send_step_reply. Never blocks:
/// the caller's thread writes what the socket takes at once, the link's
/// thread the rest. When the link is down, or goes down before the frame
/// is written, the same message goes to `exec` over CAF instead. True when
/// it went on the channel.
bool send_run_graph(const route& r, run_graph_request req,
                    const caf::actor& exec);

/// Sends an executor's answer to the request of step `step` to the master
/// behind `r` (an empty route: straight over CAF), which gets
/// (step_reply_atom, step, part, resp). Never blocks; falls back to CAF
/// as send_run_graph does, to `master`. True when it went on the channel.
bool send_step_reply(const route& r, int64_t step, int64_t part,
                     run_graph_response resp, const caf::actor& master);

/// Frames this process's links have handed to CAF because their link
/// went down (tests).
uint64_t fallbacks();

/// Requests and answers (send_run_graph, send_step_reply) this process
/// has read off the channel (tests).
uint64_t messages_received();

/// Tensor frames this process has read whose data came through a ring of
/// shared memory (tests).
uint64_t ring_frames_received();

/// One connection of an actor system's channel, for monitoring: an outgoing
/// link to a peer's listener ("host:port") or an incoming connection
/// (the peer's address), with the frames and bytes (prefix, head and data,
/// wherever the data went) it carried so far, since when it is in its
/// state, and when its last frame went or came (0: none yet). An outgoing
/// link also says its own end's address (what the peer sees as this
/// connection's peer: the console matches the two ends with it) and the
/// task it leads to when this process was told (name_peer); an incoming
/// one the task its peer said it is (name_self), a label, not an identity.
struct link_stat {
  std::string peer;
  bool outgoing = false;
  bool up = false;
  uint64_t bytes = 0;
  uint64_t frames = 0;
  int64_t since_us = 0;
  int64_t last_us = 0;
  std::string local;
  std::string peer_name;
};

/// Tells `sys`'s channel that the inbox at `address` (open_inbox's
/// "host:port/N") belongs to `name` (a task), for link_stats; the first
/// name given for a process stays. The masters and
/// executors say it as they learn their peers' inboxes. Never blocks
/// beyond the registry's lock.
void name_peer(caf::actor_system& sys, const std::string& address,
               const std::string& name);

/// Names the task `sys` serves (a task name, printable ASCII without
/// spaces; anything else is ignored): its links tell their peers, whose
/// link_stats then name the incoming connection by it. The first name
/// stays; links made before it say nothing. Never blocks beyond the
/// registry's lock.
void name_self(caf::actor_system& sys, const std::string& name);

/// Every outgoing link and every open incoming connection of `sys`'s
/// channel. Never blocks beyond the channel's registry lock.
std::vector<link_stat> link_stats(caf::actor_system& sys);

} // namespace actorflow::tensor_channel
