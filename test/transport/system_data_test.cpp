// system_data (transport/system_data.hpp): state that belongs to one actor
// system, so that two systems in one process never share it.

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actorflow/transport/system_data.hpp"
#include "actorflow/transport/type_ids.hpp"

using namespace actorflow;

namespace {

struct counter {
  int value = 0;
};

struct other_state {
  int value = 7;
};

} // namespace

TEST_CASE("system_data: one value per system and type, the same on every "
          "call",
          "[system_data]") {
  caf::actor_system_config cfg_a;
  add_types_impl(cfg_a);
  caf::actor_system a{cfg_a};
  caf::actor_system_config cfg_b;
  add_types_impl(cfg_b);
  caf::actor_system b{cfg_b};
  auto in_a = system_data<counter>(a);
  in_a->value = 41;
  CHECK(system_data<counter>(a) == in_a);
  CHECK(system_data<counter>(a)->value == 41);
  // Another system starts from its own, value-initialized.
  CHECK(system_data<counter>(b) != in_a);
  CHECK(system_data<counter>(b)->value == 0);
  // Another type in the same system is another value.
  CHECK(system_data<other_state>(a)->value == 7);
}

TEST_CASE("system_data: goes with its system unless someone still holds it",
          "[system_data]") {
  std::weak_ptr<counter> kept_by_system;
  {
    caf::actor_system_config cfg;
    add_types_impl(cfg);
    caf::actor_system sys{cfg};
    kept_by_system = system_data<counter>(sys);
    CHECK_FALSE(kept_by_system.expired());
  }
  CHECK(kept_by_system.expired());
  // A holder (a detached thread) keeps its pointer valid past the system.
  std::shared_ptr<other_state> survivor;
  {
    caf::actor_system_config cfg;
    add_types_impl(cfg);
    caf::actor_system sys{cfg};
    survivor = system_data<other_state>(sys);
    survivor->value = 9;
  }
  CHECK(survivor->value == 9);
}

TEST_CASE("system_data: a system without a middleman drops it at shutdown "
          "too, and a later system at the same address starts afresh",
          "[system_data]") {
  // One storage for every system: each takes the address of the last.
  // Without a middleman, under the deterministic scheduler, without one
  // again, with one, and without one after it.
  std::optional<caf::actor_system> sys;
  for (int round = 0; round < 5; ++round) {
    INFO("system " << round);
    caf::actor_system_config cfg;
    if (round == 1)
      cfg.set("scheduler.policy", caf::atom("testing"));
    if (round == 3)
      add_types_impl(cfg);
    sys.emplace(cfg);
    auto data = system_data<counter>(*sys);
    CHECK(data->value == 0);
    data->value = 41 + round;
    std::weak_ptr<counter> kept_by_system = data;
    data.reset();
    sys.reset();
    CHECK(kept_by_system.expired());
  }
}

TEST_CASE("system_data: concurrent first uses get one value",
          "[system_data]") {
  caf::actor_system_config cfg;
  add_types_impl(cfg);
  caf::actor_system sys{cfg};
  std::vector<std::shared_ptr<counter>> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = system_data<counter>(sys); });
  for (auto& t : threads)
    t.join();
  for (auto& p : seen)
    CHECK(p == seen.front());
}
