// step_attempts (actors/src/step_attempts.hpp): a resource actor's pending
// attempts by step, so that cancelling a step reaches exactly its own.

#include <catch2/catch.hpp>

#include <vector>

#include "step_attempts.hpp"

using namespace actorflow;

TEST_CASE("step_attempts: a step's attempts are taken once, in order, and "
          "completed ones are not among them",
          "[step_attempts]") {
  step_attempts<int> attempts;
  attempts.add(1, 10);
  attempts.add(2, 20);
  attempts.add(1, 11);
  attempts.add(1, 12);
  attempts.forget(1, 11);
  // Forgetting what is not there changes nothing.
  attempts.forget(3, 30);
  attempts.forget(2, 99);
  CHECK(attempts.take(1) == std::vector<int>{10, 12});
  CHECK(attempts.take(1).empty());
  CHECK(attempts.take(2) == std::vector<int>{20});
  // A step whose last attempt completed has nothing left to cancel.
  attempts.add(4, 40);
  attempts.forget(4, 40);
  CHECK(attempts.take(4).empty());
  attempts.add(5, 50);
  attempts.clear();
  CHECK(attempts.take(5).empty());
}
