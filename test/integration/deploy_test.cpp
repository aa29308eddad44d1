// deploy/entrypoint.sh as Kubernetes runs it: "pods" on loopback (each its
// own 127.x address on one port, HOSTNAME "<StatefulSet>-<ordinal>" and
// the StatefulSet's env as deploy/k8s/actorflow.yaml sets them) form a
// cluster from the TF_CONFIG the entrypoint derives, and train; bad
// settings are refused before anything starts. test/deploy/check_deploy.py
// checks the manifests and the Dockerfile against the entrypoint.

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string entrypoint = std::string{ACTORFLOW_SOURCE_DIR}
                               + "/deploy/entrypoint.sh";

/// The env of pod `ordinal` of StatefulSet "actorflow-<job>", with every
/// task at 127.<1 for ps, 2 for workers>.0.1<index>, all on `port`.
std::vector<std::string> pod_env(const std::string& job, int ordinal,
                                 uint16_t port) {
  return {"ACTORFLOW_JOB=" + job,
          "HOSTNAME=actorflow-" + job + "-" + std::to_string(ordinal),
          "ACTORFLOW_PS_REPLICAS=1",
          "ACTORFLOW_WORKER_REPLICAS=2",
          "ACTORFLOW_PORT=" + std::to_string(port),
          "ACTORFLOW_PS_ADDRESS_TEMPLATE=127.1.0.1{index}:{port}",
          "ACTORFLOW_WORKER_ADDRESS_TEMPLATE=127.2.0.1{index}:{port}",
          "ACTORFLOW_COMMAND=" ACTORFLOW_TRAIN_PATH,
          // The manifests give the pod's IP (status.podIP).
          "ACTORFLOW_BIND_HOST=127." + std::string{job == "ps" ? "1" : "2"}
            + ".0.1" + std::to_string(ordinal),
          "TF_CONFIG"};
}

} // namespace

TEST_CASE("deploy: the entrypoint's pods form a cluster and train",
          "[deploy]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  using Catch::Contains;
  auto port = support::free_ports(1).at(0);
  auto parent = std::to_string(::getpid());
  std::vector<std::string> args{entrypoint, "--model", "softmax",
                                "--train_steps", "400", "--log_every", "100",
                                "--parent-pid", parent};
  support::spawn_options ps_opts;
  ps_opts.env = pod_env("ps", 0, port);
  support::child_process ps{args, ps_opts};
  auto serving = ps.wait_for_line("serving", 30s);
  INFO("ps stdout:\n" << ps.out() << "\nps stderr:\n" << ps.err());
  REQUIRE(serving);
  CHECK_THAT(*serving, Contains("serving /job:ps/replica:0/task:0 at "
                                "127.1.0.10:" + std::to_string(port)));
  std::vector<std::unique_ptr<support::child_process>> workers;
  for (int i = 0; i < 2; ++i) {
    support::spawn_options o;
    o.env = pod_env("worker", i, port);
    workers.push_back(std::make_unique<support::child_process>(args, o));
  }
  for (int i = 0; i < 2; ++i) {
    auto& w = *workers[i];
    auto status = w.wait(120s);
    INFO("worker " << i << " stdout:\n" << w.out() << "\nstderr:\n" << w.err());
    REQUIRE(status);
    CHECK(status->success());
    // The entrypoint said what it derived: this pod's task in the cluster
    // of every pod's address.
    CHECK_THAT(w.err(), Contains(R"("cluster": {"ps": ["127.1.0.10:)"));
    CHECK_THAT(w.err(), Contains(R"("worker": ["127.2.0.10:)"));
    CHECK_THAT(w.err(), Contains(R"("task": {"type": "worker", "index": )"
                                 + std::to_string(i) + "}"));
    CHECK_THAT(w.out(), Contains("serving /job:worker/replica:0/task:"
                                 + std::to_string(i) + " at 127.2.0.1"
                                 + std::to_string(i) + ":"));
    CHECK_THAT(w.out(), Contains("worker " + std::to_string(i) + ": done: "));
  }
  CHECK_THAT(workers[0]->out(), Contains("test accuracy: "));
  // A ps serves until it is told to stop, as in a StatefulSet.
  CHECK(ps.running());
  ps.send_signal(SIGTERM);
  auto st = ps.wait(10s);
  REQUIRE(st);
  CHECK(st->success());
}

TEST_CASE("deploy: a pod of the elastic Deployment joins the running job "
          "and leaves when it is scaled away",
          "[deploy][elastic]") {
  if (!have_fashion_mnist()) {
    WARN("Fashion-MNIST is not installed (dataset-fashion-mnist): not run");
    return;
  }
  using Catch::Contains;
  auto port = support::free_ports(1).at(0);
  auto parent = std::to_string(::getpid());
  std::vector<std::string> args{entrypoint, "--model", "softmax",
                                "--train_steps", "30000", "--log_every",
                                "100", "--parent-pid", parent};
  // The StatefulSets' pods: one ps, the chief.
  auto static_env = [&](const std::string& job) {
    auto env = pod_env(job, 0, port);
    for (auto& e : env)
      if (e.starts_with("ACTORFLOW_WORKER_REPLICAS="))
        e = "ACTORFLOW_WORKER_REPLICAS=1";
    return env;
  };
  support::spawn_options ps_opts;
  ps_opts.env = static_env("ps");
  support::child_process ps{args, ps_opts};
  REQUIRE(ps.wait_for_line("serving", 30s));
  support::spawn_options chief_opts;
  chief_opts.env = static_env("worker");
  support::child_process chief{args, chief_opts};
  INFO("chief stdout:\n" << chief.out() << "\nstderr:\n" << chief.err());
  REQUIRE(chief.wait_for_line("worker 0: step 100 ", 60s));
  // A Deployment's pod: no ordinal, the ps Service to join through, its
  // own IP.
  support::spawn_options elastic_opts;
  elastic_opts.env = {"ACTORFLOW_JOB=worker",
                      "HOSTNAME=actorflow-worker-elastic-5d8f7c9b6-x2x9q",
                      "ACTORFLOW_JOIN=127.1.0.10:" + std::to_string(port),
                      "ACTORFLOW_PORT=" + std::to_string(port),
                      "ACTORFLOW_BIND_HOST=127.3.0.10",
                      "ACTORFLOW_COMMAND=" ACTORFLOW_TRAIN_PATH, "TF_CONFIG"};
  support::child_process elastic{args, elastic_opts};
  INFO("elastic stdout:\n" << elastic.out() << "\nstderr:\n"
                            << elastic.err());
  REQUIRE(elastic.wait_for_line("worker 1: step 100 ", 60s));
  CHECK_THAT(elastic.out(),
             Contains("serving /job:worker/replica:0/task:1 at 127.3.0.10:"
                      + std::to_string(port) + " (joined through 127.1.0.10:"));
  // Scaled away: SIGTERM, it leaves after its step.
  check_leaves_on_sigterm(elastic, 1, ps);
  // The chief goes on alone.
  chief.send_signal(SIGTERM);
  chief.wait(10s);
  ps.send_signal(SIGTERM);
  ps.wait(10s);
}

TEST_CASE("deploy: the entrypoint refuses bad settings with status 2",
          "[deploy]") {
  using Catch::Contains;
  struct bad_env {
    std::vector<std::string> env;
    std::string message;
  };
  std::vector<bad_env> cases{
    {{"ACTORFLOW_JOB=chief", "HOSTNAME=actorflow-chief-0"},
     "ACTORFLOW_JOB: expected ps or worker, got 'chief'"},
    {{"ACTORFLOW_JOB=worker", "HOSTNAME=laptop"},
     "HOSTNAME: expected a StatefulSet pod's name ending in -<ordinal>, "
     "got 'laptop'"},
    {{"ACTORFLOW_JOB=worker", "HOSTNAME=actorflow-worker-2"},
     "task 2 of job worker, which has 2 tasks"},
    {{"ACTORFLOW_JOB=ps", "HOSTNAME=actorflow-ps-0",
      "ACTORFLOW_PS_REPLICAS=zero"},
     "ACTORFLOW_PS_REPLICAS: expected a positive number of tasks, got 'zero'"},
    {{"ACTORFLOW_JOB=ps", "HOSTNAME=actorflow-ps-0", "ACTORFLOW_PORT=70000"},
     "ACTORFLOW_PORT: expected a port number, got '70000'"},
  };
  for (auto& bad : cases) {
    support::spawn_options o;
    o.env = bad.env;
    o.env.push_back("TF_CONFIG");
    // A command that must not run.
    o.env.push_back("ACTORFLOW_COMMAND=false");
    auto result = support::run_process({entrypoint}, 10s, o);
    INFO(bad.message << "\nstderr:\n" << result.err);
    CHECK(result.status.exited);
    CHECK(result.status.code == 2);
    CHECK_THAT(result.err, Contains(bad.message));
  }
  // A TF_CONFIG of its own is used as it is.
  support::spawn_options o;
  o.env = {"TF_CONFIG={\"cluster\": {}}", "ACTORFLOW_JOB", "HOSTNAME=x"};
  auto result = support::run_process({entrypoint,
                                       "--print-tf-config"}, 10s, o);
  CHECK(result.status.success());
  CHECK(result.out == "{\"cluster\": {}}\n");
}
