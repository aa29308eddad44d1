// tf.train.Coordinator, tf.train.QueueRunner and start_queue_runners
// (TF's coordinator_test.py and queue_runner_test.py, on private
// in-process sessions). Every wait has a deadline; sessions are declared
// before coordinators so that threads end while their session lives.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

/// A step deadline: a run that would wait forever fails DeadlineExceeded.
run_options within(int64_t ms = 10000) {
  run_options opts;
  opts.timeout_in_ms = ms;
  return opts;
}

std::exception_ptr op_exception(error_code code, std::string msg) {
  return std::make_exception_ptr(op_error(code, std::move(msg)));
}

error_code code_of(const std::optional<op_error>& e) {
  return e ? e->code() : error_code::ok;
}

error_code code_of(const std::exception_ptr& ex) {
  return code_of(error_of([&] { std::rethrow_exception(ex); }));
}

/// What a test thread waits on until the test releases it; it gives up
/// after `limit`, so that nothing keeps running if the test fails.
class gate {
public:
  void release() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      open_ = true;
    }
    cv_.notify_all();
  }
  void wait(std::chrono::milliseconds limit = 30s) {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait_for(lock, limit, [this] { return open_; });
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  bool open_ = false;
};

} // namespace

// -- coordinator --------------------------------------------------------------

TEST_CASE("coordinator: request_stop, should_stop, wait_for_stop and "
          "clear_stop (TF testStopAPI)",
          "[coordinator]") {
  coordinator coord;
  CHECK_FALSE(coord.should_stop());
  CHECK_FALSE(coord.wait_for_stop(10ms));
  coord.request_stop();
  CHECK(coord.should_stop());
  CHECK(coord.wait_for_stop(10ms));
  CHECK(coord.wait_for_stop());
  coord.request_stop(); // idempotent
  CHECK(coord.should_stop());
  coord.clear_stop();
  CHECK_FALSE(coord.should_stop());
  CHECK_FALSE(coord.wait_for_stop(10ms));
}

TEST_CASE("coordinator: wait_for_stop wakes up when another thread "
          "requests a stop",
          "[coordinator]") {
  coordinator coord;
  std::thread stopper{[&] { coord.request_stop(); }};
  CHECK(coord.wait_for_stop(10s));
  stopper.join();
}

TEST_CASE("coordinator: the first exception is kept and join rethrows it",
          "[coordinator]") {
  coordinator coord;
  coord.request_stop(op_exception(error_code::invalid_argument, "first"));
  coord.request_stop(op_exception(error_code::internal, "second"));
  CHECK(coord.should_stop());
  auto err = error_of([&] { coord.join(1s); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Catch::Contains("first"));
  CHECK(coord.joined());
  CHECK(code_of(error_of([&] { coord.raise_requested_exception(); }))
        == error_code::invalid_argument);

  SECTION("an exception after a plain stop request is not recorded") {
    coordinator late;
    late.request_stop();
    late.request_stop(op_exception(error_code::invalid_argument, "late"));
    CHECK_FALSE(late.requested_exception());
    CHECK_NOTHROW(late.join(1s));
  }
  SECTION("run_guarded reports what its body throws") {
    coordinator guarded;
    guarded.run_guarded([] { throw std::runtime_error("boom"); });
    CHECK(guarded.should_stop());
    CHECK_THROWS_WITH(guarded.join(1s), "boom");
  }
  SECTION("run_guarded lets a body that returns normally be") {
    coordinator guarded;
    bool ran = false;
    guarded.run_guarded([&] { ran = true; });
    CHECK(ran);
    CHECK_FALSE(guarded.should_stop());
  }
}

TEST_CASE("coordinator: OutOfRange is a clean stop (clean_stop_exception_"
          "types)",
          "[coordinator]") {
  coordinator coord;
  coord.request_stop(op_exception(error_code::out_of_range, "End of input"));
  CHECK(coord.should_stop());
  CHECK_FALSE(coord.requested_exception());
  CHECK_NOTHROW(coord.raise_requested_exception());
  CHECK_NOTHROW(coord.join(1s));

  SECTION("with no clean-stop codes, OutOfRange is an error") {
    coordinator strict{std::vector<error_code>{}};
    strict.request_stop(op_exception(error_code::out_of_range, "End"));
    CHECK(code_of(error_of([&] { strict.join(1s); }))
          == error_code::out_of_range);
  }
  SECTION("other codes can be made clean") {
    coordinator custom{std::vector<error_code>{error_code::cancelled}};
    custom.request_stop(op_exception(error_code::cancelled, "cancelled"));
    CHECK(custom.should_stop());
    CHECK_NOTHROW(custom.join(1s));
  }
}

TEST_CASE("coordinator: an exception reported after join is rethrown by "
          "request_stop until clear_stop (TF testRequestStopRaisesIfJoined)",
          "[coordinator]") {
  coordinator coord;
  coord.join(1s); // nothing registered, no stop: returns at once
  CHECK(coord.joined());
  CHECK_THROWS_WITH(coord.request_stop(std::make_exception_ptr(
                      std::runtime_error("Too late"))),
                    "Too late");
  coord.clear_stop();
  CHECK_FALSE(coord.joined());
  coord.request_stop(std::make_exception_ptr(std::runtime_error("After clear")));
  CHECK_THROWS_WITH(coord.join(1s), "After clear");
}

TEST_CASE("coordinator: join waits for threads that end on their own",
          "[coordinator]") {
  coordinator coord;
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i)
    coord.start_thread("", [&] { ++ran; });
  std::thread raw{[&] {
    ++ran;
    coord.thread_finished();
  }};
  coord.register_thread(std::move(raw), "Raw");
  CHECK_NOTHROW(coord.join(10s));
  CHECK(ran == 4);
  CHECK_FALSE(coord.should_stop());
}

TEST_CASE("coordinator: an exception escaping a thread stops the others and "
          "join rethrows it",
          "[coordinator]") {
  coordinator coord;
  std::atomic<bool> saw_stop{false};
  coord.start_thread("Waiter", [&] { saw_stop = coord.wait_for_stop(30s); });
  coord.start_thread("Failer", [] {
    throw op_error(error_code::invalid_argument, "bad input");
  });
  auto err = error_of([&] { coord.join(10s); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Catch::Contains("bad input"));
  CHECK(saw_stop);
}

TEST_CASE("coordinator: join names the threads still running after the "
          "grace period, and the destructor joins them",
          "[coordinator]") {
  gate stuck;
  std::atomic<bool> stuck_ended{false};
  {
    coordinator coord;
    coord.start_thread("QuickThread", [] {});
    CHECK_NOTHROW(coord.join(10s)); // forgets QuickThread
    coord.clear_stop();
    coord.start_thread("StuckThread", [&] {
      stuck.wait();
      stuck_ended = true;
    });
    std::thread raw{[&] {
      stuck.wait();
      coord.thread_finished();
    }};
    coord.register_thread(std::move(raw), "RawThread");
    coord.request_stop();
    auto err = error_of([&] { coord.join(50ms); });
    REQUIRE(err);
    CHECK(err->code() == error_code::internal);
    CHECK_THAT(err->what(),
               Catch::Contains(
                 "Coordinator stopped with threads still running: "));
    CHECK_THAT(err->what(), Catch::Contains("StuckThread"));
    CHECK_THAT(err->what(), Catch::Contains("RawThread"));
    CHECK_THAT(err->what(), !Catch::Contains("QuickThread"));

    SECTION("ignore_live_threads only reports them") {
      coord.clear_stop();
      coord.start_thread("AlsoStuck", [&] { stuck.wait(); });
      coord.request_stop();
      CHECK_NOTHROW(coord.join(10ms, true));
    }
    SECTION("a recorded exception takes precedence over stragglers") {
      coord.clear_stop();
      coord.start_thread("AlsoStuck", [&] { stuck.wait(); });
      coord.request_stop(op_exception(error_code::aborted, "aborted"));
      CHECK(code_of(error_of([&] { coord.join(10ms); }))
            == error_code::aborted);
    }
    stuck.release();
    // ~coordinator joins the threads it still owns.
  }
  CHECK(stuck_ended);
}

// -- queue_runner -------------------------------------------------------------

TEST_CASE("queue_runner: fills a queue until the coordinator stops it, and the "
          "cancel op unblocks an enqueue waiting on a full queue",
          "[queue_runner][engine]") {
  graph g;
  auto as_default = g.as_default();
  variable counter{0.0f, named("counter")};
  fifo_queue q{3, {dtype::float32}, {tensor_shape{}}};
  auto enqueue = q.enqueue({counter.assign_add(1.0)});
  auto x = q.dequeue().front();
  auto size = q.size();
  auto closed = q.is_closed();
  auto init = global_variables_initializer();
  queue_runner qr{q, {enqueue}};
  CHECK(qr.name() == "fifo_queue");
  CHECK(qr.close_op().name() == "fifo_queue_Close");
  CHECK(qr.cancel_op().name() == "fifo_queue_Close_1");
  session sess{bounded(), &g};
  sess.run(init);
  coordinator coord;
  CHECK(qr.create_threads(sess, &coord).empty());
  // One thread: the counter's values arrive in order.
  for (int i = 1; i <= 10; ++i)
    CHECK(sess.run(x, {}, within()).scalar_value<float>()
          == static_cast<float>(i));
  // Let the runner fill the queue and block on the next enqueue.
  // The queue tells the client nothing when it fills: poll its size
  // (bounded by the deadline).
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (sess.run(size, {}, within()).scalar_value<int32_t>() < 3
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  REQUIRE(sess.run(size, {}, within()).scalar_value<int32_t>() == 3);
  coord.request_stop();
  // Without the cancel op the enqueue would stay blocked past the grace
  // period (the session's 30 s deadline), and join would throw.
  CHECK_NOTHROW(coord.join(10s));
  CHECK(sess.run(closed).scalar_value<bool>());
  CHECK(qr.exceptions_raised().empty());
  // Closing keeps what was enqueued.
  for (int i = 11; i <= 13; ++i)
    CHECK(sess.run(x, {}, within()).scalar_value<float>()
          == static_cast<float>(i));
  CHECK(code_of(error_of([&] { sess.run(x, {}, within()); }))
        == error_code::out_of_range);
}

TEST_CASE("queue_runner: an enqueue failing with InvalidArgument (unfed "
          "placeholder) stops the coordinator and join rethrows it",
          "[queue_runner][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{5, {dtype::float32}, {tensor_shape{}}};
  auto input = placeholder(dtype::float32, {}, "input");
  auto enqueue = q.enqueue({input});
  queue_runner qr{q, {enqueue}};
  session sess{bounded(), &g};

  SECTION("with a coordinator") {
    coordinator coord;
    qr.create_threads(sess, &coord);
    CHECK(coord.wait_for_stop(30s));
    auto err = error_of([&] { coord.join(10s); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->what(),
               Catch::Contains(
                 "You must feed a value for placeholder tensor 'input'"));
    CHECK(qr.exceptions_raised().empty()); // they went to the coordinator
  }
  SECTION("without a coordinator, exceptions_raised keeps it") {
    auto threads = qr.create_threads(sess);
    REQUIRE(threads.size() == 1);
    for (auto& t : threads)
      t.join();
    auto errors = qr.exceptions_raised();
    REQUIRE(errors.size() == 1);
    CHECK(code_of(errors.front()) == error_code::invalid_argument);
  }
}

TEST_CASE("queue_runner: OutOfRange from an upstream queue ends the threads "
          "and the last one closes the queue",
          "[queue_runner][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue source{10, {dtype::int32}, {tensor_shape{}}, "", "source"};
  fifo_queue target{10, {dtype::int32}, {tensor_shape{}}, "", "target"};
  auto x = placeholder(dtype::int32, {}, "x");
  auto fill = source.enqueue({x});
  auto close_source = source.close();
  auto e1 = target.enqueue({source.dequeue().front()});
  auto e2 = target.enqueue({source.dequeue().front()});
  auto take = target.dequeue().front();
  queue_runner qr{target, {e1, e2}};
  session sess{bounded(), &g};
  for (int32_t v : {1, 2, 3})
    sess.run(fill, {{x, tensor::scalar(v)}});
  sess.run(close_source);
  coordinator coord;
  qr.create_threads(sess, &coord);
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i)
    got.push_back(sess.run(take, {}, within()).scalar_value<int32_t>());
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<int32_t>{1, 2, 3});
  // DeadlineExceeded if the runner had not closed the target queue.
  CHECK(code_of(error_of([&] { sess.run(take, {}, within()); }))
        == error_code::out_of_range);
  // A closed queue is not an error and does not stop the coordinator.
  CHECK_FALSE(coord.should_stop());
  coord.request_stop();
  CHECK_NOTHROW(coord.join(10s));
  CHECK(qr.exceptions_raised().empty());
}

TEST_CASE("queue_runner: without a coordinator the caller joins the "
          "threads, and no second set starts while they run",
          "[queue_runner][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{2, {dtype::float32}, {tensor_shape{}}};
  auto enqueue = q.enqueue({constant(1.0f)});
  queue_runner qr{q, {enqueue}};
  auto cancel = qr.cancel_op();
  session sess{bounded(), &g};
  auto threads = qr.create_threads(sess);
  REQUIRE(threads.size() == 1);
  // The thread enqueues until cancelled: it is still running.
  CHECK(qr.create_threads(sess).empty());
  sess.run(cancel, {}, within());
  for (auto& t : threads)
    t.join();
  // Without a coordinator nothing stops the loop but an error: the enqueue
  // on a closed queue fails Cancelled, as in TF.
  auto errors = qr.exceptions_raised();
  REQUIRE(errors.size() == 1);
  CHECK(code_of(errors.front()) == error_code::cancelled);
}

TEST_CASE("queue_runner: construction errors", "[queue_runner]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{2, {dtype::float32}, {tensor_shape{}}};
  auto enqueue = q.enqueue({constant(1.0f)});
  auto no_queue = error_of([&] { queue_runner{queue_base{}, {enqueue}}; });
  CHECK(code_of(no_queue) == error_code::invalid_argument);
  CHECK_THAT(no_queue->what(),
             Catch::Contains("Must provide queue and enqueue_ops."));
  CHECK(code_of(error_of([&] { queue_runner{q, {}}; }))
        == error_code::invalid_argument);
  graph other;
  operation foreign;
  {
    auto other_default = other.as_default();
    foreign = no_op("foreign");
  }
  CHECK(code_of(error_of([&] { queue_runner{q, {foreign}}; }))
        == error_code::invalid_argument);
  queue_runner qr{q, {enqueue}};
  session elsewhere{bounded(), &other};
  CHECK(code_of(error_of([&] { qr.create_threads(elsewhere); }))
        == error_code::invalid_argument);
}

TEST_CASE("queue_runner: to_def, add_queue_runner and start_queue_runners",
          "[queue_runner][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{4, {dtype::float32}, {tensor_shape{}}, "", "input_queue"};
  auto e1 = q.enqueue({constant(1.0f)});
  auto e2 = q.enqueue({constant(2.0f)});
  auto x = q.dequeue().front();
  {
    queue_runner qr{q, {e1, e2}};
    auto def = qr.to_def();
    CHECK(def.queue_name == "input_queue");
    CHECK(def.enqueue_op_names
          == std::vector<std::string>{"input_queue_enqueue",
                                      "input_queue_enqueue_1"});
    CHECK(def.close_op_name == "input_queue_Close");
    CHECK(def.cancel_op_name == "input_queue_Close_1");
    add_queue_runner(qr);
  }
  REQUIRE(g.queue_runners().size() == 1);
  auto& def = g.queue_runners().front();
  CHECK(def.cancel_op_name == "input_queue_Close_1");
  // Rebuilt from the record (TF's from_proto).
  queue_runner rebuilt{g, def};
  CHECK(rebuilt.name() == "input_queue");
  CHECK(rebuilt.enqueue_ops().size() == 2);
  CHECK(rebuilt.close_op().name() == "input_queue_Close");
  CHECK(rebuilt.to_def().enqueue_op_names == def.enqueue_op_names);
  auto bad = def;
  bad.close_op_name = "no_such_op";
  auto missing = error_of([&] { queue_runner{g, bad}; });
  CHECK(code_of(missing) == error_code::not_found);
  CHECK_THAT(missing->what(), Catch::Contains("no_such_op"));

  session sess{bounded(), &g};
  coordinator coord;
  // Two enqueue threads and the cancel thread; the runner objects built
  // here live on in their threads.
  CHECK(start_queue_runners(sess, coord) == 3);
  int ones = 0;
  int twos = 0;
  for (int i = 0; i < 20; ++i) {
    auto v = sess.run(x, {}, within()).scalar_value<float>();
    (v == 1.0f ? ones : twos) += 1;
    CHECK((v == 1.0f || v == 2.0f));
  }
  CHECK(ones + twos == 20);
  coord.request_stop();
  CHECK_NOTHROW(coord.join(10s));
}
