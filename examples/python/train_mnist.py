"""Trains an MLP on Fashion-MNIST across a ps and workers, written as a TF
1.x user writes TensorFlow's "putting it all together" trainer: one
program per task (--ps_hosts, --worker_hosts, --job_name, --task_index),
between-graph replication with replica_device_setter, and
MonitoredTrainingSession with a StopAtStepHook. `--local N` starts the
ps and N workers as processes of this program on free loopback ports.

    python3 train_mnist.py --local 2
    python3 train_mnist.py --ps_hosts h:2221 --worker_hosts h:2222,h:2223 \\
        --job_name worker --task_index 0
"""

import argparse
import gzip
import os
import socket
import subprocess
import sys
import time

import numpy as np

import actorflow as tf



def load(data, kind):
    with gzip.open(os.path.join(data, kind + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(data, kind + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return (images.reshape(-1, 784).astype(np.float32) / 255.0,
            labels.astype(np.int32))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local(args):
    """The ps and `args.local` workers as processes of this program."""
    ps = "127.0.0.1:%d" % free_port()
    workers = ["127.0.0.1:%d" % free_port() for _ in range(args.local)]
    common = [sys.executable, os.path.abspath(__file__), "--ps_hosts", ps,
              "--worker_hosts", ",".join(workers),
              "--train_steps", str(args.train_steps),
              "--hidden", args.hidden, "--batch_size", str(args.batch_size),
              "--learning_rate", str(args.learning_rate),
              "--log_every", str(args.log_every), "--data_dir", args.data_dir]
    ps_proc = subprocess.Popen(common + ["--job_name", "ps",
                                         "--task_index", "0"])
    procs = [subprocess.Popen(common + ["--job_name", "worker",
                                        "--task_index", str(i)])
             for i in range(args.local)]
    try:
        codes = [p.wait() for p in procs]
    finally:
        for p in procs + [ps_proc]:
            if p.poll() is None:
                p.terminate()
                p.wait()
    return max(codes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ps_hosts", default="")
    parser.add_argument("--worker_hosts", default="")
    parser.add_argument("--job_name", default="")
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--local", type=int, default=0)
    parser.add_argument("--train_steps", type=int, default=3000)
    parser.add_argument("--hidden", default="256,128")
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--learning_rate", type=float, default=0.001)
    parser.add_argument("--log_every", type=int, default=500,
                        help="steps between progress lines")
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist",
                        help="Fashion-MNIST (Debian's dataset-fashion-mnist)")
    args = parser.parse_args()
    if args.local:
        return run_local(args)

    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","),
                                    "worker": args.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=args.job_name,
                             task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return 0

    who = "worker %d" % args.task_index
    xs, ys = load(args.data_dir, "train")
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index,
            cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        layer = x
        width = 784
        for i, units in enumerate(int(h) for h in args.hidden.split(",")):
            w = tf.Variable(tf.truncated_normal([width, units], stddev=0.05,
                                                seed=i + 1),
                            name="hidden%d/weights" % (i + 1))
            b = tf.Variable(tf.zeros([units]), name="hidden%d/biases" % (i + 1))
            layer = tf.nn.relu(tf.nn.bias_add(tf.matmul(layer, w), b))
            width = units
        w = tf.Variable(tf.truncated_normal([width, 10], stddev=0.05, seed=99),
                        name="logits/weights")
        b = tf.Variable(tf.zeros([10]), name="logits/biases")
        logits = tf.nn.bias_add(tf.matmul(layer, w), b)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

    chief = args.task_index == 0
    rng = np.random.RandomState(args.task_index)
    hooks = [tf.train.StopAtStepHook(last_step=args.train_steps)]
    start = time.time()
    local_step = 0
    window_start, window_loss = start, 0.0
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           is_chief=chief,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            batch = rng.randint(0, len(xs), args.batch_size)
            _, step, value = sess.run([train_op, global_step, loss],
                                      {x: xs[batch], y: ys[batch]})
            local_step += 1
            window_loss += value
            if local_step % args.log_every == 0:
                now = time.time()
                print("%s: step %d (global %d) loss %.4f examples/s %.0f" % (
                    who, local_step, step, window_loss / args.log_every,
                    args.log_every * args.batch_size / (now - window_start)),
                    flush=True)
                window_start, window_loss = now, 0.0
    seconds = time.time() - start
    print("%s: done: %d local steps, %.0f examples/s" % (
        who, local_step, local_step * args.batch_size / seconds), flush=True)
    if chief:
        test_x, test_y = load(args.data_dir, "t10k")
        with tf.Session(server.target) as sess:
            print("test accuracy: %.4f" % sess.run(
                accuracy, {x: test_x, y: test_y}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
