// Session::reset across processes: the master clears the default container
// of every task of its cluster (each task's own job name), so a variable
// on the ps task must be initialized again.

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("reset: clears the default container on every task of the "
          "cluster",
          "[reset]") {
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable w;
  {
    device_scope on_ps{"/job:ps/task:0"};
    w = variable{7.0f, named("w")};
  }
  session sess{nodes.target("worker", 0), bounded(), &g};
  sess.run(global_variables_initializer());
  CHECK(sess.run(w).scalar_value<float>() == 7.0f);
  session::reset(nodes.target("worker", 0));
  auto closed = error_of([&] { sess.run(w); });
  REQUIRE(closed);
  CHECK(closed->code() == error_code::aborted);
  session again{nodes.target("worker", 0), bounded(), &g};
  auto uninit = error_of([&] { again.run(w); });
  REQUIRE(uninit);
  CHECK(uninit->code() == error_code::failed_precondition);
  CHECK_THAT(uninit->what(),
             Catch::Contains("Attempting to use uninitialized value w"));
  again.run(w.initializer());
  CHECK(again.run(w).scalar_value<float>() == 7.0f);
}
