// Elastic membership with servers in one process (issue 31 §2;
// docs/DESIGN.md, "Elastic workers"): a task joins a running cluster by
// naming any of its tasks, every task learns each version, the joiner
// runs steps on the ps at once, and one that leaves or is stopped is
// removed; bad joins are refused and change nothing.

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "actorflow/client/server.hpp"
#include "actorflow/actors/monitoring.hpp"
#include "actorflow/client/session.hpp"
#include "actorflow/graph/ops.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;

namespace {

std::string loopback() {
  return "127.0.0.1:" + std::to_string(testing::free_port());
}

// Polls `pred` until it holds or ten seconds pass (changes are broadcast
// asynchronously).
template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A ClusterSpec of one ps and one worker on free loopback ports.
struct two_tasks {
  std::string ps_address;
  std::string w0_address;
  cluster_spec cluster;
};

two_tasks ps_and_worker() {
  auto ps = loopback();
  auto w0 = loopback();
  return {ps, w0,
          cluster_spec{std::map<std::string, std::vector<std::string>>{
            {"ps", {ps}}, {"worker", {w0}}}}};
}

int64_t version_of(const server& s) {
  return s.membership().first;
}

// Whether ps 0 (the authority) holds `task` as a peer that is up: it
// reached the task, or the task reached it.
bool ps_sees_up(const std::string& task) {
  for (auto& p :
       monitoring::registry::instance().peers("/job:ps/replica:0/task:0"))
    if (p.peer == task)
      return p.up;
  return false;
}

} // namespace

TEST_CASE("membership: a worker joins through any task and every task "
          "learns it, then it leaves or is lost",
          "[membership][server]") {
  auto [ps_address, w0_address, cluster] = ps_and_worker();
  server ps{cluster, "ps", 0};
  server w0{cluster, "worker", 0};
  CHECK(version_of(ps) == 1);
  // Through the worker (not the authority): forwarded to the ps.
  auto joined = server::join_cluster(w0_address, "worker", loopback());
  CHECK(joined.job_name() == "worker");
  CHECK(joined.task_index() == 1);
  auto [version, members] = joined.membership();
  CHECK(version == 2);
  CHECK(members.size() == 3);
  CHECK(members.count("/job:worker/replica:0/task:1") == 1);
  CHECK(eventually([&] { return version_of(w0) == 2; }));
  CHECK(version_of(ps) == 2);
  // It runs a step on the ps at once.
  {
    graph g;
    auto as_default = g.as_default();
    device_scope on_ps{"/job:ps/task:0"};
    variable v{1.0f, actorflow::testing::named("v")};
    auto add = v.assign_add(constant(tensor::scalar(2.0f)));
    session sess{joined.target(), session_config{}, &g};
    sess.run(global_variables_initializer());
    CHECK(sess.run(add).scalar_value<float>() == 3.0f);
  }
  // A second one gets the next index.
  auto second = server::join_cluster(ps_address, "worker", loopback());
  CHECK(second.task_index() == 2);
  CHECK(eventually([&] { return version_of(joined) == 3; }));
  // It leaves: everyone learns it at once.
  second.leave();
  second.stop();
  CHECK(version_of(ps) == 4);
  CHECK(eventually([&] {
    return version_of(w0) == 4 && version_of(joined) == 4;
  }));
  CHECK(joined.membership().second.count("/job:worker/replica:0/task:2")
        == 0);
  // A task of the ClusterSpec does not leave.
  try {
    w0.leave();
    FAIL("a ClusterSpec task left");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::failed_precondition);
  }
  // One stopped without a word is removed when its loss is seen.
  joined.stop();
  CHECK(eventually([&] {
    return ps.membership().second.count("/job:worker/replica:0/task:1") == 0;
  }));
  CHECK(version_of(ps) == 5);
}

TEST_CASE("membership: a bad join is refused and changes nothing",
          "[membership][server]") {
  auto ps_address = loopback();
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {ps_address}}}};
  server ps{cluster, "ps", 0};
  auto refused = [&](const std::string& contact, const std::string& job,
                     const std::string& address) {
    try {
      server::join_cluster(contact, job, address);
    } catch (const op_error& e) {
      return e.code();
    }
    return error_code::ok;
  };
  CHECK(refused(ps_address, "ps", loopback()) == error_code::invalid_argument);
  CHECK(refused(ps_address, "worker", "127.0.0.1:0")
        == error_code::invalid_argument);
  CHECK(refused(ps_address, "worker", "nonsense")
        == error_code::invalid_argument);
  CHECK(refused(ps_address, "worker", ps_address)
        == error_code::already_exists);
  CHECK(refused("nonsense", "worker", loopback())
        == error_code::invalid_argument);
  // Nothing listens there.
  CHECK(refused(loopback(), "worker", loopback()) == error_code::unavailable);
  CHECK(version_of(ps) == 1);
}

TEST_CASE("membership: a restarted authority learns the members again from "
          "the first task that reaches it",
          "[membership][server]") {
  auto [ps_address, w0_address, cluster] = ps_and_worker();
  auto ps = std::make_unique<server>(cluster, "ps", 0);
  server w0{cluster, "worker", 0};
  auto joined = server::join_cluster(ps_address, "worker", loopback());
  CHECK(eventually([&] { return version_of(w0) == 2; }));
  // The ps restarts at its address: it starts from the ClusterSpec.
  ps->stop();
  ps = std::make_unique<server>(cluster, "ps", 0);
  CHECK(version_of(*ps) == 1);
  // The worker's next step reaches it, and tells it what it missed.
  graph g;
  auto as_default = g.as_default();
  device_scope on_ps{"/job:ps/task:0"};
  variable v{1.0f, actorflow::testing::named("v")};
  session sess{w0.target(), session_config{}, &g};
  sess.run(global_variables_initializer());
  CHECK(eventually([&] { return version_of(*ps) == 2; }));
  CHECK(ps->membership().second.count("/job:worker/replica:0/task:1") == 1);
  // It watches the joined worker again: stopped, it is removed.
  joined.stop();
  CHECK(eventually([&] {
    return ps->membership().second.count("/job:worker/replica:0/task:1") == 0;
  }));
}

TEST_CASE("membership: the authority watches a ClusterSpec worker through "
          "the connection the worker opens, without dialing it",
          "[membership][server]") {
  // The authority's ClusterSpec names the worker at a port nothing
  // listens on: it reaches the worker only through the worker's greeting
  // (two tasks dialing each other at once lose both connections in CAF
  // 0.17, so the authority does not dial).
  auto [ps_address, w0_address, cluster] = ps_and_worker();
  auto elsewhere = cluster_spec{std::map<std::string, std::vector<std::string>>{
    {"ps", {ps_address}}, {"worker", {loopback()}}}};
  server ps{elsewhere, "ps", 0};
  auto w0 = std::make_unique<server>(cluster, "worker", 0);
  const std::string name = "/job:worker/replica:0/task:0";
  REQUIRE(eventually([&] { return ps_sees_up(name); }));
  CHECK(version_of(ps) == 1);
  // Watched through that connection: stopped, it is down at once (not
  // after the 30 s in which an unheard member is dialed).
  w0->stop();
  CHECK(eventually([&] { return ps.membership().second.count(name) == 0; }));
  CHECK(version_of(ps) == 2);
}

TEST_CASE("membership: a ClusterSpec worker that stops is no member until "
          "it is back at its address",
          "[membership][server]") {
  auto [ps_address, w0_address, cluster] = ps_and_worker();
  server ps{cluster, "ps", 0};
  auto w0 = std::make_unique<server>(cluster, "worker", 0);
  const std::string name = "/job:worker/replica:0/task:0";
  CHECK(version_of(ps) == 1);
  // The authority reaches it (it watches the ClusterSpec's workers).
  REQUIRE(eventually([&] { return ps_sees_up(name); }));
  w0->stop();
  CHECK(eventually([&] { return ps.membership().second.count(name) == 0; }));
  CHECK(version_of(ps) == 2);
  // Started again at its address: once it reaches the authority (its
  // first step on the ps), a member again, as TF expects it back.
  w0 = std::make_unique<server>(cluster, "worker", 0);
  graph g;
  auto as_default = g.as_default();
  device_scope on_ps{"/job:ps/task:0"};
  variable v{1.0f, actorflow::testing::named("v")};
  session sess{w0->target(), session_config{}, &g};
  sess.run(v.initializer());
  CHECK(eventually([&] { return ps.membership().second.count(name) == 1; }));
  CHECK(version_of(ps) == 3);
  CHECK(ps.membership().second.at(name) == w0_address);
  // It learns the current view from the authority.
  CHECK(eventually([&] { return version_of(*w0) == 3; }));
  sess.close();
}
