// actorflow's scheduler (actors/src/scheduler.hpp): CAF's work sharing
// with one worker spinning before it sleeps. Every job runs, whether a
// worker is spinning, busy or asleep when it arrives, and an application
// that picked one of CAF's policies keeps it.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

#include "actorflow/actors/type_ids.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

struct system_holder {
  explicit system_holder(caf::atom_value policy = caf::atom("")) {
    if (policy != caf::atom(""))
      cfg.set("scheduler.policy", policy);
    add_types_impl(cfg);
    add_options_impl(cfg);
    sys.emplace(cfg);
  }
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
};

caf::behavior counter(caf::event_based_actor*, std::atomic<int>* hits) {
  return {[hits](int x) {
    hits->fetch_add(1);
    return x + 1;
  }};
}

caf::behavior sink(caf::event_based_actor*, std::atomic<int>* hits) {
  return {[hits](int) { hits->fetch_add(1); }};
}

} // namespace

TEST_CASE("scheduler: requests from many threads all get their reply, "
          "with pauses that put the workers to sleep",
          "[scheduler]") {
  system_holder h;
  auto& sys = *h.sys;
  CHECK(caf::get_or(sys.config(), "scheduler.policy", caf::atom(""))
        == caf::atom("spinning"));
  std::atomic<int> hits{0};
  std::vector<caf::actor> actors;
  for (int i = 0; i < 8; ++i)
    actors.push_back(sys.spawn(counter, &hits));
  std::atomic<int> replies{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c)
    clients.emplace_back([&, c] {
      caf::scoped_actor self{sys};
      for (int i = 0; i < 300; ++i) {
        // Now and then long enough for every worker to stop spinning.
        if (i % 100 == 99)
          std::this_thread::sleep_for(20ms);
        self->request(actors[static_cast<size_t>(i + c) % actors.size()],
                      std::chrono::seconds(30), i)
          .receive([&](int y) { replies += y == i + 1 ? 1 : 0; },
                   [&](caf::error&) {});
      }
    });
  for (auto& t : clients)
    t.join();
  CHECK(replies == 900);
  CHECK(hits == 900);
  for (auto& a : actors)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("scheduler: a chain of actors that fans out keeps both workers "
          "busy and loses no message",
          "[scheduler]") {
  system_holder h;
  auto& sys = *h.sys;
  std::atomic<int> hits{0};
  auto target = sys.spawn(sink, &hits);
  // Each relay forwards to the target and to the next relay: jobs pile up
  // in the queue, so sleepers must be woken for them.
  auto relay = [](caf::event_based_actor* self, caf::actor next,
                  caf::actor sink) -> caf::behavior {
    return {[=](int x) {
      self->send(sink, x);
      if (next)
        self->send(next, x);
    }};
  };
  caf::actor head;
  std::vector<caf::actor> relays;
  for (int i = 0; i < 20; ++i)
    relays.push_back(head = sys.spawn(relay, head, target));
  for (int i = 0; i < 50; ++i)
    caf::anon_send(head, i);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (hits < 1000 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(hits == 1000);
  for (auto& a : relays)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(target, caf::exit_reason::user_shutdown);
}

TEST_CASE("scheduler: an application's own scheduler.policy is kept",
          "[scheduler]") {
  system_holder h{caf::atom("stealing")};
  using stealing = caf::scheduler::coordinator<caf::policy::work_stealing>;
  CHECK(dynamic_cast<stealing*>(&h.sys->scheduler()) != nullptr);
  CHECK(caf::get_or(h.sys->config(), "scheduler.policy", caf::atom(""))
        == caf::atom("stealing"));
}
