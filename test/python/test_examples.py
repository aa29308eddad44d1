"""The seed documents' programs in examples/python/, run as a user runs
them, print what the seeds print (issue 32 §2)."""

import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "examples", "python")


def run(name):
    # What the program prints is its stdout; the engine logs to stderr.
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_seed000_two_engines_then_a_shared_variable_and_its_placement():
    out = run("seed000_shared_variable.py")
    lines = out.splitlines()
    assert lines[:10] == [
        "Initial value of var in session 1: 0.0",
        "Initial value of var in session 2: 0.0",
        "Incremented var in session 1",
        "Value of var in session 1: 1.0",
        "Value of var in session 2: 0.0",
        "Initial value of var in session 1: 0.0",
        "Initial value of var in session 2: 0.0",
        "Incremented var in session 1",
        "Value of var in session 1: 1.0",
        "Value of var in session 2: 1.0",
    ]
    task0 = "/job:local/replica:0/task:0/device:CPU:0"
    task1 = "/job:local/replica:0/task:1/device:CPU:0"
    # The seed's traces, in its order: var on task 0 from both sessions;
    # var1 on task 0, var2 on task 1 whichever session runs them. Within a
    # trace, devices and the nodes of a device may come in another order
    # (they run concurrently): each trace is compared as a multiset of
    # (device, sorted nodes).
    blocks = []
    for line in lines[10:]:
        if line.startswith("/job:"):
            blocks.append((line, []))
        else:
            blocks[-1][1].append(line.strip())
    expected = [
        [(task0, ["_SOURCE", "var"])],
        [(task0, ["_SOURCE", "AssignAdd_1/value", "var", "AssignAdd_1"])],
        [(task1, ["RecvTensor"]), (task1, ["_SOURCE"]),
         (task0, ["_SOURCE", "var"])],
        [(task0, ["_SOURCE", "var1"])],
        [(task0, ["RecvTensor"]), (task0, ["_SOURCE"]),
         (task1, ["_SOURCE", "var2"])],
        [(task1, ["_SOURCE", "var2"])],
    ]
    assert len(blocks) == sum(len(t) for t in expected), out
    at = 0
    for trace in expected:
        got = blocks[at:at + len(trace)]
        at += len(trace)
        assert sorted((d, sorted(n)) for d, n in got) == sorted(
            (d, sorted(n)) for d, n in trace), out
    # The update runs after its inputs.
    update = blocks[1][1]
    assert update.index("AssignAdd_1") > update.index("var")


def test_seed003_control_dependencies_and_a_session_on_worker_1():
    out = run("seed003_control_deps.py")
    assert out.splitlines() == [
        "z = 7.0",
        "control inputs of x: ['Const', 'add']",
        "3.0",
    ]


def test_seed002_hello_cluster_spec_and_a_net_on_two_ps_tasks():
    out = run("seed002_local_server.py")
    lines = out.splitlines()
    assert lines[0] == "b'Hello, distributed TensorFlow!'"
    assert lines[1:3] == [">>> cluster.jobs", "['ps', 'worker']"]
    assert 'job {\n  name: "ps"\n  tasks {\n    value: "127.0.0.1:' in out
    assert '  tasks {\n    key: 2\n' in out
    tail = lines[lines.index(">>> cluster.as_dict() == dict"):]
    assert tail == [
        ">>> cluster.as_dict() == dict", "True",
        ">>> cluster.job_tasks('worker') == dict['worker']", "True",
        ">>> cluster.num_tasks('worker')", "3",
        ">>> cluster.task_address('worker', 2) == dict['worker'][2]", "True",
        ">>> cluster.task_indices('worker')", "[0, 1, 2]",
        "w1: /job:ps/task:0", "b1: /job:ps/task:0",
        "w2: /job:ps/task:1", "b2: /job:ps/task:1",
        "logits: /job:worker/task:2",
        "logits shape: (32, 3)",
        "loss went down: True",
    ]


def test_seed001_cluster_spec_pinning_and_a_reduce_across_two_workers():
    out = run("seed001_cluster_reduce.py")
    lines = out.splitlines()
    assert lines[0] == "['ps', 'worker']"
    assert lines[1].startswith("ps ['127.0.0.1:")
    assert lines[2].startswith("worker ['127.0.0.1:")
    assert lines[3:] == [
        "['/job:worker/task:0', '/job:worker/task:1']",
        "['/job:ps/task:0', '/job:ps/task:1']",
        "''",
        "'/job:ps/task:1'",
        "/job:worker/task:0",
        "/job:worker/task:1",
        "1000",
        "''",
    ]


def test_train_mnist_across_a_ps_and_two_worker_processes():
    if not os.path.exists("/usr/share/datasets/fashion-mnist"):
        import pytest
        pytest.skip("Fashion-MNIST is not installed (dataset-fashion-mnist)")
    done = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "train_mnist.py"),
         "--local", "2", "--train_steps", "600", "--hidden", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "worker 0: done: " in out and "worker 1: done: " in out, out
    accuracy = float(out.split("test accuracy: ")[1].split()[0])
    assert accuracy > 0.75, out


def test_seed004_containers_queues_between_processes_and_preloading():
    out = run("seed004_queues.py")
    expected_in_order = [
        "== containers ==",
        "x (container my_problem_1) = 5.0",
        "y in a new session = 1.0",
        "x must be initialized again",
        "--- training_data_loader.py",
        "enqueued [1. 2.], [3. 4.], [5. 6.]",
        "enqueued many [[1. 2.] [3. 4.] [5. 6.]]",
        "--- trainer.py",
        "[1. 2.]", "[3. 4.]", "[5. 6.]", "[[1. 2.]", " [3. 4.]]",
        "blocked waiting for another instance",
        "== queues of tuples ==",
        "10",
        "[11 12]",
        "blocked waiting for another pair",
        "enqueue after close: CancelledError",
        "5 items (17 left)", "5 items (12 left)",
        "12 - 5 < 10: blocked waiting for 3 more instances",
        "== PaddingFIFOQueue ==",
        "[[[1. 2. 0. 0.]",
        " [[1. 0. 0. 0.]",
        "refused: initial_value must have a shape specified: Placeholder:0 "
        "(Variable 'training_set')",
        "in GLOBAL_VARIABLES: False",
        "trainable: False",
    ]
    lines = out.splitlines()
    at = 0
    for want in expected_in_order:
        assert want in lines[at:], (want, out)
        at = lines.index(want, at) + 1
