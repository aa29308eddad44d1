// The master / worker / executor step protocol under CAF's deterministic
// test coordinator (caf/scheduler/test_coordinator.hpp, what
// caf/test/dsl.hpp drives): every message is one job the test runs in the
// order it chooses, and time moves only when the test advances it. Each
// case picks interleavings that threads would produce only by chance:
// concurrent first runs of one signature, a reply racing a deadline, a
// cancellation racing completion, a worker lost during registration.

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "common/test_system.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/queue_ops.hpp"

using namespace actorflow;
using actorflow::testing::deterministic;

namespace {

constexpr const char* task0 = "/job:localhost/replica:0/task:0";
constexpr const char* device0 = "/job:localhost/replica:0/task:0/device:CPU:0";

/// What a client actor got back: one response, or a CAF error.
struct answer {
  std::vector<run_step_response> responses;
  std::vector<std::string> errors;
  size_t count() const {
    return responses.size() + errors.size();
  }
};

/// One in-process task (master and worker) in a system whose scheduler is
/// the test's: nothing runs until the test runs it.
class protocol_fixture : public actorflow::testing::coordinated_system {
public:
  protocol_fixture() {
    task_options opts;
    opts.job = "localhost";
    opts.task = 0;
    opts.cluster[task0] = "";
    master_ = caf::actor_cast<master_actor>(spawn_task(sys_, opts));
    // The worker, and a session, with every job run in order.
    auto worker = std::make_shared<worker_actor>();
    auto client = sys_.spawn([m = master_, worker](caf::event_based_actor* self) {
      self->request(m, caf::infinite, get_worker_atom_v)
        .then([worker](worker_actor& w) { *worker = w; });
    });
    drain();
    worker_ = *worker;
    REQUIRE(worker_);
    auto handle = std::make_shared<std::string>();
    sys_.spawn([m = master_, handle](caf::event_based_actor* self) {
      self->request(m, caf::infinite, create_session_atom_v, session_config{})
        .then([handle](std::string& h) { *handle = h; });
    });
    drain();
    session_ = *handle;
    REQUIRE_FALSE(session_.empty());
  }

  ~protocol_fixture() {
    caf::anon_send_exit(master_, caf::exit_reason::user_shutdown);
    drain();
  }

  /// Runs jobs until none is left; time does not move.
  /// Runs jobs until only `who`'s is left (or none): everything else
  /// happens while `who`'s messages wait.
  template <class Handle>
  void drain_except(const Handle& who) {
    auto* held = dynamic_cast<caf::resumable*>(
      caf::actor_cast<caf::abstract_actor*>(who));
    sched_.run_jobs_filtered([held](caf::resumable* job) {
      return job != held;
    });
  }

  /// Runs one message of `who`; false when it has none queued.
  template <class Handle>
  bool step(const Handle& who) {
    if (!sched_.prioritize(who))
      return false;
    sched_.run_once();
    return true;
  }

  /// Moves the clock by `d`, firing what falls due (delayed messages are
  /// then queued; nothing runs).
  void advance(caf::timespan d) {
    sched_.advance_time(d);
  }

  /// A run of `g` with `fetches` (and `feeds`), as a session sends it (the
  /// whole graph as the delta: the master skips what it has).
  run_step_request request(const graph& g, std::vector<std::string> fetches,
                           std::vector<std::string> targets = {},
                           std::vector<std::pair<output, tensor>> feeds = {},
                           int64_t timeout_ms = 0) const {
    run_step_request req;
    req.session_handle = session_;
    req.fetches = std::move(fetches);
    req.targets = std::move(targets);
    for (auto& [out, value] : feeds) {
      req.feed_names.push_back(out.name());
      req.feed_values.push_back(value);
    }
    graph_def delta;
    delta.seed = g.seed();
    delta.nodes = g.def().nodes;
    req.graph_delta = to_bytes(delta);
    req.graph_base = 0;
    req.options.timeout_in_ms = timeout_ms;
    return req;
  }

  /// Sends `req` from a client actor of its own, which is run once so that
  /// the request waits in the master's mailbox when this returns.
  std::shared_ptr<answer> send(run_step_request req) {
    auto out = std::make_shared<answer>();
    auto client = sys_.spawn(
      [m = master_, out, req = std::move(req)](caf::event_based_actor* self) {
        self->request(m, caf::infinite, run_step_atom_v, req)
          .then(
            [out](run_step_response& resp) {
              out->responses.push_back(std::move(resp));
            },
            [out](caf::error& err) {
              out->errors.push_back(caf::to_string(err));
            });
      });
    REQUIRE(step(client));
    return out;
  }

  /// Closes the session from a client actor (run once, as send).
  std::shared_ptr<status> close_session() {
    auto out = std::make_shared<status>(error_code::unknown, "no reply");
    auto client = sys_.spawn([m = master_, out,
                              h = session_](caf::event_based_actor* self) {
      self->request(m, caf::infinite, close_session_atom_v, h)
        .then([out](status& st) { *out = st; });
    });
    REQUIRE(step(client));
    return out;
  }

  task_stats stats() {
    auto out = std::make_shared<task_stats>();
    sys_.spawn([m = master_, out](caf::event_based_actor* self) {
      self->request(m, caf::infinite, get_stats_atom_v)
        .then([out](task_stats& s) { *out = s; });
    });
    drain();
    return *out;
  }

  const master_actor& master() const noexcept {
    return master_;
  }

  const worker_actor& worker() const noexcept {
    return worker_;
  }

private:
  master_actor master_;
  worker_actor worker_;
  std::string session_;
};

/// A FIFO queue on the task, in the default graph: an enqueue of 5.0 and
/// a dequeue.
std::pair<operation, output> queue_of_fives() {
  fifo_queue q{4, {dtype::float32}, {tensor_shape{}}, "q"};
  return {q.enqueue({constant(5.0f)}), q.dequeue().front()};
}

void require_value(const answer& a, float expected) {
  REQUIRE(a.count() == 1);
  REQUIRE(a.errors.empty());
  auto& resp = a.responses.front();
  INFO(resp.result.to_string());
  REQUIRE(resp.result.ok());
  REQUIRE(resp.outputs.size() == 1);
  CHECK(resp.outputs[0].scalar_value<float>() == expected);
}

} // namespace

TEST_CASE("step protocol: concurrent first runs of one signature share one "
          "registration, whatever arrives between them",
          "[step_protocol]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {}, "x");
  auto y = x * 3.0f;
  constexpr int runs = 5;
  // `before`: how many of the later runs reach the master before the
  // worker's answer to the first run's registration does.
  for (int before = 0; before < runs; ++before) {
    DYNAMIC_SECTION("runs arriving before the registration's answer: "
                    << before) {
      protocol_fixture f;
      std::vector<std::shared_ptr<answer>> answers;
      auto run = [&](int i) {
        answers.push_back(f.send(f.request(
          g, {y.name()}, {}, {{x, tensor::scalar(static_cast<float>(i))}})));
      };
      run(0);
      // The master plans and asks its worker to register the partition.
      REQUIRE(f.step(f.master()));
      for (int i = 1; i <= before; ++i)
        run(i);
      // The worker answers; its reply queues behind the runs so far.
      REQUIRE(f.step(f.worker()));
      for (int i = before + 1; i < runs; ++i)
        run(i);
      f.drain();
      for (int i = 0; i < runs; ++i) {
        INFO("run " << i);
        require_value(*answers[static_cast<size_t>(i)], 3.0f * i);
      }
      // One partition registered, one executor, for all of them.
      CHECK(f.stats().partitions == 1);
      // And the plan is cached: a later run registers nothing.
      auto later = f.send(f.request(g, {y.name()}, {},
                                    {{x, tensor::scalar(7.0f)}}));
      f.drain();
      require_value(*later, 21.0f);
      CHECK(f.stats().partitions == 1);
    }
  }
}

TEST_CASE("step protocol: a step's deadline and its reply race, and the "
          "client gets exactly one answer either way",
          "[step_protocol]") {
  graph g;
  auto as_default = g.as_default();
  auto [enqueue, dequeue] = queue_of_fives();
  protocol_fixture f;

  SECTION("the deadline first: DeadlineExceeded naming the device; the "
          "element enqueued later is not swallowed") {
    auto waiting = f.send(f.request(g, {dequeue.name()}, {}, {}, 100));
    f.drain(); // the dequeue waits in the queue
    CHECK(waiting->count() == 0);
    f.advance(std::chrono::milliseconds(150));
    f.drain();
    REQUIRE(waiting->count() == 1);
    REQUIRE(waiting->responses.size() == 1);
    auto& result = waiting->responses[0].result;
    CHECK(result.code() == error_code::deadline_exceeded);
    CHECK_THAT(result.message(), Catch::Contains(device0));
    // The aborted dequeue left the queue: the next one gets the element.
    auto enq = f.send(f.request(g, {}, {enqueue.name()}));
    f.drain();
    REQUIRE(enq->responses.size() == 1);
    REQUIRE(enq->responses[0].result.ok());
    auto again = f.send(f.request(g, {dequeue.name()}, {}, {}, 100));
    f.drain();
    require_value(*again, 5.0f);
    // Its deadline passes after it answered: nothing more happens.
    f.advance(std::chrono::milliseconds(150));
    f.drain();
    CHECK(again->count() == 1);
  }

  SECTION("the reply first: the value, and the deadline's check finds "
          "nothing") {
    auto waiting = f.send(f.request(g, {dequeue.name()}, {}, {}, 100));
    f.drain();
    auto enq = f.send(f.request(g, {}, {enqueue.name()}));
    f.drain();
    require_value(*waiting, 5.0f);
    f.advance(std::chrono::milliseconds(150));
    f.drain();
    CHECK(waiting->count() == 1);
    REQUIRE(enq->responses.size() == 1);
    CHECK(enq->responses[0].result.ok());
  }
}

TEST_CASE("step protocol: closing the session races a step's completion, with "
          "one answer either way, and the session is gone",
          "[step_protocol]") {
  graph g;
  auto as_default = g.as_default();
  auto [enqueue, dequeue] = queue_of_fives();
  protocol_fixture f;

  SECTION("closed while the step waits: it ends Cancelled or Aborted") {
    auto waiting = f.send(f.request(g, {dequeue.name()}, {}, {}, 0));
    f.drain();
    auto closed = f.close_session();
    f.drain();
    CHECK(closed->ok());
    REQUIRE(waiting->count() == 1);
    if (!waiting->responses.empty()) {
      auto code = waiting->responses[0].result.code();
      INFO(waiting->responses[0].result.to_string());
      CHECK((code == error_code::cancelled || code == error_code::aborted));
    }
  }

  SECTION("closed after the step completed, before or after its answer "
          "reached the master: the client gets the value") {
    // Warm up: both plans registered, one element left in the queue.
    for (int i = 0; i < 2; ++i) {
      auto enq = f.send(f.request(g, {}, {enqueue.name()}));
      f.drain();
      REQUIRE(enq->responses.size() == 1);
      REQUIRE(enq->responses[0].result.ok());
    }
    auto warm = f.send(f.request(g, {dequeue.name()}));
    f.drain();
    require_value(*warm, 5.0f);
    auto close_first = GENERATE(true, false);
    INFO("close queued before the executor's answer: " << close_first);
    auto done = f.send(f.request(g, {dequeue.name()}));
    REQUIRE(f.step(f.master())); // the step starts on its executor
    std::shared_ptr<status> closed;
    if (close_first)
      closed = f.close_session();
    // The executor runs the dequeue and answers; the master waits.
    f.drain_except(f.master());
    if (!close_first)
      closed = f.close_session();
    f.drain();
    CHECK(closed->ok());
    require_value(*done, 5.0f);
  }

  // The session is gone either way.
  auto after = f.send(f.request(g, {}, {enqueue.name()}));
  f.drain();
  REQUIRE(after->responses.size() == 1);
  CHECK(after->responses[0].result.code() == error_code::aborted);
}

TEST_CASE("step protocol: a registration the worker cannot answer fails "
          "the run and the run waiting for the same plan, once each",
          "[step_protocol]") {
  graph g;
  auto as_default = g.as_default();
  auto y = constant(2.0f) * 4.0f;
  protocol_fixture f;
  // The worker is gone before it could register anything (a worker that
  // dies with the request in its mailbox answers nothing either: CAF
  // bounces the request, as here).
  caf::anon_send_exit(f.worker(), caf::exit_reason::kill);
  f.drain();
  auto first = f.send(f.request(g, {y.name()}));
  auto second = f.send(f.request(g, {y.name()}));
  // The first plans and asks the worker; the bounce queues behind the
  // second, which then waits for the same plan.
  REQUIRE(f.step(f.master()));
  REQUIRE(f.step(f.master()));
  CHECK(first->count() == 0);
  CHECK(second->count() == 0);
  f.drain();
  for (auto& a : {first, second}) {
    REQUIRE(a->count() == 1);
    REQUIRE(a->responses.size() == 1);
    INFO(a->responses[0].result.to_string());
    CHECK_FALSE(a->responses[0].result.ok());
    CHECK_THAT(a->responses[0].result.message(), Catch::Contains(device0));
  }
  CHECK(f.stats().partitions == 0);
}
