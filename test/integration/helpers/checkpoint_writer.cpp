// A small chief for the checkpoint kill test (checkpoint_kill_test.cpp):
// a model whose every value derives from one number V, saved and restored
// in a process of its own so that the test can kill it (strace's fault
// injection) at each file operation of a save.
//
//   checkpoint_writer save DIR STEP V   sets the variables to generation V
//                                       and saves DIR/model.ckpt-STEP
//                                       (max_to_keep 2, taking over the
//                                       checkpoints of DIR), after
//                                       access("DIR/.save-begins"), the
//                                       marker the test finds in a trace
//   checkpoint_writer start DIR         starts as the chief of a
//                                       MonitoredTrainingSession does
//                                       (checkpoint hook included), prints
//                                       "restored <path> value <V>" (or
//                                       "initialized"), "mixed ..." if the
//                                       variables hold values of different
//                                       generations, and closes
//
// Prints "error: <what>" and exits 1 on an op_error.

#include <unistd.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "actorflow/actorflow.hpp"
#include "actorflow/actors/monitoring.hpp"

using namespace actorflow;

namespace {

constexpr int64_t w_size = 256;

variable_options named(const std::string& name) {
  variable_options opts;
  opts.name = name;
  return opts;
}

struct model {
  variable w;
  variable b;
  variable step;
};

model build() {
  model m;
  m.w = variable{tensor::from_vector<float>(std::vector<float>(w_size, 0.0f),
                                            tensor_shape{w_size}),
                 named("w")};
  {
    name_scope layer{"layer"};
    m.b = variable{tensor::vec<int64_t>({0, 0, 0}), named("b")};
  }
  m.step = create_global_step();
  return m;
}

/// Generation `v` of every value.
std::vector<float> w_of(int64_t v) {
  std::vector<float> xs(w_size);
  for (int64_t i = 0; i < w_size; ++i)
    xs[static_cast<size_t>(i)] = static_cast<float>(v * 1000 + i);
  return xs;
}

std::vector<int64_t> b_of(int64_t v) {
  return {v, -v, v * 7};
}

int save(const std::string& dir, int64_t step, int64_t v) {
  graph g;
  auto as_default = g.as_default();
  auto m = build();
  saver_options so;
  so.max_to_keep = 2;
  saver s{so};
  session sess{session_config{}, &g};
  sess.run(global_variables_initializer());
  sess.run(std::vector<fetch>{
    m.w.assign(constant(tensor::from_vector<float>(w_of(v),
                                                  tensor_shape{w_size}))),
    m.b.assign(constant(tensor::vec<int64_t>(b_of(v)))),
    m.step.assign(constant(step))});
  if (auto st = get_checkpoint_state(dir))
    s.recover_last_checkpoints(st->all_model_checkpoint_paths);
  // The marker: every file operation after it belongs to the save.
  (void) ::access((dir + "/.save-begins").c_str(), F_OK);
  auto path = s.save(sess, dir + "/model.ckpt", step);
  std::cout << "saved " << path << std::endl;
  return 0;
}

int start(const std::string& dir) {
  graph g;
  auto as_default = g.as_default();
  auto m = build();
  std::string restored;
  monitored_training_session_options o;
  o.g = &g;
  o.checkpoint_dir = dir;
  o.save_checkpoint_steps = 1000;
  o.log_step_count_steps = 0;
  o.log = [&](const std::string& line) {
    std::cout << "log: " << line << std::endl;
    static const std::string restoring = "Restoring parameters from ";
    if (line.rfind(restoring, 0) == 0)
      restored = line.substr(restoring.size());
  };
  auto sess = monitored_training_session(o);
  auto v = [&] {
    // The variables, read through the monitored session (the tensors
    // kept while their views are read).
    auto bt = sess->run(m.b);
    auto wt = sess->run(m.w);
    auto b = bt.flat<int64_t>();
    auto w = wt.flat<float>();
    auto gen = b[0];
    if (std::vector<int64_t>(b.begin(), b.end()) != b_of(gen)
        || std::vector<float>(w.begin(), w.end()) != w_of(gen))
      return int64_t{-1};
    return gen;
  }();
  if (v < 0)
    std::cout << "mixed values restored from " << restored << std::endl;
  else if (restored.empty())
    std::cout << "initialized value " << v << std::endl;
  else
    std::cout << "restored " << restored << " value " << v << std::endl;
  sess->close();
  return v < 0 ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  // No monitor: its sampler reads /proc/self every second, file operations
  // that would interleave with the save's the test counts and kills at.
  actorflow::monitoring::set_enabled(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "save")
      return save(args[1], std::stoll(args[2]), std::stoll(args[3]));
    if (args.size() == 2 && args[0] == "start")
      return start(args[1]);
  } catch (const op_error& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  std::cerr << "usage: checkpoint_writer save DIR STEP V | start DIR\n";
  return 2;
}
