"""Seed 004 (Hands-On ML, ch. 12: resource containers, queues shared
between sessions, preloading), as its reader writes it: only the import
line and the address differ (machine A is a server on a free loopback
port in this process). Where the book has separate client programs
(training_data_loader.py and trainer.py) this program runs itself again
(`--role loader` / `--role trainer`), so the two clients are processes
that share only the queue on machine A. Every wait the book calls
"blocked" is bounded here by a RunOptions deadline.
"""

import socket
import subprocess
import sys

import numpy as np

import actorflow as tf

BLOCKED = tf.RunOptions(timeout_in_ms=500)


def shared_queue():
    return tf.FIFOQueue(capacity=10, dtypes=[tf.float32], shapes=[[2]],
                        name="q", shared_name="shared_q")


def loader(target):
    # training_data_loader.py
    q = shared_queue()
    training_instance = tf.placeholder(tf.float32, shape=(2))
    enqueue = q.enqueue([training_instance])
    with tf.Session(target) as sess:
        sess.run(enqueue, feed_dict={training_instance: [1., 2.]})
        sess.run(enqueue, feed_dict={training_instance: [3., 4.]})
        sess.run(enqueue, feed_dict={training_instance: [5., 6.]})
    print("enqueued [1. 2.], [3. 4.], [5. 6.]")
    training_instances = tf.placeholder(tf.float32, shape=(None, 2))
    enqueue_many = q.enqueue_many([training_instances])
    with tf.Session(target) as sess:
        sess.run(enqueue_many,
                 feed_dict={training_instances: [[1., 2.], [3., 4.],
                                                 [5., 6.]]})
    print("enqueued many [[1. 2.] [3. 4.] [5. 6.]]")


def trainer(target):
    # trainer.py
    q = shared_queue()
    dequeue = q.dequeue()
    with tf.Session(target) as sess:
        print(sess.run(dequeue))  # [1., 2.]
        print(sess.run(dequeue))  # [3., 4.]
        print(sess.run(dequeue))  # [5., 6.]
    batch_size = 2
    dequeue_mini_batch = q.dequeue_many(batch_size)
    with tf.Session(target) as sess:
        print(sess.run(dequeue_mini_batch))  # [[1., 2.], [3., 4.]]
        try:
            sess.run(dequeue_mini_batch, options=BLOCKED)
        except tf.errors.DeadlineExceededError:
            print("blocked waiting for another instance")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--role":
        {"loader": loader, "trainer": trainer}[sys.argv[2]](sys.argv[3])
        return
    machine_a = "127.0.0.1:%d" % free_port()
    cluster = tf.train.ClusterSpec({"local": [machine_a]})
    server = tf.train.Server(cluster, job_name="local", task_index=0)
    target = "grpc://" + machine_a

    print("== containers ==")
    with tf.container("my_problem_1"):
        x = tf.Variable(0.0, name="x")
    y = tf.Variable(1.0, name="y")
    with tf.Session(target) as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(x.assign_add(5.0))
        print("x (container my_problem_1) =", sess.run(x))
    tf.Session.reset(target, ["my_problem_1"])
    with tf.Session(target) as sess:
        print("y in a new session =", sess.run(y))
        try:
            sess.run(x)
        except tf.errors.FailedPreconditionError:
            print("x must be initialized again")

    print("== a queue between two client processes ==")
    me = [sys.executable, __file__, "--role"]
    trainer_proc = subprocess.Popen(me + ["trainer", target],
                                    stdout=subprocess.PIPE, text=True)
    loader_out = subprocess.run(me + ["loader", target],
                                stdout=subprocess.PIPE, text=True,
                                check=True).stdout
    trainer_out = trainer_proc.communicate(timeout=60)[0]
    print("--- training_data_loader.py\n" + loader_out, end="")
    print("--- trainer.py\n" + trainer_out, end="")
    tf.Session.reset(target)  # the next cell's queue is a new one

    print("== queues of tuples ==")
    tf.reset_default_graph()
    q = tf.FIFOQueue(capacity=10, dtypes=[tf.int32, tf.float32],
                     shapes=[[], [3, 2]], name="q", shared_name="shared_q")
    a = tf.placeholder(tf.int32, shape=())
    b = tf.placeholder(tf.float32, shape=(3, 2))
    enqueue = q.enqueue((a, b))
    with tf.Session(target) as sess:
        sess.run(enqueue, feed_dict={a: 10, b: [[1., 2.], [3., 4.], [5., 6.]]})
        sess.run(enqueue, feed_dict={a: 11, b: [[2., 4.], [6., 8.], [0., 2.]]})
        sess.run(enqueue, feed_dict={a: 12, b: [[3., 6.], [9., 2.], [5., 8.]]})
    dequeue_a, dequeue_b = q.dequeue()
    with tf.Session(target) as sess:
        a_val, b_val = sess.run([dequeue_a, dequeue_b])
        print(a_val)  # 10
        print(b_val)  # [[1., 2.], [3., 4.], [5., 6.]]
    batch_size = 2
    dequeue_as, dequeue_bs = q.dequeue_many(batch_size)
    with tf.Session(target) as sess:
        a, b = sess.run([dequeue_as, dequeue_bs])
        print(a)  # [11, 12]
        print(b)
        try:
            sess.run([dequeue_as, dequeue_bs], options=BLOCKED)
        except tf.errors.DeadlineExceededError:
            print("blocked waiting for another pair")

    print("== closing a queue ==")
    close_q = q.close()
    late = q.enqueue((13, np.zeros([3, 2], np.float32)))
    with tf.Session(target) as sess:
        sess.run(close_q)
        try:
            sess.run(late)
        except tf.errors.CancelledError as e:
            print("enqueue after close:", type(e).__name__)
    tf.Session.reset(target)

    print("== RandomShuffleQueue ==")
    tf.reset_default_graph()
    q = tf.RandomShuffleQueue(capacity=50, min_after_dequeue=10,
                              dtypes=[tf.float32], shapes=[()],
                              name="q", shared_name="shared_q")
    values = tf.placeholder(tf.float32, [None])
    with tf.Session(target) as sess:
        sess.run(q.enqueue_many([values]), {values: np.arange(22)})
        dequeue = q.dequeue_many(5)
        print(len(sess.run(dequeue)), "items (17 left)")
        print(len(sess.run(dequeue)), "items (12 left)")
        try:
            sess.run(dequeue, options=BLOCKED)
        except tf.errors.DeadlineExceededError:
            print("12 - 5 < 10: blocked waiting for 3 more instances")
    tf.Session.reset(target)

    print("== PaddingFIFOQueue ==")
    tf.reset_default_graph()
    q = tf.PaddingFIFOQueue(capacity=50, dtypes=[tf.float32],
                            shapes=[(None, None)], name="q",
                            shared_name="shared_q")
    v = tf.placeholder(tf.float32, shape=(None, None))
    enqueue = q.enqueue([v])
    with tf.Session(target) as sess:
        sess.run(enqueue, feed_dict={v: [[1., 2.], [3., 4.], [5., 6.]]})
        sess.run(enqueue, feed_dict={v: [[1.]]})
        sess.run(enqueue, feed_dict={v: [[7., 8., 9., 5.], [6., 7., 8., 9.]]})
        print(sess.run(q.dequeue_many(3)))
    tf.Session.reset(target)

    print("== preloading the training set into a variable ==")
    tf.reset_default_graph()
    n_features = 2
    training_set_init = tf.placeholder(tf.float32, shape=(None, n_features))
    # The book's exact call: TensorFlow refuses it too (the placeholder's
    # first dimension is unknown).
    try:
        tf.Variable(training_set_init, trainable=False, collections=[],
                    name="training_set")
    except tf.errors.InvalidArgumentError as e:
        print("refused:", e)
    # validate_shape=False lets the variable take the fed shape.
    training_set = tf.Variable(training_set_init, trainable=False,
                               collections=[], validate_shape=False,
                               name="training_set")
    with tf.Session(target) as sess:
        data = [[1., 2.], [3., 4.], [5., 6.]]
        sess.run(training_set.initializer,
                 feed_dict={training_set_init: data})
        print(sess.run(training_set))
    print("in GLOBAL_VARIABLES:", training_set.name in
          [v.name for v in tf.global_variables()])
    print("trainable:", training_set.trainable)
    server.stop()


if __name__ == "__main__":
    main()
