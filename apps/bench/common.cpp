// What several of actorflow-bench's groups use (common.hpp).

#include "bench/common.hpp"

#include <unistd.h>

#include <cstring>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "actorflow/support/guarded_main.hpp"
#include "actorflow/support/log.hpp"

namespace actorflow::bench {

using namespace std::chrono_literals;

session_config bounded_config() {
  session_config config;
  config.operation_timeout_in_ms = 60000;
  return config;
}

std::string find_binary(const std::string& name,
                        const std::string& override_path,
                        const std::string& flag) {
  try {
    return support::find_program(name, override_path, flag);
  } catch (const std::invalid_argument& e) {
    throw support::usage_error(e.what());
  }
}

void note(const std::string& line) {
  support::log::info(line);
}

namespace {

peer_host& peer_slot() {
  static peer_host host;
  return host;
}

} // namespace

const peer_host& peer() {
  return peer_slot();
}

void set_peer(peer_host host) {
  peer_slot() = std::move(host);
}

// -- the baselines' servers ---------------------------------------------------

namespace {

std::vector<std::string> server_argv(const std::string& self,
                                     const char* mode,
                                     std::vector<std::string> args) {
  auto out = peer().launcher;
  for (std::string arg : {self, std::string{mode}, std::string{"--parent-pid"},
                          std::to_string(::getpid()), std::string{"--bind"},
                          peer().ip})
    out.push_back(std::move(arg));
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

support::spawn_options quiet_server() {
  support::spawn_options o;
  o.capture_stderr = true;
  return o;
}

} // namespace

baseline_server::baseline_server(const std::string& self, const char* mode,
                                 const char* marker, const std::string& what,
                                 std::vector<std::string> args)
  : proc_(server_argv(self, mode, std::move(args)), quiet_server()) {
  auto line = proc_.wait_for_line(marker, 10s);
  if (!line)
    throw std::runtime_error("the " + what
                             + " baseline server did not start: "
                             + proc_.err());
  auto pos = line->find(marker) + std::strlen(marker);
  port_ = static_cast<uint16_t>(std::stoi(line->substr(pos)));
}

raw_tcp_baseline::raw_tcp_baseline(const std::string& self)
  : server_(self, "--raw-tcp-server", raw_tcp_marker, "raw TCP") {
  client_.emplace(server_.port(), peer().ip);
  // A fresh connection starts with small windows that the kernel grows
  // as data flows (receive buffer autotuning): move some bulk both ways
  // first, so every size is measured on a connection in steady state, as
  // the engine's long-lived connections are.
  for (int i = 0; i < 4; ++i) {
    client_->round_trip(0, uint64_t{64} << 20);
    client_->round_trip(uint64_t{64} << 20, 8);
  }
}

raw_tcp_baseline::~raw_tcp_baseline() {
  client_.reset();
  server_.process().wait(2s);
}

// -- clusters -----------------------------------------------------------------

support::cluster_options
quiet_nodes(std::vector<std::pair<std::string, int>> not_started) {
  support::cluster_options o;
  o.not_started = std::move(not_started);
  o.capture_stderr = true;
  o.echo_stdout = false;
  // The ps tasks on the peer host, the workers (this process and its
  // helpers) on ours.
  o.host = [](const std::string& job, int) {
    return job == "ps" ? support::task_host{peer().ip, peer().launcher}
                       : support::task_host{peer().self_ip, {}};
  };
  return o;
}

namespace {

support::cluster_options remote_node_options(std::vector<std::string> env) {
  auto o = quiet_nodes({{"worker", 0}});
  o.env = std::move(env);
  return o;
}

} // namespace

remote_cluster::remote_cluster(const std::string& node,
                               std::vector<std::string> env)
  : nodes_(node, {{"ps", 1}, {"worker", 1}},
           remote_node_options(std::move(env))) {
  srv_.emplace(nodes_.spec(), "worker", 0);
}

remote_cluster::~remote_cluster() {
  if (srv_)
    srv_->stop();
}

std::unique_ptr<remote_cluster>
remote_cluster::start(const std::string& node, std::vector<std::string> env) {
  for (int attempt = 1;; ++attempt) {
    try {
      return std::make_unique<remote_cluster>(node, env);
    } catch (const op_error& e) {
      if (attempt >= 3)
        throw;
      note("retrying the cluster start: " + std::string{e.what()});
    }
  }
}

void start_shared(context& ctx) {
  if (!ctx.cluster)
    ctx.cluster = remote_cluster::start(ctx.node);
  if (!ctx.tcp)
    ctx.tcp = std::make_shared<raw_tcp_baseline>(ctx.self);
}

// -- small helpers ------------------------------------------------------------

variable_options named(std::string name) {
  variable_options opts;
  opts.name = std::move(name);
  return opts;
}

double mb_per_s(const rate& r, double bytes) {
  return r.per_second * bytes / 1e6;
}

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

std::string received_path(const tensor_channel::received_totals& before,
                          const tensor_channel::received_totals& after,
                          uint64_t expected, uint64_t replies,
                          std::string* detail) {
  auto ring = after.ring_bytes - before.ring_bytes;
  auto socket = after.socket_bytes - before.socket_bytes;
  auto messages = after.messages - before.messages;
  if (detail)
    *detail = std::to_string(ring) + " bytes through the ring, "
              + std::to_string(socket) + " through the socket as tensor "
              "frames, of " + std::to_string(expected) + "; "
              + std::to_string(messages) + " channel replies in "
              + std::to_string(replies) + " steps";
  if (ring == 0 && socket == 0)
    return messages >= replies ? "tcp" : "tcp (CAF)";
  if (ring >= expected && socket == 0)
    return "ring";
  if (socket >= expected && ring == 0)
    return "tcp";
  return "ring+tcp";
}

variable counter_on_ps() {
  device_scope on_ps{"/job:ps/task:0"};
  return variable{0.0f, named("step_counter")};
}

} // namespace actorflow::bench
