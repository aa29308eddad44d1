// actorflow-bench's in-process groups: step_local (the cost of a step
// in a session of this process) and matmul (a kernel against Eigen
// called directly).

#include <Eigen/Core>

#include "bench/common.hpp"

namespace actorflow::bench {

namespace {

// -- step_local ---------------------------------------------------------------

void run_step_local(context& ctx) {
  auto budget = ctx.budget(2.0, 0.4);
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f, "c");
  session sess{bounded_config(), &g};
  auto r = measure([&] { sess.run(c); }, {.budget = budget, .warmup = 10});
  auto trivial_us = 1e6 / r.per_second;
  if (ctx.wanted("step_local", "step_local_trivial")) {
    figure f{.name = "step_local_trivial",
             .value = trivial_us,
             .unit = "us/run",
             .baseline = "target_20us",
             .baseline_value = 20.0,
             .path = "in_process"};
    f.note = "in-process session, fetch of one Const; lower is better; "
             + std::to_string(r.reps) + " runs";
    ctx.out->add(f);
  }
  if (!ctx.wanted("step_local", "step_local_large_graph"))
    return;
  // The same fetch in a graph with 1000 more nodes that it does not need:
  // pruning and the per-signature cache must keep the step cost flat.
  graph big;
  auto big_default = big.as_default();
  auto c2 = constant(1.0f, "c");
  auto x = constant(0.5f, "unused");
  for (int i = 0; i < 999; ++i)
    x = tanh(x);
  session sess2{bounded_config(), &big};
  auto r2 = measure([&] { sess2.run(c2); }, {.budget = budget, .warmup = 10});
  figure f{.name = "step_local_large_graph",
           .value = 1e6 / r2.per_second,
           .unit = "us/run",
           .baseline = "step_local_trivial",
           .baseline_value = trivial_us,
           .path = "in_process"};
  f.note = "same fetch, 1000 unused nodes in the graph; lower is better";
  ctx.out->add(f);
}

// -- matmul -------------------------------------------------------------------

void run_matmul(context& ctx) {
  constexpr int64_t n = 1024;
  auto budget = ctx.budget(3.0, 0.8);
  const double flop = 2.0 * n * n * n;
  graph g;
  auto as_default = g.as_default();
  variable a{random_uniform({n, n}, -1.0, 1.0, dtype::float32, 1),
             named("a")};
  variable b{random_uniform({n, n}, -1.0, 1.0, dtype::float32, 2),
             named("b")};
  auto product = matmul(a, b);
  session sess{bounded_config(), &g};
  sess.run(global_variables_initializer());
  // The same product with Eigen directly: the kernel's own GEMM (row-major
  // maps, one thread) on the same values, into a reused output. Both in
  // alternating slices, each side's fastest: on a shared VM the GEMM's
  // speed drifts by more than the gap being measured.
  auto values = sess.run({a, b});
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                               Eigen::RowMajor>;
  Eigen::Map<const matrix> am(values[0].flat<float>().data(), n, n);
  Eigen::Map<const matrix> bm(values[1].flat<float>().data(), n, n);
  matrix om(n, n);
  auto [ours, eigen] = measure_interleaved(
    [&] { sess.run(product); }, [&] { om.noalias() = am * bm; },
    {.budget = budget, .min_reps = 1});
  figure f{.name = "matmul_1024",
           .value = ours.per_second * flop / 1e9,
           .unit = "GFLOP/s",
           .baseline = "eigen_direct",
           .baseline_value = eigen.per_second * flop / 1e9,
           .path = "in_process"};
  f.note = "in-process session, variables as inputs, one thread (as the "
           "kernel)";
  ctx.out->add(f);
}

} // namespace

figure_group step_local_group() {
  return {.name = "step_local",
          .figures = {"step_local_trivial", "step_local_large_graph"},
          .targets = {{"step_local_trivial",
                       {"<= 20 us",
                        [](const figure& f) { return *f.value <= 20.0; },
                        /*on_ratio=*/false}}},
          .run = run_step_local};
}

figure_group matmul_group() {
  return {.name = "matmul",
          .figures = {"matmul_1024"},
          .targets = {{"matmul_1024", at_least(0.95)}},
          .run = run_matmul};
}

} // namespace actorflow::bench
