// actorflow-bench's replication group (issue 31 §3): what replicated
// variables cost a small remote step, and a replicated queue a step
// through it, against the same cluster without them in alternating
// slices of this run, how long a ps's death stops
// the steps (SIGKILL to the first step completed on the promoted
// backup), and how long a worker that joins the running cluster takes to
// its first step.

#include <signal.h>

#include <optional>
#include <thread>

#include "actorflow/support/free_ports.hpp"
#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

using namespace std::chrono_literals;

/// Two ps nodes and /job:worker/task:0 as a server in this process, with
/// or without replicated variables.
class ps_pair_cluster {
public:
  ps_pair_cluster(const std::string& node, bool replicate)
    : nodes_(node, {{"ps", 2}, {"worker", 1}}, options(replicate)) {
    server_options o;
    o.replicate_variables = replicate;
    srv_.emplace(nodes_.spec(), "worker", 0, o);
  }

  ~ps_pair_cluster() {
    if (srv_)
      srv_->stop();
  }

  std::string target() const {
    return srv_->target();
  }

  /// ps:0's address: where a worker joins.
  std::string contact() const {
    return nodes_.spec().task_address("ps", 0);
  }

  /// SIGKILL to ps `task`; returns once it is dead (reaped).
  void kill_ps(int task) {
    auto& p = nodes_.process("ps", task);
    p.send_signal(SIGKILL);
    p.wait(std::chrono::seconds(5));
  }

  static std::unique_ptr<ps_pair_cluster> start(const std::string& node,
                                                bool replicate) {
    for (int attempt = 1;; ++attempt) {
      try {
        return std::make_unique<ps_pair_cluster>(node, replicate);
      } catch (const op_error& e) {
        if (attempt >= 3)
          throw;
        note("retrying the cluster start: " + std::string{e.what()});
      }
    }
  }

private:
  static support::cluster_options options(bool replicate) {
    auto o = quiet_nodes({{"worker", 0}});
    if (replicate)
      o.args = {"--replicate_variables"};
    return o;
  }

  support::local_cluster nodes_;
  std::optional<server> srv_;
};

void run_replication(context& ctx) {
  const auto& node = ctx.node;
  graph g;
  auto as_default = g.as_default();
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  // One element through a queue on ps:0 per step: its enqueue, dequeue
  // and commit each write the queue's state on a replicated task.
  output through_queue;
  {
    device_scope on_ps{"/job:ps/task:0"};
    fifo_queue q{-1, {dtype::float32}, {tensor_shape{}}, "bench_q",
                 "bench_q"};
    auto enqueue = q.enqueue({constant(1.0f)});
    control_dependencies after{{enqueue}};
    through_queue = q.dequeue().front();
  }
  auto plain_cluster = ps_pair_cluster::start(node, false);
  auto replicated_cluster = ps_pair_cluster::start(node, true);
  session plain{plain_cluster->target(), bounded_config(), &g};
  session replicated{replicated_cluster->target(), bounded_config(), &g};
  for (auto* s : {&plain, &replicated}) {
    s->run(counter.initializer());
    s->run(increment);
  }
  if (ctx.wanted("replication", "replication_step_remote_small"))
    ctx.out->add(step_against(
      ctx, "replication_step_remote_small", "step_remote_small_unreplicated",
      [&] { replicated.run(increment); }, [&] { plain.run(increment); },
      "assign_add on ps:0 from the worker, the variable replicated on ps:1 "
      "(the write is answered once ps:1 holds it) against the same two-ps "
      "cluster without replication; lower is better"));
  if (ctx.wanted("replication", "replication_queue_step_remote"))
    ctx.out->add(step_against(
      ctx, "replication_queue_step_remote", "queue_step_remote_unreplicated",
      [&] { replicated.run(through_queue); },
      [&] { plain.run(through_queue); },
      "one step that enqueues and dequeues a scalar on a FIFOQueue on ps:0 "
      "from the worker, the queue replicated on ps:1 (its state written "
      "to a replicated variable after the enqueue, the dequeue and the "
      "commit, each answered once ps:1 holds it) against the same two-ps "
      "cluster without replication; lower is better"));
  if (ctx.wanted("replication", "elastic_join_first_step_ms")) {
    figure f{.name = "elastic_join_first_step_ms", .unit = "ms"};
    try {
      auto t0 = std::chrono::steady_clock::now();
      auto joined = server::join_cluster(
        plain_cluster->contact(), "worker",
        "127.0.0.1:" + std::to_string(support::free_ports(1).front()));
      session s{joined.target(), bounded_config(), &g};
      s.run(increment);
      f.value = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
      f.path = "tcp";
      s.close();
      joined.leave();
      joined.stop();
    } catch (const op_error& e) {
      f.error = e.what();
    }
    f.note = "server::join_cluster through ps:0 of the running cluster "
             "without replication (the authority admits a new worker and "
             "every task learns the version), its server started, a "
             "session on it and its first assign_add on ps:0 (planning and "
             "registration included); no baseline: a ClusterSpec worker "
             "cannot be added to a running job";
    ctx.out->add(f);
  }
  if (!ctx.wanted("replication", "replication_failover_ms"))
    return;
  // Steps run one after another; ps:0, the counter's primary, dies
  // between two of them. The figure: from the SIGKILL to the first step
  // that completes after it (on ps:1, promoted).
  std::atomic<bool> stop{false};
  std::atomic<int64_t> killed_at{0};
  std::atomic<int64_t> first_after{0};
  std::atomic<int> failed{0};
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
  };
  std::atomic<int64_t> dead_at{0};
  std::thread stepper{[&] {
    while (!stop) {
      auto started = now_ns();
      try {
        replicated.run(increment);
      } catch (const op_error&) {
        ++failed;
        continue;
      }
      // A step that started before ps:0 was surely dead may have
      // finished there.
      auto d = dead_at.load();
      int64_t none = 0;
      if (d != 0 && started >= d)
        first_after.compare_exchange_strong(none, now_ns());
    }
  }};
  std::this_thread::sleep_for(ctx.opts.quick ? 200ms : 500ms);
  killed_at = now_ns();
  replicated_cluster->kill_ps(0);
  dead_at = now_ns();
  auto until = std::chrono::steady_clock::now() + 20s;
  while (first_after == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  stop = true;
  stepper.join();
  figure f{.name = "replication_failover_ms", .unit = "ms"};
  if (first_after == 0) {
    f.error = "no step completed within 20 s of the SIGKILL";
  } else {
    f.value = static_cast<double>(first_after - killed_at) / 1e6;
    f.path = "tcp";
  }
  f.note = "SIGKILL to ps:0 (the primary of the counter) while a worker "
           "runs assign_add steps back to back, to the first step started "
           "once ps:0 was reaped that completes (on ps:1, promoted); "
           + std::to_string(failed)
           + " steps failed meanwhile (the caller's errors, target 0)";
  ctx.out->add(f);
}

} // namespace

figure_group replication_group() {
  target within_a_second{"<= 1000 ms",
                         [](const figure& f) {
                           return f.value && *f.value <= 1000;
                         },
                         false};
  return {.name = "replication",
          .figures = {"replication_step_remote_small",
                      "replication_queue_step_remote",
                      "replication_failover_ms",
                      "elastic_join_first_step_ms"},
          .targets = {{"replication_step_remote_small", at_most(2)},
                      {"replication_failover_ms", within_a_second}},
          .needs_node = true,
          .run = run_replication};
}

} // namespace actorflow::bench
