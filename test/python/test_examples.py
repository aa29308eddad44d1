"""The seed documents' programs in examples/python/, run as a user runs
them, print what the seeds print (issue 32 §2)."""

import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "examples", "python")


def run(name):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout
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
