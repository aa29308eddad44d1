// actorflow-bench's in-process groups: step_local (the cost of a step
// in a session of this process), matmul and conv2d (kernels against
// Eigen called directly).

#include <algorithm>
#include <cmath>

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

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

// -- conv2d -------------------------------------------------------------------

// The CNN's convolutions (actorflow-train --model cnn, batch 100): conv1
// 28x28x1 -> 16 and conv2 14x14x16 -> 32, 5x5, stride 1, SAME.
struct conv_layer {
  int64_t hw, in_c, out_c;
};
constexpr int64_t conv_batch = 100;
constexpr int64_t conv_k = 5;
constexpr conv_layer conv_layers[2] = {{28, 1, 16}, {14, 16, 32}};

// Multiply-adds of one convolution (forward, or either backprop) x 2.
double conv_flop(const conv_layer& l) {
  return 2.0 * conv_batch * l.hw * l.hw * conv_k * conv_k * l.in_c * l.out_c;
}

using tensor2 = Eigen::Tensor<float, 2, Eigen::RowMajor>;
using map4 = Eigen::TensorMap<Eigen::Tensor<const float, 4, Eigen::RowMajor>>;
using dims2 = Eigen::array<Eigen::Index, 2>;
using contract_dims = Eigen::array<Eigen::IndexPair<Eigen::Index>, 1>;

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                             Eigen::RowMajor>;
using matrix_map = Eigen::Map<matrix>;

// One convolution computed by Eigen alone, two ways. Lazy: TensorFlow's
// own CPU formulation (its SpatialConvolution, one thread): Eigen's image
// patches [N, OH*OW, KH, KW, C] as a matrix, contracted with the filter
// [KH*KW*C, OC] (without TF's own packers for patches, which Eigen does
// not ship). im2col: the same patches written out first, then Eigen's
// matrix product; gemm_only: the patches written out once, beforehand
// (no patches to build, but the whole batch's, read from memory: the
// engine's kernel, which builds them a few images at a time in cache,
// beat it). RowMajor NHWC: Eigen's "rows" are the width, as TF
// passes them; with square kernels and strides it is the same.
struct eigen_spatial {
  const conv_layer& l;
  map4 in;
  map4 filter;
  enum { lazy, im2col, gemm_only } way = im2col;
  tensor2 cols = {};
  tensor2 out_cols = {};
  tensor2 turned_filter = {};

  Eigen::Index rows() const {
    return conv_batch * l.hw * l.hw;
  }
  Eigen::Index patch() const {
    return conv_k * conv_k * l.in_c;
  }
  auto patches() const {
    return in.extract_image_patches(conv_k, conv_k, 1, 1, 1, 1,
                                    Eigen::PADDING_SAME)
      .reshape(dims2{rows(), patch()});
  }
  // a [m, k] x b [k, n] (either transposed) into out, by Eigen's GEMM.
  static void gemm(const tensor2& a, bool a_t, const float* b,
                   Eigen::Index b_rows, Eigen::Index b_cols, tensor2& out) {
    Eigen::Map<const matrix> am(a.data(), a.dimension(0), a.dimension(1));
    Eigen::Map<const matrix> bm(b, b_rows, b_cols);
    auto m = a_t ? am.cols() : am.rows();
    if (out.dimension(0) != m || out.dimension(1) != b_cols)
      out.resize(m, b_cols);
    matrix_map om(out.data(), m, b_cols);
    if (a_t)
      om.noalias() = am.transpose() * bm;
    else
      om.noalias() = am * bm;
  }
  /// out [N*H*W, OC].
  void forward(tensor2& out) {
    if (way == lazy) {
      out = patches().contract(filter.reshape(dims2{patch(), l.out_c}),
                               contract_dims{{{1, 0}}});
      return;
    }
    if (way == im2col || cols.size() == 0)
      cols = patches();
    gemm(cols, false, filter.data(), patch(), l.out_c, out);
  }
  /// d_filter [KH*KW*C, OC] = patches^T d_out.
  void backprop_filter(const tensor2& d_out, tensor2& d_filter) {
    if (way == lazy) {
      d_filter = patches().contract(d_out, contract_dims{{{0, 0}}});
      return;
    }
    if (way == im2col || cols.size() == 0)
      cols = patches();
    gemm(cols, true, d_out.data(), rows(), l.out_c, d_filter);
  }
  /// d_in [N*H*W, C]: d_out's patches against the filter turned by 180
  /// degrees, its channels swapped (stride 1, odd SAME kernel: as TF's
  /// SpatialConvolutionBackwardInput).
  void backprop_input(const map4& d_out, tensor2& d_in) {
    Eigen::array<bool, 4> reverse{{true, true, false, false}};
    Eigen::array<int, 4> swap{{0, 1, 3, 2}};
    auto k = conv_k * conv_k * l.out_c;
    auto out_patches = d_out
                         .extract_image_patches(conv_k, conv_k, 1, 1, 1, 1,
                                                Eigen::PADDING_SAME)
                         .reshape(dims2{rows(), k});
    auto turned = filter.reverse(reverse).shuffle(swap).reshape(
      dims2{k, l.in_c});
    if (way == lazy) {
      d_in = out_patches.contract(turned, contract_dims{{{1, 0}}});
      return;
    }
    if (way == im2col || out_cols.size() == 0) {
      out_cols = out_patches;
      turned_filter = turned;
    }
    gemm(out_cols, false, turned_filter.data(), k, l.in_c, d_in);
  }
};

// The largest difference between `ours` and `theirs`, relative to the
// largest magnitude: the two compute the same thing, or the figure says so.
double relative_difference(const tensor& ours, const float* theirs) {
  auto a = ours.flat<float>();
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - theirs[i]));
    scale = std::max(scale, std::abs(static_cast<double>(theirs[i])));
  }
  return diff / scale;
}

void run_conv2d(context& ctx) {
  auto budget = ctx.budget(4.0, 0.8);
  graph g;
  auto as_default = g.as_default();
  std::vector<variable> inputs, filters, d_outputs;
  std::vector<output> outs;
  uint64_t seed = 1;
  for (const auto& l : conv_layers) {
    inputs.emplace_back(random_uniform({conv_batch, l.hw, l.hw, l.in_c}, -1.0,
                                       1.0, dtype::float32, seed++));
    filters.emplace_back(random_uniform({conv_k, conv_k, l.in_c, l.out_c},
                                        -0.1, 0.1, dtype::float32, seed++));
    d_outputs.emplace_back(random_uniform({conv_batch, l.hw, l.hw, l.out_c},
                                          -1.0, 1.0, dtype::float32, seed++));
    outs.push_back(conv2d(inputs.back(), filters.back(), {1, 1, 1, 1},
                          "SAME"));
  }
  // A training step's convolutions: both forwards, both filter gradients
  // and conv2's input gradient (conv1's input is the images: none).
  auto grads = gradients(outs, {filters[0], filters[1], inputs[1]},
                         {d_outputs[0], d_outputs[1]});
  session sess{bounded_config(), &g};
  sess.run(global_variables_initializer());
  std::vector<fetch> forward{outs[0], outs[1]};
  std::vector<fetch> train = forward;
  for (auto& d : grads)
    train.push_back(d);
  // The same values for Eigen.
  std::vector<fetch> values_of;
  for (size_t i = 0; i < 2; ++i)
    for (auto* v : {&inputs[i], &filters[i], &d_outputs[i]})
      values_of.push_back(*v);
  auto values = sess.run(values_of);
  std::vector<eigen_spatial> eigen;
  eigen.reserve(2);
  std::vector<map4> d_out4;
  for (size_t i = 0; i < 2; ++i) {
    const auto& l = conv_layers[i];
    eigen.push_back(
      {l,
       map4{values[3 * i].flat<float>().data(), conv_batch, l.hw, l.hw,
            l.in_c},
       map4{values[3 * i + 1].flat<float>().data(), conv_k, conv_k, l.in_c,
            l.out_c}});
    d_out4.push_back(map4{values[3 * i + 2].flat<float>().data(), conv_batch,
                          l.hw, l.hw, l.out_c});
  }
  tensor2 y[2], dw[2], dx;
  tensor2 d_out2[2];
  for (size_t i = 0; i < 2; ++i)
    d_out2[i] = d_out4[i].reshape(
      dims2{conv_batch * conv_layers[i].hw * conv_layers[i].hw,
            conv_layers[i].out_c});
  auto eigen_forward = [&] {
    eigen[0].forward(y[0]);
    eigen[1].forward(y[1]);
  };
  auto eigen_train = [&] {
    eigen_forward();
    eigen[0].backprop_filter(d_out2[0], dw[0]);
    eigen[1].backprop_filter(d_out2[1], dw[1]);
    eigen[1].backprop_input(d_out4[1], dx);
  };
  // Both compute the same: the engine's results against each of Eigen's
  // ways (train's fetches in order).
  auto ours = sess.run(train);
  double diff = 0;
  for (auto way : {eigen_spatial::lazy, eigen_spatial::im2col}) {
    for (auto& e : eigen)
      e.way = way;
    eigen_train();
    const float* theirs[] = {y[0].data(), y[1].data(), dw[0].data(),
                             dw[1].data(), dx.data()};
    for (size_t i = 0; i < ours.size(); ++i)
      diff = std::max(diff, relative_difference(ours[i], theirs[i]));
  }
  auto differs = diff > 1e-4;
  auto add = [&](const std::string& name, double flop, auto&& our_step,
                 auto&& eigen_step, const std::string& what) {
    if (!ctx.wanted("conv2d", name))
      return;
    // The baseline is the better of Eigen's two ways; the lazy one and the
    // GEMMs alone first, alone.
    auto alone = [&](auto way) {
      for (auto& e : eigen)
        e.way = way;
      return measure(eigen_step, {.budget = budget / 4, .warmup = 1});
    };
    auto lazy = alone(eigen_spatial::lazy);
    auto ceiling = alone(eigen_spatial::gemm_only);
    for (auto& e : eigen)
      e.way = eigen_spatial::im2col;
    auto [a, b] = measure_interleaved(our_step, eigen_step,
                                      {.budget = budget, .min_reps = 1});
    auto lazy_better = lazy.per_second > b.per_second;
    figure f{.name = name,
             .value = a.per_second * flop / 1e9,
             .unit = "GFLOP/s",
             .baseline = lazy_better ? "eigen_spatial_contraction"
                                     : "eigen_im2col_gemm",
             .baseline_value = std::max(lazy.per_second, b.per_second) * flop
                               / 1e9,
             .path = "in_process"};
    f.note = what + ", batch 100, 5x5 SAME: conv1 28x28x1->16, conv2 "
             "14x14x16->32; baseline: the better of Eigen's image patches "
             "written out then its GEMM ("
             + fixed(b.per_second * flop / 1e9, 2)
             + " GFLOP/s, in alternating slices) and Eigen's image patches "
               "contracted lazily as TF's CPU formulation without TF's "
               "packers ("
             + fixed(lazy.per_second * flop / 1e9, 2)
             + " GFLOP/s, alone), one thread; Eigen's GEMMs alone on the "
               "whole batch's patches built beforehand (no patches to build, "
               "but read from memory): "
             + fixed(ceiling.per_second * flop / 1e9, 2)
             + " GFLOP/s; largest relative difference of the results "
             + std::to_string(diff);
    if (differs)
      f.error = "the engine's convolutions and Eigen's differ by "
                + std::to_string(diff) + " (relative)";
    ctx.out->add(f);
  };
  auto flop_forward = conv_flop(conv_layers[0]) + conv_flop(conv_layers[1]);
  add("conv2d_cnn_forward", flop_forward, [&] { sess.run(forward); },
      eigen_forward, "the CNN's two convolutions forward (in-process session)");
  add("conv2d_cnn_train", 2 * flop_forward + conv_flop(conv_layers[1]),
      [&] { sess.run(train); }, eigen_train,
      "a training step's convolutions: both forward, both filter gradients, "
      "conv2's input gradient (in-process session)");
}

} // namespace

figure_group conv2d_group() {
  return {.name = "conv2d",
          .figures = {"conv2d_cnn_forward", "conv2d_cnn_train"},
          .targets = {{"conv2d_cnn_forward", at_least(0.9)},
                      {"conv2d_cnn_train", at_least(0.9)}},
          .run = run_conv2d};
}

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
