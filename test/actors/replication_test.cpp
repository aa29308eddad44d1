// Replicated variables (issue 31 §1; docs/DESIGN.md, "Replicated
// variables"): the bookkeeping (replica_log) alone, then a primary and its
// backup under CAF's deterministic test coordinator, where the test picks
// the order of every message: a write is answered only once the backup
// holds it, a retried write (same tag) applies once, a promoted backup
// fences the old primary, and a primary that lost its backup refuses
// writes until a new one is synced.

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actorflow/transport/type_ids.hpp"
#include "common/test_system.hpp"
#include "replica_log.hpp"
#include "runtime.hpp"

using namespace actorflow;
using actorflow::testing::deterministic;

TEST_CASE("replica log: tags are remembered within the window",
          "[replication]") {
  replica_log log;
  CHECK_FALSE(log.seen(0));
  log.record(0); // untagged writes are never remembered
  CHECK_FALSE(log.seen(0));
  log.record(7);
  CHECK(log.seen(7));
  for (int64_t t = 100; t < 100 + static_cast<int64_t>(replica_log::window);
       ++t)
    log.record(t);
  CHECK_FALSE(log.seen(7)); // pushed out by `window` newer tags
  CHECK(log.seen(100));
  CHECK(log.tags().size() == replica_log::window);
  CHECK(log.tags().front() == 100);
}

TEST_CASE("replica log: a backup takes writes in order, of its epoch only",
          "[replication]") {
  using v = replica_log::verdict;
  replica_log log;
  log.reset(2, 10, {5, 6});
  CHECK(log.seen(5));
  CHECK(log.accept(2, 11) == v::apply);
  CHECK(log.accept(2, 10) == v::duplicate);
  CHECK(log.accept(2, 13) == v::gap);
  CHECK(log.accept(1, 11) == v::fenced);
  CHECK(log.accept(3, 11) == v::gap);
  log.accepted(11, 9);
  CHECK(log.seq() == 11);
  CHECK(log.seen(9));
  CHECK_FALSE(log.may_sync(1));
  CHECK(log.may_sync(2));
  log.enter(1); // never goes back
  CHECK(log.epoch() == 2);
  log.enter(3);
  CHECK(log.epoch() == 3);
  CHECK(log.accept(2, 12) == v::fenced);
}

namespace {

/// The answers a client actor got: (status, value) or a CAF error.
struct replies {
  std::vector<status> results;
  std::vector<tensor> values;
  size_t count() const {
    return results.size();
  }
};

class replication_fixture : public actorflow::testing::coordinated_system {
public:
  replication_fixture() {
    primary = spawn_variable(sys_, "v", dtype::float32, tensor_shape{},
                             {.name = "v", .container = "", .task = ""},
                             {replica_role::orphan, 1, "/job:ps/task:0", {}});
    backup = spawn_backup();
  }

  ~replication_fixture() {
    for (auto& a : {primary, backup})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    drain();
  }

  variable_actor spawn_backup() {
    return spawn_variable(sys_, "v", dtype::float32, tensor_shape{},
                          {.name = "v backup", .container = "", .task = ""},
                          {replica_role::backup, 0, "/job:ps/task:0", {}});
  }

  /// Runs one message of `who`; false when it has none queued.
  bool step(const variable_actor& who) {
    if (!sched_.prioritize(who))
      return false;
    sched_.run_once();
    return true;
  }

  /// Sends `xs` to `dest` from a client actor run once (the request then
  /// waits in `dest`'s mailbox); the answers land in the result.
  template <class... Ts>
  std::shared_ptr<replies> ask(const variable_actor& dest, Ts... xs) {
    auto out = std::make_shared<replies>();
    auto client = sys_.spawn(
      [dest, out, xs...](caf::event_based_actor* self) {
        self->request(dest, caf::infinite, xs...)
          .then(
            [out](status& st, tensor& value) {
              out->results.push_back(std::move(st));
              out->values.push_back(std::move(value));
            },
            [out](caf::error& err) {
              out->results.push_back(to_status(err));
              out->values.emplace_back();
            });
      });
    REQUIRE(sched_.prioritize(client));
    sched_.run_once();
    return out;
  }

  /// A message that is answered with a status alone (promote, sync),
  /// sent and handled before anything else that waits.
  template <class... Ts>
  std::shared_ptr<status> ask_first(const variable_actor& dest, Ts... xs) {
    auto out = std::make_shared<status>(error_code::unknown, "no reply");
    auto client = sys_.spawn([dest, out, xs...](caf::event_based_actor* self) {
      self->request(dest, caf::infinite, xs...)
        .then([out](status& st) { *out = st; });
    });
    REQUIRE(sched_.prioritize(client));
    sched_.run_once();
    REQUIRE(step(dest));
    return out;
  }

  /// The same, then everything runs.
  template <class... Ts>
  status ask_status(const variable_actor& dest, Ts... xs) {
    auto out = ask_first(dest, xs...);
    drain();
    return *out;
  }

  /// The value `v` reads (after everything queued ran).
  tensor value_of(const variable_actor& v) {
    auto r = ask(v, read_atom_v);
    drain();
    REQUIRE(r->count() == 1);
    return r->results[0].ok() ? r->values[0] : tensor{};
  }

  /// Pairs the primary with `b` and runs the sync.
  void attach(const variable_actor& b, int64_t epoch) {
    caf::anon_send(primary, set_backup_atom_v,
                   caf::actor_cast<caf::actor>(b), epoch);
    drain();
  }

  variable_actor primary;
  variable_actor backup;
};

tensor scalar(float x) {
  return tensor::scalar(x);
}

float as_float(const tensor& t) {
  return t.valid() ? t.scalar_value<float>() : -1.0f;
}

} // namespace

TEST_CASE_METHOD(replication_fixture,
                 "replication: a write is answered once the backup holds it",
                 "[replication]") {
  attach(backup, 1);
  auto init = ask(primary, assign_atom_v, scalar(10), true, int64_t{1});
  drain();
  REQUIRE(init->count() == 1);
  REQUIRE(init->results[0].ok());
  auto add = ask(primary, assign_add_atom_v, scalar(1), int64_t{2});
  // The primary applies the write and forwards it; no answer yet.
  REQUIRE(step(primary));
  CHECK(add->count() == 0);
  // The backup takes it; its acknowledgement answers the writer.
  REQUIRE(step(backup));
  CHECK(add->count() == 0);
  REQUIRE(step(primary));
  drain();
  REQUIRE(add->count() == 1);
  CHECK(add->results[0].ok());
  CHECK(as_float(add->values[0]) == 11);
  // The backup holds the same value: promoted, it serves it.
  CHECK(ask_status(backup, promote_atom_v, int64_t{2}).ok());
  CHECK(as_float(value_of(backup)) == 11);
}

TEST_CASE_METHOD(replication_fixture,
                 "replication: a retried write with the same tag applies once",
                 "[replication]") {
  attach(backup, 1);
  ask(primary, assign_atom_v, scalar(0), true, int64_t{1});
  drain();
  auto first = ask(primary, assign_add_atom_v, scalar(1), int64_t{42});
  REQUIRE(step(primary)); // applied, forwarded, waiting for the backup
  // The retry arrives before the backup acknowledged the first: it waits
  // for the same acknowledgement, and applies nothing.
  auto retry = ask(primary, assign_add_atom_v, scalar(1), int64_t{42});
  REQUIRE(step(primary));
  CHECK(first->count() == 0);
  CHECK(retry->count() == 0);
  drain();
  REQUIRE(first->count() == 1);
  REQUIRE(retry->count() == 1);
  CHECK(retry->results[0].ok());
  // Once more, after the acknowledgement: still once.
  auto late = ask(primary, assign_add_atom_v, scalar(1), int64_t{42});
  drain();
  REQUIRE(late->count() == 1);
  CHECK(late->results[0].ok());
  CHECK(as_float(value_of(primary)) == 1);
  CHECK(ask_status(backup, promote_atom_v, int64_t{2}).ok());
  CHECK(as_float(value_of(backup)) == 1);
}

TEST_CASE_METHOD(replication_fixture,
                 "replication: a promoted backup fences the old primary",
                 "[replication]") {
  attach(backup, 1);
  ask(primary, assign_atom_v, scalar(5), true, int64_t{1});
  drain();
  // The old primary takes a write (say, back from a SIGSTOP) while its
  // backup is promoted first.
  auto stale = ask(primary, assign_add_atom_v, scalar(100), int64_t{2});
  auto promoted = ask_first(backup, promote_atom_v, int64_t{2});
  // Then the old primary applies the write and forwards it with epoch 1.
  drain();
  CHECK(promoted->ok());
  REQUIRE(stale->count() == 1);
  CHECK(stale->results[0].code() == error_code::aborted);
  CHECK_THAT(stale->results[0].message(), Catch::StartsWith("Superseded"));
  // The write is nowhere: the promoted backup never took it, and the old
  // primary serves nothing any more.
  CHECK(as_float(value_of(backup)) == 5);
  auto read = ask(primary, read_atom_v);
  auto write = ask(primary, assign_add_atom_v, scalar(1), int64_t{3});
  drain();
  CHECK(read->results.at(0).code() == error_code::aborted);
  CHECK(write->results.at(0).code() == error_code::aborted);
  // The promoted backup writes alone.
  auto after = ask(backup, assign_add_atom_v, scalar(1), int64_t{4});
  drain();
  REQUIRE(after->count() == 1);
  CHECK(after->results[0].ok());
  CHECK(as_float(after->values[0]) == 6);
}

TEST_CASE_METHOD(replication_fixture,
                 "replication: without its backup a primary refuses writes "
                 "until a new one is synced",
                 "[replication]") {
  // Never attached: refused, Unavailable, naming the variable.
  auto early = ask(primary, assign_atom_v, scalar(1), true, int64_t{1});
  drain();
  REQUIRE(early->count() == 1);
  CHECK(early->results[0].code() == error_code::unavailable);
  CHECK_THAT(early->results[0].message(), Catch::Contains("has no backup"));
  attach(backup, 1);
  ask(primary, assign_atom_v, scalar(3), true, int64_t{2});
  drain();
  // The backup ends (its process died): the primary learns it (a down
  // message), and refuses.
  caf::anon_send_exit(backup, caf::exit_reason::kill);
  drain();
  auto orphaned = ask(primary, assign_add_atom_v, scalar(1), int64_t{3});
  drain();
  CHECK(orphaned->results.at(0).code() == error_code::unavailable);
  CHECK(as_float(value_of(primary)) == 3);
  // A new backup gets the whole state (value and tags), then the writes.
  auto fresh = spawn_backup();
  attach(fresh, 1);
  auto dup = ask(primary, assign_atom_v, scalar(3), true, int64_t{2});
  auto add = ask(primary, assign_add_atom_v, scalar(2), int64_t{4});
  drain();
  CHECK(dup->results.at(0).ok());
  CHECK(add->results.at(0).ok());
  CHECK(as_float(add->values.at(0)) == 5);
  CHECK(ask_status(fresh, promote_atom_v, int64_t{2}).ok());
  CHECK(as_float(value_of(fresh)) == 5);
  caf::anon_send_exit(fresh, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(replication_fixture,
                 "replication: a backup never synced is not promoted, and "
                 "refuses writes of a stale epoch",
                 "[replication]") {
  CHECK(ask_status(backup, promote_atom_v, int64_t{2}).code()
        == error_code::failed_precondition); // holds nothing
  CHECK(ask_status(backup, replicate_atom_v, int64_t{1}, int64_t{1},
                   int64_t{9}, int64_t{-1}, scalar(1))
          .code()
        == error_code::out_of_range); // a gap: never synced
  attach(backup, 3);
  CHECK(ask_status(backup, replicate_atom_v, int64_t{2}, int64_t{1},
                   int64_t{9}, int64_t{-1}, scalar(1))
          .code()
        == error_code::aborted); // epoch 2 < 3: fenced
  CHECK(ask_status(backup, promote_atom_v, int64_t{3}).code()
        == error_code::failed_precondition); // not newer
  // A write of another dtype (a forged frame) changes nothing.
  CHECK(ask_status(backup, replicate_atom_v, int64_t{3}, int64_t{1},
                   int64_t{9}, int64_t{-1}, tensor::scalar(int64_t{7}))
          .code()
        == error_code::internal);
  CHECK(ask_status(backup, promote_atom_v, int64_t{4}).ok());
  CHECK_FALSE(value_of(backup).valid()); // still the synced (no) value
}

namespace {

// Stands between a primary and its backup and loses the forwarded write
// numbered `lost` (as a link may, or a frame that overtook a sync).
caf::behavior lossy_link(caf::event_based_actor* self, variable_actor backup,
                         int64_t lost) {
  return {
    [self, backup, lost](replicate_atom, int64_t epoch, int64_t seq,
                         int64_t tag, int64_t row,
                         tensor& payload) -> caf::result<status> {
      if (seq == lost)
        return self->make_response_promise<status>(); // never answered
      return self->delegate(backup, replicate_atom_v, epoch, seq, tag, row,
                            std::move(payload));
    },
    [self, backup](replica_sync_atom, int64_t epoch, int64_t seq,
                   tensor& value, std::vector<int64_t>& tags,
                   std::string& inbox) {
      return self->delegate(backup, replica_sync_atom_v, epoch, seq,
                            std::move(value), std::move(tags),
                            std::move(inbox));
    },
  };
}

} // namespace

TEST_CASE_METHOD(replication_fixture,
                 "replication: a backup that misses a write is synced again, "
                 "and the writes it missed are answered",
                 "[replication]") {
  auto link = sys_.spawn(lossy_link, backup, int64_t{2});
  attach(caf::actor_cast<variable_actor>(link), 1);
  ask(primary, assign_atom_v, scalar(1), true, int64_t{1}); // write 1
  drain();
  // Write 2 is lost on the way; write 3 reaches a backup that misses it
  // (OutOfRange), so the primary sends the whole state again: both are
  // answered, and the backup holds both.
  auto lost = ask(primary, assign_add_atom_v, scalar(10), int64_t{2});
  auto next = ask(primary, assign_add_atom_v, scalar(100), int64_t{3});
  drain();
  REQUIRE(lost->count() == 1);
  REQUIRE(next->count() == 1);
  CHECK(lost->results[0].ok());
  CHECK(next->results[0].ok());
  CHECK(as_float(next->values[0]) == 111);
  // Still paired: the next write is taken in order.
  auto after = ask(primary, assign_add_atom_v, scalar(1000), int64_t{4});
  drain();
  REQUIRE(after->count() == 1);
  CHECK(after->results[0].ok());
  CHECK(ask_status(backup, promote_atom_v, int64_t{2}).ok());
  CHECK(as_float(value_of(backup)) == 1111);
  caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(replication_fixture,
                 "replication: a backup attached again is synced again, and "
                 "the writes waiting for it are answered",
                 "[replication]") {
  attach(backup, 1);
  ask(primary, assign_atom_v, scalar(1), true, int64_t{1});
  drain();
  // A write waits for the backup's acknowledgement when the worker
  // attaches the same backup again (a retried attach).
  auto add = ask(primary, assign_add_atom_v, scalar(2), int64_t{2});
  REQUIRE(step(primary));
  CHECK(add->count() == 0);
  caf::anon_send(primary, set_backup_atom_v,
                 caf::actor_cast<caf::actor>(backup), int64_t{1});
  drain();
  REQUIRE(add->count() == 1);
  CHECK(add->results[0].ok()); // not failed as "replaced"
  CHECK(ask_status(backup, promote_atom_v, int64_t{2}).ok());
  CHECK(as_float(value_of(backup)) == 3);
}
