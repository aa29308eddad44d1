// classify: what the executor does with each node, decided once at
// registration (actors/src/node_class.hpp).

#include <catch2/catch.hpp>

#include "actorflow/graph/wire.hpp"
#include "node_class.hpp"

using namespace actorflow;

namespace {

node_def node(std::string op, std::string name = "n") {
  node_def n;
  n.op = std::move(op);
  n.name = std::move(name);
  return n;
}

node_class of(const node_def& n) {
  return classify(n, "/job:w/replica:0/task:0/session:3", "w");
}

} // namespace

TEST_CASE("classify: plumbing carries its index, device and key",
          "[node_class]") {
  auto arg = node("_Arg");
  arg.attrs["index"] = int64_t{2};
  auto c = of(arg);
  CHECK(c.kind == node_kind::arg);
  CHECK(c.plumbing);
  CHECK(std::get<index_info>(c.detail).index == 2);
  auto send = node("_Send");
  send.attrs["recv_device"] = std::string{"/job:ps/replica:0/task:0/device:CPU:0"};
  send.attrs["tensor_name"] = std::string{"edge_1_x"};
  c = of(send);
  CHECK(c.kind == node_kind::send);
  CHECK(std::get<send_info>(c.detail).recv_device
        == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(c.rendezvous_key == "edge_1_x");
  CHECK(of(node("_Recv")).kind == node_kind::recv);
  CHECK(of(node("_Retval")).plumbing);
  CHECK(of(node("NoOp")).kind == node_kind::no_op);
  CHECK_FALSE(of(node("NoOp")).ref_consumer);
}

TEST_CASE("classify: resources name their container and shared name, or "
          "a session-private name",
          "[node_class]") {
  auto var = node("VariableV2", "weights");
  var.attrs["dtype"] = dtype::float32;
  auto c = of(var);
  CHECK(c.kind == node_kind::variable);
  CHECK(c.ref_output);
  auto& r = std::get<resource_info>(c.detail);
  CHECK(r.container == "w");
  CHECK(r.name == "weights");
  CHECK(r.type == dtype::float32);
  CHECK_FALSE(r.shape_bytes.empty());
  auto q = node("FIFOQueueV2", "q");
  q.attrs["container"] = std::string{"c1"};
  c = of(q);
  CHECK(c.kind == node_kind::queue);
  auto& rq = std::get<resource_info>(c.detail);
  CHECK(rq.container == "c1");
  CHECK(rq.name == "_/job:w/replica:0/task:0/session:3_q");
  graph_def g;
  REQUIRE(from_bytes(rq.node_bytes, g).ok());
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].name == "q");
  q.attrs["shared_name"] = std::string{"shared_q"};
  CHECK(std::get<resource_info>(of(q).detail).name == "shared_q");
  CHECK(of(node("WholeFileReaderV2")).kind == node_kind::reader);
  CHECK(of(node("ConditionalAccumulator")).kind == node_kind::accumulator);
}

TEST_CASE("classify: operations on resources take the handle as a ref",
          "[node_class]") {
  auto deq = node("QueueDequeueManyV2");
  deq.attrs["cancel_pending_enqueues"] = true;
  auto c = of(deq);
  CHECK(c.kind == node_kind::queue_op);
  CHECK(c.ref_consumer);
  CHECK(c.ref_inputs == 1);
  CHECK(std::get<queue_call>(c.detail).op == queue_op::dequeue_many);
  CHECK(std::get<queue_call>(c.detail).cancel_pending_enqueues);
  CHECK(std::get<reader_call>(of(node("ReaderReadUpToV2")).detail).op
        == reader_op::read_up_to);
  CHECK(std::get<accumulator_call>(of(node("AccumulatorTakeGradient")).detail)
          .op
        == accumulator_op::take);
  auto adam = node("ApplyAdam");
  adam.attrs["_row_begin"] = int64_t{64};
  c = of(adam);
  CHECK(c.kind == node_kind::apply);
  CHECK(c.ref_inputs == 3);
  CHECK(std::get<apply_info>(c.detail).op == apply_info::training::adam);
  CHECK(std::get<apply_info>(c.detail).row_begin == 64);
  auto momentum = node("ApplyMomentum");
  momentum.attrs["use_nesterov"] = true;
  c = of(momentum);
  CHECK(c.ref_inputs == 2);
  CHECK(std::get<apply_info>(c.detail).use_nesterov);
  auto count = node("CountUpTo");
  count.attrs["limit"] = int64_t{9};
  c = of(count);
  CHECK(c.kind == node_kind::count_up_to);
  CHECK(std::get<variable_call>(c.detail).limit == 9);
  auto assign = node("Assign");
  assign.attrs["validate_shape"] = false;
  CHECK_FALSE(std::get<variable_call>(of(assign).detail).validate_shape);
  CHECK(of(node("AssignSub")).kind == node_kind::assign_sub);
}

TEST_CASE("classify: kernels are found once, and what cannot run is invalid "
          "with the error its steps fail with",
          "[node_class]") {
  auto c = of(node("MatMul"));
  CHECK(c.kind == node_kind::kernel);
  CHECK(c.heavy);
  CHECK(std::get<kernel_info>(c.detail).fn
        == builtin_kernels().find("MatMul"));
  CHECK_FALSE(of(node("Add")).heavy);
  auto unknown = of(node("NoSuchOp", "mystery"));
  CHECK(unknown.kind == node_kind::invalid);
  CHECK(std::get<status>(unknown.detail).code() == error_code::unimplemented);
  CHECK_THAT(std::get<status>(unknown.detail).message(),
             Catch::Contains("mystery"));
  // An attribute of the wrong kind: InvalidArgument, never a throw.
  auto bad = node("_Send", "bad_send");
  bad.attrs["recv_device"] = int64_t{7};
  auto b = of(bad);
  CHECK(b.kind == node_kind::invalid);
  CHECK(std::get<status>(b.detail).code() == error_code::invalid_argument);
  auto ph = node("Placeholder", "x");
  ph.attrs["dtype"] = dtype::float32;
  auto p = of(ph);
  CHECK(p.kind == node_kind::placeholder);
  CHECK_THAT(std::get<status>(p.detail).message(),
             Catch::Contains("You must feed a value for placeholder tensor 'x' "
                             "with dtype float"));
}
