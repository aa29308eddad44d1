// The runtime actors end to end through `session{}` (a private in-process
// engine): variables (tf_semantics §8), feeds and fetches, random seeds,
// tracing (§10, seed 000 cells 12-13), control dependencies at run time
// (§9), placement errors (§4.4) and the kernels the seeds use.

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actorflow/actorflow.hpp"
#include "common/test_util.hpp"
#include "common/session_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;

namespace {

/// n floats, all `value`.
tensor filled(int64_t n, float value) {
  return tensor::from_vector(std::vector<float>(static_cast<size_t>(n), value),
                             tensor_shape{n});
}

// The code of the op_error `f` throws; OK if it throws none.
template <class F>
error_code code_of(F&& f) {
  auto err = error_of(std::forward<F>(f));
  return err ? err->code() : error_code::ok;
}

run_options full_trace() {
  run_options opts;
  opts.trace_level = run_options::full_trace;
  return opts;
}

tensor floats(std::vector<float> values) {
  return tensor::vec(std::move(values));
}

tensor matrix(std::vector<float> values, int64_t rows, int64_t cols) {
  return tensor::from_vector(std::move(values), tensor_shape{rows, cols});
}

std::vector<std::string> node_names(const device_step_stats& dev) {
  std::vector<std::string> names;
  for (auto& n : dev.node_stats)
    names.push_back(n.node_name);
  return names;
}

} // namespace

// -- variables -------------------------------------------------------------------

TEST_CASE("engine: reading an uninitialized variable is FailedPrecondition "
          "(case 98)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable var0{0.0f};
  CHECK(var0.name() == "Variable:0");
  CHECK(var0.shape() == tensor_shape{});
  session sess{bounded(), &g};
  for (auto fetched : {fetch{var0}, fetch{var0.value()}}) {
    auto err = error_of([&] { sess.run(fetched); });
    REQUIRE(err);
    CHECK(err->code() == error_code::failed_precondition);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("Attempting to use uninitialized value "
                               "Variable"));
  }
  // Feeding the snapshot cuts the uninitialized variable out of the step.
  auto doubled = var0.value() * 2.0f;
  CHECK(sess.run(doubled, {{var0.value(), tensor::scalar(5.0f)}})
          .scalar_value<float>()
        == 10.0f);
  sess.run(global_variables_initializer());
  CHECK(sess.run(var0).scalar_value<float>() == 0.0f);
  CHECK(sess.run(var0.value()).scalar_value<float>() == 0.0f);
}

TEST_CASE("engine: assign_add, assign_sub, assign in sequence (case 99)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f};
  auto plus_one = var.assign_add(1.0);
  auto minus_one = var.assign_sub(2.0);
  auto four = var.assign(4.0);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  CHECK(sess.run(plus_one).scalar_value<float>() == 1.0f);
  CHECK(sess.run(var).scalar_value<float>() == 1.0f);
  CHECK(sess.run(minus_one).scalar_value<float>() == -1.0f);
  CHECK(sess.run(var).scalar_value<float>() == -1.0f);
  CHECK(sess.run(four).scalar_value<float>() == 4.0f);
  CHECK(sess.run(var).scalar_value<float>() == 4.0f);
}

TEST_CASE("engine: assign_add/assign_sub need an initialized variable, "
          "assign does not (case 100)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable p{fill({4, 4}, constant(1.0f)), named("p")};
  auto add_zero = p.assign_add(fill({4, 4}, constant(0.0f)));
  auto sub_zero = p.assign_sub(fill({4, 4}, constant(0.0f)));
  auto set_two = p.assign(fill({4, 4}, constant(2.0f)));
  session sess{bounded(), &g};
  for (auto op : {add_zero.op(), sub_zero.op()}) {
    INFO(op.name());
    auto err = error_of([&] { sess.run(op); });
    REQUIRE(err);
    CHECK(err->code() == error_code::failed_precondition);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("uninitialized value p"));
  }
  sess.run(set_two.op());
  auto twos = tensor::from_vector(std::vector<float>(16, 2.0f),
                                  tensor_shape{4, 4});
  CHECK(sess.run(p) == twos);
  CHECK(sess.run(add_zero) == twos);
}

TEST_CASE("engine: validate_shape checks the declared shape at run time "
          "(§8.1)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v{floats({1, 2, 3}), named("v")};
  auto x = placeholder(dtype::float32, tensor_shape::unknown(), "x");
  auto assign = v.assign(x);
  session sess{bounded(), &g};
  // Even before initialization, against the declared shape.
  auto err = error_of([&] { sess.run(assign, {{x, floats({1, 2})}}); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("Assign requires shapes of both tensors to "
                             "match. lhs shape= [3] rhs shape= [2]"));
  CHECK(sess.run(assign, {{x, floats({4, 5, 6})}}) == floats({4, 5, 6}));
  CHECK(sess.run(v) == floats({4, 5, 6}));
}

TEST_CASE("engine: validate_shape=false replaces the value whatever its "
          "shape (case 101)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable p{floats({1}), named("p")};
  auto big = p.assign(fill({4, 4}, constant(0.0f)), false);
  auto other = p.assign(fill({2, 5}, constant(1.0f)), false);
  session sess{bounded(), &g};
  sess.run(big.op());
  CHECK(sess.run(p).shape() == tensor_shape{4, 4});
  CHECK(sess.run(p.value()).shape() == tensor_shape{4, 4});
  sess.run(other.op());
  CHECK(sess.run(p) == tensor::from_vector(std::vector<float>(10, 1.0f),
                                           tensor_shape{2, 5}));
}

TEST_CASE("engine: is_variable_initialized is false, then true",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable v{1.0f, named("v")};
  auto ready = is_variable_initialized(v);
  session sess{bounded(), &g};
  CHECK(sess.run(ready).type() == dtype::bool_);
  CHECK_FALSE(sess.run(ready).scalar_value<bool>());
  sess.run(v.initializer());
  CHECK(sess.run(ready).scalar_value<bool>());
}

TEST_CASE("engine: initialized_value runs the initializer first (case 105)",
          "[engine][variable]") {
  // TF 1.x builds initialized_value() as identity(<the variable's ref>)
  // under control_dependencies([initializer]), so the read happens after
  // the initializer; reading the snapshot v1/read would race with it.
  graph g;
  auto as_default = g.as_default();
  variable v1{floats({-42, 133.5f}), named("v1")};
  variable v2{-v1.initialized_value(), named("v2")};
  CHECK(v2.shape() == v1.shape());
  session sess{bounded(), &g};
  auto err = error_of([&] { sess.run(v1); });
  REQUIRE(err);
  CHECK(err->code() == error_code::failed_precondition);
  sess.run(v2.initializer());
  CHECK(sess.run(v2) == floats({42, -133.5f}));
  CHECK(sess.run(v1) == floats({-42, 133.5f}));
}

TEST_CASE("engine: initialized_value ignores the device scope around it",
          "[engine][variable][placement]") {
  // TF builds initialized_value() inside colocate_with(variable), which
  // empties the device stack: the identity takes the variable's device and
  // joins its group, so a GPU scope around it cannot conflict.
  graph g;
  auto as_default = g.as_default();
  variable v;
  {
    device_scope cpu{"/device:CPU:0"};
    v = variable{5.0f, named("v")};
  }
  output ix;
  {
    device_scope gpu{"/device:GPU:0"};
    ix = v.initialized_value();
  }
  session sess{bounded(), &g};
  CHECK(sess.run(ix).scalar_value<float>() == 5.0f);
}

TEST_CASE("engine: two private sessions share nothing (seed 000 cell 4)",
          "[engine][variable]") {
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f};
  auto inc = var.assign_add(1.0);
  session sess1{bounded(), &g};
  session sess2{bounded(), &g};
  sess1.run(global_variables_initializer());
  sess2.run(global_variables_initializer());
  CHECK(sess1.run(var).scalar_value<float>() == 0.0f);
  CHECK(sess2.run(var).scalar_value<float>() == 0.0f);
  sess1.run(inc);
  CHECK(sess1.run(var).scalar_value<float>() == 1.0f);
  CHECK(sess2.run(var).scalar_value<float>() == 0.0f);
  // A third session starts from scratch.
  session sess3{bounded(), &g};
  CHECK(code_of([&] { sess3.run(var); }) == error_code::failed_precondition);
}

// -- feeds and fetches ---------------------------------------------------------------

TEST_CASE("engine: a placeholder that is not fed is InvalidArgument naming "
          "it",
          "[engine][errors]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {2}, "x");
  auto y = x * 2.0f;
  session sess{bounded(), &g};
  auto err = error_of([&] { sess.run(y); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->get_status().message(),
             Catch::Contains("You must feed a value for placeholder tensor "
                             "'x'"));
  CHECK(sess.run(y, {{x, floats({1, 2})}}) == floats({2, 4}));
}

TEST_CASE("engine: a feed of the wrong dtype or shape is InvalidArgument",
          "[engine][errors]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {2}, "x");
  auto y = x + 1.0f;
  session sess{bounded(), &g};
  auto wrong_type = error_of([&] {
    sess.run(y, {{x, tensor::vec(std::vector<int32_t>{1, 2})}});
  });
  REQUIRE(wrong_type);
  CHECK(wrong_type->code() == error_code::invalid_argument);
  CHECK_THAT(wrong_type->get_status().message(), Catch::Contains("x:0"));
  auto wrong_shape = error_of([&] { sess.run(y, {{x, floats({1, 2, 3})}}); });
  REQUIRE(wrong_shape);
  CHECK(wrong_shape->code() == error_code::invalid_argument);
  CHECK_THAT(wrong_shape->get_status().message(), Catch::Contains("x:0"));
  // A partially known shape accepts any size in the unknown dimension.
  auto z = placeholder(dtype::float32, {-1, 2}, "z");
  auto sum = reduce_sum(z);
  CHECK(sess.run(sum, {{z, matrix({1, 2, 3, 4, 5, 6}, 3, 2)}})
          .scalar_value<float>()
        == 21.0f);
  CHECK(code_of([&] { sess.run(sum, {{z, matrix({1, 2, 3}, 1, 3)}}); })
        == error_code::invalid_argument);
}

TEST_CASE("engine: placeholder_with_default gives its default unless fed, "
          "and checks a feed as a placeholder does",
          "[engine]") {
  graph g;
  auto as_default = g.as_default();
  auto p = placeholder_with_default(constant(floats({1, 2})),
                                    tensor_shape{-1}, "p");
  CHECK(p.shape() == tensor_shape{{-1}});
  auto y = p * 10.0f;
  session sess{bounded(), &g};
  CHECK(sess.run(y) == floats({10, 20}));
  CHECK(sess.run(y, {{p, floats({3, 4, 5})}}) == floats({30, 40, 50}));
  auto wrong_type = error_of([&] {
    sess.run(y, {{p, tensor::vec(std::vector<int32_t>{1})}});
  });
  REQUIRE(wrong_type);
  CHECK(wrong_type->code() == error_code::invalid_argument);
  CHECK_THAT(wrong_type->get_status().message(), Catch::Contains("p:0"));
  CHECK(code_of([&] { sess.run(y, {{p, matrix({1, 2}, 1, 2)}}); })
        == error_code::invalid_argument);
  // The default after a rejected feed: nothing changed.
  CHECK(sess.run(y) == floats({10, 20}));
  // A declared shape the default does not fit is refused when built.
  auto bad = error_of([&] {
    placeholder_with_default(constant(floats({1, 2})), tensor_shape{{3}});
  });
  REQUIRE(bad);
  CHECK(bad->code() == error_code::invalid_argument);
}

TEST_CASE("engine: dropout keeps each element with probability keep_prob, "
          "scaled by its inverse, and draws a new mask each run",
          "[engine][random]") {
  graph g;
  auto as_default = g.as_default();
  const int64_t n = 20000;
  auto keep = placeholder_with_default(constant(1.0f), tensor_shape{},
                                       "keep_prob");
  auto x = constant(filled(n, 3.0f));
  auto d = dropout(x, keep, 5);
  session sess{bounded(), &g};
  // Not fed: keep_prob 1 keeps everything as it is.
  CHECK(sess.run(d) == filled(n, 3.0f));
  auto kept_in = [&](const tensor& t) {
    int64_t kept = 0;
    for (auto v : t.flat<float>()) {
      // 3 / 0.25 or 0, nothing else.
      CHECK((v == 0.0f || v == 12.0f));
      kept += v != 0.0f;
    }
    return kept;
  };
  auto first = sess.run(d, {{keep, tensor::scalar(0.25f)}});
  auto second = sess.run(d, {{keep, tensor::scalar(0.25f)}});
  // Binomial(20000, 0.25): mean 5000, sd ~61; 6 sd either way.
  for (auto& t : {first, second}) {
    auto kept = kept_in(t);
    CHECK(kept > 5000 - 370);
    CHECK(kept < 5000 + 370);
  }
  CHECK_FALSE(first == second);
  // The gradient is the mask over keep_prob: zero where dropped.
  auto xv = placeholder(dtype::float32, tensor_shape{4}, "xv");
  auto dv = dropout(xv, 0.5, 9);
  auto grad = gradients({reduce_sum(dv)}, {xv})[0];
  auto out = sess.run({dv, grad}, {{xv, floats({1, 2, 3, 4})}});
  for (int i = 0; i < 4; ++i) {
    auto v = out[0].flat<float>()[i];
    auto gr = out[1].flat<float>()[i];
    CHECK((v == 0.0f ? gr == 0.0f : gr == 2.0f));
  }
  // A constant keep_prob of 1 is x itself; outside (0, 1] is refused.
  CHECK(dropout(x, 1.0) == x);
  for (double bad : {0.0, -0.5, 1.5}) {
    auto err = error_of([&] { dropout(x, bad); });
    REQUIRE(err);
    CHECK(err->code() == error_code::invalid_argument);
    CHECK_THAT(err->get_status().message(),
               Catch::Contains("keep_prob must be a scalar tensor or a float "
                               "in the range (0, 1]"));
  }
  // keep_prob of another dtype than x, or not a scalar.
  CHECK(code_of([&] { dropout(x, constant(0.5)); })
        == error_code::invalid_argument);
  CHECK(code_of([&] { dropout(x, constant(floats({0.5f, 0.5f}))); })
        == error_code::invalid_argument);
}

TEST_CASE("engine: random_uniform of a shape computed at run time",
          "[engine][random]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, tensor_shape{-1, 3}, "x");
  auto r = random_uniform(shape(x), -2.0, 2.0);
  CHECK(r.shape() == tensor_shape{{-1, -1}});
  session sess{bounded(), &g};
  auto t = sess.run(r, {{x, tensor{dtype::float32, tensor_shape{5, 3}}}});
  CHECK(t.shape() == tensor_shape{{5, 3}});
  for (auto v : t.flat<float>()) {
    CHECK(v >= -2.0f);
    CHECK(v < 2.0f);
  }
  // A negative dimension fed as the shape fails the step, not the engine.
  auto dims = placeholder(dtype::int64, tensor_shape{-1}, "dims");
  auto from_dims = random_uniform(dims);
  CHECK(code_of([&] {
          sess.run(from_dims, {{dims, tensor::vec<int64_t>({2, -3})}});
        })
        == error_code::invalid_argument);
  CHECK(sess.run(from_dims, {{dims, tensor::vec<int64_t>({2, 3})}}).shape()
        == tensor_shape{{2, 3}});
  CHECK(code_of([&] { random_uniform(constant(floats({2}))); })
        == error_code::invalid_argument);
}

TEST_CASE("engine: unknown fetches and targets are NotFound",
          "[engine][errors]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(1.0f, "a");
  session sess{bounded(), &g};
  auto tensor_err = error_of([&] { sess.run(fetch{"nope:0"}); });
  REQUIRE(tensor_err);
  CHECK(tensor_err->code() == error_code::not_found);
  CHECK_THAT(tensor_err->get_status().message(), Catch::Contains("nope"));
  fetch target{"ghost"};
  target.target = true;
  auto target_err = error_of([&] { sess.run(target); });
  REQUIRE(target_err);
  CHECK(target_err->code() == error_code::not_found);
  CHECK_THAT(target_err->get_status().message(), Catch::Contains("ghost"));
  // The session still works.
  CHECK(sess.run(a).scalar_value<float>() == 1.0f);
}

TEST_CASE("engine: targets give invalid tensors, fed tensors can be fetched",
          "[engine]") {
  graph g;
  auto as_default = g.as_default();
  auto x = placeholder(dtype::float32, {}, "x");
  auto y = x * 10.0f;
  auto nothing = no_op("nothing");
  session sess{bounded(), &g};
  auto out = sess.run({fetch{y}, fetch{nothing}, fetch{x}, fetch{y}},
                      {{x, tensor::scalar(2.0f)}});
  REQUIRE(out.size() == 4);
  CHECK(out[0].scalar_value<float>() == 20.0f);
  CHECK_FALSE(out[1].valid());
  CHECK(out[2].scalar_value<float>() == 2.0f);
  CHECK(out[3].scalar_value<float>() == 20.0f);
  // Feeding an intermediate tensor cuts the graph there.
  CHECK(sess.run(y * 2.0f, {{y, tensor::scalar(1.0f)}}).scalar_value<float>()
        == 2.0f);
}

TEST_CASE("engine: a repeated run gives the same results and takes new feeds",
          "[engine]") {
  graph g;
  auto as_default = g.as_default();
  auto a = constant(matrix({1, 2, 3, 4}, 2, 2), "a");
  auto b = matmul(a, a);
  auto x = placeholder(dtype::float32, {}, "x");
  auto y = x * 2.0f;
  session sess{bounded(), &g};
  auto first = sess.run(b);
  auto second = sess.run(b);
  CHECK(first == matrix({7, 10, 15, 22}, 2, 2));
  CHECK(first == second);
  CHECK(sess.run(y, {{x, tensor::scalar(1.0f)}}).scalar_value<float>()
        == 2.0f);
  CHECK(sess.run(y, {{x, tensor::scalar(3.0f)}}).scalar_value<float>()
        == 6.0f);
  // Nodes added after the first run are picked up.
  auto c = b + 1.0f;
  CHECK(sess.run(c) == matrix({8, 11, 16, 23}, 2, 2));
}

// -- kernels the seeds use -----------------------------------------------------------

TEST_CASE("engine: matmul, reductions, split, concat and stack", "[engine]") {
  graph g;
  auto as_default = g.as_default();
  // Case 19.
  auto mm = matmul(constant(matrix({2, 1}, 1, 2)), constant(matrix({1, 2}, 2, 1)));
  auto m = constant(matrix({1, 2, 3, 4, 5, 6}, 2, 3), "m");
  auto row_sums = reduce_sum(m, {1});
  auto row_sums_kept = reduce_sum(m, {1}, true);
  auto mean = reduce_mean(m);
  auto col_max = reduce_max(m, {0});
  auto wide = constant(matrix({1, 2, 3, 4, 5, 6, 7, 8}, 2, 4), "wide");
  auto halves = split(wide, 2, 1);
  auto joined = concat(halves, 0);
  auto v1 = constant(floats({1, 2}), "v1");
  auto v2 = constant(floats({3, 4}), "v2");
  auto rows = stack({v1, v2});
  auto cols = stack({v1, v2}, 1);
  session sess{bounded(), &g};
  auto out = sess.run({mm, row_sums, row_sums_kept, mean, col_max, halves[0],
                       halves[1], joined, rows, cols});
  CHECK(out[0] == matrix({4}, 1, 1));
  CHECK(out[1] == floats({6, 15}));
  CHECK(out[2] == matrix({6, 15}, 2, 1));
  CHECK(out[3].scalar_value<float>() == 3.5f);
  CHECK(out[4] == floats({4, 5, 6}));
  CHECK(out[5] == matrix({1, 2, 5, 6}, 2, 2));
  CHECK(out[6] == matrix({3, 4, 7, 8}, 2, 2));
  CHECK(out[7] == matrix({1, 2, 5, 6, 3, 4, 7, 8}, 4, 2));
  CHECK(out[8] == matrix({1, 2, 3, 4}, 2, 2));
  CHECK(out[9] == matrix({1, 3, 2, 4}, 2, 2));
  // Run-time shapes agree with the static ones.
  CHECK(out[2].shape() == row_sums_kept.shape());
  CHECK(out[7].shape() == joined.shape());
}

TEST_CASE("engine: Print returns its input", "[engine]") {
  graph g;
  auto as_default = g.as_default();
  auto x = constant(floats({1, 2, 3}), "x");
  auto total = reduce_sum(x);
  auto printed = print(x, {total}, "total is ");
  session sess{bounded(), &g};
  CHECK(sess.run(printed) == floats({1, 2, 3}));
  CHECK(printed.shape() == x.shape());
}

TEST_CASE("engine: seed 001's split, reduce, Print and pack pipeline",
          "[engine]") {
  graph g;
  auto as_default = g.as_default();
  auto input_array = placeholder(dtype::int32, {-1}, "input");
  std::vector<output> all_reduce;
  for (auto& portion : split(input_array, 2, 0)) {
    auto local_reduce = reduce_sum(portion);
    all_reduce.push_back(print(portion, {local_reduce}, "portion is"));
  }
  auto final_result = reduce_sum(pack(all_reduce));
  session sess{bounded(), &g};
  auto ones = tensor::vec(std::vector<int32_t>(1000, 1));
  auto result = sess.run(final_result, {{input_array, ones}});
  CHECK(result.type() == dtype::int32);
  CHECK(result.scalar_value<int32_t>() == 1000);
}

// -- control dependencies at run time -------------------------------------------------

TEST_CASE("engine: a control dependency orders a read after an update",
          "[engine][control]") {
  graph g;
  auto as_default = g.as_default();
  variable v{0.0f, named("v")};
  auto inc = v.assign_add(1.0);
  output after;
  {
    control_dependencies deps{inc};
    after = identity(v.ref(), "after");
  }
  session sess{bounded(), &g};
  sess.run(v.initializer());
  CHECK(sess.run(after).scalar_value<float>() == 1.0f);
  CHECK(sess.run(after).scalar_value<float>() == 2.0f);
  CHECK(sess.run(v).scalar_value<float>() == 2.0f);
}

TEST_CASE("engine: a value is freed once its last consumer took it, so an "
          "update later in the step writes the variable in place",
          "[engine][control]") {
  // As TF's executor, which clears each input entry once its consumer ran.
  // Were the read kept until the step ends, the update would find the
  // variable's buffer shared and write a copy of it (a whole extra copy
  // of a weight matrix per training step on a ps).
  graph g;
  auto as_default = g.as_default();
  constexpr int64_t n = int64_t{1} << 18;
  variable v{filled(n, 1.0f), named("v")};
  auto total
    = reduce_sum(identity(v, "read"), std::vector<int>{}, false, "total");
  output inc;
  {
    control_dependencies deps{total};
    inc = v.assign_add(constant(filled(n, 2.0f)));
  }
  session sess{bounded(), &g};
  sess.run(v.initializer());
  // The first update copies: the initial value is the Const's own tensor.
  sess.run(inc);
  auto before = sess.run(v);
  const void* buffer = before.raw();
  before = tensor{};
  auto results = sess.run({total, inc});
  CHECK(results[0].scalar_value<float>() == 3.0f * static_cast<float>(n));
  results.clear();
  auto after = sess.run(v);
  CHECK(after.flat<float>()[n - 1] == 5.0f);
  CHECK(after.raw() == buffer);
}

TEST_CASE("engine: reads that skip the variable's mailbox never see a "
          "half-applied update", "[engine][control]") {
  // An executor reads a variable of its own process from the variable's
  // cell, unless the variable actor holds it for an update; assign_add
  // writes 1 MiB in place whenever no reader shares the buffer. Every
  // value a concurrent reader fetches must be one of the whole states:
  // all elements equal.
  graph g;
  auto as_default = g.as_default();
  constexpr int64_t n = int64_t{1} << 18;
  variable v{filled(n, 0.0f), named("v")};
  auto inc = v.assign_add(constant(filled(n, 1.0f)));
  // One session, two threads (as queue runners use one).
  session sess{bounded(), &g};
  sess.run(v.initializer());
  std::atomic<bool> done{false};
  std::thread updates{[&] {
    for (int i = 0; i < 400; ++i)
      sess.run(inc.op());
    done = true;
  }};
  int reads = 0;
  int torn = 0;
  float last = 0;
  bool monotonic = true;
  while (!done) {
    auto value = sess.run(v);
    auto xs = value.flat<float>();
    if (std::any_of(xs.begin(), xs.end(),
                    [&](float x) { return x != xs[0]; }))
      ++torn;
    monotonic = monotonic && xs[0] >= last;
    last = xs[0];
    ++reads;
  }
  updates.join();
  INFO(reads << " reads");
  CHECK(reads > 0);
  CHECK(torn == 0);
  CHECK(monotonic);
  CHECK(sess.run(v).flat<float>()[n - 1] == 400.0f);
}

// -- random seeds --------------------------------------------------------------------

TEST_CASE("engine: seeded random ops repeat across sessions, not across "
          "runs",
          "[engine][random]") {
  graph g;
  auto as_default = g.as_default();
  auto r = random_normal({8}, 0.0, 1.0, dtype::float32, 42);
  session s1{bounded(), &g};
  session s2{bounded(), &g};
  auto x1 = s1.run(r);
  auto x2 = s1.run(r);
  auto y1 = s2.run(r);
  auto y2 = s2.run(r);
  CHECK(x1.shape() == tensor_shape{8});
  CHECK(x1 == y1);
  CHECK(x2 == y2);
  CHECK_FALSE(x1 == x2);
  // mean and stddev apply.
  auto shifted = random_normal({8}, 10.0, 0.5, dtype::float32, 42);
  auto z = s1.run(shifted);
  for (auto value : z.flat<float>())
    CHECK(std::abs(value - 10.0f) < 5.0f);
}

TEST_CASE("engine: a graph-level seed alone makes ops reproducible",
          "[engine][random]") {
  graph g;
  auto as_default = g.as_default();
  g.set_seed(7);
  auto r = random_uniform({6});
  session s1{bounded(), &g};
  session s2{bounded(), &g};
  CHECK(s1.run(r) == s2.run(r));
  auto sample = s1.run(r);
  for (auto value : sample.flat<float>()) {
    CHECK(value >= 0.0f);
    CHECK(value < 1.0f);
  }
}

TEST_CASE("engine: unseeded random ops differ between sessions",
          "[engine][random]") {
  graph g;
  auto as_default = g.as_default();
  auto r = random_normal({16});
  session s1{bounded(), &g};
  session s2{bounded(), &g};
  CHECK_FALSE(s1.run(r) == s2.run(r));
}

TEST_CASE("engine: a random op's sequence goes on across fetch signatures",
          "[engine][random]") {
  // TensorFlow keeps one kernel per stateful node and session (the
  // session's OpSegment), whatever executor runs it: a seeded op's n-th
  // value in a session is the same whichever fetches ran it before.
  graph g;
  auto as_default = g.as_default();
  auto r = random_normal({4}, 0.0, 1.0, dtype::float32, 5);
  auto other = constant(1.0f, "other");
  session reference{bounded(), &g};
  reference.run(r);
  auto second = reference.run(r);
  session mixed{bounded(), &g};
  mixed.run(r);
  auto out = mixed.run({fetch{r}, fetch{other}});
  CHECK(out[0] == second);
}

// -- tracing ------------------------------------------------------------------------

TEST_CASE("engine: FULL_TRACE lists _SOURCE and the nodes run (seed 000 "
          "cells 12-13)",
          "[engine][trace]") {
  graph g;
  auto as_default = g.as_default();
  variable var{0.0f, named("var")};
  auto first_inc = var.assign_add(1.0);
  auto second_inc = var.assign_add(1.0);
  session sess{bounded(), &g};
  sess.run(global_variables_initializer());
  sess.run(first_inc);

  run_metadata md;
  CHECK(sess.run(var, {}, full_trace(), &md).scalar_value<float>() == 1.0f);
  REQUIRE(md.has_step_stats);
  REQUIRE(md.stats.dev_stats.size() == 1);
  CHECK(md.stats.dev_stats[0].device
        == "/job:localhost/replica:0/task:0/device:CPU:0");
  CHECK(node_names(md.stats.dev_stats[0])
        == std::vector<std::string>{"_SOURCE", "var"});

  run_metadata inc_md;
  CHECK(sess.run(second_inc, {}, full_trace(), &inc_md).scalar_value<float>()
        == 2.0f);
  REQUIRE(inc_md.has_step_stats);
  REQUIRE(inc_md.stats.dev_stats.size() == 1);
  auto names = node_names(inc_md.stats.dev_stats[0]);
  REQUIRE(names.size() == 4);
  CHECK(names.front() == "_SOURCE");
  auto pos = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  CHECK(std::is_permutation(names.begin(), names.end(),
                            std::vector<std::string>{"_SOURCE",
                                                     "AssignAdd_1/value",
                                                     "var", "AssignAdd_1"}
                              .begin()));
  // The update runs after both of its inputs.
  CHECK(pos("AssignAdd_1") > pos("var"));
  CHECK(pos("AssignAdd_1") > pos("AssignAdd_1/value"));
  for (auto& n : inc_md.stats.dev_stats[0].node_stats) {
    CHECK_FALSE(n.node_name.empty());
    CHECK(n.all_start_micros > 0);
    CHECK(n.all_end_rel_micros >= 0);
  }
  auto json = inc_md.to_chrome_trace();
  CHECK_THAT(json, Catch::Contains("traceEvents"));
  CHECK_THAT(json, Catch::Contains("AssignAdd_1"));
  CHECK_THAT(json, Catch::Contains(
                     "/job:localhost/replica:0/task:0/device:CPU:0"));

  // No trace level: no step stats.
  run_metadata quiet;
  sess.run(var, {}, {}, &quiet);
  CHECK_FALSE(quiet.has_step_stats);
  CHECK(quiet.stats.dev_stats.empty());
}

// -- placement on the private engine ---------------------------------------------------

TEST_CASE("engine: devices the engine lacks (cases 36-37)",
          "[engine][placement]") {
  graph g;
  auto as_default = g.as_default();
  output on_gpu, on_missing_task, here;
  {
    device_scope gpu{"/device:GPU:0"};
    on_gpu = constant(1.0f, "on_gpu") * 2.0f;
  }
  {
    device_scope task{"/job:localhost/task:1"};
    on_missing_task = constant(1.0f, "on_missing_task");
  }
  {
    device_scope task{"/job:localhost/replica:0/task:0/cpu:0"};
    here = constant(3.0f, "here");
  }
  session hard{bounded(), &g};
  auto gpu_err = error_of([&] { hard.run(on_gpu); });
  REQUIRE(gpu_err);
  CHECK(gpu_err->code() == error_code::invalid_argument);
  CHECK_THAT(gpu_err->get_status().message(),
             Catch::Contains("Cannot assign a device for operation"));
  auto task_err = error_of([&] { hard.run(on_missing_task); });
  REQUIRE(task_err);
  CHECK(task_err->code() == error_code::invalid_argument);
  CHECK_THAT(task_err->get_status().message(),
             Catch::Contains("on_missing_task"));
  CHECK(hard.run(here).scalar_value<float>() == 3.0f);

  auto config = bounded();
  config.allow_soft_placement = true;
  session soft{config, &g};
  CHECK(soft.run(on_gpu).scalar_value<float>() == 2.0f);
  // Soft placement keeps the task constraint.
  CHECK(code_of([&] { soft.run(on_missing_task); })
        == error_code::invalid_argument);
}
