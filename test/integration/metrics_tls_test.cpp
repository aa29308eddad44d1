// /metrics over TLS (--metrics_tls, server::serve_metrics with a
// tls_config): an actorflow-node with certificates from
// scripts/make_certs.sh serves it only to readers with a certificate of the
// cluster's CA, and says whom it refused.

#include <unistd.h>

#include <csignal>
#include <map>
#include <regex>
#include <thread>

#include <httplib.h>

#include "common/temp_dir.hpp"
#include "integration_util.hpp"
#include "tls_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

int status_of(const httplib::Result& res) {
  return res ? res->status : -1;
}

} // namespace

TEST_CASE("metrics: --metrics_tls serves /metrics over TLS, only to readers "
          "with a certificate of the cluster's CA",
          "[metrics][tls]") {
  // httplib's TLS client writes with OpenSSL (send() without
  // MSG_NOSIGNAL): a refused handshake must not end the test process.
  std::signal(SIGPIPE, SIG_IGN);
  pki keys{{"node:127.0.0.1,localhost", "client:client"}, {"client:client"}};
  auto address = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::string> argv{node_path,  "--ps_hosts",     address,
                                "--job_name", "ps",             "--metrics_port",
                                "0",          "--metrics_tls"};
  for (auto& f : keys.flags("node"))
    argv.push_back(f);
  // Gone with this process, however it ends.
  argv.push_back("--parent-pid");
  argv.push_back(std::to_string(::getpid()));
  child_process node{argv};
  auto line = node.wait_for_line("metrics of ", 15s);
  INFO(node.out() << node.err());
  REQUIRE(line);
  static const std::regex url{R"(at https://127\.0\.0\.1:(\d+)/metrics)"};
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, url));
  int port = std::stoi(m[1].str());
  auto reader = [&](const std::string& cert, const std::string& key) {
    auto c = cert.empty()
               ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
               : std::make_unique<httplib::SSLClient>("127.0.0.1", port, cert,
                                                      key);
    c->set_ca_cert_path(keys.ca.c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5);
    c->set_read_timeout(10);
    return c;
  };
  // A reader with a certificate of the cluster's CA (Prometheus', a
  // client's): the metrics, from a server whose certificate it checked.
  auto ok = reader(keys.cert("client"), keys.key("client"))->Get("/metrics");
  REQUIRE(status_of(ok) == 200);
  CHECK_THAT(ok->body, Catch::Contains("actorflow_steps_total"));
  CHECK(status_of(reader(keys.cert("client"), keys.key("client"))
                    ->Post("/metrics", "", "text/plain"))
        == 405);
  // Without a certificate: 403, over TLS, and the node says whom it refused.
  auto anonymous = reader("", "")->Get("/metrics");
  REQUIRE(status_of(anonymous) == 403);
  CHECK_THAT(anonymous->body, Catch::Contains("client certificate"));
  CHECK_THAT(err_with(node, "no certificate"),
             Catch::Contains("refused metrics reader 127.0.0.1:"));
  // Another CA's certificate: no handshake.
  auto other = reader(keys.dir / "other/client.pem",
                      keys.dir / "other/client.key")
                 ->Get("/metrics");
  CHECK_FALSE(other);
  CHECK_THAT(err_with(node, "not signed by the cluster's CA"),
             Catch::Contains("certificate '/CN=client'"));
  // A flood of refusals is logged five times a minute at most.
  for (int i = 0; i < 20; ++i)
    CHECK(status_of(reader("", "")->Get("/metrics")) == 403);
  std::this_thread::sleep_for(300ms);
  auto err = node.err();
  size_t said = 0;
  for (auto at = err.find("refused metrics reader"); at != std::string::npos;
       at = err.find("refused metrics reader", at + 1))
    ++said;
  CHECK(said == 5);
  // Plain HTTP gets nothing.
  httplib::Client plain{"127.0.0.1", port};
  plain.set_read_timeout(5);
  auto res = plain.Get("/metrics");
  CHECK((!res || res->status != 200));

  // --metrics_tls needs the process's certificate.
  auto bad = run_process({node_path, "--ps_hosts", address, "--job_name", "ps",
                          "--metrics_port", "0", "--metrics_tls"},
                         10s);
  CHECK(bad.status.code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--metrics_tls needs the process's "
                                      "TLS certificate"));
}

TEST_CASE("metrics: actorflow-train --local gives its tasks --metrics_tls, "
          "and --metrics_tls needs --metrics_port",
          "[metrics][tls]") {
  pki keys{{"node:127.0.0.1,localhost", "client:client"}, {"client:client"}};
  auto no_port = run_process({ACTORFLOW_TRAIN_PATH, "--local", "1",
                              "--metrics_tls"},
                             10s);
  CHECK(no_port.status.code == 2);
  CHECK_THAT(no_port.err,
             Catch::Contains("--metrics_tls needs --metrics_port"));
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  std::vector<std::string> argv{ACTORFLOW_TRAIN_PATH, "--local",      "1",
                                "--model",            "softmax",      "--train_steps",
                                "100000000",          "--metrics_port", "0",
                                "--metrics_tls"};
  for (auto& f : keys.flags("node"))
    argv.push_back(f);
  child_process trainer{argv};
  // Each task prints its own https address.
  static const std::regex url{
    R"(metrics of /job:(\w+)/replica:0/task:0 at https://127\.0\.0\.1:(\d+)/metrics)"};
  std::map<std::string, int> ports;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  // Polls the trainer's output for both tasks' lines; bounded.
  while (ports.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    auto out = trainer.out();
    for (std::sregex_iterator i{out.begin(), out.end(), url}, end; i != end;
         ++i)
      ports[(*i)[1].str()] = std::stoi((*i)[2].str());
    std::this_thread::sleep_for(100ms);
  }
  INFO(trainer.out() << trainer.err());
  REQUIRE(ports.size() == 2);
  for (auto& [job, port] : ports) {
    INFO(job);
    httplib::SSLClient reader{"127.0.0.1", port, keys.cert("client"),
                              keys.key("client")};
    reader.set_ca_cert_path(keys.ca.c_str());
    reader.enable_server_certificate_verification(true);
    auto res = reader.Get("/metrics");
    REQUIRE(status_of(res) == 200);
    CHECK_THAT(res->body, Catch::Contains("/job:" + job + "/replica:0/task:0"));
  }
}
