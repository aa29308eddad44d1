// actorflow's scheduler (transport/src/scheduler.hpp): CAF's work sharing
// with one worker spinning before it sleeps. Every job runs, whether a
// worker is spinning, busy or asleep when it arrives; a message an actor
// sends runs next on the same thread; a thread waiting in
// run_actors_until runs actors itself, and one in run_actors_after the
// chain its message starts; and an application that picked one of CAF's
// policies keeps it.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>

#include "actorflow/transport/run_actors.hpp"
#include "actorflow/transport/type_ids.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

struct system_holder {
  explicit system_holder(caf::atom_value policy = caf::atom(""),
                         std::optional<caf::timespan> spin = std::nullopt,
                         size_t threads = 0) {
    if (policy != caf::atom(""))
      cfg.set("scheduler.policy", policy);
    if (spin)
      caf::put(cfg.content, "actorflow.scheduler-spin", *spin);
    if (threads > 0)
      cfg.set("scheduler.max-threads", threads);
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
  // Polls the sink's counter, a plain atomic that signals nothing; bounded
  // by the deadline.
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

namespace {

// Two actors passing a counter back and forth; each records the thread it
// ran on. `left` hops, then `done` is set.
struct ping_pong_log {
  std::mutex mtx;
  std::vector<std::thread::id> threads;
  std::atomic<bool> done{false};
};

caf::behavior ping_pong(caf::event_based_actor* self, ping_pong_log* log) {
  return {[self, log](int left, caf::actor other) {
    {
      std::lock_guard<std::mutex> guard{log->mtx};
      log->threads.push_back(std::this_thread::get_id());
    }
    if (left == 0)
      log->done = true;
    else
      self->send(other, left - 1, caf::actor{self});
  }};
}

// Two ping_pong actors in a system whose workers never spin (a spinning
// worker would take their messages); `threads` workers, 0 for the default.
struct ping_pong_pair {
  explicit ping_pong_pair(size_t threads = 0)
    : h(caf::atom(""), caf::timespan{0}, threads),
      a(h.sys->spawn(ping_pong, &log)),
      b(h.sys->spawn(ping_pong, &log)) {
    // nop
  }

  ~ping_pong_pair() {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
  }

  // First: the actors use it until the system is gone.
  ping_pong_log log;
  system_holder h;
  caf::actor a;
  caf::actor b;
};

// Checks that the exchange so far took `n` turns, all on `thread`, and
// forgets them.
void expect_turns_on(ping_pong_log& log, size_t n, std::thread::id thread) {
  std::lock_guard<std::mutex> guard{log.mtx};
  REQUIRE(log.threads.size() == n);
  for (auto& id : log.threads)
    CHECK(id == thread);
  log.threads.clear();
}

bool wait_for(const std::atomic<bool>& flag) {
  auto deadline = std::chrono::steady_clock::now() + 30s;
  // Polls the flag, which the actors set without notifying anyone; bounded
  // by the deadline.
  while (!flag && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  return flag;
}

} // namespace

TEST_CASE("scheduler: a message an actor sends runs next on the same "
          "worker, without waking another",
          "[scheduler]") {
  ping_pong_pair pp;
  auto& log = pp.log;
  // Let both workers go to sleep first.
  // The scheduler signals nothing when a worker parks: give them time.
  std::this_thread::sleep_for(20ms);
  caf::anon_send(pp.a, 10, pp.b);
  REQUIRE(wait_for(log.done));
  std::lock_guard<std::mutex> guard{log.mtx};
  REQUIRE(log.threads.size() == 11);
  for (auto& id : log.threads)
    CHECK(id == log.threads.front());
}

TEST_CASE("scheduler: two actors messaging each other endlessly do not "
          "starve the other jobs, even with one worker",
          "[scheduler]") {
  // Declared first: the actor uses it until the system is gone.
  std::atomic<bool> ran{false};
  ping_pong_pair pp{1};
  caf::anon_send(pp.a, std::numeric_limits<int>::max(), pp.b);
  auto other = pp.h.sys->spawn(
    [&ran](caf::event_based_actor*) -> caf::behavior {
      return {[&ran](int) { ran = true; }};
    });
  caf::anon_send(other, 1);
  CHECK(wait_for(ran));
  caf::anon_send_exit(other, caf::exit_reason::user_shutdown);
}

TEST_CASE("scheduler: run_actors_until runs the actors a waiting thread "
          "sends to on that thread, and a reply from another thread wakes "
          "it before any worker",
          "[scheduler]") {
  ping_pong_pair pp;
  auto& sys = *pp.h.sys;
  auto& log = pp.log;
  auto& a = pp.a;
  auto& b = pp.b;
  // Let both workers go to sleep first: the scheduler signals nothing when
  // a worker parks.
  std::this_thread::sleep_for(20ms);
  // The whole exchange happens on this thread: the first message wakes no
  // worker, and each next one stays on the thread that sent it.
  auto here = std::this_thread::get_id();
  CHECK(run_actors_until(
    sys, [&] { caf::anon_send(a, 10, b); }, [&] { return log.done.load(); }));
  expect_turns_on(log, 11, here);
  // While this thread waits, a message from another (non-scheduler)
  // thread wakes it and runs here; notify_actor_helpers ends the wait.
  log.done = false;
  std::atomic<bool> finished{false};
  std::thread other{[&] {
    // Let the main thread get into run_actors_until first: nothing signals
    // when it starts waiting there.
    std::this_thread::sleep_for(20ms);
    caf::anon_send(a, 0, b);
    // Polls the flag, which the actor sets without notifying anyone.
    while (!log.done)
      std::this_thread::sleep_for(1ms);
    finished = true;
    notify_actor_helpers(sys);
  }};
  CHECK(run_actors_until(
    sys, [] {}, [&] { return finished.load(); }));
  other.join();
  std::lock_guard<std::mutex> guard{log.mtx};
  REQUIRE(log.threads.size() == 1);
  CHECK(log.threads.front() == here);
}

TEST_CASE("scheduler: run_actors_until refuses to run actors on a thread "
          "that is inside an actor's turn",
          "[scheduler]") {
  std::atomic<int> result{-1};
  std::atomic<bool> started{false};
  system_holder h;
  auto& sys = *h.sys;
  auto nested = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
    return {[&](int) {
      result = run_actors_until(
        sys, [&] { started = true; }, [] { return true; }) ? 1 : 0;
    }};
  });
  caf::anon_send(nested, 1);
  auto deadline = std::chrono::steady_clock::now() + 30s;
  // Polls the result, which the actor stores without notifying anyone;
  // bounded by the deadline.
  while (result < 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(result == 0);
  CHECK_FALSE(started);
  caf::anon_send_exit(nested, caf::exit_reason::user_shutdown);
}

TEST_CASE("scheduler: run_actors_until leaves an application's own "
          "scheduler alone",
          "[scheduler]") {
  system_holder h{caf::atom("sharing")};
  bool started = false;
  CHECK_FALSE(run_actors_until(
    *h.sys, [&] { started = true; }, [] { return true; }));
  CHECK_FALSE(started);
}

TEST_CASE("scheduler: run_actors_after runs the actor a message makes "
          "runnable, and the chain it starts, on the calling thread",
          "[scheduler]") {
  ping_pong_pair pp;
  auto& log = pp.log;
  // Let both workers go to sleep first: the scheduler signals nothing when
  // a worker parks.
  std::this_thread::sleep_for(20ms);
  auto here = std::this_thread::get_id();
  run_actors_after(*pp.h.sys, [&] { caf::anon_send(pp.a, 10, pp.b); });
  // Done on return: nothing was left for a worker.
  CHECK(log.done);
  expect_turns_on(log, 11, here);
  // A chain longer than 16 jobs goes on without the caller: the caller
  // returns after the 17th, and a worker takes the rest.
  log.done = false;
  run_actors_after(*pp.h.sys, [&] { caf::anon_send(pp.a, 40, pp.b); });
  REQUIRE(wait_for(log.done));
  std::lock_guard<std::mutex> guard{log.mtx};
  REQUIRE(log.threads.size() == 41);
  for (size_t i = 0; i < 17; ++i)
    CHECK(log.threads[i] == here);
  for (size_t i = 17; i < log.threads.size(); ++i)
    CHECK(log.threads[i] != here);
}

// Set while an actor below is inside run_actors_after.
thread_local bool in_run_actors_after = false;

TEST_CASE("scheduler: run_actors_after only sends inside an actor's turn "
          "and under an application's own scheduler",
          "[scheduler]") {
  struct receipt {
    std::thread::id thread;
    bool nested = false;
    std::atomic<bool> received{false};
  };
  auto receiver = [](caf::event_based_actor*, receipt* r) {
    return caf::behavior{[r](int) {
      r->thread = std::this_thread::get_id();
      r->nested = in_run_actors_after;
      r->received = true;
    }};
  };
  SECTION("inside an actor's turn: the receiver does not run nested") {
    // Declared first: the actors use it until the system is gone.
    receipt log;
    std::atomic<bool> sent{false};
    system_holder h;
    auto& sys = *h.sys;
    auto r = sys.spawn(receiver, &log);
    auto s = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
      return {[&](int) {
        in_run_actors_after = true;
        run_actors_after(sys, [&] { caf::anon_send(r, 1); });
        in_run_actors_after = false;
        sent = true;
      }};
    });
    caf::anon_send(s, 1);
    REQUIRE(wait_for(log.received));
    REQUIRE(wait_for(sent));
    CHECK_FALSE(log.nested);
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  }
  SECTION("CAF's own work sharing: a worker runs the receiver") {
    receipt log;
    system_holder h{caf::atom("sharing")};
    auto r = h.sys->spawn(receiver, &log);
    run_actors_after(*h.sys, [&] { caf::anon_send(r, 1); });
    REQUIRE(wait_for(log.received));
    CHECK(log.thread != std::this_thread::get_id());
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("scheduler: run_actors_after leaves the rest of the chain to the "
          "workers once go_on says so",
          "[scheduler]") {
  ping_pong_pair pp;
  auto& log = pp.log;
  // Let both workers go to sleep first: the scheduler signals nothing when
  // a worker parks.
  std::this_thread::sleep_for(20ms);
  auto here = std::this_thread::get_id();
  int asked = 0;
  run_actors_after(
    *pp.h.sys, [&] { caf::anon_send(pp.a, 10, pp.b); },
    [&] { return ++asked < 3; });
  REQUIRE(wait_for(log.done));
  CHECK(asked == 3);
  std::lock_guard<std::mutex> guard{log.mtx};
  REQUIRE(log.threads.size() == 11);
  // The first job and the two go_on allowed ran here, the rest elsewhere.
  for (size_t i = 0; i < log.threads.size(); ++i)
    CHECK((log.threads[i] == here) == (i < 3));
}
