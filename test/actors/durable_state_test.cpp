// Replicated queues and accumulators (issue 31 §1; durable_state.hpp):
// their images alone (round trips, hostile bytes), the replies that wait
// for a write, then a queue and an accumulator over a replicated variable
// under CAF's deterministic test coordinator: an operation is answered
// only once its state is held, a retried operation (same tag) applies
// once, and a promoted backup's image rebuilds them, leased elements back
// at the head and a retried take answered with the first take's gradient.

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "common/test_system.hpp"
#include "durable_state.hpp"
#include "runtime.hpp"

using namespace actorflow;
using actorflow::testing::deterministic;

namespace {

std::string bytes_of(const tensor& t) {
  return {static_cast<const char*>(t.raw()),
          static_cast<size_t>(t.num_elements())};
}

tensor bytes_tensor(const std::string& bytes) {
  tensor t{dtype::uint8, tensor_shape{{static_cast<int64_t>(bytes.size())}}};
  if (!bytes.empty())
    std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

queue_image sample_queue() {
  queue_image x;
  x.contents = {{tensor::scalar(1.0f)}, {tensor::scalar(2.0f)}};
  x.closed = true;
  x.leased = {{{tensor::vec<float>({7, 8})}, true},
              {{tensor::scalar(9.0f)}, false}};
  x.tags = {11, 12};
  return x;
}

accumulator_image sample_accumulator() {
  accumulator_image x;
  x.core.sum = tensor::vec<float>({1, 2, 3});
  x.core.count = 2;
  x.core.global_step = 40;
  x.core.replicas = {{"/job:worker/replica:0/task:1", 39}};
  x.tags = {5};
  x.takes = {{77, tensor::vec<float>({0.5f, 1, 1.5f})}};
  return x;
}

} // namespace

TEST_CASE("durable state: a queue's and an accumulator's images round-trip",
          "[replication][durable]") {
  queue_image q;
  REQUIRE(decode_image(encode_image(sample_queue()), "q", q).ok());
  auto want = sample_queue();
  REQUIRE(q.contents.size() == 2);
  CHECK(q.contents[1][0] == want.contents[1][0]);
  CHECK(q.closed);
  REQUIRE(q.leased.size() == 2);
  CHECK(q.leased[0].first[0] == want.leased[0].first[0]);
  CHECK(q.leased[0].second);
  CHECK_FALSE(q.leased[1].second);
  CHECK(q.tags == want.tags);
  accumulator_image a;
  REQUIRE(decode_image(encode_image(sample_accumulator()), "a", a).ok());
  CHECK(a.core.sum == sample_accumulator().core.sum);
  CHECK(a.core.count == 2);
  CHECK(a.core.global_step == 40);
  CHECK(a.core.replicas == sample_accumulator().core.replicas);
  CHECK(a.tags == std::vector<int64_t>{5});
  REQUIRE(a.takes.size() == 1);
  CHECK(a.takes[0].first == 77);
  CHECK(a.takes[0].second == sample_accumulator().takes[0].second);
  // An empty accumulator (no sum yet) too.
  accumulator_image empty;
  REQUIRE(decode_image(encode_image(accumulator_image{}), "a", empty).ok());
  CHECK_FALSE(empty.core.sum.valid());
}

TEST_CASE("durable state: unreadable images are DataLoss naming the queue, "
          "and change nothing",
          "[replication][durable]") {
  auto image = encode_image(sample_queue());
  CHECK(image.type() == dtype::uint8);
  auto bytes = bytes_of(image);
  queue_image out;
  out.tags = {99};
  auto check_bad = [&](const tensor& t) {
    auto err = decode_image(t, "FIFOQueue 'q'", out);
    CHECK(err.code() == error_code::data_loss);
    CHECK_THAT(err.message(), Catch::Contains("FIFOQueue 'q'"));
    CHECK(out.tags == std::vector<int64_t>{99});
  };
  // Every truncation, and every single corrupted byte that still decodes
  // must not crash (most are refused).
  for (size_t n = 0; n < bytes.size(); ++n)
    check_bad(bytes_tensor(bytes.substr(0, n)));
  check_bad(bytes_tensor(bytes + "x"));
  check_bad(tensor::scalar(1.0f));
  check_bad(encode_image(sample_accumulator())); // another kind
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    queue_image any;
    (void) decode_image(bytes_tensor(bad), "q", any);
  }
  // A count that claims more than the bytes hold.
  auto huge = bytes;
  huge[3] = '\xff';
  huge[4] = '\xff';
  check_bad(bytes_tensor(huge));
}

TEST_CASE("durable state: replies wait for the write that holds their "
          "operation",
          "[replication][durable]") {
  durable_replies r;
  std::vector<status> got;
  auto reply = [&](const status& s) { got.push_back(s); };
  // Not replicated: at once, nothing written.
  r.defer(reply);
  r.commit([] { return tensor{}; });
  REQUIRE(got.size() == 1);
  CHECK(got[0].ok());
  std::vector<std::function<void(status)>> writes;
  std::vector<tensor> images;
  r.set_writer([&](tensor image, std::function<void(status)> k) {
    images.push_back(std::move(image));
    writes.push_back(std::move(k));
  });
  // An operation that only waits (nothing answered) writes nothing; one
  // that changed the state without answering anything (a commit) does.
  r.commit([] { return tensor::scalar(0); });
  CHECK(writes.empty());
  r.commit([] { return tensor::scalar(0); }, true);
  REQUIRE(writes.size() == 1);
  writes[0](status{});
  writes.clear();
  images.clear();
  // Small images pipeline: a write each.
  r.defer(reply);
  r.commit([] { return tensor::scalar(0); });
  r.defer(reply);
  r.commit([] { return tensor::scalar(0); });
  REQUIRE(writes.size() == 2);
  writes[1](status{});
  writes[0](status{});
  CHECK(got.size() == 3);
  writes.clear();
  images.clear();
  got.clear();
  got.push_back(status{});
  // A large image in flight: the operations after it wait for it.
  tensor large{dtype::int32, tensor_shape{{64 * 1024}}};
  r.defer(reply);
  r.defer(reply);
  r.commit([&] { return large; });
  REQUIRE(writes.size() == 1);
  // Two more operations while the first write is in flight: no write
  // yet; then one for both, of the state as it is when it starts.
  int state = 2;
  r.defer(reply);
  r.commit([&] { return tensor::scalar(state); });
  r.defer(reply);
  state = 3;
  r.commit([&] { return tensor::scalar(state); });
  CHECK(writes.size() == 1);
  CHECK(got.size() == 1);
  writes[0](status{});
  CHECK(got.size() == 3);
  REQUIRE(writes.size() == 2);
  CHECK(images[1].scalar_value<int>() == 3);
  writes[1](status{error_code::unavailable, "no backup"});
  REQUIRE(got.size() == 5);
  CHECK(got[3].code() == error_code::unavailable);
  CHECK(got[4].code() == error_code::unavailable);
  CHECK(writes.size() == 2); // nothing changed since
  // The actor ends with a write in flight: its replies get the reason at
  // once; the write's late answer changes nothing.
  r.defer(reply);
  r.commit([] { return tensor::scalar(4); });
  REQUIRE(writes.size() == 3);
  r.end({error_code::aborted, "freed"});
  REQUIRE(got.size() == 6);
  CHECK(got[5].code() == error_code::aborted);
  writes[2](status{});
  CHECK(got.size() == 6);
}

namespace {

/// What a client actor got: the status and outputs of each reply.
struct answers {
  std::vector<status> results;
  std::vector<std::vector<tensor>> outputs;
};

class durable_fixture : public actorflow::testing::coordinated_system {
public:
  durable_fixture() {
    auto bytes = tensor_shape{{-1}};
    primary = spawn_variable(sys_, "_state/q", dtype::uint8, bytes,
                             {.name = "_state/q", .container = "", .task = ""},
                             {replica_role::orphan, 1, "/job:ps/task:0", {},
                              {}});
    backup = spawn_variable(sys_, "_state/q", dtype::uint8, bytes,
                            {.name = "backup", .container = "", .task = ""},
                            {replica_role::backup, 0, "/job:ps/task:0", {},
                             {}});
  }

  ~durable_fixture() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& a : {primary, backup})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    drain();
  }

  /// Sends `xs` to `dest` and runs everything; the answers land in the
  /// result.
  template <class Dest, class... Ts>
  std::shared_ptr<answers> ask(const Dest& dest, Ts... xs) {
    auto out = std::make_shared<answers>();
    sys_.spawn([dest, out, xs...](caf::event_based_actor* self) {
      self->request(dest, caf::infinite, xs...)
        .then(
          [out](status& st, std::vector<tensor>& values) {
            out->results.push_back(std::move(st));
            out->outputs.push_back(std::move(values));
          },
          [out](caf::error& err) {
            out->results.push_back(to_status(err));
            out->outputs.emplace_back();
          });
    });
    drain();
    return out;
  }

  void attach() {
    caf::anon_send(primary, set_backup_atom_v,
                   caf::actor_cast<caf::actor>(backup), int64_t{1});
    drain();
  }

  /// What the backup holds, once promoted (epoch 2).
  tensor promoted_image() {
    auto done = std::make_shared<tensor>();
    sys_.spawn([b = backup, done](caf::event_based_actor* self) {
      self->request(b, caf::infinite, promote_atom_v, int64_t{2})
        .then([self, b, done](status&) {
          self->request(b, caf::infinite, read_atom_v)
            .then([done](status& st, tensor& value) {
              if (st.ok())
                *done = value;
            });
        });
    });
    drain();
    return *done;
  }

  template <class Handle>
  Handle keep(Handle h) {
    actors.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  variable_actor primary;
  variable_actor backup;
  std::vector<caf::actor> actors;
};

queue_options scalar_queue() {
  queue_options o;
  o.name = "q";
  o.types = {dtype::float32};
  o.shapes = {tensor_shape{}};
  return o;
}

accumulator_options vector_accumulator() {
  accumulator_options o;
  o.name = "acc";
  o.type = dtype::float32;
  o.shape = tensor_shape{{2}};
  return o;
}

std::vector<tensor> one(float x) {
  return {tensor::scalar(x)};
}

} // namespace

TEST_CASE_METHOD(durable_fixture,
                 "durable state: a replicated queue answers once its state "
                 "is held, applies a retried enqueue once, and its backup "
                 "rebuilds it with leased elements first",
                 "[replication][durable]") {
  auto q = keep(spawn_queue(sys_, scalar_queue(), {}, {primary, {}}));
  // No backup yet: the variable refuses the image, so the enqueue is not
  // acknowledged (its step fails and is retried).
  auto first = ask(q, enqueue_atom_v, one(1), int64_t{1}, int64_t{100});
  REQUIRE(first->results.size() == 1);
  CHECK(first->results[0].code() == error_code::unavailable);
  attach();
  // The retry (same tag) applies nothing more, and is acknowledged now.
  auto retry = ask(q, enqueue_atom_v, one(1), int64_t{2}, int64_t{100});
  REQUIRE(retry->results.size() == 1);
  CHECK(retry->results[0].ok());
  CHECK(ask(q, enqueue_atom_v, one(2), int64_t{3}, int64_t{101})
          ->results[0]
          .ok());
  auto size = ask(q, queue_size_atom_v);
  REQUIRE(size->outputs[0].size() == 1);
  CHECK(size->outputs[0][0].scalar_value<int32_t>() == 2);
  // Step 4 dequeues 1.0 and never commits (its primary dies with it).
  auto taken = ask(q, dequeue_atom_v, int64_t{4});
  REQUIRE(taken->results[0].ok());
  CHECK(taken->outputs[0][0] == tensor::scalar(1.0f));
  // The backup, promoted, holds the queue with 1.0 back at the head.
  auto image = promoted_image();
  REQUIRE(image.valid());
  auto again = keep(spawn_queue(sys_, scalar_queue(), {}, {backup, image}));
  auto head = ask(again, dequeue_atom_v, int64_t{5});
  REQUIRE(head->results[0].ok());
  CHECK(head->outputs[0][0] == tensor::scalar(1.0f));
  auto next = ask(again, dequeue_atom_v, int64_t{5});
  CHECK(next->outputs[0][0] == tensor::scalar(2.0f));
  // The tag applied on the old primary stays applied.
  CHECK(ask(again, enqueue_atom_v, one(1), int64_t{6}, int64_t{100})
          ->results[0]
          .ok());
  CHECK(ask(again, queue_size_atom_v)->outputs[0][0].scalar_value<int32_t>()
        == 0);
}

TEST_CASE_METHOD(durable_fixture,
                 "durable state: a replicated accumulator counts a retried "
                 "gradient once, and a retried take gets the first take's "
                 "gradient from the promoted backup",
                 "[replication][durable]") {
  attach();
  auto acc = keep(
    spawn_accumulator(sys_, vector_accumulator(), {}, {primary, {}}));
  auto grad = [](float x) { return tensor::vec<float>({x, x}); };
  CHECK(ask(acc, apply_gradient_atom_v, grad(2), int64_t{0}, std::string{},
            int64_t{10})
          ->results[0]
          .ok());
  // The same step again (retried): counted once.
  CHECK(ask(acc, apply_gradient_atom_v, grad(2), int64_t{0}, std::string{},
            int64_t{10})
          ->results[0]
          .ok());
  CHECK(ask(acc, num_accumulated_atom_v)->outputs[0][0].scalar_value<int32_t>()
        == 1);
  CHECK(ask(acc, apply_gradient_atom_v, grad(4), int64_t{0}, std::string{},
            int64_t{11})
          ->results[0]
          .ok());
  auto taken = ask(acc, take_gradient_atom_v, int64_t{2}, int64_t{7},
                   int64_t{20});
  REQUIRE(taken->results[0].ok());
  CHECK(taken->outputs[0][0] == grad(3));
  // A worker that got its token already sends the next step's gradient;
  // the update's step can still fail and be retried after that.
  CHECK(ask(acc, apply_gradient_atom_v, grad(10), int64_t{1}, std::string{},
            int64_t{12})
          ->results[0]
          .ok());
  // The primary dies before the update finished: the retried take on the
  // promoted backup gets the same gradient, and the state after it.
  auto image = promoted_image();
  REQUIRE(image.valid());
  auto again = keep(
    spawn_accumulator(sys_, vector_accumulator(), {}, {backup, image}));
  auto retried = ask(again, take_gradient_atom_v, int64_t{2}, int64_t{8},
                     int64_t{20});
  REQUIRE(retried->results[0].ok());
  CHECK(retried->outputs[0][0] == grad(3));
  auto who = ask(again, accumulator_replicas_atom_v);
  REQUIRE(who->outputs[0].size() == 5);
  CHECK(who->outputs[0][3].scalar_value<int64_t>() == 1); // global step
  // The next step's gradient stays for the next update.
  CHECK(who->outputs[0][4].scalar_value<int32_t>() == 1);
}

TEST_CASE_METHOD(durable_fixture,
                 "durable state: a retried take that waits behind its failed "
                 "attempt gets the gradient that attempt took",
                 "[replication][durable]") {
  attach();
  auto acc = keep(
    spawn_accumulator(sys_, vector_accumulator(), {}, {primary, {}}));
  // Step 7's take waits; its step failed elsewhere and is retried as step
  // 8 (same tag) before step 7 was withdrawn here.
  auto failed = std::make_shared<answers>();
  auto retry = std::make_shared<answers>();
  for (auto [step, out] : {std::pair{int64_t{7}, failed}, {int64_t{8}, retry}})
    sys_.spawn([acc, out, step = step](caf::event_based_actor* self) {
      self->request(acc, caf::infinite, take_gradient_atom_v, int64_t{2},
                    step, int64_t{30})
        .then([out](status& st, std::vector<tensor>& values) {
          out->results.push_back(std::move(st));
          out->outputs.push_back(std::move(values));
        });
    });
  drain();
  auto grad = [](float x) { return tensor::vec<float>({x, x}); };
  for (auto [x, tag] : {std::pair{1.0f, int64_t{1}}, {3.0f, int64_t{2}}})
    ask(acc, apply_gradient_atom_v, grad(x), int64_t{0}, std::string{}, tag);
  // Both answered with the one update's gradient; nothing else taken.
  REQUIRE(failed->results.size() == 1);
  REQUIRE(retry->results.size() == 1);
  CHECK(failed->outputs[0][0] == grad(2));
  REQUIRE(retry->results[0].ok());
  CHECK(retry->outputs[0][0] == grad(2));
  auto who = ask(acc, accumulator_replicas_atom_v);
  CHECK(who->outputs[0][3].scalar_value<int64_t>() == 1);
  // Step 7's withdrawal comes late: nothing happens.
  caf::anon_send(acc, cancel_step_atom_v, int64_t{7});
  drain();
  CHECK(ask(acc, num_accumulated_atom_v)->outputs[0][0].scalar_value<int32_t>()
        == 0);
}

TEST_CASE("durable state: an unreadable image fails every operation with "
          "DataLoss instead of serving an empty queue",
          "[replication][durable]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{deterministic(cfg)};
  auto& sched
    = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto var = spawn_variable(sys, "_state/q", dtype::uint8, tensor_shape{{-1}},
                            {.name = "_state/q", .container = "", .task = ""},
                            {});
  auto q = spawn_queue(sys, scalar_queue(), {},
                       {var, bytes_tensor("garbage")});
  auto out = std::make_shared<status>();
  sys.spawn([q, out](caf::event_based_actor* self) {
    self->request(q, caf::infinite, dequeue_atom_v, int64_t{1})
      .then([out](status& st, std::vector<tensor>&) { *out = st; });
  });
  while (sched.try_run_once()) {
    // next
  }
  CHECK(out->code() == error_code::data_loss);
  CHECK_THAT(out->message(), Catch::Contains("FIFOQueue 'q'"));
  caf::anon_send_exit(q, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(var, caf::exit_reason::user_shutdown);
  while (sched.try_run_once()) {
    // next
  }
}
