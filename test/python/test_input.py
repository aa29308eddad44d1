"""Queues of every kind, readers, input pipelines, QueueRunner and
Coordinator from Python (issue 32 §1)."""

import numpy as np
import pytest

import actorflow as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_a_random_shuffle_queue_keeps_its_minimum():
    q = tf.RandomShuffleQueue(capacity=50, min_after_dequeue=10,
                              dtypes=[tf.float32], shapes=[()], seed=7)
    p = tf.placeholder(tf.float32, [None])
    enq = q.enqueue_many([p])
    deq = q.dequeue_many(5)
    s = tf.Session()
    s.run(enq, {p: np.arange(22, dtype=np.float32)})
    first = s.run(deq)
    second = s.run(deq)
    taken = set(first.tolist()) | set(second.tolist())
    assert len(taken) == 10 and taken <= set(range(22))
    # 12 left, 12 - 5 < 10: the next waits (bounded here).
    with pytest.raises(tf.errors.DeadlineExceededError):
        s.run(deq, options=tf.RunOptions(timeout_in_ms=300))


def test_a_padding_fifo_queue_pads_each_batch():
    q = tf.PaddingFIFOQueue(capacity=50, dtypes=[tf.float32],
                            shapes=[(None, None)])
    v = tf.placeholder(tf.float32, shape=(None, None))
    enq = q.enqueue([v])
    s = tf.Session()
    s.run(enq, {v: [[1., 2.], [3., 4.], [5., 6.]]})
    s.run(enq, {v: [[1.]]})
    s.run(enq, {v: [[7., 8., 9., 5.], [6., 7., 8., 9.]]})
    out = s.run(q.dequeue_many(3))
    assert out.shape == (3, 3, 4)
    assert out[1].tolist()[0] == [1., 0., 0., 0.]


def test_a_reader_pipeline_reads_every_line_once_then_ends(tmp_path):
    files = []
    for i in range(2):
        f = tmp_path / ("part%d.csv" % i)
        f.write_text("".join("%d,%d\n" % (i, j) for j in range(3)))
        files.append(str(f))
    filenames = tf.train.string_input_producer(files, num_epochs=1,
                                               shuffle=False)
    reader = tf.TextLineReader()
    key, value = reader.read(filenames)
    (lines,) = tf.train.batch([value], batch_size=2,
                              allow_smaller_final_batch=True)
    s = tf.Session()
    s.run(tf.local_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(s, coord)
    assert len(threads) >= 2
    got = []
    try:
        while True:
            got.extend(s.run(lines).tolist())
    except tf.errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
    assert sorted(got) == sorted(("%d,%d" % (i, j)).encode()
                                 for i in range(2) for j in range(3))


def test_a_queue_runner_fills_a_queue_until_the_coordinator_stops():
    q = tf.FIFOQueue(4, tf.int32, shapes=[])
    counter = tf.Variable(0, name="counter")
    enq = q.enqueue(counter.assign_add(1))
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [enq]))
    deq = q.dequeue()
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(s, coord)
    values = [int(s.run(deq)) for _ in range(10)]
    assert values == list(range(1, 11))
    coord.request_stop()
    s.close()
    coord.join(threads, stop_grace_period_secs=10)
    assert coord.should_stop()


def test_shuffle_batch_gives_batches_of_the_inputs():
    x = tf.constant(np.arange(100, dtype=np.float32).reshape(100, 1))
    (batch,) = tf.train.shuffle_batch([x], batch_size=8, capacity=50,
                                      min_after_dequeue=10, enqueue_many=True,
                                      seed=3)
    s = tf.Session()
    coord = tf.train.Coordinator()
    tf.train.start_queue_runners(s, coord)
    out = s.run(batch)
    assert out.shape == (8, 1) and set(out.ravel()) <= set(range(100))
    coord.request_stop()
    s.close()
    coord.join(stop_grace_period_secs=10)


def test_queue_shapes_are_read_as_tf_reads_them():
    # A list of ints (or []) is one shape; a list of lists one per component.
    scalar = tf.FIFOQueue(4, tf.float32, shapes=[[]])
    also_scalar = tf.FIFOQueue(4, tf.float32, shapes=[])
    vector = tf.FIFOQueue(4, tf.float32, shapes=[2])
    pair = tf.FIFOQueue(4, [tf.float32, tf.int32], shapes=[[2], [1, 3]])
    assert scalar.shapes[0].dims == [] and also_scalar.shapes[0].dims == []
    assert vector.shapes[0].dims == [2]
    assert [s.dims for s in pair.shapes] == [[2], [1, 3]]
    with tf.Session() as s:
        s.run(vector.enqueue([[1.0, 2.0]]))
        assert s.run(vector.dequeue()).tolist() == [1.0, 2.0]
