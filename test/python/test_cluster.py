"""Clusters from Python: ClusterSpec, Servers in the process, and a Python
client of C++ actorflow-node tasks (issue 32 §1)."""

import json
import time

import numpy as np
import pytest

import actorflow as tf

from conftest import loopback


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_cluster_spec_reads_as_tf_does():
    spec = tf.train.ClusterSpec({"ps": ["h:1", "h:2"],
                                 "worker": {0: "h:3", 3: "h:4"}})
    assert sorted(spec.jobs) == ["ps", "worker"]
    assert spec.num_tasks("ps") == 2
    assert spec.num_tasks("worker") == 2
    assert spec.task_indices("worker") == [0, 3]
    assert spec.task_address("ps", 1) == "h:2"
    assert spec.task_address("worker", 3) == "h:4"
    assert spec.job_tasks("worker") == ["h:3", None, None, "h:4"]
    assert spec.as_dict() == {"ps": ["h:1", "h:2"],
                              "worker": {0: "h:3", 3: "h:4"}}
    assert tf.train.ClusterSpec(spec.as_dict()) == spec
    with pytest.raises(ValueError, match="No such job"):
        spec.task_address("chief", 0)
    with pytest.raises(TypeError, match="must be a dictionary"):
        tf.train.ClusterSpec(["h:1"])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.train.ClusterSpec({"": ["h:1"]})


def test_two_servers_share_a_variable():
    spec = tf.train.ClusterSpec({"ps": [loopback()], "worker": [loopback()]})
    ps = tf.train.Server(spec, job_name="ps", task_index=0)
    worker = tf.train.Server(spec, job_name="worker", task_index=0)
    assert worker.target.startswith(("grpc://", "caf://"))
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(0.0, name="shared")
    inc = v.assign_add(1.0)
    with tf.Session(worker.target) as s:
        s.run(v.initializer)
        for _ in range(3):
            s.run(inc)
    # Another session, on the other server, sees the same variable.
    with tf.Session(ps.target) as s:
        assert s.run(v) == 3.0
    worker.stop()
    ps.stop()


def test_a_bad_server_is_refused_with_tf_errors():
    spec = {"local": ["localhost"]}
    with pytest.raises(tf.errors.InvalidArgumentError, match="port"):
        tf.train.Server(spec, job_name="local", task_index=0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.train.Server({"local": [loopback()]}, job_name="nope",
                        task_index=0)
    with pytest.raises(tf.errors.NotFoundError, match="no target"):
        tf.Session("this is no target")


def test_a_python_client_of_cpp_nodes(nodes):
    cluster = {"ps": [loopback()], "worker": [loopback()]}
    text = json.dumps(cluster)
    nodes(text, "ps", 0)
    nodes(text, "worker", 0)
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.zeros([2, 2], np.float32), name="w")
    with tf.device("/job:worker/task:0"):
        x = tf.placeholder(tf.float32, [2, 2])
        y = tf.matmul(x, w + 1.0)
    with tf.Session("grpc://" + cluster["worker"][0]) as s:
        s.run(tf.global_variables_initializer())
        out = s.run(y, feed_dict={x: np.eye(2, dtype=np.float32)})
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_a_cpp_client_of_python_servers():
    import os
    import subprocess
    client = os.environ.get("ACTORFLOW_COUNTER_CLIENT")
    if not client:
        pytest.skip("ACTORFLOW_COUNTER_CLIENT names no counter_client")
    spec = tf.train.ClusterSpec({"ps": [loopback(), loopback()]})
    servers = [tf.train.Server(spec, "ps", i) for i in range(2)]
    target = servers[0].target

    def counter(*args):
        done = subprocess.run([client, target] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip()

    # The C++ process makes the variables, runs steps and reads them.
    counter("init")
    assert counter("run", "25") == "done 25 errors 0"
    assert counter("read") == "c0 25 c1 25 global_step 25"
    # This Python process sees the same variables by name.
    with tf.device("/job:ps/task:1"):
        c1 = tf.Variable(0, dtype=tf.int64, name="c1")
    with tf.Session(servers[1].target) as s:
        assert s.run(c1) == 25
    for server in servers:
        server.stop()


CTRL_C_PROGRAM = r'''
import sys
import actorflow as tf
with tf.device("/job:ps/task:0"):
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="ctrl_c")
    x = tf.placeholder(tf.float32, [])
    enqueue = q.enqueue([x])
    dequeue = q.dequeue()
with tf.Session(sys.argv[1]) as sess:
    print("waiting", flush=True)
    try:
        sess.run(dequeue)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sess.run(enqueue, {x: 5.0})
    print("dequeued", sess.run(dequeue), flush=True)
    print("size", sess.run(q.size()), flush=True)
'''


def test_ctrl_c_in_a_client_of_a_cpp_node_withdraws_its_dequeue(nodes):
    """A user presses Ctrl-C while the program waits on the ps's queue: the
    program gets KeyboardInterrupt, and the ps's queue keeps the element
    enqueued afterwards for the next dequeue (the cancelled one took
    nothing)."""
    import os
    import signal
    import subprocess
    import sys
    cluster = {"ps": [loopback()]}
    nodes(json.dumps(cluster), "ps", 0)
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_PROGRAM, "grpc://" + cluster["ps"][0]],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ))
    try:
        assert proc.stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # the dequeue is on its way to the ps, or waiting
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert out.split("\n")[:3] == ["interrupted", "dequeued 5.0", "size 0"], out
