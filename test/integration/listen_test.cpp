// Nothing listens where it should not: a cluster whose addresses are on
// loopback listens on loopback only (CAF's automatic-connection port,
// bound to every interface, once let another host run graphs on it), and
// a task's own address must be one of this host's. The TLS case is in
// tls_test.cpp.

#include <unistd.h>

#include <string>

#include "integration_util.hpp"
#include "net_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

TEST_CASE("listen: a plain loopback cluster listens on loopback only and "
          "no port of it answers another host",
          "[listen][security]") {
  auto net = make_other_host();
  if (!net)
    return;
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable v;
  {
    device_scope on_ps{"/job:ps/task:0"};
    v = variable{tensor::scalar(20.0f), named("v")};
  }
  output tripled;
  {
    device_scope on_worker{"/job:worker/task:0"};
    tripled = v.value() * 3.0f;
  }
  session sess{nodes.target("worker", 0), bounded(), &g};
  sess.run(v.initializer());
  // A step across the two tasks: whatever opens on first use is open.
  CHECK(sess.run(tripled).scalar_value<float>() == 60.0f);
  check_unreachable_from(*net, {nodes.process("ps", 0).pid(),
                               nodes.process("worker", 0).pid()});
}

TEST_CASE("listen: a node whose own address is not of this host, or does "
          "not resolve, does not start",
          "[listen][security]") {
  auto port = std::to_string(support::free_ports(1)[0]);
  auto start = [&](const std::string& address) {
    support::spawn_options opts;
    opts.capture_stderr = true;
    opts.echo_stdout = false;
    return run_process({node_path, "--ps_hosts", address, "--job_name", "ps",
                        "--task_index", "0"},
                       30s, opts);
  };
  using Catch::Contains;
  // TEST-NET-3 (RFC 5737): no host has it.
  auto foreign = start("203.0.113.7:" + port);
  CHECK(foreign.status.code == 2);
  CHECK_THAT(foreign.err, Contains("\"203.0.113.7:" + port
                                   + "\" (task /job:ps/replica:0/task:0) is "
                                     "not an address of this host"));
  // .invalid never resolves (RFC 6761).
  auto unresolvable = start("nowhere.invalid:" + port);
  CHECK(unresolvable.status.code == 2);
  CHECK_THAT(unresolvable.err,
             Contains("Could not resolve host \"nowhere.invalid\""));
  // Every interface when asked for, as TF's gRPC server binds it.
  child_process node{{node_path, "--ps_hosts", "203.0.113.7:" + port,
                      "--job_name", "ps", "--task_index", "0", "--bind_host",
                      "0.0.0.0", "--parent-pid", std::to_string(::getpid())}};
  REQUIRE(node.wait_for_line(support::serving_marker("ps", 0), 15s));
  auto sockets = listening_sockets(node.pid());
  auto p = static_cast<uint16_t>(std::stoi(port));
  CHECK((sockets.count({"0.0.0.0", p}) + sockets.count({"::", p})) == 1);
}
