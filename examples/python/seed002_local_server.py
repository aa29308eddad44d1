"""Seed 002 ("First Insight of TensorFlow Architecture"), as its reader
writes it: only the import line and the addresses differ (free loopback
ports instead of ps0.example.com and friends, and the five servers in
this process). A single-process cluster says hello; ClusterSpec's API;
a two-layer net with its weights on two ps tasks and its compute on a
worker.
"""

import socket

import numpy as np

import actorflow as tf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


c = tf.constant('Hello, distributed TensorFlow!')
server = tf.train.Server.create_local_server()
sess = tf.Session(server.target)
print(sess.run(c))

dict = {  # noqa: A001 (the seed's name)
    'ps': ['127.0.0.1:%d' % free_port() for _ in range(2)],
    'worker': ['127.0.0.1:%d' % free_port() for _ in range(3)]}
cluster = tf.train.ClusterSpec(dict)
print(">>> cluster.jobs")
print(cluster.jobs)
print(">>> cluster.as_cluster_def()")
print(cluster.as_cluster_def(), end="")
print(">>> cluster.as_dict() == dict")
print(cluster.as_dict() == dict)
print(">>> cluster.job_tasks('worker') == dict['worker']")
print(cluster.job_tasks('worker') == dict['worker'])
print(">>> cluster.num_tasks('worker')")
print(cluster.num_tasks('worker'))
print(">>> cluster.task_address('worker', 2) == dict['worker'][2]")
print(cluster.task_address('worker', 2) == dict['worker'][2])
print(">>> cluster.task_indices('worker')")
print(cluster.task_indices('worker'))

servers = [tf.train.Server(cluster, job_name=job, task_index=i)
           for job in ('ps', 'worker')
           for i in range(cluster.num_tasks(job))]

with tf.device('/job:ps/task:0'):
    w1 = tf.Variable(tf.random_normal([4, 8], seed=1), name='w1')
    b1 = tf.Variable(tf.zeros([8]), name='b1')

with tf.device('/job:ps/task:1'):
    w2 = tf.Variable(tf.random_normal([8, 3], seed=2), name='w2')
    b2 = tf.Variable(tf.zeros([3]), name='b2')

with tf.device("/job:worker/task:2"):
    input = tf.placeholder(tf.float32, [None, 4], name='input')  # noqa: A001
    labels = tf.placeholder(tf.int32, [None], name='labels')
    layer_1 = tf.nn.relu(tf.matmul(input, w1) + b1)
    logits = tf.nn.relu(tf.matmul(layer_1, w2) + b2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)

for v in (w1, b1, w2, b2):
    print(v.op.name + ":", v.device)
print("logits:", logits.device)

rng = np.random.RandomState(0)
xs = rng.randn(32, 4).astype(np.float32)
ys = rng.randint(0, 3, 32).astype(np.int32)
with tf.Session("grpc://" + dict['worker'][2]) as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, {input: xs, labels: ys})
    for _ in range(100):
        sess.run(train_op, {input: xs, labels: ys})
    print("logits shape:", sess.run(logits, {input: xs}).shape)
    print("loss went down:", sess.run(loss, {input: xs, labels: ys}) < first)
