// ConditionalAccumulator semantics (TF's conditional_accumulator_test.py):
// mean of fresh gradients, stale ones dropped, takes waiting in order.

#include <catch2/catch.hpp>

#include <vector>

#include "actorflow/kernels/accumulator_core.hpp"

using namespace actorflow;

namespace {

accumulator_options opts(tensor_shape shape = tensor_shape{{2}}) {
  accumulator_options o;
  o.name = "acc";
  o.type = dtype::float32;
  o.shape = shape;
  return o;
}

struct outcome {
  int calls = 0;
  status st;
  tensor value;
};

accumulator_core::done_fn track(outcome& out) {
  return [&out](status st, tensor v) {
    ++out.calls;
    out.st = std::move(st);
    out.value = std::move(v);
  };
}

std::vector<float> floats(const tensor& t) {
  auto xs = t.flat<float>();
  return {xs.begin(), xs.end()};
}

} // namespace

TEST_CASE("accumulator: take averages the fresh gradients and advances the "
          "global step",
          "[accumulator]") {
  accumulator_core acc{opts()};
  CHECK(acc.apply(tensor::vec<float>({1, 2}), 0).ok());
  CHECK(acc.apply(tensor::vec<float>({3, 6}), 0).ok());
  CHECK(acc.num_accumulated() == 2);
  outcome out;
  acc.take(2, track(out));
  REQUIRE(out.calls == 1);
  REQUIRE(out.st.ok());
  CHECK(floats(out.value) == std::vector<float>{2, 4});
  CHECK(acc.num_accumulated() == 0);
  CHECK(acc.global_step() == 1);
  // Local step 0 is now stale: dropped without an error.
  CHECK(acc.apply(tensor::vec<float>({100, 100}), 0).ok());
  CHECK(acc.num_accumulated() == 0);
  CHECK(acc.apply(tensor::vec<float>({5, 5}), 1).ok());
  CHECK(acc.num_accumulated() == 1);
}

TEST_CASE("accumulator: a take waits for enough gradients, takes are served "
          "in order, cancel keeps the sum",
          "[accumulator]") {
  accumulator_core acc{opts()};
  outcome first;
  outcome second;
  acc.take(2, track(first));
  acc.take(1, track(second));
  CHECK(first.calls == 0);
  acc.apply(tensor::vec<float>({1, 1}), 0);
  CHECK(first.calls == 0);
  CHECK(second.calls == 0); // behind the first
  acc.apply(tensor::vec<float>({3, 3}), 0);
  REQUIRE(first.calls == 1);
  CHECK(floats(first.value) == std::vector<float>{2, 2});
  CHECK(second.calls == 0);
  acc.apply(tensor::vec<float>({7, 7}), 1);
  REQUIRE(second.calls == 1);
  CHECK(floats(second.value) == std::vector<float>{7, 7});
  outcome cancelled;
  auto id = acc.take(5, track(cancelled));
  acc.apply(tensor::vec<float>({1, 1}), 2);
  acc.cancel(id);
  CHECK(cancelled.st.code() == error_code::cancelled);
  CHECK(acc.num_accumulated() == 1);
}

TEST_CASE("accumulator: bad input changes nothing, SUM, set_global_step",
          "[accumulator]") {
  accumulator_core acc{opts()};
  auto shape = acc.apply(tensor::vec<float>({1, 2, 3}), 0);
  CHECK(shape.code() == error_code::invalid_argument);
  CHECK_THAT(shape.message(), Catch::Contains("Shape mismatch"));
  auto type = acc.apply(tensor::vec<double>({1, 2}), 0);
  CHECK(type.code() == error_code::invalid_argument);
  CHECK(acc.num_accumulated() == 0);
  outcome bad;
  acc.take(0, track(bad));
  CHECK(bad.st.code() == error_code::invalid_argument);
  CHECK_THAT(bad.st.message(),
             Catch::Contains("Argument num_required must be positive"));
  acc.set_global_step(10);
  acc.apply(tensor::vec<float>({1, 1}), 9);
  CHECK(acc.num_accumulated() == 0);
  acc.set_global_step(3); // back, as a restored chief may
  acc.apply(tensor::vec<float>({1, 1}), 9);
  CHECK(acc.num_accumulated() == 1);
  auto sum_opts = opts();
  sum_opts.reduction_type = "SUM";
  accumulator_core sum{sum_opts};
  sum.apply(tensor::vec<float>({1, 2}), 0);
  sum.apply(tensor::vec<float>({1, 2}), 0);
  outcome out;
  sum.take(2, track(out));
  CHECK(floats(out.value) == std::vector<float>{2, 4});
  auto wrong = opts();
  wrong.type = dtype::int32;
  CHECK(validate(wrong).code() == error_code::invalid_argument);
}

TEST_CASE("accumulator: it remembers each named sender's last local step "
          "and when, stale or not",
          "[accumulator]") {
  accumulator_core acc{opts()};
  const std::string w0 = "/job:worker/replica:0/task:0";
  const std::string w1 = "/job:worker/replica:0/task:1";
  CHECK(acc.replicas().empty());
  auto before = accumulator_core::clock::now();
  acc.apply(tensor::vec<float>({1, 1}), 0, w0);
  acc.apply(tensor::vec<float>({1, 1}), 0, w1);
  // Unnamed (the gradient came from the accumulator's own task): not kept.
  acc.apply(tensor::vec<float>({1, 1}), 0, "");
  outcome out;
  acc.take(2, track(out));
  REQUIRE(out.st.ok());
  // Step 1: only w0 sends; w1's last is for step 0, below the global step.
  acc.apply(tensor::vec<float>({1, 1}), 1, w0);
  // A bad gradient is not a sign of life of its sender.
  CHECK_FALSE(acc.apply(tensor::vec<float>({1, 2, 3}), 7, w1).ok());
  auto rs = acc.replicas();
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].name == w0);
  CHECK(rs[0].last_step == 1);
  CHECK(rs[1].name == w1);
  CHECK(rs[1].last_step == 0);
  CHECK(rs[1].last_time >= before);
  CHECK(rs[0].last_time >= rs[1].last_time);
  CHECK(acc.global_step() == 1);
  // A stale gradient still says its sender is alive, with its step.
  acc.apply(tensor::vec<float>({5, 5}), 0, w1);
  CHECK(acc.num_accumulated() == 1);
  CHECK(acc.replicas()[1].last_step == 0);
  CHECK(acc.replicas()[1].last_time >= rs[0].last_time);
  // set_global_step keeps them.
  acc.set_global_step(5);
  CHECK(acc.replicas().size() == 2);
}

TEST_CASE("accumulator: set_num_required lowers what pending takes wait for, "
          "and serves those that have enough",
          "[accumulator][elastic]") {
  accumulator_core acc{opts()};
  outcome out;
  acc.take(3, track(out));
  acc.apply(tensor::vec<float>({2, 2}), 0);
  acc.apply(tensor::vec<float>({4, 4}), 0);
  CHECK(out.calls == 0); // waits for a third
  // A replica left: two are enough now.
  CHECK(acc.set_num_required(2).ok());
  REQUIRE(out.calls == 1);
  CHECK(floats(out.value) == std::vector<float>{3, 3});
  // Raising it does not hold back a take that waits for fewer.
  outcome next;
  acc.take(1, track(next));
  CHECK(acc.set_num_required(5).ok());
  CHECK(next.calls == 0);
  acc.apply(tensor::vec<float>({1, 1}), 1);
  CHECK(next.calls == 1);
  // Bad input changes nothing.
  outcome later;
  acc.take(2, track(later));
  CHECK(acc.set_num_required(0).code() == error_code::invalid_argument);
  acc.apply(tensor::vec<float>({1, 1}), 2);
  CHECK(later.calls == 0);
}

TEST_CASE("accumulator: snapshot and restore carry a replica's state",
          "[accumulator][replication]") {
  accumulator_core acc{opts()};
  acc.set_global_step(3);
  CHECK(acc.apply(tensor::vec<float>({1, 2}), 3, "w1").ok());
  auto snap = acc.snapshot();
  CHECK(snap.count == 1);
  CHECK(snap.global_step == 3);
  REQUIRE(snap.replicas.size() == 1);
  CHECK(snap.replicas[0].second == 3);
  // A replica with a waiting take: served once the state has enough.
  accumulator_core replica{opts()};
  outcome out;
  replica.take(2, track(out));
  REQUIRE(replica.restore(snap).ok());
  CHECK(out.calls == 0);
  CHECK(replica.global_step() == 3);
  CHECK(replica.apply(tensor::vec<float>({3, 4}), 3, "w2").ok());
  REQUIRE(out.calls == 1);
  CHECK(floats(out.value) == std::vector<float>{2, 3});
  CHECK(replica.replicas().size() == 2);
  // A sum that does not fit, or a count without a sum, changes nothing.
  auto bad = snap;
  bad.sum = tensor::vec<double>({1, 2});
  CHECK(replica.restore(bad).code() == error_code::invalid_argument);
  bad = snap;
  bad.sum = tensor{};
  CHECK(replica.restore(bad).code() == error_code::invalid_argument);
  CHECK(replica.global_step() == 4);
}
