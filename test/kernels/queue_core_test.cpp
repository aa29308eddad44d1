// queue_core: TensorFlow's FIFOQueue / PaddingFIFOQueue / RandomShuffleQueue
// semantics (tf_semantics.md §7.3). A "blocked" op is an attempt whose
// callback has not fired yet.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "actorflow/kernels/queue_core.hpp"

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

using tuple = queue_core::tuple;

struct outcome {
  int calls = 0;
  status st;
  tuple values;
  bool fired() const {
    return calls > 0;
  }
};

queue_core::done_fn track(outcome& out) {
  return [&out](status st, tuple values) {
    ++out.calls;
    out.st = std::move(st);
    out.values = std::move(values);
  };
}

queue_options make_opts(int32_t capacity, std::vector<dtype> types,
                        std::vector<tensor_shape> shapes = {},
                        queue_kind kind = queue_kind::fifo,
                        std::string name = "fifo_queue") {
  queue_options opts;
  opts.kind = kind;
  opts.name = std::move(name);
  opts.capacity = capacity;
  opts.types = std::move(types);
  opts.shapes = std::move(shapes);
  return opts;
}

tensor f32(float x) {
  return tensor::scalar(x);
}

tensor i32(int32_t x) {
  return tensor::scalar(x);
}

// Enqueues one scalar float and requires it to succeed at once.
void put(queue_core& q, float x) {
  outcome out;
  q.enqueue({f32(x)}, track(out));
  REQUIRE(out.fired());
  REQUIRE(out.st.ok());
}

// Dequeues one scalar float and requires it to succeed at once.
float take(queue_core& q) {
  outcome out;
  q.dequeue(track(out));
  REQUIRE(out.fired());
  REQUIRE(out.st.ok());
  REQUIRE(out.values.size() == 1);
  return out.values[0].scalar_value<float>();
}

template <class T>
std::vector<T> values_of(const tensor& t) {
  auto xs = t.flat<T>();
  return {xs.begin(), xs.end()};
}

} // namespace

// -- construction checks ------------------------------------------------------

TEST_CASE("queue options are validated as TF does", "[queue]") {
  CHECK(validate(make_opts(10, {dtype::float32})).ok());
  auto st = validate(make_opts(10, {dtype::float32, dtype::int32}, {{}}));
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Contains("same length as dtypes"));
  st = validate(make_opts(10, {dtype::float32}, {{-1}}));
  CHECK_THAT(st.message(), Contains("must be fully defined"));
  // 94: Padding needs shapes; partial dims are fine.
  st = validate(make_opts(10, {dtype::float32}, {}, queue_kind::padding_fifo));
  CHECK(st.message()
        == "When providing partial shapes, a list of shapes must be provided.");
  CHECK(validate(make_opts(10, {dtype::float32}, {{-1}},
                           queue_kind::padding_fifo))
          .ok());
  // 92: min_after_dequeue bounds.
  auto rs = make_opts(5, {dtype::float32}, {}, queue_kind::random_shuffle);
  rs.min_after_dequeue = 5;
  CHECK(validate(rs).message() == "min_after_dequeue 5 must be < capacity 5");
  rs.min_after_dequeue = 6;
  CHECK(validate(rs).message() == "min_after_dequeue 6 must be < capacity 5");
  rs.min_after_dequeue = -1;
  CHECK(validate(rs).message() == "min_after_dequeue -1 must be >= 0");
  rs.min_after_dequeue = 4;
  CHECK(validate(rs).ok());
}

TEST_CASE("shared queues must match (96)", "[queue]") {
  auto a = make_opts(10, {dtype::float32}, {}, queue_kind::fifo, "q_a");
  auto b = a;
  b.capacity = 15;
  auto st = check_compatible(a, b);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message()
        == "Shared queue 'q_a' has capacity 10 but requested capacity was 15");
  b = a;
  b.types = {dtype::int32};
  CHECK(check_compatible(a, b).message()
        == "Shared queue 'q_a' has component types float but requested "
           "component types were int32");
  b = a;
  b.shapes = {{1, 1, 2, 3}};
  CHECK(check_compatible(a, b).message()
        == "Shared queue 'q_a' has component shapes [] but requested "
           "component shapes were [[1,1,2,3]]");
  CHECK_THAT(check_compatible(b, a).message(), Contains("component shapes"));
  auto c = b;
  c.shapes = {{1, 1, 2, 4}};
  CHECK_THAT(check_compatible(b, c).message(), Contains("component shapes"));
  CHECK(check_compatible(a, a).ok());
  b = a;
  b.kind = queue_kind::padding_fifo;
  CHECK_THAT(check_compatible(a, b).message(), Contains("has type"));
  // Padding shapes only need to be compatible.
  auto p = make_opts(10, {dtype::float32}, {{-1, 2}}, queue_kind::padding_fifo);
  auto p2 = p;
  p2.shapes = {{3, 2}};
  CHECK(check_compatible(p, p2).ok());
  p2.shapes = {{3, 3}};
  CHECK_THAT(check_compatible(p, p2).message(), Contains("component shapes"));
  // RandomShuffle: min_after_dequeue and seeds.
  auto r = make_opts(10, {dtype::float32}, {}, queue_kind::random_shuffle);
  r.seed = 1;
  r.seed2 = 2;
  auto r2 = r;
  r2.min_after_dequeue = 3;
  CHECK_THAT(check_compatible(r, r2).message(), Contains("min_after_dequeue"));
  r2 = r;
  r2.seed = 0;
  r2.seed2 = 0;
  CHECK(check_compatible(r, r2).ok());
  r2.seed = 7;
  CHECK_THAT(check_compatible(r, r2).message(), Contains("random seeds"));
}

// -- basics -------------------------------------------------------------------

TEST_CASE("enqueue and dequeue change the size (58)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  CHECK(q.size() == 0);
  put(q, 10.0f);
  CHECK(q.size() == 1);
  CHECK(take(q) == 10.0f);
  CHECK(q.size() == 0);
  CHECK(q.options().capacity == 10);
  CHECK_FALSE(q.is_closed());
}

TEST_CASE("enqueue_many twice keeps FIFO order (59)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  for (int round = 0; round < 2; ++round) {
    outcome out;
    q.enqueue_many({tensor::vec<float>({10, 20, 30, 40})}, track(out));
    REQUIRE(out.st.ok());
  }
  std::vector<float> got;
  for (int i = 0; i < 8; ++i)
    got.push_back(take(q));
  CHECK(got == std::vector<float>{10, 20, 30, 40, 10, 20, 30, 40});
}

TEST_CASE("an empty enqueue_many is a no-op (60)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  outcome out;
  q.enqueue_many({tensor{dtype::float32, {0, 2, 3}}}, track(out));
  CHECK(out.fired());
  CHECK(out.st.ok());
  CHECK(q.size() == 0);
}

TEST_CASE("dequeue_many(0) returns empty tensors (61)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{}})};
  for (int round = 0; round < 2; ++round) {
    outcome out;
    q.dequeue_many(0, track(out));
    REQUIRE(out.fired());
    REQUIRE(out.st.ok());
    REQUIRE(out.values.size() == 1);
    CHECK(out.values[0].shape() == tensor_shape{0});
    put(q, 1.0f);
  }
  CHECK(q.size() == 2);
}

TEST_CASE("dequeue_many needs shapes (62, 91)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  outcome many, up_to;
  q.dequeue_many(0, track(many));
  q.dequeue_up_to(0, track(up_to));
  CHECK(many.st.code() == error_code::invalid_argument);
  CHECK(many.st.message()
        == "FIFOQueue's DequeueMany and DequeueUpTo require the components "
           "to have specified shapes.");
  CHECK_THAT(up_to.st.message(), Contains("specified shapes"));
  auto rs = make_opts(10, {dtype::float32}, {}, queue_kind::random_shuffle);
  queue_core r{rs};
  for (int round = 0; round < 2; ++round) {
    outcome a, b;
    r.dequeue_many(0, track(a));
    r.dequeue_up_to(0, track(b));
    CHECK_THAT(a.st.message(), Contains("RandomShuffleQueue's DequeueMany"));
    CHECK_THAT(b.st.message(), Contains("specified shapes"));
    put(r, 1.0f);
  }
  outcome neg;
  queue_core s{make_opts(10, {dtype::float32}, {{}})};
  s.dequeue_many(-1, track(neg));
  CHECK(neg.st.message() == "DequeueManyOp requested n < 0 elements");
  s.dequeue_up_to(-1, track(neg));
  CHECK(neg.st.message() == "DequeueUpToOp requested n < 0 elements");
}

TEST_CASE("invalid tuples fail and leave the queue unchanged (63-66)",
          "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{3, 2}})};
  outcome ok, bad;
  q.enqueue({tensor{dtype::float32, {3, 2}}}, track(ok));
  CHECK(ok.st.ok());
  q.enqueue({tensor{dtype::float32, {2, 3}}}, track(bad));
  CHECK(bad.st.message()
        == "Shape mismatch in tuple component 0. Expected [3,2], got [2,3]");
  CHECK(q.size() == 1);

  queue_core two{make_opts(10, {dtype::int32, dtype::int32}, {{2, 2}, {3, 3}})};
  outcome out;
  two.enqueue({tensor{dtype::int32, {2, 2}}, tensor{dtype::int32, {3, 4}}},
              track(out));
  CHECK(out.st.code() == error_code::invalid_argument);
  CHECK(out.st.message()
        == "Shape mismatch in tuple component 1. Expected [3,3], got [3,4]");
  two.enqueue_many(
    {tensor{dtype::int32, {2, 2, 2}}, tensor{dtype::int32, {2, 3, 4}}},
    track(out));
  CHECK(out.st.message()
        == "Shape mismatch in tuple component 1. Expected [2,3,3], got "
           "[2,3,4]");
  two.enqueue({tensor{dtype::int32, {2, 2}}}, track(out));
  CHECK(out.st.message()
        == "Wrong number of components in tuple. Expected 2, got 1");
  two.enqueue({tensor{dtype::float32, {2, 2}}, tensor{dtype::int32, {3, 3}}},
              track(out));
  CHECK(out.st.message()
        == "Type mismatch in tuple component 0. Expected int32, got float");
  CHECK(two.size() == 0);

  // 64: a scalar component cannot be enqueued as a batch.
  queue_core mixed{make_opts(10, {dtype::int32, dtype::int32}, {{}, {2}})};
  mixed.enqueue_many(
    {i32(7), tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2})},
    track(out));
  CHECK(out.st.code() == error_code::invalid_argument);
  CHECK(mixed.size() == 0);

  // 65 at run time, without shapes: batch sizes must agree.
  queue_core loose{make_opts(10, {dtype::int32, dtype::int32, dtype::int32})};
  loose.enqueue_many({tensor::vec<int32_t>({1, 2, 3}),
                      tensor::vec<int32_t>({1, 2}),
                      tensor::vec<int32_t>({1, 2, 3})},
                     track(out));
  CHECK(out.st.message()
        == "All input tensors must have the same size in the 0th dimension. "
           "Component 1 has 2, and should have 3");
  CHECK(loose.size() == 0);
}

TEST_CASE("dequeue_many slices batches in order (67, 68)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{}})};
  std::vector<float> elems{10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  outcome out;
  q.enqueue_many({tensor::vec(elems)}, track(out));
  REQUIRE(out.st.ok());
  q.dequeue_many(4, track(out));
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{10, 20, 30, 40});
  q.dequeue_many(4, track(out));
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{50, 60, 70, 80});
  CHECK(q.size() == 2);

  queue_core m{make_opts(10, {dtype::float32, dtype::int32}, {{}, {2}})};
  m.enqueue_many({tensor::vec<float>({1, 2, 3, 4}),
                  tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8},
                                               {4, 2})},
                 track(out));
  REQUIRE(out.st.ok());
  m.dequeue_many(4, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{4});
  CHECK(out.values[1].shape() == tensor_shape{4, 2});
  CHECK(values_of<int32_t>(out.values[1])
        == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("a FIFO queue keeps enqueue_many's rows as views of the batch, "
          "a RandomShuffleQueue copies them",
          "[queue]") {
  auto batch = tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  outcome out;
  queue_core q{make_opts(10, {dtype::float32}, {{2}})};
  q.enqueue_many({batch}, track(out));
  REQUIRE(out.st.ok());
  // The whole batch back in one dequeue_many: the same buffer, no copy.
  q.dequeue_many(3, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].raw() == batch.raw());
  CHECK(values_of<float>(out.values[0])
        == std::vector<float>{1, 2, 3, 4, 5, 6});
  // Rows of two batches in one dequeue_many are copied into a new one.
  q.enqueue_many({batch}, track(out));
  q.enqueue_many({tensor::from_vector<float>({7, 8}, {1, 2})}, track(out));
  q.dequeue(track(out));
  CHECK(out.values[0].raw() == static_cast<const float*>(batch.raw()));
  q.dequeue_many(3, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].raw() != batch.raw());
  CHECK(values_of<float>(out.values[0])
        == std::vector<float>{3, 4, 5, 6, 7, 8});

  queue_options shuffled = make_opts(10, {dtype::float32}, {{2}},
                                     queue_kind::random_shuffle,
                                     "random_shuffle_queue");
  queue_core r{shuffled};
  r.enqueue_many({batch}, track(out));
  REQUIRE(out.st.ok());
  r.dequeue(track(out));
  REQUIRE(out.st.ok());
  const auto* first = static_cast<const float*>(out.values[0].raw());
  const auto* begin = static_cast<const float*>(batch.raw());
  CHECK((first < begin || first >= begin + 6));
}

// -- closing ------------------------------------------------------------------

TEST_CASE("a closed queue drains, then fails (69, 97)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f, 40.f})
    put(q, x);
  outcome closed;
  q.close(false, track(closed));
  CHECK(closed.st.ok());
  CHECK(q.is_closed());
  for (float x : {10.f, 20.f, 30.f, 40.f})
    CHECK(take(q) == x);
  outcome out;
  q.dequeue(track(out));
  CHECK(out.st.code() == error_code::out_of_range);
  CHECK(out.st.message()
        == "FIFOQueue 'fifo_queue' is closed and has insufficient elements "
           "(requested 1, current size 0)");
}

TEST_CASE("close wakes a blocked dequeue (70)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  outcome out, closed;
  q.dequeue(track(out));
  CHECK_FALSE(out.fired());
  q.close(false, track(closed));
  CHECK(closed.st.ok());
  CHECK(out.calls == 1);
  CHECK(out.st.code() == error_code::out_of_range);
  CHECK_THAT(out.st.message(), Contains("is closed and has insufficient"));
}

TEST_CASE("dequeue_many blocks until close (71)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{}})};
  outcome out;
  q.enqueue_many({tensor::vec<float>({1, 2, 3, 4})}, track(out));
  q.dequeue_many(4, track(out));
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{1, 2, 3, 4});
  outcome blocked, closed;
  q.dequeue_many(4, track(blocked));
  CHECK_FALSE(blocked.fired());
  q.close(false, track(closed));
  CHECK(blocked.st.code() == error_code::out_of_range);
  CHECK(blocked.st.message()
        == "FIFOQueue 'fifo_queue' is closed and has insufficient elements "
           "(requested 4, current size 0)");

  queue_core r{make_opts(10, {dtype::float32}, {{}})};
  r.enqueue_many({tensor::vec<float>({1, 2, 3, 4})}, track(out));
  r.dequeue_many(3, track(out));
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{1, 2, 3});
  outcome second;
  r.dequeue_many(3, track(second));
  CHECK_FALSE(second.fired());
  CHECK(r.size() == 0); // the element waits inside the attempt
  r.close(false, track(closed));
  CHECK(second.st.code() == error_code::out_of_range);
  // As TF: the count still missing, the size before the element goes back.
  CHECK_THAT(second.st.message(), Contains("(requested 2, current size 0)"));
  CHECK(r.size() == 1);
  CHECK(take(r) == 4.0f);
}

TEST_CASE("dequeue_up_to returns the remainder after close (72)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{}})};
  outcome out, closed;
  q.enqueue_many({tensor::vec<float>({1, 2, 3, 4})}, track(out));
  q.close(false, track(closed));
  q.dequeue_up_to(3, track(out));
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{1, 2, 3});
  q.dequeue_up_to(3, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{1});
  CHECK(values_of<float>(out.values[0]) == std::vector<float>{4});
  q.dequeue_up_to(3, track(out));
  CHECK(out.st.code() == error_code::out_of_range);
  CHECK_THAT(out.st.message(), Contains("is closed and has insufficient"));

  // A blocked dequeue_up_to receives the partial batch on close.
  queue_core b{make_opts(10, {dtype::float32}, {{}})};
  outcome blocked;
  b.dequeue_up_to(3, track(blocked));
  put(b, 7.0f);
  CHECK_FALSE(blocked.fired());
  b.close(false, track(closed));
  REQUIRE(blocked.st.ok());
  CHECK(values_of<float>(blocked.values[0]) == std::vector<float>{7});
}

TEST_CASE("a failed dequeue_many restores its partial batch (73)",
          "[queue]") {
  queue_core q{make_opts(4, {dtype::float32, dtype::float32}, {{}, {}})};
  outcome out;
  q.enqueue_many(
    {tensor::vec<float>({1, 2, 3}), tensor::vec<float>({10, 20, 30})},
    track(out));
  REQUIRE(out.st.ok());
  outcome blocked, closed;
  q.dequeue_many(4, track(blocked));
  CHECK_FALSE(blocked.fired());
  q.close(false, track(closed));
  CHECK(blocked.st.code() == error_code::out_of_range);
  for (float x : {1.f, 2.f, 3.f}) {
    q.dequeue(track(out));
    REQUIRE(out.st.ok());
    CHECK(out.values[0].scalar_value<float>() == x);
    CHECK(out.values[1].scalar_value<float>() == x * 10);
  }
  CHECK(q.size() == 0);
}

TEST_CASE("enqueue after close is cancelled (74)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  outcome closed, out, many;
  q.close(false, track(closed));
  q.enqueue({f32(10)}, track(out));
  CHECK(out.st.code() == error_code::cancelled);
  CHECK(out.st.message() == "FIFOQueue 'fifo_queue' is closed.");
  q.enqueue_many({tensor::vec<float>({1, 2})}, track(many));
  CHECK(many.st.code() == error_code::cancelled);
  CHECK_THAT(many.st.message(), Contains("is closed"));
  CHECK(q.size() == 0);
}

TEST_CASE("a full queue blocks enqueues (75)", "[queue]") {
  queue_core q{make_opts(4, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f, 40.f})
    put(q, x);
  outcome blocked;
  q.enqueue({f32(50)}, track(blocked));
  CHECK_FALSE(blocked.fired());
  CHECK(take(q) == 10.0f);
  CHECK(blocked.calls == 1);
  CHECK(blocked.st.ok());
  std::vector<float> rest;
  for (int i = 0; i < 4; ++i)
    rest.push_back(take(q));
  CHECK(rest == std::vector<float>{20, 30, 40, 50});

  queue_core m{make_opts(4, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f, 40.f})
    put(m, x);
  m.enqueue_many({tensor::vec<float>({50, 60})}, track(blocked));
  std::vector<float> all;
  for (int i = 0; i < 6; ++i)
    all.push_back(take(m));
  CHECK(all == std::vector<float>{10, 20, 30, 40, 50, 60});
  CHECK(blocked.st.ok());
}

TEST_CASE("close waits for blocked enqueues (76, 77)", "[queue]") {
  queue_core q{make_opts(4, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f, 40.f})
    put(q, x);
  outcome blocked, closed;
  q.enqueue({f32(50)}, track(blocked));
  q.close(false, track(closed));
  CHECK_FALSE(blocked.fired());
  CHECK_FALSE(closed.fired());
  CHECK_FALSE(q.is_closed());
  CHECK(take(q) == 10.0f);
  CHECK(blocked.st.ok());
  CHECK(closed.fired());
  CHECK(closed.st.ok());
  for (float x : {20.f, 30.f, 40.f, 50.f})
    CHECK(take(q) == x);
  CHECK(q.size() == 0);

  queue_core m{make_opts(4, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f})
    put(m, x);
  outcome many, closed2;
  m.enqueue_many({tensor::vec<float>({50, 60})}, track(many));
  CHECK_FALSE(many.fired()); // 50 went in, 60 waits
  m.close(false, track(closed2));
  CHECK_FALSE(closed2.fired());
  CHECK(take(m) == 10.0f);
  CHECK(many.st.ok());
  CHECK(closed2.st.ok());
  for (float x : {20.f, 30.f, 50.f, 60.f})
    CHECK(take(m) == x);
}

TEST_CASE("enqueue_many trickles in as space frees (78)", "[queue]") {
  queue_core q{make_opts(5, {dtype::int32}, {{}})};
  outcome many;
  q.enqueue_many({tensor::vec<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})},
                 track(many));
  CHECK(q.size() == 5);
  std::vector<int32_t> got;
  for (int i = 0; i < 10; ++i) {
    CHECK(many.fired() == (i >= 5));
    outcome out;
    q.dequeue(track(out));
    REQUIRE(out.st.ok());
    got.push_back(out.values[0].scalar_value<int32_t>());
    CHECK(q.size() == std::min(5, 9 - i));
  }
  CHECK(many.calls == 1);
  CHECK(got == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("a blocked dequeue_many collects past capacity (79)", "[queue]") {
  queue_core q{make_opts(2, {dtype::int32}, {{}})};
  outcome blocked, later;
  q.dequeue_many(4, track(blocked));
  q.dequeue(track(later));
  for (int32_t i = 0; i < 4; ++i) {
    CHECK_FALSE(blocked.fired());
    outcome out;
    q.enqueue({i32(i)}, track(out));
    CHECK(out.st.ok()); // never blocks: the batch takes each element
  }
  REQUIRE(blocked.st.ok());
  CHECK(values_of<int32_t>(blocked.values[0])
        == std::vector<int32_t>{0, 1, 2, 3});
  CHECK_FALSE(later.fired());
  outcome out;
  q.enqueue({i32(9)}, track(out));
  CHECK(later.values[0].scalar_value<int32_t>() == 9);
}

TEST_CASE("close with cancel fails pending enqueues (80)", "[queue]") {
  queue_core q{make_opts(4, {dtype::float32})};
  for (float x : {10.f, 20.f, 30.f, 40.f})
    put(q, x);
  outcome blocked, plain_close, closed;
  q.enqueue({f32(50)}, track(blocked));
  q.close(false, track(plain_close));
  q.close(true, track(closed));
  CHECK(closed.st.ok());
  CHECK(blocked.st.code() == error_code::cancelled);
  CHECK(blocked.st.message() == "Enqueue operation was cancelled");
  CHECK(plain_close.st.code() == error_code::cancelled);
  CHECK(q.is_closed());
  for (float x : {10.f, 20.f, 30.f, 40.f})
    CHECK(take(q) == x);
  // Never errors, even when already closed.
  q.close(true, track(closed));
  CHECK(closed.calls == 2);
  CHECK(closed.st.ok());
  CHECK(q.pending() == 0);
}

TEST_CASE("a partial enqueue_many keeps its rows when cut short", "[queue]") {
  queue_core q{make_opts(2, {dtype::int32}, {{}})};
  outcome many, closed;
  auto id = q.enqueue_many({tensor::vec<int32_t>({1, 2, 3, 4})}, track(many));
  CHECK(q.size() == 2);
  outcome out;
  q.dequeue(track(out));
  CHECK(out.values[0].scalar_value<int32_t>() == 1);
  CHECK(q.size() == 2); // row 3 moved in
  CHECK_FALSE(many.fired());
  SECTION("by close with cancel") {
    q.close(true, track(closed));
    CHECK(closed.st.ok());
    CHECK(many.st.message() == "Enqueue operation was cancelled");
  }
  SECTION("by cancel") {
    q.cancel(id);
    CHECK(many.st.code() == error_code::cancelled);
    q.close(false, track(closed));
  }
  CHECK(many.calls == 1);
  q.dequeue(track(out));
  CHECK(out.values[0].scalar_value<int32_t>() == 2);
  q.dequeue(track(out));
  CHECK(out.values[0].scalar_value<int32_t>() == 3);
  q.dequeue(track(out));
  CHECK(out.st.code() == error_code::out_of_range);
}

TEST_CASE("closing twice fails (82)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32})};
  outcome first, second;
  q.close(false, track(first));
  q.close(false, track(second));
  CHECK(first.st.ok());
  CHECK(second.st.code() == error_code::cancelled);
  CHECK(second.st.message() == "Queue 'fifo_queue' is already closed.");
}

// -- cancellation -------------------------------------------------------------

TEST_CASE("cancel fails one blocked attempt and loses nothing", "[queue]") {
  SECTION("enqueue") {
    queue_core q{make_opts(1, {dtype::float32})};
    put(q, 1.0f);
    outcome blocked, closed;
    auto id = q.enqueue({f32(2)}, track(blocked));
    q.close(false, track(closed));
    q.cancel(id);
    CHECK(blocked.st.code() == error_code::cancelled);
    CHECK(blocked.st.message() == "Enqueue operation was cancelled");
    CHECK(closed.st.ok()); // no longer stuck behind the enqueue
    CHECK(take(q) == 1.0f);
    q.cancel(id);
    CHECK(blocked.calls == 1);
  }
  SECTION("dequeue") {
    queue_core q{make_opts(10, {dtype::float32})};
    outcome first, second;
    auto id = q.dequeue(track(first));
    q.dequeue(track(second));
    q.cancel(id);
    CHECK(first.st.code() == error_code::cancelled);
    CHECK(first.st.message() == "Dequeue operation was cancelled");
    put(q, 5.0f);
    CHECK(second.values[0].scalar_value<float>() == 5.0f);
    CHECK(first.calls == 1);
  }
  SECTION("dequeue_many") {
    queue_core q{make_opts(10, {dtype::float32}, {{}})};
    outcome many, single;
    auto id = q.dequeue_many(4, track(many));
    put(q, 1.0f);
    put(q, 2.0f);
    CHECK(q.size() == 0);
    q.dequeue(track(single));
    q.cancel(id);
    CHECK(many.st.code() == error_code::cancelled);
    // The restored elements reach the next dequeue in order.
    CHECK(single.values[0].scalar_value<float>() == 1.0f);
    CHECK(take(q) == 2.0f);
  }
}

TEST_CASE("cancel_all fails every pending attempt", "[queue]") {
  queue_core full{make_opts(1, {dtype::float32}, {{}})};
  put(full, 1.0f);
  outcome enq, enq_many;
  full.enqueue({f32(2)}, track(enq));
  full.enqueue_many({tensor::vec<float>({3, 4})}, track(enq_many));
  queue_core empty{make_opts(10, {dtype::float32}, {{}})};
  outcome deq, deq_many;
  empty.dequeue_many(3, track(deq_many));
  put(empty, 7.0f);
  empty.dequeue(track(deq));
  full.cancel_all();
  empty.cancel_all();
  for (auto* o : {&enq, &enq_many, &deq, &deq_many}) {
    CHECK(o->calls == 1);
    CHECK(o->st.code() == error_code::cancelled);
    CHECK_THAT(o->st.message(), Contains("was cancelled"));
  }
  CHECK(full.size() == 1);
  CHECK(empty.size() == 1);
  CHECK(take(empty) == 7.0f);
  CHECK(full.pending() == 0);
  CHECK(empty.pending() == 0);
}

TEST_CASE("the destructor cancels pending attempts", "[queue]") {
  outcome out;
  {
    queue_core q{make_opts(10, {dtype::float32})};
    q.dequeue(track(out));
  }
  CHECK(out.st.code() == error_code::cancelled);
}

// -- RandomShuffleQueue -------------------------------------------------------

TEST_CASE("random_shuffle respects min_after_dequeue (89)", "[queue]") {
  auto opts = make_opts(10, {dtype::float32}, {{}}, queue_kind::random_shuffle,
                        "random_shuffle_queue");
  opts.min_after_dequeue = 2;
  queue_core q{opts};
  outcome out;
  q.enqueue_many({tensor::vec<float>({1, 2, 3, 4})}, track(out));
  std::vector<float> got{take(q), take(q)};
  outcome third, closed;
  q.dequeue(track(third));
  CHECK_FALSE(third.fired());
  q.close(false, track(closed));
  REQUIRE(third.st.ok());
  got.push_back(third.values[0].scalar_value<float>());
  got.push_back(take(q));
  q.dequeue(track(out));
  CHECK(out.st.code() == error_code::out_of_range);
  CHECK(out.st.message()
        == "RandomShuffleQueue 'random_shuffle_queue' is closed and has "
           "insufficient elements (requested 1, current size 0)");
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("random_shuffle returns the enqueued multiset (90)", "[queue]") {
  auto opts = make_opts(10, {dtype::float32}, {}, queue_kind::random_shuffle);
  queue_core q{opts};
  std::vector<float> in{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  for (float x : in)
    put(q, x);
  std::vector<float> out;
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back(take(q));
  std::sort(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  CHECK(out == in);
}

TEST_CASE("seeded random_shuffle is deterministic", "[queue]") {
  auto run = [](int64_t seed, int64_t seed2) {
    auto opts = make_opts(100, {dtype::int32}, {{}},
                          queue_kind::random_shuffle);
    opts.seed = seed;
    opts.seed2 = seed2;
    queue_core q{opts};
    std::vector<int32_t> in(50);
    for (int32_t i = 0; i < 50; ++i)
      in[static_cast<size_t>(i)] = i;
    outcome out;
    q.enqueue_many({tensor::vec(in)}, track(out));
    q.dequeue_many(50, track(out));
    return values_of<int32_t>(out.values.at(0));
  };
  auto a = run(42, 7);
  CHECK(a == run(42, 7));
  CHECK(a != run(43, 7));
  std::vector<int32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int32_t i = 0; i < 50; ++i)
    CHECK(sorted[static_cast<size_t>(i)] == i);
  std::vector<int32_t> identity = sorted;
  CHECK(a != identity);
}

// -- PaddingFIFOQueue ---------------------------------------------------------

TEST_CASE("padding dequeue_many pads to the batch maximum (93)", "[queue]") {
  queue_core q{make_opts(10, {dtype::string, dtype::int32}, {{-1}, {1, -1}},
                         queue_kind::padding_fifo, "padding_fifo_queue")};
  std::vector<std::vector<std::string>> strs{
    {"a"}, {"ab"}, {"abc"}, {"abc", "d"}, {"abc", "d", "e"},
    {"abc", "d", "e", "f"}};
  std::vector<std::vector<int32_t>> ints{{1}, {2}, {3}, {1, 2}, {1, 2, 3},
                                         {1, 2, 3, 4}};
  for (size_t i = 0; i < strs.size(); ++i) {
    auto n = static_cast<int64_t>(ints[i].size());
    outcome out;
    q.enqueue({tensor::vec(strs[i]), tensor::from_vector(ints[i], {1, n})},
              track(out));
    REQUIRE(out.st.ok());
  }
  outcome bad;
  q.enqueue({tensor::vec<std::string>({"x"}), tensor{dtype::int32, {2, 1}}},
            track(bad));
  CHECK(bad.st.message()
        == "Shape mismatch in tuple component 1. Expected [1,?], got [2,1]");
  outcome out;
  q.dequeue_many(5, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{5, 3});
  CHECK(values_of<std::string>(out.values[0])
        == std::vector<std::string>{"a", "", "", "ab", "", "", "abc", "", "",
                                    "abc", "d", "", "abc", "d", "e"});
  CHECK(out.values[1].shape() == tensor_shape{5, 1, 3});
  CHECK(values_of<int32_t>(out.values[1])
        == std::vector<int32_t>{1, 0, 0, 2, 0, 0, 3, 0, 0, 1, 2, 0, 1, 2, 3});
  q.dequeue(track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{4});
  CHECK(values_of<std::string>(out.values[0])
        == std::vector<std::string>{"abc", "d", "e", "f"});
  CHECK(out.values[1].shape() == tensor_shape{1, 4});
}

TEST_CASE("padding dequeue_many(0) and 2-D padding (94)", "[queue]") {
  queue_core q{make_opts(10, {dtype::float32}, {{-1}}, queue_kind::padding_fifo,
                         "padding_fifo_queue")};
  outcome out;
  q.dequeue_many(0, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{0, 0});

  queue_core m{make_opts(10, {dtype::int64}, {{-1, -1}},
                         queue_kind::padding_fifo, "p")};
  m.enqueue({tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2})}, track(out));
  m.enqueue({tensor::from_vector<int64_t>({5, 6, 7}, {1, 3})}, track(out));
  m.enqueue({tensor{dtype::int64, {0, 1}}}, track(out));
  m.close(false, track(out));
  m.dequeue_up_to(5, track(out));
  REQUIRE(out.st.ok());
  CHECK(out.values[0].shape() == tensor_shape{3, 2, 3});
  CHECK(values_of<int64_t>(out.values[0])
        == std::vector<int64_t>{1, 2, 0, 3, 4, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0,
                                0, 0, 0});
}

TEST_CASE("a shared core serves every handle (95)", "[queue]") {
  // Both handles of a shared_name resolve to one core.
  queue_core shared{make_opts(1, {dtype::float32}, {}, queue_kind::fifo,
                              "shared_queue")};
  auto& q1 = shared;
  auto& q2 = shared;
  put(q1, 3.0f);
  CHECK(q2.size() == 1);
  CHECK(take(q2) == 3.0f);
}

TEST_CASE("callbacks may call back into the core", "[queue]") {
  queue_core q{make_opts(1, {dtype::float32})};
  std::vector<float> seen;
  std::function<void(status, tuple)> again = [&](status st, tuple values) {
    REQUIRE(st.ok());
    seen.push_back(values[0].scalar_value<float>());
    if (seen.size() < 3)
      q.dequeue(again);
  };
  q.dequeue(again);
  put(q, 1.0f);
  put(q, 2.0f);
  put(q, 3.0f);
  CHECK(seen == std::vector<float>{1, 2, 3});
  CHECK(q.size() == 0);
}

TEST_CASE("put_back returns a dequeued element or batch to the front, "
          "even when closed or full",
          "[queue]") {
  queue_core q{make_opts(3, {dtype::float32}, {{}})};
  for (float x : {1.f, 2.f, 3.f})
    put(q, x);
  CHECK(take(q) == 1.0f);
  q.put_back({f32(1.0f)}, false);
  CHECK(q.size() == 3);
  outcome many;
  q.dequeue_many(2, track(many));
  REQUIRE(many.st.ok());
  CHECK(values_of<float>(many.values[0]) == std::vector<float>{1, 2});
  // A full, closed queue still takes its own elements back, in order.
  put(q, 4.0f);
  put(q, 5.0f);
  outcome closed;
  q.close(false, track(closed));
  q.put_back(many.values, true);
  CHECK(q.size() == 5);
  for (float x : {1.f, 2.f, 3.f, 4.f, 5.f})
    CHECK(take(q) == x);
  // A waiting dequeue receives a put-back element at once.
  queue_core r{make_opts(3, {dtype::float32}, {{}})};
  outcome waiting;
  r.dequeue(track(waiting));
  CHECK_FALSE(waiting.fired());
  r.put_back({f32(7.0f)}, false);
  REQUIRE(waiting.fired());
  CHECK(waiting.values[0].scalar_value<float>() == 7.0f);
}

TEST_CASE("queue: contents and restore_contents carry a replica's state, "
          "waiting dequeues served",
          "[queue][replication]") {
  auto opts = make_opts(2, {dtype::float32}, {tensor_shape{}});
  queue_core q{opts};
  put(q, 1);
  put(q, 2);
  // A dequeue_many(3) holds both while it waits: they are still the
  // queue's (they go back to the front if it fails).
  outcome many;
  q.dequeue_many(3, track(many));
  CHECK_FALSE(many.fired());
  auto held = q.contents();
  REQUIRE(held.size() == 2);
  CHECK(held[0][0].scalar_value<float>() == 1);
  q.close(false, [](status, tuple) {});
  // A replica built from it: the same elements, closed, capacity ignored
  // (its primary held them).
  queue_core replica{opts};
  outcome waiting;
  replica.dequeue(track(waiting));
  CHECK(replica.restore_contents({{f32(5)}, {f32(6)}, {f32(7)}}, false).ok());
  REQUIRE(waiting.fired());
  CHECK(waiting.values[0].scalar_value<float>() == 5);
  CHECK(replica.size() == 2);
  CHECK(replica.restore_contents(held, true).ok());
  CHECK(replica.is_closed());
  CHECK(take(replica) == 1);
  // An element of the wrong type changes nothing.
  auto err = replica.restore_contents({{i32(3)}}, false);
  CHECK(err.code() == error_code::invalid_argument);
  CHECK_THAT(err.message(), Contains("fifo_queue"));
  CHECK(replica.size() == 1);
  CHECK(replica.is_closed());
}
