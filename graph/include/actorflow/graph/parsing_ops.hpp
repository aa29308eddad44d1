#pragma once

#include <string>
#include <vector>

#include "actorflow/graph/graph.hpp"

/// Graph-building API for TensorFlow 1.x's parsing ops (tf_semantics
/// §11.2):
///
/// ~~~
/// using namespace actorflow;
/// auto cols = decode_csv(lines, {tensor::vec(std::vector<float>{0.0f}),
///                                tensor(dtype::int32, tensor_shape{0})});
/// auto raw = decode_raw(bytes, dtype::float32);
/// ~~~
///
/// Builders throw op_error (InvalidArgument) for what TF rejects at
/// graph-building time, naming the problem; bad records are the kernels'
/// business (InvalidArgument naming the record).
namespace actorflow {

/// A DecodeCSV node (named `name`, made unique) parsing the string tensor
/// `records`: one output per column, each of its default's dtype (float32,
/// float64, int32, int64 or string) and of `records`' shape. Each default
/// becomes a Const input "<node>/record_defaults_<i>" and is a tensor of
/// rank <= 1 with 0 (the column is required) or 1 element. `field_delim`
/// must be one character.
std::vector<output> decode_csv(const output& records,
                               const std::vector<tensor>& record_defaults,
                               const std::string& field_delim = ",",
                               bool use_quote_delim = true,
                               const std::string& na_value = "",
                               const std::string& name = "DecodeCSV");

/// A DecodeRaw node reinterpreting the bytes of each string of `bytes` as
/// a vector of `out_type` (float32, float64, int32 or int64); static shape:
/// `bytes`' shape + [-1].
output decode_raw(const output& bytes, dtype out_type,
                  bool little_endian = true,
                  const std::string& name = "DecodeRaw");

} // namespace actorflow
