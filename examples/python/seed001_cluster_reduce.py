"""Seed 001 (the notebook "Clustered TensorFlow"), as its user wrote it:
only the import line and the addresses differ (free loopback ports
instead of the clustered-tensorflow-* pods, whose servers
(`launch_worker`) run in this process, without join()). A ClusterSpec
of two ps and two worker tasks, pinning of variables, and a reduce sum
split across the two workers.
"""

import ast
import socket

import numpy as np

import actorflow as tf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ports = [free_port() for _ in range(4)]
CLUSTER_SPEC = """
{
    'ps' : ['127.0.0.1:%d', '127.0.0.1:%d'],
    'worker' : [ '127.0.0.1:%d','127.0.0.1:%d']
}
""" % tuple(ports)

cluster_def = ast.literal_eval(CLUSTER_SPEC)
clusterSpec = tf.train.ClusterSpec(cluster_def)
print(clusterSpec.jobs)
for job in clusterSpec.jobs:
    print(job, clusterSpec.job_tasks(job))

workers = ['/job:worker/task:{}'.format(i)
           for i in range(len(cluster_def['worker']))]
param_servers = ['/job:ps/task:{}'.format(i)
                 for i in range(len(cluster_def['ps']))]
print(workers)
print(param_servers)

l = tf.Variable("local_cpu")  # noqa: E741 (the seed's name)
print(repr(l.device))

for ps in param_servers:
    with tf.device(ps):
        v = tf.Variable("my_var")
print(repr(v.device))


def launch_worker(job_name, task_id, cluster_def):
    server = tf.train.Server(
        cluster_def,
        job_name=job_name,
        task_index=task_id
    )
    return server  # the seed's server.join() would block here


servers = [launch_worker(job, i, cluster_def)
           for job in ("ps", "worker")
           for i in range(len(cluster_def[job]))]

batch_size = 1000

graph = tf.Graph()
with graph.as_default():
    all_reduce = []

    initializer = tf.truncated_normal_initializer(mean=0.0, stddev=1.0,
                                                  seed=None, dtype=tf.float32)

    with tf.device(tf.train.replica_device_setter(cluster=clusterSpec)):
        input_array = tf.placeholder(tf.int32, shape=[None])
        final_result = tf.Variable(0)

    # divide the input across the cluster:
    splitted = tf.split(0, len(workers), input_array)
    for idx, (portion, worker) in enumerate(zip(splitted, workers)):
        with tf.device(worker):
            print(worker)
            local_reduce = tf.reduce_sum(portion)
            local_reduce = tf.Print(portion, [local_reduce],
                                    message="portion is")
            all_reduce.append(local_reduce)

    final_result = tf.reduce_sum(tf.pack(all_reduce))

sess_config = tf.ConfigProto(
    allow_soft_placement=True,
    log_device_placement=True)

run_options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)

with tf.Session("grpc://" + cluster_def['worker'][0], graph=graph) as session:
    result = session.run(final_result,
                         feed_dict={input_array: np.ones([1000])},
                         options=run_options)
    print(result)

print(repr(final_result.device))
