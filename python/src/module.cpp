// actorflow._actorflow: the engine's C++ client API for Python (issue 32),
// as thin as TensorFlow's pywrap layer. The package around it
// (python/actorflow/*.py) gives it TensorFlow 1.x's names; this file only
// converts (numpy <-> tensor, op_error -> actorflow.errors), releases the
// GIL while a call blocks, and turns C++'s scope guards into objects that
// Python's `with` closes. It binds graphs, ops, sessions and servers;
// training.cpp the rest (bind_training).

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/device_setter.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "binding.hpp"

using namespace actorflow;
using namespace actorflow::python;

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
  if (kind == 'f' && size == 2)
    return dtype::float16;
  if (kind == 'i' && size == 1)
    return dtype::int8;
  if (kind == 'i' && size == 2)
    return dtype::int16;
  if (kind == 'u' && size == 2)
    return dtype::uint16;
  if (kind == 'c' && size == 8)
    return dtype::complex64;
  if (kind == 'c' && size == 16)
    return dtype::complex128;
  if (kind == 'b')
    return dtype::bool_;
  if (kind == 'O' || kind == 'S' || kind == 'U')
    return dtype::string;
  throw op_error(error_code::invalid_argument,
                 "numpy dtype " + py::cast<std::string>(py::str(py::handle(d)))
                   + " has no actorflow dtype (float16, float32, float64, "
                     "int8, int16, int32, int64, uint8, uint16, complex64, "
                     "complex128, bool, string)");
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

// -- sessions -----------------------------------------------------------------

// A device function (replica_device_setter's), for device_scope.
struct device_fn {
  std::optional<device_function> fn;
};

// A ConfigProto's fields (ConfigProto._native in the package).
session_config config_from(int64_t operation_timeout_in_ms,
                           bool log_device_placement,
                           bool allow_soft_placement,
                           std::vector<std::string> device_filters) {
  session_config c;
  c.operation_timeout_in_ms = operation_timeout_in_ms;
  c.log_device_placement = log_device_placement;
  c.allow_soft_placement = allow_soft_placement;
  c.device_filters = std::move(device_filters);
  return c;
}

// -- borrowed feeds -----------------------------------------------------------

// References to fed arrays whose last tensor died on a thread without the
// GIL (an engine thread): dropped by the next call that holds it.
std::mutex released_mtx;
std::vector<PyObject*> released;

// A reference to `arr` for as long as a tensor borrows its buffer.
std::shared_ptr<void> hold(const py::array& arr) {
  return std::shared_ptr<void>(arr.inc_ref().ptr(), [](void* p) {
    auto* obj = static_cast<PyObject*>(p);
    if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) {
      Py_DECREF(obj);
      return;
    }
    std::lock_guard<std::mutex> guard{released_mtx};
    released.push_back(obj);
  });
}

// Below this, a copy costs less than the bookkeeping of a borrow.
constexpr py::ssize_t min_borrowed_bytes = 64 * 1024;

} // namespace

namespace actorflow::python {

void drop_released() {
  std::vector<PyObject*> xs;
  {
    std::lock_guard<std::mutex> guard{released_mtx};
    xs.swap(released);
  }
  for (auto* obj : xs)
    Py_DECREF(obj);
}

// A large numeric array is fed without a copy: the tensor borrows its
// buffer (tensor::borrow), holding the array. Whatever keeps a fed tensor
// past the step (a variable assigned from it, a queue's element) keeps
// tensor::owned(), a copy, so the caller may still write into its array
// afterwards; while the step runs, the engine only reads it.
feed_dict feeds_of(const py_feeds& feeds) {
  feed_dict fd;
  for (auto& [x, arr] : feeds) {
    auto type = dtype_of_numpy(arr.dtype());
    if (type != dtype::string && arr.nbytes() >= min_borrowed_bytes
        && (arr.flags() & py::array::c_style) != 0
        && (arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0) {
      std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
      fd.emplace_back(x, tensor::borrow(type, tensor_shape(std::move(dims)),
                                        const_cast<void*>(arr.data()),
                                        hold(arr)));
    } else {
      fd.emplace_back(x, from_numpy(arr));
    }
  }
  return fd;
}

py::list numpy_list(const std::vector<tensor>& values) {
  py::list out;
  for (auto& t : values)
    out.append(to_numpy(t));
  return out;
}

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

py::object step_stats_of(const run_metadata& md) {
  if (!md.has_step_stats)
    return py::none();
  py::list devices;
  for (auto& d : md.stats.dev_stats) {
    py::list nodes;
    for (auto& n : d.node_stats)
      nodes.append(py::make_tuple(n.node_name, n.all_start_micros,
                                  n.op_start_rel_micros, n.op_end_rel_micros,
                                  n.all_end_rel_micros, n.timeline_label));
    devices.append(py::make_tuple(d.device, nodes));
  }
  return devices;
}

py::list partition_graphs_of(const run_metadata& md) {
  py::list graphs;
  for (auto& g : md.partition_graphs) {
    py::list nodes;
    for (auto& n : g.nodes)
      nodes.append(py::make_tuple(n.name, n.op, n.inputs, n.device));
    graphs.append(nodes);
  }
  return graphs;
}

} // namespace actorflow::python

namespace {

// Where Python runs its signal handlers: the thread that imports the
// module (the interpreter's main thread, in every program we know of).
std::thread::id main_thread;

} // namespace

actorflow::python::interrupts::interrupts() {
  if (std::this_thread::get_id() != main_thread)
    return;
  cancel_.poll = [this] {
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() == 0)
      return false;
    interrupted_.emplace(); // takes the exception a handler raised
    return true;
  };
}

PYBIND11_MODULE(_actorflow, m) {
  main_thread = std::this_thread::get_id();
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
    return open_scope<control_dependencies>(ops);
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
    .def_property_readonly("trainable", &variable::trainable)
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
        [](const std::string& type, const py::object& shape,
           const std::string& name) {
          return placeholder(parse_or_throw(type), shape_from(shape), name);
        },
        py::arg("dtype"), py::arg("shape") = py::none(),
        py::arg("name") = "Placeholder");
  m.def("placeholder_with_default",
        [](const output& input, const py::object& shape,
           const std::string& name) {
          // TF's shape None: any shape.
          return placeholder_with_default(input, shape_from(shape), name);
        },
        py::arg("input"), py::arg("shape") = py::none(),
        py::arg("name") = "PlaceholderWithDefault");
  m.def("dropout",
        py::overload_cast<const output&, const output&, int64_t,
                          const std::string&>(&dropout),
        py::arg("x"), py::arg("keep_prob"), py::arg("seed") = 0,
        py::arg("name") = "dropout");
  m.def("identity", &identity, py::arg("x"), py::arg("name") = "Identity");
  m.def("no_op", &no_op, py::arg("name") = "NoOp");
  m.def("group", &group, py::arg("ops"), py::arg("name") = "group_deps");
  m.def("assert_", &assert_, py::arg("condition"), py::arg("data"),
        py::arg("summarize") = 3, py::arg("name") = "Assert");
  m.def("with_dependencies", &with_dependencies, py::arg("dependencies"),
        py::arg("output"), py::arg("name") = "");
  using binary = output (*)(const output&, const output&, const std::string&);
  for (auto [py_name, fn, default_name] :
       {std::tuple{"add", binary{&add}, "add"},
        std::tuple{"subtract", binary{&sub}, "sub"},
        std::tuple{"multiply", binary{&mul}, "mul"},
        std::tuple{"maximum", binary{&maximum}, "Maximum"},
        std::tuple{"pow", binary{&actorflow::pow}, "Pow"},
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
        std::tuple{"floor", unary{&actorflow::floor}, "Floor"},
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
        std::tuple{"reduce_max", reduction{&reduce_max}, "Max"},
        std::tuple{"reduce_min", reduction{&reduce_min}, "Min"},
        std::tuple{"reduce_prod", reduction{&reduce_prod}, "Prod"},
        std::tuple{"reduce_any", reduction{&reduce_any}, "Any"},
        std::tuple{"reduce_all", reduction{&reduce_all}, "All"},
        std::tuple{"reduce_logsumexp", reduction{&reduce_logsumexp},
                   "ReduceLogSumExp"}})
    m.def(py_name, fn, py::arg("x"), py::arg("axes") = std::vector<int>{},
          py::arg("keep_dims") = false, py::arg("name") = default_name);
  m.def("reshape", &reshape, py::arg("x"), py::arg("shape"),
        py::arg("name") = "Reshape");
  m.def("cast",
        [](const output& x, const std::string& type, const std::string& name) {
          return cast(x, parse_or_throw(type), name);
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
  m.def("greater", &greater, py::arg("x"), py::arg("y"),
        py::arg("name") = "Greater");
  m.def("greater_equal", &greater_equal, py::arg("x"), py::arg("y"),
        py::arg("name") = "GreaterEqual");
  m.def("less", &less, py::arg("x"), py::arg("y"), py::arg("name") = "Less");
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
  m.def("slice", &slice, py::arg("x"), py::arg("begin"), py::arg("size"),
        py::arg("name") = "Slice");
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
                     bool replicate, int64_t timeout_ms, bool log_placement,
                     bool soft_placement, std::vector<std::string> filters) {
           server_options o;
           o.replicate_variables = replicate;
           o.default_session_config
             = config_from(timeout_ms, log_placement, soft_placement,
                           std::move(filters));
           py::gil_scoped_release unlocked;
           return std::make_unique<server>(c, job, task, o);
         }),
         py::arg("cluster"), py::arg("job_name"), py::arg("task_index"),
         py::arg("replicate_variables") = false,
         py::arg("operation_timeout_in_ms") = 0,
         py::arg("log_device_placement") = false,
         py::arg("allow_soft_placement") = false,
         py::arg("device_filters") = std::vector<std::string>{})
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
                     bool log_placement, bool soft_placement,
                     std::vector<std::string> filters) {
           auto c = config_from(timeout_ms, log_placement, soft_placement,
                                std::move(filters));
           py::gil_scoped_release unlocked;
           if (target.empty())
             return std::make_unique<session>(c, g);
           return std::make_unique<session>(target, c, g);
         }),
         py::arg("target"), py::arg("graph"),
         py::arg("operation_timeout_in_ms") = 0,
         py::arg("log_device_placement") = false,
         py::arg("allow_soft_placement") = false,
         py::arg("device_filters") = std::vector<std::string>{})
    // One step: fetches by name ("n:0" a value, "n" a target), feeds as
    // (output, array) pairs. The GIL is released while the step runs.
    .def("run", &run_step<session>,
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0,
         py::arg("trace_level") = 0, py::arg("partition_graphs") = false)
    .def("close", &session::close, py::call_guard<py::gil_scoped_release>())
    .def_static("reset",
                [](const std::string& target,
                   const std::vector<std::string>& containers) {
                  py::gil_scoped_release unlocked;
                  session::reset(target, containers);
                },
                py::arg("target"),
                py::arg("containers") = std::vector<std::string>{});

  // Training, queues, input pipelines, checkpoints, monitored sessions.
  bind_training(m);
}
