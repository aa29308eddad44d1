// Print writes one line whatever its message holds: the message is
// log_escape'd, string elements C-escaped as TF does (issue 30).

#include <catch2/catch.hpp>

#include <string>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;

TEST_CASE("Print escapes its message: no forged log lines, no terminal "
          "escapes",
          "[print][log_escape]") {
  auto node = make_node(
    "Print", {{"message", std::string{"loss\nactorflow-node: serving "
                                      "/job:evil \x1b[2J\x1b[31m"}}});
  auto r = run(node, {tensor::scalar(1), tensor::vec<std::string>({"a\x1b"})});
  REQUIRE(r.printed.size() == 1);
  CHECK(r.printed[0]
        == "loss\\nactorflow-node: serving /job:evil "
           "\\x1b[2J\\x1b[31m[a\\033]");
  CHECK(r.printed[0].find('\n') == std::string::npos);
  CHECK(r.printed[0].find('\x1b') == std::string::npos);
}
