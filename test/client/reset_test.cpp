// Session::reset (tf_semantics §6.2, test cases 50, 52, 54): closes every
// session of the master and frees containers on every task.

#include <catch2/catch.hpp>

#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

error_code code_of_run(session& sess, const fetch& f) {
  auto err = error_of([&] { sess.run(f); });
  return err ? err->code() : error_code::ok;
}

} // namespace

TEST_CASE("reset: a named container is freed, others stay (case 50)",
          "[reset]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  variable v0;
  variable v1;
  {
    container_scope c{"test0"};
    v0 = variable{1.0f, named("v0")};
  }
  {
    container_scope c{"test1"};
    v1 = variable{2.0f, named("v1")};
  }
  session old{srv.target(), bounded(), &g};
  old.run(global_variables_initializer());
  session::reset(srv.target(), {"test0"});
  // The old session is gone on the master.
  CHECK(code_of_run(old, v1) == error_code::aborted);
  session fresh{srv.target(), bounded(), &g};
  CHECK(code_of_run(fresh, v0) == error_code::failed_precondition);
  CHECK(fresh.run(v1).scalar_value<float>() == 2.0f);
  // Initialized again, v0 works.
  fresh.run(v0.initializer());
  CHECK(fresh.run(v0).scalar_value<float>() == 1.0f);
}

TEST_CASE("reset: an unknown container frees nothing but closes sessions "
          "(case 52)",
          "[reset]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  variable v0;
  {
    container_scope c{"test0"};
    v0 = variable{1.0f, named("v0")};
  }
  variable v1{2.0f, named("v1")};
  session old{srv.target(), bounded(), &g};
  old.run(global_variables_initializer());
  session::reset(srv.target(), {"test1"});
  CHECK(code_of_run(old, v0) == error_code::aborted);
  session fresh{srv.target(), bounded(), &g};
  CHECK(fresh.run(v0).scalar_value<float>() == 1.0f);
  CHECK(fresh.run(v1).scalar_value<float>() == 2.0f);
}

TEST_CASE("reset: no containers clears the default one (case 54)",
          "[reset]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  variable v2{3.0f, named("v2")};
  variable kept;
  {
    container_scope c{"other"};
    kept = variable{4.0f, named("kept")};
  }
  session old{srv.target(), bounded(), &g};
  old.run(global_variables_initializer());
  session::reset(srv.target());
  CHECK(code_of_run(old, v2) == error_code::aborted);
  session fresh{srv.target(), bounded(), &g};
  CHECK(code_of_run(fresh, v2) == error_code::failed_precondition);
  CHECK(fresh.run(kept).scalar_value<float>() == 4.0f);
  fresh.run(v2.initializer());
  CHECK(fresh.run(v2).scalar_value<float>() == 3.0f);
}

TEST_CASE("reset: two servers, a variable on each - the container of one "
          "job is cleared everywhere it exists (case 55)",
          "[reset]") {
  // Two single-task clusters in one process: resetting one master's
  // default container leaves the other server's variable alone.
  auto s0 = server::create_local_server();
  auto s1 = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  variable v{5.0f, named("v")};
  session a{s0.target(), bounded(), &g};
  session b{s1.target(), bounded(), &g};
  a.run(global_variables_initializer());
  b.run(global_variables_initializer());
  session::reset(s0.target(), {"local"});
  session a2{s0.target(), bounded(), &g};
  CHECK(code_of_run(a2, v) == error_code::failed_precondition);
  CHECK(b.run(v).scalar_value<float>() == 5.0f);
}

TEST_CASE("reset: an unreachable or malformed target is an error",
          "[reset]") {
  session_config quick;
  quick.operation_timeout_in_ms = 2000;
  auto err = error_of([&] { session::reset("localhost:1", {}, quick); });
  REQUIRE(err);
  CHECK(err->code() == error_code::unavailable);
  err = error_of([&] { session::reset("no-port", {}, quick); });
  REQUIRE(err);
  CHECK(err->code() == error_code::not_found);
  err = error_of([&] { session::reset("grpc://no-port", {}, quick); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
}
