#pragma once

#include <string>
#include <vector>

#include "actorflow/transport/tls_config.hpp"

namespace caf {
class actor_system;
class actor_system_config;
} // namespace caf

namespace actorflow {

/// Registers actorflow's message types and loads CAF's middleman into
/// `cfg`. An embedding application calls this (and `add_options`) on its
/// own config before creating its actor system, then hands that system to
/// servers and sessions.
void add_types(caf::actor_system_config& cfg);

/// Applies actorflow's CAF defaults to `cfg`: the sharing scheduler, no
/// middleman worker threads, automatic direct connections between nodes,
/// and heartbeats so a silent peer is noticed (docs/DESIGN.md explains the
/// measurements behind them). Values already set in `cfg` are kept.
void add_options(caf::actor_system_config& cfg);

/// Configures the process-wide actor system before its first use, as a CAF
/// application configures its own: `args` are CAF 0.17's command-line
/// options ("--scheduler.max-threads=2", "--middleman.heartbeat-interval=1s")
/// and `ini` a CAF INI document ([scheduler], [middleman], ... sections).
/// What they set wins over actorflow's defaults (add_options). Checks
/// everything first and changes nothing on error: InvalidArgument naming
/// the argument, or `source` (where `ini` came from) and the INI's error,
/// the key CAF does not know, or a value of the wrong type for its option
/// or out of its range ("my.ini: [scheduler] max-threads = -3: expected a
/// uint64", "--scheduler.max-threads=0: must be at least 1": max-threads
/// 1 to 1024, max-throughput and middleman.max-consecutive-reads at least
/// 1, middleman.workers 0 to 1024, scheduler.policy 'stealing' or
/// 'sharing', no negative duration, actorflow.tensor-channel a bool,
/// actorflow.scheduler-spin 0 to 1 s); FailedPrecondition if the system
/// exists already. Does not block.
void configure_default_system(std::vector<std::string> args,
                              std::string ini = {},
                              std::string source = "the CAF configuration");

/// Turns on mutual TLS for every connection of the process-wide actor
/// system (its servers, sessions and the tasks they reach), before its
/// first use. Checks `cfg`'s files first (see enable_tls in
/// transport/transport.hpp) and changes nothing on error: InvalidArgument
/// naming the option and file; FailedPrecondition if the system exists
/// already. The system is then created with CAF's automatic connections
/// off (they would bypass TLS), and tensors travel over CAF's encrypted
/// connections (the tensor channel speaks plain TCP). An embedding
/// application with its own system calls enable_tls on it instead (and
/// deny_file_access for its files). The key, certificate and CA file are
/// denied to every op of the process (kernels/file_policy.hpp). Blocks
/// for the file reads.
void configure_default_tls(const tls_config& cfg);

/// The process-wide actor system used when a server or session is created
/// without one. Created on first use with add_types and add_options;
/// lives until the process exits. Thread-safe.
caf::actor_system& default_system();

} // namespace actorflow
