// Device name parsing, printing and merging: tf_semantics §3, cases 22-31.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "actorflow/graph/device_name.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

device_name parse(std::string_view text) {
  return device_name::parse_or_throw(text);
}

bool parses(std::string_view text) {
  device_name out;
  return device_name::parse(text, out).ok();
}

// The status message of a failed parse_spec, or "" if it succeeded.
std::string spec_error(std::string_view text) {
  device_name out;
  return device_name::parse_spec(text, out).message();
}

std::string merged(std::string_view a, std::string_view b, bool soft = false,
                   std::string* error = nullptr) {
  auto target = parse(a);
  auto st = merge_device_names(target, parse(b), soft);
  if (error)
    *error = st.message();
  return st.ok() ? target.to_string() : "<error>";
}

} // namespace

TEST_CASE("C++ parse rejects malformed names (case 22)") {
  for (auto text : {"foobar", "/job:123/replica:1/task:2/gpu:3",
                    "/job:123/replica:1/task:2/gpu:",
                    "/job:foo/replica:-1/task:2/gpu:3",
                    "/job:foo/replica:1/task:2/bar:3",
                    "/job:foo/replica:1/task:2/gpu:3/extra"}) {
    INFO(text);
    CHECK_FALSE(parses(text));
  }
  device_name out;
  auto st = device_name::parse("foobar", out);
  CHECK(st.code() == error_code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("foobar"));
  CHECK_THROWS_AS(device_name::parse_or_throw("foobar"), op_error);
  // Other malformed shapes the grammar rules out.
  for (auto text : {"//", "/job:foo/", "/job:foo.bar", "/task:", "/task:+1",
                    "/device:", "/device:1GPU:0", "/device:GPU:x",
                    "/cpu:", "/Cpu:0", "job:foo"}) {
    INFO(text);
    CHECK_FALSE(parses(text));
  }
}

TEST_CASE("C++ parse of a full name (case 23)") {
  auto p = parse("/job:foo/replica:1/task:2/gpu:3");
  CHECK(p.job == "foo");
  CHECK(p.replica == 1);
  CHECK(p.task == 2);
  CHECK(p.type == "GPU");
  CHECK(p.id == 3);
  CHECK(p.fully_specified());
  CHECK(parse("/job:foo_bar/replica:1/task:2/gpu:3").job == "foo_bar");
  CHECK(parse("/job:foo/replica:1/task:2/device:GPU:3") == p);
  CHECK(parse("/job:foo/replica:1/task:2/CPU:3").type == "CPU");
}

TEST_CASE("C++ parse is order free and * leaves fields unset (case 24)") {
  for (auto text : {"/job:*/replica:4/gpu:*", "/gpu:*/job:*/replica:4",
                    "/job:*/device:GPU/replica:4"}) {
    INFO(text);
    auto p = parse(text);
    CHECK_FALSE(p.job);
    CHECK(p.replica == 4);
    CHECK_FALSE(p.task);
    CHECK(p.type == "GPU");
    CHECK_FALSE(p.id);
    CHECK(p.to_string() == "/replica:4/device:GPU:*");
  }
}

TEST_CASE("C++ parse keeps custom device types verbatim (case 25)") {
  auto p = parse("/job:*/replica:4/device:myspecialdevice:13");
  CHECK(p.type == "myspecialdevice");
  CHECK(p.id == 13);
  CHECK(parse("/device:cpu:0").type == "cpu");
}

TEST_CASE("C++ parse: empty names, overwrites, canonical print") {
  CHECK(parse("").empty());
  CHECK(parse("/").empty());
  // A later component of the same kind overwrites the earlier one.
  CHECK(parse("/job:a/job:b").job == "b");
  CHECK(parse("/cpu:0/device:GPU:2").to_string() == "/device:GPU:2");
  CHECK(parse("/job:a/job:*").job == std::nullopt);
  CHECK(parse("/task:2/replica:1/job:w/cpu:0").to_string()
        == "/job:w/replica:1/task:2/device:CPU:0");
  CHECK(parse("/gpu:*").to_string() == "/device:GPU:*");
  CHECK(full_device_name("hello", 1, 2, "CPU", 3)
        == "/job:hello/replica:1/task:2/device:CPU:3");
  auto full = parse("/job:hello/replica:1/task:2/device:CPU:3");
  CHECK(full.to_string() == "/job:hello/replica:1/task:2/device:CPU:3");
}

TEST_CASE("is_specification (case 26)") {
  CHECK(is_specification(parse("/job:*"), parse("/replica:1")));
  CHECK(is_specification(parse("/task:2"),
                         parse("/job:*/replica:1/task:2/gpu:3")));
  CHECK_FALSE(is_specification(parse("/cpu:*"),
                               parse("/job:*/replica:1/task:2")));
  CHECK_FALSE(is_specification(parse("/gpu:2"),
                               parse("/job:*/replica:1/task:2/gpu:1")));
  CHECK_FALSE(is_specification(parse("/job:work/replica:0/task:2"),
                               parse("/job:work/replica:*/task:2/gpu:3")));
  CHECK(is_specification(parse(""), parse("")));
}

TEST_CASE("merge_device_names (case 27)") {
  CHECK(merged("/job:foo", "/task:7") == "/job:foo/task:7");
  CHECK(merged("/gpu:1", "/gpu:*") == parse("/gpu:1").to_string());
  std::string error;
  CHECK(merged("/job:foo", "/job:bar", false, &error) == "<error>");
  CHECK(error
        == "Cannot merge devices with incompatible jobs: '/job:foo' and "
           "'/job:bar'");
  CHECK(merged("/gpu:0", "/gpu:1", false, &error) == "<error>");
  CHECK_THAT(error, Catch::Contains("incompatible ids"));
  CHECK(merged("/replica:0", "/replica:1", false, &error) == "<error>");
  CHECK_THAT(error, Catch::Contains("incompatible replicas"));
  CHECK(merged("/task:0", "/task:1", false, &error) == "<error>");
  CHECK_THAT(error, Catch::Contains("incompatible tasks"));
  CHECK(merged("/gpu:0", "/cpu:0", false, &error) == "<error>");
  CHECK_THAT(error, Catch::Contains("incompatible types"));
  // Soft placement clears the conflicting fields instead.
  CHECK(merged("/gpu:*", "/cpu:1", true).empty());
  CHECK(merged("/gpu:1", "/gpu:2", true) == parse("/gpu:*").to_string());
  CHECK(merged("/job:a/gpu:1", "/task:3/gpu:2", true)
        == "/job:a/task:3/device:GPU:*");
}

TEST_CASE("merge_device_names leaves the target unchanged on error") {
  auto target = parse("/job:foo");
  auto st = merge_device_names(target, parse("/task:3/replica:1/job:bar"));
  CHECK(st.code() == error_code::invalid_argument);
  CHECK(target == parse("/job:foo"));
  // The replica would be merged before the task conflict in TF.
  target = parse("/task:1");
  CHECK_FALSE(merge_device_names(target, parse("/replica:2/task:2")).ok());
  CHECK(target == parse("/task:1"));
}

TEST_CASE("canonical_device (case 28)") {
  CHECK(canonical_device("/replica:0/job:foo") == "/job:foo/replica:0");
  CHECK(canonical_device("/device:GPU:0/task:0/replica:0/job:foo")
        == "/job:foo/replica:0/task:0/device:GPU:0");
  CHECK(canonical_device("/job:muu/task:1/device:MyFunnyDevice:2")
        == "/job:muu/task:1/device:MyFunnyDevice:2");
  CHECK(canonical_device("") == "");
  CHECK(canonical_device("/cpu:0") == "/device:CPU:0");
  CHECK(canonical_device("/gpu:*") == "/device:GPU:*");
  CHECK(canonical_device("/CPU") == "/device:CPU:*");
}

TEST_CASE("Python DeviceSpec validity checks (case 29)") {
  CHECK_THAT(spec_error("/job:j/replica:foo"),
             Catch::Contains("invalid literal for int"));
  CHECK(spec_error("/barcpugpu:muu/baz:2")
        == "Unknown attribute: 'barcpugpu' in '/barcpugpu:muu/baz:2'");
  CHECK(spec_error("/cpu:0/device:GPU:2")
        == "Cannot specify multiple device types: /cpu:0/device:GPU:2");
  // The Python parser needs an index after /device:TYPE.
  CHECK_THAT(spec_error("/device:GPU"),
             Catch::Contains("Unknown attribute: 'device'"));
  try {
    canonical_device("/cpu:0/device:GPU:2");
    FAIL("no exception");
  } catch (const op_error& e) {
    CHECK(e.code() == error_code::invalid_argument);
  }
}

TEST_CASE("Python DeviceSpec parsing details") {
  device_name out;
  REQUIRE(device_name::parse_spec("/job:*/Gpu:1", out).ok());
  // Python keeps a job of "*" literally.
  CHECK(out.job == "*");
  CHECK(out.type == "GPU");
  CHECK(out.id == 1);
  REQUIRE(device_name::parse_spec("job:w//task: 3/device:TPU:*", out).ok());
  CHECK(out.to_string() == "/job:w/task:3/device:TPU:*");
  CHECK_THAT(spec_error("/task:*"), Catch::Contains("invalid literal"));
  CHECK_THAT(spec_error("/job:a:b"), Catch::Contains("Unknown attribute: 'job'"));
  REQUIRE(device_name::parse_spec("", out).ok());
  CHECK(out.empty());
}

TEST_CASE("merge_from: the other spec wins") {
  auto spec = parse("/job:ps/task:1/device:CPU:0");
  spec.merge_from(parse("/job:worker/gpu:*"));
  CHECK(spec.to_string() == "/job:worker/task:1/device:GPU:0");
  spec.merge_from(device_name{});
  CHECK(spec.to_string() == "/job:worker/task:1/device:GPU:0");
}

TEST_CASE("nested device scopes (cases 30 and 31)") {
  std::vector<std::string> scopes{"/device:GPU:0"};
  CHECK(apply_scopes(scopes) == "/device:GPU:0");
  scopes.push_back("/job:worker");
  CHECK(apply_scopes(scopes) == "/job:worker/device:GPU:0");
  scopes.push_back("/device:CPU:0");
  CHECK(apply_scopes(scopes) == "/job:worker/device:CPU:0");
  scopes.push_back("/job:ps");
  CHECK(apply_scopes(scopes) == "/job:ps/device:CPU:0");
  scopes.push_back("");
  CHECK(apply_scopes(scopes) == "/job:ps/device:CPU:0");

  CHECK(apply_scopes({"/job:worker/replica:2"}) == "/job:worker/replica:2");
  CHECK(apply_scopes({"/job:worker/replica:2", "/job:worker/replica:3/task:0"})
        == "/job:worker/replica:3/task:0");
}
