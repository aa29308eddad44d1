// Parsing kernels: DecodeCSV and DecodeRaw, as TensorFlow 1.x's
// core/kernels/decode_csv_op.cc and decode_raw_op.cc (tf_semantics §11.2).

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <bit>
#include <span>
#include <type_traits>
#include <utility>
#include <limits>
#include <string>
#include <vector>

#include "kernels_impl.hpp"

namespace actorflow {

void register_decode_kernels(kernel_registry& registry);

namespace {

using detail::expect_input_type;
using detail::expect_inputs;
using detail::read_attr;
using detail::read_required_attr;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

// The text without leading and trailing whitespace (TF's safe_strto*
// accept surrounding spaces).
std::string trimmed(const std::string& s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && is_space(s[b]))
    ++b;
  while (e > b && is_space(s[e - 1]))
    --e;
  return s.substr(b, e - b);
}

// strings::safe_strto32/64: optional sign, decimal digits, in range.
template <class T>
bool parse_int(const std::string& field, T& out) {
  auto s = trimmed(field);
  if (s.empty())
    return false;
  size_t i = 0;
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    ++i;
  }
  if (i == s.size())
    return false;
  // Accumulate the magnitude as unsigned; the limit depends on the sign.
  using U = std::make_unsigned_t<T>;
  U limit = negative ? U(U(std::numeric_limits<T>::max()) + 1)
                     : U(std::numeric_limits<T>::max());
  U value = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c < '0' || c > '9')
      return false;
    auto d = static_cast<U>(c - '0');
    if (value > (limit - d) / 10)
      return false;
    value = static_cast<U>(value * 10 + d);
  }
  out = negative ? static_cast<T>(U(0) - value) : static_cast<T>(value);
  return true;
}

// strings::safe_strtof/strtod: the whole (trimmed) text must be a decimal
// floating-point number, "inf" or "nan" (no hexadecimal).
template <class T>
bool parse_float(const std::string& field, T& out) {
  auto s = trimmed(field);
  if (s.empty())
    return false;
  for (char c : s)
    if (c == 'x' || c == 'X')
      return false;
  errno = 0;
  char* end = nullptr;
  if constexpr (std::is_same_v<T, float>)
    out = std::strtof(s.c_str(), &end);
  else
    out = std::strtod(s.c_str(), &end);
  // Overflow gives +-inf and underflow a denormal or zero, as TF's
  // double-conversion does; both are accepted.
  return end == s.c_str() + s.size();
}

// DecodeCSVOp::ExtractFields, with the record index added to the quoting
// errors.
status extract_fields(const std::string& input, char delim, bool use_quote,
                      int64_t record, std::vector<std::string>& result) {
  result.clear();
  auto where = " in record " + std::to_string(record);
  if (input.empty()) {
    result.emplace_back();
    return {};
  }
  size_t idx = 0;
  auto n = input.size();
  while (idx < n) {
    if (input[idx] == '\n' || input[idx] == '\r') {
      ++idx;
      continue;
    }
    bool quoted = false;
    if (use_quote && input[idx] == '"') {
      quoted = true;
      ++idx;
    }
    std::string field;
    if (!quoted) {
      while (idx < n && input[idx] != delim) {
        if ((use_quote && input[idx] == '"') || input[idx] == '\n'
            || input[idx] == '\r')
          return invalid_argument(
            "Unquoted fields cannot have quotes/CRLFs inside" + where);
        field += input[idx];
        ++idx;
      }
      ++idx; // past the delimiter (or the end)
    } else {
      while (idx < n - 1 && (input[idx] != '"' || input[idx + 1] != delim)) {
        if (input[idx] != '"') {
          field += input[idx];
          ++idx;
        } else {
          if (input[idx + 1] != '"')
            return invalid_argument(
              "Quote inside a string has to be escaped by another quote"
              + where);
          field += '"';
          idx += 2;
        }
      }
      if (!(idx < n && input[idx] == '"'
            && (idx == n - 1 || input[idx + 1] == delim)))
        return invalid_argument(
          "Quoted field has to end with quote followed by delim or end"
          + where);
      idx += 2;
    }
    result.push_back(std::move(field));
  }
  // A trailing delimiter ends with an empty last field.
  if (input[n - 1] == delim)
    result.emplace_back();
  return {};
}

status decode_csv_kernel(kernel_context& ctx) {
  std::vector<dtype> out_types;
  if (auto st = read_required_attr(ctx, "OUT_TYPE", out_types); !st.ok())
    return st;
  std::string field_delim = ",";
  bool use_quote_delim = true;
  std::string na_value;
  if (auto st = read_attr(ctx, "field_delim", field_delim); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "use_quote_delim", use_quote_delim); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "na_value", na_value); !st.ok())
    return st;
  if (field_delim.size() != 1)
    return invalid_argument("field_delim should be only 1 char");
  auto delim = field_delim[0];
  if (auto st = expect_inputs(ctx, out_types.size() + 1); !st.ok())
    return st;
  if (auto st = expect_input_type(ctx, 0, dtype::string); !st.ok())
    return st;
  for (size_t f = 0; f < out_types.size(); ++f) {
    auto t = out_types[f];
    if (t != dtype::float32 && t != dtype::float64 && t != dtype::int32
        && t != dtype::int64 && t != dtype::string)
      return invalid_argument("DecodeCSV does not support dtype "
                              + std::string{to_string(t)} + " (field "
                              + std::to_string(f) + ")");
    const auto& def = ctx.inputs[f + 1];
    if (auto st = expect_input_type(ctx, f + 1, t); !st.ok())
      return st;
    if (def.shape().rank() > 1)
      return invalid_argument("Each record default should be at most rank 1");
    if (def.num_elements() > 1)
      return invalid_argument("There should only be 1 default per field but "
                              "field "
                              + std::to_string(f) + " has "
                              + std::to_string(def.num_elements()));
  }

  const auto& records_t = ctx.inputs[0];
  auto records = records_t.flat<std::string>();
  std::vector<tensor> outputs;
  outputs.reserve(out_types.size());
  for (auto t : out_types)
    outputs.emplace_back(t, records_t.shape());

  std::vector<std::string> fields;
  for (size_t r = 0; r < records.size(); ++r) {
    auto record = static_cast<int64_t>(r);
    if (auto st = extract_fields(records[r], delim, use_quote_delim, record,
                                 fields);
        !st.ok())
      return st;
    if (fields.size() != out_types.size())
      return invalid_argument("Expect " + std::to_string(out_types.size())
                              + " fields but have "
                              + std::to_string(fields.size()) + " in record "
                              + std::to_string(record));
    for (size_t f = 0; f < out_types.size(); ++f) {
      const auto& field = fields[f];
      const auto& def = ctx.inputs[f + 1];
      auto t = out_types[f];
      if (field.empty() || field == na_value) {
        if (def.num_elements() != 1)
          return invalid_argument("Field " + std::to_string(f)
                                  + " is required but missing in record "
                                  + std::to_string(record) + "!");
      }
      bool use_default = field.empty() || field == na_value;
      auto bad = [&](const char* type_name) {
        return invalid_argument("Field " + std::to_string(f) + " in record "
                                + std::to_string(record)
                                + " is not a valid " + type_name + ": "
                                + field);
      };
      switch (t) {
        case dtype::int32: {
          auto& out = outputs[f].flat<int32_t>()[r];
          if (use_default)
            out = def.flat<int32_t>()[0];
          else if (!parse_int(field, out))
            return bad("int32");
          break;
        }
        case dtype::int64: {
          auto& out = outputs[f].flat<int64_t>()[r];
          if (use_default)
            out = def.flat<int64_t>()[0];
          else if (!parse_int(field, out))
            return bad("int64");
          break;
        }
        case dtype::float32: {
          auto& out = outputs[f].flat<float>()[r];
          if (use_default)
            out = def.flat<float>()[0];
          else if (!parse_float(field, out))
            return bad("float");
          break;
        }
        case dtype::float64: {
          auto& out = outputs[f].flat<double>()[r];
          if (use_default)
            out = def.flat<double>()[0];
          else if (!parse_float(field, out))
            return bad("double");
          break;
        }
        default: { // string
          auto& out = outputs[f].flat<std::string>()[r];
          out = use_default ? def.flat<std::string>()[0] : field;
          break;
        }
      }
    }
  }
  ctx.outputs = std::move(outputs);
  return {};
}

template <class T>
void decode_raw_into(const std::span<const std::string>& in, size_t width,
                     bool little_endian, tensor& out) {
  auto dst = out.flat<T>();
  constexpr bool host_little = std::endian::native == std::endian::little;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& s = in[i];
    for (size_t k = 0; k < width; ++k) {
      unsigned char bytes[sizeof(T)];
      std::memcpy(bytes, s.data() + k * sizeof(T), sizeof(T));
      if (little_endian != host_little)
        for (size_t b = 0; b < sizeof(T) / 2; ++b)
          std::swap(bytes[b], bytes[sizeof(T) - 1 - b]);
      T value;
      std::memcpy(&value, bytes, sizeof(T));
      dst[i * width + k] = value;
    }
  }
}

status decode_raw_kernel(kernel_context& ctx) {
  dtype out_type = dtype::invalid;
  bool little_endian = true;
  if (auto st = read_required_attr(ctx, "out_type", out_type); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "little_endian", little_endian); !st.ok())
    return st;
  const auto& input = ctx.inputs[0];
  auto in = input.flat<std::string>();
  int64_t str_size = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    auto size = static_cast<int64_t>(in[i].size());
    if (str_size == -1)
      str_size = size;
    else if (size != str_size)
      return invalid_argument(
        "DecodeRaw requires input strings to all be the same size, but "
        "element "
        + std::to_string(i) + " has size " + std::to_string(size)
        + " != " + std::to_string(str_size));
  }
  auto decode = [&]<class T>(detail::type_tag<T>) -> status {
      auto dims = input.shape().dims();
      if (str_size <= 0) {
        dims.push_back(0);
        ctx.outputs.emplace_back(out_type, tensor_shape{dims});
        return {};
      }
      auto size = static_cast<size_t>(str_size);
      if (size % sizeof(T) != 0)
        return invalid_argument("Input to DecodeRaw has length "
                                + std::to_string(size)
                                + " that is not a multiple of "
                                + std::to_string(sizeof(T)) + ", the size of "
                                + std::string{tf_type_name(out_type)});
      auto width = size / sizeof(T);
      dims.push_back(static_cast<int64_t>(width));
      tensor out{out_type, tensor_shape{dims}};
      decode_raw_into<T>(in, width, little_endian, out);
      ctx.outputs.push_back(std::move(out));
      return {};
    };
  if (out_type == dtype::uint8)
    return decode(detail::type_tag<uint8_t>{});
  return detail::visit_numeric(ctx, out_type, decode);
}

} // namespace

/// Registers DecodeCSV and DecodeRaw.
void register_decode_kernels(kernel_registry& registry) {
  // DecodeCSV's inputs follow its OUT_TYPE attribute: it checks them itself.
  detail::add_kernel<decode_csv_kernel>(registry, "DecodeCSV");
  detail::add_kernel<decode_raw_kernel,
                     detail::inputs(1).input_dtype(0, dtype::string)>(
    registry, "DecodeRaw");
}

} // namespace actorflow
