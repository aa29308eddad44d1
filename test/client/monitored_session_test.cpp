// MonitoredTrainingSession and its hooks: preparing the model (init or
// restore, workers waiting for the chief), hooks around every run,
// checkpoints (the chief's fallback past a damaged one), queue runners,
// and recovery from a restarted ps task.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/graph/training.hpp"
#include "actorflow/client/basic_session_run_hooks.hpp"
#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/device_setter.hpp"
#include "actorflow/client/monitored_session.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "common/session_util.hpp"
#include "common/temp_dir.hpp"
#include "common/test_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

/// Log lines, collected from any thread.
struct log_lines {
  std::mutex mtx;
  std::vector<std::string> lines;

  log_sink sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> guard{mtx};
      lines.push_back(line);
    };
  }
  size_t count(const std::string& part) {
    std::lock_guard<std::mutex> guard{mtx};
    size_t n = 0;
    for (const auto& l : lines)
      n += l.find(part) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() {
    std::lock_guard<std::mutex> guard{mtx};
    std::string text;
    for (const auto& l : lines)
      text += l + "\n";
    return text;
  }
};

/// A hook recording its calls and the values it asked for.
struct recording_hook : session_run_hook {
  std::vector<fetch> wants;
  feed_dict feeds;
  std::vector<std::string> calls;
  std::vector<std::vector<tensor>> seen;
  std::optional<int> stop_after;

  void begin() override {
    calls.push_back("begin");
  }
  void after_create_session(session&, coordinator&) override {
    calls.push_back("after_create_session");
  }
  session_run_args before_run(session_run_context&) override {
    calls.push_back("before_run");
    return {wants, feeds};
  }
  void after_run(session_run_context& context,
                 const session_run_values& values) override {
    calls.push_back("after_run");
    seen.push_back(values.results);
    if (stop_after && static_cast<int>(seen.size()) >= *stop_after)
      context.request_stop();
  }
  void end(session&) override {
    calls.push_back("end");
  }
};

/// w starts at 10 and each train step subtracts 1 (gradient descent on
/// loss = w with learning rate 1), incrementing the global step.
struct model {
  variable step;
  variable w;
  output loss;
  operation train;
};

model build_model(float start = 10.0f) {
  model m;
  m.step = create_global_step();
  m.w = variable{tensor::scalar(start), named("w")};
  m.loss = identity(m.w.value());
  gradient_descent_optimizer opt{1.0};
  m.train = opt.minimize(m.loss, &m.step);
  return m;
}

float value_of(const tensor& t) {
  return t.scalar_value<float>();
}

/// Options of a monitored training session in this process on `g`,
/// without the step counter's log lines.
monitored_training_session_options in_process_options(graph& g) {
  monitored_training_session_options o;
  o.g = &g;
  o.config = bounded();
  o.log_step_count_steps = 0;
  return o;
}

} // namespace

TEST_CASE("monitored_session: init, hooks in order, stop at step",
          "[monitored_session]") {
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  auto recorder = std::make_shared<recording_hook>();
  recorder->wants = {m.w};
  auto o = in_process_options(g);
  o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 4), recorder};
  auto sess = monitored_training_session(o);
  CHECK_FALSE(sess->should_stop());
  int runs = 0;
  while (!sess->should_stop()) {
    auto out = sess->run({m.train, m.loss});
    REQUIRE(out.size() == 2);
    ++runs;
  }
  CHECK(runs == 4);
  REQUIRE(recorder->seen.size() == 4);
  // A traced run hands its trace to the caller too (TF's run_metadata=).
  {
    o.hooks = {};
    auto traced = monitored_training_session(o);
    run_options full;
    full.trace_level = run_options::full_trace;
    run_metadata md;
    traced->run({m.loss}, {}, full, &md);
    CHECK(md.has_step_stats);
    CHECK(!md.stats.dev_stats.empty());
    run_metadata plain;
    traced->run({m.loss}, {}, {}, &plain);
    CHECK_FALSE(plain.has_step_stats);
    traced->close();
  }
  // The hook's fetch came back to it, not to the caller.
  for (const auto& values : recorder->seen)
    REQUIRE(values.size() == 1);
  CHECK(value_of(recorder->seen.back()[0]) <= 7.0f);
  auto err = error_of([&] { sess->run(m.loss); });
  REQUIRE(err);
  CHECK(err->code() == error_code::failed_precondition);
  CHECK_THAT(err->what(),
             Contains("Run called even after should_stop requested."));
  sess->close();
  sess->close();
  auto calls = recorder->calls;
  REQUIRE(calls.size() == 2 + 4 * 2 + 1);
  CHECK(calls[0] == "begin");
  CHECK(calls[1] == "after_create_session");
  CHECK(calls[2] == "before_run");
  CHECK(calls[3] == "after_run");
  CHECK(calls.back() == "end");
  err = error_of([&] { sess->run(m.loss); });
  REQUIRE(err);
  CHECK_THAT(err->what(), Contains("Session is closed."));
}

TEST_CASE("monitored_session: run_step_fn runs on the session underneath, "
          "after a stop too, and again after a lost task",
          "[monitored_session]") {
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  auto recorder = std::make_shared<recording_hook>();
  log_lines log;
  auto o = in_process_options(g);
  o.log = log.sink();
  o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 2), recorder};
  auto sess = monitored_training_session(o);
  // run_with_hooks is run: the hooks see it, and it trains.
  auto fetched = sess->run_step_fn([&](step_context& c) {
    return c.run_with_hooks({m.train}).size();
  });
  CHECK(fetched == 1);
  CHECK(recorder->seen.size() == 1);
  sess->run(m.train);
  REQUIRE(sess->should_stop());
  // After the stop: run is refused, the session underneath is not, and
  // its runs call no hook.
  CHECK(error_of([&] { sess->run(m.loss); }));
  auto w = sess->run_step_fn([&](step_context& c) {
    return value_of(c.get_session().run(m.w));
  });
  CHECK(w == 8.0f);
  CHECK(recorder->seen.size() == 2);
  auto refused = error_of([&] {
    sess->run_step_fn([&](step_context& c) { c.run_with_hooks({m.loss}); });
  });
  REQUIRE(refused);
  CHECK(refused->code() == error_code::failed_precondition);
  CHECK_THAT(refused->what(),
             Contains("Run called even after should_stop requested."));
  // A lost task (Unavailable) re-creates the session and calls the
  // function again; another error is the caller's, without a retry.
  int calls = 0;
  auto value = sess->run_step_fn([&](step_context& c) {
    if (++calls == 1)
      throw op_error(error_code::unavailable, "/job:ps/task:0 is gone");
    return value_of(c.get_session().run(m.w));
  });
  CHECK(calls == 2);
  // On the new in-process session: initialized again (no checkpoint).
  CHECK(value == 10.0f);
  CHECK(sess->recoveries() == 1);
  CHECK(log.count("/job:ps/task:0 is gone") == 1);
  calls = 0;
  auto failed = error_of([&] {
    sess->run_step_fn([&](step_context&) {
      ++calls;
      throw op_error(error_code::invalid_argument, "bad feed");
    });
  });
  REQUIRE(failed);
  CHECK(failed->code() == error_code::invalid_argument);
  CHECK(calls == 1);
  CHECK(sess->recoveries() == 1);
  sess->close();
  auto closed = error_of([&] {
    sess->run_step_fn([&](step_context&) { ++calls; });
  });
  REQUIRE(closed);
  CHECK_THAT(closed->what(), Contains("Session is closed."));
  CHECK(calls == 1);
}

TEST_CASE("monitored_session: a step function's request_stop ends training",
          "[monitored_session]") {
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  auto o = in_process_options(g);
  auto sess = monitored_training_session(o);
  int steps = 0;
  while (!sess->should_stop()) {
    sess->run_step_fn([&](step_context& c) {
      c.run_with_hooks({m.train});
      if (++steps == 3)
        c.request_stop();
    });
    REQUIRE(steps < 10);
  }
  CHECK(steps == 3);
  CHECK(value_of(sess->run_step_fn([&](step_context& c) {
          return c.get_session().run(m.w);
        }))
        == 7.0f);
  sess->close();
}

TEST_CASE("monitored_session: feeds of hooks and callers, and hook errors",
          "[monitored_session]") {
  graph g;
  auto as_default = g.as_default();
  create_global_step();
  auto x = placeholder(dtype::float32, tensor_shape{}, "x");
  auto y = placeholder(dtype::float32, tensor_shape{}, "y");
  auto sum = x + y;
  auto hook = std::make_shared<recording_hook>();
  hook->feeds = {{y, tensor::scalar(2.0f)}};
  auto creator = std::make_shared<chief_session_creator>(
    [&] {
      session_creation_options co;
      co.g = &g;
      co.config = bounded();
      return co;
    }());
  monitored_session sess{creator, {hook}};
  // The hook feeds y, the caller x.
  CHECK(value_of(sess.run(sum, {{x, tensor::scalar(3.0f)}})) == 5.0f);
  auto err = error_of([&] {
    sess.run(sum, {{x, tensor::scalar(1.0f)}, {y, tensor::scalar(1.0f)}});
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(),
             Contains("Same tensor is fed by a SessionRunHook and user: y:0"));
  // An error of the step itself propagates as is (x not fed).
  err = error_of([&] { sess.run(sum); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Contains("x"));
  CHECK_FALSE(sess.should_stop());
}

TEST_CASE("basic hooks: argument checks and a missing global step",
          "[monitored_session]") {
  auto code_of = [](auto f) {
    auto e = error_of(f);
    return e ? e->code() : error_code::ok;
  };
  CHECK(code_of([] { stop_at_step_hook{std::nullopt, std::nullopt}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { stop_at_step_hook{1, 2}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { stop_at_step_hook{-1, std::nullopt}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { second_or_step_timer{1.0, 1}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { second_or_step_timer{std::nullopt, 0}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { checkpoint_saver_hook{{}}; })
        == error_code::invalid_argument);
  CHECK(code_of([] { step_counter_hook{10, 1.0}; })
        == error_code::invalid_argument);

  graph g;
  auto as_default = g.as_default();
  stop_at_step_hook hook{std::nullopt, 3};
  auto err = error_of([&] { hook.begin(); });
  REQUIRE(err);
  CHECK(err->code() == error_code::failed_precondition);
  CHECK_THAT(err->what(),
             Contains("Global step should be created to use StopAtStepHook."));

  // The timer: first step always, then every 3 steps, never twice.
  second_or_step_timer timer{std::nullopt, 3};
  CHECK(timer.should_trigger_for_step(0));
  CHECK_FALSE(timer.update_last_triggered_step(0));
  CHECK_FALSE(timer.should_trigger_for_step(0));
  CHECK_FALSE(timer.should_trigger_for_step(2));
  CHECK(timer.should_trigger_for_step(3));
  auto elapsed = timer.update_last_triggered_step(4);
  REQUIRE(elapsed);
  CHECK(elapsed->second == 4);
  CHECK(timer.last_triggered_step() == 4);
}

TEST_CASE("basic hooks: logging tensors, NaN losses, steps per second",
          "[monitored_session]") {
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  log_lines log;
  auto nan = placeholder(dtype::float32, tensor_shape{}, "maybe_nan");
  auto tensors = std::make_shared<logging_tensor_hook>(
    std::vector<std::pair<std::string, output>>{{"loss", m.loss},
                                                {"step", m.step.value()}},
    2, std::nullopt, true, log.sink());
  auto nan_stop = std::make_shared<nan_tensor_hook>(nan, false, log.sink());
  auto counter = std::make_shared<step_counter_hook>(1, std::nullopt,
                                                     log.sink());
  auto o = in_process_options(g);
  o.hooks = {tensors, nan_stop, counter};
  auto sess = monitored_training_session(o);
  auto fine = tensor::scalar(1.0f);
  // Reads (even runs, logged) and training steps (odd runs): a value read
  // in the run that updates it could be either.
  for (int i = 0; i < 5; ++i)
    sess->run(i % 2 == 0 ? fetch{m.loss} : fetch{m.train}, {{nan, fine}});
  // Runs 0, 2 and 4 logged, the later ones with the time since the last.
  INFO(log.all());
  CHECK(log.count("loss = 10.0, step = 0") == 1);
  CHECK(log.count("loss = 9.0, step = 1 (") == 1);
  CHECK(log.count("loss = 8.0, step = 2 (") == 1);
  CHECK(log.count(" sec)") == 2);
  CHECK(log.count("global_step/sec: ") >= 1);
  REQUIRE(counter->last_rate());
  CHECK(*counter->last_rate() > 0);
  CHECK_FALSE(sess->should_stop());
  sess->run(m.loss, {{nan, tensor::scalar(
                             std::numeric_limits<float>::quiet_NaN())}});
  CHECK(sess->should_stop());
  CHECK(log.count("Model diverged with loss = NaN.") == 1);
  sess->close();
  // at_end: the values at close.
  CHECK(log.count("loss = 8.0, step = 2 (") == 2);

  // Failing on NaN: the run throws.
  graph g2;
  auto as_default2 = g2.as_default();
  create_global_step();
  auto bad = constant(std::numeric_limits<float>::quiet_NaN());
  monitored_training_session_options o2;
  o2.g = &g2;
  o2.config = bounded();
  o2.log_step_count_steps = 0;
  o2.hooks = {std::make_shared<nan_tensor_hook>(bad)};
  auto sess2 = monitored_training_session(o2);
  auto err = error_of([&] { sess2->run(bad); });
  REQUIRE(err);
  CHECK(err->code() == error_code::invalid_argument);
  CHECK_THAT(err->what(), Contains("NaN loss during training"));
}

TEST_CASE("profiler_hook: traces every save_steps global steps, and hooks' "
          "run options merge", "[monitored_session]") {
  CHECK(error_of([] { profiler_hook{{}}; })->code()
        == error_code::invalid_argument);
  graph g;
  auto as_default = g.as_default();
  auto m = build_model();
  temp_dir dir;
  auto out_dir = dir / "timelines";
  log_lines log;
  profiler_hook::options po;
  po.save_steps = 2;
  po.output_dir = out_dir;
  po.log = log.sink();
  auto profiler = std::make_shared<profiler_hook>(po);
  // A hook that asks for nothing sees the trace another hook asked for.
  auto other = std::make_shared<recording_hook>();
  std::vector<bool> traced;
  struct metadata_hook : session_run_hook {
    std::vector<bool>* traced;
    void after_run(session_run_context&,
                   const session_run_values& values) override {
      traced->push_back(values.metadata.has_step_stats
                        && values.options.trace_level
                             == run_options::full_trace);
    }
  };
  auto seer = std::make_shared<metadata_hook>();
  seer->traced = &traced;
  auto o = in_process_options(g);
  o.hooks = {other, profiler, seer};
  auto sess = monitored_training_session(o);
  for (int i = 0; i < 5; ++i)
    sess->run(m.train);
  // The first run starts the interval (global step 0); the runs that end
  // at global steps 2 and 4 are traced.
  INFO(log.all());
  CHECK(traced == std::vector<bool>{false, true, false, true, false});
  REQUIRE(profiler->written().size() == 2);
  CHECK(profiler->written()[0] == out_dir + "/timeline-2.json");
  CHECK(profiler->written()[1] == out_dir + "/timeline-4.json");
  CHECK(log.count("Saving timeline for 2 into '" + out_dir
                  + "/timeline-2.json'.") == 1);
  std::ifstream in{out_dir + "/timeline-4.json"};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  CHECK_THAT(text, StartsWith("{"));
  CHECK_THAT(text, Contains("\"traceEvents\""));
  // The train op's nodes ran in the traced step.
  CHECK_THAT(text, Contains("\"w\""));
  // The caller's own options count too: a traced run for the caller is
  // traced for every hook.
  run_options full;
  full.trace_level = run_options::full_trace;
  sess->run(m.loss, {}, full);
  CHECK(traced.back());
  sess->close();

  // A run that was not traced cannot be written.
  auto err = error_of([&] {
    write_chrome_trace(run_metadata{}, dir / "x.json");
  });
  REQUIRE(err);
  CHECK(err->code() == error_code::internal);
  CHECK_THAT(err->what(), Contains("x.json"));
}

TEST_CASE("monitored_training_session: checkpoints, and the chief restores",
          "[monitored_session][saver]") {
  temp_dir dir{"actorflow-monitored"};
  log_lines log;
  {
    graph g;
    auto as_default = g.as_default();
    auto m = build_model();
    monitored_training_session_options o;
    o.g = &g;
    o.config = bounded();
    o.checkpoint_dir = dir.path.string();
    o.save_checkpoint_steps = 2;
    o.log_step_count_steps = 1;
    o.log = log.sink();
    o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 5)};
    auto sess = monitored_training_session(o);
    while (!sess->should_stop())
      sess->run(m.train);
    sess->close();
  }
  // At creation (0), every 2 steps, and at the end (5).
  CHECK(log.count("Saving checkpoints for 0 into " + (dir / "model.ckpt"))
        == 1);
  CHECK(log.count("Saving checkpoints for 2 into ") == 1);
  CHECK(log.count("Saving checkpoints for 4 into ") == 1);
  CHECK(log.count("Saving checkpoints for 5 into ") == 1);
  CHECK(log.count("global_step/sec: ") >= 1);
  CHECK(latest_checkpoint(dir.path.string()) == dir / "model.ckpt-5");

  // A new chief in a new graph continues from the checkpoint.
  graph g;
  auto as_default = g.as_default();
  auto m = build_model(100.0f);
  monitored_training_session_options o;
  o.g = &g;
  o.config = bounded();
  o.checkpoint_dir = dir.path.string();
  o.save_checkpoint_secs = 0;
  o.log_step_count_steps = 0;
  o.log = log.sink();
  auto stop = std::make_shared<stop_at_step_hook>(3, std::nullopt);
  o.hooks = {stop};
  auto sess = monitored_training_session(o);
  CHECK(log.count("Restoring parameters from " + (dir / "model.ckpt-5"))
        == 1);
  CHECK(stop->last_step() == 8);
  CHECK(value_of(sess->run(m.w)) == 5.0f);
  float w = 0;
  while (!sess->should_stop())
    w = value_of(sess->run({m.train, m.w})[1]);
  // The restored 5, minus 1 for each of steps 6, 7 and 8 (the value read
  // in the last step may precede its update).
  CHECK((w == 2.0f || w == 3.0f));
  sess->close();
  // No checkpoint hook (save_checkpoint_secs 0): nothing saved past 5.
  CHECK(latest_checkpoint(dir.path.string()) == dir / "model.ckpt-5");
}

TEST_CASE("monitored_training_session: the chief removes leftovers, falls "
          "back past a damaged checkpoint and does not save the one it "
          "restored again",
          "[monitored_session]") {
  temp_dir dir{"actorflow-fallback"};
  auto run_chief = [&](log_lines& log, int64_t last_step) {
    graph g;
    auto as_default = g.as_default();
    auto m = build_model();
    monitored_training_session_options o;
    o.g = &g;
    o.config = bounded();
    o.checkpoint_dir = dir.path.string();
    o.save_checkpoint_steps = 2;
    o.log_step_count_steps = 0;
    o.log = log.sink();
    o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, last_step)};
    auto sess = monitored_training_session(o);
    auto w = value_of(sess->run(m.w));
    while (!sess->should_stop())
      sess->run(m.train);
    sess->close();
    return w;
  };
  auto slurp = [](const std::string& path) {
    std::ifstream in{path, std::ios::binary};
    return std::string{std::istreambuf_iterator<char>{in},
                       std::istreambuf_iterator<char>{}};
  };
  auto spit = [](const std::string& path, const std::string& bytes) {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out << bytes;
  };
  log_lines first;
  CHECK(run_chief(first, 5) == 10.0f);
  // Saved at 0, 2, 4 and 5. The latest is damaged; a save of 6 was
  // killed, leaving a temporary index and a shard without an index.
  auto ckpt = [&](int step) {
    return dir / ("model.ckpt-" + std::to_string(step));
  };
  auto shard5 = ckpt(5) + ".data-00000-of-00001";
  auto bytes = slurp(shard5);
  bytes.back() = static_cast<char>(bytes.back() ^ 1);
  spit(shard5, bytes);
  spit(ckpt(6) + ".index.tmp0123456789abcdef", "AFCK");
  spit(ckpt(6) + ".data-00000-of-00001", bytes);
  auto index4 = slurp(ckpt(4) + ".index");

  log_lines second;
  // w: 10 minus 1 per step, restored at step 4.
  CHECK(run_chief(second, 6) == 6.0f);
  INFO(second.all());
  CHECK(second.count("Removed 2 leftover file(s) of interrupted saves from "
                     + dir.path.string() + ": ")
        == 1);
  CHECK(second.count("model.ckpt-6.index.tmp0123456789abcdef") == 1);
  CHECK(second.count(", model.ckpt-6.data-00000-of-00001") == 1);
  CHECK(second.count("Could not restore checkpoint " + ckpt(5)
                     + " (DataLoss: corrupt checkpoint file " + shard5)
        == 1);
  CHECK(second.count("Restoring parameters from " + ckpt(4)) == 1);
  // Not saved again at the start (a save has another id, so other bytes).
  CHECK(second.count("Not saving checkpoints for 4: the session was just "
                     "restored from " + ckpt(4) + ".")
        == 1);
  CHECK(second.count("Saving checkpoints for 4") == 0);
  CHECK(slurp(ckpt(4) + ".index") == index4);
  // Step 6 saved at its end (and 5 was not reached again: 4 -> 5 -> 6
  // saves at 6 only).
  CHECK(second.count("Saving checkpoints for 6 into ") == 1);
  CHECK(latest_checkpoint(dir.path.string()) == ckpt(6));
  log_lines third;
  CHECK(run_chief(third, 6) == 4.0f);
  CHECK(third.count("Restoring parameters from " + ckpt(6)) == 1);
  CHECK(third.count("Could not restore") == 0);
}

TEST_CASE("monitored_training_session: workers wait for the chief",
          "[monitored_session][cluster]") {
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}},
    {"worker", {loopback(free_port()), loopback(free_port())}}}};
  server ps{cluster, "ps", 0};
  server chief_srv{cluster, "worker", 0};
  server worker_srv{cluster, "worker", 1};
  graph g;
  auto as_default = g.as_default();
  model m;
  {
    device_scope on_ps{replica_device_setter(cluster)};
    m = build_model();
  }
  auto options_for = [&](const server& srv, bool chief) {
    monitored_training_session_options o;
    o.g = &g;
    o.master = srv.target();
    o.is_chief = chief;
    o.config = bounded();
    o.log_step_count_steps = 0;
    o.recovery_wait = 50ms;
    o.log = [](const std::string&) {};
    return o;
  };

  SECTION("without a chief, a worker gives up after max_wait") {
    auto o = options_for(worker_srv, false);
    o.max_wait = 600ms;
    auto err = error_of([&] { monitored_training_session(o); });
    REQUIRE(err);
    CHECK(err->code() == error_code::deadline_exceeded);
    CHECK_THAT(err->what(),
               Contains("Session was not ready after waiting 1 secs."));
    CHECK_THAT(err->what(), Contains("Variables not initialized: "));
    CHECK_THAT(err->what(), Contains("global_step"));
  }

  SECTION("a worker started first is ready once the chief has initialized") {
    auto o = options_for(worker_srv, false);
    o.max_wait = 30s;
    // Both build their scaffold now, in this thread: the graph is not
    // built from two threads at once.
    o.scaffold = std::make_shared<scaffold>();
    o.scaffold->finalize(g);
    auto chief_opts = options_for(chief_srv, true);
    chief_opts.scaffold = std::make_shared<scaffold>();
    chief_opts.scaffold->finalize(g);
    auto worker = std::async(std::launch::async,
                             [&] { return monitored_training_session(o); });
    CHECK(worker.wait_for(300ms) == std::future_status::timeout);
    auto chief = monitored_training_session(chief_opts);
    REQUIRE(worker.wait_for(20s) == std::future_status::ready);
    auto wsess = worker.get();
    wsess->run(m.train);
    chief->run(m.train);
    CHECK(value_of(chief->run(m.w)) == 8.0f);
    CHECK(value_of(wsess->run(m.w)) == 8.0f);
    wsess->close();
    chief->close();
  }
}

TEST_CASE("monitored_session: starts the graph's queue runners and stops "
          "them at close", "[monitored_session][queue]") {
  graph g;
  auto as_default = g.as_default();
  create_global_step();
  fifo_queue q{4, {dtype::float32}, {tensor_shape{}}};
  auto enq = q.enqueue({constant(7.0f)});
  add_queue_runner(queue_runner{q, {enq}});
  auto x = q.dequeue().front();
  auto o = in_process_options(g);
  o.stop_grace_period = 5s;
  auto sess = monitored_training_session(o);
  for (int i = 0; i < 10; ++i)
    CHECK(value_of(sess->run(x)) == 7.0f);
  CHECK_FALSE(sess->should_stop());
  // close() ends the runner's thread blocked on the full queue.
  auto start = std::chrono::steady_clock::now();
  sess->close();
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("monitored_session: a restarted ps: the session is re-created and "
          "the chief restores the latest checkpoint",
          "[monitored_session][cluster][recovery]") {
  temp_dir dir{"actorflow-recover"};
  cluster_spec cluster{std::map<std::string, std::vector<std::string>>{
    {"ps", {loopback(free_port())}}, {"worker", {loopback(free_port())}}}};
  std::optional<server> ps;
  ps.emplace(cluster, "ps", 0);
  server worker{cluster, "worker", 0};
  graph g;
  auto as_default = g.as_default();
  model m;
  {
    device_scope on_ps{replica_device_setter(cluster)};
    m = build_model(100.0f);
  }
  log_lines log;
  monitored_training_session_options o;
  o.g = &g;
  o.master = worker.target();
  o.config.operation_timeout_in_ms = 10000;
  o.checkpoint_dir = dir.path.string();
  o.save_checkpoint_steps = 3;
  o.log_step_count_steps = 0;
  o.recovery_wait = 50ms;
  o.max_wait = 30s;
  o.log = log.sink();
  o.hooks = {std::make_shared<stop_at_step_hook>(std::nullopt, 10)};
  auto sess = monitored_training_session(o);
  for (int i = 0; i < 4; ++i)
    sess->run(m.train);
  // Saved at 0 and 3; the ps loses step 4's update with its state.
  CHECK(latest_checkpoint(dir.path.string()) == dir / "model.ckpt-3");
  ps->stop();
  ps.reset();
  ps.emplace(cluster, "ps", 0);
  int runs = 0;
  float w = 0;
  while (!sess->should_stop() && runs < 50) {
    w = value_of(sess->run({m.train, m.w})[1]);
    ++runs;
  }
  CHECK(sess->recoveries() == 1);
  CHECK(log.count("An error was raised. This may be due to a preemption")
        == 1);
  CHECK(log.count("Restoring parameters from " + (dir / "model.ckpt-3"))
        == 1);
  // From 3 to 10: seven updates after the restore.
  CHECK(runs == 7);
  // Restored 97, minus 1 per step (the last read may precede its update).
  CHECK((w == 90.0f || w == 91.0f));
  sess->close();
  INFO(log.all());
  CHECK(latest_checkpoint(dir.path.string()) == dir / "model.ckpt-10");
}
