// Your own model on actorflow, written as a TensorFlow 1.x user writes a
// between-graph replicated trainer: a linear regression
//
//   y = w1 * x1 + w2 * x2 + b
//
// learned from CSV files read by an input pipeline (string_input_producer,
// TextLineReader, decode_csv, shuffle_batch), with its variables on the ps
// tasks (replica_device_setter), gradients and an optimizer, and a
// MonitoredTrainingSession with hooks. Every task runs this program:
//
//   linear_regression --cluster '{"ps": ["127.0.0.1:2222"],
//                       "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}' \
//                     --job_name ps --task_index 0        # serves the variables
//   linear_regression --cluster ... --job_name worker --task_index 0   # chief
//   linear_regression --cluster ... --job_name worker --task_index 1
//
// A worker reads --data FILE, or writes its own sample of the line
// y = 2 x1 - 3 x2 + 0.5 (plus noise) to a temporary CSV file and reads that.
// The chief prints what the workers learned together.
//
// This file and the CMakeLists.txt beside it are installed with actorflow
// (share/actorflow/examples): copy them to start a project of your own.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>

#include <actorflow/actorflow.hpp>

using namespace actorflow;

namespace {

struct flags {
  std::string cluster;
  std::string job_name;
  int task_index = 0;
  std::string data;
  int64_t train_steps = 2000;
  double learning_rate = 0.05;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "linear_regression: " << why
            << "\nusage: linear_regression --cluster JSON --job_name ps|worker"
               " --task_index N [--data FILE.csv] [--train_steps N]"
               " [--learning_rate X]\n";
  std::exit(2);
}

flags parse(int argc, char** argv) {
  flags f;
  for (int i = 1; i < argc; i += 2) {
    std::string name = argv[i];
    if (i + 1 >= argc)
      usage(name + " needs a value");
    std::string value = argv[i + 1];
    if (name == "--cluster")
      f.cluster = value;
    else if (name == "--job_name")
      f.job_name = value;
    else if (name == "--task_index")
      f.task_index = std::stoi(value);
    else if (name == "--data")
      f.data = value;
    else if (name == "--train_steps")
      f.train_steps = std::stoll(value);
    else if (name == "--learning_rate")
      f.learning_rate = std::stod(value);
    else
      usage("unknown flag '" + name + "'");
  }
  if (f.cluster.empty() || f.job_name.empty())
    usage("--cluster and --job_name are required");
  return f;
}

/// 1000 noisy points of y = 2 x1 - 3 x2 + 0.5, as "x1,x2,y" lines.
std::string write_sample(int task) {
  auto path = (std::filesystem::temp_directory_path()
               / ("linear_regression-" + std::to_string(::getpid()) + ".csv"))
                .string();
  std::ofstream out{path};
  std::mt19937 gen{static_cast<unsigned>(17 + task)};
  std::uniform_real_distribution<float> x{-1.0f, 1.0f};
  std::normal_distribution<float> noise{0.0f, 0.05f};
  for (int i = 0; i < 1000; ++i) {
    float x1 = x(gen);
    float x2 = x(gen);
    out << x1 << ',' << x2 << ',' << 2 * x1 - 3 * x2 + 0.5f + noise(gen)
        << '\n';
  }
  return path;
}

int run_worker(const flags& f, const cluster_spec& cluster, server& srv) {
  bool chief = f.task_index == 0;
  auto data = f.data.empty() ? write_sample(f.task_index) : f.data;

  graph g;
  auto as_default = g.as_default();
  variable global_step;
  variable w1, w2, b;
  output loss;
  operation train_op;
  {
    // Variables on the ps tasks, everything else on this worker.
    replica_device_setter_options placement;
    placement.worker_device = "/job:worker/task:"
                              + std::to_string(f.task_index);
    device_scope on_replica{replica_device_setter(cluster, placement)};
    global_step = create_global_step();

    // The input pipeline: file names -> lines -> columns -> shuffled
    // batches of 32, filled by queue runners the session starts.
    auto files = string_input_producer(std::vector<std::string>{data});
    text_line_reader reader;
    auto line = reader.read(files).second;
    auto columns = decode_csv(line, {tensor::scalar(0.0f),
                                     tensor::scalar(0.0f),
                                     tensor::scalar(0.0f)});
    auto batch = shuffle_batch(columns, 32, 1000, 200);

    w1 = variable{0.0f, {.name = "w1"}};
    w2 = variable{0.0f, {.name = "w2"}};
    b = variable{0.0f, {.name = "b"}};
    auto prediction = w1.value() * batch[0] + w2.value() * batch[1]
                      + b.value();
    loss = reduce_mean(square(prediction - batch[2]), {}, false, "loss");

    gradient_descent_optimizer opt{f.learning_rate};
    auto grads = opt.compute_gradients(loss);
    train_op = opt.apply_gradients(grads, &global_step);
  }

  monitored_training_session_options o;
  o.master = srv.target();
  o.is_chief = chief;
  o.hooks = {
    std::make_shared<stop_at_step_hook>(std::nullopt, f.train_steps),
    std::make_shared<logging_tensor_hook>(
      std::vector<std::pair<std::string, output>>{
        {"loss", loss}, {"step", global_step.value()}},
      500)};
  o.log_step_count_steps = 0;
  auto sess = monitored_training_session(o);
  int64_t steps = 0;
  while (!sess->should_stop()) {
    sess->run(train_op);
    ++steps;
  }
  sess->close();
  std::cout << "worker " << f.task_index << ": " << steps << " steps"
            << std::endl;
  if (chief) {
    session s{srv.target()};
    auto value = [&](const variable& v) {
      return s.run(v).scalar_value<float>();
    };
    std::printf("learned: w1 = %.3f, w2 = %.3f, b = %.3f (true: 2, -3, "
                "0.5), global step %lld\n",
                value(w1), value(w2), value(b),
                static_cast<long long>(
                  s.run(global_step).scalar_value<int64_t>()));
    s.close();
  }
  if (f.data.empty())
    std::filesystem::remove(data);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto f = parse(argc, argv);
  try {
    auto cluster = cluster_spec::from_json(f.cluster);
    server srv{cluster, f.job_name, f.task_index};
    if (f.job_name == "ps") {
      std::cout << "ps " << f.task_index << ": serving at " << srv.target()
                << std::endl;
      srv.join(); // Until the process is stopped.
      return 0;
    }
    return run_worker(f, cluster, srv);
  } catch (const std::exception& e) {
    std::cerr << "linear_regression: " << e.what() << std::endl;
    return 1;
  }
}
