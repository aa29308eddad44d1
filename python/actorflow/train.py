"""tf.train: clusters, servers, optimizers, input pipelines, monitored
training and checkpoints."""

import collections
import json

from . import _actorflow as _C


class ClusterSpec:
    """tf.train.ClusterSpec: jobs and their tasks' addresses, from a dict
    (job -> list of addresses, or task index -> address), another
    ClusterSpec, or its JSON."""

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._spec = cluster._spec
        elif isinstance(cluster, dict):
            jobs = {}
            for job, tasks in cluster.items():
                if isinstance(tasks, dict):
                    jobs[job] = {str(int(i)): a for i, a in tasks.items()}
                else:
                    jobs[job] = list(tasks)
            self._spec = _C.ClusterSpec(json.dumps(jobs))
        elif isinstance(cluster, str):
            self._spec = _C.ClusterSpec(cluster)
        else:
            raise TypeError("`cluster` must be a dictionary mapping one or "
                            "more job names to lists of network addresses, "
                            "or a `ClusterSpec`.")

    @property
    def jobs(self):
        return list(self._spec.jobs())

    def num_tasks(self, job_name):
        return self._spec.num_tasks(job_name)

    def task_indices(self, job_name):
        return list(self._spec.task_indices(job_name))

    def job_tasks(self, job_name):
        tasks = self.as_dict()[job_name]
        if isinstance(tasks, dict):
            out = [None] * (max(tasks) + 1)
            for i, a in tasks.items():
                out[i] = a
            return out
        return list(tasks)

    def task_address(self, job_name, task_index):
        tasks = self.as_dict().get(job_name)
        if tasks is None:
            raise ValueError("No such job in cluster: %r" % (job_name,))
        try:
            return tasks[task_index]
        except (KeyError, IndexError):
            raise ValueError("No task with index %r in job %r"
                             % (task_index, job_name)) from None

    def as_dict(self):
        out = {}
        for job, tasks in json.loads(self._spec.to_json()).items():
            if isinstance(tasks, dict):
                out[job] = {int(i): a for i, a in tasks.items()}
            else:
                out[job] = tasks
        return out

    def as_cluster_def(self):
        """The ClusterDef protobuf's text form, as TF prints it."""
        return self._spec.as_cluster_def()

    def __eq__(self, other):
        return isinstance(other, ClusterSpec) and (
            self.as_dict() == other.as_dict())

    def __bool__(self):
        return bool(self.jobs)

    def __repr__(self):
        return "ClusterSpec(%r)" % (self.as_dict(),)


class Server:
    """tf.train.Server: serves one task of a cluster in this process."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None,
                 protocol=None, config=None, start=True,
                 replicate_variables=False):
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = cluster.jobs[0]
        if task_index is None:
            indices = cluster.task_indices(job_name)
            if len(indices) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = indices[0]
        self._cluster = cluster
        # `config`: its fields are the default of every session of this
        # server's master (where the session's own config leaves them).
        defaults = config._native() if config is not None else (
            0, False, False, [])
        self._s = _C.Server(cluster._spec, job_name, int(task_index),
                            replicate_variables, *defaults)

    @staticmethod
    def create_local_server(config=None, start=True):
        server = Server.__new__(Server)
        server._s = _C.Server.create_local_server()
        server._cluster = ClusterSpec(server._s.cluster.to_json())
        return server

    @property
    def target(self):
        return self._s.target

    @property
    def server_def(self):
        return {"cluster": self._cluster.as_dict(),
                "job_name": self._s.job_name,
                "task_index": self._s.task_index}

    def start(self):
        """Servers start when made; kept for TF's API."""

    def join(self):
        """Blocks until the server stops."""
        self._s.join()

    def stop(self):
        self._s.stop()


# -- training ------------------------------------------------------------------


def _tf():
    # The package (train is imported at its end, so not at import time).
    import actorflow
    return actorflow


class Optimizer:
    """tf.train.Optimizer: compute_gradients, apply_gradients, minimize."""

    def __init__(self, native):
        self._o = native

    def compute_gradients(self, loss, var_list=None):
        tf = _tf()
        pairs = self._o.compute_gradients(
            tf.convert_to_tensor(loss)._out,
            [v._v for v in (var_list or [])])
        return [(tf.Tensor(g), tf.Variable(_native=v)) for g, v in pairs]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        tf = _tf()
        pairs = [(tf.convert_to_tensor(g)._out, v._v)
                 for g, v in grads_and_vars]
        return tf.Operation(self._o.apply_gradients(
            pairs, global_step._v if global_step is not None else None,
            name or ""))

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        tf = _tf()
        return tf.Operation(self._o.minimize(
            tf.convert_to_tensor(loss)._out,
            global_step._v if global_step is not None else None,
            [v._v for v in (var_list or [])], name or ""))

    def get_slot(self, var, name):
        tf = _tf()
        return tf.Variable(_native=self._o.get_slot(var._v, name))

    def get_name(self):
        return self._o.name


def _rate(value):
    """A learning rate as the engine takes it: a number, or a scalar
    tensor (e.g. exponential_decay's)."""
    tf = _tf()
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return _C.Hyperparameter(tf.convert_to_tensor(value)._out)
    return _C.Hyperparameter(float(value))


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase=False, name=None):
    """tf.train.exponential_decay: learning_rate * decay_rate ^
    (global_step / decay_steps), the exponent floored when staircase."""
    if global_step is None:
        raise ValueError("global_step is required for exponential_decay.")
    return _tf().Tensor(_C.exponential_decay(
        float(learning_rate), global_step._v, int(decay_steps),
        float(decay_rate), bool(staircase), name or "ExponentialDecay"))


class GradientDescentOptimizer(Optimizer):
    def __init__(self, learning_rate, use_locking=False,
                 name="GradientDescent"):
        Optimizer.__init__(self, _C.GradientDescentOptimizer(
            _rate(learning_rate), name))


class MomentumOptimizer(Optimizer):
    def __init__(self, learning_rate, momentum, use_locking=False,
                 name="Momentum", use_nesterov=False):
        Optimizer.__init__(self, _C.MomentumOptimizer(
            _rate(learning_rate), float(momentum), bool(use_nesterov), name))


class AdagradOptimizer(Optimizer):
    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 use_locking=False, name="Adagrad"):
        Optimizer.__init__(self, _C.AdagradOptimizer(
            _rate(learning_rate), float(initial_accumulator_value), name))


class AdamOptimizer(Optimizer):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999,
                 epsilon=1e-08, use_locking=False, name="Adam"):
        Optimizer.__init__(self, _C.AdamOptimizer(
            _rate(learning_rate), float(beta1), float(beta2), float(epsilon),
            name))


def create_global_step(graph=None):
    return _tf().Variable(_native=_C.create_global_step())


def get_global_step(graph=None):
    v = _C.get_global_step()
    return None if v is None else _tf().Variable(_native=v)


def get_or_create_global_step(graph=None):
    return _tf().Variable(_native=_C.get_or_create_global_step())


def replica_device_setter(ps_tasks=0, ps_device="/job:ps",
                          worker_device="/job:worker", merge_devices=True,
                          cluster=None, ps_ops=None, ps_strategy=None):
    """tf.train.replica_device_setter: variables round-robin over the ps
    tasks, every other op on `worker_device`; for `tf.device`. None when
    there are no ps tasks (as TF)."""
    if ps_ops is not None or ps_strategy is not None:
        raise NotImplementedError("ps_ops and ps_strategy are not supported "
                                  "yet: the standard ps ops round-robin")
    spec = ClusterSpec(cluster) if cluster is not None else None
    native = _C.replica_device_setter(
        spec._spec if spec is not None else _C.ClusterSpec("{}"),
        int(ps_tasks), ps_device, worker_device, bool(merge_devices))
    if spec is None and ps_tasks == 0:
        return None
    if spec is not None and "ps" not in spec.jobs and ps_tasks == 0:
        return None
    return native


# -- monitored training ------------------------------------------------------------


class SessionRunHook:
    """tf.train.SessionRunHook: subclass it and override what you need;
    MonitoredTrainingSession calls begin, after_create_session,
    before_run (return SessionRunArgs to fetch or feed more in the same
    step), after_run (run_values.results holds what before_run asked
    for) and end."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class _EngineHook(SessionRunHook):
    """A hook the engine implements (its calls run in C++)."""

    def __init__(self, native):
        self._h = native


SessionRunArgs = collections.namedtuple("SessionRunArgs",
                                        ["fetches", "feed_dict", "options"])
SessionRunArgs.__new__.__defaults__ = (None, None)
SessionRunValues = collections.namedtuple(
    "SessionRunValues", ["results", "options", "run_metadata"])


def _session_over(native, graph):
    """A tf.Session around a native session the engine owns (a hook's, a
    step function's): valid while the engine's call lasts."""
    tf = _tf()
    session = tf.Session.__new__(tf.Session)
    session._s = native
    session._graph = graph
    session._closed = False
    return session


class SessionRunContext:
    """What a hook sees of the step: the run call's arguments, the
    session, and a way to ask for a stop."""

    def __init__(self, original_args, session):
        self.original_args = original_args
        self.session = session
        self._stop = False

    def request_stop(self):
        self._stop = True

    @property
    def stop_requested(self):
        return self._stop


class _PythonHook:
    """The adapter the engine calls (the C++ PythonHook) for a hook
    written in Python."""

    def __init__(self, hook, graph):
        self.hook = hook
        self.graph = graph
        self.original = None
        self._session = None
        self._context = None
        self._rebuild = None

    def _wrap(self, native):
        return _session_over(native, self.graph)

    def begin(self):
        self.hook.begin()

    def after_create_session(self, native):
        self._session = self._wrap(native)
        self.hook.after_create_session(self._session, None)

    def before_run(self):
        self._context = SessionRunContext(self.original, self._session)
        args = self.hook.before_run(self._context)
        self._rebuild = None
        if args is None or args.fetches is None and not args.feed_dict:
            return None
        names, feeds, rebuild = _tf()._prepare(
            self.graph, [] if args.fetches is None else args.fetches,
            args.feed_dict)
        self._rebuild = rebuild if args.fetches is not None else None
        return (names, feeds)

    def after_run(self, values):
        results = self._rebuild(values) if self._rebuild else None
        self.hook.after_run(self._context,
                            SessionRunValues(results, None, None))
        return self._context.stop_requested

    def end(self, native):
        self.hook.end(self._wrap(native))


class StopAtStepHook(_EngineHook):
    """Requests a stop after `num_steps` more global steps, or at
    `last_step`."""

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("One of num_steps or last_step must be "
                             "specified.")
        _EngineHook.__init__(self, _C.StopAtStepHook(num_steps, last_step))


class NanTensorHook(_EngineHook):
    """Fails the step (or requests a stop) when the loss is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        _EngineHook.__init__(self, _C.NanTensorHook(
            _tf().convert_to_tensor(loss_tensor)._out, fail_on_nan_loss))


class NanLossDuringTrainingError(RuntimeError):
    """A NanTensorHook saw a NaN loss (tf.train's class)."""


class StepContext:
    """What a step function of MonitoredSession.run_step_fn gets (TF's
    _MonitoredSession.StepContext)."""

    def __init__(self, native, monitored):
        self._native = native
        self._monitored = monitored
        self._session = _session_over(native.session, monitored.graph)

    @property
    def session(self):
        return self._session

    def run_with_hooks(self, fetches, feed_dict=None, options=None,
                       run_metadata=None):
        return self._monitored._run_on(self._native, fetches, feed_dict,
                                       options, run_metadata)

    def request_stop(self):
        raise StopIteration("step_fn has called request_stop()")


class _MonitoredSession:
    def __init__(self, native, graph, adapters):
        self._s = native
        self._graph = graph
        self._adapters = adapters

    graph = property(lambda self: self._graph)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        return self._run_on(self._s, fetches, feed_dict, options,
                            run_metadata)

    def run_step_fn(self, step_fn):
        """TF's MonitoredSession.run_step_fn: calls step_fn(step_context)
        and returns what it returns. step_context.session is the session
        underneath (its runs call no hook and are allowed after a stop was
        requested, e.g. to score a test set); run_with_hooks runs as run
        does; request_stop() ends step_fn (StopIteration) and training.
        A lost task (UnavailableError, AbortedError) re-creates the
        session and calls step_fn again."""
        def call(native):
            try:
                return step_fn(StepContext(native, self))
            except StopIteration:
                native.request_stop()
                return None
        return self._s.run_step_fn(call)

    def _run_on(self, native, fetches, feed_dict, options, run_metadata):
        names, feeds, rebuild = _tf()._prepare(self._graph, fetches,
                                               feed_dict)
        for adapter in self._adapters:
            adapter.original = SessionRunArgs(fetches, feed_dict, options)
        try:
            values = _tf()._run_native(native, names, feeds, options,
                                       run_metadata)
        except _tf().errors.InvalidArgumentError as e:
            # NanTensorHook's failure is TF's NanLossDuringTrainingError.
            if str(e).startswith("NaN loss during training"):
                raise NanLossDuringTrainingError(str(e)) from e
            raise
        return rebuild(values)

    def should_stop(self):
        return self._s.should_stop()

    def close(self):
        self._s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def MonitoredTrainingSession(master="", is_chief=True,  # noqa: N802
                             checkpoint_dir=None, scaffold=None, hooks=None,
                             chief_only_hooks=None,
                             save_checkpoint_secs=600,
                             save_summaries_steps=None,
                             save_summaries_secs=None, config=None,
                             stop_grace_period_secs=120,
                             log_step_count_steps=100,
                             save_checkpoint_steps=None):
    """tf.train.MonitoredTrainingSession: the chief initializes or restores
    the variables (and saves checkpoints in `checkpoint_dir`), the others
    wait for it; `hooks` run around every step; `run` recovers from a lost
    task by making the session again."""
    if scaffold is not None:
        raise NotImplementedError("scaffold is not supported yet")
    if save_checkpoint_steps is not None:
        save_checkpoint_secs = None
    tf = _tf()
    graph = tf.get_default_graph()
    adapters = []

    def native_of(h):
        if isinstance(h, _EngineHook):
            return h._h
        if not isinstance(h, SessionRunHook):
            raise TypeError("a hook must be a tf.train.SessionRunHook: %r"
                            % (h,))
        adapters.append(_PythonHook(h, graph))
        return _C.PythonHook(adapters[-1])

    natives = [native_of(h) for h in hooks or []]
    chief_natives = [native_of(h) for h in chief_only_hooks or []]
    timeout = config.operation_timeout_in_ms if config is not None else 0
    native = _C.monitored_training_session(
        master, bool(is_chief), checkpoint_dir or "", natives, chief_natives,
        None if save_checkpoint_secs is None else float(save_checkpoint_secs),
        None if save_checkpoint_steps is None else int(save_checkpoint_steps),
        int(log_step_count_steps or 0), graph._g, int(timeout))
    return _MonitoredSession(native, graph, adapters)


# -- input pipelines ---------------------------------------------------------------


def string_input_producer(string_tensor, num_epochs=None, shuffle=True,
                          seed=None, capacity=32, shared_name=None,
                          name=None, cancel_op=None):
    """tf.train.string_input_producer: a queue of the strings (file
    names), refilled by a queue runner, `num_epochs` times (None: for
    ever)."""
    tf = _tf()
    strings = tf.convert_to_tensor(string_tensor, dtype=tf.string)
    native = _C.string_input_producer(
        strings._out, int(num_epochs or 0), bool(shuffle), int(seed or 0),
        int(capacity), shared_name or "", name or "input_producer")
    return tf.QueueBase(native, [tf.string])


def _batch(tensors, batch_size, num_threads, capacity, enqueue_many, shapes,
           dynamic_pad, allow_smaller_final_batch, shared_name, name,
           shuffle_capacity=0, min_after_dequeue=-1, seed=None):
    tf = _tf()
    single = not isinstance(tensors, (list, tuple, dict))
    if isinstance(tensors, dict):
        raise NotImplementedError("a dict of tensors is not supported yet")
    items = [tensors] if single else list(tensors)
    outs = _C.batch([tf.convert_to_tensor(t)._out for t in items],
                    int(batch_size), int(num_threads), int(capacity),
                    bool(enqueue_many),
                    [None if s is None else list(s) for s in (shapes or [])],
                    bool(dynamic_pad), bool(allow_smaller_final_batch),
                    shared_name or "", name or "", int(shuffle_capacity),
                    int(min_after_dequeue), int(seed or 0))
    outs = [tf.Tensor(o) for o in outs]
    return outs[0] if single else (type(tensors)(outs)
                                   if isinstance(tensors, tuple) else outs)


def batch(tensors, batch_size, num_threads=1, capacity=32,
          enqueue_many=False, shapes=None, dynamic_pad=False,
          allow_smaller_final_batch=False, shared_name=None, name=None):
    """tf.train.batch: batches of `batch_size` from a queue that
    `num_threads` queue runner threads fill."""
    return _batch(tensors, batch_size, num_threads, capacity, enqueue_many,
                  shapes, dynamic_pad, allow_smaller_final_batch,
                  shared_name, name)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue,
                  num_threads=1, seed=None, enqueue_many=False, shapes=None,
                  allow_smaller_final_batch=False, shared_name=None,
                  name=None):
    """tf.train.shuffle_batch: as batch, through a RandomShuffleQueue."""
    return _batch(tensors, batch_size, num_threads, capacity, enqueue_many,
                  shapes, False, allow_smaller_final_batch, shared_name,
                  name, capacity, min_after_dequeue, seed)


class Coordinator:
    """tf.train.Coordinator: threads stop together. The queue runners'
    threads are the engine's; Python threads given to join() are joined
    too."""

    def __init__(self, clean_stop_exception_types=None):
        self._c = _C.Coordinator()
        self._exception = None

    def request_stop(self, ex=None):
        if ex is not None and self._exception is None:
            self._exception = ex
        self._c.request_stop()

    def should_stop(self):
        return self._c.should_stop()

    def clear_stop(self):
        self._c.clear_stop()
        self._exception = None

    def wait_for_stop(self, timeout=None):
        return self._c.wait_for_stop(timeout)

    def join(self, threads=None, stop_grace_period_secs=120,
             ignore_live_threads=False):
        """Joins the runners' threads and the given Python threads once a
        stop was requested; raises the first error a thread reported."""
        import threading
        for t in threads or []:
            if isinstance(t, threading.Thread):
                t.join(stop_grace_period_secs)
        self._c.join(float(stop_grace_period_secs), bool(ignore_live_threads))
        if self._exception is not None:
            raise self._exception

    def stop_on_exception(self):
        coord = self

        class _Guard:
            def __enter__(self):
                return coord

            def __exit__(self, kind, value, tb):
                if value is not None:
                    coord.request_stop(value)
                return True

        return _Guard()


class QueueRunner:
    """tf.train.QueueRunner: threads that run `enqueue_ops` into `queue`;
    add it with add_queue_runner, start it with start_queue_runners."""

    def __init__(self, queue=None, enqueue_ops=None):
        tf = _tf()
        self._qr = _C.QueueRunner(queue._q, [tf._as_operation(op)
                                             for op in enqueue_ops])
        self.queue = queue
        self.enqueue_ops = enqueue_ops


def add_queue_runner(qr, collection=None):
    _C.add_queue_runner(qr._qr)


class _RunnerThread:
    """Stands for one of the engine's queue runner threads in the list
    start_queue_runners returns (the coordinator joins them)."""


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=None):
    """Starts the threads of the graph's queue runners; returns one
    placeholder per thread (pass the list to coord.join as in TF)."""
    tf = _tf()
    sess = sess or tf._default_session()
    if coord is None:
        raise NotImplementedError("start_queue_runners needs a coordinator "
                                  "here: its threads are joined by it")
    native = getattr(sess, "_s", None)
    if not isinstance(native, _C.Session):
        raise TypeError("start_queue_runners takes a tf.Session")
    return [_RunnerThread()
            for _ in range(_C.start_queue_runners(native, coord._c))]


# -- checkpoints ---------------------------------------------------------------------


class Saver:
    """tf.train.Saver: saves the variables (all global ones by default)
    to TF's checkpoint format and restores them."""

    def __init__(self, var_list=None, reshape=False, sharded=True,
                 max_to_keep=5, name=None, **unused):
        names = []
        if isinstance(var_list, dict):
            # {name in the checkpoint: variable}, as TF's.
            for key in var_list:
                if not isinstance(key, str):
                    raise TypeError("var_list's keys must be names (str), "
                                    "not %r" % (key,))
            names = list(var_list)
            var_list = list(var_list.values())
        for v in var_list or []:
            if not isinstance(v, _tf().Variable):
                raise TypeError("Variable to save is not a Variable: %r"
                                % (v,))
        self._s = _C.Saver([v._v for v in (var_list or [])], names,
                           int(max_to_keep), bool(sharded), name or "save")

    def save(self, sess, save_path, global_step=None, **unused):
        """Writes a checkpoint; returns its path (with "-STEP")."""
        step_var = None
        step = -1
        if global_step is not None:
            if isinstance(global_step, _tf().Variable):
                step_var = global_step._v
            else:
                step = int(global_step)
        return self._s.save(sess._s, save_path, step_var, step)

    def restore(self, sess, save_path):
        try:
            self._s.restore(sess._s, save_path)
        except _tf().errors.InvalidArgumentError as e:
            # TF raises ValueError for a path that is no checkpoint.
            if "not a valid checkpoint" in str(e):
                raise ValueError(str(e)) from None
            raise

    @property
    def last_checkpoints(self):
        return list(self._s.last_checkpoints)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest checkpoint in the directory, or None."""
    path = _C.latest_checkpoint(checkpoint_dir)
    return path or None


def checkpoint_exists(checkpoint_prefix):
    return _C.checkpoint_exists(checkpoint_prefix)
