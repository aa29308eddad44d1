"""tf.train: clusters and servers (more of tf.train comes later)."""

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
        self._s = _C.Server(cluster._spec, job_name, int(task_index),
                            replicate_variables)

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
