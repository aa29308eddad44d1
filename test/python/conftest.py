"""Shared helpers of the Python front end's tests (issue 32)."""

import os
import socket
import subprocess
import time

import pytest


def free_port():
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback():
    return "127.0.0.1:%d" % free_port()


class Node:
    """An actorflow-node process serving one task; stopped (and reaped) at
    the end of the test."""

    def __init__(self, cluster_json, job, task):
        path = os.environ.get("ACTORFLOW_NODE")
        if not path:
            pytest.skip("ACTORFLOW_NODE names no actorflow-node")
        self.proc = subprocess.Popen(
            [path, "--cluster", cluster_json, "--job_name", job,
             "--task_index", str(task)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        self.lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if "serving" in line or "listening" in line:
                return
        self.stop()
        raise RuntimeError("actorflow-node did not start:\n"
                           + "".join(self.lines))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def nodes():
    started = []

    def start(cluster_json, job, task):
        n = Node(cluster_json, job, task)
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()


def run_interrupted(run, *args):
    """Calls run(*args), which must block, with a SIGINT to this process
    0.3 s in (Ctrl-C, as a user presses it): asserts that it raises
    KeyboardInterrupt within the main thread's 100 ms look for signals,
    not at some deadline."""
    import signal
    import threading
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run(*args)
    finally:
        timer.join()
    assert time.monotonic() - started < 5
