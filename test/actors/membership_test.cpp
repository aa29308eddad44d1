// Elastic membership's bookkeeping (issue 31 §2; actors/src/membership.hpp):
// versions, names of joiners, who decides, and which view wins.

#include <catch2/catch.hpp>

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
