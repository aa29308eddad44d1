// actorflow._actorflow, its second half (issue 32): gradients,
// optimizers, the global step, queues, readers and input pipelines,
// coordinators and queue runners, checkpoints, and monitored sessions
// with the engine's hooks and hooks written in Python. Calls that block
// release the GIL. The first half, and what both share: module.cpp,
// binding.hpp.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "actorflow/client/basic_session_run_hooks.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/monitored_session.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/saver.hpp"
#include "actorflow/graph/gradients.hpp"
#include "actorflow/graph/input.hpp"
#include "actorflow/graph/io_ops.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/graph/training.hpp"
#include "binding.hpp"

namespace actorflow::python {

namespace {

// A queue's component dtypes and shapes, as the package names them.
std::pair<std::vector<dtype>, std::vector<tensor_shape>>
components(const std::vector<std::string>& types,
           const std::vector<py::object>& shapes) {
  std::vector<dtype> ts;
  for (auto& t : types)
    ts.push_back(parse_or_throw(t));
  std::vector<tensor_shape> ss;
  for (auto& s : shapes)
    ss.push_back(shape_from(s));
  return {std::move(ts), std::move(ss)};
}

// -- hooks written in Python ----------------------------------------------------

// A session_run_hook whose calls go to a Python object: the package's
// adapter (actorflow.train._PythonHook), which turns them into TF's
// SessionRunHook calls on the user's hook. The monitored session calls
// hooks in the thread that runs the step, which released the GIL.
class python_hook : public session_run_hook {
public:
  explicit python_hook(py::object adapter) : adapter_(std::move(adapter)) {
  }
  ~python_hook() override {
    py::gil_scoped_acquire locked;
    adapter_ = py::object{};
  }
  void begin() override {
    py::gil_scoped_acquire locked;
    adapter_.attr("begin")();
  }
  void after_create_session(session& sess, coordinator&) override {
    py::gil_scoped_acquire locked;
    adapter_.attr("after_create_session")(
      py::cast(&sess, py::return_value_policy::reference));
  }
  session_run_args before_run(session_run_context&) override {
    py::gil_scoped_acquire locked;
    // (fetch names, [(output, array)]) or None.
    auto extra = adapter_.attr("before_run")();
    session_run_args args;
    if (extra.is_none())
      return args;
    auto pair = extra.cast<py::tuple>();
    for (auto& name : pair[0].cast<std::vector<std::string>>())
      args.fetches.emplace_back(name);
    args.feeds = feeds_of(pair[1].cast<py_feeds>());
    return args;
  }
  void after_run(session_run_context& context,
                 const session_run_values& values) override {
    py::gil_scoped_acquire locked;
    // True: the hook asked for a stop (run_context.request_stop()).
    if (adapter_.attr("after_run")(numpy_list(values.results)).cast<bool>())
      context.request_stop();
  }
  void end(session& sess) override {
    py::gil_scoped_acquire locked;
    adapter_.attr("end")(py::cast(&sess, py::return_value_policy::reference));
  }

private:
  py::object adapter_;
};

// A step context's run_with_hooks in the shape run_step calls (Ctrl-C is
// not watched: the monitored session's run has no cancellation either).
struct hooked_runs {
  step_context& context;
  std::vector<tensor> run(const std::vector<fetch>& fetches,
                          const feed_dict& feeds, const run_options& options,
                          run_metadata*, step_cancellation*) {
    return context.run_with_hooks(fetches, feeds, options);
  }
};

// monitored_session::run_step_fn calling a Python function. An OpError
// the function raises for a lost task (Unavailable, Aborted) goes back to
// the engine as one, which re-creates the session and calls it again, as
// for a step function written in C++.
py::object run_python_step_fn(monitored_session& ms, const py::object& fn) {
  py::object result;
  {
    py::gil_scoped_release unlocked;
    ms.run_step_fn([&](step_context& context) {
      py::gil_scoped_acquire locked;
      try {
        result = fn(py::cast(&context, py::return_value_policy::reference));
      } catch (py::error_already_set& e) {
        auto op_error_cls = py::module_::import("actorflow.errors")
                              .attr("OpError");
        if (!e.matches(op_error_cls))
          throw;
        auto code = static_cast<error_code>(
          e.value().attr("error_code").cast<int>());
        if (code != error_code::unavailable && code != error_code::aborted)
          throw;
        throw op_error(code, e.value().attr("message").cast<std::string>());
      }
    });
  }
  return result;
}

} // namespace

void bind_training(py::module_& m) {
  // Training: gradients, the global step, optimizers.
  m.def("gradients", &gradients, py::arg("ys"), py::arg("xs"),
        py::arg("grad_ys") = std::vector<output>{},
        py::arg("name") = "gradients");
  m.def("create_global_step", &create_global_step);
  m.def("get_global_step", [] {
    auto v = get_global_step();
    return v.op().valid() ? py::cast(v) : py::object(py::none());
  });
  m.def("get_or_create_global_step", &get_or_create_global_step);
  m.def("exponential_decay", &exponential_decay, py::arg("learning_rate"),
        py::arg("global_step"), py::arg("decay_steps"), py::arg("decay_rate"),
        py::arg("staircase") = false, py::arg("name") = "ExponentialDecay");
  // A learning rate: a number or a scalar tensor.
  py::class_<hyperparameter>(m, "Hyperparameter")
    .def(py::init<double>())
    .def(py::init<output>());
  py::class_<optimizer>(m, "Optimizer")
    .def("compute_gradients", &optimizer::compute_gradients,
         py::arg("loss"), py::arg("var_list") = std::vector<variable>{})
    .def("apply_gradients",
         [](optimizer& o, const grads_and_vars& gv,
            std::optional<variable> step, const std::string& name) {
           return o.apply_gradients(gv, step ? &*step : nullptr, name);
         },
         py::arg("grads_and_vars"), py::arg("global_step") = py::none(),
         py::arg("name") = "")
    .def("minimize",
         [](optimizer& o, const output& loss, std::optional<variable> step,
            std::vector<variable> vars, const std::string& name) {
           return o.minimize(loss, step ? &*step : nullptr, std::move(vars),
                             name);
         },
         py::arg("loss"), py::arg("global_step") = py::none(),
         py::arg("var_list") = std::vector<variable>{}, py::arg("name") = "")
    .def("get_slot", &optimizer::get_slot)
    .def_property_readonly("name", &optimizer::name);
  py::class_<gradient_descent_optimizer, optimizer>(m,
                                                    "GradientDescentOptimizer")
    .def(py::init<hyperparameter, const std::string&>(),
         py::arg("learning_rate"), py::arg("name") = "GradientDescent");
  py::class_<momentum_optimizer, optimizer>(m, "MomentumOptimizer")
    .def(py::init<hyperparameter, double, bool, const std::string&>(),
         py::arg("learning_rate"), py::arg("momentum"),
         py::arg("use_nesterov") = false, py::arg("name") = "Momentum");
  py::class_<adagrad_optimizer, optimizer>(m, "AdagradOptimizer")
    .def(py::init<hyperparameter, double, const std::string&>(),
         py::arg("learning_rate"), py::arg("initial_accumulator_value") = 0.1,
         py::arg("name") = "Adagrad");
  py::class_<adam_optimizer, optimizer>(m, "AdamOptimizer")
    .def(py::init<hyperparameter, double, double, double,
                  const std::string&>(),
         py::arg("learning_rate"), py::arg("beta1") = 0.9,
         py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-8,
         py::arg("name") = "Adam");

  // Queues (tf.FIFOQueue).
  py::class_<queue_base>(m, "Queue")
    .def_property_readonly("name", &queue_base::name)
    .def_property_readonly("op", &queue_base::op)
    .def_property_readonly("dtypes",
                           [](const queue_base& q) {
                             std::vector<std::string> out;
                             for (auto t : q.dtypes())
                               out.emplace_back(to_string(t));
                             return out;
                           })
    .def("enqueue", &queue_base::enqueue, py::arg("values"),
         py::arg("name") = "")
    .def("enqueue_many", &queue_base::enqueue_many, py::arg("values"),
         py::arg("name") = "")
    .def("dequeue", &queue_base::dequeue, py::arg("name") = "")
    .def("dequeue_many",
         py::overload_cast<int32_t, const std::string&>(
           &queue_base::dequeue_many),
         py::arg("n"), py::arg("name") = "")
    .def("dequeue_up_to",
         py::overload_cast<int32_t, const std::string&>(
           &queue_base::dequeue_up_to),
         py::arg("n"), py::arg("name") = "")
    .def("close", &queue_base::close,
         py::arg("cancel_pending_enqueues") = false, py::arg("name") = "")
    .def("size", &queue_base::size, py::arg("name") = "")
    .def("is_closed", &queue_base::is_closed, py::arg("name") = "");
  m.def("fifo_queue",
        [](int32_t capacity, const std::vector<std::string>& types,
           const std::vector<py::object>& shapes,
           const std::string& shared_name, const std::string& name) {
          auto [ts, ss] = components(types, shapes);
          return queue_base{fifo_queue{capacity, std::move(ts), std::move(ss),
                                       shared_name, name}};
        },
        py::arg("capacity"), py::arg("dtypes"), py::arg("shapes"),
        py::arg("shared_name"), py::arg("name"));

  m.def("padding_fifo_queue",
        [](int32_t capacity, const std::vector<std::string>& types,
           const std::vector<py::object>& shapes,
           const std::string& shared_name, const std::string& name) {
          auto [ts, ss] = components(types, shapes);
          return queue_base{padding_fifo_queue{capacity, std::move(ts),
                                               std::move(ss), shared_name,
                                               name}};
        },
        py::arg("capacity"), py::arg("dtypes"), py::arg("shapes"),
        py::arg("shared_name"), py::arg("name"));
  m.def("random_shuffle_queue",
        [](int32_t capacity, int32_t min_after_dequeue,
           const std::vector<std::string>& types,
           const std::vector<py::object>& shapes, int64_t seed,
           const std::string& shared_name, const std::string& name) {
          auto [ts, ss] = components(types, shapes);
          return queue_base{random_shuffle_queue{capacity, min_after_dequeue,
                                                 std::move(ts), std::move(ss),
                                                 seed, shared_name, name}};
        },
        py::arg("capacity"), py::arg("min_after_dequeue"), py::arg("dtypes"),
        py::arg("shapes"), py::arg("seed"), py::arg("shared_name"),
        py::arg("name"));

  // Readers and input pipelines.
  py::class_<reader_base>(m, "Reader")
    .def("read", &reader_base::read, py::arg("queue"), py::arg("name") = "")
    .def("read_up_to",
         py::overload_cast<const queue_base&, int64_t, const std::string&>(
           &reader_base::read_up_to),
         py::arg("queue"), py::arg("num_records"), py::arg("name") = "")
    .def("num_records_produced", &reader_base::num_records_produced,
         py::arg("name") = "")
    .def("reset", &reader_base::reset, py::arg("name") = "");
  m.def("text_line_reader",
        [](int64_t skip, const std::string& name) {
          return reader_base{text_line_reader{skip, "", name}};
        },
        py::arg("skip_header_lines"), py::arg("name"));
  m.def("whole_file_reader", [](const std::string& name) {
    return reader_base{whole_file_reader{"", name}};
  });
  m.def("fixed_length_record_reader",
        [](int64_t record, int64_t header, int64_t footer, int64_t hop,
           const std::string& name) {
          return reader_base{
            fixed_length_record_reader{record, header, footer, hop, "", "",
                                       name}};
        },
        py::arg("record_bytes"), py::arg("header_bytes"),
        py::arg("footer_bytes"), py::arg("hop_bytes"), py::arg("name"));
  m.def("string_input_producer",
        [](const output& strings, int64_t num_epochs, bool shuffle,
           int64_t seed, int32_t capacity, const std::string& shared_name,
           const std::string& name) {
          input_producer_options o;
          o.num_epochs = num_epochs;
          o.shuffle = shuffle;
          o.seed = seed;
          o.capacity = capacity;
          o.shared_name = shared_name;
          o.name = name;
          return queue_base{string_input_producer(strings, o)};
        },
        py::arg("strings"), py::arg("num_epochs"), py::arg("shuffle"),
        py::arg("seed"), py::arg("capacity"), py::arg("shared_name"),
        py::arg("name"));
  m.def("batch",
        [](const std::vector<output>& tensors, int32_t batch_size,
           int32_t num_threads, int32_t capacity, bool enqueue_many,
           const std::vector<py::object>& shapes, bool dynamic_pad,
           bool allow_smaller, const std::string& shared_name,
           const std::string& name, int32_t shuffle_capacity,
           int32_t min_after_dequeue, int64_t seed) {
          batch_options o;
          o.num_threads = num_threads;
          o.capacity = capacity;
          o.enqueue_many = enqueue_many;
          for (auto& s : shapes)
            o.shapes.push_back(shape_from(s));
          o.dynamic_pad = dynamic_pad;
          o.allow_smaller_final_batch = allow_smaller;
          o.shared_name = shared_name;
          o.name = name;
          o.seed = seed;
          if (min_after_dequeue >= 0)
            return shuffle_batch(tensors, batch_size, shuffle_capacity,
                                 min_after_dequeue, o);
          return batch(tensors, batch_size, o);
        },
        py::arg("tensors"), py::arg("batch_size"), py::arg("num_threads"),
        py::arg("capacity"), py::arg("enqueue_many"), py::arg("shapes"),
        py::arg("dynamic_pad"), py::arg("allow_smaller_final_batch"),
        py::arg("shared_name"), py::arg("name"), py::arg("shuffle_capacity"),
        py::arg("min_after_dequeue"), py::arg("seed"));

  // Coordinators and queue runners: the runners' threads are C++ threads
  // the coordinator owns (they never touch Python).
  py::class_<coordinator>(m, "Coordinator")
    .def(py::init<>())
    .def("request_stop", py::overload_cast<>(&coordinator::request_stop))
    .def("should_stop", &coordinator::should_stop)
    .def("clear_stop", &coordinator::clear_stop)
    .def("wait_for_stop",
         [](const coordinator& c, std::optional<double> timeout_s) {
           py::gil_scoped_release unlocked;
           if (!timeout_s)
             return c.wait_for_stop();
           return c.wait_for_stop(std::chrono::milliseconds(
             static_cast<int64_t>(*timeout_s * 1000)));
         },
         py::arg("timeout") = py::none())
    .def("join",
         [](coordinator& c, double grace_s, bool ignore_live) {
           py::gil_scoped_release unlocked;
           c.join(std::chrono::milliseconds(static_cast<int64_t>(grace_s
                                                                 * 1000)),
                  ignore_live);
         },
         py::arg("stop_grace_period_secs"), py::arg("ignore_live_threads"))
    .def("joined", &coordinator::joined);
  py::class_<queue_runner>(m, "QueueRunner")
    .def(py::init([](const queue_base& q, const std::vector<operation>& ops) {
      return queue_runner{q, ops};
    }))
    .def_property_readonly("name", &queue_runner::name);
  m.def("add_queue_runner", &add_queue_runner);
  m.def("start_queue_runners", [](session& s, coordinator& c) {
    py::gil_scoped_release unlocked;
    return start_queue_runners(s, c);
  });

  // Checkpoints (tf.train.Saver): saves and restores block, GIL released.
  py::class_<saver>(m, "Saver")
    .def(py::init([](std::vector<variable> vars,
                     std::vector<std::string> names, int max_to_keep,
                     bool sharded, const std::string& name) {
           saver_options o;
           o.var_list = std::move(vars);
           o.var_names = std::move(names);
           o.max_to_keep = max_to_keep;
           o.sharded = sharded;
           o.name = name;
           return std::make_unique<saver>(std::move(o));
         }),
         py::arg("var_list"), py::arg("var_names"), py::arg("max_to_keep"),
         py::arg("sharded"), py::arg("name"))
    .def("save",
         [](saver& sv, session& s, const std::string& path,
            std::optional<variable> step_var, int64_t step) {
           py::gil_scoped_release unlocked;
           return step_var ? sv.save(s, path, *step_var)
                           : sv.save(s, path, step);
         },
         py::arg("sess"), py::arg("save_path"), py::arg("step_var"),
         py::arg("global_step"))
    .def("restore", &saver::restore, py::arg("sess"), py::arg("save_path"),
         py::call_guard<py::gil_scoped_release>())
    .def_property_readonly("last_checkpoints", &saver::last_checkpoints);
  m.def("latest_checkpoint", &latest_checkpoint);
  m.def("checkpoint_exists", &checkpoint_exists);

  // Monitored training sessions and the engine's hooks.
  py::class_<session_run_hook, std::shared_ptr<session_run_hook>>(
    m, "SessionRunHook");
  py::class_<stop_at_step_hook, session_run_hook,
             std::shared_ptr<stop_at_step_hook>>(m, "StopAtStepHook")
    .def(py::init<std::optional<int64_t>, std::optional<int64_t>>(),
         py::arg("num_steps"), py::arg("last_step"));
  py::class_<python_hook, session_run_hook, std::shared_ptr<python_hook>>(
    m, "PythonHook")
    .def(py::init<py::object>());
  py::class_<nan_tensor_hook, session_run_hook,
             std::shared_ptr<nan_tensor_hook>>(m, "NanTensorHook")
    .def(py::init([](const output& loss, bool fail) {
           return std::make_shared<nan_tensor_hook>(loss, fail);
         }),
         py::arg("loss_tensor"), py::arg("fail_on_nan_loss"));
  py::class_<step_context>(m, "StepContext")
    .def_property_readonly("session", &step_context::get_session,
                           py::return_value_policy::reference)
    .def("run",
         [](step_context& c, const std::vector<std::string>& names,
            const py_feeds& feeds, int64_t timeout_ms, int32_t trace_level,
            bool partition_graphs) {
           hooked_runs runs{c};
           return run_step(runs, names, feeds, timeout_ms, trace_level,
                           partition_graphs);
         },
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0,
         py::arg("trace_level") = 0, py::arg("partition_graphs") = false)
    .def("request_stop", &step_context::request_stop);
  py::class_<monitored_session>(m, "MonitoredSession")
    .def("run", &run_step<monitored_session>,
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0,
         py::arg("trace_level") = 0, py::arg("partition_graphs") = false)
    .def("run_step_fn", &run_python_step_fn, py::arg("step_fn"))
    .def("should_stop", &monitored_session::should_stop,
         py::call_guard<py::gil_scoped_release>())
    .def("close", &monitored_session::close,
         py::call_guard<py::gil_scoped_release>());
  m.def("monitored_training_session",
        [](const std::string& master, bool is_chief,
           const std::string& checkpoint_dir, session_run_hooks hooks,
           session_run_hooks chief_only_hooks,
           std::optional<double> save_checkpoint_secs,
           std::optional<int64_t> save_checkpoint_steps,
           int64_t log_step_count_steps, graph* g, int64_t timeout_ms) {
          monitored_training_session_options o;
          o.master = master;
          o.is_chief = is_chief;
          o.checkpoint_dir = checkpoint_dir;
          o.hooks = std::move(hooks);
          o.chief_only_hooks = std::move(chief_only_hooks);
          o.save_checkpoint_secs = save_checkpoint_secs;
          o.save_checkpoint_steps = save_checkpoint_steps;
          o.log_step_count_steps = log_step_count_steps;
          o.g = g;
          o.config.operation_timeout_in_ms = timeout_ms;
          py::gil_scoped_release unlocked;
          return monitored_training_session(std::move(o));
        },
        py::arg("master"), py::arg("is_chief"), py::arg("checkpoint_dir"),
        py::arg("hooks"), py::arg("chief_only_hooks"),
        py::arg("save_checkpoint_secs"), py::arg("save_checkpoint_steps"),
        py::arg("log_step_count_steps"), py::arg("graph"),
        py::arg("operation_timeout_in_ms"));
}

} // namespace actorflow::python
