#include "actorflow/client/server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <httplib.h>

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "actorflow/actors/task.hpp"
#include "actorflow/transport/transport.hpp"
#include "actorflow/transport/type_ids.hpp"
#include "actorflow/graph/device_name.hpp"
#include "actorflow/kernels/file_policy.hpp"
#include "actorflow/client/runtime.hpp"
#include "address.hpp"
#include "connect_master.hpp"
#include "metrics_https.hpp"

namespace actorflow {

namespace {

/// The numeric address to bind for `host`: "" for every interface ("0.0.0.0",
/// "::"), 127.0.0.1 for "localhost", else the first address `host` resolves
/// to that this host has (a bind to port 0 there succeeds). InvalidArgument
/// naming `address` and `who` if it does not resolve or none is local.
std::string local_address(std::string host, const std::string& address,
                          const std::string& who) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "0.0.0.0" || host == "::")
    return {};
  if (host == "localhost")
    return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); e != 0)
    throw op_error(error_code::invalid_argument,
                   "Could not resolve host \"" + host + "\" of \"" + address
                     + "\" (" + who + "): " + ::gai_strerror(e));
  std::string found, seen;
  for (auto* a = res; a != nullptr && found.empty(); a = a->ai_next) {
    char name[NI_MAXHOST] = {};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, name, sizeof(name), nullptr,
                      0, NI_NUMERICHOST)
        != 0)
      continue;
    if (seen.find(name) == std::string::npos)
      seen += (seen.empty() ? "" : ", ") + std::string{name};
    int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    // Port 0 of the address: EADDRNOTAVAIL unless this host has it.
    sockaddr_storage probe{};
    std::memcpy(&probe, a->ai_addr, a->ai_addrlen);
    if (probe.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&probe)->sin_port = 0;
    else
      reinterpret_cast<sockaddr_in6*>(&probe)->sin6_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&probe), a->ai_addrlen) == 0)
      found = name;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (found.empty())
    throw op_error(error_code::invalid_argument,
                   "\"" + address + "\" (" + who + ") is not an address of "
                     + "this host (\"" + host + "\" resolves to "
                     + (seen.empty() ? std::string{"nothing"} : seen)
                     + "); to listen on every interface, bind 0.0.0.0 "
                       "(--bind_host)");
  return found;
}

} // namespace

struct server::impl {
  caf::actor_system* sys = nullptr;
  cluster_spec cluster;
  /// This task (job, index) and every task's address.
  task_options opts;
  uint16_t port = 0;
  /// Where a session on this process reaches the task: "localhost", or
  /// the loopback address (127.0.0.2, ...) it alone is bound to; with TLS,
  /// the host its entry in the cluster names (its certificate's).
  std::string local_host = "localhost";
  caf::actor actor;
  // serve_metrics: the HTTP server and its thread.
  std::unique_ptr<httplib::Server> http;
  std::thread http_thread;
  std::mutex mtx;
  std::condition_variable cv;
  bool stopped = false;
};

namespace {

// A member list as messages carry it (name, address, name, ...).
std::map<std::string, std::string>
members_of(const std::vector<std::string>& flat) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    out[flat[i]] = flat[i + 1];
  return out;
}

} // namespace

status check_replicate_variables(const cluster_spec& cluster) {
  auto n = cluster.has_job("ps") ? cluster.num_tasks("ps") : 0;
  if (n >= 2)
    return {};
  return invalid_argument("replicate_variables needs at least two tasks in "
                          "job \"ps\"; the cluster has "
                          + std::to_string(n));
}

server::server(const cluster_spec& cluster, const std::string& job, int task,
               const server_options& options)
  : server(default_system(), cluster, job, task, options) {
  // nop
}

server::server(caf::actor_system& sys, const cluster_spec& cluster,
               const std::string& job, int task, const server_options& options)
  : server(sys, cluster, job, task, options, 0) {
  // nop
}

server::server(caf::actor_system& sys, const cluster_spec& cluster,
               const std::string& job, int task, const server_options& options,
               int64_t joined_at)
  : impl_(std::make_unique<impl>()) {
  if (!cluster.has_job(job))
    throw op_error(error_code::invalid_argument,
                   "Job \"" + job + "\" was not defined in cluster");
  if (!cluster.has_task(job, task))
    throw op_error(error_code::invalid_argument,
                   "Task " + std::to_string(task)
                     + " was not defined in job \"" + job + "\"");
  auto& address = cluster.task_address(job, task);
  host_port parsed;
  if (!host_port::parse(address, parsed).ok())
    throw op_error(error_code::invalid_argument,
                   "Could not parse port for local server from \"" + address
                     + "\"");
  task_options opts;
  opts.job = job;
  opts.task = task;
  opts.replicate_variables = options.replicate_variables;
  opts.default_session_config = options.default_session_config;
  opts.joined_at = joined_at;
  if (options.replicate_variables)
    if (auto err = check_replicate_variables(cluster); !err.ok())
      throw op_error(err);
  for (auto& name : cluster.task_names()) {
    device_name d;
    device_name::parse(name, d);
    auto& other = cluster.task_address(*d.job, *d.task);
    // Every task's address, not only this one's: a step that first needs
    // a malformed one would otherwise fail long after the start (TF's
    // channel cache refuses it when the server is made).
    host_port other_parsed;
    if (!host_port::parse(other, other_parsed).ok())
      throw op_error(error_code::invalid_argument,
                     "Could not interpret \"" + other
                       + "\" as a host-port pair (task " + name
                       + " of the cluster)");
    opts.cluster[name] = other;
  }
  // Only the address the cluster names for this task listens (TF's gRPC
  // server binds every interface; server_options::bind_host does that on
  // request). Tasks on 127.0.0.2, 127.0.0.3, ... may share a port, as pods
  // on their own hosts do.
  std::string in = options.bind_host.empty()
                     ? local_address(parsed.host, address,
                                     "task " + task_name(opts))
                     : local_address(options.bind_host, options.bind_host,
                                     "server_options::bind_host");
  std::string local_host = "localhost";
  if (in != "127.0.0.1" && !in.empty())
    local_host = in.find(':') == std::string::npos ? in : "[" + in + "]";
  if (tls_enabled(sys)) {
    // Peers dial the host the cluster names for this task and check that
    // its certificate is for that name: a certificate for another host
    // would be refused by all of them, so it fails the start instead.
    check_tls_identity(sys, parsed.host,
                       "task " + task_name(opts) + " (" + address + ")");
    // Certificates are what let strangers in: their graphs read only the
    // data directories named (--file_roots), none by default.
    close_file_roots("with TLS, ops open files only under --file_roots, "
                     "and none were named");
    // A session on this process dials that name too (the certificate is
    // for it; it may name neither "localhost" nor the bound address).
    local_host = parsed.host.find(':') == std::string::npos
                   ? parsed.host
                   : "[" + parsed.host + "]";
  }
  impl_->sys = &sys;
  impl_->local_host = local_host;
  impl_->cluster = cluster;
  impl_->opts = opts;
  impl_->actor = spawn_task(sys, opts);
  // SO_REUSEADDR, as gRPC's server: a restarted task binds its port again
  // although connections of its old process linger in TIME_WAIT (a live
  // listener on the port still fails the bind).
  // With TLS, peers with a certificate for a host of this cluster may
  // connect (besides the allowed peers).
  std::vector<std::string> hosts;
  for (auto& [name, addr] : opts.cluster)
    hosts.push_back(addr);
  trust_hosts(sys, hosts);
  caf::expected<uint16_t> res{caf::sec::runtime_error};
  {
    caf::scoped_actor self{sys};
    self
      ->request(transport_actor(sys), std::chrono::seconds(30),
                caf::publish_atom::value, parsed.port,
                caf::actor_cast<caf::strong_actor_ptr>(impl_->actor),
                std::set<std::string>{}, in, true)
      .receive([&](uint16_t actual) { res = actual; },
               [&](caf::error& err) { res = std::move(err); });
  }
  if (!res) {
    caf::anon_send_exit(impl_->actor, caf::exit_reason::user_shutdown);
    throw op_error(error_code::unknown,
                   "Could not start server for /job:" + job + "/task:"
                     + std::to_string(task) + " on " + address + ": "
                     + sys.render(res.error()));
  }
  impl_->port = *res;
}

server::server(const cluster_spec& cluster)
  : server(cluster,
           [&] {
             auto jobs = cluster.jobs();
             if (jobs.size() != 1)
               throw op_error(error_code::invalid_argument,
                              "Must specify an explicit `job_name`.");
             return jobs.front();
           }(),
           [&] {
             auto idx = cluster.task_indices(cluster.jobs().front());
             if (idx.size() != 1)
               throw op_error(error_code::invalid_argument,
                              "Must specify an explicit `task_index`.");
             return idx.front();
           }()) {
  // nop
}

server server::create_local_server() {
  return server{cluster_spec{std::map<std::string, std::vector<std::string>>{
                  {"local", {"localhost:0"}}}},
                "local", 0};
}

server server::join_cluster(const std::string& contact, const std::string& job,
                            const std::string& address,
                            const server_options& options) {
  return join_cluster(default_system(), contact, job, address, options);
}

server server::join_cluster(caf::actor_system& sys, const std::string& contact,
                            const std::string& job, const std::string& address,
                            const server_options& options) {
  host_port hp;
  if (!host_port::parse(contact, hp).ok())
    throw op_error(error_code::invalid_argument,
                   "Could not interpret \"" + contact
                     + "\" as the host:port of a task of the cluster to join");
  master_actor master;
  try {
    session_config reach;
    reach.operation_timeout_in_ms = 10000;
    master = connect_master(sys, contact, reach);
  } catch (const op_error& e) {
    throw op_error(e.code(),
                   "Could not reach " + contact + " to join its cluster: "
                     + e.get_status().message());
  }
  caf::scoped_actor self{sys};
  status err;
  std::string name;
  int64_t version = 0;
  std::vector<std::string> flat;
  self->request(master, std::chrono::seconds(20), join_atom_v, job, address)
    .receive(
      [&](status& e, std::string& n, int64_t v, std::vector<std::string>& f) {
        err = std::move(e);
        name = std::move(n);
        version = v;
        flat = std::move(f);
      },
      [&](caf::error& e) { err = to_status(e, contact); });
  if (!err.ok())
    throw op_error(err.code(), "Could not join the cluster of " + contact
                                 + ": " + err.message());
  // The members as a (sparse) ClusterSpec: indices of tasks that left
  // are not given again.
  std::map<std::string, std::map<int, std::string>> jobs;
  int index = -1;
  for (auto& [member, member_address] : members_of(flat)) {
    device_name d;
    if (!device_name::parse(member, d).ok() || !d.job || !d.task)
      continue;
    jobs[*d.job][*d.task] = member_address;
    if (member == name)
      index = *d.task;
  }
  if (index < 0)
    throw op_error(error_code::internal,
                   "the cluster of " + contact + " admitted " + name
                     + ", which its members do not list");
  server s{sys, cluster_spec{jobs}, job, index, options, version};
  // Its master starts from the spec (version 1): the version it joined.
  caf::anon_send(caf::actor_cast<master_actor>(s.impl_->actor),
                 membership_update_atom_v, version, std::move(flat));
  return s;
}

void server::leave() {
  caf::scoped_actor self{*impl_->sys};
  status err;
  self
    ->request(caf::actor_cast<master_actor>(impl_->actor),
              std::chrono::seconds(15), leave_atom_v, task_name(impl_->opts))
    .receive([&](status& e) { err = std::move(e); },
             [&](caf::error& e) {
               err = to_status(e, "the membership authority");
             });
  if (!err.ok())
    throw op_error(err.code(), task_name(impl_->opts)
                                 + " could not leave its cluster: "
                                 + err.message());
}

std::pair<int64_t, std::map<std::string, std::string>>
server::membership() const {
  caf::scoped_actor self{*impl_->sys};
  std::pair<int64_t, std::map<std::string, std::string>> out;
  status err;
  self
    ->request(caf::actor_cast<master_actor>(impl_->actor),
              std::chrono::seconds(5), membership_atom_v)
    .receive(
      [&](int64_t version, std::vector<std::string>& flat) {
        out = {version, members_of(flat)};
      },
      [&](caf::error& e) { err = to_status(e, task_name(impl_->opts)); });
  if (!err.ok())
    throw op_error(err);
  return out;
}

server::server(server&&) noexcept = default;

server& server::operator=(server&& other) noexcept {
  if (this != &other) {
    stop();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

server::~server() {
  stop();
}

std::string server::target() const {
  return "caf://" + impl_->local_host + ":" + std::to_string(impl_->port);
}

uint16_t server::port() const {
  return impl_->port;
}

const cluster_spec& server::cluster() const {
  return impl_->cluster;
}

const std::string& server::job_name() const {
  return impl_->opts.job;
}

int server::task_index() const {
  return impl_->opts.task;
}

std::string server::device() const {
  return task_name(impl_->opts) + "/device:CPU:0";
}

void server::join() {
  if (!impl_)
    return;
  std::unique_lock<std::mutex> guard{impl_->mtx};
  impl_->cv.wait(guard, [this] { return impl_->stopped; });
}

void server::stop() {
  if (!impl_)
    return;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (impl_->stopped)
      return;
    impl_->stopped = true;
  }
  {
    // Closed when stop returns: a new server may bind the port at once.
    caf::scoped_actor self{*impl_->sys};
    self
      ->request(transport_actor(*impl_->sys), std::chrono::seconds(5),
                caf::unpublish_atom::value, impl_->actor.address(),
                impl_->port)
      .receive([] {}, [](caf::error&) {});
  }
  if (impl_->http) {
    impl_->http->stop();
    impl_->http_thread.join();
  }
  // The task's executors and variables are linked to it and go with it.
  caf::anon_send_exit(impl_->actor, caf::exit_reason::user_shutdown);
  impl_->cv.notify_all();
}

bool server::stopped() const {
  if (!impl_)
    return true;
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->stopped;
}

uint16_t server::serve_metrics(const std::string& host, uint16_t port) {
  return serve_metrics(host, port, tls_config{});
}

uint16_t server::serve_metrics(const std::string& host, uint16_t port,
                               const tls_config& tls) {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto address = host + ":" + std::to_string(port);
  if (impl_->http)
    throw op_error(error_code::already_exists,
                   device() + " serves its metrics already");
  if (impl_->stopped)
    throw op_error(error_code::failed_precondition,
                   device() + " is stopped: no metrics on " + address);
  auto http = tls.enabled()
                ? detail::metrics_https(tls, task_name(impl_->opts))
                : std::make_unique<httplib::Server>();
  http->Get("/metrics", [opts = impl_->opts, sys = impl_->sys](
                          const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(*sys, opts), "text/plain; version=0.0.4");
  });
  // Nothing else, and nothing that changes the task.
  auto refuse = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_content("read-only: GET /metrics\n", "text/plain");
  };
  http->Post(".*", refuse);
  http->Put(".*", refuse);
  http->Delete(".*", refuse);
  http->Patch(".*", refuse);
  int bound = port == 0 ? http->bind_to_any_port(host)
                        : (http->bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    throw op_error(error_code::unknown,
                   "Could not serve metrics of " + device() + " on "
                     + address);
  impl_->http_thread = std::thread{[h = http.get()] { h->listen_after_bind(); }};
  // httplib's stop() does nothing to a server that is not running yet, so
  // a stop() right after this would wait for its thread forever.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!http->is_running() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http = std::move(http);
  return static_cast<uint16_t>(bound);
}

caf::actor server::task_actor() const {
  return impl_->actor;
}

task_stats server::stats() const {
  caf::scoped_actor self{*impl_->sys};
  task_stats result;
  status err;
  self->request(impl_->actor, std::chrono::seconds(5), get_stats_atom_v)
    .receive([&](task_stats& s) { result = std::move(s); },
             [&](caf::error& e) { err = to_status(e, device()); });
  throw_if_error(err);
  return result;
}

} // namespace actorflow
