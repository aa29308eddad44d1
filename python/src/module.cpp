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
#include <string>
#include <vector>

#include "actorflow/client/cluster_spec.hpp"
#include "actorflow/client/server.hpp"
#include "actorflow/client/session.hpp"
#include "actorflow/graph/nn_ops.hpp"
#include "actorflow/graph/ops.hpp"

namespace py = pybind11;
using namespace actorflow;

namespace {

// -- tensors and numpy --------------------------------------------------------

// numpy's name of a dtype ("float32", ...), "object" for strings.
const char* numpy_name(dtype t) {
  switch (t) {
    case dtype::float32:
      return "float32";
    case dtype::float64:
      return "float64";
    case dtype::int32:
      return "int32";
    case dtype::uint8:
      return "uint8";
    case dtype::int64:
      return "int64";
    case dtype::bool_:
      return "bool";
    case dtype::string:
      return "object";
    default:
      throw op_error(error_code::unimplemented,
                     "dtype " + std::string{to_string(t)}
                       + " has no numpy counterpart here");
  }
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

// -- sessions -----------------------------------------------------------------

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
    .def(py::init([](const output& initial, const std::string& name,
                     bool trainable, std::vector<std::string> collections) {
           variable_options o;
           if (!name.empty())
             o.name = name;
           o.trainable = trainable;
           if (!collections.empty())
             o.collections = std::move(collections);
           return variable{initial, std::move(o)};
         }),
         py::arg("initial_value"), py::arg("name") = "",
         py::arg("trainable") = true,
         py::arg("collections") = std::vector<std::string>{})
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

  // Clusters and servers.
  py::class_<cluster_spec>(m, "ClusterSpec")
    .def(py::init([](const std::string& json) {
      return cluster_spec::from_json(json);
    }))
    .def("to_json", &cluster_spec::to_json)
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
            const std::vector<std::pair<output, py::array>>& feeds,
            int64_t timeout_ms) {
           std::vector<fetch> fetches(names.begin(), names.end());
           feed_dict fd;
           for (auto& [x, arr] : feeds)
             fd.emplace_back(x, from_numpy(arr));
           run_options o;
           o.timeout_in_ms = timeout_ms;
           std::vector<tensor> out;
           {
             py::gil_scoped_release unlocked;
             out = s.run(fetches, fd, o);
           }
           py::list values;
           for (auto& t : out)
             values.append(to_numpy(t));
           return values;
         },
         py::arg("fetches"), py::arg("feeds"), py::arg("timeout_in_ms") = 0)
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
