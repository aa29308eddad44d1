// actorflow-bench's groups that measure what a feature costs, the same
// steps on a second cluster against a plain one in alternating slices of
// this run: monitoring (every actor instrumented for the console) and tls
// (mutual TLS between the processes).

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/support/temp_dir.hpp"
#include "actorflow/transport/transport.hpp"

#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;

// -- monitoring ---------------------------------------------------------------

/// One instrumentation figure: `on` (monitoring on) against `off` in
/// alternating slices of this run.
void add_monitoring_figure(context& ctx, const std::string& name,
                           const rate& on, const rate& off,
                           const std::string& what, std::string path) {
  figure f{.name = name,
           .value = 1e6 / on.per_second,
           .unit = "us/step",
           .baseline = "monitoring_off",
           .baseline_value = 1e6 / off.per_second,
           .path = std::move(path)};
  f.note = what + ", every actor instrumented (busy time, mailbox depth, "
           "counts) against none, " + std::to_string(on.reps) + " and "
           + std::to_string(off.reps) + " steps in alternating slices; "
           "lower is better";
  ctx.out->add(f);
}

/// Actors spawned while this lives have no monitoring record.
struct monitoring_off {
  monitoring_off() {
    monitoring::set_enabled(false);
  }
  ~monitoring_off() {
    monitoring::set_enabled(true);
  }
  monitoring_off(const monitoring_off&) = delete;
  monitoring_off& operator=(const monitoring_off&) = delete;
};

void run_monitoring(context& ctx) {
  const auto& node = ctx.node;
  auto budget = ctx.budget(2.0, 0.6);
  measure_options mopts{.budget = budget, .min_reps = 10, .warmup = 10};
  // Whether an actor is instrumented is decided when it is spawned: each
  // session's task and executors are spawned (by its first run) with the
  // flag set for it.
  if (ctx.wanted("monitoring", "monitoring_step_local_trivial")) {
    graph g;
    auto as_default = g.as_default();
    auto c = constant(1.0f, "c");
    std::optional<session> off;
    {
      monitoring_off spawned_off;
      off.emplace(bounded_config(), &g);
      off->run(c);
    }
    session on{bounded_config(), &g};
    on.run(c);
    // In process, compute-bound: the fastest slices.
    auto [r_on, r_off] = measure_interleaved([&] { on.run(c); },
                                             [&] { off->run(c); }, mopts);
    add_monitoring_figure(ctx, "monitoring_step_local_trivial", r_on, r_off,
                          "step_local_trivial's fetch of one Const",
                          "in_process");
  }
  if (!ctx.wanted("monitoring", "monitoring_step_remote_small"))
    return;
  graph g;
  auto as_default = g.as_default();
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  // The worker (this process's server) and the ps process, each off or on.
  std::unique_ptr<remote_cluster> off_cluster;
  std::optional<session> off;
  {
    monitoring_off spawned_off;
    off_cluster = remote_cluster::start(node, {"ACTORFLOW_MONITORING=0"});
    off.emplace(off_cluster->target(), bounded_config(), &g);
    off->run(counter.initializer());
    off->run(increment);
  }
  auto on_cluster = remote_cluster::start(node, {"ACTORFLOW_MONITORING=1"});
  session on{on_cluster->target(), bounded_config(), &g};
  on.run(counter.initializer());
  on.run(increment);
  // Round trips between processes: the median slices.
  auto before = tensor_channel::totals_received();
  auto [r_on, r_off] = measure_interleaved([&] { on.run(increment); },
                                           [&] { off->run(increment); }, mopts,
                                           slice_pick::median);
  add_monitoring_figure(ctx, "monitoring_step_remote_small", r_on, r_off,
                        "step_remote_small's assign_add on the ps",
                        received_path(before, tensor_channel::totals_received(),
                                      0, uint64_t(r_on.reps + r_off.reps)));
}

// -- tls ----------------------------------------------------------------------

/// A cluster like remote_cluster with mutual TLS: the ps node with the
/// certificate `certs`/node.pem, the worker server in an actor system of
/// its own with TLS on (this process's default system stays plain, for the
/// other figures). Certificates from actorflow-make-certs (next to this
/// program, else on $PATH). Members stop in reverse order.
class tls_cluster {
public:
  explicit tls_cluster(const std::string& node)
    : certs_(make_certs(dir_.path.string())),
      sys_(system_config(cfg_)),
      nodes_(node, {{"ps", 1}, {"worker", 1}}, node_options(certs_)) {
    enable_tls(sys_, certs_);
    srv_.emplace(sys_, nodes_.spec(), "worker", 0);
  }

  ~tls_cluster() {
    if (srv_)
      srv_->stop();
  }

  caf::actor_system& system() {
    return sys_;
  }

  std::string target() const {
    return srv_->target();
  }

private:
  static tls_config make_certs(const std::string& dir) {
    auto script = find_binary("actorflow-make-certs", "", "");
    support::spawn_options opts;
    opts.capture_stderr = true;
    opts.echo_stdout = false;
    auto res = support::run_process({script, dir, "node:127.0.0.1,localhost"},
                                    30s, opts);
    if (!res.status.success())
      throw std::runtime_error("actorflow-make-certs failed: " + res.err);
    tls_config cfg;
    cfg.cert_file = dir + "/node.pem";
    cfg.key_file = dir + "/node.key";
    cfg.ca_file = dir + "/ca.pem";
    return cfg;
  }

  static caf::actor_system_config& system_config(caf::actor_system_config& cfg) {
    add_types(cfg);
    // They would bypass TLS (enable_tls refuses them).
    caf::put(cfg.content, "middleman.enable-automatic-connections", false);
    add_options(cfg);
    return cfg;
  }

  static support::cluster_options node_options(const tls_config& certs) {
    auto o = quiet_nodes({{"worker", 0}});
    o.args = {"--tls_cert", certs.cert_file, "--tls_key", certs.key_file,
              "--tls_ca", certs.ca_file};
    return o;
  }

  support::temp_dir dir_{"actorflow-bench-certs"};
  tls_config certs_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  support::local_cluster nodes_;
  std::optional<server> srv_;
};

void run_tls(context& ctx) {
  const auto& node = ctx.node;
  auto plain = remote_cluster::start(node);
  tls_cluster secure{node};
  graph g;
  auto as_default = g.as_default();
  constexpr int64_t bytes = int64_t{64} << 20;
  variable big;
  {
    device_scope on_ps{"/job:ps/task:0"};
    big = variable{random_uniform({bytes / 4}, 0.0, 1.0, dtype::float32, 7),
                   named("tls_fetch_64MiB")};
  }
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session plain_sess{plain->target(), bounded_config(), &g};
  session tls_sess{secure.system(), secure.target(), bounded_config(), &g};
  for (auto* s : {&plain_sess, &tls_sess}) {
    s->run(global_variables_initializer());
    for (int i = 0; i < 3; ++i)
      s->run(big);
  }
  auto check = [&](session& s) {
    if (static_cast<int64_t>(s.run(big).byte_size()) != bytes)
      throw std::runtime_error("a fetch did not return 64 MiB");
  };
  if (ctx.wanted("tls", "tls_fetch_remote_64MiB")) {
    auto before = tensor_channel::totals_received();
    auto [tls, clear] = measure_interleaved(
      [&] { check(tls_sess); }, [&] { check(plain_sess); },
      {.budget = ctx.budget(2.0, 0.5), .min_reps = 1}, slice_pick::median);
    auto fetches = uint64_t(tls.reps + clear.reps);
    figure f{.name = "tls_fetch_remote_64MiB",
             .value = mb_per_s(tls, double(bytes)),
             .unit = "MB/s",
             .baseline = "fetch_remote_64MiB_plain",
             .baseline_value = mb_per_s(clear, double(bytes)),
             .path = received_path(before, tensor_channel::totals_received(),
                                   fetches * uint64_t(bytes), fetches)};
    f.note = "path: tcp (tensor channel) with TLS 1.3 AES-128-GCM against "
             "the same path in plain TCP; 64 MiB is past the ring of shared "
             "memory either way";
    ctx.out->add(f);
  }
  if (ctx.wanted("tls", "tls_step_remote_small"))
    ctx.out->add(step_against(
      ctx, "tls_step_remote_small", "step_remote_small_plain",
      [&] { tls_sess.run(increment); }, [&] { plain_sess.run(increment); },
      "assign_add on the ps from the worker, TLS against plain (steps "
      "after the first ride the tensor channel); lower is better"));
}

} // namespace

figure_group monitoring_group() {
  return {.name = "monitoring",
          .figures = {"monitoring_step_local_trivial",
                      "monitoring_step_remote_small"},
          .targets = {{"monitoring_step_local_trivial", at_most(1.03)},
                      {"monitoring_step_remote_small", at_most(1.03)}},
          .needs_node = true,
          .run = run_monitoring};
}

figure_group tls_group() {
  return {.name = "tls",
          .figures = {"tls_fetch_remote_64MiB", "tls_step_remote_small"},
          .targets = {{"tls_fetch_remote_64MiB", at_least(0.75)},
                      {"tls_step_remote_small", at_most(1.25)}},
          .needs_node = true,
          .run = run_tls};
}

} // namespace actorflow::bench
