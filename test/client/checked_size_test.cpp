// Tensor sizes in a session (issue 30): shapes past int32 built by the
// client stay what they are, and a step asking for a tensor whose size
// overflows fails with InvalidArgument, leaving the session working.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "actorflow/actorflow.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using Catch::Matchers::Contains;

TEST_CASE("fill, zeros and ones of dimensions past int32 give that shape",
          "[checked_size][session]") {
  graph g;
  auto as_default = g.as_default();
  const int64_t big = (int64_t{1} << 32) + 5;
  // Empty, so that the test allocates nothing: the dims used to become
  // int32 constants, [5, 0] here.
  auto o = ones({big, 0});
  auto z = zeros({0, big}, dtype::int64);
  auto f = fill({3, big, 0}, constant(2.5f));
  auto r = reshape(zeros({0}), {big, 0});
  session sess{bounded(), &g};
  auto out = sess.run({o, z, f, r});
  CHECK(out[0].shape() == tensor_shape{big, 0});
  CHECK(out[1].shape() == tensor_shape{0, big});
  CHECK(out[1].type() == dtype::int64);
  CHECK(out[2].shape() == tensor_shape{3, big, 0});
  CHECK(out[3].shape() == tensor_shape{big, 0});
}

TEST_CASE("a step whose Fill overflows fails with InvalidArgument and the "
          "session goes on",
          "[checked_size][session]") {
  graph g;
  auto as_default = g.as_default();
  const int64_t huge = (int64_t{1} << 62) + 1;
  auto f = fill({huge}, constant(1.0f), "huge_fill");
  auto total = reduce_sum(f);
  auto fine = reduce_sum(ones({4, 5}));
  session sess{bounded(), &g};
  auto err = error_of([&] { sess.run(total); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Contains("Encountered overflow when multiplying "
                                   "4611686018427387905 with 4"));
  CHECK_THAT(err->what(), Contains("huge_fill"));
  CHECK(sess.run(fine).scalar_value<float>() == 20.0f);
}
