// log_ring: a process's recent log lines for the console, bounded.

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/log_ring.hpp"

using namespace actorflow;

TEST_CASE("log_ring: keeps the last lines in order with their seq, level and "
          "time, and since() gives what came after a seq") {
  log_ring ring{3, 100};
  CHECK(ring.since(0).empty());
  ring.add(log_level::info, "one\n", 10);
  ring.add(log_level::warning, "two", 20);
  auto all = ring.since(0);
  REQUIRE(all.size() == 2);
  CHECK(all[0].text == "one"); // the writer's newline is not the text's
  CHECK(all[0].seq == 1);
  CHECK(all[1].level == log_level::warning);
  CHECK(all[1].at_us == 20);
  ring.add(log_level::error, "three", 30);
  ring.add(log_level::info, "four", 40);
  all = ring.since(0);
  REQUIRE(all.size() == 3); // "one" went
  CHECK(all.front().text == "two");
  CHECK(all.back().seq == 4);
  auto after = ring.since(3);
  REQUIRE(after.size() == 1);
  CHECK(after[0].text == "four");
  CHECK(ring.since(4).empty());
  CHECK(ring.since(0, 1).front().text == "four");
  CHECK(ring.last_seq() == 4);
}

TEST_CASE("log_ring: a long line is cut, many threads lose no seq") {
  log_ring ring{10000, 8};
  ring.add(log_level::info, std::string(100, 'x'));
  CHECK(ring.since(0).front().text == "xxxxxxxx");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i)
        ring.add(log_level::debug, "line");
    });
  for (auto& t : threads)
    t.join();
  auto all = ring.since(0);
  REQUIRE(all.size() == 2001);
  for (size_t i = 0; i < all.size(); ++i)
    CHECK(all[i].seq == i + 1);
}

TEST_CASE("log_ring: an engine line's level: losses and failures warn") {
  CHECK(log_level_of("lost /job:ps/replica:0/task:0") == log_level::warning);
  CHECK(log_level_of("promoted: serves the variables") == log_level::info);
  CHECK(to_string(log_level::error) == "error");
}
