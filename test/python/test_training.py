"""Gradients, optimizers, the global step, replica_device_setter and
queues from Python (issue 32 §1)."""

import threading

import numpy as np
import pytest

import actorflow as tf

from conftest import loopback, run_interrupted


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_gradients_match_the_derivative():
    x = tf.placeholder(tf.float32, [3])
    y = tf.reduce_sum(tf.square(x) * 3.0)
    (dx,) = tf.gradients(y, [x])
    s = tf.Session()
    value = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_allclose(s.run(dx, {x: value}), 6 * value)
    # A single x gives a list of one, as TF.
    assert len(tf.gradients(y, x)) == 1


@pytest.mark.parametrize("make", [
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    lambda: tf.train.AdagradOptimizer(0.5),
    lambda: tf.train.AdamOptimizer(0.1),
])
def test_each_optimizer_minimizes_a_quadratic(make):
    w = tf.Variable([5.0, -3.0], name="w")
    loss = tf.reduce_sum(tf.square(w - tf.constant([1.0, 2.0])))
    step = tf.train.get_or_create_global_step()
    train_op = make().minimize(loss, global_step=step)
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    first = s.run(loss)
    for _ in range(200):
        s.run(train_op)
    assert s.run(loss) < first * 0.01
    assert s.run(step) == 200


def test_a_decayed_learning_rate_drives_the_optimizer():
    w = tf.Variable([1.0, -2.0], name="w")
    step = tf.train.get_or_create_global_step()
    # 0.1, halved after every step (staircase), as TF's formula.
    lr = tf.train.exponential_decay(0.1, step, 1, 0.5, staircase=True)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(
        tf.reduce_sum(tf.square(w)), global_step=step)
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    want = np.array([1.0, -2.0])
    for rate in (0.1, 0.05, 0.025):
        assert s.run(lr) == pytest.approx(rate)
        s.run(train_op)
        want = want - rate * 2 * want
        np.testing.assert_allclose(s.run(w), want, rtol=1e-6)
    smooth = tf.train.exponential_decay(0.05, step, 10, 0.96)
    assert s.run(smooth) == pytest.approx(0.05 * 0.96 ** 0.3, rel=1e-5)
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.exponential_decay(0.1, None, 10, 0.5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="decay_steps"):
        tf.train.exponential_decay(0.1, step, 0, 0.5)


def test_dropout_with_a_keep_prob_fed_while_training():
    keep = tf.placeholder_with_default(1.0, shape=[])
    x = tf.ones([10000])
    d = tf.nn.dropout(x, keep, seed=3)
    s = tf.Session()
    np.testing.assert_array_equal(s.run(d), np.ones(10000, np.float32))
    out = s.run(d, {keep: 0.5})
    assert set(np.unique(out)) <= {0.0, 2.0}
    # Binomial(10000, 0.5): sd 50; 6 sd either way.
    assert abs(np.count_nonzero(out) - 5000) < 300
    by_rate = s.run(tf.nn.dropout(x, rate=0.75, seed=4))
    assert set(np.unique(by_rate)) <= {0.0, 4.0}
    assert tf.nn.dropout(x, 1.0) is x
    with pytest.raises(ValueError, match=r"range \(0, 1\]"):
        tf.nn.dropout(x, 0.0)
    assert s.run(tf.floor(tf.constant([1.5, -1.5]))).tolist() == [1.0, -2.0]
    assert s.run(tf.pow(tf.constant([2.0, 3.0]), 2.0)).tolist() == [4.0, 9.0]


def test_adam_has_its_slots_and_apply_gradients_takes_pairs():
    w = tf.Variable([1.0], name="w")
    loss = tf.reduce_sum(w * w)
    opt = tf.train.AdamOptimizer()
    pairs = opt.compute_gradients(loss)
    assert [v.name for _, v in pairs] == [w.name]
    train_op = opt.apply_gradients(pairs)
    assert opt.get_slot(w, "m").name.startswith("w/Adam")
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    s.run(train_op)
    assert s.run(w)[0] < 1.0


def test_replica_device_setter_places_variables_on_ps_tasks():
    cluster = tf.train.ClusterSpec({"ps": ["h:1", "h:2"], "worker": ["h:3"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        a = tf.Variable(1.0, name="a")
        b = tf.Variable(2.0, name="b")
        c = a + b
    assert a.device == "/job:ps/task:0"
    assert b.device == "/job:ps/task:1"
    assert c.device == "/job:worker"
    assert tf.train.replica_device_setter(cluster={"worker": ["h:3"]}) is None


def test_a_fifo_queue_in_order_and_closed():
    q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[[], []])
    enq = q.enqueue_many([[1, 2, 3], ["a", "b", "c"]])
    x, label = q.dequeue()
    batch = q.dequeue_many(2)
    size = q.size()
    close = q.close()
    s = tf.Session()
    s.run(enq)
    assert s.run(size) == 3
    assert s.run([x, label]) == [1, b"a"]
    out = s.run(batch)
    assert out[0].tolist() == [2, 3] and out[1].tolist() == [b"b", b"c"]
    s.run(close)
    with pytest.raises(tf.errors.OutOfRangeError, match="closed"):
        s.run(x)
    with pytest.raises(tf.errors.DeadlineExceededError):
        q2 = tf.FIFOQueue(1, tf.float32)
        s.run(q2.dequeue(), options=tf.RunOptions(timeout_in_ms=200))


def test_threads_feed_a_queue_while_another_dequeues():
    q = tf.FIFOQueue(2, tf.float32, shapes=[])
    p = tf.placeholder(tf.float32, [])
    enq = q.enqueue(p)
    deq = q.dequeue()
    s = tf.Session()
    got = []

    def consume():
        for _ in range(20):
            got.append(float(s.run(deq)))

    t = threading.Thread(target=consume)
    t.start()
    for i in range(20):
        s.run(enq, {p: float(i)})  # blocks while the queue is full
    t.join(30)
    assert got == [float(i) for i in range(20)]


def test_logistic_regression_trains_across_a_ps_and_a_worker():
    spec = tf.train.ClusterSpec({"ps": [loopback()], "worker": [loopback()]})
    ps = tf.train.Server(spec, "ps", 0)
    worker = tf.train.Server(spec, "worker", 0)
    rng = np.random.RandomState(0)
    xs = rng.randn(256, 4).astype(np.float32)
    ys = (xs @ np.array([1.0, -2.0, 0.5, 0.0]) > 0).astype(np.int32)
    with tf.device(tf.train.replica_device_setter(
            cluster=spec, worker_device="/job:worker/task:0")):
        x = tf.placeholder(tf.float32, [None, 4])
        y = tf.placeholder(tf.int32, [None])
        w = tf.Variable(tf.zeros([4, 2]), name="w")
        b = tf.Variable(tf.zeros([2]), name="b")
        logits = tf.nn.bias_add(tf.matmul(x, w), b)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        step = tf.train.get_or_create_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.5).minimize(
            loss, global_step=step)
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    assert w.device == "/job:ps/task:0"
    with tf.Session(worker.target) as s:
        s.run(tf.global_variables_initializer())
        for _ in range(100):
            s.run(train_op, {x: xs, y: ys})
        assert s.run(accuracy, {x: xs, y: ys}) > 0.9
        assert s.run(step) == 100
    worker.stop()
    ps.stop()


def _quadratic():
    """w, its loss w², the global step and a gradient descent step on it."""
    w = tf.Variable([5.0], name="w")
    loss = tf.reduce_sum(tf.square(w))
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=step)
    return w, loss, step, train_op


def test_monitored_training_session_stops_at_its_step_and_checks_nan():
    w, loss, step, train_op = _quadratic()
    hooks = [tf.train.StopAtStepHook(last_step=30),
             tf.train.NanTensorHook(loss)]
    runs = 0
    with tf.train.MonitoredTrainingSession(hooks=hooks,
                                           log_step_count_steps=0) as sess:
        while not sess.should_stop():
            out = sess.run({"step": step, "train": train_op})
            runs += 1
    assert runs == 30 and out["step"] == 29
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        tf.train.StopAtStepHook()


def test_run_step_fn_scores_after_a_stop_and_recovers_a_lost_task():
    w, loss, step, train_op = _quadratic()

    class Counter(tf.train.SessionRunHook):
        runs = 0

        def before_run(self, run_context):
            Counter.runs += 1

    with tf.train.MonitoredTrainingSession(
            hooks=[tf.train.StopAtStepHook(last_step=3), Counter()],
            log_step_count_steps=0) as sess:
        while not sess.should_stop():
            sess.run(train_op)
        assert Counter.runs == 3
        # Stopped: run refuses, the session underneath still answers and
        # calls no hook (TF's way to score between steps).
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match="should_stop requested"):
            sess.run(loss)
        value = sess.run_step_fn(lambda ctx: ctx.session.run(step))
        assert value == 3 and Counter.runs == 3
        # A lost task raised by the function: the session is created again
        # and the function called again.
        calls = []

        def flaky(ctx):
            calls.append(1)
            if len(calls) == 1:
                raise tf.errors.UnavailableError(None, None, "lost the ps")
            return "second try"
        assert sess.run_step_fn(flaky) == "second try" and len(calls) == 2
        # Other errors reach the caller as raised, once.
        for error in (ValueError("mine"),
                      tf.errors.InvalidArgumentError(None, None, "bad")):
            calls.clear()

            def failing(ctx, error=error):
                calls.append(1)
                raise error
            with pytest.raises(type(error), match=str(error)):
                sess.run_step_fn(failing)
            assert len(calls) == 1

    # run_with_hooks runs as run does; request_stop ends the function and
    # the training.
    tf.reset_default_graph()
    v = tf.Variable(0, name="v")
    bump = v.assign_add(1)
    Counter.runs = 0
    with tf.train.MonitoredTrainingSession(hooks=[Counter()],
                                           log_step_count_steps=0) as sess:
        def two_then_stop(ctx):
            ctx.run_with_hooks(bump)
            ctx.run_with_hooks(bump)
            ctx.request_stop()
            raise AssertionError("request_stop returned")
        assert sess.run_step_fn(two_then_stop) is None
        assert sess.should_stop()
        assert Counter.runs == 2
        assert sess.run_step_fn(lambda ctx: ctx.session.run(v)) == 2


def test_a_nan_loss_fails_the_step():
    p = tf.placeholder(tf.float32, [])
    loss = p * 1.0
    with tf.train.MonitoredTrainingSession(
            hooks=[tf.train.NanTensorHook(loss)],
            log_step_count_steps=0) as sess:
        sess.run(loss, {p: 1.0})
        with pytest.raises(tf.train.NanLossDuringTrainingError,
                           match="NaN loss during training"):
            sess.run(loss, {p: float("nan")})


def test_a_saver_saves_and_restores_variables(tmp_path):
    w = tf.Variable([1.0, 2.0], name="w")
    step = tf.train.get_or_create_global_step()
    bump = tf.group(w.assign_add([10.0, 10.0]), step.assign_add(1))
    saver = tf.train.Saver(max_to_keep=2)
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    s.run(bump)
    path = saver.save(s, str(tmp_path / "model"), global_step=step)
    assert path.endswith("model-1")
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    assert tf.train.checkpoint_exists(path)
    s.run(bump)
    assert s.run(w).tolist() == [21.0, 22.0]
    saver.restore(s, path)
    assert s.run(w).tolist() == [11.0, 12.0]
    assert s.run(step) == 1
    # A fresh session (another process would do the same) restores too.
    other = tf.Session()
    saver.restore(other, path)
    assert other.run(w).tolist() == [11.0, 12.0]
    assert tf.train.latest_checkpoint(str(tmp_path / "none")) is None
    with pytest.raises(ValueError, match="not a valid checkpoint"):
        saver.restore(other, str(tmp_path / "missing-7"))


def test_a_saver_with_a_dict_saves_under_its_names(tmp_path):
    w = tf.Variable([1.0, 2.0], name="w")
    saver = tf.train.Saver({"model/weights": w})
    s = tf.Session()
    s.run(w.initializer)
    path = saver.save(s, str(tmp_path / "model"))
    # Another variable of another name restores from that name.
    g = tf.Graph()
    with g.as_default():
        other = tf.Variable([0.0, 0.0], name="renamed")
        restorer = tf.train.Saver({"model/weights": other})
        by_node_name = tf.train.Saver([other])
        t = tf.Session(graph=g)
        restorer.restore(t, path)
        assert t.run(other).tolist() == [1.0, 2.0]
        with pytest.raises(tf.errors.NotFoundError,
                           match="Key renamed not found in checkpoint"):
            by_node_name.restore(t, path)
    with pytest.raises(TypeError, match="keys must be names"):
        tf.train.Saver({1: w})
    with pytest.raises(TypeError, match="not a Variable"):
        tf.train.Saver({"x": tf.constant(1.0)})


def test_run_metadata_of_a_traced_step_from_both_sessions():
    w = tf.Variable(3.0, name="w")
    double = tf.multiply(w, 2.0, name="double")
    full = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)

    def traced_nodes(md):
        return {n.node_name for d in md.step_stats.dev_stats
                for n in d.node_stats}

    s = tf.Session()
    s.run(w.initializer)
    md = tf.RunMetadata()
    assert s.run(double, options=full, run_metadata=md) == 6.0
    assert "double" in traced_nodes(md)
    untraced = tf.RunMetadata()
    s.run(double, run_metadata=untraced)
    assert traced_nodes(untraced) == set()
    with tf.train.MonitoredTrainingSession(log_step_count_steps=0) as sess:
        md = tf.RunMetadata()
        assert sess.run(double, options=full, run_metadata=md) == 6.0
        assert "double" in traced_nodes(md)


def test_a_hook_written_in_python_sees_every_call_and_can_stop():
    w, loss, step, train_op = _quadratic()

    class LossLogger(tf.train.SessionRunHook):
        def __init__(self):
            self.calls = []
            self.losses = []

        def begin(self):
            self.calls.append("begin")

        def after_create_session(self, session, coord):
            self.calls.append("after_create_session")
            self.first = session.run(step)

        def before_run(self, run_context):
            assert run_context.original_args.fetches is train_op
            return tf.train.SessionRunArgs({"loss": loss, "step": step})

        def after_run(self, run_context, run_values):
            self.losses.append(float(run_values.results["loss"]))
            if run_values.results["step"] >= 9:
                run_context.request_stop()

        def end(self, session):
            self.calls.append("end")
            self.last = session.run(step)

    hook = LossLogger()
    runs = 0
    with tf.train.MonitoredTrainingSession(hooks=[hook],
                                           log_step_count_steps=0) as sess:
        while not sess.should_stop():
            sess.run(train_op)
            runs += 1
    assert runs == 10
    assert hook.calls == ["begin", "after_create_session", "end"]
    assert hook.first == 0 and hook.last == 10
    # Fetched in the same step, before its update: 5², then 4², ...
    assert hook.losses[:2] == [25.0, 16.0]

    class Broken(tf.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            raise ValueError("broken hook")

    with pytest.raises(ValueError, match="broken hook"):
        with tf.train.MonitoredTrainingSession(
                hooks=[Broken()], log_step_count_steps=0) as sess:
            sess.run(train_op)
    with pytest.raises(TypeError, match="must be a tf.train.SessionRunHook"):
        tf.train.MonitoredTrainingSession(hooks=[object()])


def test_ctrl_c_cancels_a_blocked_monitored_session_run():
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]])
    x = tf.placeholder(tf.float32, [])
    enqueue = q.enqueue([x])
    dequeue = q.dequeue()
    tf.train.get_or_create_global_step()
    with tf.train.MonitoredTrainingSession() as sess:
        run_interrupted(sess.run, dequeue)
        # Not a lost session to recover from: the same session goes on,
        # and the cancelled dequeue took nothing.
        sess.run(enqueue, {x: 3.0})
        assert sess.run(dequeue) == 3.0
