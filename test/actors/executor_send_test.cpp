// A partition's `_Send` to another process (run_graph_request): a value of
// at most one chunk for a partition that only receives fetches comes back
// in the sender's reply (`held`), for the master to pass on; other values
// go straight to the receiving executor. The plan's peers come with a
// partition's first step only; later requests to another process, and
// their answers, may go over the tensor channel. Two actor systems in one
// process stand for the two processes (each has its own node id).

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/partition.hpp"
#include "actorflow/graph/placer.hpp"
#include "actorflow/graph/subgraph.hpp"
#include "actorflow/transport/tensor_channel.hpp"

using namespace actorflow;

namespace {

constexpr auto max_wait = std::chrono::seconds(30);

const std::string ps_device = "/job:ps/replica:0/task:0/device:CPU:0";
const std::string worker_device = "/job:worker/replica:0/task:0/device:CPU:0";

struct system_holder {
  explicit system_holder(bool channel = true) {
    add_types_impl(cfg);
    caf::put(cfg.content, "actorflow.tensor-channel", channel);
    add_options_impl(cfg);
    sys.emplace(cfg);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

// With `addresses`, the tasks' executors get tensor channel inboxes on
// 127.0.0.1 (the ports of the addresses themselves are not used here).
task_options task_of(const std::string& job, bool addresses = false) {
  task_options opts;
  opts.job = job;
  opts.task = 0;
  opts.cluster["/job:ps/replica:0/task:0"] = addresses ? "127.0.0.1:1" : "";
  opts.cluster["/job:worker/replica:0/task:0"] = addresses ? "127.0.0.1:2"
                                                           : "";
  return opts;
}

// `value` made on the ps and fetched on the worker, as the master plans
// it: one partition per device, the fetch on the worker's.
std::map<std::string, graph_def> fetch_from_ps(const tensor& value) {
  graph g;
  auto as_default = g.as_default();
  output c;
  {
    device_scope on_ps{"/job:ps/task:0"};
    c = constant(value);
  }
  subgraph sub;
  REQUIRE(build_subgraph(g.def(), {}, {c.name()}, {}, sub).ok());
  for (auto& n : sub.def.nodes)
    if (n.op == "_Retval")
      n.device = worker_device;
  placer_options popts;
  popts.devices = {ps_device, worker_device};
  REQUIRE(place(sub.def, popts).ok());
  std::map<std::string, graph_def> parts;
  REQUIRE(partition(sub.def, parts).ok());
  REQUIRE(parts.size() == 2);
  return parts;
}

// The executor and its tensor channel inbox ("" for none).
std::pair<executor_actor, std::string>
register_partition(caf::scoped_actor& self, const caf::actor& task,
                   const graph_def& part, const std::string& device) {
  std::pair<executor_actor, std::string> exec;
  // Partitions register with the task's worker, which its master names.
  worker_actor worker;
  self->request(caf::actor_cast<master_actor>(task), max_wait, get_worker_atom_v)
    .receive([&](worker_actor& w) { worker = std::move(w); },
             [&](caf::error& err) {
               FAIL("get_worker: " << caf::to_string(err));
             });
  REQUIRE(worker);
  self
    ->request(worker, max_wait, register_graph_atom_v, to_bytes(part), device,
              std::string{"session"})
    .receive(
      [&](status& err, executor_actor& x, std::string& inbox) {
        REQUIRE(err.ok());
        exec = {std::move(x), std::move(inbox)};
      },
      [&](caf::error& err) {
        FAIL("register_graph: " << caf::to_string(err));
      });
  return exec;
}

// Both tasks with their partition of `parts`; runs steps as a master does.
struct two_tasks {
  explicit two_tasks(const std::map<std::string, graph_def>& parts,
                     bool addresses = false, bool channel = true)
    : a(channel), b(channel), self_a(*a.sys), self_b(*b.sys) {
    ps = spawn_task(*b.sys, task_of("ps", addresses));
    worker = spawn_task(*a.sys, task_of("worker", addresses));
    std::tie(ps_exec, ps_inbox) = register_partition(self_b, ps,
                                                     parts.at(ps_device),
                                                     ps_device);
    std::tie(worker_exec, worker_inbox)
      = register_partition(self_a, worker, parts.at(worker_device),
                           worker_device);
  }

  ~two_tasks() {
    caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  }

  // Starts step `id` on both partitions; `first` sends the peers along.
  void start(int64_t id, bool first, bool sink = true) {
    for (auto exec : {worker_exec, ps_exec}) {
      run_graph_request req;
      req.step_id = id;
      std::vector<caf::actor> peers;
      if (first) {
        req.peer_devices = {worker_device, ps_device};
        if (sink)
          req.sink_devices = {worker_device};
        req.peer_inboxes = {worker_inbox, ps_inbox};
        peers = {caf::actor_cast<caf::actor>(worker_exec),
                 caf::actor_cast<caf::actor>(ps_exec)};
      }
      auto& self = exec == worker_exec ? self_a : self_b;
      self->send(exec, run_graph_atom_v, std::move(req), std::move(peers));
    }
  }

  run_graph_response reply_from(const executor_actor& exec) {
    auto& self = exec == worker_exec ? self_a : self_b;
    run_graph_response result;
    self->receive([&](run_graph_response& resp) { result = std::move(resp); },
                  caf::after(max_wait) >> [] { FAIL("no run_graph reply"); });
    return result;
  }

  // The ps's reply holds nothing back and the worker fetched `value`:
  // it went straight to the worker's executor.
  void expect_sent(const tensor& value) {
    auto ps_reply = reply_from(ps_exec);
    REQUIRE(ps_reply.result.ok());
    CHECK(ps_reply.held.empty());
    auto worker_reply = reply_from(worker_exec);
    REQUIRE(worker_reply.result.ok());
    REQUIRE(worker_reply.outputs.size() == 1);
    CHECK(worker_reply.outputs.front().second == value);
    // A fetch may be kept for long: never in the ring's room.
    CHECK_FALSE(worker_reply.outputs.front().second.borrowed());
  }

  system_holder a; // the worker's process
  system_holder b; // the ps's process
  caf::scoped_actor self_a;
  caf::scoped_actor self_b;
  caf::actor ps;
  caf::actor worker;
  executor_actor ps_exec;
  executor_actor worker_exec;
  std::string ps_inbox;
  std::string worker_inbox;
};

} // namespace

TEST_CASE("executor: a small value for a fetch-only partition in another "
          "process comes back in the sender's reply",
          "[executor]") {
  auto value = tensor::vec<float>({1.0f, 2.0f, 3.0f});
  two_tasks t{fetch_from_ps(value)};
  REQUIRE(t.a.sys->node() != t.b.sys->node());
  for (int64_t id : {1, 2}) {
    INFO("step " << id);
    // Step 2 brings no peers: the executors kept step 1's.
    t.start(id, id == 1);
    auto ps_reply = t.reply_from(t.ps_exec);
    REQUIRE(ps_reply.result.ok());
    REQUIRE(ps_reply.held.size() == 1);
    auto& held = ps_reply.held.front();
    CHECK(held.device == worker_device);
    CHECK(held.value == value);
    // The worker's partition finishes once the value is passed on.
    t.self_a->send(t.worker_exec, recv_tensor_atom_v, id, held.key,
                   held.value);
    auto worker_reply = t.reply_from(t.worker_exec);
    REQUIRE(worker_reply.result.ok());
    REQUIRE(worker_reply.outputs.size() == 1);
    CHECK(worker_reply.outputs.front().second == value);
    // A fetch may be kept for long: never in the ring's room.
    CHECK_FALSE(worker_reply.outputs.front().second.borrowed());
  }
}

TEST_CASE("executor: a value over one chunk, or for a partition that is not "
          "fetch-only, goes straight to its receiver",
          "[executor]") {
  SECTION("over one chunk") {
    std::vector<float> big(300000, 0.5f); // 1.2 MB: two chunks
    two_tasks t{fetch_from_ps(tensor::vec<float>(big))};
    t.start(1, true);
    auto ps_reply = t.reply_from(t.ps_exec);
    REQUIRE(ps_reply.result.ok());
    CHECK(ps_reply.held.empty());
    // The chunks went to the worker's executor. Between processes the
    // deserializer fills them in; here nothing serialized them, which the
    // executor reports instead of reading bytes that are not there.
    auto worker_reply = t.reply_from(t.worker_exec);
    CHECK(worker_reply.result.code() == error_code::internal);
    CHECK_THAT(worker_reply.result.message(),
               Catch::Contains("arrived without its bytes"));
  }
  SECTION("no sink") {
    auto value = tensor::vec<float>({4.0f});
    two_tasks t{fetch_from_ps(value)};
    t.start(1, true, false);
    t.expect_sent(value);
  }
}

TEST_CASE("executor: with addresses, a value over one chunk goes to another "
          "process over the tensor channel",
          "[executor][tensor_channel]") {
  std::vector<float> big(300000); // 1.2 MB: over one chunk
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i);
  auto value = tensor::vec<float>(big);
  SECTION("channel on") {
    two_tasks t{fetch_from_ps(value), true};
    CHECK(t.ps_inbox.rfind("127.0.0.1:", 0) == 0);
    CHECK(t.worker_inbox.rfind("127.0.0.1:", 0) == 0);
    auto ring_before = tensor_channel::ring_frames_received();
    for (int64_t id : {1, 2}) {
      INFO("step " << id);
      t.start(id, id == 1);
      // Between these two actor systems CAF serializes nothing, so whole
      // bytes at the worker came through the channel (its ring).
      t.expect_sent(value);
    }
    CHECK(tensor_channel::ring_frames_received() == ring_before + 2);
  }
  SECTION("a value for a fetch-only partition rides in the reply up to "
          "256 KiB, over the channel above") {
    auto small = tensor::vec<float>(std::vector<float>(65536, 1.0f));
    two_tasks held{fetch_from_ps(small), true};
    held.start(1, true);
    auto held_reply = held.reply_from(held.ps_exec);
    REQUIRE(held_reply.result.ok());
    REQUIRE(held_reply.held.size() == 1);
    CHECK(held_reply.held.front().value == small);
    auto half = tensor::vec<float>(std::vector<float>(131072, 2.0f));
    two_tasks sent{fetch_from_ps(half), true};
    sent.start(1, true);
    sent.expect_sent(half);
  }
  SECTION("actorflow.tensor-channel = false") {
    two_tasks t{fetch_from_ps(value), true, false};
    CHECK(t.ps_inbox.empty());
    CHECK(t.worker_inbox.empty());
    t.start(1, true);
    REQUIRE(t.reply_from(t.ps_exec).result.ok());
    // Over CAF's chunks, which nothing serialized here (see above).
    CHECK_THAT(t.reply_from(t.worker_exec).result.message(),
               Catch::Contains("arrived without its bytes"));
  }
}

TEST_CASE("executor: a later step's request over the tensor channel is "
          "answered there",
          "[executor][tensor_channel]") {
  auto value = tensor::vec<float>({4.0f, -2.0f});
  two_tasks t{fetch_from_ps(value), true};
  // The master lives in the worker's process, with an inbox for answers.
  auto master = caf::actor_cast<caf::actor>(t.self_a);
  auto master_inbox = tensor_channel::open_inbox("127.0.0.1", master);
  REQUIRE_FALSE(master_inbox.empty());
  // The first step: CAF requests with the peers, and where to answer.
  for (auto exec : {t.worker_exec, t.ps_exec}) {
    run_graph_request req;
    req.step_id = 1;
    req.peer_devices = {worker_device, ps_device};
    req.peer_inboxes = {t.worker_inbox, t.ps_inbox};
    req.reply_inbox = master_inbox;
    req.part = exec == t.ps_exec ? 1 : 0;
    t.self_a->send(exec, run_graph_atom_v, std::move(req),
                   std::vector<caf::actor>{
                     caf::actor_cast<caf::actor>(t.worker_exec),
                     caf::actor_cast<caf::actor>(t.ps_exec)});
  }
  for (int i = 0; i < 2; ++i)
    t.self_a->receive(
      [](run_graph_response& resp) { CHECK(resp.result.ok()); },
      caf::after(max_wait) >> [] { FAIL("no run_graph reply"); });
  // Later steps: the ps's request goes over the channel, and its answer
  // comes back there, naming the step and the ps's part.
  auto route = tensor_channel::route_to(t.ps_inbox, t.self_a->system());
  REQUIRE(route);
  for (int64_t id : {2, 3}) {
    INFO("step " << id);
    auto received = tensor_channel::messages_received();
    run_graph_request to_worker;
    to_worker.step_id = id;
    t.self_a->send(t.worker_exec, run_graph_atom_v, std::move(to_worker),
                   std::vector<caf::actor>{});
    run_graph_request to_ps;
    to_ps.step_id = id;
    CHECK(tensor_channel::send_run_graph(
      route, std::move(to_ps), caf::actor_cast<caf::actor>(t.ps_exec)));
    bool answered = false;
    bool fetched = false;
    for (int i = 0; i < 2; ++i)
      t.self_a->receive(
        [&](step_reply_atom, int64_t step, int64_t part,
            run_graph_response& resp) {
          answered = true;
          CHECK(step == id);
          CHECK(part == 1);
          CHECK(resp.result.ok());
        },
        [&](run_graph_response& resp) {
          fetched = true;
          REQUIRE(resp.result.ok());
          REQUIRE(resp.outputs.size() == 1);
          CHECK(resp.outputs.front().second == value);
        },
        caf::after(max_wait) >> [] { FAIL("a reply is missing"); });
    CHECK(answered);
    CHECK(fetched);
    // The request and the answer were both read off the channel.
    CHECK(tensor_channel::messages_received() == received + 2);
  }
  tensor_channel::close_inbox(t.self_a->system(), master_inbox);
}
