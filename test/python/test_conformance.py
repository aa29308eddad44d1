"""TensorFlow conformance, second pass, from Python (issue 34): the new
dtypes with numpy, tf.Assert, tf.group per device, with_dependencies,
device_filters, partition graphs, a server's default config and every
bad feed at once."""

import time

import numpy as np
import pytest

import actorflow as tf

from conftest import loopback


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


@pytest.mark.parametrize("dtype,value", [
    (tf.float16, np.array([1.5, -2.0, 65504.0], np.float16)),
    (tf.int8, np.array([-128, 0, 127], np.int8)),
    (tf.int16, np.array([-32768, 7, 32767], np.int16)),
    (tf.uint16, np.array([0, 1, 65535], np.uint16)),
    (tf.complex64, np.array([1 + 2j, -3 - 4j], np.complex64)),
    (tf.complex128, np.array([1e300 + 1j, -0.5j], np.complex128)),
])
def test_new_dtypes_feed_fetch_and_constant(dtype, value):
    x = tf.placeholder(dtype, [None], name="x")
    y = tf.identity(x)
    c = tf.constant(value)
    assert c.dtype == dtype
    with tf.Session() as sess:
        got, const = sess.run([y, c], feed_dict={x: value})
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)
    np.testing.assert_array_equal(const, value)


def test_new_dtypes_compute_as_tf():
    h = tf.constant(np.array([1.0, 2048.0], np.float16))
    c = tf.constant(np.array([1 + 2j, 3 - 1j], np.complex64))
    i8 = tf.constant(np.array([127, -128], np.int8))
    with tf.Session() as sess:
        hs, cs, wrapped, cast_real, back = sess.run([
            h + tf.constant(np.float16(1.0)),
            c * c,
            i8 + tf.constant(np.int8(1)),
            tf.cast(c, tf.float32),
            tf.cast(tf.constant([0.1], tf.float32), tf.float16)])
    # 2048 + 1 ties to even in half precision, as numpy's float16.
    np.testing.assert_array_equal(hs, np.array([2.0, 2048.0], np.float16))
    np.testing.assert_array_equal(cs, np.array([1 + 2j, 3 - 1j]) ** 2)
    np.testing.assert_array_equal(wrapped, np.array([-128, -127], np.int8))
    np.testing.assert_array_equal(cast_real, np.array([1.0, 3.0], np.float32))
    assert back.dtype == np.float16 and back[0] == np.float16(0.1)
    assert tf.as_dtype("half") == tf.float16
    assert tf.as_dtype(np.complex128) == tf.complex128


def test_assert_fails_the_step_with_its_data():
    x = tf.placeholder(tf.float32, [], name="x")
    check = tf.Assert(x > 0, ["x must be positive, got", x])
    with tf.control_dependencies([check]):
        y = tf.identity(x, name="y")
    with tf.Session() as sess:
        assert sess.run(y, {x: 2.0}) == 2.0
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"assertion failed: \[x must be positive, "
                                 r"got\] \[-1\]"):
            sess.run(y, {x: -1.0})


def test_group_one_noop_per_device():
    a = tf.Variable(1.0, name="a")
    with tf.device("/job:ps/task:0"):
        b = tf.Variable(2.0, name="b")
    root = tf.group(a.initializer, b.initializer)
    assert root.name == "group_deps"
    g = tf.get_default_graph()
    assert g.get_operation_by_name("group_deps/NoOp").device == ""
    assert g.get_operation_by_name("group_deps/NoOp_1").device == \
        "/job:ps/task:0"
    assert tf.control_flow_ops.group is tf.group


def test_with_dependencies_runs_them_first():
    v = tf.Variable(1.0, name="v")
    bumped = tf.control_flow_ops.with_dependencies([v.assign_add(10.0)],
                                                   v.value())
    assert bumped.op.name == "control_dependency"
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(bumped) == 11.0


def test_every_bad_feed_at_once():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.placeholder(tf.float32, [None, 3], name="y")
    with tf.Session() as sess:
        with pytest.raises(ValueError) as e:
            sess.run(x + 1.0, {x: [1.0, 2.0, 3.0], y: [[1.0, 2.0]]})
    text = str(e.value)
    assert text.startswith("2 feeds are invalid: ")
    assert "Tensor 'x:0'" in text and "Tensor 'y:0'" in text


def test_device_filters_and_partition_graphs_and_server_config():
    cluster = tf.train.ClusterSpec({"local": [loopback(), loopback(),
                                              loopback()]})
    s0 = tf.train.Server(cluster, "local", 0,
                         config=tf.ConfigProto(operation_timeout_in_ms=1500))
    s1 = tf.train.Server(cluster, "local", 1)
    try:
        with tf.device("/job:local/task:1"):
            one = tf.constant(1.0, name="one")
        with tf.device("/job:local/task:2"):
            two = tf.constant(2.0, name="two")
        total = tf.add(one, tf.constant(3.0), name="total")
        config = tf.ConfigProto(device_filters=["/job:local/task:1"])
        with tf.Session(s0.target, config=config) as sess:
            md = tf.RunMetadata()
            opts = tf.RunOptions(output_partition_graphs=True)
            assert sess.run(total, options=opts, run_metadata=md) == 4.0
            assert len(md.partition_graphs) == 2
            ops = {n.op for g in md.partition_graphs for n in g.node}
            assert {"_Send", "_Recv", "Add"} <= ops
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="Cannot assign a device for operation "
                                     "'two'"):
                sess.run(two)
        # The server's config bounds a session that sets no deadline: task
        # 2 never comes up.
        with tf.Session(s0.target) as sess:
            start = time.monotonic()
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(two)
            assert time.monotonic() - start < 10
    finally:
        s1.stop()
        s0.stop()


def test_read_value_reads_after_the_control_dependencies():
    v = tf.Variable(1.0, name="v")
    bump = v.assign_add(5.0)
    with tf.control_dependencies([bump]):
        after = v.read_value()
    assert after.op.name == "read"
    assert bump.op.name in [c.name for c in after.op.control_inputs]
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(after) == 6.0
        assert sess.run(after) == 11.0
