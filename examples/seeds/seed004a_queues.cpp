// Seed 004, part a (Hands-On ML, ch. 12; part b is seed004b_readers):
// resource containers, then TensorFlow queues shared between sessions: a
// FIFOQueue fed by a loader process and drained by a trainer process,
// queues of tuples, closing a queue, RandomShuffleQueue, PaddingFIFOQueue,
// and preloading a training set into a variable.
//
// The book's machine A is one `actorflow-node` process (job "local", task
// 0) on a free loopback port. Where the book has separate client programs
// (training_data_loader.py and trainer.py) this program re-invokes itself
// (`--role=loader` / `--role=trainer`), so the two clients are real
// processes that only share the queue living on task A. Every other cell
// is run by this program, the client of the book's other snippets.

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/actorflow.hpp"

#include "actorflow/support/flags.hpp"
#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/local_cluster.hpp"

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

// Every step this program (or its loader and trainer) runs has a deadline:
// nothing can hang, even if the node dies.
constexpr int64_t step_deadline_ms = 20000;

// How long a "blocked" step waits before we call it blocked.
constexpr int64_t blocked_ms = 1000;

session_config bounded() {
  session_config config;
  config.operation_timeout_in_ms = step_deadline_ms;
  return config;
}

run_options deadline(int64_t ms) {
  run_options opts;
  opts.timeout_in_ms = ms;
  return opts;
}

// variable_options with just a name (designated initializers would trip
// -Wmissing-field-initializers on the other members).
variable_options named(const std::string& name) {
  variable_options opts;
  opts.name = name;
  return opts;
}

// -- printing as numpy does ---------------------------------------------------

// numpy pads every element of an array to the widest one ("[ 5. 13.  6.]");
// tensor::to_string() does not pad. This covers what this seed prints:
// integers and integral floats ("1."). Anything else falls back to
// to_string(), which is numpy's layout without the padding.
bool integral_floats(const tensor& t) {
  auto check = [](auto xs) {
    for (auto x : xs)
      if (!std::isfinite(x) || x != std::trunc(x) || std::fabs(x) >= 1e15)
        return false;
    return true;
  };
  if (t.type() == dtype::float32)
    return check(t.flat<float>());
  if (t.type() == dtype::float64)
    return check(t.flat<double>());
  return false;
}

std::vector<std::string> element_strings(const tensor& t) {
  std::vector<std::string> result;
  auto add_float = [&](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f.", x);
    result.emplace_back(buf);
  };
  switch (t.type()) {
    case dtype::float32:
      for (auto x : t.flat<float>())
        add_float(x);
      break;
    case dtype::float64:
      for (auto x : t.flat<double>())
        add_float(x);
      break;
    case dtype::int32:
      for (auto x : t.flat<int32_t>())
        result.push_back(std::to_string(x));
      break;
    case dtype::int64:
      for (auto x : t.flat<int64_t>())
        result.push_back(std::to_string(x));
      break;
    default:
      break;
  }
  return result;
}

void print_padded(std::ostringstream& out, const std::vector<std::string>& xs,
                  const std::vector<int64_t>& dims, size_t width,
                  size_t axis, int64_t offset, int64_t stride) {
  auto n = dims[axis];
  auto inner = stride / (n == 0 ? 1 : n);
  out << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      if (axis + 1 == dims.size())
        out << ' ';
      else
        out << std::string(dims.size() - axis - 1, '\n')
            << std::string(axis + 1, ' ');
    }
    if (axis + 1 == dims.size()) {
      const auto& x = xs[static_cast<size_t>(offset + i)];
      out << std::string(width - x.size(), ' ') << x;
    } else {
      print_padded(out, xs, dims, width, axis + 1, offset + i * inner, inner);
    }
  }
  out << ']';
}

// What `print(sess.run(x))` shows.
std::string np(const tensor& t) {
  bool ints = t.type() == dtype::int32 || t.type() == dtype::int64;
  if (t.shape().rank() < 1 || t.num_elements() == 0
      || !(ints || integral_floats(t)))
    return t.to_string();
  auto xs = element_strings(t);
  size_t width = 0;
  for (const auto& x : xs)
    width = std::max(width, x.size());
  std::ostringstream out;
  print_padded(out, xs, t.shape().dims(), width, 0, 0, t.num_elements());
  return out.str();
}

void header(const std::string& title) {
  std::cout << "\n== " << title << " ==" << std::endl;
}

// Runs `f`, which must fail, and prints "<what>: <Code>: <message>".
template <class F>
void show_error(const std::string& what, F&& f) {
  try {
    f();
    std::cout << what << ": (no error!)" << std::endl;
  } catch (const op_error& e) {
    std::cout << what << ": " << e.what() << std::endl;
  }
}

// -- the book's shared FIFO queue --------------------------------------------

// q = tf.FIFOQueue(capacity=10, dtypes=[tf.float32], shapes=[[2]],
//                  name="q", shared_name="shared_q")
fifo_queue book_fifo_queue() {
  return fifo_queue{10, {dtype::float32}, {tensor_shape{2}}, "shared_q", "q"};
}

tensor row(float a, float b) {
  return tensor::from_vector<float>({a, b}, tensor_shape{2});
}

// -- the loader and trainer processes -----------------------------------------

// training_data_loader.py: three enqueues, then the same three instances
// again with one enqueue_many. Prints what it did.
int run_loader(const std::string& target) {
  auto q = book_fifo_queue();
  auto training_instance = placeholder(dtype::float32, {2});
  auto enqueue = q.enqueue({training_instance});
  auto training_instances = placeholder(dtype::float32, {-1, 2});
  auto enqueue_many = q.enqueue_many({training_instances});

  session sess{target, bounded()};
  const std::pair<float, float> instances[] = {{1, 2}, {3, 4}, {5, 6}};
  for (auto [a, b] : instances) {
    sess.run(enqueue, {{training_instance, row(a, b)}});
    std::cout << "enqueued " << np(row(a, b)) << std::endl;
  }
  auto many = tensor::from_vector<float>({1, 2, 3, 4, 5, 6},
                                         tensor_shape{3, 2});
  sess.run(enqueue_many, {{training_instances, many}});
  std::cout << "enqueued many " << np(many) << std::endl;
  return 0;
}

// trainer.py: three dequeues, one mini-batch of 2, and a mini-batch that
// cannot be filled (one instance is left), bounded by a RunOptions
// deadline so that it shows as DeadlineExceeded instead of hanging.
int run_trainer(const std::string& target) {
  auto q = book_fifo_queue();
  auto dequeue = q.dequeue().front();
  const int32_t batch_size = 2;
  auto dequeue_mini_batch = q.dequeue_many(batch_size).front();

  session sess{target, bounded()};
  // The parent starts the loader only once it reads this line: our first
  // dequeue waits inside the queue on task A until the loader enqueues.
  std::cout << "ready" << std::endl;
  for (int i = 0; i < 3; ++i)
    std::cout << np(sess.run(dequeue)) << std::endl;
  std::cout << np(sess.run(dequeue_mini_batch)) << std::endl;
  show_error("blocked waiting for another instance", [&] {
    sess.run(dequeue_mini_batch, {}, deadline(blocked_ms));
  });
  return 0;
}

// Dies with the parent (the example), so a killed example leaves no client
// blocked on the queue.
void die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    std::_Exit(1);
}

int run_role(const std::string& role, const std::string& target,
             pid_t parent) {
  if (parent > 0)
    die_with_parent(parent);
  return role == "loader" ? run_loader(target) : run_trainer(target);
}

std::string self_path() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

// Prints a client process's output under its script name, indented.
void print_client(const std::string& script, support::child_process& proc,
                  const support::exit_status& status) {
  std::cout << "--- " << script << " (pid " << proc.pid() << ", "
            << status.to_string() << ")" << std::endl;
  std::istringstream lines{proc.out()};
  for (std::string line; std::getline(lines, line);)
    if (line != "ready")
      std::cout << line << '\n';
  std::cout << std::flush;
  if (!status.success())
    std::cerr << proc.err();
}

// Frees task A's default container (where the previous cell's queue
// "shared_q" lives), so the next cell's queue of the same shared_name is
// a new one, as if each snippet of the book were its own program. This
// also closes every session open on A.
void reset_default_container(const std::string& target) {
  session::reset(target);
}

// -- the cells ----------------------------------------------------------------

void containers(const std::string& target) {
  header("Containers: tf.container(\"my_problem_1\") and tf.Session.reset");
  graph g;
  auto as_default = g.as_default();
  variable x;
  {
    container_scope c{"my_problem_1"};
    x = variable{7.0f, named("x")};
  }
  variable y{1.0f, named("y")}; // the default container
  session sess{target, bounded(), &g};
  sess.run(global_variables_initializer());
  std::cout << "x (container my_problem_1) = " << np(sess.run(x)) << '\n'
            << "y (default container)      = " << np(sess.run(y)) << '\n';
  session::reset(target, {"my_problem_1"});
  std::cout << ">>> tf.Session.reset(\"" << target
            << "\", [\"my_problem_1\"])" << std::endl;
  show_error("old session", [&] { sess.run(x); });
  session again{target, bounded(), &g};
  show_error("x in a new session", [&] { again.run(x); });
  std::cout << "y in a new session = " << np(again.run(y))
            << " (its container was not reset)" << std::endl;
  again.run(x.initializer());
  std::cout << "x, initialized again = " << np(again.run(x)) << std::endl;
}

void loader_and_trainer(const std::string& target) {
  header("FIFOQueue shared by two clients: training_data_loader.py and "
         "trainer.py");
  std::cout << "# The trainer process starts first; its first dequeue waits "
               "in the queue\n"
               "# on task A until the loader process enqueues. The loader "
               "enqueues\n"
               "# [1,2], [3,4], [5,6] one by one, then the same three with "
               "enqueue_many."
            << std::endl;
  auto self = self_path();
  auto parent = std::to_string(::getpid());
  support::spawn_options opts;
  opts.capture_stderr = true;
  support::child_process trainer{{self, "--role=trainer",
                                   "--target=" + target,
                                   "--parent-pid=" + parent},
                                  opts};
  if (!trainer.wait_for_line("ready", 15s)) {
    auto st = trainer.stop(1s);
    throw std::runtime_error("the trainer did not start (" + st.to_string()
                             + "): " + trainer.err());
  }
  support::child_process loader{{self, "--role=loader",
                                  "--target=" + target,
                                  "--parent-pid=" + parent},
                                 opts};
  auto finish = [](support::child_process& proc) {
    if (auto st = proc.wait(30s))
      return *st;
    return proc.stop(1s);
  };
  auto loader_status = finish(loader);
  auto trainer_status = finish(trainer);
  print_client("training_data_loader.py", loader, loader_status);
  print_client("trainer.py", trainer, trainer_status);
  std::cout << "# The book's comment shows [[1., 2.], [4., 5.]] for the "
               "first mini-batch:\n"
               "# a slip. A FIFO queue returns the first two instances, "
               "[[1., 2.], [3., 4.]],\n"
               "# as TensorFlow does."
            << std::endl;
  if (!loader_status.success() || !trainer_status.success())
    throw std::runtime_error("a client process failed");
}

void tuples(const std::string& target) {
  header("Queues of tuples");
  graph g;
  auto as_default = g.as_default();
  // The float32 [2] queue "shared_q" of the previous cell still lives in
  // task A's default container: a queue of another kind under that
  // shared_name is refused until the container is reset.
  {
    fifo_queue q{10, {dtype::int32, dtype::float32},
                 {tensor_shape{}, tensor_shape{3, 2}}, "shared_q", "q"};
    session sess{target, bounded(), &g};
    show_error("before a reset", [&] { sess.run(q.size()); });
  }
  reset_default_container(target);
  std::cout << ">>> tf.Session.reset(\"" << target << "\")" << std::endl;

  fifo_queue q{10, {dtype::int32, dtype::float32},
               {tensor_shape{}, tensor_shape{3, 2}}, "shared_q", "q"};
  auto a = placeholder(dtype::int32, tensor_shape{});
  auto b = placeholder(dtype::float32, {3, 2});
  auto enqueue = q.enqueue({a, b});
  auto deq = q.dequeue();
  auto dequeue_a = deq[0];
  auto dequeue_b = deq[1];
  const int32_t batch_size = 2;
  auto deq_many = q.dequeue_many(batch_size);
  auto dequeue_as = deq_many[0];
  auto dequeue_bs = deq_many[1];
  auto enqueue_all = [&](session& sess) {
    sess.run(enqueue, {{a, tensor::scalar<int32_t>(10)},
                       {b, tensor::from_vector<float>({1, 2, 3, 4, 5, 6},
                                                      tensor_shape{3, 2})}});
    sess.run(enqueue, {{a, tensor::scalar<int32_t>(11)},
                       {b, tensor::from_vector<float>({2, 4, 6, 8, 0, 2},
                                                      tensor_shape{3, 2})}});
    sess.run(enqueue, {{a, tensor::scalar<int32_t>(12)},
                       {b, tensor::from_vector<float>({3, 6, 9, 2, 5, 8},
                                                      tensor_shape{3, 2})}});
  };

  {
    session sess{target, bounded(), &g};
    enqueue_all(sess);
    std::cout << ">>> a_val, b_val = sess.run([dequeue_a, dequeue_b])"
              << std::endl;
    auto vals = sess.run({dequeue_a, dequeue_b});
    std::cout << np(vals[0]) << '\n' << np(vals[1]) << std::endl;
    std::cout << ">>> sess.run(dequeue_a)   # the pair's matrix is lost\n"
              << np(sess.run(dequeue_a)) << '\n'
              << "size: " << np(sess.run(q.size())) << std::endl;
  }

  // The book's dequeue_many snippet starts from the three pairs again.
  reset_default_container(target);
  std::cout << ">>> tf.Session.reset(\"" << target
            << "\"); the same three enqueues" << std::endl;
  session sess{target, bounded(), &g};
  enqueue_all(sess);
  std::cout << ">>> a, b = sess.run([dequeue_as, dequeue_bs])" << std::endl;
  auto vals = sess.run({dequeue_as, dequeue_bs});
  std::cout << np(vals[0]) << '\n' << np(vals[1]) << std::endl;
  show_error("blocked waiting for another pair", [&] {
    sess.run({dequeue_as, dequeue_bs}, {}, deadline(blocked_ms));
  });
}

void closing(const std::string& target) {
  header("Closing a queue");
  reset_default_container(target);
  graph g;
  auto as_default = g.as_default();
  auto q = book_fifo_queue();
  auto instances = placeholder(dtype::float32, {-1, 2});
  auto enqueue_many = q.enqueue_many({instances});
  auto instance = placeholder(dtype::float32, {2});
  auto enqueue = q.enqueue({instance});
  auto dequeue_mini_batch = q.dequeue_many(2).front();
  auto dequeue_up_to = q.dequeue_up_to(2).front();
  auto close_q = q.close();

  session sess{target, bounded(), &g};
  sess.run(enqueue_many,
           {{instances, tensor::from_vector<float>({1, 2, 3, 4, 5, 6},
                                                   tensor_shape{3, 2})}});
  std::cout << ">>> enqueue [[1,2],[3,4],[5,6]]; sess.run(close_q)"
            << std::endl;
  sess.run(close_q);
  std::cout << "dequeue_many(2): " << np(sess.run(dequeue_mini_batch))
            << std::endl;
  show_error("dequeue_many(2)", [&] { sess.run(dequeue_mini_batch); });
  std::cout << "dequeue_up_to(2): " << np(sess.run(dequeue_up_to))
            << std::endl;
  show_error("enqueue after close",
             [&] { sess.run(enqueue, {{instance, row(7, 8)}}); });

  // Pending enqueues: a queue of capacity 1, full, and one more enqueue
  // waiting for room (in another thread) when the queue is closed.
  std::cout << "# a full queue of capacity 1 with one enqueue pending"
            << std::endl;
  auto in_thread = [&](const fetch& f, const feed_dict& feeds = {}) {
    return std::async(std::launch::async, [&sess, f, feeds] {
      try {
        sess.run(f, feeds);
        return std::string{"done"};
      } catch (const op_error& e) {
        return std::string{e.what()};
      }
    });
  };
  auto pending_case = [&](const std::string& shared_name, bool cancel) {
    fifo_queue small{1, {dtype::float32}, {tensor_shape{}}, shared_name,
                     shared_name};
    auto x = placeholder(dtype::float32, tensor_shape{});
    auto enq = small.enqueue({x});
    auto deq = small.dequeue().front();
    auto close = small.close(cancel);
    sess.run(enq, {{x, tensor::scalar(1.0f)}});
    auto pending = in_thread(enq, {{x, tensor::scalar(2.0f)}});
    // Give the pending enqueue time to reach the queue on task A.
    if (pending.wait_for(500ms) != std::future_status::timeout)
      std::cout << "(the second enqueue did not wait!)" << std::endl;
    std::cout << ">>> sess.run(q.close(cancel_pending_enqueues="
              << (cancel ? "True" : "False") << "))" << std::endl;
    if (cancel) {
      sess.run(close);
      std::cout << "pending enqueue: " << pending.get() << '\n'
                << "dequeue: " << np(sess.run(deq)) << std::endl;
    } else {
      // As in TensorFlow, the close itself waits behind the pending
      // enqueue (run in the same thread, it would wait forever): run it in
      // another thread and make room with a dequeue.
      auto closing = in_thread(close);
      if (closing.wait_for(500ms) == std::future_status::timeout)
        std::cout << "close: waits behind the pending enqueue" << std::endl;
      std::cout << "dequeue: " << np(sess.run(deq)) << std::endl;
      std::cout << "pending enqueue: " << pending.get() << " (honored)\n"
                << "close: " << closing.get() << '\n'
                << "dequeue: " << np(sess.run(deq)) << std::endl;
    }
    show_error("dequeue", [&] { sess.run(deq); });
  };
  pending_case("small_q", false);
  pending_case("small_q_2", true);
}

void random_shuffle(const std::string& target) {
  header("RandomShuffleQueue");
  reset_default_container(target);
  graph g;
  auto as_default = g.as_default();
  // A fixed op seed, so every run prints the same batches.
  random_shuffle_queue q{50, 10, {dtype::float32}, {tensor_shape{}}, 42,
                         "shared_q", "q"};
  auto items = placeholder(dtype::float32, {-1});
  auto enqueue_many = q.enqueue_many({items});
  auto dequeue = q.dequeue_many(5).front();
  auto size = q.size();

  session sess{target, bounded(), &g};
  std::vector<float> floats;
  for (int i = 1; i <= 22; ++i)
    floats.push_back(static_cast<float>(i));
  sess.run(enqueue_many, {{items, tensor::vec(floats)}});
  std::cout << ">>> enqueued the floats 1. to 22." << std::endl;
  for (int i = 0; i < 2; ++i) {
    auto batch = np(sess.run(dequeue));
    auto left = sess.run(size).scalar_value<int32_t>();
    std::cout << batch << "   (" << left << " items left)" << std::endl;
  }
  show_error("12 - 5 < 10: blocked waiting for 3 more instances",
             [&] { sess.run(dequeue, {}, deadline(blocked_ms)); });
  std::cout << "# The book's second batch shows a 0., which was never "
               "enqueued (items are 1. to 22.)."
            << std::endl;
  // Once closed, min_after_dequeue no longer holds items back.
  sess.run(q.close());
  std::cout << ">>> sess.run(q.close()); dequeue_many(5): "
            << np(sess.run(dequeue)) << "   (" << np(sess.run(size))
            << " items left)" << std::endl;
}

void padding(const std::string& target) {
  header("PaddingFIFOQueue");
  reset_default_container(target);
  graph g;
  auto as_default = g.as_default();
  padding_fifo_queue q{50, {dtype::float32}, {tensor_shape{-1, -1}},
                       "shared_q", "q"};
  auto v = placeholder(dtype::float32, {-1, -1});
  auto enqueue = q.enqueue({v});
  auto dequeue_one = q.dequeue().front();
  auto dequeue = q.dequeue_many(3).front();

  session sess{target, bounded(), &g};
  auto enqueue_all = [&] {
    sess.run(enqueue, {{v, tensor::from_vector<float>({1, 2, 3, 4, 5, 6},
                                                      tensor_shape{3, 2})}});
    sess.run(enqueue, {{v, tensor::from_vector<float>({1},
                                                      tensor_shape{1, 1})}});
    sess.run(enqueue,
             {{v, tensor::from_vector<float>({7, 8, 9, 5, 6, 7, 8, 9},
                                             tensor_shape{2, 4})}});
  };
  enqueue_all();
  std::cout << ">>> enqueued 3x2, 1x1 and 2x4 matrices\n"
            << ">>> print(sess.run(q.dequeue_many(3)))\n"
            << np(sess.run(dequeue)) << std::endl;
  enqueue_all();
  std::cout << ">>> the same three again; print(sess.run(q.dequeue()))  "
               "# one at a time: not padded\n"
            << np(sess.run(dequeue_one)) << '\n'
            << np(sess.run(dequeue_one)) << '\n'
            << np(sess.run(dequeue_one)) << std::endl;
}

void preloading(const std::string& target) {
  header("Preload the data into a variable");
  graph g;
  auto as_default = g.as_default();
  const int64_t n_features = 2;
  auto training_set_init = placeholder(dtype::float32, {-1, n_features});
  variable_options opts = named("training_set");
  opts.trainable = false;
  opts.collections = std::vector<std::string>{};
  // The book's exact call: TensorFlow refuses it too, since the
  // placeholder's first dimension is unknown. (Tried in a scratch graph,
  // which keeps the name "training_set" free in ours.)
  show_error("tf.Variable(training_set_init, trainable=False, "
             "collections=[])",
             [&] {
               graph scratch;
               auto in_scratch = scratch.as_default();
               variable{placeholder(dtype::float32, {-1, n_features}), opts};
             });
  // validate_shape=False lets the variable take the fed shape.
  opts.validate_shape = false;
  variable training_set{training_set_init, opts};
  variable w{0.5f, named("w")}; // an ordinary variable, for contrast
  auto mean = reduce_mean(training_set, {0});

  session sess{target, bounded(), &g};
  auto data = tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8},
                                         tensor_shape{4, n_features});
  std::cout << ">>> (with validate_shape=False)\n"
            << ">>> sess.run(training_set.initializer, "
               "feed_dict={training_set_init: data})"
            << std::endl;
  sess.run(training_set.initializer(), {{training_set_init, data}});
  std::cout << np(sess.run(training_set)) << '\n'
            << "feature means (no feed needed any more): "
            << sess.run(mean).to_string() << std::endl;
  auto names = [](const std::vector<variable>& vars) {
    std::string result = "[";
    for (size_t i = 0; i < vars.size(); ++i)
      result += (i > 0 ? ", '" : "'") + vars[i].name() + "'";
    return result + "]";
  };
  std::cout << "global_variables(): " << names(global_variables()) << '\n'
            << "trainable_variables(): " << names(trainable_variables())
            << '\n'
            << "training_set.trainable: "
            << (training_set.trainable() ? "True" : "False") << std::endl;
}

int run(int argc, char** argv) {
  support::example_flags flags{
    "Seed 004a: containers and Session.reset; FIFOQueue shared by a loader\n"
    "and a trainer process; tuples; close; RandomShuffleQueue;\n"
    "PaddingFIFOQueue; preloading (one node process, machine A)."};
  // The loader and trainer clients are this program, re-invoked with
  // these flags.
  std::string role;
  std::string queue_target;
  pid_t parent = 0;
  auto& app = flags.app();
  constexpr const char* clients = "The loader and trainer processes";
  app.add_option("--role", role, "run as the loader or the trainer client")
    ->type_name("NAME")
    ->check(support::one_of({"loader", "trainer"}))
    ->group(clients);
  app.add_option("--target", queue_target, "machine A's session target")
    ->type_name("TARGET")
    ->group(clients);
  app.add_option("--parent-pid", parent, "the example, which they die with")
    ->type_name("PID")
    ->check(support::process_id())
    ->group(clients);
  if (!flags.parse(argc, argv))
    return 0;
  if (!role.empty())
    return run_role(role, queue_target, parent);

  auto node = flags.node_binary();
  support::local_cluster nodes{node, {{"local", 1}}};
  auto target = nodes.target("local", 0);
  std::cout << "machine A: " << target << " (/job:local/task:0)"
            << std::endl;

  containers(target);
  loader_and_trainer(target);
  tuples(target);
  closing(target);
  random_shuffle(target);
  padding(target);
  preloading(target);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("seed004a_queues",
                        [&] { return run(argc, argv); });
}
