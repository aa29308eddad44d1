// step_rendezvous: one step's Recvs and the tensors sent to them meet,
// whichever comes first.

#include <catch2/catch.hpp>

#include "step_rendezvous.hpp"

using namespace actorflow;

TEST_CASE("step_rendezvous: a tensor that comes first waits for its Recv",
          "[rendezvous]") {
  step_rendezvous r;
  auto value = tensor::scalar(3.0f);
  CHECK_FALSE(r.send("edge_a", value));
  CHECK(r.waiting_tensors() == 1);
  auto got = r.recv("edge_a", 7);
  REQUIRE(got);
  CHECK(got->scalar_value<float>() == 3.0f);
  CHECK(r.waiting_tensors() == 0);
  CHECK(r.waiting_recvs() == 0);
}

TEST_CASE("step_rendezvous: a Recv that runs first waits for its tensor, "
          "which goes to it",
          "[rendezvous]") {
  step_rendezvous r;
  CHECK_FALSE(r.recv("edge_a", 7));
  CHECK_FALSE(r.recv("edge_b", 9));
  CHECK(r.waiting_recvs() == 2);
  auto value = tensor::scalar(5.0f);
  auto node = r.send("edge_b", value);
  REQUIRE(node);
  CHECK(*node == 9);
  // The value stays with the caller, for that Recv.
  CHECK(value.scalar_value<float>() == 5.0f);
  CHECK(r.waiting_recvs() == 1);
  CHECK(r.waiting_tensors() == 0);
}

TEST_CASE("step_rendezvous: tensors from before the step start are adopted, "
          "and a key's second tensor is dropped",
          "[rendezvous]") {
  step_rendezvous r;
  step_rendezvous::tensors early;
  early.emplace("edge_a", tensor::scalar(1.0f));
  r.adopt(std::move(early));
  auto second = tensor::scalar(2.0f);
  CHECK_FALSE(r.send("edge_a", second));
  CHECK(r.waiting_tensors() == 1);
  auto got = r.recv("edge_a", 1);
  REQUIRE(got);
  CHECK(got->scalar_value<float>() == 1.0f);
  // Adopting into a rendezvous that holds tensors keeps both.
  auto c = tensor::scalar(3.0f);
  CHECK_FALSE(r.send("edge_c", c));
  step_rendezvous::tensors more;
  more.emplace("edge_d", tensor::scalar(4.0f));
  r.adopt(std::move(more));
  CHECK(r.waiting_tensors() == 2);
  CHECK(r.recv("edge_d", 2)->scalar_value<float>() == 4.0f);
}
