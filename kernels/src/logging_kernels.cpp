// Print and Assert, as TensorFlow 1.x's logging_ops. Print forwards its
// first input and writes a message with a summary of the others, as one
// line: the message is log_escape'd and string elements C-escaped
// (text_util.hpp), so a graph from a peer cannot forge log lines or send
// terminal escapes. Assert fails its step with such a summary.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <type_traits>

#include "actorflow/graph/log_ring.hpp"
#include "actorflow/graph/text_util.hpp"
#include "kernels_impl.hpp"

namespace actorflow::detail {

namespace {

// -- Print ------------------------------------------------------------------

// TensorFlow's StrCat of a float: %g with FLT_DIG (DBL_DIG) digits, or
// FLT_DIG + 3 (DBL_DIG + 2) when that does not read back exactly.
template <class T>
std::string format_float(T x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x < 0 ? "-inf" : "inf";
  constexpr bool is_float = std::is_same_v<T, float>;
  constexpr int digits = is_float ? FLT_DIG : DBL_DIG;
  constexpr int more_digits = is_float ? FLT_DIG + 3 : DBL_DIG + 2;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(x));
  if (static_cast<T>(std::strtod(buf, nullptr)) != x)
    std::snprintf(buf, sizeof(buf), "%.*g", more_digits,
                  static_cast<double>(x));
  return buf;
}

template <class T>
std::string format_element(const T& x) {
  if constexpr (std::is_floating_point_v<T>)
    return format_float(x);
  else if constexpr (std::is_same_v<T, half>)
    return format_float(static_cast<float>(x));
  else if constexpr (std::is_same_v<T, std::complex<float>>
                     || std::is_same_v<T, std::complex<double>>)
    return "(" + format_float(x.real()) + "," + format_float(x.imag()) + ")";
  else if constexpr (std::is_same_v<T, std::string>)
    return c_escape(x);
  else if constexpr (std::is_same_v<T, bool>)
    return x ? "1" : "0"; // TF 1.x prints bools as numbers
  else
    return std::to_string(x);
}

// TensorFlow 1.x's Tensor::SummarizeValue: the first `limit` elements in
// row-major order, separated by spaces, "..." if some were left out.
status summarize(const kernel_context& ctx, const tensor& t, int64_t limit,
                 std::string& out) {
  return visit_all(ctx, t.type(), [&]<class T>(type_tag<T>) -> status {
    auto xs = t.flat<T>();
    auto n = static_cast<int64_t>(xs.size());
    auto shown = limit < 0 ? n : std::min(limit, n);
    for (int64_t i = 0; i < shown; ++i) {
      if (i > 0)
        out += ' ';
      out += format_element(xs[static_cast<size_t>(i)]);
    }
    if (shown < n)
      out += "...";
    return {};
  });
}

status print_kernel(kernel_context& ctx) {
  std::string message;
  int64_t summarize_n = 3;
  if (auto st = read_attr(ctx, "message", message); !st.ok())
    return st;
  if (auto st = read_attr(ctx, "summarize", summarize_n); !st.ok())
    return st;
  int64_t first_n = -1;
  if (auto st = read_attr(ctx, "first_n", first_n); !st.ok())
    return st;
  ctx.outputs.push_back(ctx.inputs[0]);
  // The first `first_n` runs print, counted by the executor per node and
  // session (TF's PrintOp counts per kernel instance, the same thing).
  if (first_n >= 0 && ctx.runs) {
    if (*ctx.runs >= first_n)
      return {};
    ++*ctx.runs;
  }
  // The message comes with the graph, from whoever sent it: escaped
  // (log_escape), so that it cannot forge log lines or drive the
  // terminal. String elements are C-escaped as TF's SummarizeValue does.
  auto line = log_escape(message);
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    line += '[';
    if (auto st = summarize(ctx, ctx.inputs[i], summarize_n, line); !st.ok())
      return st;
    line += ']';
  }
  if (ctx.print)
    ctx.print(line);
  else
    std::cerr << line << std::endl;
  note_log(log_level::info, line);
  return {};
}

// -- Assert -----------------------------------------------------------------

status assert_kernel(kernel_context& ctx) {
  auto& cond = ctx.inputs[0];
  if (cond.type() != dtype::bool_ || cond.num_elements() != 1)
    return invalid_argument("In[0] expects a scalar bool, got a "
                            + std::string{to_string(cond.type())}
                            + " tensor of shape " + cond.shape().to_string());
  if (cond.flat<bool>()[0])
    return {};
  int64_t summarize_n = 3;
  if (auto st = read_attr(ctx, "summarize", summarize_n); !st.ok())
    return st;
  std::string msg = "assertion failed: ";
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    msg += '[';
    if (auto st = summarize(ctx, ctx.inputs[i], summarize_n, msg); !st.ok())
      return st;
    msg += ']';
    if (i + 1 < ctx.inputs.size())
      msg += ' ';
  }
  return invalid_argument(msg);
}

} // namespace

void register_logging_kernels(kernel_registry& registry) {
  add_kernel<print_kernel, min_inputs(1).type_attr("T", 0)>(registry,
                                                              "Print");
  add_kernel<assert_kernel, min_inputs(1)>(registry, "Assert");
}

} // namespace actorflow::detail
