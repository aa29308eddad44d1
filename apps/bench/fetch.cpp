// actorflow-bench's fetch sweeps: fetch_remote (a session on the worker
// fetching variables of every size from the ps, against raw TCP or shared
// memory, whichever path the fetch took, and TCP's streaming ceiling) and
// peers (the same fetches against TensorFlow's transport, gRPC).

#include <algorithm>
#include <functional>
#include <memory>

#include "actorflow/support/free_ports.hpp"

#include "bench/common.hpp"
#include "bench/grpc_peer.hpp"
#include "bench/shm_ring.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;

/// The fetch sizes: powers of 4 from 1 KiB to 64 MiB (the plot's x axis);
/// 1KiB, 1MiB and 64MiB are the figures.
const std::vector<std::pair<std::string, int64_t>> fetch_sizes = {
  {"1KiB", int64_t{1} << 10},  {"4KiB", int64_t{4} << 10},
  {"16KiB", int64_t{16} << 10}, {"64KiB", int64_t{64} << 10},
  {"256KiB", int64_t{256} << 10}, {"1MiB", int64_t{1} << 20},
  {"4MiB", int64_t{4} << 20},  {"16MiB", int64_t{16} << 20},
  {"64MiB", int64_t{64} << 20}};

// -- the baselines and the variables ------------------------------------------

/// The shared-memory baseline (bench/shm_ring.hpp): a server process and
/// the region, of the channel's ring size. The destructor tells the
/// server to stop and reaps it.
class shm_ring_baseline {
public:
  shm_ring_baseline(const std::string& self, uint64_t capacity)
    : client_(std::in_place, capacity),
      server_(self, "--shm-ring-server", shm_ring_marker, "shared-memory",
              {"--shm", client_->path(), "--capacity",
               std::to_string(capacity)}) {
  }

  ~shm_ring_baseline() {
    client_.reset();
    server_.process().wait(2s);
  }

  void round_trip(uint64_t bytes) {
    client_->round_trip(bytes);
  }

private:
  std::optional<shm_ring_client> client_;
  baseline_server server_;
};

/// iperf3's rate to the peer host (one stream, 1 MiB writes, for
/// `seconds`; loopback unless --netsim), in MB/s, or nullopt without
/// iperf3 (`why` says).
std::optional<double> iperf3_mb_per_s(double seconds, std::string& why) {
  std::string iperf;
  try {
    iperf = support::find_program("iperf3", "", "");
  } catch (const std::exception&) {
    why = "iperf3 not installed";
    return std::nullopt;
  }
  auto port = std::to_string(support::free_port());
  support::spawn_options quiet;
  quiet.capture_stderr = true;
  // --forceflush: its stdout is a pipe here, which stdio would buffer.
  auto server = peer().launcher;
  for (const auto& arg : {iperf, std::string{"-s"}, std::string{"-1"},
                          std::string{"--forceflush"}, std::string{"-B"},
                          peer().ip, std::string{"-p"}, port})
    server.push_back(arg);
  support::child_process srv(server, quiet);
  if (!srv.wait_for_line("Server listening", 10s)) {
    why = "iperf3 -s did not start: " + srv.err();
    srv.stop(2s);
    return std::nullopt;
  }
  auto res = support::run_process(
    {iperf, "-c", peer().ip, "-p", port, "-l", "1M", "-J", "-t",
     fixed(seconds, 1)},
    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 20000),
    quiet);
  srv.stop(2s);
  try {
    auto j = nlohmann::json::parse(res.out);
    return j.at("end").at("sum_received").at("bits_per_second").get<double>()
           / 8e6;
  } catch (const std::exception& e) {
    why = "iperf3's output unreadable (" + res.status.to_string() + ")";
    return std::nullopt;
  }
}

/// A fetch size and the float variable of that many bytes on
/// /job:ps/task:0 that a figure fetches.
using sized_variable = std::pair<std::pair<std::string, int64_t>, variable>;

/// One variable per size of `sizes` whose figure (`prefix` + size) `group`
/// wants, in the default graph, its random values made on the ps itself
/// (the graph stays small); `seed` numbers them.
std::vector<sized_variable>
fetch_variables(const context& ctx, const std::string& group,
                const std::string& prefix,
                const std::vector<std::pair<std::string, int64_t>>& sizes,
                int64_t seed) {
  std::vector<sized_variable> vars;
  device_scope on_ps{"/job:ps/task:0"};
  for (const auto& size : sizes) {
    if (!ctx.wanted(group, prefix + size.first))
      continue;
    variable v{random_uniform({size.second / 4}, 0.0, 1.0, dtype::float32,
                              ++seed),
               named(prefix + size.first)};
    vars.emplace_back(size, v);
  }
  return vars;
}

/// Fetches `v` and checks that `bytes` came back.
void fetch_checked(session& sess, const variable& v, int64_t bytes) {
  auto got = static_cast<int64_t>(sess.run(v).byte_size());
  if (got != bytes)
    throw std::runtime_error("fetched " + std::to_string(got)
                             + " bytes, expected " + std::to_string(bytes));
}

// -- fetch_remote -------------------------------------------------------------

/// Measures TCP's streaming ceiling on this host (the better of the raw
/// stream loop and iperf3) and adds its figure; returns it in MB/s.
double run_stream_ceiling(context& ctx, raw_tcp_baseline& tcp) {
  const uint64_t bytes = (ctx.opts.quick ? uint64_t{128} : uint64_t{512}) << 20;
  auto loop = measure([&] { tcp.round_trip(0, bytes, {.stream = true}); },
                      {.budget = ctx.budget(2.0, 0.3), .min_reps = 3,
                       .warmup = 1});
  auto loop_mb = mb_per_s(loop, double(bytes));
  std::string why;
  auto iperf = iperf3_mb_per_s(ctx.opts.quick ? 0.5 : 2.0, why);
  auto best = std::max(loop_mb, iperf.value_or(0.0));
  figure f{.name = "tcp_stream_ceiling",
           .value = best,
           .unit = "MB/s",
           .path = "tcp"};
  f.note = "the better of a raw stream loop (1 MiB writes into one 1 MiB "
           "read buffer, " + std::to_string(bytes >> 20) + " MiB per "
           "request): " + fixed(loop_mb, 0) + " MB/s, and iperf3 -l 1M: "
           + (iperf ? fixed(*iperf, 0) + " MB/s" : why);
  ctx.out->add(f);
  return best;
}

void run_fetch_remote(context& ctx) {
  auto& cluster = *ctx.cluster;
  auto& tcp = *ctx.tcp;
  graph g;
  auto as_default = g.as_default();
  auto vars = fetch_variables(ctx, "fetch_remote", "fetch_remote_",
                              fetch_sizes, 10);
  std::optional<double> ceiling;
  if (ctx.wanted("fetch_remote", "fetch_remote_64MiB"))
    ceiling = run_stream_ceiling(ctx, tcp);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(global_variables_initializer());
  std::unique_ptr<shm_ring_baseline> shm;
  for (auto& [size, v] : vars) {
    const auto& [label, bytes] = size;
    auto fetch = [&] { fetch_checked(sess, v, bytes); };
    // Each size on its own: a few fetches of it first (the connection's
    // windows and the ring in the state this size leaves them), then the
    // path it takes from here on.
    for (int i = 0; i < 4; ++i)
      fetch();
    auto big = bytes >= (int64_t{16} << 20);
    measure_options mopts{.budget = ctx.budget(big ? 2.0 : 1.0,
                                               big ? 0.5 : 0.2),
                          .min_reps = 1, .warmup = 1};
    auto probe_before = tensor_channel::totals_received();
    fetch();
    auto path = received_path(probe_before, tensor_channel::totals_received(),
                              uint64_t(bytes), 1);
    std::vector<std::function<void()>> ops{fetch};
    std::string baseline;
    if (path == "ring") {
      if (!shm)
        shm = std::make_unique<shm_ring_baseline>(ctx.self,
                                                  tensor_channel::ring_capacity());
      ops.push_back([&] { shm->round_trip(uint64_t(bytes)); });
      baseline = "shm_ring";
    } else {
      // The polling one first: the blocking one then leaves the server
      // blocking again before the engine's turn (measure_rounds).
      ops.push_back([&] { tcp.round_trip(0, uint64_t(bytes), {.poll = true}); });
      ops.push_back([&] { tcp.round_trip(0, uint64_t(bytes)); });
      baseline = "raw_tcp_best";
    }
    auto before = tensor_channel::totals_received();
    auto r = measure_rounds(ops, mopts);
    auto engine_fetches = uint64_t(r.reps[0] + mopts.warmup);
    std::string moved;
    auto measured_path = received_path(before,
                                       tensor_channel::totals_received(),
                                       engine_fetches * uint64_t(bytes),
                                       engine_fetches, &moved);
    auto c = path == "ring" ? r.compare(0, {1}) : r.compare(0, {1, 2});
    auto to_mb = [&](double per_s) { return per_s * double(bytes) / 1e6; };
    figure f{.name = "fetch_remote_" + label,
             .value = to_mb(c.engine),
             .unit = "MB/s",
             .baseline = baseline,
             .baseline_value = to_mb(c.baseline),
             .path = measured_path,
             .pair_ratio = c.ratio};
    f.note = std::to_string(bytes) + " bytes per fetch, "
             + fixed(1e6 / c.engine, 1) + " us per fetch; " + moved
             + " (" + std::to_string(engine_fetches) + " fetches)";
    if (path == "ring")
      f.note += "; shm_ring: copy in, polling hand-off, copy out";
    else
      f.note += "; raw TCP blocking " + fixed(to_mb(r.median(2)), 0)
                + " MB/s, polling " + fixed(to_mb(r.median(1)), 0) + " MB/s";
    if (measured_path != path)
      f.note += "; the probe fetch took " + path;
    ctx.out->add(f);
    if (label == "64MiB" && ceiling) {
      figure s{.name = "fetch_remote_64MiB_of_stream",
               .value = f.value,
               .unit = "MB/s",
               .baseline = "tcp_stream_ceiling",
               .baseline_value = *ceiling,
               .path = measured_path};
      s.note = "fetch_remote_64MiB against TCP's streaming ceiling on this "
               "host";
      ctx.out->add(s);
    }
  }
}

// -- peers --------------------------------------------------------------------

/// The peer figures' sizes: every fetch size, or three with --quick.
std::vector<std::pair<std::string, int64_t>> peer_sizes(const context& ctx) {
  if (!ctx.opts.quick)
    return fetch_sizes;
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& size : fetch_sizes)
    if (size.first == "1KiB" || size.first == "1MiB" || size.first == "64MiB")
      out.push_back(size);
  return out;
}

#ifdef ACTORFLOW_BENCH_PEERS

/// The engine against TensorFlow's transport, gRPC, on the same sizes and
/// the same small round trip, in rounds (each ratio the median of
/// back-to-back pairs); the peer's better variant (unary or streaming)
/// per round.
void run_peers(context& ctx) {
  auto& cluster = *ctx.cluster;
  served_baseline<grpc_peer_client> peer{ctx.self, "--grpc-peer-server",
                                         grpc_peer_marker, "gRPC peer"};
  graph g;
  auto as_default = g.as_default();
  auto vars = fetch_variables(ctx, "peers", "peer_grpc_fetch_",
                              peer_sizes(ctx), 40);
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(global_variables_initializer());
  for (auto& [size, v] : vars) {
    const auto& [label, bytes] = size;
    auto fetch = [&] { fetch_checked(sess, v, bytes); };
    auto n = uint64_t(bytes);
    // Warm: the peer builds each size's reply on its first fetch.
    for (int i = 0; i < 3; ++i) {
      fetch();
      peer.client().recv_tensor(n);
      peer.client().recv_tensor_streaming(n);
    }
    auto big = bytes >= (int64_t{16} << 20);
    auto before = tensor_channel::totals_received();
    auto r = measure_rounds(
      {fetch, [&] { peer.client().recv_tensor(n); },
       [&] { peer.client().recv_tensor_streaming(n); }},
      {.budget = ctx.budget(big ? 1.5 : 0.8, big ? 0.5 : 0.2), .min_reps = 1,
       .warmup = 0});
    std::string moved;
    auto path = received_path(before, tensor_channel::totals_received(),
                              uint64_t(r.reps[0]) * n, uint64_t(r.reps[0]),
                              &moved);
    auto c = r.compare(0, {1, 2});
    auto to_mb = [&](double per_s) { return per_s * double(bytes) / 1e6; };
    figure f{.name = "peer_grpc_fetch_" + label,
             .value = to_mb(c.engine),
             .unit = "MB/s",
             .baseline = "grpc_recv_tensor",
             .baseline_value = to_mb(c.baseline),
             .path = path,
             .pair_ratio = c.ratio};
    f.note = "fetch_remote_" + label + " against TF-style RecvTensor over "
             "gRPC on TCP (the better per round of unary: "
             + fixed(to_mb(r.median(1)), 1) + " MB/s, and streaming: "
             + fixed(to_mb(r.median(2)), 1) + " MB/s); actorflow: " + moved;
    ctx.out->add(f);
  }
  if (!ctx.wanted("peers", "peer_grpc_rtt"))
    return;
  sess.run(counter.initializer());
  auto r = measure_rounds({[&] { sess.run(increment); },
                           [&] { peer.client().ping(); }},
                          {.budget = ctx.budget(1.5, 0.4), .min_reps = 10,
                           .warmup = 10});
  figure f{.name = "peer_grpc_rtt",
           .value = 1e6 / r.median(0),
           .unit = "us/step",
           .baseline = "grpc_ping_64B",
           .baseline_value = 1e6 / r.median(1),
           .path = "tcp",
           .pair_ratio = rounds::median_ratio(r.rates[1], r.rates[0])};
  f.note = "step_remote_small against a unary gRPC call of 48 bytes up "
           "and 64 back; lower is better";
  ctx.out->add(f);
}

#else

void run_peers(context& ctx) {
  auto why = "actorflow-bench was built without its gRPC peer (cmake "
             "-DACTORFLOW_BENCH_PEERS=ON; scripts/setup.sh turns it on)";
  for (const auto& size : peer_sizes(ctx))
    if (ctx.wanted("peers", "peer_grpc_fetch_" + size.first))
      ctx.out->add(figure{.name = "peer_grpc_fetch_" + size.first,
                          .skipped = why});
  if (ctx.wanted("peers", "peer_grpc_rtt"))
    ctx.out->add(figure{.name = "peer_grpc_rtt", .skipped = why});
}

#endif

} // namespace

figure_group fetch_remote_group() {
  figure_group g{.name = "fetch_remote",
                 .figures = {"tcp_stream_ceiling",
                             "fetch_remote_64MiB_of_stream"},
                 .targets = {{"fetch_remote_64MiB", at_least(0.9)},
                             {"fetch_remote_1MiB", at_least(0.8)},
                             {"fetch_remote_4MiB", at_least(0.8)},
                             {"fetch_remote_64MiB_of_stream", at_least(0.8)}},
                 .separable = true,
                 .needs_node = true,
                 .shares_cluster = true,
                 .run = run_fetch_remote};
  for (const auto& [label, _] : fetch_sizes)
    g.figures.push_back("fetch_remote_" + label);
  return g;
}

figure_group peers_group() {
  figure_group g{.name = "peers",
                 .figures = {"peer_grpc_rtt"},
                 .targets = {{"peer_grpc_rtt", at_most(0.5)}},
                 .separable = true,
                 .needs_node = true,
                 .shares_cluster = true,
                 .run = run_peers};
  // Against TensorFlow's transport: every size.
  for (const auto& [label, _] : fetch_sizes) {
    g.figures.push_back("peer_grpc_fetch_" + label);
    g.targets.emplace("peer_grpc_fetch_" + label, at_least(1.5));
  }
  return g;
}

} // namespace actorflow::bench
