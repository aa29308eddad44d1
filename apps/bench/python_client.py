#!/usr/bin/python3
"""actorflow-bench's Python side (the python group, apps/bench/python.cpp).

Measures from Python what the bench measures from C++ in the same run, and
prints one JSON line per figure:

    step_local                      an in-process tf.Session fetching one
                                    constant: {"us_per_run", "runs"}
    transfer --cluster JSON --mib N as worker task 1 of the bench's cluster,
                                    a session on this process's server
                                    fetching the ps's N MiB float32 variable
                                    (made and initialized by the bench) and
                                    feeding an N MiB array to a reduce_sum on
                                    the ps: {"fetch_mb_per_s", "feed_mb_per_s"}

Timing as the bench's measure(): untimed warm-up runs, then runs until the
budget has passed, the median rate of five consecutive slices.
"""

import argparse
import json
import sys
import time

import numpy as np

import actorflow as tf


def measure(op, seconds, warmup):
    for _ in range(warmup):
        op()
    done = []
    start = time.perf_counter()
    while True:
        op()
        done.append(time.perf_counter())
        if len(done) >= 5 and done[-1] - start >= seconds:
            break
    # The median of five slices' rates (a slow moment of a shared host
    # moves one slice, not the figure).
    rates = []
    for s in range(5):
        first = len(done) * s // 5
        last = len(done) * (s + 1) // 5
        begin = start if first == 0 else done[first - 1]
        rates.append((last - first) / (done[last - 1] - begin))
    rates.sort()
    return rates[2], len(done)


def step_local(args):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0, name="c")
    with tf.Session(graph=g) as sess:
        per_second, runs = measure(lambda: sess.run(c), args.seconds, 10)
    return {"figure": "step_local", "us_per_run": 1e6 / per_second,
            "runs": runs}


def transfer(args):
    spec = tf.train.ClusterSpec(json.loads(args.cluster))
    server = tf.train.Server(spec, job_name="worker", task_index=1)
    n = args.mib * (1 << 20) // 4
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.zeros([n]), name="python_transfer_%dmib" % args.mib)
        x = tf.placeholder(tf.float32, [n], name="fed")
        total = tf.reduce_sum(x)
    fed = np.ones([n], np.float32)
    mb = n * 4 / 1e6
    with tf.Session(server.target) as sess:
        fetches, fetch_runs = measure(lambda: sess.run(v), args.seconds, 2)
        feeds, feed_runs = measure(lambda: sess.run(total, {x: fed}),
                                   args.seconds, 2)
    server.stop()
    return {"figure": "transfer", "fetch_mb_per_s": fetches * mb,
            "fetch_runs": fetch_runs, "feed_mb_per_s": feeds * mb,
            "feed_runs": feed_runs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["step_local", "transfer"])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--cluster", default="")
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    out = step_local(args) if args.mode == "step_local" else transfer(args)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
