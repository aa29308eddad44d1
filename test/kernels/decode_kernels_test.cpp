// DecodeCSV and DecodeRaw against TensorFlow 1.x's decode_csv_op_test.py
// and decode_raw_op_test.py (tf_semantics §11.2).

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_util.hpp"

using namespace actorflow;
using namespace actorflow::test;

namespace {

using strings = std::vector<std::string>;

tensor records(strings xs) {
  auto n = static_cast<int64_t>(xs.size());
  return make(std::move(xs), tensor_shape{n});
}

template <class T>
tensor def(T value) {
  return tensor::vec(std::vector<T>{value});
}

tensor required(dtype t) {
  return tensor{t, tensor_shape{0}};
}

run_result csv(std::vector<tensor> inputs, std::string delim = ",",
               bool quote = true, std::string na = "") {
  std::vector<dtype> types;
  for (size_t i = 1; i < inputs.size(); ++i)
    types.push_back(inputs[i].type());
  auto node = make_node("DecodeCSV", {{"OUT_TYPE", types},
                                      {"field_delim", delim},
                                      {"use_quote_delim", quote},
                                      {"na_value", na}});
  return run(node, std::move(inputs));
}

void check_error(const run_result& r, const std::string& fragment) {
  INFO(fragment);
  REQUIRE_FALSE(r.st.ok());
  CHECK(r.st.code() == error_code::invalid_argument);
  CHECK_THAT(r.st.message(), Catch::Contains(fragment));
  CHECK_THAT(r.st.message(), Catch::Contains("[[node n]]"));
}

template <class T>
std::string bytes_of(std::vector<T> xs, bool big_endian = false) {
  std::string s(xs.size() * sizeof(T), '\0');
  std::memcpy(s.data(), xs.data(), s.size());
  if (big_endian)
    for (size_t i = 0; i < xs.size(); ++i)
      for (size_t b = 0; b < sizeof(T) / 2; ++b)
        std::swap(s[i * sizeof(T) + b], s[i * sizeof(T) + sizeof(T) - 1 - b]);
  return s;
}

run_result raw(tensor input, dtype t, bool little = true) {
  return run(make_node("DecodeRaw",
                       {{"out_type", t}, {"little_endian", little}}),
             {std::move(input)});
}

} // namespace

TEST_CASE("DecodeCSV parses every column type", "[decode_csv]") {
  auto r = csv({records({"1,2,3.5,4.25,abc", "-5,9000000000,-1e3,0.5,d e"}),
                def<int32_t>(0), def<int64_t>(0), def<float>(0),
                def<double>(0), def<std::string>("")});
  REQUIRE(r.st.ok());
  REQUIRE(r.outputs.size() == 5);
  CHECK(values<int32_t>(r.outputs[0]) == std::vector<int32_t>{1, -5});
  CHECK(values<int64_t>(r.outputs[1])
        == std::vector<int64_t>{2, 9000000000LL});
  CHECK(values<float>(r.outputs[2]) == std::vector<float>{3.5f, -1000.0f});
  CHECK(values<double>(r.outputs[3]) == std::vector<double>{4.25, 0.5});
  CHECK(values<std::string>(r.outputs[4]) == strings{"abc", "d e"});
  for (auto& o : r.outputs)
    CHECK(o.shape() == tensor_shape{2});
}

TEST_CASE("DecodeCSV keeps the records' shape", "[decode_csv]") {
  auto in = make(strings{"1", "2", "3", "4", "5", "6"}, tensor_shape{2, 3});
  auto r = csv({in, def<int32_t>(0)});
  CHECK(r.out().shape() == (tensor_shape{2, 3}));
  CHECK(values<int32_t>(r.out()) == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  auto s = csv({tensor::scalar(std::string{"7,x"}), def<int64_t>(0),
                def<std::string>("")});
  REQUIRE(s.st.ok());
  CHECK(s.outputs[0].shape() == tensor_shape{});
  CHECK(values<int64_t>(s.outputs[0]) == std::vector<int64_t>{7});
}

TEST_CASE("DecodeCSV fills empty fields with defaults", "[decode_csv]") {
  // decode_csv_op_test testSimpleWithDefaults-like cases.
  auto r = csv({records({",1", "0.2,", ","}), def<float>(7.5f),
                def<int32_t>(42)});
  REQUIRE(r.st.ok());
  CHECK(values<float>(r.outputs[0]) == std::vector<float>{7.5f, 0.2f, 7.5f});
  CHECK(values<int32_t>(r.outputs[1]) == std::vector<int32_t>{1, 42, 42});
  // An empty record is one empty field.
  auto e = csv({records({""}), def<std::string>("dflt")});
  CHECK(values<std::string>(e.out()) == strings{"dflt"});
}

TEST_CASE("DecodeCSV treats na_value as empty", "[decode_csv]") {
  auto r = csv({records({"NA,1", "2,NA"}), def<int32_t>(-1),
                def<std::string>("z")},
               ",", true, "NA");
  REQUIRE(r.st.ok());
  CHECK(values<int32_t>(r.outputs[0]) == std::vector<int32_t>{-1, 2});
  CHECK(values<std::string>(r.outputs[1]) == strings{"1", "z"});
  check_error(csv({records({"1,NA"}), def<int32_t>(0), required(dtype::int32)},
                  ",", true, "NA"),
              "Field 1 is required but missing in record 0!");
}

TEST_CASE("DecodeCSV handles quoted fields as TF", "[decode_csv]") {
  auto r = csv({records({R"("a,b",c)", R"("say ""hi""","")",
                         "\"multi\nline\",x"}),
                def<std::string>(""), def<std::string>("d")});
  REQUIRE(r.st.ok());
  CHECK(values<std::string>(r.outputs[0])
        == strings{"a,b", "say \"hi\"", "multi\nline"});
  CHECK(values<std::string>(r.outputs[1]) == strings{"c", "d", "x"});
  // Quoted numbers parse too.
  auto n = csv({records({R"("3","4.5")"}), def<int32_t>(0), def<float>(0)});
  REQUIRE(n.st.ok());
  CHECK(values<int32_t>(n.outputs[0]) == std::vector<int32_t>{3});
  CHECK(values<float>(n.outputs[1]) == std::vector<float>{4.5f});
}

TEST_CASE("DecodeCSV with another delimiter and no quoting",
          "[decode_csv]") {
  auto r = csv({records({"1\t\"x\"", "2\ty,z"}), def<int32_t>(0),
                def<std::string>("")},
               "\t", false);
  REQUIRE(r.st.ok());
  CHECK(values<int32_t>(r.outputs[0]) == std::vector<int32_t>{1, 2});
  CHECK(values<std::string>(r.outputs[1]) == strings{"\"x\"", "y,z"});
}

TEST_CASE("DecodeCSV errors name the record", "[decode_csv]") {
  // tf_semantics case 126.
  check_error(csv({records({",1", "0.2,234a", "3.0,2"}), def<float>(1.0f),
                   required(dtype::int32)}),
              "Field 1 in record 1 is not a valid int32: 234a");
  check_error(csv({records({"1", "2147483648"}), def<int32_t>(0)}),
              "Field 0 in record 1 is not a valid int32: 2147483648");
  check_error(csv({records({"1", "2", "abc"}), def<float>(0)}),
              "Field 0 in record 2 is not a valid float: abc");
  check_error(csv({records({"1,abc"}), def<float>(0), def<double>(0)}),
              "Field 1 in record 0 is not a valid double: abc");
  check_error(csv({records({"1", "x1"}), def<int64_t>(0)}),
              "Field 0 in record 1 is not a valid int64: x1");
  check_error(csv({records({"1,2"}), def<int32_t>(0)}),
              "Expect 1 fields but have 2 in record 0");
  check_error(csv({records({"1,2", "3"}), def<int32_t>(0),
                   def<int32_t>(0)}),
              "Expect 2 fields but have 1 in record 1");
  check_error(csv({records({"1,2,3", "1,2,3", "1,2,3", "1,2,"}),
                   def<int32_t>(0), def<int32_t>(0),
                   required(dtype::int32)}),
              "Field 2 is required but missing in record 3!");
  check_error(csv({records({"a", "a\"b"}), def<std::string>("")}),
              "Unquoted fields cannot have quotes/CRLFs inside in record 1");
  check_error(csv({records({"\"a\"b,c"}), def<std::string>(""),
                   def<std::string>("")}),
              "in record 0");
  check_error(csv({records({"x", "\"abc"}), def<std::string>("")}),
              "Quoted field has to end with quote followed by delim or end "
              "in record 1");
}

TEST_CASE("DecodeCSV rejects bad attributes and defaults", "[decode_csv]") {
  check_error(csv({records({"1"}), def<int32_t>(0)}, ";;"),
              "field_delim should be only 1 char");
  check_error(csv({records({"1"}), tensor::vec(std::vector<int32_t>{1, 2})}),
              "There should only be 1 default per field but field 0 has 2");
  auto node = make_node("DecodeCSV",
                        {{"OUT_TYPE", std::vector<dtype>{dtype::float32}}});
  check_error(run(node, {records({"1"}), def<int32_t>(0)}),
              "was expected to be a float32 tensor");
  check_error(run(node, {records({"1"})}), "expects 2 input(s), got 1");
}

TEST_CASE("DecodeRaw decodes each numeric type", "[decode_raw]") {
  auto f = raw(make(strings{bytes_of<float>({1.5f, -2.0f}),
                            bytes_of<float>({3.0f, 0.25f})},
                    tensor_shape{2}),
               dtype::float32);
  CHECK(f.out().shape() == (tensor_shape{2, 2}));
  CHECK(values<float>(f.out()) == std::vector<float>{1.5f, -2.0f, 3.0f, 0.25f});
  auto d = raw(tensor::scalar(bytes_of<double>({1e300, -0.5})),
               dtype::float64);
  CHECK(d.out().shape() == tensor_shape{2});
  CHECK(values<double>(d.out()) == std::vector<double>{1e300, -0.5});
  auto i = raw(make(strings{bytes_of<int32_t>({1, -2, 0x01020304})},
                    tensor_shape{1}),
               dtype::int32);
  CHECK(i.out().shape() == (tensor_shape{1, 3}));
  CHECK(values<int32_t>(i.out()) == std::vector<int32_t>{1, -2, 0x01020304});
  auto l = raw(make(strings{bytes_of<int64_t>({-9000000000LL})},
                    tensor_shape{1}),
               dtype::int64);
  CHECK(values<int64_t>(l.out()) == std::vector<int64_t>{-9000000000LL});
}

TEST_CASE("DecodeRaw honours little_endian", "[decode_raw]") {
  // decode_raw_op_test testEndianness: "\x01\x02\x03\x04" is 0x04030201
  // little-endian and 0x01020304 big-endian.
  auto in = make(strings{std::string{"\x01\x02\x03\x04", 4}},
                 tensor_shape{1});
  CHECK(values<int32_t>(raw(in, dtype::int32, true).out())
        == std::vector<int32_t>{0x04030201});
  CHECK(values<int32_t>(raw(in, dtype::int32, false).out())
        == std::vector<int32_t>{0x01020304});
  auto big = make(strings{bytes_of<double>({2.5, -8.0}, true)},
                  tensor_shape{1});
  CHECK(values<double>(raw(big, dtype::float64, false).out())
        == std::vector<double>{2.5, -8.0});
}

TEST_CASE("DecodeRaw of empty strings gives a zero-width dimension",
          "[decode_raw]") {
  auto r = raw(make(strings{"", ""}, tensor_shape{2}), dtype::float32);
  CHECK(r.out().shape() == (tensor_shape{2, 0}));
  auto none = raw(make(strings{}, tensor_shape{0}), dtype::int32);
  CHECK(none.out().shape() == (tensor_shape{0, 0}));
}

TEST_CASE("DecodeRaw errors", "[decode_raw]") {
  check_error(raw(make(strings{"abcd", "abcde"}, tensor_shape{2}),
                  dtype::float32),
              "DecodeRaw requires input strings to all be the same size, but "
              "element 1 has size 5 != 4");
  check_error(raw(make(strings{"abcde"}, tensor_shape{1}), dtype::float32),
              "Input to DecodeRaw has length 5 that is not a multiple of 4, "
              "the size of float");
  check_error(raw(make(strings{"abcdefghi"}, tensor_shape{1}),
                  dtype::float64),
              "not a multiple of 8, the size of double");
  check_error(raw(make(strings{"ab"}, tensor_shape{1}), dtype::bool_),
              "does not support dtype bool");
  check_error(raw(tensor::scalar(1.0f), dtype::float32),
              "was expected to be a string tensor");
}
