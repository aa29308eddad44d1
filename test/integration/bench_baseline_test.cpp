// The plain Eigen loop that train_examples_per_s is measured against
// (apps/bench/eigen_mlp.hpp) must really train: a baseline whose backward
// pass or update were broken would still run, at another speed, and every
// training ratio would be against the wrong thing.

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "bench/eigen_mlp.hpp"

using actorflow::bench::eigen_mlp;

TEST_CASE("bench baseline: the Eigen MLP memorizes a small pool",
          "[bench]") {
  // 100 random examples seen whole every step: the bench's network learns
  // them by heart (a cross-entropy near 0) from chance level (ln 10).
  eigen_mlp mlp{100, {256, 128}, 100, 1};
  auto first = mlp.step();
  CHECK(first == Approx(std::log(10.0)).margin(0.3));
  float loss = first;
  for (int i = 0; i < 100; ++i)
    loss = mlp.step();
  CHECK(loss < 0.05f);
}

TEST_CASE("bench baseline: other widths and batch sizes train too",
          "[bench]") {
  eigen_mlp mlp{20, {32}, 200, 3};
  std::vector<float> losses;
  for (int i = 0; i < 400; ++i)
    losses.push_back(mlp.step());
  REQUIRE(std::isfinite(losses.back()));
  // Batches of 20 from 200 examples: noisy, but steadily down.
  auto mean = [&](size_t from) {
    float sum = 0;
    for (size_t k = from; k < from + 50; ++k)
      sum += losses[k];
    return sum / 50;
  };
  CHECK(mean(350) < 0.5f * mean(0));
}
