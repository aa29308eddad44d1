// Elastic membership's bookkeeping (issue 31 §2; actors/src/membership.hpp):
// versions, names of joiners, who decides, and which view wins; then the
// authority's greeting protocol under CAF's deterministic test coordinator
// (a member greets the authority, which watches it through the greeting's
// connection instead of dialing it).

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "common/test_system.hpp"
#include "membership.hpp"

using namespace actorflow;

namespace {

membership::member_map spec() {
  return {{"/job:ps/replica:0/task:0", "h:1"},
          {"/job:ps/replica:0/task:1", "h:2"},
          {"/job:worker/replica:0/task:0", "h:3"}};
}

} // namespace

TEST_CASE("membership: a joiner gets the next index of its job, never a "
          "reused one",
          "[membership]") {
  membership m{spec()};
  CHECK(m.version() == 1);
  CHECK(m.authority() == "/job:ps/replica:0/task:0");
  CHECK_FALSE(m.elastic("/job:worker/replica:0/task:0"));
  auto a = m.join("worker", "h:4");
  CHECK(a == "/job:worker/replica:0/task:1");
  CHECK(m.version() == 2);
  CHECK(m.elastic(a));
  CHECK(m.joined_at(a) == 2);
  CHECK(m.joined_at("/job:worker/replica:0/task:0") == 0);
  auto b = m.join("worker", "h:5");
  CHECK(b == "/job:worker/replica:0/task:2");
  // A retried join (same address) is the same member, no new version.
  std::string existing;
  CHECK(m.join("worker", "h:4", &existing).empty());
  CHECK(existing == a);
  CHECK(m.version() == 3);
  CHECK(m.leave(a));
  CHECK(m.version() == 4);
  CHECK_FALSE(m.leave(a)); // no member any more
  CHECK(m.version() == 4);
  // The index of one that left is not given again.
  CHECK(m.join("worker", "h:4") == "/job:worker/replica:0/task:3");
  // A new job starts at 0.
  CHECK(m.join("eval", "h:6") == "/job:eval/replica:0/task:0");
}

TEST_CASE("membership: a view is adopted only when newer, and its elastic "
          "members are those the ClusterSpec does not name",
          "[membership]") {
  membership authority{spec()};
  authority.join("worker", "h:4");
  authority.join("worker", "h:5");
  membership other{spec()};
  auto view = membership::from_flat(authority.flat());
  REQUIRE(view);
  CHECK(other.adopt(authority.version(), *view));
  CHECK(other.version() == 3);
  CHECK(other.members().size() == 5);
  CHECK(other.elastic("/job:worker/replica:0/task:2"));
  CHECK(other.joined_at("/job:worker/replica:0/task:2") == 3);
  CHECK_FALSE(other.elastic("/job:ps/replica:0/task:1"));
  // An older or equal one changes nothing.
  CHECK_FALSE(other.adopt(2, spec()));
  CHECK_FALSE(other.adopt(3, spec()));
  CHECK(other.members().size() == 5);
  // A joiner after adoption gets an index past the adopted ones.
  CHECK(other.join("worker", "h:9") == "/job:worker/replica:0/task:3");
}

TEST_CASE("membership: a ClusterSpec worker that is lost is down until it "
          "is back at its address, and stays in the directory",
          "[membership]") {
  membership m{spec()};
  const std::string w0 = "/job:worker/replica:0/task:0";
  CHECK(m.can_go_down(w0));
  // A ps's loss is replication's business, not membership's.
  CHECK_FALSE(m.can_go_down("/job:ps/replica:0/task:1"));
  CHECK_FALSE(m.down(w0));
  CHECK_FALSE(m.back(w0)); // not down: no change
  CHECK(m.version() == 1);
  CHECK(m.leave(w0));
  CHECK(m.version() == 2);
  CHECK(m.down(w0));
  CHECK(m.members().count(w0) == 0);
  CHECK(m.directory().at(w0) == "h:3");
  // Its address is still its own: a joiner cannot take it.
  std::string existing;
  CHECK(m.join("worker", "h:3", &existing).empty());
  CHECK(existing == w0);
  CHECK(m.version() == 2);
  // Another task adopts the view: it is down there too, not elastic.
  membership other{spec()};
  auto view = membership::from_flat(m.flat());
  REQUIRE(view);
  CHECK(other.adopt(m.version(), *view));
  CHECK(other.down(w0));
  CHECK(other.directory().at(w0) == "h:3");
  CHECK(m.back(w0));
  CHECK(m.version() == 3);
  CHECK(m.members().at(w0) == "h:3");
  CHECK_FALSE(m.elastic(w0));
  // The authority stays the first ps while it is lost to a task's view.
  membership no_ps0{spec()};
  CHECK(no_ps0.adopt(2, {{"/job:ps/replica:0/task:1", "h:2"},
                         {"/job:worker/replica:0/task:0", "h:3"}}));
  CHECK(no_ps0.authority() == "/job:ps/replica:0/task:0");
}

TEST_CASE("membership: a malformed list of members is refused",
          "[membership]") {
  CHECK_FALSE(membership::from_flat({"/job:worker/replica:0/task:0"}));
  CHECK_FALSE(membership::from_flat({"not a task", "h:1"}));
  CHECK_FALSE(membership::from_flat({"/job:worker", "h:1"}));
  auto ok = membership::from_flat({"/job:worker/replica:0/task:7", "h:1"});
  REQUIRE(ok);
  CHECK(ok->at("/job:worker/replica:0/task:7") == "h:1");
  // Without a ps job the first member decides.
  membership m{{{"/job:worker/replica:0/task:0", "h:1"},
                {"/job:chief/replica:0/task:0", "h:2"}}};
  CHECK(m.authority() == "/job:chief/replica:0/task:0");
}

namespace {

constexpr const char* ps0 = "/job:ps/replica:0/task:0";
constexpr const char* w0 = "/job:worker/replica:0/task:0";

// The authority (ps 0) of a ps and a worker, as an in-process task under
// the test coordinator: nothing runs until the test runs it, and time
// moves only when the test moves it. The worker is the test's: a master
// that greets and hands out a worker to watch. The system has no
// middleman, so the authority cannot dial anyone: a dial would end its
// master (CAF raises "module not loaded").
class greeting_fixture : public actorflow::testing::coordinated_system {
public:
  greeting_fixture() : coordinated_system(without_channel) {
    task_options opts;
    opts.job = "ps";
    opts.task = 0;
    opts.cluster[ps0] = "127.0.0.1:1";
    opts.cluster[w0] = "127.0.0.1:2";
    authority_ = caf::actor_cast<master_actor>(spawn_task(sys_, opts));
    restart();
  }

  /// The member's master and worker, anew (the last ones end).
  void restart() {
    caf::anon_send_exit(greeter_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown);
    worker_ = sys_.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](const std::string&) {}};
    });
    greeter_ = sys_.spawn(
      [asked = asked_, w = worker_](caf::event_based_actor*) -> caf::behavior {
        return {
          [asked, w](get_worker_atom) {
            ++*asked;
            return caf::actor_cast<worker_actor>(w);
          },
          [](membership_update_atom, int64_t, std::vector<std::string>&) {
            // The authority's newer view.
          },
        };
      });
    drain();
  }

  ~greeting_fixture() {
    caf::anon_send_exit(authority_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(greeter_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown);
    drain();
  }

  /// The greeter's view (version 1: the ClusterSpec) with `name`.
  void greet(const std::string& name) {
    membership spec{{{ps0, "127.0.0.1:1"}, {w0, "127.0.0.1:2"}}};
    caf::send_as(greeter_, authority_, membership_update_atom_v,
                 spec.version(), spec.flat(), name);
  }

  /// The authority's (version, members).
  std::pair<int64_t, membership::member_map> members() {
    auto out = std::make_shared<std::pair<int64_t, membership::member_map>>();
    sys_.spawn([a = authority_, out](caf::event_based_actor* self) {
      self->request(a, caf::infinite, membership_atom_v)
        .then([out](int64_t version, std::vector<std::string>& flat) {
          out->first = version;
          if (auto m = membership::from_flat(flat))
            out->second = std::move(*m);
        });
    });
    drain();
    return *out;
  }

  // No inbox either: the channel would listen on a socket.
  static void without_channel(caf::actor_system_config& cfg) {
    caf::put(cfg.content, "actorflow.tensor-channel", false);
  }

  master_actor authority_;
  caf::actor worker_;
  caf::actor greeter_;
  std::shared_ptr<int> asked_ = std::make_shared<int>(0);
};

} // namespace

TEST_CASE_METHOD(greeting_fixture,
                 "membership: the authority watches a greeting member "
                 "through its connection, asks once however often it greets, "
                 "and dials no one",
                 "[membership][protocol]") {
  // Two greetings before the authority runs: one ask for its worker.
  greet(w0);
  greet(w0);
  drain();
  CHECK(*asked_ == 1);
  // Past the 30 s in which an unheard member would be dialed: it was
  // heard, so nothing is dialed (the master, which could not dial, lives).
  sched_.advance_time(std::chrono::seconds(31));
  drain();
  auto [version, now] = members();
  CHECK(version == 1);
  CHECK(now.count(w0) == 1);
  // Watched: its worker ends, and it is down (a new version without it).
  caf::anon_send_exit(worker_, caf::exit_reason::kill);
  drain();
  auto [after, left] = members();
  CHECK(after == 2);
  CHECK(left.count(w0) == 0);
  // Started again, it greets again: watched again, a member again.
  restart();
  CHECK(members().first == 2);
  greet(w0);
  drain();
  CHECK(*asked_ == 2);
  auto [back, members_back] = members();
  CHECK(back == 3);
  CHECK(members_back.count(w0) == 1);
}

TEST_CASE_METHOD(greeting_fixture,
                 "membership: a greeting under a name the cluster does not "
                 "know, or the authority's own, is not watched",
                 "[membership][protocol]") {
  greet("/job:worker/replica:0/task:9");
  greet(ps0);
  drain();
  CHECK(*asked_ == 0);
  CHECK(members().first == 1);
}
