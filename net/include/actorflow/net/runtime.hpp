#pragma once

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

/// The process-wide actor system used when a server or session is created
/// without one. Created on first use with add_types and add_options;
/// lives until the process exits. Thread-safe.
caf::actor_system& default_system();

} // namespace actorflow
