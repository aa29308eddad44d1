#!/usr/bin/env python3
"""actorflow-bench's PyTorch peer (issue 35 §1; docs/PERFORMANCE.md,
"The PyTorch peer"): the job actorflow-train --local 2 --model mlp does,
done the two ways PyTorch users do it, with Debian's PyTorch.

  async  a parameter server with torch.distributed.rpc: one ps process
         applies Adam; each worker fetches the parameters, computes a
         gradient on its own batch and sends it in one RPC that answers
         the updated parameters (PyTorch's parameter-server tutorials'
         "update and fetch").
  sync   DistributedDataParallel on gloo: every worker's gradient is
         averaged (all-reduce) and each applies the same Adam step.

The model, data and optimizer are actorflow-train's mlp: 784-256-128-10
with ReLU, Glorot-uniform weights and zero biases, softmax cross entropy,
Adam (lr 0.001), batches of 100 drawn from each worker's own shuffle of
Fashion-MNIST (Debian's dataset-fashion-mnist), pixels scaled to [0, 1].
Each process runs one intra-op thread (torch.set_num_threads(1)); no
process is pinned to a core, as actorflow's are not.

Prints the trainer-like lines "worker K: step S ... examples/s R" every
--log_every steps, "worker 0: step S test accuracy A after T s" for every
scoring of worker 0 (every --eval_every of its steps; seconds since its
first step, scoring included) and, last, one JSON line with the figures.
--stop_at A ends the run once worker 0 scored A or better.

Every process it starts dies with it (PR_SET_PDEATHSIG).
"""

import argparse
import ctypes
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np


def die_with_parent():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        data = f.read()
    if images:
        n, rows, cols = (int.from_bytes(data[i:i + 4], "big")
                         for i in (4, 8, 12))
        return np.frombuffer(data, np.uint8, n * rows * cols, 16).reshape(
            n, rows * cols)
    n = int.from_bytes(data[4:8], "big")
    return np.frombuffer(data, np.uint8, n, 8).astype(np.int64)


def load(data_dir, split):
    x = read_idx(os.path.join(data_dir, split + "-images-idx3-ubyte.gz"), True)
    y = read_idx(os.path.join(data_dir, split + "-labels-idx1-ubyte.gz"),
                 False)
    return x.astype(np.float32) / 255.0, y


def build_model(torch, seed):
    torch.manual_seed(seed)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(),
                          nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


class batches:
    """Each worker's own shuffle, reshuffled every epoch."""

    def __init__(self, torch, x, y, size, seed):
        self.torch, self.x, self.y, self.size = torch, x, y, size
        self.rng = np.random.default_rng(seed)
        self.order, self.at = self.rng.permutation(len(x)), 0

    def next(self):
        if self.at + self.size > len(self.order):
            self.order, self.at = self.rng.permutation(len(self.x)), 0
        idx = self.order[self.at:self.at + self.size]
        self.at += self.size
        return (self.torch.from_numpy(self.x[idx]),
                self.torch.from_numpy(self.y[idx]))


def accuracy(torch, model, x, y):
    with torch.no_grad():
        right = 0
        for begin in range(0, len(x), 1000):
            out = model(torch.from_numpy(x[begin:begin + 1000]))
            right += int((out.argmax(1).numpy() == y[begin:begin + 1000])
                         .sum())
    return right / len(x)


class reporter:
    """The log lines and the worker's figures."""

    def __init__(self, args, rank, test):
        self.args, self.rank, self.test = args, rank, test
        self.start = None
        self.window = None
        self.rates = []
        self.scores = []
        self.reached = None

    def step_done(self, step, torch, model):
        """After local step `step` (1-based); True once the run may stop."""
        now = time.perf_counter()
        if self.start is None:
            self.start = self.window = now
        a = self.args
        if step % a.log_every == 0:
            rate = a.log_every * a.batch / max(now - self.window, 1e-9)
            self.rates.append(rate)
            print("worker %d: step %d, examples/s %.1f" % (self.rank, step,
                                                           rate), flush=True)
            self.window = time.perf_counter()
        if self.rank == 0 and a.eval_every > 0 and step % a.eval_every == 0:
            acc = accuracy(torch, model, *self.test)
            after = time.perf_counter() - self.start
            self.scores.append((step, acc, after))
            print("worker 0: step %d test accuracy %.4f after %.1f s"
                  % (step, acc, after), flush=True)
            if self.reached is None and a.stop_at > 0 and acc >= a.stop_at:
                self.reached = after
            self.window = time.perf_counter()
        return self.reached is not None

    def summary(self, steps):
        # The first window includes start-up, as actorflow-bench reads
        # actorflow-train's.
        rates = sorted(self.rates[1:] or self.rates)
        return {"rank": self.rank, "steps": steps,
                "examples_per_s": rates[len(rates) // 2] if rates else None,
                "windows": len(rates),
                "seconds": (time.perf_counter() - self.start
                            if self.start else 0.0),
                "scores": self.scores, "reached": self.reached}


# -- async: torch.distributed.rpc ------------------------------------------

_ps = None


class parameter_server:
    def __init__(self, torch, args):
        self.torch = torch
        self.model = build_model(torch, args.seed)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=args.learning_rate)
        self.lock = threading.Lock()
        self.updates = 0
        self.stop = False

    def snapshot(self):
        return [p.detach().clone() for p in self.params]


def ps_fetch():
    with _ps.lock:
        return _ps.snapshot()


def ps_update_and_fetch(grads):
    """Applies one worker's gradient with Adam and answers the parameters
    after it, and whether the run ends."""
    with _ps.lock:
        for p, g in zip(_ps.params, grads):
            p.grad = g
        _ps.opt.step()
        _ps.updates += 1
        return _ps.snapshot(), _ps.stop


def ps_stop():
    with _ps.lock:
        _ps.stop = True


def run_async(torch, args, rank, train, test):
    import torch.distributed.rpc as rpc
    global _ps
    # Across hosts TensorPipe must not take its same-machine paths
    # (shared memory, cross-memory attach): the simulated hosts are one
    # machine. TCP alone ("uv"), its data on the connection ("basic").
    extra = ({"_transports": ["uv"], "_channels": ["basic"]}
             if args.tcp_only else {})
    opts = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=4, rpc_timeout=120,
        init_method="tcp://%s:%d" % (args.master_addr, args.port), **extra)
    world = args.workers + 1
    if rank < 0:
        _ps = parameter_server(torch, args)
        rpc.init_rpc("ps", rank=0, world_size=world, rpc_backend_options=opts)
        rpc.shutdown()  # waits for every worker
        print(json.dumps({"role": "ps", "updates": _ps.updates}), flush=True)
        return
    rpc.init_rpc("worker%d" % rank, rank=rank + 1, world_size=world,
                 rpc_backend_options=opts)
    model = build_model(torch, args.seed)
    params = list(model.parameters())
    data = batches(torch, *train, args.batch, args.seed + 1 + rank)
    report = reporter(args, rank, test)
    values = rpc.rpc_sync("ps", ps_fetch)
    step, stop = 0, False
    loss_fn = torch.nn.CrossEntropyLoss()
    while step < args.steps and not stop:
        with torch.no_grad():
            for p, v in zip(params, values):
                p.copy_(v)
        x, y = data.next()
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        values, stop = rpc.rpc_sync("ps", ps_update_and_fetch,
                                    args=([p.grad for p in params],))
        step += 1
        if rank == 0 and args.eval_every > 0 and step % args.eval_every == 0:
            # Scored on the parameters after its own update.
            with torch.no_grad():
                for p, v in zip(params, values):
                    p.copy_(v)
        if report.step_done(step, torch, model):
            rpc.rpc_sync("ps", ps_stop)
            stop = True
    rpc.shutdown()
    print(json.dumps(report.summary(step)), flush=True)


# -- sync: DistributedDataParallel on gloo -----------------------------------

def run_sync(torch, args, rank, train, test):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo",
                            init_method="tcp://%s:%d" % (args.master_addr,
                                                         args.port),
                            rank=rank, world_size=args.workers)
    model = build_model(torch, args.seed)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.learning_rate)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = batches(torch, *train, args.batch, args.seed + 1 + rank)
    report = reporter(args, rank, test)
    step = 0
    flag = torch.zeros(1)
    while step < args.steps:
        x, y = data.next()
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()
        opt.step()
        step += 1
        # Only worker 0 scores, so only it can have reached the target.
        reached = report.step_done(step, torch, model)
        if args.stop_at > 0 and args.eval_every > 0 \
                and step % args.eval_every == 0:
            # Every worker stops at the same step: worker 0 says when.
            flag.fill_(1.0 if reached else 0.0)
            dist.broadcast(flag, 0)
            if flag.item() > 0:
                break
    dist.destroy_process_group()
    print(json.dumps(report.summary(step)), flush=True)


# -- the launcher --------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    """Starts the processes, relays their lines, prints the JSON line."""
    # The launcher dies with whoever started it (the bench), and its
    # processes with it.
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:
        return 1
    port = free_port()
    ranks = ([-1] if args.mode == "async" else []) + list(range(args.workers))
    # --hosts: each process (the ps first, then the workers) in a network
    # namespace of the bench's simulated network, talking over its device.
    hosts = [h.split(",") for h in args.hosts.split(";")] if args.hosts else []
    if hosts and (len(hosts) < len(ranks) or any(len(h) != 3 for h in hosts)):
        print("torch_peer: --hosts needs NETNS,IP,DEVICE for each of the %d "
              "processes" % len(ranks), file=sys.stderr)
        return 2
    master = hosts[0][1] if hosts else "127.0.0.1"
    procs = []
    for i, rank in enumerate(ranks):
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        argv = [sys.executable, os.path.abspath(__file__), args.mode,
                "--role_rank", str(rank), "--port", str(port),
                "--master_addr", master, "--parent_pid", str(os.getpid())]
        if hosts:
            netns, _, device = hosts[i]
            argv = ["ip", "netns", "exec", netns] + argv + ["--tcp_only"]
            # gloo's and TensorPipe's own addresses: the host's device,
            # not what the machine's host name resolves to.
            env.update(GLOO_SOCKET_IFNAME=device, TP_SOCKET_IFNAME=device)
        for name in ("workers", "steps", "batch", "log_every", "eval_every",
                     "stop_at", "seed", "learning_rate", "data_dir"):
            argv += ["--" + name, str(getattr(args, name))]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, env=env,
                                      text=True, preexec_fn=die_with_parent))
    results = {}

    def relay(rank, proc):
        for line in proc.stdout:
            if line.startswith("{"):
                results[rank] = json.loads(line)
            else:
                sys.stdout.write(line)
                sys.stdout.flush()

    threads = [threading.Thread(target=relay, args=(r, p))
               for r, p in zip(ranks, procs)]
    for t in threads:
        t.start()
    # Every process at once: one that fails ends the run at once (the
    # others may wait for it forever, e.g. the ps in rpc.shutdown()).
    def failure():
        for rank, proc in zip(ranks, procs):
            code = proc.poll()
            if code not in (None, 0):
                return "process %s exited with %d" % (
                    "ps" if rank < 0 else "of worker %d" % rank, code)
        return None

    deadline = time.monotonic() + args.timeout
    while True:
        failed = failure()
        if failed or all(p.poll() is not None for p in procs):
            break
        if time.monotonic() > deadline:
            failed = "timed out after %d s" % args.timeout
            break
        time.sleep(0.1)
    if failed:
        for proc in procs:
            proc.kill()
    for proc in procs:
        proc.wait()
    for t in threads:
        t.join()
    if failed:
        print("torch_peer: " + failed, file=sys.stderr)
        return 1
    workers = [results[r] for r in range(args.workers)]
    rates = [w["examples_per_s"] or 0.0 for w in workers]
    print(json.dumps({
        "mode": args.mode, "torch": __import__("torch").__version__,
        "examples_per_s": sum(rates), "per_worker": rates,
        "steps": [w["steps"] for w in workers],
        "seconds_to_target": workers[0]["reached"],
        "best_accuracy": max([s[1] for s in workers[0]["scores"]],
                             default=None),
        "gemm": os.environ.get("LD_PRELOAD", "") or "stock"}), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["async", "sync"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=2000,
                   help="each worker's steps")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--log_every", type=int, default=100)
    p.add_argument("--eval_every", type=int, default=0,
                   help="worker 0 scores the test set every this many steps")
    p.add_argument("--stop_at", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--learning_rate", type=float, default=0.001)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--hosts", default="",
                   help="NETNS,IP,DEVICE;... : run the ps (async) and the "
                   "workers each in that network namespace (the bench's "
                   "--netsim)")
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--master_addr", default="127.0.0.1",
                   help=argparse.SUPPRESS)
    p.add_argument("--tcp_only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--role_rank", type=int, default=None,
                   help=argparse.SUPPRESS)
    p.add_argument("--parent_pid", type=int, default=0,
                   help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.workers < 1 or args.steps < 1 or args.batch < 1 \
            or args.log_every < 1:
        p.error("--workers, --steps, --batch and --log_every must be positive")
    if args.role_rank is None:
        return launch(args)
    # Started by the launcher with PR_SET_PDEATHSIG: a launcher that died
    # before the prctl took effect is no parent any more.
    if os.getppid() != args.parent_pid:
        return 1
    import torch
    torch.set_num_threads(1)
    train = load(args.data_dir, "train")
    test = load(args.data_dir, "t10k")
    run = run_async if args.mode == "async" else run_sync
    run(torch, args, args.role_rank, train, test)
    return 0


if __name__ == "__main__":
    sys.exit(main())
