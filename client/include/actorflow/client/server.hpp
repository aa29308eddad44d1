#pragma once

#include <map>
#include <memory>
#include <utility>
#include <string>

#include "actorflow/transport/messages.hpp"
#include "actorflow/transport/tls_config.hpp"
#include "actorflow/client/cluster_spec.hpp"

namespace caf {
class actor;
class actor_system;
} // namespace caf

namespace actorflow {

/// How a server listens (beyond TF's ServerDef).
struct server_options {
  /// The address the task's port is bound to. Empty (the default): the
  /// address its own entry in the cluster names, resolved, which must be
  /// an address of this host, so that nothing listens beyond what the
  /// cluster names. "0.0.0.0" or "::" binds every interface, as TF's gRPC
  /// server does; any other value must be an address of this host.
  std::string bind_host;
  /// Replicated variables (docs/DESIGN.md, "Replicated variables"):
  /// every variable of a task of job "ps" gets a backup on the job's next
  /// task, which takes over when its task is lost; a step that used a
  /// lost ps task runs again on the backup inside its deadline. A
  /// cluster-wide setting (every task must agree); InvalidArgument with
  /// fewer than two ps tasks.
  bool replicate_variables = false;
  /// TF's `Server(config=...)`: the settings every session of this
  /// server's master takes where its own config leaves the default
  /// (operation_timeout_in_ms 0, allow_soft_placement and
  /// log_device_placement off, no device_filters).
  session_config default_session_config;
};

/// InvalidArgument ("replicate_variables needs at least two tasks in job
/// \"ps\"; the cluster has N") when `cluster` cannot replicate its
/// variables (server_options::replicate_variables); OK otherwise.
status check_replicate_variables(const cluster_spec& cluster);

/// One task of a cluster (TensorFlow's `tf.train.Server`): a task actor
/// offering the master and worker services, published on the port of its
/// address in the cluster spec.
///
/// ~~~
/// cluster_spec cluster{{{"local", {"localhost:2222", "localhost:2223"}}}};
/// server s0{cluster, "local", 0};
/// session sess{s0.target()};
/// ~~~
class server {
public:
  /// Starts task `task` of job `job` in `sys` (default: the process-wide
  /// system), listening on its own address only (server_options).
  /// Errors (op_error): InvalidArgument if the job or task is not in the
  /// cluster, the address has no valid port ("Could not parse port for
  /// local server from \"localhost\""), any task's address is not
  /// host:port, the task's host does not resolve, or resolves to no
  /// address of this host (each naming the address and the task), or,
  /// with TLS on in `sys`, its certificate is not for the task's host as
  /// the cluster spells it ("tls_cert: FILE (certificate ...) is not for
  /// HOST, the host of task ...": check_tls_identity,
  /// transport/transport.hpp); Unknown (TF's code for "Could not start
  /// server") if the port is in use, naming the address. Blocks until the
  /// port is bound.
  server(const cluster_spec& cluster, const std::string& job, int task,
         const server_options& options = {});
  server(caf::actor_system& sys, const cluster_spec& cluster,
         const std::string& job, int task, const server_options& options = {});
  /// Picks the job/task when the cluster has one job / the job one task,
  /// as TF does; InvalidArgument "Must specify an explicit `job_name`" /
  /// "`task_index`" otherwise.
  explicit server(const cluster_spec& cluster);

  /// A single-task server on a free loopback port, job "local".
  static server create_local_server();
  /// Joins the running cluster one of whose tasks listens at `contact`
  /// ("host:port") as a new task of `job`, listening at `address`
  /// ("host:port" the other tasks reach; port 0 is refused). The cluster's
  /// authority (its first ps task) gives it the next index of the job
  /// (never one used before) and every task learns the new membership
  /// version (docs/DESIGN.md, "Elastic workers"); a task that joined and
  /// dies or goes silent is removed. Blocks until it is a member and
  /// serving (about 30 s at most). Errors (op_error): InvalidArgument for
  /// a `contact` that is not host:port, job "ps" (ps tasks are named by
  /// the ClusterSpec) or a bad `address`; Unavailable when nothing answers
  /// at `contact` or the authority is out of reach; AlreadyExists when
  /// `address` is a ClusterSpec task's; and the constructor's.
  static server join_cluster(const std::string& contact,
                             const std::string& job,
                             const std::string& address,
                             const server_options& options = {});
  static server join_cluster(caf::actor_system& sys,
                             const std::string& contact,
                             const std::string& job,
                             const std::string& address,
                             const server_options& options = {});

  server(server&&) noexcept;
  server& operator=(server&&) noexcept;
  ~server();

  /// "caf://localhost:<port>", or "caf://127.0.0.2:<port>" for a task on a
  /// loopback address other than 127.0.0.1, which binds that address only
  /// (sessions also accept "grpc://" targets). With TLS, the host the
  /// task's entry in the cluster names ("caf://127.0.0.1:<port>",
  /// "caf://ps0.example.com:<port>"): the name its certificate is for.
  std::string target() const;
  /// The port actually bound (differs from the spec when it said 0).
  uint16_t port() const;
  const cluster_spec& cluster() const;
  const std::string& job_name() const;
  int task_index() const;
  /// "/job:J/replica:0/task:T/device:CPU:0".
  std::string device() const;

  /// Blocks until `stop()` is called (from another thread or a signal
  /// handler thread). Returns at once if already stopped.
  void join();
  /// Leaves the cluster this task joined (join_cluster): the authority
  /// removes it and every task learns it at once, instead of when its
  /// loss is detected. Call it before stop(). Blocks up to 15 s. Errors
  /// (op_error): FailedPrecondition for a task the ClusterSpec names,
  /// Unavailable when the authority cannot be reached.
  void leave();
  /// The membership this task knows: its version (1: the ClusterSpec's,
  /// unchanged) and every member's name and address. Blocks up to 5 s;
  /// Unavailable on timeout.
  std::pair<int64_t, std::map<std::string, std::string>> membership() const;
  /// Unpublishes the port and ends the task's actors (sessions on it fail
  /// with Unavailable afterwards). Idempotent; the destructor calls it.
  void stop();
  bool stopped() const;

  /// The task's counters (messages, bytes, mailbox, steps); blocks at most
  /// a few seconds; Unavailable on timeout.
  task_stats stats() const;

  /// Serves this task's metrics (actorflow::metrics_text, actors/task.hpp)
  /// in Prometheus' text format at http://host:port/metrics on a thread of
  /// its own until stop(). Port 0 picks a free one; returns the port bound.
  /// Read-only: GET /metrics is all it answers (404 for other paths, 405
  /// for other methods). Errors (op_error): Unknown naming the address if
  /// it cannot bind; AlreadyExists if this server serves metrics already.
  /// Blocks only to bind.
  uint16_t serve_metrics(const std::string& host = "127.0.0.1",
                         uint16_t port = 0);
  /// serve_metrics over TLS when `tls` is enabled (tls_config::enabled):
  /// https://host:port/metrics with `tls`'s certificate and key (TLS 1.2
  /// or later), answered only to a reader that presents a certificate
  /// signed by `tls`'s CA (any name: Prometheus' own, a client's). A
  /// handshake with a certificate the CA does not sign fails; a request
  /// without a certificate gets 403; both are said through `tls.log`
  /// (stderr when empty), five lines a minute at most. The files are read
  /// once, here (a certificate renewed later is not seen by /metrics).
  /// Errors as above, and InvalidArgument naming the option and file if
  /// the files do not load (check_tls_config, transport/transport.hpp).
  uint16_t serve_metrics(const std::string& host, uint16_t port,
                         const tls_config& tls);

  /// The task actor itself, for an embedding CAF application: it answers
  /// `(get_stats_atom) -> task_stats` like any other message of the
  /// `actorflow` type ID block (transport/type_ids.hpp).
  caf::actor task_actor() const;

private:
  /// The task joined a running cluster at membership version
  /// `joined_at` (join_cluster; 0: a task of the ClusterSpec).
  server(caf::actor_system& sys, const cluster_spec& cluster,
         const std::string& job, int task, const server_options& options,
         int64_t joined_at);

  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace actorflow
