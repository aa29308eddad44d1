#pragma once

// The connections between processes: CAF's own plain TCP by default, or
// mutual TLS with per-task identity once enable_tls ran for an actor
// system. Every connect and publish of the engine goes through
// transport_actor, so that switching it on covers them all.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/io/middleman_actor.hpp>

#include "actorflow/transport/tls_config.hpp"

namespace actorflow {

/// Loads and checks `cfg`'s files as a connection would (certificate, key
/// and passphrase, that they match, the CA, and that the CA signs the
/// certificate). Throws op_error InvalidArgument naming the option
/// (tls_cert, tls_key, ...) and the file. Blocks for the file reads.
void check_tls_config(const tls_config& cfg);

/// Turns on TLS for every connection `sys` opens or accepts from now on
/// (call it before publishing or connecting). Checks `cfg` first
/// (check_tls_config). Throws op_error: InvalidArgument for bad files;
/// FailedPrecondition if `sys` has CAF's automatic connections on (they
/// would bypass TLS: set middleman.enable-automatic-connections=false) or
/// TLS on already. Blocks for the file reads.
void enable_tls(caf::actor_system& sys, const tls_config& cfg);

/// True once enable_tls succeeded for `sys`. Never blocks.
bool tls_enabled(caf::actor_system& sys);

/// Checks that the certificate `sys` presents (its tls_cert) is for
/// `host`, the host of a task it serves as the cluster spells it: peers
/// dial that name and refuse a certificate that does not name it. The
/// rules are those of every connection: an IP address against the
/// certificate's IP names, a host name against its DNS names (its common
/// name when it has none); "localhost" and 127.0.0.1 are different names.
/// `who` names the task in the message ("task /job:ps/replica:0/task:0
/// (ps0:2222)"). Throws op_error InvalidArgument "tls_cert: FILE
/// (certificate '/CN=...' (DNS:...)) is not for HOST, the host of WHO...",
/// or "... is a client certificate; WHO serves with a task's" when the
/// certificate's role (README, Security) is not `task`.
/// No effect without TLS. Blocks for the file reads when the files
/// changed.
void check_tls_identity(caf::actor_system& sys, const std::string& host,
                        const std::string& who);

/// Adds hosts ("host" or "host:port") whose certificates `sys` accepts on
/// incoming connections: the hosts of a cluster it serves. No effect
/// without TLS. Never blocks.
void trust_hosts(caf::actor_system& sys, const std::vector<std::string>& hosts);

/// Lets peers with a `monitor` certificate (README, Security: roles) send
/// actor `id` of `sys` requests whose first element is one of `atoms`.
/// Monitors may send nothing else to any actor of `sys`: a connection that
/// tries is closed and logged. Plain connections and other roles are not
/// filtered. Call it before the actor is reachable. Never blocks.
void allow_monitors(caf::actor_system& sys, caf::actor_id id,
                    const std::vector<caf::atom_value>& atoms);

/// The middleman actor that `sys` connects (connect_atom) and publishes
/// (publish_atom, unpublish_atom) through: the TLS one after enable_tls,
/// CAF's own otherwise. Requests to it must carry a timeout.
caf::io::middleman_actor transport_actor(caf::actor_system& sys);

/// Why the last TLS connection of `sys` to `host`:`port` failed (refused
/// certificate, handshake error or timeout), "" if none did. For the
/// error of a connect, whose CAF error only says it closed. Never blocks.
std::string last_tls_failure(caf::actor_system& sys, const std::string& host,
                             uint16_t port);

} // namespace actorflow
