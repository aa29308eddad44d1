// log_escape (graph/text_util.hpp): text from peers (a Print message, a
// node name, a certificate's subject) on one harmless log line (issue 30).

#include <catch2/catch.hpp>

#include <string>

#include "actorflow/graph/text_util.hpp"

using namespace actorflow;

// -- log_escape ---------------------------------------------------------------------

TEST_CASE("log_escape keeps a peer's text on one harmless line",
          "[log_escape]") {
  CHECK(log_escape("plain text: /job:ps/task:0 10.0.0.5:2222")
        == "plain text: /job:ps/task:0 10.0.0.5:2222");
  // A forged log line and terminal escapes.
  CHECK(log_escape("x\nactorflow-node: serving /job:evil")
        == "x\\nactorflow-node: serving /job:evil");
  CHECK(log_escape("\x1b[2J\x1b[31mred\r\t") == "\\x1b[2J\\x1b[31mred\\r\\t");
  CHECK(log_escape(std::string{"a\0b", 3}) == "a\\x00b");
  CHECK(log_escape("\x7f\x08") == "\\x7f\\x08");
  // Backslashes are doubled, so an escape in the input stays readable as
  // what it was.
  CHECK(log_escape("C:\\x1b") == "C:\\\\x1b");
  // Valid UTF-8 stays; C1 controls (U+009B is CSI), the line separator
  // and bidi overrides are escaped byte by byte, as is invalid UTF-8.
  CHECK(log_escape("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");
  CHECK(log_escape("\xc2\x9b"
                   "2J")
        == "\\xc2\\x9b2J");
  CHECK(log_escape("a\xe2\x80\xa8"
                   "b")
        == "a\\xe2\\x80\\xa8b");
  CHECK(log_escape("\xe2\x80\xae"
                   "evil")
        == "\\xe2\\x80\\xaeevil");
  CHECK(log_escape("\xff\xc3") == "\\xff\\xc3");
  CHECK(log_escape("\xc0\xaf") == "\\xc0\\xaf");       // overlong '/'
  CHECK(log_escape("\xed\xa0\x80") == "\\xed\\xa0\\x80"); // a surrogate
  CHECK(log_escape("\xc3"
                   "A")
        == "\\xc3A");
  CHECK(log_escape("") == "");
}
