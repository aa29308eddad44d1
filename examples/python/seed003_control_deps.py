"""Seed 003 (Hands-On ML, ch. 12, "Control Dependencies" and "Opening a
Session"), as its reader writes it: only the import line and the
addresses differ (free loopback ports instead of machine-a and
machine-b, and the three servers in this process, as the book allows
for tests).
"""

import socket

import actorflow as tf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


a = tf.constant(1.0)
b = a + 2.0

with tf.control_dependencies([a, b]):
    x = tf.constant(3.0)
    y = tf.constant(4.0)

z = x + y

with tf.Session() as sess:
    print("z =", z.eval())
print("control inputs of x:", [op.name for op in x.op.control_inputs])

machine_a = "127.0.0.1"
machine_b = "127.0.0.1"
cluster_spec = tf.train.ClusterSpec({
    "ps": [
        "%s:%d" % (machine_a, free_port()),  # /job:ps/task:0
    ],
    "worker": [
        "%s:%d" % (machine_a, free_port()),  # /job:worker/task:0
        "%s:%d" % (machine_b, free_port()),  # /job:worker/task:1
    ]
})
servers = [tf.train.Server(cluster_spec, job_name="ps", task_index=0),
           tf.train.Server(cluster_spec, job_name="worker", task_index=0),
           tf.train.Server(cluster_spec, job_name="worker", task_index=1)]

tf.reset_default_graph()
a = tf.constant(1.0)
b = a + 2
c = a * 3

with tf.Session("grpc://" + cluster_spec.task_address("worker", 1)) as sess:
    print(c.eval())  # 3.0 (the book's "9.0" is a typo: a is 1.0)
