// A step dies with its owner (issue 31 §0): a client or a master killed
// (SIGKILL) or silent (SIGSTOP) while its queue operation waits on the ps
// leaves nothing behind. The withdrawn dequeue takes no element and the
// withdrawn enqueue adds none, so the next consumer gets the first element.
// Real processes: a ps, a worker whose master runs the steps, and a client
// process (helpers/queue_client.cpp) that the test kills or stops; the
// queue's blocked operations are read from the ps's /metrics.

#include <signal.h>

#include <regex>
#include <string>

#include <httplib.h>

#include "actorflow/graph/queue_ops.hpp"
#include "integration_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

const std::string queue_client_path = ACTORFLOW_QUEUE_CLIENT_PATH;

// The ps, a worker, and the ps's /metrics.
struct owners_cluster {
  local_cluster nodes;
  uint16_t metrics_port = 0;

  owners_cluster() : nodes(node_path, {{"ps", 1}, {"worker", 1}}, opts()) {
    auto line = nodes.process("ps", 0).wait_for_line("/metrics", 20s);
    REQUIRE(line);
    std::smatch m;
    static const std::regex port{R"(http://127\.0\.0\.1:(\d+)/metrics)"};
    REQUIRE(std::regex_search(*line, m, port));
    metrics_port = static_cast<uint16_t>(std::stoi(m[1]));
  }

  static support::cluster_options opts() {
    auto o = captured();
    o.args = {"--metrics_port", "0"};
    return o;
  }

  // A gauge of the queue "shared" on the ps (-1 until it exists).
  double gauge(const std::string& name) {
    httplib::Client http{"127.0.0.1", metrics_port};
    auto res = http.Get("/metrics");
    if (!res || res->status != 200)
      return -1;
    std::istringstream lines{res->body};
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with(name + "{")
          && line.find("queue=\"shared\"") != std::string::npos)
        return std::stod(line.substr(line.rfind(' ') + 1));
    return -1;
  }

  // Waits (bounded) until gauge `name` reads `value`.
  bool gauge_reaches(const std::string& name, double value,
                     std::chrono::seconds timeout = 20s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (gauge(name) == value)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

// The test's own view of the queue, through the master at `target`.
struct shared_queue {
  graph g;
  operation enqueue;
  output value;
  output dequeue;
  output size;

  shared_queue() {
    auto as_default = g.as_default();
    device_scope on_ps{"/job:ps/task:0"};
    fifo_queue q{1, {dtype::float32}, {tensor_shape{}}, "shared"};
    auto v = placeholder(dtype::float32, {}, "v");
    value = v;
    enqueue = q.enqueue({v});
    dequeue = q.dequeue().front();
    size = q.size();
  }

  void put(session& sess, float v) {
    sess.run(enqueue, {{value, tensor::scalar(v)}});
  }
};

child_process start_client(const std::string& target,
                           std::vector<std::string> args) {
  std::vector<std::string> argv{queue_client_path, target};
  argv.insert(argv.end(), args.begin(), args.end());
  return child_process{argv};
}

} // namespace

TEST_CASE("owners: a consumer killed or silent while its dequeue waits on "
          "the ps takes no element",
          "[owners][queue]") {
  struct variant {
    const char* owner;
    int sig;
  };
  auto v = GENERATE(variant{"client", SIGKILL}, variant{"client", SIGSTOP},
                    variant{"master", SIGKILL}, variant{"master", SIGSTOP});
  INFO(v.owner << " " << strsignal(v.sig));
  owners_cluster c;
  auto client = start_client(c.nodes.target("worker", 0), {"dequeue"});
  REQUIRE(c.gauge_reaches("actorflow_queue_blocked_dequeues", 1));
  auto& owner = std::string{v.owner} == "client"
                  ? client
                  : c.nodes.process("worker", 0);
  owner.send_signal(v.sig);
  // Withdrawn: at once for a death, after the heartbeat bound (4 s) for
  // silence; /metrics counts it.
  CHECK(c.gauge_reaches("actorflow_queue_blocked_dequeues", 0));
  CHECK(c.gauge("actorflow_queue_withdrawn_total") == 1);
  shared_queue q;
  // Through the ps's own master when the worker's is gone.
  auto via = std::string{v.owner} == "client" ? c.nodes.target("worker", 0)
                                              : c.nodes.target("ps", 0);
  session sess{via, bounded(), &q.g};
  q.put(sess, 1.0f);
  CHECK(sess.run(q.dequeue).scalar_value<float>() == 1.0f);
  CHECK(sess.run(q.size).scalar_value<int32_t>() == 0);
  owner.send_signal(SIGKILL);
}

TEST_CASE("owners: a producer killed while its enqueue waits on a full "
          "queue adds nothing",
          "[owners][queue]") {
  owners_cluster c;
  shared_queue q;
  session sess{c.nodes.target("worker", 0), bounded(), &q.g};
  q.put(sess, 1.0f);
  auto client = start_client(c.nodes.target("worker", 0), {"enqueue", "9"});
  REQUIRE(c.gauge_reaches("actorflow_queue_blocked_enqueues", 1));
  client.send_signal(SIGKILL);
  CHECK(c.gauge_reaches("actorflow_queue_blocked_enqueues", 0));
  CHECK(sess.run(q.dequeue).scalar_value<float>() == 1.0f);
  CHECK(sess.run(q.size).scalar_value<int32_t>() == 0);
  q.put(sess, 2.0f);
  CHECK(sess.run(q.dequeue).scalar_value<float>() == 2.0f);
}

TEST_CASE("owners: a silent ps that resumes runs no step its master "
          "reported failed: no update applied, no element taken",
          "[owners][failures]") {
  local_cluster nodes{node_path, {{"local", 2}}, captured()};
  graph g;
  auto as_default = g.as_default();
  variable v;
  operation increment;
  output dequeue;
  operation enqueue;
  output size;
  {
    device_scope pin{"/job:local/task:1"};
    v = variable{tensor::scalar(0.0f), named("v")};
    increment = v.assign_add(1.0f).op();
    fifo_queue q{4, {dtype::float32}, {tensor_shape{}}, "silent"};
    enqueue = q.enqueue({constant(7.0f)});
    dequeue = q.dequeue().front();
    size = q.size();
  }
  session sess{nodes.target("local", 0), bounded(), &g};
  sess.run(v.initializer());
  // Both steps registered on task 1 before it goes silent, so that their
  // next requests wait in its sockets while it is stopped.
  sess.run(increment);
  sess.run(enqueue);
  CHECK(sess.run(dequeue).scalar_value<float>() == 7.0f);
  sess.run(enqueue);
  auto& task1 = nodes.process("local", 1);
  task1.send_signal(SIGSTOP);
  REQUIRE(wait_until_stopped(task1.pid()));
  run_options options;
  options.timeout_in_ms = 20000;
  // Reported failed after the heartbeat bound (4 s), each.
  auto added = error_of([&] { sess.run(increment, {}, options); });
  auto taken = error_of([&] { sess.run(dequeue, {}, options); });
  task1.send_signal(SIGCONT);
  REQUIRE(added);
  CHECK(added->code() == error_code::unavailable);
  REQUIRE(taken);
  CHECK(taken->code() == error_code::unavailable);
  // The task came back: the session goes on (a read reconnects), and
  // neither failed step ran there.
  std::optional<op_error> read_err;
  float value = -1;
  auto until = std::chrono::steady_clock::now() + 10s;
  do {
    read_err = error_of(
      [&] { value = sess.run(v, {}, options).scalar_value<float>(); });
  } while (read_err && std::chrono::steady_clock::now() < until);
  REQUIRE_FALSE(read_err);
  CHECK(value == 1.0f);
  CHECK(sess.run(size, {}, options).scalar_value<int32_t>() == 1);
  CHECK(sess.run(dequeue, {}, options).scalar_value<float>() == 7.0f);
}
