// The parsing-op builders (decode_csv, decode_raw) against TensorFlow 1.x's
// parsing_ops graph-time behaviour (tf_semantics §11.2).

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/parsing_ops.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

using strings = std::vector<std::string>;

} // namespace

TEST_CASE("decode_csv builds a DecodeCSV node with Const defaults",
          "[parsing_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto lines = placeholder(dtype::string, tensor_shape{-1});
  auto cols = decode_csv(lines,
                         {tensor::vec(std::vector<float>{1.0f}),
                          tensor{dtype::int32, tensor_shape{0}},
                          tensor::vec(std::vector<std::string>{"x"})},
                         ";", false, "NA");
  REQUIRE(cols.size() == 3);
  CHECK(cols[0].name() == "DecodeCSV:0");
  CHECK(cols[2].name() == "DecodeCSV:2");
  CHECK(cols[0].type() == dtype::float32);
  CHECK(cols[1].type() == dtype::int32);
  CHECK(cols[2].type() == dtype::string);
  for (auto& c : cols)
    CHECK(c.shape() == tensor_shape{-1});
  auto& d = cols[0].op().def();
  CHECK(d.op == "DecodeCSV");
  CHECK(d.inputs
        == strings{lines.op().name(), "DecodeCSV/record_defaults_0",
                   "DecodeCSV/record_defaults_1",
                   "DecodeCSV/record_defaults_2"});
  CHECK(std::get<std::vector<dtype>>(d.attrs.at("OUT_TYPE"))
        == std::vector<dtype>{dtype::float32, dtype::int32, dtype::string});
  CHECK(std::get<std::string>(d.attrs.at("field_delim")) == ";");
  CHECK(std::get<bool>(d.attrs.at("use_quote_delim")) == false);
  CHECK(std::get<std::string>(d.attrs.at("na_value")) == "NA");
  auto def1 = g.tensor_by_name("DecodeCSV/record_defaults_1:0");
  CHECK(def1.op().def().op == "Const");
  CHECK(def1.shape() == tensor_shape{0});
  CHECK(std::get<tensor>(def1.op().def().attrs.at("value")).num_elements()
        == 0);
}

TEST_CASE("decode_csv defaults and unique names", "[parsing_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto line = constant("1,2");
  auto a = decode_csv(line, {tensor::vec(std::vector<int64_t>{0}),
                             tensor::vec(std::vector<double>{0.0})});
  auto b = decode_csv(line, {tensor::vec(std::vector<int64_t>{0}),
                             tensor::vec(std::vector<double>{0.0})});
  CHECK(a[1].name() == "DecodeCSV:1");
  CHECK(b[0].name() == "DecodeCSV_1:0");
  CHECK(b[0].op().def().inputs[1] == "DecodeCSV_1/record_defaults_0");
  CHECK(a[0].shape() == tensor_shape{});
  auto& d = a[0].op().def();
  CHECK(std::get<std::string>(d.attrs.at("field_delim")) == ",");
  CHECK(std::get<bool>(d.attrs.at("use_quote_delim")) == true);
  CHECK(std::get<std::string>(d.attrs.at("na_value")).empty());
  {
    name_scope scope{"input"};
    auto c = decode_csv(line, {tensor::vec(std::vector<int32_t>{0})}, ",",
                        true, "", "parse");
    CHECK(c[0].name() == "input/parse:0");
    CHECK(c[0].op().def().inputs[1] == "input/parse/record_defaults_0");
  }
}

TEST_CASE("decode_csv rejects bad arguments at build time",
          "[parsing_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto line = constant("1");
  auto one = tensor::vec(std::vector<int32_t>{0});
  check_invalid(error_of([&] { decode_csv(constant(1.0f), {one}); }),
                "not in list of allowed values: string");
  check_invalid(error_of([&] { decode_csv(line, {one}, ";;"); }),
                "field_delim should be only 1 char");
  check_invalid(error_of([&] { decode_csv(line, {one}, ""); }),
                "field_delim should be only 1 char");
  check_invalid(error_of([&] {
                  decode_csv(line, {tensor::vec(std::vector<bool>{true})});
                }),
                "not in list of allowed values");
  check_invalid(error_of([&] {
                  decode_csv(line, {tensor::vec(std::vector<int32_t>{1, 2})});
                }),
                "There should only be 1 default per field but field 0 has 2");
  check_invalid(error_of([&] {
                  decode_csv(line, {tensor::from_vector(
                                     std::vector<int32_t>{1},
                                     tensor_shape{1, 1})});
                }),
                "Shape must be at most rank 1 but is rank 2");
}

TEST_CASE("decode_raw builds a DecodeRaw node", "[parsing_ops]") {
  graph g;
  auto as_default = g.as_default();
  auto bytes = placeholder(dtype::string, tensor_shape{3});
  auto x = decode_raw(bytes, dtype::int32, false);
  CHECK(x.name() == "DecodeRaw:0");
  CHECK(x.type() == dtype::int32);
  CHECK(x.shape() == (tensor_shape{3, -1}));
  auto& d = x.op().def();
  CHECK(d.op == "DecodeRaw");
  CHECK(d.inputs == strings{bytes.op().name()});
  CHECK(std::get<dtype>(d.attrs.at("out_type")) == dtype::int32);
  CHECK(std::get<bool>(d.attrs.at("little_endian")) == false);
  auto y = decode_raw(constant("abcd"), dtype::float32);
  CHECK(y.name() == "DecodeRaw_1:0");
  CHECK(y.shape() == tensor_shape{-1});
  CHECK(std::get<bool>(y.op().def().attrs.at("little_endian")) == true);
  auto z = decode_raw(placeholder(dtype::string), dtype::float64);
  CHECK(z.shape().unknown_rank());
  check_invalid(error_of([&] { decode_raw(constant(1.0f), dtype::int32); }),
                "not in list of allowed values: string");
  check_invalid(error_of([&] { decode_raw(bytes, dtype::string); }),
                "is not in the list of allowed values");
}
