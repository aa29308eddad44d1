#pragma once

// What several of actorflow-bench's groups use (common.cpp): the cluster
// of the remote figures, the baselines' server processes, the path probe
// and small helpers.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "actorflow/actorflow.hpp"
#include "actorflow/support/local_cluster.hpp"
#include "actorflow/transport/channel_info.hpp"

#include "bench/groups.hpp"
#include "bench/measure.hpp"
#include "bench/raw_tcp.hpp"

namespace actorflow::bench {

/// Deadlines for every step the bench runs: a stuck step fails its figure
/// instead of hanging the bench.
session_config bounded_config();

/// `name`: `override_path` if given, else next to this program, else on
/// $PATH (support::find_program); a bad override is a usage error.
std::string find_binary(const std::string& name,
                        const std::string& override_path,
                        const std::string& flag);

/// A line of progress on stderr.
void note(const std::string& line);

/// Where the far end of the remote figures runs: the ps node and the
/// baselines' servers. On loopback by default; under --netsim (netsim.cpp)
/// another host of the simulated network, this process a host of its own.
struct peer_host {
  /// The far end's address, and this process's.
  std::string ip = "127.0.0.1";
  std::string self_ip = "127.0.0.1";
  /// The command the far end's processes start under (e.g. {"/usr/sbin/ip",
  /// "netns", "exec", NAME}); empty: directly.
  std::vector<std::string> launcher = {};
};

/// This run's peer_host (set once, before anything is measured).
const peer_host& peer();
void set_peer(peer_host host);

/// A baseline's server: this program started again in a hidden `mode`
/// on the peer host (peer(); `--bind` its address), which prints `marker`
/// and its port once it listens, and dies with us.
class baseline_server {
public:
  baseline_server(const std::string& self, const char* mode,
                  const char* marker, const std::string& what,
                  std::vector<std::string> args = {});

  uint16_t port() const noexcept {
    return port_;
  }

  support::child_process& process() noexcept {
    return proc_;
  }

private:
  support::child_process proc_;
  uint16_t port_ = 0;
};

/// The raw TCP baseline: a server process and a connected client. The
/// destructor hangs up (the server then exits) and reaps it.
class raw_tcp_baseline {
public:
  explicit raw_tcp_baseline(const std::string& self);

  ~raw_tcp_baseline();

  /// One request of `request_bytes` and its reply of `reply_bytes`.
  void round_trip(uint64_t request_bytes, uint64_t reply_bytes,
                  raw_mode mode = {}) {
    client_->round_trip(request_bytes, reply_bytes, mode);
  }

private:
  baseline_server server_;
  std::optional<raw_tcp_client> client_;
};

/// A baseline's server process and one client of it on the calling
/// thread (Client constructed from the server's port): the CAF echo
/// server, the gRPC peer. The destructor drops the client, then stops the
/// server and reaps it.
template <class Client>
class served_baseline {
public:
  served_baseline(const std::string& self, const char* mode,
                  const char* marker, const std::string& what)
    : server_(self, mode, marker, what) {
    if constexpr (std::is_constructible_v<Client, uint16_t, std::string>)
      client_.emplace(server_.port(), peer().ip);
    else
      client_.emplace(server_.port());
  }

  ~served_baseline() {
    client_.reset();
    server_.process().stop(std::chrono::seconds{2});
  }

  Client& client() {
    return *client_;
  }

private:
  baseline_server server_;
  std::optional<Client> client_;
};

/// Options for a cluster of actorflow-node processes whose output stays
/// out of the bench's (stderr kept for errors), the tasks `not_started`
/// left to the bench; the ps tasks on the peer host (peer()), the workers
/// on this process's.
support::cluster_options
quiet_nodes(std::vector<std::pair<std::string, int>> not_started);

/// The cluster of the remote figures: /job:ps/task:0 as an actorflow-node
/// process, /job:worker/task:0 as a server in this process (sessions on
/// its target are "a session on task A"). Members stop in reverse order:
/// the worker server first, then the node.
class remote_cluster {
public:
  /// `env`: the ps process's environment changes (spawn_options::env).
  explicit remote_cluster(const std::string& node,
                          std::vector<std::string> env = {});

  ~remote_cluster();

  std::string target() const {
    return srv_->target();
  }

  pid_t ps_pid() {
    return nodes_.process("ps", 0).pid();
  }

  /// Starts one, retrying on fresh ports when another process took the
  /// worker's port between picking it and binding it.
  static std::unique_ptr<remote_cluster>
  start(const std::string& node, std::vector<std::string> env = {});

private:
  support::local_cluster nodes_;
  std::optional<server> srv_;
};

/// Starts ctx.cluster and ctx.tcp unless they run already: the groups
/// marked shares_cluster measure on one cluster and one raw TCP pair.
void start_shared(context& ctx);

/// Variable options with just a name (designated initializers would leave
/// the other members to -Wmissing-field-initializers).
variable_options named(std::string name);

/// `bytes` per second in MB/s (10^6 bytes).
double mb_per_s(const rate& r, double bytes);

/// `x` with `digits` decimals.
std::string fixed(double x, int digits);

/// The path tensors took into this process between two readings of the
/// channel's counters, when `expected` data bytes came in with `replies`
/// step replies: "ring" or "tcp" when all the bytes took that path (on
/// the channel's socket, as tensor frames or inside the replies when no
/// frame carried them), "tcp (CAF)" when the channel carried neither
/// (CAF's own connection did), "ring+tcp" when they split. `detail` gets
/// the bytes each way.
std::string received_path(const tensor_channel::received_totals& before,
                          const tensor_channel::received_totals& after,
                          uint64_t expected, uint64_t replies,
                          std::string* detail = nullptr);

/// A float scalar "step_counter" on /job:ps/task:0 of the default graph:
/// what step_remote_small adds to.
variable counter_on_ps();

/// A small remote step with a feature (`with`, e.g. TLS or replication)
/// against the same step without it (`without`), in alternating slices of
/// this run (the median slices), as a us/step figure named `name` whose
/// baseline is `baseline`; its path from the channel's counters.
template <class With, class Without>
figure step_against(const context& ctx, std::string name,
                    std::string baseline, With&& with, Without&& without,
                    std::string note) {
  auto before = tensor_channel::totals_received();
  auto [on, off] = measure_interleaved(
    std::forward<With>(with), std::forward<Without>(without),
    {.budget = ctx.budget(2.0, 0.4), .min_reps = 10, .warmup = 10},
    slice_pick::median);
  figure f{.name = std::move(name),
           .value = 1e6 / on.per_second,
           .unit = "us/step",
           .baseline = std::move(baseline),
           .baseline_value = 1e6 / off.per_second,
           .path = received_path(before, tensor_channel::totals_received(), 0,
                                 uint64_t(on.reps + off.reps))};
  f.note = std::move(note);
  return f;
}

} // namespace actorflow::bench
