#pragma once

// The baseline of train_examples_per_s: actorflow-train's MLP (784 -> 256
// -> 128 -> 10, ReLU, sparse softmax cross-entropy, Adam with TF's
// defaults, batch 100) as a plain single-process, single-thread Eigen loop:
// the same forward, backward and update arithmetic with no graph, no
// session and no network. The kernels' MatMul is the same Eigen GEMM on
// one thread, so the gap between the two is the engine's cost.
//
// The examples are synthetic (uniform pixels, uniform labels): the
// arithmetic does not depend on the values, and the bench must not need
// the dataset for its baseline. Each batch is gathered row by row from a
// pool of examples by shuffled index, as the trainer's batcher does.
//
// Every buffer is sized once: freshly allocated per step, the 784x256
// gradient (800 KB) came from mmap and page-faulted on every step in a
// process whose glibc had not yet raised its mmap threshold, and the loop
// ran at ~70 000 examples/s with `--only train` against ~122 000 after the
// bench's other groups (the kernels' large buffers come from actorflow's
// own cache, so the engine does not depend on this).

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace actorflow::bench {

class eigen_mlp {
public:
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                               Eigen::RowMajor>;
  using row = Eigen::Matrix<float, 1, Eigen::Dynamic>;

  static constexpr int64_t inputs = 784;
  static constexpr int64_t classes = 10;

  explicit eigen_mlp(int64_t batch_size = 100,
                     std::vector<int64_t> hidden = {256, 128},
                     int64_t pool_size = 10000, uint64_t seed = 1)
    : batch_(batch_size), rng_(seed) {
    std::vector<int64_t> widths{inputs};
    widths.insert(widths.end(), hidden.begin(), hidden.end());
    widths.push_back(classes);
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      layer l;
      auto in = widths[i];
      auto out = widths[i + 1];
      // Glorot-uniform weights, zero biases: models.hpp's initializers.
      auto limit = static_cast<float>(std::sqrt(6.0 / double(in + out)));
      std::uniform_real_distribution<float> init{-limit, limit};
      l.w = matrix(in, out);
      for (int64_t k = 0; k < l.w.size(); ++k)
        l.w.data()[k] = init(rng_);
      l.b = row::Zero(out);
      l.mw = matrix::Zero(in, out);
      l.vw = matrix::Zero(in, out);
      l.mb = row::Zero(out);
      l.vb = row::Zero(out);
      l.gw = matrix(in, out);
      l.gb = row(out);
      layers_.push_back(std::move(l));
      pre_.emplace_back(batch_, out);
      delta_.emplace_back(batch_, out);
      acts_.emplace_back(batch_, in);
    }
    pool_x_ = matrix(pool_size, inputs);
    std::uniform_real_distribution<float> pixel{0.0f, 1.0f};
    for (int64_t k = 0; k < pool_x_.size(); ++k)
      pool_x_.data()[k] = pixel(rng_);
    std::uniform_int_distribution<int> label{0, classes - 1};
    pool_y_.resize(static_cast<size_t>(pool_size));
    for (auto& y : pool_y_)
      y = label(rng_);
    order_.resize(static_cast<size_t>(pool_size));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    y_.resize(static_cast<size_t>(batch_));
  }

  int64_t batch_size() const noexcept {
    return batch_;
  }

  /// One training step on the next batch; returns its mean loss.
  float step() {
    next_batch();
    // Forward: z = a W + b, a' = relu(z); the last layer stays linear.
    size_t n = layers_.size();
    for (size_t i = 0; i < n; ++i) {
      auto& l = layers_[i];
      pre_[i].noalias() = acts_[i] * l.w;
      pre_[i].rowwise() += l.b;
      if (i + 1 < n)
        acts_[i + 1] = pre_[i].cwiseMax(0.0f);
    }
    // Softmax cross-entropy with the labels, and its gradient.
    const matrix& logits = pre_[n - 1];
    matrix& grad = delta_[n - 1];
    double loss = 0;
    for (int64_t r = 0; r < batch_; ++r) {
      auto z = logits.row(r);
      float top = z.maxCoeff();
      auto e = (z.array() - top).exp();
      float total = e.sum();
      auto y = y_[static_cast<size_t>(r)];
      loss += std::log(total) - (z(y) - top);
      grad.row(r) = (e / total).matrix();
      grad(r, y) -= 1.0f;
    }
    grad /= static_cast<float>(batch_);
    // Backward and Adam, last layer first; a layer's input gradient uses
    // its weights before their update.
    ++t_;
    for (size_t i = n; i-- > 0;) {
      auto& l = layers_[i];
      l.gw.noalias() = acts_[i].transpose() * delta_[i];
      l.gb = delta_[i].colwise().sum();
      if (i > 0) {
        delta_[i - 1].noalias() = delta_[i] * l.w.transpose();
        delta_[i - 1].array() *= (pre_[i - 1].array() > 0.0f).cast<float>();
      }
      adam(l.w, l.mw, l.vw, l.gw);
      adam(l.b, l.mb, l.vb, l.gb);
    }
    return static_cast<float>(loss / static_cast<double>(batch_));
  }

private:
  struct layer {
    matrix w;
    row b;
    matrix mw, vw;
    row mb, vb;
    /// This step's gradients.
    matrix gw;
    row gb;
  };

  void next_batch() {
    auto pool = static_cast<int64_t>(order_.size());
    for (int64_t r = 0; r < batch_; ++r) {
      if (cursor_ == 0)
        std::shuffle(order_.begin(), order_.end(), rng_);
      auto k = order_[static_cast<size_t>(cursor_)];
      acts_[0].row(r) = pool_x_.row(k);
      y_[static_cast<size_t>(r)] = pool_y_[static_cast<size_t>(k)];
      cursor_ = (cursor_ + 1) % pool;
    }
  }

  /// TF's Adam (learning rate 0.001, beta1 0.9, beta2 0.999, epsilon
  /// 1e-8), with the bias correction folded into the step size.
  template <class M>
  void adam(M& p, M& m, M& v, const M& g) {
    constexpr float lr = 0.001f;
    constexpr float beta1 = 0.9f;
    constexpr float beta2 = 0.999f;
    constexpr float eps = 1e-8f;
    auto lr_t = lr * std::sqrt(1.0f - std::pow(beta2, float(t_)))
                / (1.0f - std::pow(beta1, float(t_)));
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g.cwiseProduct(g);
    p.array() -= lr_t * m.array() / (v.array().sqrt() + eps);
  }

  int64_t batch_;
  std::mt19937_64 rng_;
  std::vector<layer> layers_;
  matrix pool_x_;
  std::vector<int> pool_y_;
  std::vector<int64_t> order_;
  int64_t cursor_ = 0;
  std::vector<int> y_;
  /// Per layer: its input (acts_[0] is the batch, gathered in place), its
  /// pre-activation (the last one is the logits) and the loss's gradient
  /// with respect to that pre-activation.
  std::vector<matrix> acts_;
  std::vector<matrix> pre_;
  std::vector<matrix> delta_;
  int64_t t_ = 0;
};

} // namespace actorflow::bench
