#pragma once

// What the extension's two translation units share (module.cpp: graphs,
// ops, sessions, servers and the conversions; training.cpp: training,
// queues, input pipelines, checkpoints, monitored sessions). Call with
// the GIL held.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/client/session.hpp"

namespace py = pybind11;

namespace actorflow::python {

/// A step's feeds as the package passes them: (output, array) pairs.
using py_feeds = std::vector<std::pair<output, py::array>>;

/// The feeds as tensors: a large numeric array's buffer borrowed (no
/// copy; the engine copies what it keeps past the step), others copied.
feed_dict feeds_of(const py_feeds& feeds);

/// Drops the references of borrowed feeds released where the GIL was not
/// held. Call now and then with the GIL (after each step).
void drop_released();

/// Fetched tensors as numpy arrays that view their buffers (None for a
/// target's).
py::list numpy_list(const std::vector<tensor>& values);

/// A traced step's stats (RunMetadata.step_stats) as the package reads
/// them: per device, (device, [(name, all_start_micros,
/// op_start_rel_micros, op_end_rel_micros, all_end_rel_micros,
/// timeline_label), ...]); None when the step was not traced.
py::object step_stats_of(const run_metadata& md);

/// run_metadata::partition_graphs as a list (one per partition) of lists
/// of (name, op, inputs, device).
py::list partition_graphs_of(const run_metadata& md);

/// The dtype TF spells `type` ("float32", "int64", ...); InvalidArgument
/// for an unknown one.
dtype parse_or_throw(const std::string& type);

/// A shape from Python: None for an unknown rank, None dims unknown.
tensor_shape shape_from(const py::object& shape);

/// Ctrl-C for a step run with the GIL released. On the interpreter's
/// main thread (the only one Python runs signal handlers on) its
/// cancellation looks for a signal every 100 ms; a KeyboardInterrupt
/// cancels the step (withdrawn on every task, the session still usable)
/// and `rethrow` raises it. Construct and rethrow with the GIL held.
class interrupts {
public:
  interrupts();
  interrupts(const interrupts&) = delete; // its poll holds `this`
  interrupts& operator=(const interrupts&) = delete;
  /// For session::run (and monitored_session::run): null elsewhere.
  step_cancellation* cancellation() {
    return cancel_.poll ? &cancel_ : nullptr;
  }
  /// Raises the KeyboardInterrupt a step was cancelled for, if any.
  void rethrow() {
    if (interrupted_)
      throw *interrupted_;
  }

private:
  step_cancellation cancel_;
  std::optional<py::error_already_set> interrupted_;
};

/// One step of `sess` (a session or a monitored session): fetches by name
/// ("n:0" a value, "n" a target), feeds as (output, array) pairs, with the
/// GIL released and Ctrl-C watched; returns (values, step stats or None,
/// partition graphs: partition_graphs_of). Call with the GIL held.
template <class Session>
py::tuple run_step(Session& sess, const std::vector<std::string>& names,
                   const py_feeds& feeds, int64_t timeout_ms,
                   int32_t trace_level, bool partition_graphs) {
  std::vector<fetch> fetches(names.begin(), names.end());
  auto fd = feeds_of(feeds);
  run_options o;
  o.timeout_in_ms = timeout_ms;
  o.trace_level = trace_level;
  o.output_partition_graphs = partition_graphs;
  std::vector<tensor> out;
  run_metadata md;
  interrupts ctrl_c;
  try {
    py::gil_scoped_release unlocked;
    out = sess.run(fetches, fd, o, &md, ctrl_c.cancellation());
  } catch (const op_error&) {
    drop_released();
    ctrl_c.rethrow();
    throw;
  }
  drop_released();
  return py::make_tuple(numpy_list(out), step_stats_of(md),
                        partition_graphs_of(md));
}

/// Binds training.cpp's part of the module.
void bind_training(py::module_& m);

} // namespace actorflow::python
