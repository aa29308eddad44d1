// The queue graph-building API against TensorFlow 1.x's data_flow_ops
// (tf_semantics §7.1-7.2 graph-time checks, §3.3 colocation, case 68).

#include <catch2/catch.hpp>

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

using strings = std::vector<std::string>;
using dtypes = std::vector<dtype>;
using shapes = std::vector<tensor_shape>;

} // namespace

TEST_CASE("queue nodes carry TF's attributes", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32, dtype::int32}, {tensor_shape{}, {2}}};
  CHECK(q.name() == "fifo_queue");
  auto& d = q.op().def();
  CHECK(d.op == "FIFOQueueV2");
  CHECK(d.inputs.empty());
  CHECK(d.attr<dtypes>("component_types")
        == dtypes{dtype::float32, dtype::int32});
  CHECK(d.attr<shapes>("shapes") == shapes{tensor_shape{}, tensor_shape{2}});
  CHECK(d.attr<int64_t>("capacity") == 10);
  CHECK(d.attr<std::string>("container").empty());
  CHECK(d.attr<std::string>("shared_name").empty());
  CHECK(q.handle().name() == "fifo_queue:0");
  CHECK(q.handle().type() == dtype::string);
  CHECK(q.handle().shape() == tensor_shape{});
  CHECK(q.dtypes() == dtypes{dtype::float32, dtype::int32});
  CHECK(q.shapes() == shapes{tensor_shape{}, tensor_shape{2}});
  // Unknown shapes = an empty list; unbounded capacity; default names are
  // made unique.
  fifo_queue q2{-1, {dtype::string}, {}, "shared"};
  CHECK(q2.name() == "fifo_queue_1");
  CHECK(q2.op().def().attr<shapes>("shapes").empty());
  CHECK(q2.op().def().attr<int64_t>("capacity") == -1);
  CHECK(q2.op().def().attr<std::string>("shared_name") == "shared");
  padding_fifo_queue p{5, {dtype::string}, {tensor_shape{-1, 3}}};
  CHECK(p.name() == "padding_fifo_queue");
  CHECK(p.op().type() == "PaddingFIFOQueueV2");
  CHECK(p.op().def().attr<shapes>("shapes") == shapes{tensor_shape{-1, 3}});
  random_shuffle_queue r{10, 2, {dtype::float32}};
  CHECK(r.name() == "random_shuffle_queue");
  CHECK(r.op().type() == "RandomShuffleQueueV2");
  CHECK(r.op().def().attr<int64_t>("min_after_dequeue") == 2);
  CHECK(r.op().def().attr<int64_t>("seed") == 0);
  CHECK(r.op().def().attr<int64_t>("seed2") == 0);
  fifo_queue named{3, {dtype::float32}, {}, "", "q"};
  CHECK(named.name() == "q");
  {
    name_scope ns{"inputs"};
    fifo_queue scoped{3, {dtype::float32}};
    CHECK(scoped.name() == "inputs/fifo_queue");
    // Ops are named after the queue's last name component, in the current
    // scope.
    CHECK(scoped.size().op().name() == "inputs/fifo_queue_Size");
  }
}

TEST_CASE("queue ops: names, op types, inputs and attributes",
          "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32, dtype::int32}, {tensor_shape{}, {2}}};
  auto f = constant(1.0f);
  auto i = constant(std::vector<int32_t>{1, 2});
  auto enq = q.enqueue({f, i});
  CHECK(enq.name() == "fifo_queue_enqueue");
  CHECK(enq.type() == "QueueEnqueueV2");
  CHECK(enq.def().inputs == strings{"fifo_queue", "Const", "Const_1"});
  CHECK(enq.def().attr<dtypes>("Tcomponents")
        == dtypes{dtype::float32, dtype::int32});
  CHECK(enq.num_outputs() == 0);
  CHECK(q.enqueue({f, i}).name() == "fifo_queue_enqueue_1");
  CHECK(q.enqueue({f, i}, "my_enq").name() == "my_enq");

  auto fs = constant(std::vector<float>{1, 2, 3});
  auto is = constant(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, tensor_shape{3, 2});
  auto many = q.enqueue_many({fs, is});
  CHECK(many.name() == "fifo_queue_EnqueueMany");
  CHECK(many.type() == "QueueEnqueueManyV2");
  CHECK(many.def().inputs == strings{"fifo_queue", "Const_2", "Const_3"});
  CHECK(many.def().attr<dtypes>("Tcomponents")
        == dtypes{dtype::float32, dtype::int32});

  auto deq = q.dequeue();
  REQUIRE(deq.size() == 2);
  CHECK(deq[0].name() == "fifo_queue_Dequeue:0");
  CHECK(deq[1].name() == "fifo_queue_Dequeue:1");
  CHECK(deq[0].type() == dtype::float32);
  CHECK(deq[1].type() == dtype::int32);
  CHECK(deq[0].shape() == tensor_shape{});
  CHECK(deq[1].shape() == tensor_shape{2});
  auto& dd = deq[0].op().def();
  CHECK(dd.op == "QueueDequeueV2");
  CHECK(dd.inputs == strings{"fifo_queue"});
  CHECK(dd.attr<dtypes>("component_types")
        == dtypes{dtype::float32, dtype::int32});

  auto dm = q.dequeue_many(4);
  auto& dmd = dm[0].op().def();
  CHECK(dmd.name == "fifo_queue_DequeueMany");
  CHECK(dmd.op == "QueueDequeueManyV2");
  CHECK(dmd.inputs == strings{"fifo_queue", "fifo_queue_DequeueMany/n"});
  CHECK(dmd.attr<dtypes>("component_types")
        == dtypes{dtype::float32, dtype::int32});
  auto n_op = g.find_operation("fifo_queue_DequeueMany/n");
  REQUIRE(n_op.valid());
  CHECK(n_op.type() == "Const");
  CHECK(n_op.out(0).type() == dtype::int32);
  CHECK(n_op.def().attr<tensor>("value").scalar_value<int32_t>() == 4);

  auto count = placeholder(dtype::int32, tensor_shape{}, "count");
  auto dm2 = q.dequeue_many(count);
  CHECK(dm2[0].op().name() == "fifo_queue_DequeueMany_1");
  CHECK(dm2[0].op().def().inputs == strings{"fifo_queue", "count"});

  auto up = q.dequeue_up_to(3);
  CHECK(up[0].op().name() == "fifo_queue_DequeueUpTo");
  CHECK(up[0].op().type() == "QueueDequeueUpToV2");
  CHECK(up[0].op().def().inputs
        == strings{"fifo_queue", "fifo_queue_DequeueUpTo/n"});
  auto up2 = q.dequeue_up_to(count);
  CHECK(up2[0].op().def().inputs == strings{"fifo_queue", "count"});

  auto cl = q.close();
  CHECK(cl.name() == "fifo_queue_Close");
  CHECK(cl.type() == "QueueCloseV2");
  CHECK(cl.def().inputs == strings{"fifo_queue"});
  CHECK(cl.def().attr<bool>("cancel_pending_enqueues") == false);
  CHECK(cl.num_outputs() == 0);
  auto cl2 = q.close(true);
  CHECK(cl2.name() == "fifo_queue_Close_1");
  CHECK(cl2.def().attr<bool>("cancel_pending_enqueues") == true);

  auto sz = q.size();
  CHECK(sz.name() == "fifo_queue_Size:0");
  CHECK(sz.op().type() == "QueueSizeV2");
  CHECK(sz.op().def().inputs == strings{"fifo_queue"});
  CHECK(sz.type() == dtype::int32);
  CHECK(sz.shape() == tensor_shape{});

  auto ic = q.is_closed();
  CHECK(ic.name() == "fifo_queue_IsClosed:0");
  CHECK(ic.op().type() == "QueueIsClosedV2");
  CHECK(ic.type() == dtype::bool_);
  CHECK(ic.shape() == tensor_shape{});
}

TEST_CASE("queue ops are colocated with the queue", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  std::optional<fifo_queue> q;
  {
    device_scope ps{"/job:ps"};
    q.emplace(10, dtypes{dtype::float32}, shapes{}, "", "q");
  }
  CHECK(q->op().device() == "/job:ps");
  CHECK(q->op().colocation_groups() == strings{"loc:@q"});
  device_scope worker{"/job:worker/task:7"};
  auto x = constant(1.0f);
  CHECK(x.device() == "/job:worker/task:7");
  std::vector<operation> ops{q->enqueue({x}), q->enqueue_many({constant(
                                                std::vector<float>{1, 2})}),
                             q->dequeue()[0].op(), q->close(),
                             q->size().op(), q->is_closed().op()};
  auto n = placeholder(dtype::int32, tensor_shape{});
  ops.push_back(q->dequeue_many(n)[0].op());
  ops.push_back(q->dequeue_up_to(2)[0].op());
  for (auto& op : ops) {
    INFO(op.name());
    CHECK(op.device() == "/job:ps");
    CHECK(op.colocation_groups() == strings{"loc:@q"});
  }
  // The count constant is colocated too; scopes apply again afterwards.
  auto cn = g.find_operation("q_DequeueUpTo/n");
  REQUIRE(cn.valid());
  CHECK(cn.device() == "/job:ps");
  CHECK(constant(2.0f).device() == "/job:worker/task:7");
}

TEST_CASE("container_scope applies to queue nodes only", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  container_scope c{"experiment"};
  fifo_queue q{10, {dtype::float32}};
  random_shuffle_queue r{10, 0, {dtype::float32}};
  padding_fifo_queue p{10, {dtype::float32}, {tensor_shape{-1}}};
  CHECK(q.op().def().attr<std::string>("container") == "experiment");
  CHECK(r.op().def().attr<std::string>("container") == "experiment");
  CHECK(p.op().def().attr<std::string>("container") == "experiment");
  CHECK_FALSE(q.size().op().def().has_attr("container"));
}

TEST_CASE("queue ops pick up control dependencies", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}};
  auto x = constant(1.0f);
  auto enq = q.enqueue({x});
  control_dependencies deps{enq};
  auto sz = q.size();
  CHECK(sz.op().control_inputs() == strings{"fifo_queue_enqueue"});
}

TEST_CASE("queue construction errors", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  check_invalid(error_of([] {
                  fifo_queue q{10, {dtype::float32, dtype::int32},
                               {tensor_shape{}}};
                }),
                "Queue shapes must have the same length as dtypes");
  check_invalid(error_of([] {
                  fifo_queue q{10, {dtype::float32}, {tensor_shape{-1, 2}}};
                }),
                "All shapes must be fully defined");
  check_invalid(error_of([] {
                  fifo_queue q{10, {dtype::float32}, {tensor_shape::unknown()}};
                }),
                "All shapes must be fully defined");
  check_invalid(error_of([] {
                  random_shuffle_queue q{10, 0, {dtype::float32},
                                         {tensor_shape{-1}}};
                }),
                "All shapes must be fully defined");
  check_invalid(error_of([] {
                  random_shuffle_queue q{10, 0, {dtype::float32, dtype::int32},
                                         {tensor_shape{}}};
                }),
                "Queue shapes must have the same length as dtypes");
  check_invalid(error_of([] {
                  padding_fifo_queue q{10, {dtype::float32}, {}};
                }),
                "When providing partial shapes, a list of shapes must be "
                "provided.");
  check_invalid(error_of([] {
                  padding_fifo_queue q{10, {dtype::float32, dtype::int32},
                                       {tensor_shape{-1}}};
                }),
                "Shapes must be provided for all components, but received 2 "
                "dtypes and 1 shapes.");
  check_invalid(error_of([] {
                  padding_fifo_queue q{10, {dtype::float32},
                                       {tensor_shape::unknown()}};
                }),
                "All shapes must have a defined rank");
  check_invalid(error_of([] { fifo_queue q{10, {}}; }),
                "at least one component");
  check_invalid(error_of([] {
                  random_shuffle_queue q{5, 5, {dtype::float32}};
                }),
                "min_after_dequeue 5 must be < capacity 5");
  check_invalid(error_of([] {
                  random_shuffle_queue q{5, 6, {dtype::float32}};
                }),
                "min_after_dequeue 6 must be < capacity 5");
  check_invalid(error_of([] {
                  random_shuffle_queue q{5, -1, {dtype::float32}};
                }),
                "min_after_dequeue -1 must be >= 0");
  // Unbounded capacity accepts any min_after_dequeue >= 0.
  random_shuffle_queue unbounded{-1, 100, {dtype::float32}};
  CHECK(unbounded.op().def().attr<int64_t>("capacity") == -1);
  // Failed constructions leave no node behind.
  CHECK(g.num_nodes() == 1);
}

TEST_CASE("enqueue errors at graph time", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  // Case 63: a 2x3 value into a (3,2) queue.
  fifo_queue q32{10, {dtype::float32}, {tensor_shape{3, 2}}};
  auto ok = zeros({3, 2});
  CHECK(q32.enqueue({ok}).valid());
  check_invalid(error_of([&] { q32.enqueue({zeros({2, 3})}); }),
                "Shapes [2,3] and [3,2] are incompatible");
  // Partial static shapes that may match are fine.
  CHECK(q32.enqueue({placeholder(dtype::float32, tensor_shape{-1, 2})})
          .valid());
  CHECK(q32.enqueue({placeholder(dtype::float32)}).valid());
  // No implicit conversion: an int32 placeholder into a float32 component.
  check_invalid(error_of([&] {
                  q32.enqueue({placeholder(dtype::int32, tensor_shape{3, 2})});
                }),
                "Tensor conversion requested dtype float32 for Tensor with "
                "dtype int32");
  // Arity.
  check_invalid(error_of([&] { q32.enqueue({ok, ok}); }),
                "Wrong number of components in tuple. Expected 1, got 2");
  check_invalid(error_of([&] { q32.enqueue({}); }),
                "Wrong number of components in tuple. Expected 1, got 0");
  check_invalid(error_of([&] { q32.enqueue_many({}); }),
                "Wrong number of components in tuple. Expected 1, got 0");
  // Case 64.
  fifo_queue q{10, {dtype::int32, dtype::int32}, {tensor_shape{}, {2}}};
  check_invalid(error_of([&] {
                  q.enqueue({constant(std::vector<int32_t>{1, 2}),
                             constant(std::vector<int32_t>{2, 2})});
                }),
                "are incompatible");
  check_invalid(error_of([&] {
                  q.enqueue_many(
                    {constant(7), constant(std::vector<int32_t>{1, 2, 3, 4, 5, 6},
                                           tensor_shape{3, 2})});
                }),
                "must have rank at least 1");
  // Case 65: batch-dimension mismatch.
  fifo_queue q3{10,
                {dtype::int32, dtype::int32, dtype::int32},
                {tensor_shape{}, tensor_shape{}, tensor_shape{}}};
  check_invalid(error_of([&] {
                  q3.enqueue_many({constant(std::vector<int32_t>{1, 2, 3}),
                                   constant(std::vector<int32_t>{1, 2}),
                                   constant(std::vector<int32_t>{1, 2, 3})});
                }),
                "Dimensions 3 and 2 are not compatible");
  // An unknown batch dim is compatible with any known one.
  CHECK(q3.enqueue_many({constant(std::vector<int32_t>{1, 2, 3}),
                         placeholder(dtype::int32, tensor_shape{-1}),
                         constant(std::vector<int32_t>{1, 2, 3})})
          .valid());
  // The element shape after the batch dim must be compatible.
  check_invalid(error_of([&] {
                  q.enqueue_many({constant(std::vector<int32_t>{1, 2}),
                                  zeros({2, 3}, dtype::int32)});
                }),
                "Shapes [3] and [2] are incompatible");
  check_invalid(error_of([&] {
                  q.enqueue_many({constant(std::vector<int32_t>{1, 2}),
                                  zeros({2, 2}, dtype::float32)});
                }),
                "Tensor conversion requested dtype int32");
  // Without shapes anything of the right dtypes goes (rank >= 1 for many).
  fifo_queue any{10, {dtype::float32}};
  CHECK(any.enqueue({zeros({7, 7})}).valid());
  CHECK(any.enqueue_many({zeros({0, 2, 3})}).valid());
  check_invalid(error_of([&] { any.enqueue_many({constant(1.0f)}); }),
                "must have rank at least 1");
  // Padding queues check compatibility with the partial shape.
  padding_fifo_queue p{10, {dtype::string}, {tensor_shape{-1}}};
  CHECK(p.enqueue({constant(std::vector<std::string>{"a", "b"})}).valid());
  check_invalid(error_of([&] { p.enqueue({constant("a")}); }),
                "are incompatible");
  // Values from another graph.
  graph other;
  output foreign;
  {
    auto as_other = other.as_default();
    foreign = constant(1.0f);
  }
  check_invalid(error_of([&] { any.enqueue({foreign}); }),
                "must be from the queue's graph");
}

TEST_CASE("dequeue static shapes (case 68)", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::int32, dtype::int32}, {tensor_shape{}, {2}}};
  auto many = q.dequeue_many(4);
  REQUIRE(many.size() == 2);
  CHECK(many[0].shape() == tensor_shape{4});
  CHECK(many[1].shape() == tensor_shape{4, 2});
  CHECK(many[0].type() == dtype::int32);
  auto up = q.dequeue_up_to(4);
  CHECK(up[0].shape() == tensor_shape{-1});
  CHECK(up[1].shape() == tensor_shape{-1, 2});
  // A Const count given as an output is folded like TF's constant_value.
  auto four = constant(4);
  CHECK(q.dequeue_many(four)[1].shape() == tensor_shape{4, 2});
  CHECK(q.dequeue_many(0)[1].shape() == tensor_shape{0, 2});
  // A computed count gives an unknown batch dimension.
  auto n = placeholder(dtype::int32, tensor_shape{});
  auto var = q.dequeue_many(n);
  CHECK(var[0].shape() == tensor_shape{-1});
  CHECK(var[1].shape() == tensor_shape{-1, 2});
  // Without shapes, everything is unknown.
  fifo_queue any{10, {dtype::float32}};
  CHECK(any.dequeue()[0].shape().unknown_rank());
  CHECK(any.dequeue_many(3)[0].shape().unknown_rank());
  CHECK(any.dequeue_up_to(3)[0].shape().unknown_rank());
  // Padding: None dims stay -1.
  padding_fifo_queue p{10,
                       {dtype::string, dtype::int32},
                       {tensor_shape{-1}, tensor_shape{1, -1}}};
  auto pd = p.dequeue();
  CHECK(pd[0].shape() == tensor_shape{-1});
  CHECK(pd[1].shape() == tensor_shape{1, -1});
  auto pm = p.dequeue_many(5);
  CHECK(pm[0].shape() == tensor_shape{5, -1});
  CHECK(pm[1].shape() == tensor_shape{5, 1, -1});
  auto pu = p.dequeue_up_to(5);
  CHECK(pu[1].shape() == tensor_shape{-1, 1, -1});
}

TEST_CASE("dequeue count errors", "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::float32}, {tensor_shape{}}};
  check_invalid(error_of([&] { q.dequeue_many(constant(int64_t{3})); }),
                "Input 'n' of 'QueueDequeueManyV2' Op has type int64 that "
                "does not match expected type of int32.");
  check_invalid(error_of([&] {
                  q.dequeue_up_to(constant(std::vector<int32_t>{1, 2}));
                }),
                "Shape must be rank 0 but is rank 1");
  check_invalid(error_of([&] { q.dequeue_many(-1); }),
                "Dimension -1 must be >= 0");
  check_invalid(error_of([&] { q.dequeue_up_to(-2); }),
                "Dimension -2 must be >= 0");
  // A negative fed count is the kernel's business.
  CHECK(q.dequeue_many(placeholder(dtype::int32, tensor_shape{}))[0].valid());
}

TEST_CASE("random_shuffle_queue seeds", "[queue_ops]") {
  auto seeds = [](const queue_base& q) {
    auto& d = q.op().def();
    return std::pair{d.attr<int64_t>("seed"), d.attr<int64_t>("seed2")};
  };
  {
    graph g;
    auto as_default = g.as_default();
    CHECK(seeds(random_shuffle_queue{10, 0, {dtype::float32}})
          == std::pair<int64_t, int64_t>{0, 0});
    // Shared name without any seed still means "nondeterministic".
    CHECK(seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 0, "s"})
          == std::pair<int64_t, int64_t>{0, 0});
    // An op seed alone uses the default graph seed.
    CHECK(seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 42})
          == std::pair<int64_t, int64_t>{87654321, 42});
  }
  {
    graph g;
    auto as_default = g.as_default();
    g.set_seed(7);
    CHECK(seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 42})
          == std::pair<int64_t, int64_t>{7, 42});
    // A graph seed alone derives seed2 from the node count.
    constant(1.0f);
    auto n = g.num_nodes();
    CHECK(seeds(random_shuffle_queue{10, 0, {dtype::float32}})
          == std::pair<int64_t, int64_t>{7, n});
    // With a shared name, seed2 depends on graph seed and name only.
    auto a = seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 0, "s"});
    constant(2.0f);
    auto b = seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 0, "s"});
    CHECK(a == b);
    CHECK(a.first == 7);
    CHECK(a.second >= 0);
    CHECK(a.second <= 0x7FFFFFFF);
    auto c = seeds(random_shuffle_queue{10, 0, {dtype::float32}, {}, 0, "t"});
    CHECK(c.second != a.second);
    // FNV-1a-32("7s") & 0x7FFFFFFF, fixed across builds.
    uint32_t h = 2166136261u;
    for (unsigned char ch : std::string{"7s"}) {
      h ^= ch;
      h *= 16777619u;
    }
    CHECK(a.second == static_cast<int64_t>(h & 0x7FFFFFFFu));
  }
}

TEST_CASE("queue handles from other graphs build there", "[queue_ops]") {
  graph g;
  std::optional<fifo_queue> q;
  {
    auto as_default = g.as_default();
    q.emplace(3, dtypes{dtype::float32});
  }
  graph other;
  auto as_other = other.as_default();
  auto sz = q->size();
  CHECK(sz.owner() == &g);
  CHECK(other.num_nodes() == 0);
  CHECK(queue_base{}.valid() == false);
  check_invalid(error_of([] { queue_base{}.size(); }), "empty queue handle");
}

TEST_CASE("queue names: dictionaries in and out, TF's key checks",
          "[queue_ops]") {
  graph g;
  auto as_default = g.as_default();
  fifo_queue q{10, {dtype::int32, dtype::float32},
               {tensor_shape{}, tensor_shape{2}}};
  check_invalid(error_of([&] { q.set_names({"only_one"}); }),
                "Queue names must have the same length as dtypes");
  check_invalid(error_of([&] {
                  q.enqueue_named({{"a", constant(1)}});
                }),
                "Queue must have names to enqueue a dictionary");
  q.set_names({"label", "x"});
  auto label = constant(int32_t{3});
  auto x = constant(std::vector<float>{1, 2}, tensor_shape{2});
  // Component order comes from the names, not from the map.
  auto enq = q.enqueue_named({{"x", x}, {"label", label}});
  CHECK(enq.def().inputs
        == std::vector<std::string>{"fifo_queue", label.op().name(),
                                    x.op().name()});
  check_invalid(error_of([&] { q.enqueue({label, x}); }),
                "You must enqueue a dictionary in a Queue with names");
  check_invalid(error_of([&] {
                  q.enqueue_named({{"label", label}, {"y", x}});
                }),
                "Keys in dictionary to enqueue do not match names of Queue. "
                "Dictionary: [label, y], Queue: [label, x]");
  auto out = q.named(q.dequeue());
  REQUIRE(out.size() == 2);
  CHECK(out.at("label").type() == dtype::int32);
  CHECK(out.at("x").shape() == tensor_shape{2});
  auto xs = constant(std::vector<float>{1, 2, 3, 4}, tensor_shape{2, 2});
  auto labels = constant(std::vector<int32_t>{1, 2}, tensor_shape{2});
  CHECK(q.enqueue_many_named({{"label", labels}, {"x", xs}}).def().op
        == "QueueEnqueueManyV2");
  CHECK(q.named(q.dequeue_many(2)).at("x").shape() == tensor_shape{2, 2});
}
