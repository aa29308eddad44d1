"""actorflow for Python, spelled as TensorFlow 1.x: `import actorflow as tf`.

Graphs, sessions, devices, variables and clusters run on actorflow's
engine (the C++ extension `actorflow._actorflow`); this package gives it
TensorFlow's names and Python's habits: numpy in and out, `with` for
scopes, fetch structures in `Session.run`, tf.errors' exception classes.
"""

import collections.abc
import json
import threading

import numpy as np

from . import _actorflow as _C
from . import errors

__all__ = [
    "Graph", "Operation", "Session", "Tensor", "Variable", "add",
    "as_dtype", "cast", "constant", "container", "control_dependencies",
    "device", "divide", "errors", "exp", "floor", "get_default_graph",
    "global_variables", "global_variables_initializer", "group",
    "identity", "local_variables", "local_variables_initializer", "log",
    "matmul", "maximum", "minimum", "multiply", "name_scope", "negative",
    "no_op", "placeholder", "placeholder_with_default", "pow", "reduce_all", "reduce_any", "reduce_logsumexp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
    "relu", "reset_default_graph", "reshape", "sigmoid", "sqrt", "square",
    "subtract", "tanh", "train", "trainable_variables",
    "variables_initializer",
]

# -- dtypes ---------------------------------------------------------------------


class DType:
    """tf.DType: a name ("float32") and its numpy type."""

    def __init__(self, name, np_type):
        self.name = name
        self.as_numpy_dtype = np_type

    def __eq__(self, other):
        try:
            return self.name == as_dtype(other).name
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "tf." + self.name


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
double = float64
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
float16 = DType("float16", np.float16)
half = float16
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
uint16 = DType("uint16", np.uint16)
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)
bool = DType("bool", np.bool_)  # noqa: A001 (TF's name)
string = DType("string", np.object_)
_DTYPES = {d.name: d for d in (float16, float32, float64, int8, int16, int32,
                               int64, uint8, uint16, complex64, complex128,
                               bool, string)}
_DTYPES["float"] = float32
_DTYPES["double"] = float64
_DTYPES["half"] = float16


def as_dtype(value):
    """tf.as_dtype: a DType from a DType, a name or a numpy type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _DTYPES:
        return _DTYPES[value]
    try:
        kind = np.dtype(value)
    except TypeError:
        raise TypeError("Cannot convert %r to a dtype" % (value,)) from None
    if kind.kind in "OSU":
        return string
    if kind.name in _DTYPES:
        return _DTYPES[kind.name]
    raise TypeError("Cannot convert %r to a dtype: actorflow has float16, "
                    "float32, float64, int8, int16, int32, int64, uint8, "
                    "uint16, complex64, complex128, bool and string"
                    % (value,))


# -- graphs, operations, tensors -------------------------------------------------

_graphs = {}  # _C.Graph -> Graph; graphs live as long as the process
_local = threading.local()


class Graph:
    """tf.Graph: a graph under construction. `as_default()` makes it the
    thread's default graph inside a `with`."""

    def __init__(self, _native=None):
        self._g = _native if _native is not None else _C.Graph()
        _graphs[self._g] = self

    def as_default(self):
        return _Scope(lambda: self._g.as_default(), self)

    def get_operation_by_name(self, name):
        return Operation(self._g.find_operation(name))

    def get_tensor_by_name(self, name):
        return Tensor(self._g.tensor_by_name(name))

    def as_graph_element(self, obj):
        if isinstance(obj, (Tensor, Operation)):
            return obj
        if isinstance(obj, Variable):
            return obj.value()
        if isinstance(obj, str):
            if ":" in obj:
                return self.get_tensor_by_name(obj)
            return self.get_operation_by_name(obj)
        raise TypeError("Can not convert a %s into a Tensor or Operation."
                        % type(obj).__name__)

    @property
    def seed(self):
        return self._g.seed()

    @seed.setter
    def seed(self, value):
        self._g.set_seed(int(value))

    def get_collection(self, key):
        return list(self._g.collection(key))


def _wrap_graph(native):
    g = _graphs.get(native)
    if g is None:
        g = Graph(native)
    return g


def get_default_graph():
    """tf.get_default_graph(): the thread's default graph."""
    return _wrap_graph(_C.default_graph())


def reset_default_graph():
    """tf.reset_default_graph(): a new, empty default graph."""
    _C.reset_default_graph()


class Operation:
    """tf.Operation: a node of a graph."""

    def __init__(self, native):
        self._op = native

    name = property(lambda self: self._op.name)
    type = property(lambda self: self._op.type)
    device = property(lambda self: self._op.device)
    graph = property(lambda self: _wrap_graph(self._op.graph))
    inputs = property(lambda self: [Tensor(x) for x in self._op.inputs])
    outputs = property(lambda self: [Tensor(self._op.out(i))
                                     for i in range(self._op.num_outputs)])
    control_inputs = property(
        lambda self: [self.graph.get_operation_by_name(n)
                      for n in self._op.control_inputs])

    def run(self, feed_dict=None, session=None):
        (session or _default_session()).run(self, feed_dict)

    def __eq__(self, other):
        return isinstance(other, Operation) and self._op == other._op

    def __hash__(self):
        return hash(self._op)

    def __repr__(self):
        return "<tf.Operation '%s' type=%s>" % (self.name, self.type)


class _Operators:
    """Python's operators on graph values (a Variable's read its value, as
    TF's Variable does)."""

    def __add__(self, y):
        return add(self, y)

    def __radd__(self, x):
        return add(x, self)

    def __sub__(self, y):
        return subtract(self, y)

    def __rsub__(self, x):
        return subtract(x, self)

    def __mul__(self, y):
        return multiply(self, y)

    def __rmul__(self, x):
        return multiply(x, self)

    def __truediv__(self, y):
        return divide(self, y)

    def __rtruediv__(self, x):
        return divide(x, self)

    def __neg__(self):
        return negative(self)

    def __gt__(self, y):
        return greater(self, y)

    def __ge__(self, y):
        return greater_equal(self, y)

    def __lt__(self, y):
        return less(self, y)

    def __matmul__(self, y):
        return matmul(self, y)

    def __rmatmul__(self, x):
        return matmul(x, self)


class Tensor(_Operators):
    """tf.Tensor: one output of an operation."""

    def __init__(self, native):
        self._out = native

    name = property(lambda self: self._out.name)
    op = property(lambda self: Operation(self._out.op))
    value_index = property(lambda self: self._out.index)
    device = property(lambda self: self._out.device)
    graph = property(lambda self: _wrap_graph(self._out.graph))
    dtype = property(lambda self: as_dtype(self._out.dtype))

    @property
    def shape(self):
        return TensorShape(self._out.shape)

    def get_shape(self):
        return self.shape

    def eval(self, feed_dict=None, session=None):
        return (session or _default_session()).run(self, feed_dict)

    def __eq__(self, other):
        return isinstance(other, Tensor) and self._out == other._out

    def __hash__(self):
        return hash(self._out)

    def __repr__(self):
        return "<tf.Tensor '%s' shape=%s dtype=%s>" % (
            self.name, self.shape, self.dtype.name)


class TensorShape:
    """tf.TensorShape: dimensions, None where unknown."""

    def __init__(self, dims):
        self.dims = None if dims is None else list(dims)

    @property
    def ndims(self):
        return None if self.dims is None else len(self.dims)

    def as_list(self):
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown "
                             "TensorShape.")
        return list(self.dims)

    def is_compatible_with(self, other):
        other = other if isinstance(other, TensorShape) else TensorShape(other)
        if self.dims is None or other.dims is None:
            return True
        return len(self.dims) == len(other.dims) and all(
            a is None or b is None or a == b
            for a, b in zip(self.dims, other.dims))

    def __eq__(self, other):
        other = other if isinstance(other, TensorShape) else TensorShape(other)
        return self.dims == other.dims

    def __repr__(self):
        if self.dims is None:
            return "<unknown>"
        return "(" + ", ".join("?" if d is None else str(d)
                               for d in self.dims) + (
                                   ",)" if len(self.dims) == 1 else ")")


def _numpy_value(value, dtype=None):
    """A C-contiguous numpy array of `value` in an actorflow dtype."""
    if dtype is not None:
        dtype = as_dtype(dtype)
        if dtype == string:
            return np.array(value, dtype=object)
        return np.asarray(value, dtype=dtype.as_numpy_dtype, order="C")
    arr = np.asarray(value)
    if arr.dtype.kind in "SU":
        return arr.astype(object)
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        # Python floats are float32 constants in TF.
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
        # Python ints are int32 constants in TF (int64 when too large).
        if arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31):
            arr = arr.astype(np.int32)
    # order="C", not ascontiguousarray, which makes a scalar 1-D.
    return np.asarray(arr, order="C")


def constant(value, dtype=None, shape=None, name="Const"):
    """tf.constant: a Const node holding `value` (numpy, a scalar, nested
    lists), reshaped to `shape` (a scalar fills it)."""
    arr = _numpy_value(value, dtype)
    if shape is not None:
        shape = list(shape)
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()).item(), dtype=arr.dtype)
        else:
            arr = np.asarray(arr.reshape(shape), order="C")
    return Tensor(_C.constant(arr, name))


def convert_to_tensor(value, dtype=None, name=None):
    """tf.convert_to_tensor: a Tensor as is, a Variable's value, anything
    else as a constant."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != as_dtype(dtype):
            raise ValueError(
                "Tensor conversion requested dtype %s for Tensor with dtype "
                "%s: %r" % (as_dtype(dtype).name, value.dtype.name, value))
        return value
    if isinstance(value, Variable):
        return value.value()
    return constant(value, dtype=dtype, name=name or "Const")


def _pair(x, y):
    """Two operands, a Python value taking the other's dtype (as TF)."""
    if isinstance(x, (Tensor, Variable)):
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=None if isinstance(y, (Tensor, Variable))
                              else x.dtype)
        return x, convert_to_tensor(y)
    y = convert_to_tensor(y)
    return convert_to_tensor(x, dtype=y.dtype), y


def _binary(fn, default):
    def op(x, y, name=None):
        x, y = _pair(x, y)
        return Tensor(fn(x._out, y._out, name or default))
    return op


add = _binary(_C.add, "add")
subtract = _binary(_C.subtract, "sub")
multiply = _binary(_C.multiply, "mul")
divide = _binary(_C.divide, "truediv")
maximum = _binary(_C.maximum, "Maximum")
pow = _binary(_C.pow, "Pow")  # noqa: A001 (TF's name)
minimum = _binary(_C.minimum, "Minimum")
truediv = divide


def _unary(fn, default):
    def op(x, name=None):
        return Tensor(fn(convert_to_tensor(x)._out, name or default))
    return op


negative = _unary(_C.negative, "Neg")
square = _unary(_C.square, "Square")
exp = _unary(_C.exp, "Exp")
log = _unary(_C.log, "Log")
sqrt = _unary(_C.sqrt, "Sqrt")
floor = _unary(_C.floor, "Floor")
tanh = _unary(_C.tanh, "Tanh")
sigmoid = _unary(_C.sigmoid, "Sigmoid")


def identity(x, name=None):
    return Tensor(_C.identity(convert_to_tensor(x)._out, name or "Identity"))


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    return Tensor(_C.matmul(a._out, b._out, transpose_a, transpose_b,
                            name or "MatMul"))


def _reduction(fn, default):
    def op(input_tensor, axis=None, keepdims=False, name=None,
           reduction_indices=None, keep_dims=None):
        if axis is None:
            axis = reduction_indices
        if axis is None:
            axes = []
        elif isinstance(axis, int):
            axes = [axis]
        else:
            axes = [int(a) for a in axis]
        keep = keepdims if keep_dims is None else keep_dims
        x = convert_to_tensor(input_tensor)
        if default in ("Any", "All") and x.dtype != bool:
            # As TF's op_def_library: a dtype the op does not take.
            raise TypeError("Value passed to parameter 'input' has DataType "
                            "%s not in list of allowed values: bool"
                            % x.dtype.name)
        return Tensor(fn(x._out, axes, builtins_bool(keep), name or default))
    return op


builtins_bool = type(True)
reduce_sum = _reduction(_C.reduce_sum, "Sum")
reduce_mean = _reduction(_C.reduce_mean, "Mean")
reduce_max = _reduction(_C.reduce_max, "Max")
reduce_min = _reduction(_C.reduce_min, "Min")
reduce_prod = _reduction(_C.reduce_prod, "Prod")
reduce_any = _reduction(_C.reduce_any, "Any")
reduce_all = _reduction(_C.reduce_all, "All")
reduce_logsumexp = _reduction(_C.reduce_logsumexp, "ReduceLogSumExp")


def reshape(tensor, shape, name=None):
    return Tensor(_C.reshape(convert_to_tensor(tensor)._out,
                             [int(d) for d in shape], name or "Reshape"))


def cast(x, dtype, name=None):
    return Tensor(_C.cast(convert_to_tensor(x)._out, as_dtype(dtype).name,
                          name or "Cast"))


def _labels_logits(fn, default):
    def op(_sentinel=None, labels=None, logits=None, name=None):
        if _sentinel is not None:
            raise ValueError("Only call `%s` with named arguments "
                             "(labels=..., logits=..., ...)" % default)
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        return Tensor(fn(labels._out, logits._out, name or default))
    return op


class nn:  # noqa: N801 (TF's module name)
    relu = staticmethod(_unary(_C.relu, "Relu"))
    sigmoid = staticmethod(sigmoid)
    tanh = staticmethod(tanh)
    softmax = staticmethod(_unary(_C.softmax, "Softmax"))
    log_softmax = staticmethod(_unary(_C.log_softmax, "LogSoftmax"))
    l2_loss = staticmethod(_unary(_C.l2_loss, "L2Loss"))
    softmax_cross_entropy_with_logits = staticmethod(_labels_logits(
        _C.softmax_cross_entropy_with_logits,
        "softmax_cross_entropy_with_logits"))
    sparse_softmax_cross_entropy_with_logits = staticmethod(_labels_logits(
        _C.sparse_softmax_cross_entropy_with_logits,
        "sparse_softmax_cross_entropy_with_logits"))
    sigmoid_cross_entropy_with_logits = staticmethod(_labels_logits(
        _C.sigmoid_cross_entropy_with_logits,
        "sigmoid_cross_entropy_with_logits"))

    @staticmethod
    def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None,
                rate=None):
        """tf.nn.dropout: each element kept with probability keep_prob
        (or 1 - rate) and scaled by 1 / keep_prob, zeroed otherwise."""
        if noise_shape is not None:
            raise NotImplementedError(
                "dropout: noise_shape is not supported; the mask has x's "
                "shape")
        if (keep_prob is None) == (rate is None):
            raise ValueError("dropout: give exactly one of keep_prob and rate")
        x = convert_to_tensor(x)
        if keep_prob is None:
            if isinstance(rate, (Tensor, Variable)):
                keep_prob = subtract(1.0, rate)
            else:
                keep_prob = 1.0 - float(rate)
        if not isinstance(keep_prob, (Tensor, Variable)):
            keep_prob = float(keep_prob)
            if not 0 < keep_prob <= 1:
                raise ValueError(
                    "keep_prob must be a scalar tensor or a float in the "
                    "range (0, 1], got %g" % keep_prob)
            if keep_prob == 1:
                return x
        keep_prob = convert_to_tensor(keep_prob, dtype=x.dtype)
        return Tensor(_C.dropout(x._out, keep_prob._out, int(seed or 0),
                                 name or "dropout"))

    @staticmethod
    def bias_add(value, bias, name=None):
        return Tensor(_C.bias_add(convert_to_tensor(value)._out,
                                  convert_to_tensor(bias)._out,
                                  name or "BiasAdd"))


relu = nn.relu


def argmax(input, axis=None, name=None, dimension=None):  # noqa: A002
    axis = dimension if axis is None else axis
    return Tensor(_C.argmax(convert_to_tensor(input)._out,
                            0 if axis is None else int(axis),
                            name or "ArgMax"))


def equal(x, y, name=None):
    x, y = _pair(x, y)
    return Tensor(_C.equal(x._out, y._out, name or "Equal"))


greater = _binary(_C.greater, "Greater")
greater_equal = _binary(_C.greater_equal, "GreaterEqual")
less = _binary(_C.less, "Less")


def zeros_like(tensor, name=None):
    return Tensor(_C.zeros_like(convert_to_tensor(tensor)._out,
                                name or "zeros_like"))


def ones_like(tensor, name=None):
    return Tensor(_C.ones_like(convert_to_tensor(tensor)._out,
                               name or "ones_like"))


def add_n(inputs, name=None):
    return Tensor(_C.add_n([convert_to_tensor(x)._out for x in inputs],
                           name or "AddN"))


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """tf.split into equal parts; also TF 0.x's split(split_dim,
    num_split, value), as old programs call it."""
    if isinstance(value, int) and not isinstance(num_or_size_splits, Tensor) \
            and isinstance(axis, (Tensor, Variable, list, np.ndarray)):
        # split(split_dim, num_split, value)
        value, num_or_size_splits, axis = axis, num_or_size_splits, value
    value = convert_to_tensor(value)
    if isinstance(num_or_size_splits, int):
        return [Tensor(o) for o in _C.split(value._out, num_or_size_splits,
                                            int(axis), name)]
    # Sizes (SplitV): one slice each, along `axis` of a known rank; one
    # size may be -1, the rest of the dimension.
    sizes = [int(s) for s in num_or_size_splits]
    dims = value.shape.dims
    if dims is None:
        raise ValueError("tf.split with sizes needs a value of known rank")
    axis = int(axis) + (len(dims) if int(axis) < 0 else 0)
    if not 0 <= axis < len(dims):
        raise errors.InvalidArgumentError(
            None, None, "split: axis %d out of range for rank %d"
            % (axis, len(dims)))
    if sizes.count(-1) > 1:
        raise errors.InvalidArgumentError(
            None, None, "split: at most one size may be -1, got %s" % sizes)
    if -1 in sizes and dims[axis] is not None:
        sizes[sizes.index(-1)] = dims[axis] - sum(s for s in sizes if s != -1)
    if dims[axis] is not None and sum(sizes) != dims[axis]:
        raise errors.InvalidArgumentError(
            None, None, "Determined shape must either match input shape "
            "along split_dim exactly if fully specified, or be less than the "
            "size of the input along split_dim if not fully specified.  "
            "Got: %d" % sum(sizes))
    out = []
    begin = 0
    with name_scope(name):
        for i, size in enumerate(sizes):
            starts = [0] * len(dims)
            starts[axis] = begin
            extents = [-1] * len(dims)
            extents[axis] = size
            out.append(Tensor(_C.slice(value._out, starts, extents,
                                       "split_%d" % i)))
            begin += size
    return out


def slice(input_, begin, size, name=None):  # noqa: A001
    """tf.slice: `size` -1 takes the rest of a dimension."""
    return Tensor(_C.slice(convert_to_tensor(input_)._out,
                           [int(b) for b in begin], [int(s) for s in size],
                           name or "Slice"))


def concat(values, axis, name="concat"):
    return Tensor(_C.concat([convert_to_tensor(v)._out for v in values],
                            int(axis), name))


def stack(values, axis=0, name="stack"):
    return Tensor(_C.stack([convert_to_tensor(v)._out for v in values],
                           int(axis), name))


pack = stack  # TF 0.x's name


def Print(input_, data, message=None, first_n=None, summarize=None,  # noqa: N802
          name=None):
    """tf.Print: `input_` unchanged; logs `message` and `data` (to stderr)
    each time it runs."""
    return Tensor(_C.print(convert_to_tensor(input_)._out,
                           [convert_to_tensor(d)._out for d in data],
                           message or "", -1 if first_n is None else first_n,
                           3 if summarize is None else summarize,
                           name or "Print"))


class truncated_normal_initializer:  # noqa: N801 (TF's name)
    """tf.truncated_normal_initializer: called with a shape, a
    truncated_normal tensor."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=float32):
        self.mean, self.stddev, self.seed, self.dtype = mean, stddev, seed, dtype

    def __call__(self, shape, dtype=None):
        return truncated_normal(shape, self.mean, self.stddev,
                                dtype or self.dtype, self.seed)


def transpose(a, perm=None, name=None):
    return Tensor(_C.transpose(convert_to_tensor(a)._out,
                               [int(p) for p in (perm or [])],
                               name or "transpose"))


def expand_dims(input, axis, name=None):  # noqa: A002
    return Tensor(_C.expand_dims(convert_to_tensor(input)._out, int(axis),
                                 name or "ExpandDims"))


def zeros(shape, dtype=float32, name=None):
    return Tensor(_C.zeros([int(d) for d in shape], as_dtype(dtype).name,
                           name or "zeros"))


def ones(shape, dtype=float32, name=None):
    return Tensor(_C.ones([int(d) for d in shape], as_dtype(dtype).name,
                          name or "ones"))


def _random(fn, default):
    def op(shape, a, b, dtype, seed, name):
        return Tensor(fn([int(d) for d in shape], float(a), float(b),
                         as_dtype(dtype).name, int(seed or 0),
                         name or default))
    return op


_normal = _random(_C.random_normal, "random_normal")
_truncated = _random(_C.truncated_normal, "truncated_normal")
_uniform = _random(_C.random_uniform, "random_uniform")


def random_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None,
                  name=None):
    return _normal(shape, mean, stddev, dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None,
                     name=None):
    return _truncated(shape, mean, stddev, dtype, seed, name)


def random_uniform(shape, minval=0, maxval=None, dtype=float32, seed=None,
                   name=None):
    return _uniform(shape, minval, 1.0 if maxval is None else maxval, dtype,
                    seed, name)


def gradients(ys, xs, grad_ys=None, name="gradients"):
    """tf.gradients: d(sum of ys)/d(x) for each x (None where no path)."""
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    single = not isinstance(xs, (list, tuple))
    xs = [xs] if single else list(xs)
    outs = _C.gradients([convert_to_tensor(y)._out for y in ys],
                        [convert_to_tensor(x)._out for x in xs],
                        [convert_to_tensor(g)._out for g in (grad_ys or [])],
                        name)
    return [Tensor(g) if g is not None else None for g in outs]


# -- queues --------------------------------------------------------------------------


class QueueBase:
    """A queue of the graph (tf.QueueBase): its ops take and give lists of
    components."""

    def __init__(self, native, dtypes, shapes=None):
        self._q = native
        self.dtypes = dtypes
        # TF's queue.shapes: unknown shapes when none were given.
        self.shapes = [TensorShape(s) for s in shapes] if shapes \
            else [TensorShape(None) for _ in dtypes]

    name = property(lambda self: self._q.name)
    queue_ref = property(lambda self: Tensor(self._q.op.out(0)))

    def _values(self, vals):
        if not isinstance(vals, (list, tuple)):
            vals = [vals]
        return [convert_to_tensor(v, dtype=d)._out
                for v, d in zip(vals, self.dtypes)]

    @staticmethod
    def _single(outs):
        outs = [Tensor(o) for o in outs]
        return outs[0] if len(outs) == 1 else outs

    def enqueue(self, vals, name=None):
        return Operation(self._q.enqueue(self._values(vals), name or ""))

    def enqueue_many(self, vals, name=None):
        return Operation(self._q.enqueue_many(self._values(vals), name or ""))

    def dequeue(self, name=None):
        return self._single(self._q.dequeue(name or ""))

    def dequeue_many(self, n, name=None):
        return self._single(self._q.dequeue_many(int(n), name or ""))

    def dequeue_up_to(self, n, name=None):
        return self._single(self._q.dequeue_up_to(int(n), name or ""))

    def close(self, cancel_pending_enqueues=False, name=None):
        return Operation(self._q.close(cancel_pending_enqueues, name or ""))

    def size(self, name=None):
        return Tensor(self._q.size(name or ""))

    def is_closed(self, name=None):
        return Tensor(self._q.is_closed(name or ""))


class FIFOQueue(QueueBase):
    """tf.FIFOQueue(capacity, dtypes, shapes=None, shared_name=None)."""

    def __init__(self, capacity, dtypes, shapes=None, names=None,
                 shared_name=None, name="fifo_queue"):
        dtypes, shapes = _queue_args(dtypes, shapes)
        QueueBase.__init__(self, _C.fifo_queue(
            int(capacity), [d.name for d in dtypes], shapes,
            shared_name or "", name), dtypes, shapes)


def _dims(shape):
    """A shape as a list of dims (None where unknown), or None for an
    unknown rank; an int is a 1-D shape, as TF's TensorShape(2) is [2]."""
    if shape is None:
        return None
    if isinstance(shape, TensorShape):
        return shape.dims
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [None if d is None or d == -1 else int(d) for d in shape]


def placeholder(dtype, shape=None, name=None):
    """tf.placeholder: a value fed at run time."""
    return Tensor(_C.placeholder(as_dtype(dtype).name, _dims(shape),
                                 name or "Placeholder"))


def placeholder_with_default(input, shape, name=None):  # noqa: A002
    """tf.placeholder_with_default: `input` unless a value is fed."""
    return Tensor(_C.placeholder_with_default(
        convert_to_tensor(input)._out, _dims(shape),
        name or "PlaceholderWithDefault"))


def no_op(name=None):
    return Operation(_C.no_op(name or "NoOp"))


def _as_operation(x):
    if isinstance(x, Operation):
        return x._op
    if isinstance(x, Tensor):
        return x._out.op
    if isinstance(x, Variable):
        return x._v.op
    raise TypeError("Can not convert a %s into an Operation."
                    % type(x).__name__)


def group(*inputs, name=None):
    """tf.group: an op that runs every input; one NoOp per device of the
    inputs under a root `name` when their devices differ, as TF."""
    return Operation(_C.group([_as_operation(x) for x in inputs],
                              name or "group_deps"))


def Assert(condition, data, summarize=None, name=None):  # noqa: N802
    """tf.Assert: an op that fails its step with InvalidArgumentError
    "assertion failed: [d0] [d1]" when the bool scalar `condition` is
    false (run it, or make it a control dependency)."""
    return Operation(_C.assert_(convert_to_tensor(condition)._out,
                                [convert_to_tensor(d)._out for d in data],
                                3 if summarize is None else int(summarize),
                                name or "Assert"))


def with_dependencies(dependencies, output_tensor, name=None):
    """control_flow_ops.with_dependencies: `output_tensor` through an
    Identity colocated with it that runs after `dependencies`."""
    return Tensor(_C.with_dependencies(
        [_as_operation(d) for d in dependencies],
        convert_to_tensor(output_tensor)._out, name or ""))


class _ControlFlowOps:
    """The tensorflow.python.ops.control_flow_ops names programs import."""

    group = staticmethod(group)
    with_dependencies = staticmethod(with_dependencies)
    Assert = staticmethod(Assert)


control_flow_ops = _ControlFlowOps()


def _queue_args(dtypes, shapes):
    single = not isinstance(dtypes, (list, tuple))
    dtypes = [as_dtype(d) for d in ([dtypes] if single else dtypes)]
    # As TF's _as_shape_list: a list of ints (or None), [] included, is
    # one shape; otherwise a list of shapes.
    if shapes is None:
        shapes = []
    elif isinstance(shapes, TensorShape) or not isinstance(
            shapes, (list, tuple)) or all(
            d is None or isinstance(d, (int, np.integer)) for d in shapes):
        shapes = [shapes]
    return dtypes, [_dims(s) for s in shapes]


class PaddingFIFOQueue(QueueBase):
    """tf.PaddingFIFOQueue: shapes may have None dimensions; dequeue_many
    pads each batch with zeros to its largest element."""

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        dtypes, shapes = _queue_args(dtypes, shapes)
        QueueBase.__init__(self, _C.padding_fifo_queue(
            int(capacity), [d.name for d in dtypes], shapes,
            shared_name or "", name), dtypes, shapes)


class RandomShuffleQueue(QueueBase):
    """tf.RandomShuffleQueue: dequeues in random order, keeping at least
    `min_after_dequeue` elements until it is closed."""

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None,
                 names=None, seed=None, shared_name=None,
                 name="random_shuffle_queue"):
        dtypes, shapes = _queue_args(dtypes, shapes)
        QueueBase.__init__(self, _C.random_shuffle_queue(
            int(capacity), int(min_after_dequeue), [d.name for d in dtypes],
            shapes, int(seed or 0), shared_name or "", name), dtypes, shapes)


# -- readers -------------------------------------------------------------------------


class ReaderBase:
    """A reader (tf.ReaderBase): `read(queue)` gives (key, value) of the
    next record of the files the queue names."""

    def __init__(self, native):
        self._r = native

    def read(self, queue, name=None):
        key, value = self._r.read(queue._q, name or "")
        return Tensor(key), Tensor(value)

    def read_up_to(self, queue, num_records, name=None):
        key, value = self._r.read_up_to(queue._q, int(num_records),
                                        name or "")
        return Tensor(key), Tensor(value)

    def num_records_produced(self, name=None):
        return Tensor(self._r.num_records_produced(name or ""))

    def reset(self, name=None):
        return Operation(self._r.reset(name or ""))


class TextLineReader(ReaderBase):
    def __init__(self, skip_header_lines=None, name=None):
        ReaderBase.__init__(self, _C.text_line_reader(
            int(skip_header_lines or 0), name or "TextLineReaderV2"))


class WholeFileReader(ReaderBase):
    def __init__(self, name=None):
        ReaderBase.__init__(self, _C.whole_file_reader(
            name or "WholeFileReaderV2"))


class FixedLengthRecordReader(ReaderBase):
    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None,
                 hop_bytes=None, name=None):
        ReaderBase.__init__(self, _C.fixed_length_record_reader(
            int(record_bytes), int(header_bytes or 0), int(footer_bytes or 0),
            int(hop_bytes or 0), name or "FixedLengthRecordReaderV2"))


# -- variables -----------------------------------------------------------------


class Variable(_Operators):
    """tf.Variable: state kept by the task its device names."""

    def __init__(self, initial_value=None, trainable=True, collections=None,
                 validate_shape=True, name=None, dtype=None, _native=None):
        if _native is not None:
            self._v = _native
            return
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if callable(initial_value):
            initial_value = initial_value()
        init = convert_to_tensor(initial_value, dtype=dtype)
        self._v = _C.Variable(
            init._out, name or "", trainable,
            None if collections is None else list(collections),
            builtins_bool(validate_shape))

    trainable = property(lambda self: self._v.trainable)

    name = property(lambda self: self._v.name)
    op = property(lambda self: Operation(self._v.op))
    initializer = property(lambda self: Operation(self._v.initializer))
    initial_value = property(lambda self: Tensor(self._v.initial_value))
    dtype = property(lambda self: self.value().dtype)
    shape = property(lambda self: self.value().shape)
    device = property(lambda self: self._v.op.device)
    graph = property(lambda self: self.op.graph)

    def value(self):
        return Tensor(self._v.value())

    def read_value(self):
        """A new read ("read", "read_1", ...) of the variable in the
        current context: inside `tf.control_dependencies` it runs after
        them, which the shared snapshot `value()` does not (TF's
        RefVariable.read_value)."""
        return Tensor(_C.identity(self._v.ref(), "read"))

    def initialized_value(self):
        return Tensor(self._v.initialized_value())

    def get_shape(self):
        return self.shape

    def _number(self, value, name):
        # A Python number without a name: the engine names its constant
        # under the op ("AssignAdd/value"), as TF does.
        return (name is None and isinstance(value, (int, float))
                and not isinstance(value, type(True))
                and self.dtype in (float32, float64))

    def assign(self, value, use_locking=False, name=None):
        if self._number(value, name):
            return Tensor(self._v.assign_value(float(value)))
        return Tensor(self._v.assign(convert_to_tensor(value, self.dtype)._out,
                                     True, name or ""))

    def assign_add(self, delta, use_locking=False, name=None):
        if self._number(delta, name):
            return Tensor(self._v.assign_add_value(float(delta)))
        return Tensor(self._v.assign_add(
            convert_to_tensor(delta, self.dtype)._out, name or ""))

    def assign_sub(self, delta, use_locking=False, name=None):
        if self._number(delta, name):
            return Tensor(self._v.assign_sub_value(float(delta)))
        return Tensor(self._v.assign_sub(
            convert_to_tensor(delta, self.dtype)._out, name or ""))

    def count_up_to(self, limit):
        return Tensor(self._v.count_up_to(int(limit)))

    def eval(self, session=None):
        return self.value().eval(session=session)

    def __repr__(self):
        return "<tf.Variable '%s' shape=%s dtype=%s>" % (
            self.name, self.shape, self.dtype.name)


def global_variables():
    return [Variable(_native=v) for v in _C.global_variables()]


def trainable_variables():
    return [Variable(_native=v) for v in _C.trainable_variables()]


def local_variables():
    return [Variable(_native=v) for v in _C.local_variables()]


def global_variables_initializer():
    return Operation(_C.global_variables_initializer())


def local_variables_initializer():
    return Operation(_C.local_variables_initializer("init_1"))


def variables_initializer(var_list, name="init"):
    return Operation(_C.variables_initializer([v._v for v in var_list], name))


initialize_all_variables = global_variables_initializer


# -- scopes ------------------------------------------------------------------------


class _Scope:
    """A C++ scope guard opened by `with` and closed when it ends."""

    def __init__(self, opener, value=None):
        self._opener = opener
        self._value = value
        self._scope = None

    def __enter__(self):
        opened = self._opener()
        if isinstance(opened, tuple):
            self._scope, self._value = opened
        else:
            self._scope = opened
        return self._value

    def __exit__(self, *exc):
        self._scope.close()
        return False


def device(device_name_or_function):
    """`with tf.device("/job:ps/task:0"):` (None clears the device; a
    tf.train.replica_device_setter places each op by its type)."""
    spec = device_name_or_function
    if spec is None:
        return _Scope(_C.clear_device_scope)
    if isinstance(spec, _C.DeviceFunction):
        return _Scope(lambda: _C.device_function_scope(spec))
    if callable(spec):
        def device_of(node):
            device = spec(_NodeView(node))
            return "" if device is None else str(device)
        return _Scope(lambda: _C.device_callable_scope(device_of))
    return _Scope(lambda: _C.device_scope(str(spec)))


class _NodeView:
    """What a device function sees of the op being made (as TF's
    Operation: name, type, device, node_def)."""

    def __init__(self, node):
        self.node_def = node
        self.name = node.name
        self.type = node.op
        self.device = node.device


def name_scope(name, default_name=None, values=None):
    """`with tf.name_scope("layer") as scope:` (scope is "layer/")."""
    return _Scope(lambda: _C.name_scope(name or default_name or ""))


def container(container_name):
    """`with tf.container("c"):` stateful ops get container "c"."""
    return _Scope(lambda: _C.container_scope(container_name))


def control_dependencies(control_inputs):
    """`with tf.control_dependencies([...]):` (None clears them)."""
    if control_inputs is None:
        return _Scope(_C.clear_control_dependencies)
    ops = [_as_operation(x) for x in control_inputs]
    return _Scope(lambda: _C.control_dependencies(ops))


def colocate_with(op, ignore_existing=False):
    return _Scope(lambda: _C.colocate_with(_as_operation(op)))


# -- sessions ------------------------------------------------------------------------


class ConfigProto:
    """tf.ConfigProto's fields the engine has."""

    def __init__(self, operation_timeout_in_ms=0, log_device_placement=False,
                 allow_soft_placement=False, device_filters=(), **unused):
        self.operation_timeout_in_ms = operation_timeout_in_ms
        self.log_device_placement = log_device_placement
        self.allow_soft_placement = allow_soft_placement
        self.device_filters = list(device_filters)

    def _native(self):
        return (int(self.operation_timeout_in_ms),
                builtins_bool(self.log_device_placement),
                builtins_bool(self.allow_soft_placement),
                [str(f) for f in self.device_filters])


class RunOptions:
    """tf.RunOptions: `timeout_in_ms` bounds the step, `trace_level` and
    `output_partition_graphs` fill a RunMetadata."""

    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    def __init__(self, timeout_in_ms=0, trace_level=0,
                 output_partition_graphs=False):
        self.timeout_in_ms = timeout_in_ms
        self.trace_level = trace_level
        self.output_partition_graphs = output_partition_graphs


class NodeDef:
    """tf.NodeDef's name, op, input and device."""

    def __init__(self, fields):
        self.name, self.op, inputs, self.device = fields
        self.input = list(inputs)

    def __repr__(self):
        return "NodeDef(name=%r, op=%r, device=%r)" % (self.name, self.op,
                                                       self.device)


class GraphDef:
    """tf.GraphDef's `node` list (a partition graph of a RunMetadata)."""

    def __init__(self, nodes=()):
        self.node = [NodeDef(n) for n in nodes]


class NodeExecStats:
    """One node's times in a traced step (TF's NodeExecStats)."""

    def __init__(self, fields):
        (self.node_name, self.all_start_micros, self.op_start_rel_micros,
         self.op_end_rel_micros, self.all_end_rel_micros,
         self.timeline_label) = fields


class DeviceStepStats:
    def __init__(self, device, nodes):
        self.device = device
        self.node_stats = [NodeExecStats(n) for n in nodes]


class StepStats:
    def __init__(self, devices=()):
        self.dev_stats = [DeviceStepStats(d, n) for d, n in devices]


class RunMetadata:
    """tf.RunMetadata: `step_stats.dev_stats` after a step run with
    `tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)`."""

    def __init__(self):
        self.step_stats = StepStats()
        self.partition_graphs = []


def _run_native(native, names, feeds, options, run_metadata):
    """One step of a native session (Session's or MonitoredSession's) with
    `options`' deadline, trace level and partition graphs; those into
    `run_metadata`."""
    timeout = options.timeout_in_ms if options is not None else 0
    trace = options.trace_level if options is not None else 0
    partitions = builtins_bool(getattr(options, "output_partition_graphs",
                                       False))
    values, stats, graphs = native.run(names, feeds, timeout, trace,
                                       partitions)
    if run_metadata is not None:
        if stats is not None:
            run_metadata.step_stats = StepStats(stats)
        if partitions:
            run_metadata.partition_graphs = [GraphDef(g) for g in graphs]
    return values


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _flatten(fetches, leaves):
    """The leaves of a fetch structure, and how to rebuild it."""
    if isinstance(fetches, (Tensor, Operation, Variable, str)):
        leaves.append(fetches)
        i = len(leaves) - 1
        return lambda values: values[i]
    if isinstance(fetches, collections.abc.Mapping):
        keys = list(fetches.keys())
        parts = [_flatten(fetches[k], leaves) for k in keys]
        kind = type(fetches)
        return lambda values: kind(
            (k, p(values)) for k, p in zip(keys, parts))
    if _is_namedtuple(fetches):
        parts = [_flatten(x, leaves) for x in fetches]
        kind = type(fetches)
        return lambda values: kind(*[p(values) for p in parts])
    if isinstance(fetches, (list, tuple)):
        parts = [_flatten(x, leaves) for x in fetches]
        kind = type(fetches)
        return lambda values: kind(p(values) for p in parts)
    if fetches is None:
        raise TypeError("Fetch argument None has invalid type <class "
                        "'NoneType'>")
    raise TypeError("Fetch argument %r has invalid type %r, must be a string "
                    "or Tensor. (Can not convert a %s into a Tensor or "
                    "Operation.)" % (fetches, type(fetches),
                                     type(fetches).__name__))


def _feed(graph, key, value):
    """A feed_dict entry as (output, C-contiguous array), with TF's checks."""
    if isinstance(key, str):
        key = graph.get_tensor_by_name(key)
    elif isinstance(key, Variable):
        key = key.value()
    if not isinstance(key, Tensor):
        raise TypeError("Cannot interpret feed_dict key as Tensor: %r"
                        % (key,))
    if isinstance(value, (Tensor, Variable)):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. "
            "Acceptable feed values include Python scalars, strings, "
            "lists, numpy ndarrays, or TensorHandles.")
    try:
        arr = _numpy_value(value, key.dtype)
    except (TypeError, ValueError) as e:
        raise ValueError("Cannot feed value for Tensor '%s' of dtype %s: "
                         "%s" % (key.name, key.dtype.name, e)) from None
    if not key.shape.is_compatible_with(TensorShape(list(arr.shape))):
        raise ValueError(
            "Cannot feed value of shape %r for Tensor '%s', which has "
            "shape '%r'" % (TensorShape(list(arr.shape)), key.name,
                            key.shape))
    return (key._out, arr)


def _prepare(graph, fetches, feed_dict):
    """A step's fetch names, feeds, and how to rebuild the fetch
    structure from the values."""
    leaves = []
    rebuild = _flatten(fetches, leaves)
    names = []
    for leaf in leaves:
        if isinstance(leaf, (Tensor, Operation)):
            names.append(leaf.name)
        elif isinstance(leaf, Variable):
            # The variable itself ("var:0"), as TF fetches it.
            names.append(leaf.name)
        else:
            graph.as_graph_element(leaf)  # TF's errors for a bad name
            names.append(leaf)
    # Every bad value is reported at once (TF stops at the first); a bad
    # key still raises its TypeError alone.
    feeds, bad = [], []
    for k, v in (feed_dict or {}).items():
        try:
            feeds.append(_feed(graph, k, v))
        except ValueError as e:
            bad.append(str(e))
    if len(bad) == 1:
        raise ValueError(bad[0])
    if bad:
        raise ValueError("%d feeds are invalid: %s"
                         % (len(bad), "; ".join(bad)))
    return names, feeds, rebuild


_sessions = threading.local()


def _default_session():
    stack = getattr(_sessions, "stack", [])
    if not stack:
        raise ValueError("Cannot evaluate tensor using `eval()`: No default "
                         "session is registered. Use `with sess.as_default()` "
                         "or pass an explicit session to `eval(session=sess)`")
    return stack[-1]


class Session:
    """tf.Session: runs steps of a graph, in process ('') or on the master
    of a server ('grpc://host:port', 'caf://host:port' or 'host:port')."""

    def __init__(self, target="", graph=None, config=None):
        self._graph = graph or get_default_graph()
        config = config or ConfigProto()
        self._closed = False
        self._s = _C.Session(target, self._graph._g, *config._native())

    graph = property(lambda self: self._graph)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs one step; returns the fetches' values in their structure
        (numpy arrays; a fetched Operation gives None)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        names, feeds, rebuild = _prepare(self._graph, fetches, feed_dict)
        return rebuild(_run_native(self._s, names, feeds, options,
                                   run_metadata))

    def close(self):
        if not self._closed:
            self._closed = True
            self._s.close()

    def as_default(self):
        session = self

        class _Default:
            def __enter__(self):
                if not hasattr(_sessions, "stack"):
                    _sessions.stack = []
                _sessions.stack.append(session)
                return session

            def __exit__(self, *exc):
                _sessions.stack.pop()
                return False

        return _Default()

    def __enter__(self):
        self._default = self.as_default()
        self._default.__enter__()
        return self

    def __exit__(self, *exc):
        self._default.__exit__(*exc)
        self.close()
        return False

    @staticmethod
    def reset(target, containers=None, config=None):
        """tf.Session.reset: closes the master's sessions and frees the
        containers' resources on every task."""
        _C.Session.reset(target, list(containers or []))


class InteractiveSession(Session):
    """tf.InteractiveSession: a Session that is the default one from its
    creation until it is closed (for shells: `t.eval()` without `with`)."""

    def __init__(self, target="", graph=None, config=None):
        Session.__init__(self, target, graph, config)
        if not hasattr(_sessions, "stack"):
            _sessions.stack = []
        _sessions.stack.append(self)

    def close(self):
        stack = getattr(_sessions, "stack", [])
        if self in stack:
            stack.remove(self)
        Session.close(self)

from . import train  # noqa: E402 (needs the names above)
