// actorflow._actorflow: the engine's C++ client API for Python (issue 32),
// as thin as TensorFlow's pywrap layer. The package around it
// (python/actorflow/*.py) gives it TensorFlow 1.x's names; this file only
// converts (numpy <-> tensor, op_error -> actorflow.errors), releases the
// GIL while a call blocks, and turns C++'s scope guards into objects that
// Python's `with` closes.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/client/basic_session_run_hooks.hpp"
#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/coordinator.hpp"
#include "actorflow/client/queue_runner.hpp"
#include "actorflow/client/saver.hpp"
#include "actorflow/client/monitored_session.hpp"
#include "actorflow/client/device_setter.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "actorflow/graph/gradients.hpp"
#include "actorflow/graph/input.hpp"
#include "actorflow/graph/io_ops.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"
#include "actorflow/graph/queue_ops.hpp"
#include "actorflow/graph/training.hpp"

namespace py = pybind11;
using namespace actorflow;

namespace {

// -- tensors and numpy --------------------------------------------------------

// numpy's name of a dtype: TF's ("float32", "bool", ...), "object" for
// strings.
std::string numpy_name(dtype t) {
  if (t == dtype::string)
    return "object";
  if (!known_dtype(static_cast<uint8_t>(t)) || t == dtype::invalid)
    throw op_error(error_code::unimplemented,
                   "dtype " + std::to_string(static_cast<int>(t))
                     + " has no numpy counterpart here");
  return std::string{to_string(t)};
}

std::vector<py::ssize_t> dims_of(const tensor_shape& shape) {
  std::vector<py::ssize_t> out;
  for (int i = 0; i < shape.rank(); ++i)
    out.push_back(static_cast<py::ssize_t>(shape.dim(i)));
  return out;
}

// A fetched tensor as a numpy array (or, for a scalar, a numpy scalar, as
// TF returns). The array views the tensor's buffer: a capsule keeps a
// copy of the tensor (sharing the buffer) alive, so nothing is copied.
py::object to_numpy(const tensor& fetched) {
  if (!fetched.valid())
    return py::none();
  auto t = fetched.owned();
  auto dims = dims_of(t.shape());
  py::array arr;
  if (t.type() == dtype::string) {
    arr = py::array(py::dtype("object"), dims);
    auto xs = t.flat<std::string>();
    auto** cells = static_cast<PyObject**>(arr.mutable_data());
    for (size_t i = 0; i < xs.size(); ++i) {
      auto b = py::bytes(xs[i]);
      Py_XDECREF(cells[i]);
      cells[i] = b.release().ptr();
    }
  } else {
    auto* keep = new tensor(t);
    py::capsule owner(keep, [](void* p) { delete static_cast<tensor*>(p); });
    arr = py::array(py::dtype(numpy_name(t.type())), dims, {},
                    const_cast<void*>(keep->raw()), owner);
  }
  if (dims.empty())
    return arr[py::tuple()];
  return arr;
}

dtype dtype_of_numpy(const py::dtype& d) {
  auto kind = d.kind();
  auto size = d.itemsize();
  if (kind == 'f' && size == 4)
    return dtype::float32;
  if (kind == 'f' && size == 8)
    return dtype::float64;
  if (kind == 'i' && size == 4)
    return dtype::int32;
  if (kind == 'i' && size == 8)
    return dtype::int64;
  if (kind == 'u' && size == 1)
    return dtype::uint8;
  if (kind == 'b')
    return dtype::bool_;
  if (kind == 'O' || kind == 'S' || kind == 'U')
    return dtype::string;
  throw op_error(error_code::invalid_argument,
                 "numpy dtype " + py::cast<std::string>(py::str(py::handle(d)))
                   + " has no actorflow dtype (float32, float64, int32, "
                     "int64, uint8, bool, string)");
}

// A numpy array (the package made it C-contiguous, of the dtype it
// wants) as a tensor of its own: the engine may keep a fed tensor (a
// variable assigned from it), and the caller may write into its array
// afterwards.
tensor from_numpy(const py::array& arr) {
  auto type = dtype_of_numpy(arr.dtype());
  std::vector<int64_t> dims;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i)
    dims.push_back(static_cast<int64_t>(arr.shape(i)));
  tensor_shape shape(std::move(dims));
  if (type == dtype::string) {
    tensor t{type, shape};
    auto xs = t.flat<std::string>();
    auto flat = arr.attr("ravel")();
    size_t i = 0;
    for (auto item : flat) {
      if (PyBytes_Check(item.ptr()))
        xs[i] = item.cast<std::string>();
      else if (PyUnicode_Check(item.ptr()))
        xs[i] = item.cast<std::string>();
      else
        throw op_error(error_code::invalid_argument,
                       "a string tensor's elements are bytes or str, got "
                         + py::str(item.get_type()).cast<std::string>());
      ++i;
    }
    return t;
  }
  if (!(arr.flags() & py::array::c_style))
    throw op_error(error_code::internal, "array is not C-contiguous");
  auto t = tensor::uninitialized(type, shape);
  if (t.num_elements() > 0)
    std::memcpy(t.raw(), arr.data(), t.byte_size());
  return t;
}

// A step's feeds as the package passes them: (output, array) pairs.
using py_feeds = std::vector<std::pair<output, py::array>>;

feed_dict feeds_of(const py_feeds& feeds) {
  feed_dict fd;
  for (auto& [x, arr] : feeds)
    fd.emplace_back(x, from_numpy(arr));
  return fd;
}

py::list numpy_list(const std::vector<tensor>& values) {
  py::list out;
  for (auto& t : values)
    out.append(to_numpy(t));
  return out;
}

// -- errors -------------------------------------------------------------------

// op_error -> the class of actorflow.errors for its code (a subclass of
// OpError with error_code, as TF's tf.errors), raised with its message.
void raise_op_error(const op_error& e) {
  auto errors = py::module_::import("actorflow.errors");
  auto cls = errors.attr("exception_type_from_error_code")(
    static_cast<int>(e.code()));
  auto exc = cls(py::none(), py::none(), e.get_status().message());
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

// -- scopes -------------------------------------------------------------------

// A C++ scope guard, open until close() (Python's __exit__).
struct scope {
  std::function<void()> close_fn;
  void close() {
    if (close_fn) {
      auto f = std::move(close_fn);
      close_fn = nullptr;
      f();
    }
  }
};

template <class Guard, class... Ts>
scope open_scope(Ts&&... xs) {
  auto* g = new Guard(std::forward<Ts>(xs)...);
  return scope{[g] { delete g; }};
}

std::vector<operation> ops_of(const std::vector<operation>& xs) {
  return xs;
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
  session_run_args before_run(session_run_context& context) override {
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
    (void) context;
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

// -- sessions -----------------------------------------------------------------

dtype parse_or_throw(const std::string& type) {
  auto t = parse_dtype(type);
  if (t == dtype::invalid)
    throw op_error(error_code::invalid_argument,
                   "unknown dtype \"" + type + "\"");
  return t;
}

tensor_shape shape_from(const py::object& shape) {
  if (shape.is_none())
    return tensor_shape::unknown();
  std::vector<int64_t> dims;
  for (auto d : shape)
    dims.push_back(d.is_none() ? -1 : d.cast<int64_t>());
  return tensor_shape(std::move(dims));
}

// A device function (replica_device_setter's), for device_scope.
struct device_fn {
  std::optional<device_function> fn;
};

session_config config_from(int64_t operation_timeout_in_ms,
                           bool log_device_placement,
                           bool allow_soft_placement) {
  session_config c;
  c.operation_timeout_in_ms = operation_timeout_in_ms;
  c.log_device_placement = log_device_placement;
  c.allow_soft_placement = allow_soft_placement;
  return c;
}

} // namespace

PYBIND11_MODULE(_actorflow, m) {
  m.doc() = "actorflow's engine for Python; use the package `actorflow`";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const op_error& e) {
      raise_op_error(e);
    }
  });

  // Graphs: the thread's default graph is the C++ one (never freed); a
  // Graph() the package makes is owned by its Python object.
  py::class_<graph>(m, "Graph")
    .def(py::init<>())
    .def("num_nodes", &graph::num_nodes)
    .def("find_operation",
         [](const graph& g, const std::string& name) {
           return g.find_operation(name);
         })
    .def("tensor_by_name",
         [](const graph& g, const std::string& name) {
           return g.tensor_by_name(name);
         })
    .def("as_default",
         [](graph& g) { return open_scope<graph::default_guard>(g); })
    .def("to_text", &graph::to_text)
    .def("seed", &graph::seed)
    .def("set_seed", &graph::set_seed)
    .def("collection", &graph::collection);
  m.def("default_graph", &default_graph, py::return_value_policy::reference);
  m.def("reset_default_graph", &reset_default_graph);

  py::class_<scope>(m, "Scope").def("close", &scope::close);
  m.def("device_scope",
        [](const std::string& spec) { return open_scope<device_scope>(spec); });
  m.def("clear_device_scope",
        [] { return open_scope<device_scope>(nullptr); });
  m.def("name_scope", [](const std::string& name) {
    auto* g = new name_scope(name);
    auto prefix = g->prefix();
    return std::make_pair(scope{[g] { delete g; }}, prefix);
  });
  m.def("container_scope", [](const std::string& name) {
    return open_scope<container_scope>(name);
  });
  m.def("control_dependencies", [](const std::vector<operation>& ops) {
    return open_scope<control_dependencies>(ops_of(ops));
  });
  m.def("clear_control_dependencies",
        [] { return open_scope<control_dependencies>(nullptr); });
  m.def("colocate_with",
        [](const operation& op) { return open_scope<colocate_with>(op); });

  py::class_<operation>(m, "Operation")
    .def_property_readonly("name", &operation::name)
    .def_property_readonly("type", &operation::type)
    .def_property_readonly("device", &operation::device)
    .def_property_readonly("num_outputs", &operation::num_outputs)
    .def_property_readonly("control_inputs", &operation::control_inputs)
    .def_property_readonly("inputs", &operation::inputs)
    .def_property_readonly("graph", &operation::owner,
                           py::return_value_policy::reference)
    .def("out", &operation::out)
    .def("__eq__", [](const operation& x, const operation& y) {
      return x == y;
    })
    .def("__hash__", [](const operation& x) {
      return std::hash<std::string>{}(x.name());
    });

  py::class_<output>(m, "Output")
    .def_property_readonly("name", &output::name)
    .def_property_readonly("op", &output::op)
    .def_property_readonly("index", &output::index)
    .def_property_readonly("device", &output::device)
    .def_property_readonly("dtype",
                           [](const output& x) {
                             return std::string{to_string(x.type())};
                           })
    .def_property_readonly("shape",
                           [](const output& x) -> py::object {
                             auto s = x.shape();
                             if (s.unknown_rank())
                               return py::none();
                             py::list dims;
                             for (int i = 0; i < s.rank(); ++i)
                               dims.append(s.dim(i) < 0
                                             ? py::object(py::none())
                                             : py::int_(s.dim(i)));
                             return dims;
                           })
    .def_property_readonly("graph", &output::owner,
                           py::return_value_policy::reference)
    .def("__eq__", [](const output& x, const output& y) { return x == y; })
    .def("__hash__", [](const output& x) {
      return std::hash<std::string>{}(x.name());
    });

  py::class_<variable>(m, "Variable")
    // collections: None for the default ones, [] for none (TF's).
    .def(py::init([](const output& initial, const std::string& name,
                     bool trainable,
                     std::optional<std::vector<std::string>> collections,
                     bool validate_shape) {
           variable_options o;
           if (!name.empty())
             o.name = name;
           o.trainable = trainable;
           o.collections = std::move(collections);
           o.validate_shape = validate_shape;
           return variable{initial, std::move(o)};
         }),
         py::arg("initial_value"), py::arg("name") = "",
         py::arg("trainable") = true, py::arg("collections") = py::none(),
         py::arg("validate_shape") = true)
    .def_property_readonly("name", &variable::name)
    .def_property_readonly("op", &variable::op)
    .def("ref", &variable::ref)
    .def("value", &variable::value)
    .def_property_readonly("initializer", &variable::initializer)
    .def_property_readonly("initial_value", &variable::initial_value)
    .def("initialized_value", &variable::initialized_value)
    .def("assign",
         [](const variable& v, const output& x, bool validate,
            const std::string& name) {
           return v.assign(x, validate, name.empty() ? "Assign" : name);
         },
         py::arg("value"), py::arg("validate_shape") = true,
         py::arg("name") = "")
    .def("assign_add",
         [](const variable& v, const output& x, const std::string& name) {
           return v.assign_add(x, name.empty() ? "AssignAdd" : name);
         },
         py::arg("value"), py::arg("name") = "")
    .def("assign_sub",
         [](const variable& v, const output& x, const std::string& name) {
           return v.assign_sub(x, name.empty() ? "AssignSub" : name);
         },
         py::arg("value"), py::arg("name") = "")
    // A Python number: the constant is named under the op, as TF names
    // it ("AssignAdd/value").
    .def("assign_value",
         [](const variable& v, double x) { return v.assign(x); })
    .def("assign_add_value",
         [](const variable& v, double x) { return v.assign_add(x); })
    .def("assign_sub_value",
         [](const variable& v, double x) { return v.assign_sub(x); })
    .def("count_up_to", &variable::count_up_to, py::arg("limit"),
         py::arg("name") = "CountUpTo");
  m.def("global_variables", [] { return global_variables(); });
  m.def("trainable_variables", [] { return trainable_variables(); });
  m.def("local_variables", [] { return local_variables(); });
  m.def("global_variables_initializer", &global_variables_initializer,
        py::arg("name") = "init");
  m.def("local_variables_initializer", &local_variables_initializer,
        py::arg("name") = "init");
  m.def("variables_initializer", &variables_initializer, py::arg("var_list"),
        py::arg("name") = "init");
  m.def("is_variable_initialized", &is_variable_initialized, py::arg("v"),
        py::arg("name") = "IsVariableInitialized");

  // Ops. The package converts Python values to outputs (constant) first.
  m.def("constant",
        [](const py::array& value, const std::string& name) {
          return constant(from_numpy(value), name);
        },
        py::arg("value"), py::arg("name") = "Const");
  m.def("placeholder",
        [](const std::string& type, py::object shape,
           const std::string& name) {
          auto t = parse_dtype(type);
          if (t == dtype::invalid)
            throw op_error(error_code::invalid_argument,
                           "unknown dtype \"" + type + "\"");
          auto s = tensor_shape::unknown();
          if (!shape.is_none()) {
            std::vector<int64_t> dims;
            for (auto d : shape)
              dims.push_back(d.is_none() ? -1 : d.cast<int64_t>());
            s = tensor_shape(std::move(dims));
          }
          return placeholder(t, s, name);
        },
        py::arg("dtype"), py::arg("shape") = py::none(),
        py::arg("name") = "Placeholder");
  m.def("identity", &identity, py::arg("x"), py::arg("name") = "Identity");
  m.def("no_op", &no_op, py::arg("name") = "NoOp");
  m.def("group", &group, py::arg("ops"), py::arg("name") = "group_deps");
  using binary = output (*)(const output&, const output&, const std::string&);
  for (auto [py_name, fn, default_name] :
       {std::tuple{"add", binary{&add}, "add"},
        std::tuple{"subtract", binary{&sub}, "sub"},
        std::tuple{"multiply", binary{&mul}, "mul"},
        std::tuple{"maximum", binary{&maximum}, "Maximum"},
        std::tuple{"minimum", binary{&minimum}, "Minimum"}})
    m.def(py_name, fn, py::arg("x"), py::arg("y"),
          py::arg("name") = default_name);
  m.def("divide", binary{&div}, py::arg("x"), py::arg("y"), py::arg("name") = "truediv");
  using unary = output (*)(const output&, const std::string&);
  for (auto [py_name, fn, default_name] :
       {std::tuple{"negative", unary{&neg}, "Neg"},
        std::tuple{"square", unary{&square}, "Square"},
        std::tuple{"exp", unary{&actorflow::exp}, "Exp"},
        std::tuple{"log", unary{&actorflow::log}, "Log"},
        std::tuple{"sqrt", unary{&actorflow::sqrt}, "Sqrt"},
        std::tuple{"relu", unary{&relu}, "Relu"},
        std::tuple{"sigmoid", unary{&sigmoid}, "Sigmoid"},
        std::tuple{"tanh", unary{&actorflow::tanh}, "Tanh"}})
    m.def(py_name, fn, py::arg("x"), py::arg("name") = default_name);
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"),
        py::arg("transpose_a") = false, py::arg("transpose_b") = false,
        py::arg("name") = "MatMul");
  using reduction = output (*)(const output&, std::vector<int>, bool,
                               const std::string&);
  for (auto [py_name, fn, default_name] :
       {std::tuple{"reduce_sum", reduction{&reduce_sum}, "Sum"},
        std::tuple{"reduce_mean", reduction{&reduce_mean}, "Mean"},
        std::tuple{"reduce_max", reduction{&reduce_max}, "Max"}})
    m.def(py_name, fn, py::arg("x"), py::arg("axes") = std::vector<int>{},
          py::arg("keep_dims") = false, py::arg("name") = default_name);
  m.def("reshape", &reshape, py::arg("x"), py::arg("shape"),
        py::arg("name") = "Reshape");
  m.def("cast",
        [](const output& x, const std::string& type, const std::string& name) {
          auto t = parse_dtype(type);
          if (t == dtype::invalid)
            throw op_error(error_code::invalid_argument,
                           "unknown dtype \"" + type + "\"");
          return cast(x, t, name);
        },
        py::arg("x"), py::arg("dtype"), py::arg("name") = "Cast");

  // More ops: nn, random, shapes.
  m.def("softmax", &softmax, py::arg("logits"), py::arg("name") = "Softmax");
  m.def("log_softmax", &log_softmax, py::arg("logits"),
        py::arg("name") = "LogSoftmax");
  m.def("softmax_cross_entropy_with_logits",
        &softmax_cross_entropy_with_logits, py::arg("labels"),
        py::arg("logits"), py::arg("name") = "SoftmaxCrossEntropyWithLogits");
  m.def("sparse_softmax_cross_entropy_with_logits",
        &sparse_softmax_cross_entropy_with_logits, py::arg("labels"),
        py::arg("logits"),
        py::arg("name") = "SparseSoftmaxCrossEntropyWithLogits");
  m.def("sigmoid_cross_entropy_with_logits",
        &sigmoid_cross_entropy_with_logits, py::arg("labels"),
        py::arg("logits"), py::arg("name") = "logistic_loss");
  m.def("l2_loss", &l2_loss, py::arg("t"), py::arg("name") = "L2Loss");
  m.def("bias_add", &bias_add, py::arg("value"), py::arg("bias"),
        py::arg("name") = "BiasAdd");
  m.def("argmax", &argmax, py::arg("x"), py::arg("axis"),
        py::arg("name") = "ArgMax");
  m.def("equal", &equal, py::arg("x"), py::arg("y"), py::arg("name") = "Equal");
  m.def("zeros_like", &zeros_like, py::arg("x"),
        py::arg("name") = "zeros_like");
  m.def("ones_like", &ones_like, py::arg("x"), py::arg("name") = "ones_like");
  m.def("add_n", &add_n, py::arg("xs"), py::arg("name") = "AddN");
  m.def("split", &split, py::arg("value"), py::arg("num_split"),
        py::arg("axis"), py::arg("name") = "split");
  m.def("concat", &concat, py::arg("values"), py::arg("axis"),
        py::arg("name") = "concat");
  m.def("stack", &stack, py::arg("values"), py::arg("axis"),
        py::arg("name") = "stack");
  m.def("print", &print, py::arg("input"), py::arg("data"),
        py::arg("message"), py::arg("first_n"), py::arg("summarize"),
        py::arg("name") = "Print");
  m.def("transpose", &transpose, py::arg("x"),
        py::arg("perm") = std::vector<int>{}, py::arg("name") = "transpose");
  m.def("expand_dims", &expand_dims, py::arg("x"), py::arg("axis"),
        py::arg("name") = "ExpandDims");
  using random_fn = output (*)(std::vector<int64_t>, double, double, dtype,
                               int64_t, const std::string&);
  for (auto [py_name, fn] :
       {std::pair{"random_normal", random_fn{&random_normal}},
        std::pair{"truncated_normal", random_fn{&truncated_normal}},
        std::pair{"random_uniform", random_fn{&random_uniform}}})
    m.def(py_name,
          [fn = fn](std::vector<int64_t> shape, double a, double b,
                    const std::string& type, int64_t seed,
                    const std::string& name) {
            return fn(std::move(shape), a, b, parse_or_throw(type), seed, name);
          },
          py::arg("shape"), py::arg("a"), py::arg("b"), py::arg("dtype"),
          py::arg("seed"), py::arg("name"));
  m.def("zeros",
        [](std::vector<int64_t> shape, const std::string& type,
           const std::string& name) {
          return zeros(std::move(shape), parse_or_throw(type), name);
        },
        py::arg("shape"), py::arg("dtype"), py::arg("name") = "zeros");
  m.def("ones",
        [](std::vector<int64_t> shape, const std::string& type,
           const std::string& name) {
          return ones(std::move(shape), parse_or_throw(type), name);
        },
        py::arg("shape"), py::arg("dtype"), py::arg("name") = "ones");

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
    .def(py::init<double, const std::string&>(), py::arg("learning_rate"),
         py::arg("name") = "GradientDescent");
  py::class_<momentum_optimizer, optimizer>(m, "MomentumOptimizer")
    .def(py::init<double, double, bool, const std::string&>(),
         py::arg("learning_rate"), py::arg("momentum"),
         py::arg("use_nesterov") = false, py::arg("name") = "Momentum");
  py::class_<adagrad_optimizer, optimizer>(m, "AdagradOptimizer")
    .def(py::init<double, double, const std::string&>(),
         py::arg("learning_rate"), py::arg("initial_accumulator_value") = 0.1,
         py::arg("name") = "Adagrad");
  py::class_<adam_optimizer, optimizer>(m, "AdamOptimizer")
    .def(py::init<double, double, double, double, const std::string&>(),
         py::arg("learning_rate") = 0.001, py::arg("beta1") = 0.9,
         py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-8,
         py::arg("name") = "Adam");

  // replica_device_setter: a device function that tf.device opens.
  py::class_<device_fn>(m, "DeviceFunction");
  m.def("replica_device_setter",
        [](const cluster_spec& cluster, int ps_tasks,
           const std::string& ps_device, const std::string& worker_device,
           bool merge_devices) {
          replica_device_setter_options o;
          o.ps_tasks = ps_tasks;
          o.ps_device = ps_device;
          o.worker_device = worker_device;
          o.merge_devices = merge_devices;
          if (cluster.empty())
            return device_fn{replica_device_setter(o)};
          return device_fn{replica_device_setter(cluster, o)};
        },
        py::arg("cluster"), py::arg("ps_tasks"), py::arg("ps_device"),
        py::arg("worker_device"), py::arg("merge_devices"));
  m.def("device_function_scope", [](const device_fn& f) {
    return open_scope<device_scope>(f.fn);
  });
  // `with tf.device(fn)`: the graph calls `fn` (with the GIL, since ops
  // are built from Python) for each node made in the scope.
  py::class_<node_def>(m, "NodeDef")
    .def_readonly("name", &node_def::name)
    .def_readonly("op", &node_def::op)
    .def_readonly("device", &node_def::device)
    .def_readonly("inputs", &node_def::inputs);
  m.def("device_callable_scope", [](py::function fn) {
    // Freed with the GIL, whichever thread drops the last copy.
    auto held = std::shared_ptr<py::function>(
      new py::function(std::move(fn)), [](py::function* f) {
        py::gil_scoped_acquire locked;
        delete f;
      });
    device_function f = [held](const node_def& nd) {
      py::gil_scoped_acquire locked;
      return (*held)(nd).cast<std::string>();
    };
    return open_scope<device_scope>(std::optional<device_function>{f});
  });

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
          std::vector<dtype> ts;
          for (auto& t : types)
            ts.push_back(parse_or_throw(t));
          std::vector<tensor_shape> ss;
          for (auto& s : shapes)
            ss.push_back(shape_from(s));
          return queue_base{fifo_queue{capacity, std::move(ts), std::move(ss),
                                       shared_name, name}};
        },
        py::arg("capacity"), py::arg("dtypes"), py::arg("shapes"),
        py::arg("shared_name"), py::arg("name"));

  m.def("padding_fifo_queue",
        [](int32_t capacity, const std::vector<std::string>& types,
           const std::vector<py::object>& shapes,
           const std::string& shared_name, const std::string& name) {
          std::vector<dtype> ts;
          for (auto& t : types)
            ts.push_back(parse_or_throw(t));
          std::vector<tensor_shape> ss;
          for (auto& s : shapes)
            ss.push_back(shape_from(s));
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
          std::vector<dtype> ts;
          for (auto& t : types)
            ts.push_back(parse_or_throw(t));
          std::vector<tensor_shape> ss;
          for (auto& s : shapes)
            ss.push_back(shape_from(s));
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
    .def(py::init([](std::vector<variable> vars, int max_to_keep,
                     bool sharded, const std::string& name) {
           saver_options o;
           o.var_list = std::move(vars);
           o.max_to_keep = max_to_keep;
           o.sharded = sharded;
           o.name = name;
           return std::make_unique<saver>(std::move(o));
         }),
         py::arg("var_list"), py::arg("max_to_keep"), py::arg("sharded"),
         py::arg("name"))
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
  py::class_<monitored_session>(m, "MonitoredSession")
    .def("run",
         [](monitored_session& s, const std::vector<std::string>& names,
            const py_feeds& feeds, int64_t timeout_ms) {
           std::vector<fetch> fetches(names.begin(), names.end());
           auto fd = feeds_of(feeds);
           run_options o;
           o.timeout_in_ms = timeout_ms;
           std::vector<tensor> out;
           {
             py::gil_scoped_release unlocked;
             out = s.run(fetches, fd, o);
           }
           return numpy_list(out);
         },
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0)
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

  // Clusters and servers.
  py::class_<cluster_spec>(m, "ClusterSpec")
    .def(py::init([](const std::string& json) {
      return cluster_spec::from_json(json);
    }))
    .def("to_json", &cluster_spec::to_json)
    .def("as_cluster_def", &cluster_spec::as_cluster_def)
    .def("jobs", &cluster_spec::jobs)
    .def("num_tasks", &cluster_spec::num_tasks)
    .def("task_indices", &cluster_spec::task_indices)
    .def("has_task", &cluster_spec::has_task)
    .def("__str__", &cluster_spec::to_string);

  py::class_<server>(m, "Server")
    .def(py::init([](const cluster_spec& c, const std::string& job, int task,
                     bool replicate) {
           server_options o;
           o.replicate_variables = replicate;
           py::gil_scoped_release unlocked;
           return std::make_unique<server>(c, job, task, o);
         }),
         py::arg("cluster"), py::arg("job_name"), py::arg("task_index"),
         py::arg("replicate_variables") = false)
    .def_static("create_local_server",
                [] {
                  py::gil_scoped_release unlocked;
                  return std::make_unique<server>(
                    server::create_local_server());
                })
    .def_property_readonly("target", &server::target)
    .def_property_readonly("cluster", &server::cluster)
    .def_property_readonly("job_name", &server::job_name)
    .def_property_readonly("task_index", &server::task_index)
    .def("join", &server::join, py::call_guard<py::gil_scoped_release>())
    .def("stop", &server::stop, py::call_guard<py::gil_scoped_release>());

  py::class_<session>(m, "Session")
    .def(py::init([](const std::string& target, graph* g, int64_t timeout_ms,
                     bool log_placement, bool soft_placement) {
           auto c = config_from(timeout_ms, log_placement, soft_placement);
           py::gil_scoped_release unlocked;
           if (target.empty())
             return std::make_unique<session>(c, g);
           return std::make_unique<session>(target, c, g);
         }),
         py::arg("target"), py::arg("graph"),
         py::arg("operation_timeout_in_ms") = 0,
         py::arg("log_device_placement") = false,
         py::arg("allow_soft_placement") = false)
    // One step: fetches by name ("n:0" a value, "n" a target), feeds as
    // (output, array) pairs. The GIL is released while the step runs.
    .def("run",
         [](session& s, const std::vector<std::string>& names,
            const py_feeds& feeds, int64_t timeout_ms, int32_t trace_level) {
           std::vector<fetch> fetches(names.begin(), names.end());
           auto fd = feeds_of(feeds);
           run_options o;
           o.timeout_in_ms = timeout_ms;
           o.trace_level = trace_level;
           std::vector<tensor> out;
           run_metadata md;
           {
             py::gil_scoped_release unlocked;
             out = s.run(fetches, fd, o, &md);
           }
           auto values = numpy_list(out);
           // The step's stats (RunMetadata.step_stats), when it was traced:
           // per device, its nodes' (name, all_start_micros,
           // op_start_rel_micros, op_end_rel_micros, all_end_rel_micros,
           // timeline_label).
           py::object stats = py::none();
           if (md.has_step_stats) {
             py::list devices;
             for (auto& d : md.stats.dev_stats) {
               py::list nodes;
               for (auto& n : d.node_stats)
                 nodes.append(py::make_tuple(
                   n.node_name, n.all_start_micros, n.op_start_rel_micros,
                   n.op_end_rel_micros, n.all_end_rel_micros,
                   n.timeline_label));
               devices.append(py::make_tuple(d.device, nodes));
             }
             stats = devices;
           }
           return py::make_tuple(values, stats);
         },
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0,
         py::arg("trace_level") = 0)
    .def("close", &session::close, py::call_guard<py::gil_scoped_release>())
    .def_static("reset",
                [](const std::string& target,
                   const std::vector<std::string>& containers) {
                  py::gil_scoped_release unlocked;
                  session::reset(target, containers);
                },
                py::arg("target"),
                py::arg("containers") = std::vector<std::string>{});
}
