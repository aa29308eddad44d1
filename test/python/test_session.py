"""Graphs, sessions, feeds and fetches from Python (issue 32 §1)."""

import collections
import threading
import time

import numpy as np
import pytest

import actorflow as tf

from conftest import loopback, run_interrupted


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_the_readme_line():
    assert tf.Session().run(tf.constant(1.0) + 2.0) == 3.0


def test_python_values_take_tf_dtypes():
    assert tf.constant(1.0).dtype == tf.float32
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant(2**40).dtype == tf.int64
    assert tf.constant(True).dtype == tf.bool
    assert tf.constant("s").dtype == tf.string
    assert tf.constant(np.float64(1)).dtype == tf.float64
    # The other operand of a Python scalar gives it its dtype.
    x = tf.constant(3, dtype=tf.int64)
    assert (x * 2).dtype == tf.int64
    s = tf.Session()
    value = s.run(x * 2)
    assert value == 6 and value.dtype == np.int64
    assert s.run(2.0 - tf.constant(0.5)) == 1.5
    assert s.run(tf.constant([1.0, 2.0]) / 2.0).tolist() == [0.5, 1.0]


def test_fetch_structures_come_back_in_their_shape():
    a = tf.constant(1.0)
    b = tf.constant([2, 3])
    Pair = collections.namedtuple("Pair", "x y")
    s = tf.Session()
    out = s.run({"a": a, "nested": [b, (a, {"b": b})], "pair": Pair(a, b)})
    assert out["a"] == 1.0
    assert out["nested"][0].tolist() == [2, 3]
    assert isinstance(out["nested"][1], tuple)
    assert out["nested"][1][1]["b"].tolist() == [2, 3]
    assert isinstance(out["pair"], Pair) and out["pair"].x == 1.0
    # An operation fetches None; a name fetches the tensor or runs the op.
    noop = tf.no_op(name="nothing")
    assert s.run([noop, "Const:0", "nothing"]) == [None, 1.0, None]


def test_every_dtype_goes_in_and_out():
    s = tf.Session()
    cases = [
        (tf.float32, np.array([[1.5, -2]], dtype=np.float32)),
        (tf.float64, np.array([1e300, 2], dtype=np.float64)),
        (tf.int32, np.array([-(2**31), 2**31 - 1], dtype=np.int32)),
        (tf.int64, np.array([2**62, -1], dtype=np.int64)),
        (tf.uint8, np.array([0, 255], dtype=np.uint8)),
        (tf.bool, np.array([True, False])),
    ]
    for dtype, value in cases:
        p = tf.placeholder(dtype, shape=value.shape)
        out = s.run(tf.identity(p), feed_dict={p: value})
        assert out.dtype == value.dtype, dtype
        assert np.array_equal(out, value), dtype
    p = tf.placeholder(tf.string, shape=[2])
    out = s.run(tf.identity(p), feed_dict={p: ["héllo", b"\x00\xff"]})
    assert out.tolist() == ["héllo".encode(), b"\x00\xff"]


def test_a_fetch_is_a_numpy_array_that_outlives_its_session():
    s = tf.Session()
    big = s.run(tf.constant(np.arange(1 << 20, dtype=np.float32)))
    s.close()
    del s
    assert big.shape == (1 << 20,) and big[-1] == (1 << 20) - 1
    # A feed is copied: writing into the array afterwards changes nothing.
    p = tf.placeholder(tf.float32, [3])
    v = tf.Variable([0.0, 0.0, 0.0])
    assign = v.assign(p)
    s = tf.Session()
    s.run(v.initializer)
    fed = np.ones(3, dtype=np.float32)
    s.run(assign, feed_dict={p: fed})
    fed[:] = 7
    assert s.run(v).tolist() == [1.0, 1.0, 1.0]


def test_bad_feeds_are_named():
    p = tf.placeholder(tf.float32, shape=[None, 2], name="x")
    y = p * 2.0
    s = tf.Session()
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) "
                       r"for Tensor 'x:0', which has shape '\(\?, 2\)'"):
        s.run(y, feed_dict={p: [1, 2, 3]})
    with pytest.raises(ValueError, match="Tensor 'x:0' of dtype float32"):
        s.run(y, feed_dict={p: [["a", "b"]]})
    with pytest.raises(TypeError, match="feed cannot be a tf.Tensor"):
        s.run(y, feed_dict={p: tf.constant([[1.0, 2.0]])})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="You must feed a value for placeholder tensor "
                             "'x'") as e:
        s.run(y)
    assert e.value.error_code == tf.errors.INVALID_ARGUMENT
    assert isinstance(e.value, tf.errors.OpError)


def test_bad_fetches_and_a_closed_session():
    s = tf.Session()
    with pytest.raises(TypeError, match="Fetch argument None"):
        s.run(None)
    with pytest.raises(TypeError, match="invalid type"):
        s.run(3.5)
    with pytest.raises(tf.errors.OpError) as e:
        s.run("no_such_node:0")
    assert "no_such_node" in str(e.value)
    s.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        s.run(tf.constant(1))


def test_a_target_no_factory_takes_is_not_found_as_in_tf():
    with pytest.raises(tf.errors.NotFoundError,
                       match='No session factory registered for the given '
                             'session options: {target: "INVALID_TARGET"}'):
        tf.Session("INVALID_TARGET")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="Malformed session target"):
        tf.Session("grpc://no-port")


def test_variables_need_initializing_and_keep_state():
    v = tf.Variable(1.0, name="v")
    inc = v.assign_add(2.0)
    s = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as e:
        s.run(v)
    assert "v" in str(e.value)
    s.run(tf.global_variables_initializer())
    s.run(inc)
    assert s.run(v) == 3.0
    assert [x.name for x in tf.global_variables()] == [v.name]
    with s.as_default():
        assert v.eval() == 3.0
        assert (v * 2).eval() == 6.0


def test_scopes_nest_as_with_blocks():
    with tf.name_scope("outer") as scope:
        assert scope == "outer/"
        with tf.name_scope("inner"):
            c = tf.constant(1.0, name="c")
    assert c.op.name == "outer/inner/c"
    with tf.device("/job:ps/task:0"):
        with tf.device("/cpu:0"):
            d = tf.constant(1.0)
    assert d.device == "/job:ps/task:0/device:CPU:0"
    first = tf.constant(1.0, name="first")
    with tf.control_dependencies([first]):
        second = tf.constant(2.0, name="second")
    assert second.op.control_inputs == [first.op]
    with tf.container("experiment"):
        w = tf.Variable(0.0, name="w")
    assert w.op is not None
    g = tf.Graph()
    with g.as_default():
        in_g = tf.constant(5)
    assert in_g.graph is g
    assert tf.get_default_graph() is not g
    assert tf.Session(graph=g).run(in_g) == 5


def test_math_ops_match_numpy():
    x = np.array([[1.0, -2.0], [3.0, 0.5]], dtype=np.float32)
    t = tf.constant(x)
    s = tf.Session()
    np.testing.assert_allclose(s.run(tf.matmul(t, t)), x @ x, rtol=1e-6)
    np.testing.assert_allclose(s.run(t @ t), x @ x, rtol=1e-6)
    np.testing.assert_allclose(s.run(tf.nn.relu(t)), np.maximum(x, 0))
    np.testing.assert_allclose(s.run(tf.reduce_sum(t, axis=1)), x.sum(1))
    np.testing.assert_allclose(s.run(tf.reduce_mean(t)), x.mean())
    np.testing.assert_allclose(s.run(tf.reduce_max(t, 0, keepdims=True)),
                               x.max(0, keepdims=True))
    np.testing.assert_allclose(s.run(tf.square(-t)), x * x)
    assert s.run(tf.cast(t, tf.int32)).tolist() == [[1, -2], [3, 0]]
    assert s.run(tf.reshape(t, [4])).shape == (4,)
    assert s.run(tf.maximum(t, 0.75)).min() == 0.75


def test_the_reduction_family_matches_numpy():
    x = np.array([[1.0, -2.0, 4.0], [3.0, 0.5, -1.0]], dtype=np.float32)
    t = tf.constant(x)
    s = tf.Session()
    np.testing.assert_allclose(s.run(tf.reduce_min(t, 1)), x.min(1))
    np.testing.assert_allclose(s.run(tf.reduce_min(t)), x.min())
    np.testing.assert_allclose(s.run(tf.reduce_prod(t, 0, keepdims=True)),
                               x.prod(0, keepdims=True))
    lse = np.log(np.exp(x).sum(1))
    np.testing.assert_allclose(s.run(tf.reduce_logsumexp(t, 1)), lse,
                               rtol=1e-6)
    # Stable where exp overflows, -inf for an all -inf row, as TF.
    big = tf.constant([[1000.0, 1000.0], [-np.inf, -np.inf]])
    out = s.run(tf.reduce_logsumexp(big, 1))
    np.testing.assert_allclose(out[0], 1000.0 + np.log(2.0), rtol=1e-6)
    assert out[1] == -np.inf
    b = tf.constant([[True, False], [True, True]])
    assert s.run(tf.reduce_all(b, 1)).tolist() == [False, True]
    assert s.run(tf.reduce_any(b, 0)).tolist() == [True, True]
    assert s.run(tf.reduce_all(tf.constant(np.zeros((0,), bool)))) == True
    with pytest.raises(TypeError, match="not in list of allowed values: "
                                        "bool"):
        tf.reduce_any(t)
    # The gradient of a minimum goes to the smallest element.
    v = tf.Variable(x)
    g, = tf.gradients(tf.reduce_sum(tf.reduce_min(v, 1)), [v])
    s.run(v.initializer)
    assert s.run(g).tolist() == [[0, 1, 0], [0, 0, 1]]


def test_the_gil_is_released_while_a_step_waits():
    # A step on a task that is not up waits (until its deadline) for it:
    # another Python thread runs meanwhile.
    spec = {"local": [loopback()], "absent": [loopback()]}
    server = tf.train.Server(spec, "local", 0)
    with tf.device("/job:absent/task:0"):
        c = tf.constant(1.0)
    s = tf.Session(server.target)
    errors = []

    def waiting():
        try:
            s.run(c, options=tf.RunOptions(timeout_in_ms=3000))
        except tf.errors.OpError as e:
            errors.append(e)

    t = threading.Thread(target=waiting)
    t.start()
    ran = 0
    for _ in range(50):
        time.sleep(0.002)
        ran += 1
    still_waiting = t.is_alive()
    t.join(30)
    assert ran == 50
    assert still_waiting
    assert len(errors) == 1
    assert isinstance(errors[0], (tf.errors.DeadlineExceededError,
                                  tf.errors.UnavailableError))
    assert "/job:absent/replica:0/task:0" in str(errors[0])
    s.close()
    server.stop()


def test_an_interactive_session_is_the_default_until_closed():
    c = tf.constant(4.0) * 2.0
    sess = tf.InteractiveSession()
    assert c.eval() == 8.0
    sess.close()
    with pytest.raises(ValueError, match="No default session"):
        c.eval()


def test_a_device_function_places_each_op():
    seen = []

    def pin(op):
        seen.append((op.name, op.type))
        if op.type.startswith("Variable"):
            return "/job:ps/task:0"
        return None if op.type == "Const" else "/job:worker/task:1"

    with tf.device(pin):
        v = tf.Variable(1.0, name="v")
        c = tf.constant(2.0, name="c")
        y = v * c
    assert v.device == "/job:ps/task:0"
    assert c.device == ""
    assert y.device == "/job:worker/task:1"
    assert ("c", "Const") in seen

    def broken(op):
        raise RuntimeError("no device for " + op.name)

    with pytest.raises(RuntimeError, match="no device for d"):
        with tf.device(broken):
            tf.constant(1.0, name="d")
    # The scope is closed and the graph still works.
    assert tf.Session().run(tf.constant(1.0) + 1.0) == 2.0


def test_ctrl_c_cancels_a_blocked_run_and_the_session_stays_usable():
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]])
    x = tf.placeholder(tf.float32, [])
    enqueue = q.enqueue([x])
    dequeue = q.dequeue()
    with tf.Session() as sess:
        run_interrupted(sess.run, dequeue)
        # The cancelled dequeue took nothing.
        sess.run(enqueue, {x: 7.0})
        sess.run(enqueue, {x: 8.0})
        assert sess.run(dequeue) == 7.0
        assert sess.run(dequeue) == 8.0
        assert sess.run(q.size()) == 0


def test_split_into_sizes_and_slice_as_tf():
    value = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    a, b, c = tf.split(value, [1, -1, 2], axis=1)
    assert [t.shape.as_list() for t in (a, b, c)] == [[3, 1], [3, 1], [3, 2]]
    equal = tf.split(value, 3)
    with tf.Session() as sess:
        got = sess.run([a, b, c, tf.slice(value, [1, 1], [-1, 2]), equal])
    assert got[0].tolist() == [[0], [4], [8]]
    assert got[1].tolist() == [[1], [5], [9]]
    assert got[2].tolist() == [[2, 3], [6, 7], [10, 11]]
    assert got[3].tolist() == [[5, 6], [9, 10]]
    assert [t.tolist() for t in got[4]] == [[[0, 1, 2, 3]], [[4, 5, 6, 7]],
                                            [[8, 9, 10, 11]]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Got: 5"):
        tf.split(value, [2, 3], axis=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="at most one"):
        tf.split(value, [-1, -1], axis=0)


def test_a_large_feed_is_not_kept_by_the_engine_when_the_caller_writes():
    # Fed without a copy (the tensor borrows the array); what the engine
    # keeps past the step (a variable's value, a queue's element) is its
    # own copy, so writing into the array afterwards changes nothing.
    n = 1 << 16  # 256 KiB of float32: borrowed
    x = tf.placeholder(tf.float32, [n])
    v = tf.Variable(tf.zeros([n]))
    assign = v.assign(x)
    q = tf.FIFOQueue(2, tf.float32, shapes=[[n]])
    enqueue = q.enqueue([x])
    total = tf.reduce_sum(x)
    fed = np.full([n], 2.0, np.float32)
    with tf.Session() as sess:
        sess.run(v.initializer)
        sess.run([assign, enqueue], {x: fed})
        assert sess.run(total, {x: fed}) == 2.0 * n
        fed[:] = 5.0
        assert float(sess.run(tf.reduce_sum(v))) == 2.0 * n
        assert float(sess.run(tf.reduce_sum(q.dequeue()))) == 2.0 * n
        # A fed value fetched back is the value fed, not a view of the
        # caller's array.
        out = sess.run(x, {x: fed})
        fed[:] = 7.0
        assert out[0] == 5.0
