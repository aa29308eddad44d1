// Queues end to end: graph ops, the executor and queue actors on a task
// (tf_semantics §7; seed 004's printouts, the book's slips corrected).

#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <thread>

#include "actorflow/actors/task.hpp"
#include "actorflow/client/runtime.hpp"
#include "actorflow/graph/parsing_ops.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

tensor matrix(std::vector<float> xs, int64_t rows, int64_t cols) {
  return tensor::from_vector(std::move(xs), tensor_shape{rows, cols});
}

error_code code_of(const std::optional<op_error>& e) {
  return e ? e->code() : error_code::ok;
}

} // namespace

TEST_CASE("queue: enqueue_many then dequeue_many keeps FIFO order",
          "[queue][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{2}}};
  auto input = placeholder(dtype::float32, {-1, 2}, "input");
  auto enqueue = q.enqueue_many({input});
  auto batch = q.dequeue_many(2);
  auto size = q.size();
  session sess{bounded(), &g};
  sess.run(enqueue, {{input, matrix({1, 2, 3, 4, 5, 6}, 3, 2)}});
  CHECK(sess.run(size).scalar_value<int32_t>() == 3);
  // TensorFlow gives [[1,2],[3,4]] (the book printed [[1,2],[4,5]]).
  auto first = sess.run(batch[0]);
  CHECK(first == matrix({1, 2, 3, 4}, 2, 2));
  CHECK(sess.run(size).scalar_value<int32_t>() == 1);
}

TEST_CASE("queue: a dequeue on an empty queue honours the run deadline "
          "and leaves the queue usable (case 83)",
          "[queue][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  session sess{bounded(), &g};
  run_options quick;
  quick.timeout_in_ms = 200;
  auto err = error_of([&] { sess.run(dequeue[0], {}, quick); });
  CHECK(code_of(err) == error_code::deadline_exceeded);
  sess.run(enqueue, {{x, tensor::scalar(7.0f)}});
  CHECK(sess.run(dequeue[0]).scalar_value<float>() == 7.0f);
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: a step with a shorter deadline than one already waiting "
          "times out first, and each names the device it waited for",
          "[queue][engine]") {
  // The master checks step deadlines with one timer at a time
  // (deadline_table): a later step with an earlier deadline must arm its
  // own check, not wait for the first step's.
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}};
  auto dequeue = q.dequeue();
  session sess{bounded(), &g};
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  auto slow = std::async(std::launch::async, [&] {
    run_options patient;
    patient.timeout_in_ms = 4000;
    auto err = error_of([&] { sess.run(dequeue[0], {}, patient); });
    return std::make_pair(code_of(err), clock::now());
  });
  // Let the slow step start waiting on the queue first: the session gives
  // no sign that a step is waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run_options quick;
  quick.timeout_in_ms = 300;
  auto err = error_of([&] { sess.run(dequeue[0], {}, quick); });
  auto quick_done = clock::now();
  CHECK(code_of(err) == error_code::deadline_exceeded);
  REQUIRE(err);
  // TF's DirectSession text first (a private session), then the op and
  // the queue it waited for, and where (issue 34).
  CHECK(std::string{err->what()}
        == "DeadlineExceeded: Timed out waiting for notification (after "
           "300 ms) waiting for "
           "QueueDequeueV2 'fifo_queue_Dequeue' on "
           "/job:localhost/replica:0/task:0/device:CPU:0 (queue "
           "'fifo_queue')");
  CHECK(quick_done - start < std::chrono::milliseconds(3000));
  auto [slow_code, slow_done] = slow.get();
  CHECK(slow_code == error_code::deadline_exceeded);
  CHECK(slow_done - start >= std::chrono::milliseconds(3900));
}

TEST_CASE("queue: close, then dequeue drains and fails OutOfRange, enqueue "
          "fails Cancelled",
          "[queue][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::int32}, {tensor_shape{}}};
  auto x = placeholder(dtype::int32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  auto close = q.close();
  auto closed = q.is_closed();
  session sess{bounded(), &g};
  sess.run(enqueue, {{x, tensor::scalar(int32_t{1})}});
  CHECK_FALSE(sess.run(closed).scalar_value<bool>());
  sess.run(close);
  CHECK(sess.run(closed).scalar_value<bool>());
  CHECK(sess.run(dequeue[0]).scalar_value<int32_t>() == 1);
  auto drained = error_of([&] { sess.run(dequeue[0]); });
  CHECK(code_of(drained) == error_code::out_of_range);
  CHECK_THAT(drained->what(), Catch::Contains("is closed and has insufficient "
                                              "elements"));
  auto late = error_of(
    [&] { sess.run(enqueue, {{x, tensor::scalar(int32_t{2})}}); });
  CHECK(code_of(late) == error_code::cancelled);
}

TEST_CASE("queue: a blocked dequeue completes when another session "
          "enqueues through a shared_name",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}, "shared_q"};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  session consumer{srv.target(), bounded(), &g};
  session producer{srv.target(), bounded(), &g};
  auto result = std::async(std::launch::async,
                           [&] { return consumer.run(dequeue[0]); });
  // The dequeue waits inside the queue actor, not in a thread of ours.
  CHECK(result.wait_for(std::chrono::milliseconds(100))
        == std::future_status::timeout);
  producer.run(enqueue, {{x, tensor::scalar(3.5f)}});
  CHECK(result.get().scalar_value<float>() == 3.5f);
}

TEST_CASE("queue: without shared_name each session has its own queue "
          "(case 57)",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto size = q.size();
  session a{srv.target(), bounded(), &g};
  session b{srv.target(), bounded(), &g};
  a.run(enqueue, {{x, tensor::scalar(1.0f)}});
  CHECK(a.run(size).scalar_value<int32_t>() == 1);
  CHECK(b.run(size).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: closing a session cancels its blocked dequeue and loses "
          "no element",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}, "q_close"};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  auto blocked_session = std::make_unique<session>(srv.target(), bounded(),
                                                   &g);
  auto result = std::async(std::launch::async, [&] {
    return error_of([&] { blocked_session->run(dequeue[0]); });
  });
  CHECK(result.wait_for(std::chrono::milliseconds(100))
        == std::future_status::timeout);
  blocked_session->close();
  auto err = result.get();
  REQUIRE(err);
  CHECK((err->code() == error_code::cancelled
         || err->code() == error_code::aborted));
  // The element enqueued afterwards reaches the next consumer.
  session other{srv.target(), bounded(), &g};
  other.run(enqueue, {{x, tensor::scalar(9.0f)}});
  CHECK(other.run(dequeue[0]).scalar_value<float>() == 9.0f);
}

TEST_CASE("queue: a cancelled dequeue fails Cancelled, takes no element "
          "and leaves its session usable",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}, "q_cancel"};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  auto size = q.size();
  session sess{srv.target(), bounded(), &g};
  SECTION("from another thread") {
    step_cancellation cancel;
    cancel.poll_interval = std::chrono::milliseconds{10};
    auto result = std::async(std::launch::async, [&] {
      return error_of([&] { sess.run({dequeue[0]}, {}, {}, nullptr, &cancel); });
    });
    CHECK(result.wait_for(std::chrono::milliseconds(100))
          == std::future_status::timeout);
    cancel.cancel();
    auto err = result.get();
    CHECK(code_of(err) == error_code::cancelled);
  }
  SECTION("by its poll") {
    int polls = 0;
    step_cancellation cancel;
    cancel.poll_interval = std::chrono::milliseconds{10};
    cancel.poll = [&polls] { return ++polls == 3; };
    auto err = error_of([&] {
      sess.run({dequeue[0]}, {}, {}, nullptr, &cancel);
    });
    CHECK(code_of(err) == error_code::cancelled);
    CHECK(polls == 3);
    // Cancelled before it starts: the step never goes out.
    auto again = error_of([&] {
      sess.run({enqueue}, {{x, tensor::scalar(1.0f)}}, {}, nullptr, &cancel);
    });
    CHECK(code_of(again) == error_code::cancelled);
    CHECK(sess.run(size).scalar_value<int32_t>() == 0);
  }
  // The withdrawn dequeue took nothing: the next one gets both elements.
  sess.run(enqueue, {{x, tensor::scalar(7.0f)}});
  sess.run(enqueue, {{x, tensor::scalar(8.0f)}});
  CHECK(sess.run(dequeue[0]).scalar_value<float>() == 7.0f);
  CHECK(sess.run(dequeue[0]).scalar_value<float>() == 8.0f);
  CHECK(sess.run(size).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: bad input is InvalidArgument and changes nothing",
          "[queue][engine]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{2}}};
  auto x = placeholder(dtype::float32, {-1}, "x");
  auto enqueue = q.enqueue({x});
  auto size = q.size();
  session sess{bounded(), &g};
  auto err = error_of([&] {
    sess.run(enqueue, {{x, tensor::vec<float>({1, 2, 3})}});
  });
  CHECK(code_of(err) == error_code::invalid_argument);
  CHECK_THAT(err->what(), Catch::Contains("Shape mismatch in tuple "
                                          "component 0"));
  CHECK(sess.run(size).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: one shared_name with other shapes is InvalidArgument "
          "(case 96)",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue a{10, {dtype::float32}, {tensor_shape{2}}, "same_name"};
  fifo_queue b{10, {dtype::float32}, {tensor_shape{3}}, "same_name"};
  session sess{srv.target(), bounded(), &g};
  CHECK(sess.run(a.size()).scalar_value<int32_t>() == 0);
  auto err = error_of([&] { sess.run(b.size()); });
  CHECK(code_of(err) == error_code::invalid_argument);
  CHECK_THAT(err->what(), Catch::Contains("component shapes"));
  // The first queue is untouched.
  CHECK(sess.run(a.size()).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: a training set preloaded into a variable feeds a queue "
          "(seed 004's preloading)",
          "[queue][engine]") {
  graph g;
  auto as_default = g.as_default();
  // trainable = false and no collections, fed once through the
  // initializer, as seed 004 shows.
  auto data_initializer = placeholder(dtype::float32, {4, 2}, "data_init");
  variable_options opts;
  opts.name = "input_data";
  opts.trainable = false;
  opts.collections = std::vector<std::string>{};
  variable input_data{data_initializer, opts};
  CHECK(global_variables().empty());
  CHECK(trainable_variables().empty());
  fifo_queue q{10, {dtype::float32}, {tensor_shape{2}}};
  auto load = q.enqueue_many({input_data});
  auto batch = q.dequeue_many(3);
  session sess{bounded(), &g};
  auto data = tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8},
                                         tensor_shape{4, 2});
  sess.run(input_data.initializer(), {{data_initializer, data}});
  sess.run(load);
  CHECK(sess.run(batch[0])
        == tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, tensor_shape{3, 2}));
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 1);
}

TEST_CASE("queue: CSV lines decoded in a session feed a queue",
          "[queue][engine][parsing]") {
  graph g;
  auto as_default = g.as_default();
  auto lines = placeholder(dtype::string, {-1}, "lines");
  auto columns = decode_csv(lines, {tensor::vec<float>({0.0f}),
                                    tensor::vec<int32_t>({})});
  fifo_queue q{10, {dtype::float32, dtype::int32},
               {tensor_shape{}, tensor_shape{}}};
  auto load = q.enqueue_many(columns);
  auto batch = q.dequeue_many(2);
  session sess{bounded(), &g};
  sess.run(load, {{lines, tensor::vec<std::string>({"1.5,7", ",8"})}});
  auto got = sess.run({batch[0], batch[1]});
  CHECK(got[0] == tensor::vec<float>({1.5f, 0.0f}));
  CHECK(got[1] == tensor::vec<int32_t>({7, 8}));
  // A record without its required second field names the record.
  auto err = error_of(
    [&] { sess.run(load, {{lines, tensor::vec<std::string>({"2,1", "3,"})}}); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Catch::Contains("record 1"));
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 0);
}

TEST_CASE("queue: a container reset fails a blocked dequeue at once, the "
          "queue is new afterwards",
          "[queue][reset]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}, "q_reset"};
  auto x = placeholder(dtype::float32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue = q.dequeue();
  auto size = q.size();
  {
    session before{srv.target(), bounded(), &g};
    before.run(enqueue, {{x, tensor::scalar(1.0f)}});
    before.run(enqueue, {{x, tensor::scalar(2.0f)}});
    CHECK(before.run(dequeue[0]).scalar_value<float>() == 1.0f);
  }
  session blocked_session{srv.target(), bounded(), &g};
  blocked_session.run(dequeue[0]);
  auto result = std::async(std::launch::async, [&] {
    return error_of([&] { blocked_session.run(dequeue[0]); });
  });
  REQUIRE(result.wait_for(std::chrono::milliseconds(200))
          == std::future_status::timeout);
  session::reset(srv.target());
  REQUIRE(result.wait_for(std::chrono::seconds(20))
          == std::future_status::ready);
  auto err = result.get();
  REQUIRE(err);
  CHECK((err->code() == error_code::cancelled
         || err->code() == error_code::aborted));
  session after{srv.target(), bounded(), &g};
  CHECK(after.run(size).scalar_value<int32_t>() == 0);
  after.run(enqueue, {{x, tensor::scalar(3.0f)}});
  CHECK(after.run(dequeue[0]).scalar_value<float>() == 3.0f);
}

TEST_CASE("queue: a hundred blocked dequeues leave the server responsive, "
          "each element goes to exactly one of them, close fails the rest",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{-1, {dtype::int32}, {tensor_shape{}}, "q_many"};
  auto xs = placeholder(dtype::int32, {-1}, "xs");
  auto enqueue_many = q.enqueue_many({xs});
  auto dequeue = q.dequeue();
  auto close = q.close();
  variable counter{constant(0), named("counter")};
  auto bump = counter.assign_add(constant(1));
  // One session, run from 100 threads at once (TF allows that too).
  session consumers{srv.target(), bounded(), &g};
  std::vector<std::future<std::optional<int32_t>>> waiting;
  for (int i = 0; i < 100; ++i)
    waiting.push_back(std::async(std::launch::async,
                                 [&]() -> std::optional<int32_t> {
                                   try {
                                     return consumers.run(dequeue[0])
                                       .scalar_value<int32_t>();
                                   } catch (const op_error& e) {
                                     CHECK(e.code() == error_code::out_of_range);
                                     return std::nullopt;
                                   }
                                 }));
  // While they wait, other steps on the same server still run.
  session other{srv.target(), bounded(), &g};
  other.run(counter.initializer());
  for (int i = 0; i < 10; ++i)
    other.run(bump);
  CHECK(other.run(counter).scalar_value<int32_t>() == 10);
  std::vector<int32_t> values(60);
  for (int32_t i = 0; i < 60; ++i)
    values[static_cast<size_t>(i)] = i;
  other.run(enqueue_many, {{xs, tensor::vec(values)}});
  // Whatever the order in which the dequeues reach the queue, an element
  // is never lost nor given twice: exactly 60 succeed, the rest fail once
  // the queue is closed and empty.
  other.run(close);
  std::vector<int32_t> got;
  int failed = 0;
  for (auto& w : waiting) {
    REQUIRE(w.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    if (auto v = w.get())
      got.push_back(*v);
    else
      ++failed;
  }
  std::sort(got.begin(), got.end());
  CHECK(got == values);
  CHECK(failed == 40);
}

TEST_CASE("queue: close(cancel_pending_enqueues) fails blocked enqueues "
          "with Cancelled and keeps what was enqueued",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{2, {dtype::int32}, {tensor_shape{}}, "q_full"};
  auto x = placeholder(dtype::int32, {}, "x");
  auto enqueue = q.enqueue({x});
  auto dequeue_up_to = q.dequeue_up_to(10);
  auto cancel = q.close(true);
  session producers{srv.target(), bounded(), &g};
  std::vector<std::future<error_code>> pushes;
  for (int32_t i = 0; i < 6; ++i)
    pushes.push_back(std::async(std::launch::async, [&, i] {
      try {
        producers.run(enqueue, {{x, tensor::scalar(i)}});
        return error_code::ok;
      } catch (const op_error& e) {
        return e.code();
      }
    }));
  session closer{srv.target(), bounded(), &g};
  // Wait (bounded) until the queue is full and four enqueues wait.
  // The queue tells the client nothing when it fills, so poll its size.
  for (int i = 0; i < 200
                  && closer.run(q.size()).scalar_value<int32_t>() < 2;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Nothing shows when the other four enqueues block on the full queue:
  // give them time.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  closer.run(cancel);
  int ok = 0;
  int cancelled = 0;
  for (auto& p : pushes) {
    REQUIRE(p.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    auto code = p.get();
    if (code == error_code::ok)
      ++ok;
    else if (code == error_code::cancelled)
      ++cancelled;
  }
  CHECK(ok == 2);
  CHECK(cancelled == 4);
  // The two that made it are still there, then the closed queue is empty.
  CHECK(closer.run(dequeue_up_to[0]).num_elements() == 2);
  CHECK_THROWS_AS(closer.run(dequeue_up_to[0]), op_error);
}

TEST_CASE("queue: a step that fails after its dequeues returns their "
          "elements to the head, in order (a leased dequeue)",
          "[queue][engine]") {
  auto srv = server::create_local_server();
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}, "q_lease"};
  auto xs = placeholder(dtype::float32, {-1}, "xs");
  auto fill = q.enqueue_many({xs});
  auto two = q.dequeue_many(2);
  auto one = q.dequeue();
  // Fails at run time, once both dequeues handed their elements over: a
  // two-element batch added to a three-element one.
  auto v = placeholder(dtype::float32, {-1}, "v");
  auto after = add(add(two[0], v), one[0]);
  session sess{srv.target(), bounded(), &g};
  sess.run(fill, {{xs, tensor::vec<float>({1, 2, 3, 4})}});
  auto err = error_of(
    [&] { sess.run(after, {{v, tensor::vec<float>({1, 1, 1})}}); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  // TensorFlow loses the three elements; here they are back in front,
  // and the queue's metrics count them.
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 4);
  task_options opts;
  opts.job = srv.job_name();
  opts.task = srv.task_index();
  auto metrics = metrics_text(default_system(), opts);
  CHECK_THAT(metrics, Catch::Contains("actorflow_queue_returned_total{task=\""
                                      "/job:local/replica:0/task:0\",queue=\""
                                      "q_lease\""));
  auto at = metrics.find("actorflow_queue_returned_total{");
  at = metrics.find("q_lease", at);
  REQUIRE(at != std::string::npos);
  CHECK(metrics.substr(metrics.find("} ", at) + 2, 2) == "3\n");
  CHECK(sess.run(two[0]) == tensor::vec<float>({1, 2}));
  CHECK(sess.run(one[0]).scalar_value<float>() == 3.0f);
  // A step that succeeds commits: its elements are gone for good.
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 1);
  CHECK(sess.run(one[0]).scalar_value<float>() == 4.0f);
  CHECK(sess.run(q.size()).scalar_value<int32_t>() == 0);
}
