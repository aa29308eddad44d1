// Mutual TLS between real processes: a cluster of actorflow-node processes
// with certificates from scripts/make_certs.sh, and clients in this process
// with actor systems of their own (as an embedding application has). Who
// may connect, what the nodes say about those who may not, what travels
// in the clear, bad files at start, handshake deadlines and certificates
// replaced while running.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/transport/transport.hpp"
#include "common/recording_proxy.hpp"
#include "common/temp_dir.hpp"
#include "integration_util.hpp"
#include "net_util.hpp"
#include "tls_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

// The port of "127.0.0.1:PORT".
uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

// The tests' certificates: the tasks (all on 127.0.0.1), a client, a
// stranger (same CA, another name), and a second CA whose certificate
// names the right host.
struct cluster_pki : pki {
  cluster_pki()
    : pki({"node:127.0.0.1,localhost", "client:client", "stranger:stranger"},
          {"node:127.0.0.1,localhost"}) {
    // nop
  }
};

session_config quick() {
  session_config config;
  config.operation_timeout_in_ms = 5000;
  return config;
}

// A client without TLS cannot run `fetch` on task 0 of `job`: Unavailable,
// and the node says whom it refused.
void check_plain_refused(local_cluster& nodes, const std::string& job,
                         graph& g, const output& fetch) {
  client_system plain{tls_config{}};
  auto err = error_of([&] {
    session sess{plain.sys, nodes.target(job, 0), quick(), &g};
    sess.run(fetch);
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::unavailable);
  check_said(nodes.process(job, 0), "refused TLS peer 127.0.0.1:");
}

// A step that crosses processes both ways: a variable on the ps, updated
// through a worker's master, fetched back; its name and values are what
// must not travel in the clear.
float train_step(session& sess, const variable& var, const output& add) {
  sess.run(add);
  return sess.run(var).scalar_value<float>();
}

} // namespace

TEST_CASE("tls: a cluster runs with mutual TLS and no byte in the clear",
          "[tls]") {
  cluster_pki keys;
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 2}}, opts};
  graph g;
  auto as_default = g.as_default();
  variable var;
  output add;
  {
    device_scope on_ps{"/job:ps/task:0"};
    var = variable{0.0f, named("tls_secret_weights")};
  }
  {
    device_scope on_worker{"/job:worker/task:1"};
    add = var.assign_add(constant(1234.5f) * constant(2.0f));
  }
  auto master_port = port_of(nodes.address("worker", 0));

  SECTION("a client with the client role trains; the link is encrypted") {
    client_system client{keys.as("client")};
    recording_proxy wire{master_port};
    session sess{client.sys, "grpc://127.0.0.1:" + std::to_string(wire.port()),
                 quick(), &g};
    sess.run(global_variables_initializer());
    CHECK(train_step(sess, var, add) == 2469.0f);
    CHECK(train_step(sess, var, add) == 4938.0f);
    auto seen = wire.seen();
    // The proxy did carry the session (handshake and steps).
    CHECK(seen.size() > 2000);
    CHECK(seen.find("tls_secret_weights") == std::string::npos);
    CHECK(seen.find("AssignAdd") == std::string::npos);
    float value = 4938.0f;
    CHECK(seen.find(std::string(reinterpret_cast<char*>(&value),
                                sizeof(value)))
          == std::string::npos);
  }

  SECTION("control: the same session in plain TCP shows its graph") {
    // A plain cluster beside it, through the same kind of proxy: proves
    // the checks above can fail.
    local_cluster plain{node_path, {{"ps", 1}, {"worker", 2}}, captured()};
    recording_proxy wire{port_of(plain.address("worker", 0))};
    graph g2;
    auto as_default2 = g2.as_default();
    variable v2;
    {
      device_scope on_ps{"/job:ps/task:0"};
      v2 = variable{0.0f, named("tls_secret_weights")};
    }
    session sess{"grpc://127.0.0.1:" + std::to_string(wire.port()), quick(),
                 &g2};
    sess.run(global_variables_initializer());
    sess.run(v2);
    CHECK(wire.seen().find("tls_secret_weights") != std::string::npos);
  }

  SECTION("the tasks reach each other with their own certificates") {
    // Worker 0's master runs a step on worker 1 and the ps: every
    // connection between the nodes is TLS with their certificates.
    client_system client{keys.as("client")};
    session sess{client.sys, nodes.target("worker", 0), quick(), &g};
    sess.run(global_variables_initializer());
    CHECK(train_step(sess, var, add) == 2469.0f);
    auto& ps = nodes.process("ps", 0);
    CHECK(ps.err().find("refused") == std::string::npos);
  }
}

TEST_CASE("tls: a loopback TLS cluster listens on loopback only and no "
          "port of it answers another host",
          "[tls][listen][security]") {
  auto net = make_other_host();
  if (!net)
    return;
  cluster_pki keys;
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, opts};
  graph g;
  auto as_default = g.as_default();
  variable var;
  output add;
  {
    device_scope on_ps{"/job:ps/task:0"};
    var = variable{0.0f, named("w")};
  }
  {
    device_scope on_worker{"/job:worker/task:0"};
    add = var.assign_add(constant(1.5f) * constant(2.0f));
  }
  client_system client{keys.as("client")};
  session sess{client.sys, nodes.target("worker", 0), quick(), &g};
  sess.run(global_variables_initializer());
  // A step across the two tasks: whatever opens on first use is open.
  CHECK(train_step(sess, var, add) == 3.0f);
  check_unreachable_from(*net, {nodes.process("ps", 0).pid(),
                               nodes.process("worker", 0).pid()});
}

TEST_CASE("tls: a BASP header announcing 4 GiB from a peer with a client "
          "certificate is refused without allocating it",
          "[tls][limits][security]") {
  cluster_pki keys;
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"ps", 1}}, opts};
  auto& ps = nodes.process("ps", 0);
  auto before = rss_kib(ps.pid());
  // openssl's own client, with the client role's certificate: the TLS
  // handshake passes, then 32 bytes of BASP header announce 4 GiB.
  std::string header{'\x01', '\0', '\0', '\0', '\xFF', '\xFF', '\xFF',
                     '\xFF'};
  header += std::string(24, '\0');
  auto input = keys.dir / "header.bin";
  std::ofstream{input, std::ios::binary} << header;
  auto res = run_process(
    {"/bin/sh", "-c",
     "(cat '" + input + "'; sleep 3) | openssl s_client -quiet -nocommands "
       "-connect " + nodes.address("ps", 0) + " -cert '" + keys.cert("client")
       + "' -key '" + keys.key("client") + "' -CAfile '" + keys.ca + "'"},
    30s);
  check_said(ps, "it announced 4294967295 bytes (at most 65536 before its "
                 "handshake)");
  CHECK(rss_kib(ps.pid()) - before < 64 * 1024);
}

TEST_CASE("tls: strangers cannot connect, and the node says who they were",
          "[tls]") {
  cluster_pki keys;
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"local", 1}}, opts};
  auto& node = nodes.process("local", 0);
  graph g;
  auto as_default = g.as_default();
  auto c = constant(1.0f, "c");

  SECTION("no certificate (plain TCP)") {
    check_plain_refused(nodes, "local", g, c);
  }
  SECTION("a certificate from another CA") {
    // It trusts both CAs (so that it gets as far as showing its
    // certificate); the node trusts only its own.
    std::ifstream a{keys.ca}, b{keys.dir / "other/ca.pem"};
    std::stringstream both;
    both << a.rdbuf() << b.rdbuf();
    auto cfg = keys.as("node");
    cfg.cert_file = keys.dir / "other/node.pem";
    cfg.key_file = keys.dir / "other/node.key";
    cfg.ca_file = keys.dir.write("both.pem", both.str());
    client_system other{cfg};
    auto err = error_of([&] {
      session sess{other.sys, nodes.target("local", 0), quick(), &g};
      sess.run(c);
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::unavailable);
    check_said(node, "certificate '/CN=127.0.0.1' (IP:127.0.0.1, "
                     "DNS:localhost, URI:urn:actorflow:role:task) signed by '/CN=actorflow cluster CA "
                     "other'");
  }
  SECTION("a valid certificate for another name") {
    client_system stranger{keys.as("stranger")};
    auto err = error_of([&] {
      session sess{stranger.sys, nodes.target("local", 0), quick(), &g};
      sess.run(c);
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::unavailable);
    check_said(node, "certificate '/CN=stranger' (DNS:stranger, "
                     "URI:urn:actorflow:role:task) is not for a "
                     "host of the cluster nor an allowed peer");
  }
  SECTION("a node whose certificate is not for the host dialed") {
    // The client dials 127.0.0.1 but the node shows the stranger's
    // certificate: the client refuses it. (A node does not start with a
    // certificate that is not for its own host: it gets the stranger's
    // files once it serves, as a certificate manager's rename would.)
    auto cert = keys.dir / "impostor.pem";
    auto key = keys.dir / "impostor.key";
    std::filesystem::copy_file(keys.cert("node"), cert);
    std::filesystem::copy_file(keys.key("node"), key);
    auto stranger_opts = captured();
    stranger_opts.args = {"--tls_cert", cert, "--tls_key", key, "--tls_ca",
                          keys.ca};
    local_cluster impostor{node_path, {{"local", 1}}, stranger_opts};
    std::filesystem::copy_file(keys.cert("stranger"), keys.dir / "next.pem");
    std::filesystem::copy_file(keys.key("stranger"), keys.dir / "next.key");
    std::filesystem::rename(keys.dir / "next.key", key);
    std::filesystem::rename(keys.dir / "next.pem", cert);
    client_system client{keys.as("client")};
    auto err = error_of([&] {
      session sess{client.sys, impostor.target("local", 0), quick(), &g};
      sess.run(c);
    });
    REQUIRE(err);
    CHECK(err->code() == error_code::unavailable);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("(DNS:stranger, URI:urn:actorflow:role:task) "
                               "is not for 127.0.0.1"));
  }
  // The node is alive and serves a client it accepts.
  client_system client{keys.as("client")};
  session sess{client.sys, nodes.target("local", 0), quick(), &g};
  CHECK(sess.run(c).scalar_value<float>() == 1.0f);
}

TEST_CASE("tls: bad certificate files fail at start, naming the flag",
          "[tls]") {
  cluster_pki keys;
  make_certs_in(keys.dir / "", {"--passphrase", "s3cret", "locked:127.0.0.1"});
  auto address = "127.0.0.1:" + std::to_string(support::free_port());
  auto start = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv{node_path, "--ps_hosts", address,
                                  "--job_name", "ps", "--task_index", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    support::spawn_options opts;
    opts.capture_stderr = true;
    opts.echo_stdout = false;
    return run_process(argv, 20s, opts);
  };
  struct bad_case {
    std::vector<std::string> flags;
    std::string says;
  };
  std::vector<bad_case> cases{
    {{"--tls_cert", keys.cert("node"), "--tls_ca", keys.ca},
     "missing: tls_key"},
    {{"--tls_cert", keys.dir / "nope.pem", "--tls_key", keys.key("node"),
      "--tls_ca", keys.ca},
     "--tls_cert: cannot load a certificate from " + keys.dir / "nope.pem"},
    {{"--tls_cert", keys.cert("node"), "--tls_key", keys.key("client"),
      "--tls_ca", keys.ca},
     "--tls_key: " + keys.key("client") + " is not the key of the certificate"},
    {{"--tls_cert", keys.cert("locked"), "--tls_key", keys.key("locked"),
      "--tls_ca", keys.ca},
     "if it is encrypted, give tls_key_passphrase"},
    {{"--tls_cert", keys.cert("locked"), "--tls_key", keys.key("locked"),
      "--tls_key_passphrase", "wrong", "--tls_ca", keys.ca},
     "wrong tls_key_passphrase?"},
    {{"--tls_cert", keys.cert("node"), "--tls_key", keys.key("node"),
      "--tls_ca", keys.dir / "other/ca.pem"},
     "--tls_cert: " + keys.cert("node") + " is not valid under the CA in "
       + keys.dir / "other/ca.pem"},
    {{"--tls_cert", keys.cert("node"), "--tls_key", keys.key("node"),
      "--tls_ca", keys.cert("node") + ".missing"},
     "--tls_ca: cannot load CA certificates"},
  };
  for (const auto& bad : cases) {
    auto res = start(bad.flags);
    INFO(res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.status.exited);
    CHECK(res.status.code == 2);
    CHECK_THAT(res.err, Catch::Contains(bad.says));
    CHECK(res.out.find("serving") == std::string::npos);
  }
  // The right passphrase opens the encrypted key: the node serves.
  child_process good{{node_path, "--ps_hosts", address, "--job_name", "ps",
                      "--task_index", "0", "--tls_cert", keys.cert("locked"),
                      "--tls_key", keys.key("locked"),
                      "--tls_key_passphrase", "s3cret", "--tls_ca", keys.ca},
                     {}};
  CHECK(good.wait_for_line("serving /job:ps", 15s));
}

TEST_CASE("tls: a certificate that is not for the task's own host fails "
          "the start, naming the flag, the file, its names and the host",
          "[tls]") {
  cluster_pki keys;
  make_certs_in(keys.dir / "", {"other:other-host", "ip:127.0.0.1", "lo:localhost"});
  auto port = std::to_string(support::free_port());
  auto start = [&](const std::string& program, const std::string& host,
                   const std::string& name) {
    std::vector<std::string> argv{program, "--ps_hosts", host + ":" + port,
                                  "--job_name", "ps", "--task_index", "0",
                                  "--tls_cert", keys.cert(name), "--tls_key",
                                  keys.key(name), "--tls_ca", keys.ca};
    support::spawn_options opts;
    opts.capture_stderr = true;
    opts.echo_stdout = false;
    return run_process(argv, 20s, opts);
  };
  struct bad_case {
    std::string program;
    std::string host;
    std::string cert;
    std::string names;
  };
  // "localhost" and 127.0.0.1 are different names: each must be named.
  std::vector<bad_case> cases{
    {node_path, "127.0.0.1", "other", "'/CN=other-host' (DNS:other-host, URI:urn:actorflow:role:task)"},
    {node_path, "127.0.0.1", "lo", "'/CN=localhost' (DNS:localhost, URI:urn:actorflow:role:task)"},
    {node_path, "localhost", "ip", "'/CN=127.0.0.1' (IP:127.0.0.1, URI:urn:actorflow:role:task)"},
    {ACTORFLOW_TRAIN_PATH, "127.0.0.1", "other",
     "'/CN=other-host' (DNS:other-host, URI:urn:actorflow:role:task)"},
  };
  for (const auto& bad : cases) {
    auto res = start(bad.program, bad.host, bad.cert);
    INFO(bad.program << " on " << bad.host << " with " << bad.cert << ": "
                     << res.err);
    CHECK_FALSE(res.timed_out);
    CHECK(res.status.exited);
    CHECK(res.status.code == 2);
    CHECK_THAT(res.err,
               Catch::Contains("--tls_cert: " + keys.cert(bad.cert)
                               + " (certificate " + bad.names
                               + ") is not for " + bad.host
                               + ", the host of task "
                                 "/job:ps/replica:0/task:0 ("
                               + bad.host + ":" + port + ")"));
    CHECK(res.out.find("serving") == std::string::npos);
  }
  // A certificate for the host as the cluster spells it serves.
  for (auto [host, name] : {std::pair{"localhost", "lo"},
                            std::pair{"127.0.0.1", "ip"}}) {
    child_process good{{node_path, "--ps_hosts", host + (":" + port),
                        "--job_name", "ps", "--task_index", "0",
                        "--tls_cert", keys.cert(name), "--tls_key",
                        keys.key(name), "--tls_ca", keys.ca},
                       {}};
    CHECK(good.wait_for_line("serving /job:ps", 15s));
    CHECK(good.stop().success());
  }
}

TEST_CASE("tls: a handshake that does not finish in time is dropped",
          "[tls]") {
  cluster_pki keys;
  auto opts = captured();
  opts.args = keys.flags("node");
  opts.args.insert(opts.args.end(), {"--tls_handshake_timeout_ms", "500"});
  local_cluster nodes{node_path, {{"local", 1}}, opts};
  auto port = port_of(nodes.address("local", 0));
  // A peer that connects and says nothing.
  int fd = connect_loopback(port);
  REQUIRE(fd >= 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  // The node closes it: recv sees EOF (0) or a reset, not the 10 s timeout.
  char byte;
  auto n = ::recv(fd, &byte, 1, 0);
  auto err = errno;
  ::close(fd);
  CHECK((n == 0 || (n < 0 && err == ECONNRESET)));
  check_said(nodes.process("local", 0), "handshake not done within 500 ms");
}

TEST_CASE("tls: a certificate replaced by rename serves the next connection",
          "[tls]") {
  cluster_pki keys;
  // The node's files are copies that the test replaces.
  auto cert = keys.dir / "live.pem";
  auto key = keys.dir / "live.key";
  std::filesystem::copy_file(keys.cert("node"), cert);
  std::filesystem::copy_file(keys.key("node"), key);
  auto opts = captured();
  opts.args = {"--tls_cert", cert, "--tls_key", key, "--tls_ca", keys.ca};
  local_cluster nodes{node_path, {{"local", 1}}, opts};
  graph g;
  auto as_default = g.as_default();
  auto c = constant(2.0f, "c");
  {
    client_system client{keys.as("client")};
    session sess{client.sys, nodes.target("local", 0), quick(), &g};
    CHECK(sess.run(c).scalar_value<float>() == 2.0f);
  }
  // A certificate for another name takes the files' place (rename, as a
  // certificate manager does): the next client refuses the node.
  std::filesystem::copy_file(keys.cert("stranger"), keys.dir / "next.pem");
  std::filesystem::copy_file(keys.key("stranger"), keys.dir / "next.key");
  std::filesystem::rename(keys.dir / "next.key", key);
  std::filesystem::rename(keys.dir / "next.pem", cert);
  client_system client{keys.as("client")};
  auto err = error_of([&] {
    session sess{client.sys, nodes.target("local", 0), quick(), &g};
    sess.run(c);
  });
  REQUIRE(err);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("'/CN=stranger' (DNS:stranger, "
                               "URI:urn:actorflow:role:task) is not for "
                             "127.0.0.1"));
}

TEST_CASE("tls: actorflow-train --local trains with its tasks on TLS",
          "[tls]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  cluster_pki keys;
  // A certificate for 127.0.0.1 only, the host of --local's tasks (the
  // README's): the workers' sessions dial their tasks by that name too
  // (they dialed "localhost" once, and refused it).
  make_certs_in(keys.dir / "", {"ip:127.0.0.1"});
  std::vector<std::string> argv{ACTORFLOW_TRAIN_PATH, "--local", "2",
                                "--model", "softmax", "--train_steps", "300",
                                "--tls_cert", keys.cert("ip"), "--tls_key",
                                keys.key("ip"), "--tls_ca", keys.ca};
  support::spawn_options opts;
  opts.capture_stderr = true;
  opts.echo_stdout = false;
  child_process trainer{argv, opts};
  // Every task the trainer starts gets the TLS flags.
  const std::string started = "started /job:ps/task:0 (pid ";
  auto err = err_with(trainer, started, 30s);
  REQUIRE_THAT(err, Catch::Contains(started));
  auto pid = std::stoi(err.substr(err.find(started) + started.size()));
  std::ifstream in{"/proc/" + std::to_string(pid) + "/cmdline"};
  std::string cmdline((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
  CHECK_THAT(cmdline, Catch::Contains("--tls_cert=" + keys.cert("ip")));
  CHECK_THAT(cmdline, Catch::Contains("--tls_ca=" + keys.ca));
  auto st = trainer.wait(120s);
  REQUIRE(st);
  INFO(trainer.err());
  CHECK(st->success());
  CHECK(trainer.wait_for_line("test accuracy: ", 1s));
  CHECK(trainer.err().find("refused") == std::string::npos);
}

TEST_CASE("tls: TF_CONFIG's tls object turns TLS on, and a bad field is "
          "named",
          "[tls]") {
  cluster_pki keys;
  auto opts = captured();
  opts.env = {"TF_CONFIG={\"tls\": {\"cert\": \"" + keys.cert("node")
              + "\", \"key\": \"" + keys.key("node") + "\", \"ca\": \""
              + keys.ca + "\"}}"};
  local_cluster nodes{node_path, {{"local", 1}}, opts};
  graph g;
  auto as_default = g.as_default();
  auto c = constant(3.0f, "c");
  check_plain_refused(nodes, "local", g, c);
  client_system client{keys.as("client")};
  session sess{client.sys, nodes.target("local", 0), quick(), &g};
  CHECK(sess.run(c).scalar_value<float>() == 3.0f);
  // A misspelt field stops the start, named.
  support::spawn_options bad;
  bad.capture_stderr = true;
  bad.echo_stdout = false;
  bad.env = {"TF_CONFIG={\"tls\": {\"certs\": \"x\"}}"};
  auto res = run_process({node_path, "--ps_hosts",
                          "127.0.0.1:" + std::to_string(support::free_port()),
                          "--job_name", "ps", "--task_index", "0"},
                         20s, bad);
  CHECK(res.status.code == 2);
  CHECK_THAT(res.err, Catch::Contains("TF_CONFIG: tls.certs: unknown"));
}
