// A step past the process's tensor memory limit (issue 30 §2): its Fill
// fails with ResourceExhausted naming the node, the op and the device, as
// an InvalidArgument from a kernel does, the step's memory is given back,
// and the session and the server go on.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "actorflow/actorflow.hpp"
#include "actorflow/graph/tensor_memory.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

namespace {

constexpr size_t mib = size_t{1} << 20;

class limit_for_test {
public:
  explicit limit_for_test(size_t bytes) : previous_(tensor_memory_limit()) {
    set_tensor_memory_limit(bytes);
  }
  ~limit_for_test() {
    set_tensor_memory_limit(previous_);
  }

private:
  size_t previous_;
};

} // namespace

TEST_CASE("a step whose Fill passes the tensor memory limit fails with "
          "ResourceExhausted naming the op, and the server serves the next",
          "[memory_limit][session]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  // 256 MiB of floats, summed where they are made.
  auto big = fill({64, 1 << 20}, constant(1.0f), "big_fill");
  auto total = reduce_sum(big);
  auto fine = reduce_sum(ones({4, 5}));
  session sess{srv.target(), bounded(), &g};
  CHECK(sess.run(fine).scalar_value<float>() == 20.0f);
  limit_for_test limit{tensor_memory_in_use() + 64 * mib};
  auto in_use = tensor_memory_in_use();
  auto err = error_of([&] { sess.run(total); });
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::resource_exhausted);
  CHECK_THAT(err->what(),
             Contains("OOM when allocating tensor with shape[64,1048576] and "
                      "type float on /job:local/replica:0/task:0/device:CPU:0 "
                      "by allocator cpu: Fill needs 268435456 bytes, the "
                      "tensor memory limit is"));
  CHECK_THAT(err->what(), Contains("[[node big_fill]]"));
  // The same session, and a new one, still run steps; nothing of the
  // failed step stays allocated.
  CHECK(sess.run(fine).scalar_value<float>() == 20.0f);
  session again{srv.target(), bounded(), &g};
  CHECK(again.run(fine).scalar_value<float>() == 20.0f);
  CHECK(tensor_memory_in_use() <= in_use + mib);
  // A step under the limit computes as before.
  auto medium = reduce_sum(fill({4, 1 << 20}, constant(0.5f)));
  CHECK(sess.run(medium).scalar_value<float>() == 2.0f * (1 << 20));
}

TEST_CASE("an in-process session's step past the tensor memory limit fails "
          "with ResourceExhausted and the session goes on",
          "[memory_limit][session]") {
  graph g;
  auto as_default = g.as_default();
  auto total = reduce_sum(fill({64, 1 << 20}, constant(1.0f)));
  auto fine = reduce_sum(ones({4, 5}));
  session sess{bounded(), &g};
  limit_for_test limit{tensor_memory_in_use() + 64 * mib};
  auto err = error_of([&] { sess.run(total); });
  REQUIRE(err);
  INFO(err->what());
  CHECK(err->code() == error_code::resource_exhausted);
  CHECK_THAT(err->what(), Contains("Fill needs 268435456 bytes"));
  CHECK_THAT(err->what(), Contains("[[node Fill]]"));
  CHECK(sess.run(fine).scalar_value<float>() == 20.0f);
}
