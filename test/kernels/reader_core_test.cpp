// reader_core against TensorFlow 1.x's reader_base.cc and
// python/kernel_tests/reader_ops_test.py (tf_semantics §11.1).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zlib.h>

#include <catch2/catch.hpp>

#include "actorflow/kernels/reader_core.hpp"
#include "common/temp_dir.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

namespace fs = std::filesystem;
using strings = std::vector<std::string>;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// A gzip file; with `append`, one more gzip member after the existing ones.
void write_gzip(const std::string& path, const std::string& bytes,
                bool append = false) {
  auto* f = gzopen(path.c_str(), append ? "ab" : "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty())
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()))
            == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// A zlib stream (as Python's zlib.compress).
void write_zlib(const std::string& path, const std::string& bytes) {
  auto bound = compressBound(static_cast<uLong>(bytes.size()));
  std::string out(bound, '\0');
  auto len = bound;
  REQUIRE(compress2(reinterpret_cast<Bytef*>(out.data()), &len,
                    reinterpret_cast<const Bytef*>(bytes.data()),
                    static_cast<uLong>(bytes.size()), Z_DEFAULT_COMPRESSION)
          == Z_OK);
  out.resize(len);
  write_file(path, out);
}

node_def reader_node(std::string op,
                     std::map<std::string, attr_value> attrs = {}) {
  node_def node;
  node.name = "test_reader";
  node.op = std::move(op);
  node.attrs = std::move(attrs);
  return node;
}

std::unique_ptr<reader_core> make_reader(const node_def& node) {
  std::unique_ptr<reader_core> r;
  auto st = reader_core::make(node, r);
  INFO(st.to_string());
  REQUIRE(st.ok());
  REQUIRE(r != nullptr);
  return r;
}

std::unique_ptr<reader_core> text_reader(int64_t skip_header_lines = 0) {
  return make_reader(reader_node("TextLineReaderV2",
                                 {{"skip_header_lines", skip_header_lines}}));
}

std::unique_ptr<reader_core>
fixed_reader(int64_t header, int64_t record, int64_t footer, int64_t hop,
             const std::string& encoding = "") {
  return make_reader(reader_node("FixedLengthRecordReaderV2",
                                 {{"header_bytes", header},
                                  {"record_bytes", record},
                                  {"footer_bytes", footer},
                                  {"hop_bytes", hop},
                                  {"encoding", encoding}}));
}

// The owner's loop from reader_core.hpp, with a deque as the filename
// queue; an empty deque stands for a closed, exhausted queue.
struct driver {
  reader_core& reader;
  std::deque<std::string> queue;
  int dequeued = 0;

  reader_core::request run(reader_core::request req) {
    while (!reader.advance(req)) {
      if (queue.empty()) {
        req.result = status{error_code::out_of_range,
                            "FIFOQueue 'q' is closed and has insufficient "
                            "elements (requested 1, current size 0)"};
        break;
      }
      auto work = queue.front();
      queue.pop_front();
      ++dequeued;
      if (auto st = reader.start_work(work); !st.ok()) {
        req.result = st;
        break;
      }
    }
    return req;
  }

  reader_core::request read() {
    return run(reader_core::request{});
  }

  reader_core::request read_up_to(int64_t n) {
    reader_core::request req;
    req.num_records = n;
    req.up_to = true;
    return run(std::move(req));
  }

  // Reads one record and checks it.
  void expect(const std::string& key, const std::string& value) {
    auto r = read();
    INFO(r.result.to_string());
    REQUIRE(r.result.ok());
    REQUIRE(r.keys == strings{key});
    REQUIRE(r.values == strings{value});
  }

  void expect_closed() {
    auto r = read();
    CHECK(r.result.code() == error_code::out_of_range);
    CHECK(r.keys.empty());
  }
};

void check_make_error(const node_def& node, const std::string& message) {
  std::unique_ptr<reader_core> r;
  auto st = reader_core::make(node, r);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == message);
  CHECK(r == nullptr);
}

// reader_ops_test.py TextLineReaderTest: "f: l" lines, a newline after
// each except the last line of file 1.
strings text_files(const temp_dir& dir, bool crlf) {
  strings files;
  for (int i = 0; i < 2; ++i) {
    auto fn = dir / ("text_line." + std::to_string(i) + ".txt");
    std::string s;
    for (int j = 0; j < 5; ++j) {
      s += std::to_string(i) + ": " + std::to_string(j);
      if (j + 1 != 5 || i == 0)
        s += crlf ? "\r\n" : "\n";
    }
    write_file(fn, s);
    files.push_back(fn);
  }
  return files;
}

std::string line_text(int f, int l) {
  return std::to_string(f) + ": " + std::to_string(l);
}

} // namespace

TEST_CASE("TextLineReader reads every line with 1-based keys",
          "[reader_core][text]") {
  temp_dir dir;
  auto crlf = GENERATE(false, true);
  INFO("crlf " << crlf);
  auto files = text_files(dir, crlf);
  auto reader = text_reader();
  driver d{*reader, {files.begin(), files.end()}};
  CHECK(reader->num_records_produced() == 0);
  CHECK(reader->num_work_units_completed() == 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      d.expect(files[i] + ":" + std::to_string(j + 1), line_text(i, j));
  // The last line was read without reaching the end of file 1 yet.
  CHECK(reader->num_work_units_completed() == 1);
  CHECK(reader->work_in_progress());
  d.expect_closed();
  CHECK(reader->num_records_produced() == 10);
  CHECK(reader->num_work_units_completed() == 2);
  CHECK_FALSE(reader->work_in_progress());
}

TEST_CASE("TextLineReader skips header lines of each file and keeps their "
          "numbers",
          "[reader_core][text]") {
  temp_dir dir;
  auto files = text_files(dir, false);
  auto reader = text_reader(1);
  driver d{*reader, {files.begin(), files.end()}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      d.expect(files[i] + ":" + std::to_string(j + 2), line_text(i, j + 1));
  d.expect_closed();
  CHECK(reader->num_records_produced() == 8);
  CHECK(reader->num_work_units_completed() == 2);
}

TEST_CASE("TextLineReader keeps blank lines and strips one carriage return",
          "[reader_core][text]") {
  temp_dir dir;
  auto a = (dir / "a.txt");
  // Blank lines, a lone "\r" line, "\r\r\n" (only one '\r' goes), and a
  // last line without newline ending in '\r'.
  write_file(a, "x\n\nr\r\n\r\nrr\r\r\n  sp  \nlast\r");
  auto empty = (dir / "empty.txt");
  write_file(empty, "");
  auto nl_only = (dir / "nl.txt");
  write_file(nl_only, "\n");
  auto cr_end = (dir / "cr_end.txt");
  write_file(cr_end, "k\n\r");
  auto reader = text_reader();
  driver d{*reader, {a, empty, nl_only, cr_end}};
  d.expect(a + ":1", "x");
  d.expect(a + ":2", "");
  d.expect(a + ":3", "r");
  d.expect(a + ":4", "");
  d.expect(a + ":5", "rr\r");
  d.expect(a + ":6", "  sp  ");
  d.expect(a + ":7", "last");
  // The empty file gives nothing; "\n" is one empty line; a final "\r"
  // alone is no line.
  d.expect(nl_only + ":1", "");
  d.expect(cr_end + ":1", "k");
  d.expect_closed();
  CHECK(d.dequeued == 4);
  CHECK(reader->num_records_produced() == 9);
  CHECK(reader->num_work_units_completed() == 4);
}

TEST_CASE("TextLineReader reads a line longer than its buffer",
          "[reader_core][text]") {
  temp_dir dir;
  auto f = (dir / "long.txt");
  std::string big(700 * 1024, 'q');
  big[12345] = 'Z';
  write_file(f, "a\n" + big + "\r\nb");
  auto reader = text_reader();
  driver d{*reader, {f}};
  d.expect(f + ":1", "a");
  d.expect(f + ":2", big);
  d.expect(f + ":3", "b");
  d.expect_closed();
}

TEST_CASE("TextLineReader with more header lines than the file has",
          "[reader_core][text]") {
  temp_dir dir;
  auto a = (dir / "a.txt");
  write_file(a, "h1\nh2\n");
  auto b = (dir / "b.txt");
  write_file(b, "h1\nh2\nh3\nbody\n");
  auto reader = text_reader(3);
  driver d{*reader, {a, b}};
  d.expect(b + ":4", "body");
  d.expect_closed();
  CHECK(reader->num_records_produced() == 1);
  CHECK(reader->num_work_units_completed() == 2);
}

TEST_CASE("a missing file fails the read with NotFound and the next read "
          "takes the next file",
          "[reader_core][text]") {
  temp_dir dir;
  auto missing = (dir / "missing.txt");
  auto b = (dir / "b.txt");
  write_file(b, "one\n");
  SECTION("TextLineReader") {
    auto reader = text_reader();
    driver d{*reader, {missing, b}};
    auto r = d.read();
    CHECK(r.result.code() == error_code::not_found);
    CHECK(r.result.message() == missing + "; No such file or directory");
    CHECK(r.keys.empty());
    CHECK_FALSE(reader->work_in_progress());
    CHECK(reader->num_work_units_completed() == 0);
    d.expect(b + ":1", "one");
    d.expect_closed();
    CHECK(reader->num_work_units_completed() == 1);
  }
  SECTION("FixedLengthRecordReader") {
    for (std::string encoding : {"", "GZIP"}) {
      INFO("encoding '" << encoding << "'");
      auto reader = fixed_reader(0, 1, 0, 0, encoding);
      auto st = reader->start_work(missing);
      CHECK(st.code() == error_code::not_found);
      CHECK(st.message() == missing + "; No such file or directory");
      CHECK_FALSE(reader->work_in_progress());
    }
  }
  SECTION("a directory") {
    auto reader = text_reader();
    driver d{*reader, {(dir / "")}};
    auto r = d.read();
    CHECK(r.result.code() == error_code::failed_precondition);
    CHECK_THAT(r.result.message(), Catch::EndsWith("; Is a directory"));
  }
}

TEST_CASE("read_up_to returns records of one work unit only",
          "[reader_core][read_up_to]") {
  temp_dir dir;
  auto a = (dir / "a.txt");
  write_file(a, "a1\na2\na3\na4\na5\n");
  auto e = (dir / "e.txt");
  write_file(e, "");
  auto b = (dir / "b.txt");
  write_file(b, "b1\nb2\nb3");
  auto reader = text_reader();
  driver d{*reader, {a, e, b}};

  auto r = d.read_up_to(3);
  REQUIRE(r.result.ok());
  CHECK(r.keys == strings{a + ":1", a + ":2", a + ":3"});
  CHECK(r.values == strings{"a1", "a2", "a3"});
  CHECK(reader->num_work_units_completed() == 0);

  // a ends after two more: those come back rather than a pull of e.
  r = d.read_up_to(3);
  REQUIRE(r.result.ok());
  CHECK(r.keys == strings{a + ":4", a + ":5"});
  CHECK(r.values == strings{"a4", "a5"});
  CHECK(reader->num_work_units_completed() == 1);
  CHECK(d.dequeued == 1);

  // e ends with nothing, so b follows in the same call; b's three lines
  // fill the request before its end is seen.
  r = d.read_up_to(3);
  REQUIRE(r.result.ok());
  CHECK(r.keys == strings{b + ":1", b + ":2", b + ":3"});
  CHECK(r.values == strings{"b1", "b2", "b3"});
  CHECK(d.dequeued == 3);
  CHECK(reader->num_work_units_completed() == 2);
  CHECK(reader->num_records_produced() == 8);

  r = d.read_up_to(3);
  CHECK(r.result.code() == error_code::out_of_range);
  CHECK(r.keys.empty());
  CHECK(reader->num_work_units_completed() == 3);
  CHECK(reader->num_records_produced() == 8);
}

TEST_CASE("read_up_to of 0 or fewer records", "[reader_core][read_up_to]") {
  temp_dir dir;
  auto a = (dir / "a.txt");
  write_file(a, "x\n");
  auto reader = text_reader();
  driver d{*reader, {a}};
  // 0: done at once with nothing and no dequeue, as TF's ReadUpTo loop.
  auto r = d.read_up_to(0);
  CHECK(r.result.ok());
  CHECK(r.keys.empty());
  CHECK(d.dequeued == 0);
  r = d.read_up_to(-1);
  CHECK(r.result.code() == error_code::invalid_argument);
  CHECK(r.result.message() == "num_records must be >= 0 not -1");
  CHECK(r.keys.empty());
  CHECK(d.dequeued == 0);
  CHECK_FALSE(reader->work_in_progress());
  CHECK(reader->num_records_produced() == 0);
  d.expect(a + ":1", "x");
}

TEST_CASE("reset zeroes the counters and drops the current work unit",
          "[reader_core]") {
  temp_dir dir;
  auto a = (dir / "a.txt");
  write_file(a, "a1\na2\na3\n");
  auto b = (dir / "b.txt");
  write_file(b, "b1\n");
  auto c = (dir / "c.txt");
  write_file(c, "c1\n");
  auto reader = text_reader();
  driver d{*reader, {a, b, c}};
  d.expect(a + ":1", "a1");
  d.expect(a + ":2", "a2");
  CHECK(reader->num_records_produced() == 2);
  reader->reset();
  CHECK(reader->num_records_produced() == 0);
  CHECK(reader->num_work_units_completed() == 0);
  CHECK_FALSE(reader->work_in_progress());
  // The rest of a is gone; the next read takes b.
  d.expect(b + ":1", "b1");
  d.expect(c + ":1", "c1");
  CHECK(reader->num_records_produced() == 2);
  CHECK(reader->num_work_units_completed() == 1);
}

TEST_CASE("an empty file name is a work unit of its own", "[reader_core]") {
  auto reader = make_reader(reader_node("WholeFileReaderV2"));
  REQUIRE(reader->start_work("").ok());
  CHECK(reader->work_in_progress());
  reader_core::request req;
  CHECK(reader->advance(req));
  CHECK(req.result.code() == error_code::not_found);
  CHECK(req.result.message() == "; No such file or directory");
}

namespace {

// reader_ops_test.py FixedLengthRecordReaderTest: header 5, record 3,
// footer 2; record j of file i is str(i * 2 + j) * 3, with `gap` bytes
// "G" between records.
constexpr int header_bytes = 5;
constexpr int record_bytes = 3;
constexpr int footer_bytes = 2;
constexpr int hop_bytes = 2;

std::string fixed_record(int f, int r) {
  return std::string(record_bytes, static_cast<char>('0' + f * 2 + r));
}

std::string fixed_content(int f, int num_records, int gap) {
  std::string s(header_bytes, 'H');
  for (int j = 0; j < num_records; ++j) {
    if (j > 0)
      s += std::string(static_cast<size_t>(gap), 'G');
    s += fixed_record(f, j);
  }
  s += std::string(footer_bytes, 'F');
  return s;
}

// The digits 0..n-1 (first digit of each), as _OverlappedRecord.
std::string overlapped_stream(int num_records) {
  std::string s;
  for (int i = 0; i < record_bytes + hop_bytes * (num_records - 1); ++i)
    s += std::to_string(i)[0];
  return s;
}

std::string overlapped_record(int r) {
  std::string s;
  for (int i = r * hop_bytes; i < r * hop_bytes + record_bytes; ++i)
    s += std::to_string(i)[0];
  return s;
}

void write_encoded(const std::string& path, const std::string& bytes,
                   const std::string& encoding) {
  if (encoding == "GZIP")
    write_gzip(path, bytes);
  else if (encoding == "ZLIB")
    write_zlib(path, bytes);
  else
    write_file(path, bytes);
}

} // namespace

TEST_CASE("FixedLengthRecordReader reads records between header and footer",
          "[reader_core][fixed]") {
  auto encoding = GENERATE(std::string{}, std::string{"GZIP"},
                           std::string{"ZLIB"});
  auto num_records = GENERATE(0, 7);
  auto gap = GENERATE(0, 1);
  INFO("encoding '" << encoding << "' records " << num_records << " gap "
                    << gap);
  temp_dir dir;
  strings files;
  for (int i = 0; i < 2; ++i) {
    auto fn = dir / ("fixed_length_record." + std::to_string(i) + ".txt");
    write_encoded(fn, fixed_content(i, num_records, gap), encoding);
    files.push_back(fn);
  }
  auto reader = fixed_reader(header_bytes, record_bytes, footer_bytes,
                             gap == 0 ? 0 : record_bytes + gap, encoding);
  driver d{*reader, {files.begin(), files.end()}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < num_records; ++j)
      d.expect(files[i] + ":" + std::to_string(j), fixed_record(i, j));
  d.expect_closed();
  CHECK(reader->num_records_produced() == 2 * num_records);
  CHECK(reader->num_work_units_completed() == 2);
}

TEST_CASE("FixedLengthRecordReader with hop_bytes reads overlapping records",
          "[reader_core][fixed]") {
  auto encoding = GENERATE(std::string{}, std::string{"GZIP"},
                           std::string{"ZLIB"});
  auto num_records = GENERATE(0, 2);
  INFO("encoding '" << encoding << "' records " << num_records);
  temp_dir dir;
  strings files;
  for (int i = 0; i < 2; ++i) {
    auto fn = dir / ("fixed_length_overlapped_record." + std::to_string(i)
                       + ".txt");
    std::string s(header_bytes, 'H');
    if (num_records > 0)
      s += overlapped_stream(num_records);
    s += std::string(footer_bytes, 'F');
    write_encoded(fn, s, encoding);
    files.push_back(fn);
  }
  auto reader = fixed_reader(header_bytes, record_bytes, footer_bytes,
                             hop_bytes, encoding);
  driver d{*reader, {files.begin(), files.end()}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < num_records; ++j)
      d.expect(files[i] + ":" + std::to_string(j), overlapped_record(j));
  d.expect_closed();
  CHECK(reader->num_records_produced() == 2 * num_records);
}

TEST_CASE("FixedLengthRecordReader drops a trailing partial record",
          "[reader_core][fixed]") {
  auto encoding = GENERATE(std::string{}, std::string{"GZIP"});
  temp_dir dir;
  auto f = (dir / "partial.bin");
  // header "HH", records of 4 with a 1-byte footer: "ij" + "F" cannot hold
  // a record plus its footer.
  write_encoded(f, "HHabcdefghijF", encoding);
  auto reader = fixed_reader(2, 4, 1, 0, encoding);
  driver d{*reader, {f}};
  auto r = d.read_up_to(10);
  REQUIRE(r.result.ok());
  CHECK(r.keys == strings{f + ":0", f + ":1"});
  CHECK(r.values == strings{"abcd", "efgh"});
  CHECK(reader->num_work_units_completed() == 1);
}

TEST_CASE("FixedLengthRecordReader skips gaps larger than its lookahead",
          "[reader_core][fixed]") {
  temp_dir dir;
  auto f = (dir / "gaps.bin");
  // record 2, hop 5: records at 0, 5, 10; no header or footer.
  write_file(f, "ab...cd...ef..");
  auto reader = fixed_reader(0, 2, 0, 5);
  driver d{*reader, {f}};
  auto r = d.read_up_to(10);
  REQUIRE(r.result.ok());
  CHECK(r.values == strings{"ab", "cd", "ef"});
  CHECK(r.keys == strings{f + ":0", f + ":1", f + ":2"});
}

TEST_CASE("FixedLengthRecordReader reads concatenated gzip members",
          "[reader_core][fixed]") {
  temp_dir dir;
  auto f = (dir / "members.gz");
  write_gzip(f, "HHHab");
  write_gzip(f, "cdef", true);
  write_gzip(f, "", true);
  write_gzip(f, "gh", true);
  auto reader = fixed_reader(3, 2, 0, 0, "GZIP");
  driver d{*reader, {f}};
  auto r = d.read_up_to(10);
  REQUIRE(r.result.ok());
  CHECK(r.values == strings{"ab", "cd", "ef", "gh"});
}

TEST_CASE("FixedLengthRecordReader errors", "[reader_core][fixed]") {
  temp_dir dir;
  SECTION("a header longer than the file fails the work unit") {
    auto f = (dir / "short.bin");
    write_file(f, "HHH");
    auto reader = fixed_reader(4, 1, 0, 0);
    driver d{*reader, {f}};
    auto r = d.read();
    CHECK(r.result.code() == error_code::out_of_range);
    CHECK(r.result.message() == "reached end of file");
    CHECK_FALSE(reader->work_in_progress());
    CHECK(reader->num_work_units_completed() == 0);
  }
  SECTION("a header as long as the file gives no records") {
    auto f = (dir / "header_only.bin");
    write_file(f, "HHH");
    auto reader = fixed_reader(3, 1, 0, 0);
    driver d{*reader, {f}};
    d.expect_closed();
    CHECK(reader->num_work_units_completed() == 1);
  }
  SECTION("data that is not gzip is DataLoss") {
    auto f = (dir / "plain.txt");
    write_file(f, "this is not gzip data");
    auto reader = fixed_reader(0, 4, 0, 0, "GZIP");
    driver d{*reader, {f}};
    auto r = d.read();
    CHECK(r.result.code() == error_code::data_loss);
    CHECK(r.result.message()
          == "inflate() failed with error -3: incorrect header check");
    CHECK(r.keys.empty());
    // As TF, the work unit stays current.
    CHECK(reader->work_in_progress());
    auto with_header = fixed_reader(2, 4, 0, 0, "ZLIB");
    auto st = with_header->start_work(f);
    CHECK(st.code() == error_code::data_loss);
    CHECK_THAT(st.message(), Catch::StartsWith("inflate() failed with error"));
  }
  SECTION("a truncated gzip stream just ends") {
    auto full = (dir / "full.gz");
    write_gzip(full, std::string(4000, 'x') + "tail");
    std::ifstream in{full, std::ios::binary};
    std::string bytes{std::istreambuf_iterator<char>{in}, {}};
    auto cut = (dir / "cut.gz");
    write_file(cut, bytes.substr(0, bytes.size() - 8)); // no trailer
    auto reader = fixed_reader(0, 1000, 0, 0, "GZIP");
    driver d{*reader, {cut}};
    auto r = d.read_up_to(10);
    REQUIRE(r.result.ok());
    CHECK(r.values.size() == 4);
    CHECK(reader->num_work_units_completed() == 1);
  }
}

TEST_CASE("WholeFileReader gives each file as one record",
          "[reader_core][whole_file]") {
  temp_dir dir;
  strings files;
  strings content{"One\na\nb\n", "Two\nC\nD", "Three x, y, z"};
  for (int i = 0; i < 3; ++i) {
    files.push_back(dir / ("whole_file." + std::to_string(i) + ".txt"));
    write_file(files.back(), content[static_cast<size_t>(i)]);
  }
  auto reader = make_reader(reader_node("WholeFileReaderV2"));
  driver d{*reader, {files.begin(), files.end()}};
  d.expect(files[0], content[0]);
  CHECK(reader->num_work_units_completed() == 1);
  auto r = d.read_up_to(5);
  REQUIRE(r.result.ok());
  CHECK(r.keys == strings{files[1]});
  CHECK(r.values == strings{content[1]});
  d.expect(files[2], content[2]);
  d.expect_closed();
  CHECK(reader->num_records_produced() == 3);
  CHECK(reader->num_work_units_completed() == 3);
}

TEST_CASE("WholeFileReader fails the read of a missing file and retries it",
          "[reader_core][whole_file]") {
  temp_dir dir;
  auto missing = (dir / "later.txt");
  auto reader = make_reader(reader_node("WholeFileReader"));
  driver d{*reader, {missing}};
  auto r = d.read();
  CHECK(r.result.code() == error_code::not_found);
  CHECK(r.result.message() == missing + "; No such file or directory");
  CHECK(reader->work_in_progress());
  // TF's ReadLocked failed, so the same work unit is read again.
  write_file(missing, "now here");
  d.expect(missing, "now here");
  CHECK(d.dequeued == 1);
  CHECK(reader->num_work_units_completed() == 1);
}

TEST_CASE("work_from_tuple checks the dequeued tuple", "[reader_core]") {
  std::string work = "unchanged";
  auto s = tensor::scalar(std::string{"file.txt"});
  CHECK(reader_core::work_from_tuple({s}, work).ok());
  CHECK(work == "file.txt");
  auto st = reader_core::work_from_tuple({s, s}, work);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "Expected single component queue");
  st = reader_core::work_from_tuple({}, work);
  CHECK(st.message() == "Expected single component queue");
  st = reader_core::work_from_tuple({tensor::scalar(int64_t{3})}, work);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "Expected queue with single string component");
  st = reader_core::work_from_tuple(
    {tensor::vec(std::vector<std::string>{"a", "b"})}, work);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(st.message() == "Expected to dequeue a one-element string tensor");
  // A one-element vector is accepted, as TF's NumElements() check.
  CHECK(reader_core::work_from_tuple(
          {tensor::vec(std::vector<std::string>{"v"})}, work)
          .ok());
  CHECK(work == "v");
}

TEST_CASE("make validates the attributes as TF's kernels", "[reader_core]") {
  using attrs = std::map<std::string, attr_value>;
  auto fixed = [](attrs a) {
    attrs all{{"header_bytes", int64_t{0}},
              {"record_bytes", int64_t{4}},
              {"footer_bytes", int64_t{0}},
              {"hop_bytes", int64_t{0}},
              {"encoding", std::string{}}};
    for (auto& [k, v] : a)
      all[k] = v;
    return reader_node("FixedLengthRecordReaderV2", std::move(all));
  };
  check_make_error(fixed({{"record_bytes", int64_t{0}}}),
                   "record_bytes must be > 0 not 0 [[node test_reader]]");
  check_make_error(fixed({{"record_bytes", int64_t{-2}}}),
                   "record_bytes must be > 0 not -2 [[node test_reader]]");
  check_make_error(fixed({{"header_bytes", int64_t{-1}}}),
                   "header_bytes must be >= 0 not -1 [[node test_reader]]");
  check_make_error(fixed({{"footer_bytes", int64_t{-1}}}),
                   "footer_bytes must be >= 0 not -1 [[node test_reader]]");
  check_make_error(fixed({{"hop_bytes", int64_t{-3}}}),
                   "hop_bytes must be >= 0 not -3 [[node test_reader]]");
  check_make_error(fixed({{"encoding", std::string{"gzip"}}}),
                   "encoding must be \"\", \"ZLIB\" or \"GZIP\", not "
                   "\"gzip\" [[node test_reader]]");
  check_make_error(reader_node("TextLineReaderV2",
                               {{"skip_header_lines", int64_t{-1}}}),
                   "skip_header_lines must be >= 0 not -1 [[node "
                   "test_reader]]");
  check_make_error(reader_node("IdentityReaderV2"),
                   "op 'IdentityReaderV2' is not a reader [[node "
                   "test_reader]]");
  check_make_error(fixed({{"record_bytes", std::string{"4"}}}),
                   "attribute 'record_bytes' of node 'test_reader' has the "
                   "wrong kind [[node test_reader]]");
  // Absent optional attributes take TF's defaults.
  std::unique_ptr<reader_core> r;
  CHECK(reader_core::make(reader_node("FixedLengthRecordReader",
                                      {{"record_bytes", int64_t{1}}}),
                          r)
          .ok());
  CHECK(reader_core::make(reader_node("TextLineReader"), r).ok());
}

namespace {

const std::string fashion_dir = "/usr/share/datasets/fashion-mnist/";

bool have_fashion_mnist() {
  for (auto name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                    "t10k-labels-idx1-ubyte.gz"})
    if (!fs::exists(fashion_dir + name)) {
      WARN("skipped: " << fashion_dir << name << " is absent");
      return false;
    }
  return true;
}

} // namespace

TEST_CASE("FixedLengthRecordReader reads Fashion-MNIST",
          "[reader_core][fixed][fashion_mnist]") {
  if (!have_fashion_mnist())
    return;
  SECTION("the first training labels") {
    auto labels = fashion_dir + "train-labels-idx1-ubyte.gz";
    auto reader = fixed_reader(8, 1, 0, 0, "GZIP");
    driver d{*reader, {labels}};
    auto r = d.read_up_to(4);
    REQUIRE(r.result.ok());
    CHECK(r.keys
          == strings{labels + ":0", labels + ":1", labels + ":2",
                     labels + ":3"});
    CHECK(r.values
          == strings{std::string(1, '\x09'), std::string(1, '\0'),
                     std::string(1, '\0'), std::string(1, '\x03')});
  }
  SECTION("the first training images") {
    auto images = fashion_dir + "train-images-idx3-ubyte.gz";
    auto reader = fixed_reader(16, 784, 0, 0, "GZIP");
    driver d{*reader, {images}};
    auto r = d.read();
    REQUIRE(r.result.ok());
    CHECK(r.keys == strings{images + ":0"});
    REQUIRE(r.values[0].size() == 784);
    int64_t sum = 0;
    int max = 0;
    for (unsigned char c : r.values[0]) {
      sum += c;
      max = std::max(max, int{c});
    }
    // Pixel sum and maximum of image 0, from Python's gzip module.
    CHECK(sum == 76247);
    CHECK(max == 255);
    r = d.read_up_to(3);
    REQUIRE(r.result.ok());
    CHECK(r.keys == strings{images + ":1", images + ":2", images + ":3"});
    for (auto& v : r.values)
      CHECK(v.size() == 784);
  }
  SECTION("all 10000 test labels by read_up_to") {
    auto labels = fashion_dir + "t10k-labels-idx1-ubyte.gz";
    auto reader = fixed_reader(8, 1, 0, 0, "GZIP");
    driver d{*reader, {labels}};
    int64_t total = 0;
    int calls = 0;
    for (;;) {
      auto r = d.read_up_to(1024);
      if (r.result.code() == error_code::out_of_range)
        break;
      REQUIRE(r.result.ok());
      CHECK(r.keys.front() == labels + ":" + std::to_string(total));
      total += static_cast<int64_t>(r.keys.size());
      ++calls;
    }
    CHECK(total == 10000);
    // Nine full batches of 1024 and one of 784.
    CHECK(calls == 10);
    CHECK(reader->num_records_produced() == 10000);
    CHECK(reader->num_work_units_completed() == 1);
  }
  SECTION("all 60000 training images, quickly") {
    auto images = fashion_dir + "train-images-idx3-ubyte.gz";
    auto reader = fixed_reader(16, 784, 0, 0, "GZIP");
    driver d{*reader, {images}};
    auto start = std::chrono::steady_clock::now();
    int64_t total = 0;
    for (;;) {
      auto r = d.read_up_to(5000);
      if (r.result.code() == error_code::out_of_range)
        break;
      REQUIRE(r.result.ok());
      total += static_cast<int64_t>(r.keys.size());
    }
    auto secs = std::chrono::duration<double>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    CHECK(total == 60000);
    CHECK(reader->num_records_produced() == 60000);
    // Buffered inflation takes well under a second; byte-wise reads would
    // take far longer.
    CHECK(secs < 10.0);
  }
}
