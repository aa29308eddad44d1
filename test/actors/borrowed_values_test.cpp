// Values that stay (a variable's, a queue's elements) are not kept in a
// borrowed buffer (tensor::borrow: a received tensor in place in the
// tensor channel's ring): the actor keeps a copy, so that the ring's room
// comes back once the step is done with the value.

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "actorflow/transport/type_ids.hpp"
#include "runtime.hpp"

using namespace actorflow;

namespace {

constexpr auto max_wait = std::chrono::seconds(30);

struct system_holder {
  system_holder() {
    add_types_impl(cfg);
    add_options_impl(cfg);
    sys.emplace(cfg);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

// A borrowed [2, 2] float tensor over `data`, kept by `owner`.
tensor borrowed(float* data, std::shared_ptr<int> owner) {
  return tensor::borrow(dtype::float32, tensor_shape{2, 2}, data,
                        std::move(owner));
}

// Whether `owner` ends within 10 s: the actor's copy of the request (and
// so of the borrowed tensor) goes only after its reply went out.
bool expires(const std::weak_ptr<int>& owner) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Polls the owner, as a weak_ptr signals nothing when it expires; bounded
  // by the deadline.
  while (!owner.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return owner.expired();
}

} // namespace

TEST_CASE("borrowed values: a variable keeps a copy of an assigned value",
          "[borrowed][variable]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  auto var = spawn_variable(*s.sys, "v", dtype::float32, tensor_shape{2, 2});
  alignas(64) float data[4] = {1, 2, 3, 4};
  auto owner = std::make_shared<int>(0);
  std::weak_ptr<int> alive = owner;
  {
    auto value = borrowed(data, std::move(owner));
    self->request(var, max_wait, assign_atom_v, value, true, int64_t{0})
      .receive([](status& err, tensor& now) {
                 REQUIRE(err.ok());
                 CHECK_FALSE(now.borrowed());
               },
               [](caf::error& err) { FAIL(caf::to_string(err)); });
  }
  CHECK(expires(alive));
  data[0] = 99; // the borrowed memory changes; the variable does not
  self->request(var, max_wait, read_atom_v)
    .receive([](status& err, tensor& now) {
               REQUIRE(err.ok());
               CHECK(now == tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
             },
             [](caf::error& err) { FAIL(caf::to_string(err)); });
  self->send_exit(var, caf::exit_reason::user_shutdown);
}

TEST_CASE("borrowed values: a queue keeps copies of its elements",
          "[borrowed][queue]") {
  system_holder s;
  caf::scoped_actor self{*s.sys};
  queue_options opts;
  opts.name = "q";
  opts.types = {dtype::float32};
  opts.shapes = {tensor_shape{2}};
  auto q = spawn_queue(*s.sys, opts);
  alignas(64) float data[4] = {1, 2, 3, 4};
  auto owner = std::make_shared<int>(0);
  std::weak_ptr<int> alive = owner;
  auto run = [&](auto... xs) {
    std::vector<tensor> out;
    self->request(q, max_wait, xs...)
      .receive(
        [&](status& err, std::vector<tensor>& result) {
          REQUIRE(err.ok());
          out = std::move(result);
        },
        [](caf::error& err) { FAIL(caf::to_string(err)); });
    return out;
  };
  // Two elements of one borrowed batch (rows of a borrowed buffer).
  run(enqueue_many_atom_v,
      std::vector<tensor>{borrowed(data, std::move(owner))}, int64_t{1},
      int64_t{0});
  CHECK(expires(alive));
  data[2] = 99;
  auto first = run(dequeue_atom_v, int64_t{1});
  REQUIRE(first.size() == 1);
  CHECK(first[0] == tensor::vec<float>({1, 2}));
  auto second = run(dequeue_atom_v, int64_t{1});
  REQUIRE(second.size() == 1);
  CHECK(second[0] == tensor::vec<float>({3, 4}));
  self->send_exit(q, caf::exit_reason::user_shutdown);
}
