// actorflow-bench's groups of small steps and batches on the ps:
// step_remote (an assign_add on the ps from the worker against raw TCP
// and CAF round trips) and queue (batches through a FIFOQueue on the ps
// against raw TCP moving the same bytes).

#include <functional>

#include "bench/caf_rtt.hpp"
#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

// -- step_remote --------------------------------------------------------------

void run_step_remote(context& ctx) {
  auto& cluster = *ctx.cluster;
  auto& tcp = *ctx.tcp;
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  auto counter = counter_on_ps();
  auto increment = counter.assign_add(1.0);
  session sess{cluster.target(), bounded_config(), &g};
  sess.run(counter.initializer());
  // In rounds: the step, the raw round trip with both ends polling (the
  // kernel's round trip without a blocked thread's wake-up: the channel's
  // readers poll too), then blocking (64 bytes each way: a 16-byte header
  // plus 48 of payload, 64 back), which also puts the server back to
  // blocking before the step's next turn.
  auto before = tensor_channel::totals_received();
  auto r = measure_rounds({[&] { sess.run(increment); },
                           [&] { tcp.round_trip(48, 64, {.poll = true}); },
                           [&] { tcp.round_trip(48, 64); }},
                          {.budget = budget, .min_reps = 10, .warmup = 10});
  auto after = tensor_channel::totals_received();
  // The warm-up's first step registers the step's graph (over CAF): the
  // timed ones are what must have ridden the channel.
  auto steps = uint64_t(r.reps[0]);
  // A step after the first is a request to the ps's executor and its
  // answer: over the tensor channel when the answer came on it.
  auto answers = after.messages - before.messages;
  auto path = received_path(before, after, 0, steps);
  // What CAF alone costs for one round trip between two processes.
  served_baseline<caf_echo_client> caf{ctx.self, "--caf-echo-server",
                                       caf_echo_marker, "CAF"};
  auto bare = measure([&] { caf.client().round_trip(); },
                      {.budget = budget, .min_reps = 10, .warmup = 10});
  auto ours_us = 1e6 / r.median(0);
  auto polled_us = 1e6 / r.median(1);
  auto raw_us = 1e6 / r.median(2);
  auto caf_us = 1e6 / bare.per_second;
  // Latencies: the pairs' ratio of times is the inverse of their rates'.
  auto slower = [&](size_t base) {
    return rounds::median_ratio(r.rates[base], r.rates[0]);
  };
  figure f{.name = "step_remote_small",
           .value = ours_us,
           .unit = "us/step",
           .baseline = "raw_tcp_rtt_polling",
           .baseline_value = polled_us,
           .path = path,
           .pair_ratio = slower(1)};
  f.note = "assign_add on a scalar on the ps from a session on the worker; "
           "lower is better; " + fixed(r.median(0), 0) + " steps/s; "
           + fixed(slower(2), 2) + "x the blocking raw round trip, "
           + fixed(ours_us / caf_us, 2) + "x caf_rtt_remote; "
           + std::to_string(answers) + " channel messages in "
           + std::to_string(steps) + " steps";
  ctx.out->add(f);
  // Another round trip against the raw blocking one.
  auto rtt_figure = [&](std::string name, double us,
                        std::optional<double> pair, std::string note) {
    ctx.out->add(figure{.name = std::move(name),
                        .value = us,
                        .unit = "us/rtt",
                        .baseline = "raw_tcp_rtt_64B",
                        .baseline_value = raw_us,
                        .note = std::move(note),
                        .path = "tcp",
                        .pair_ratio = pair});
  };
  rtt_figure("raw_tcp_rtt_polling", polled_us,
             rounds::median_ratio(r.rates[2], r.rates[1]),
             "the raw round trip with both ends polling their socket "
             "(yielding) instead of blocking in recv: no wake-up of a "
             "blocked thread");
  rtt_figure("caf_rtt_remote", caf_us, std::nullopt,
             "a 48-byte string from a thread of the worker process to an "
             "echo actor in another process and back, over CAF with "
             "actorflow's configuration: no engine work at all");
  ctx.out->add(figure{.name = "step_remote_small_rate",
                      .value = r.median(0),
                      .unit = "steps/s",
                      .baseline = "raw_tcp_rtt_polling",
                      .baseline_value = r.median(1),
                      .path = path,
                      .pair_ratio = rounds::median_ratio(r.rates[0],
                                                         r.rates[1])});
}

// -- queue --------------------------------------------------------------------

void run_queue(context& ctx) {
  auto& cluster = *ctx.cluster;
  auto& tcp = *ctx.tcp;
  constexpr int32_t batch = 1000;
  constexpr int64_t width = 256;
  const double batch_bytes = double(batch) * width * 4;
  // Enqueue first (time-bounded, at most max_batches), then dequeue exactly
  // what went in: each direction is timed alone, and the queue's capacity
  // bounds the ps's memory (max_batches MB).
  const int64_t max_batches = ctx.opts.quick ? 48 : 400;
  // A few batches untimed each way (the worker-to-ps direction has carried
  // little so far: see raw_tcp_baseline on the connection's windows).
  constexpr int warmup = 4;
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  queue_base q;
  {
    device_scope on_ps{"/job:ps/task:0"};
    q = fifo_queue{static_cast<int32_t>((max_batches + warmup) * batch),
                   {dtype::float32}, {tensor_shape{width}}, "bench_queue"};
  }
  auto x = placeholder(dtype::float32, {-1, width}, "x");
  auto enqueue = q.enqueue_many({x});
  auto dequeue = q.dequeue_many(batch);
  tensor values{dtype::float32, tensor_shape{batch, width}};
  {
    auto flat = values.flat<float>();
    for (size_t i = 0; i < flat.size(); ++i)
      flat[i] = static_cast<float>(i % 1009) * 0.001f;
  }
  session sess{cluster.target(), bounded_config(), &g};
  // Each direction in rounds against the raw TCP baseline that moves the
  // same bytes and stores each batch in memory allocated for it (as a
  // queue stores a fresh tensor), the better of polling and blocking
  // (measure_rounds on the order). Enqueue first, at most max_batches,
  // then dequeue exactly what went in: the queue's capacity bounds the
  // ps's memory (max_batches MB).
  constexpr int n_rounds = 9;
  auto raw_ops = [&](uint64_t up, uint64_t down) {
    return std::vector<std::function<void()>>{
      [&tcp, up, down] { tcp.round_trip(up, down, {.poll = true, .fresh = true}); },
      [&tcp, up, down] { tcp.round_trip(up, down, {.fresh = true}); }};
  };
  auto ops = raw_ops(uint64_t(batch_bytes), 8);
  ops.insert(ops.begin(), [&] { sess.run(enqueue, {{x, values}}); });
  auto totals_before = tensor_channel::totals_received();
  auto messages_before = totals_before.messages;
  auto enq = measure_rounds(ops, {.budget = budget,
                                  .max_reps = max_batches / n_rounds,
                                  .min_reps = 1, .warmup = warmup},
                            n_rounds);
  auto enq_messages = tensor_channel::totals_received().messages
                      - messages_before;
  const int64_t queued = enq.reps[0] + warmup;
  ops = raw_ops(16, uint64_t(batch_bytes));
  ops.insert(ops.begin(), [&] {
    auto t = sess.run(dequeue[0]);
    if (t.num_elements() != batch * width)
      throw std::runtime_error("dequeue_many returned "
                               + t.shape().to_string());
  });
  // Every round dequeues its share of what is there (plus a warm-up
  // batch each).
  auto deq_before = tensor_channel::totals_received();
  auto deq = measure_rounds(ops, {.budget = seconds_d{3600},
                                  .max_reps = (queued - warmup) / n_rounds,
                                  .min_reps = 1, .warmup = warmup},
                            n_rounds);
  std::string moved;
  auto deq_path = received_path(deq_before, tensor_channel::totals_received(),
                                uint64_t(deq.reps[0]) * uint64_t(batch_bytes),
                                uint64_t(deq.reps[0]), &moved);
  auto what = std::to_string(batch) + "x" + std::to_string(width)
              + " float32 per batch, FIFOQueue on the ps, session on the "
                "worker";
  // One direction's pair of figures: elements/s with its note, and MB/s.
  auto add = [&](const std::string& name, const rounds& r,
                 const std::string& baseline, const std::string& path,
                 const std::string& how) {
    if (!ctx.wanted("queue", name))
      return;
    auto c = r.compare(0, {1, 2});
    ctx.out->add(figure{.name = name,
                        .value = c.engine * batch,
                        .unit = "elements/s",
                        .baseline = baseline,
                        .baseline_value = c.baseline * batch,
                        .note = what + "; " + std::to_string(r.reps[0])
                                + " batches; " + how,
                        .path = path,
                        .pair_ratio = c.ratio});
    ctx.out->add(figure{.name = name + "_MBps",
                        .value = c.engine * batch_bytes / 1e6,
                        .unit = "MB/s",
                        .baseline = baseline,
                        .baseline_value = c.baseline * batch_bytes / 1e6,
                        .path = path,
                        .pair_ratio = c.ratio});
  };
  // The feed goes up inside the step's request: a channel message when
  // the request went on the channel, else CAF's.
  add("queue_enqueue_many", enq, "raw_tcp_upload_fresh",
      enq_messages > 0 ? "tcp" : "tcp (CAF)",
      "the feed inside the step's request (" + std::to_string(enq_messages)
        + " channel messages read here)");
  add("queue_dequeue_many", deq, "raw_tcp_download_fresh", deq_path, moved);
}

} // namespace

figure_group step_remote_group() {
  return {.name = "step_remote",
          .figures = {"step_remote_small", "step_remote_small_rate",
                      "caf_rtt_remote", "raw_tcp_rtt_polling"},
          .targets = {{"step_remote_small", at_most(3)}},
          .needs_node = true,
          .shares_cluster = true,
          .run = run_step_remote};
}

figure_group queue_group() {
  return {.name = "queue",
          .figures = {"queue_enqueue_many", "queue_dequeue_many",
                      "queue_enqueue_many_MBps", "queue_dequeue_many_MBps"},
          .targets = {{"queue_enqueue_many", at_least(0.8)},
                      {"queue_dequeue_many", at_least(0.8)}},
          .needs_node = true,
          .shares_cluster = true,
          .run = run_queue};
}

} // namespace actorflow::bench
