// actorflow-console: watches a running cluster through every task's
// monitor actor (transport/type_ids.hpp, monitor_actor): a terminal UI, or
// one JSON snapshot of the whole cluster with --once --json.
//
//   actorflow-console --cluster '{"ps": ["127.0.0.1:2222"], ...}'
//   actorflow-console --ps_hosts h:1 --worker_hosts h:2,h:3
//   actorflow-console --address 127.0.0.1:2222     (learns the cluster)
//   actorflow-console --cluster ... --once [--json]
//   actorflow-console --cluster ... --http 127.0.0.1:8080   (the web UI)
//   actorflow-console --cluster ... --record run.jsonl      (then --replay)
//
// With --tls_cert/--tls_key/--tls_ca (support/command_line.hpp) it connects
// to a TLS cluster as a client: its certificate must be for one of the
// nodes' --tls_allowed_peers (default `client` and `monitor`); a monitor
// certificate (actorflow-make-certs monitor:monitor) is all it needs.
//
// Exit status (support/guarded_main.hpp): 0 on q, SIGINT or SIGTERM, and
// after --once when every task is up and no alert is active; 3 after
// --once when a task is down or never answered, or an alert is active; 1 if the cluster cannot be learned from --address or
// the web UI cannot serve, 2 for a bad command line.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "actorflow/actorflow.hpp"
#include "cluster_flags.hpp"
#include "console/cluster_watch.hpp"
#include "console/summary.hpp"
#include "console/terminal_ui.hpp"
#include "console/web_ui.hpp"

namespace {

using namespace actorflow;
using namespace actorflow::apps;

constexpr const char* description = R"(Watches a running actorflow cluster: its tasks (up or down, round trip),
the actors on each (mailbox depth, messages/s, busy time), steps, queues,
variables and training progress, live.

  actorflow-console --cluster JSON [--once [--json]] [options]
  actorflow-console --ps_hosts H:P,... --worker_hosts H:P,... [...]
  actorflow-console --address HOST:PORT [...]
  TF_CONFIG='{"cluster": {...}}' actorflow-console [...]
)";

constexpr const char* footer = R"(Keys in the terminal UI are shown on screen; ? lists them, q quits.)";

struct options {
  cluster_flags cluster;
  std::optional<std::string> address;
  int interval_ms = 1000;
  bool once = false;
  bool json_out = false;
  int timeout_s = 5;
  std::optional<std::string> http;
  std::optional<std::string> web_dir;
  std::optional<std::string> web_allowed_hosts;
  std::optional<std::string> web_token;
  /// --web_token's token, read with the flags.
  std::string token;
  std::optional<std::string> record;
  std::optional<std::string> replay;
  double replay_speed = 1;
  std::vector<std::string> alert_flags;
  alert_rules alerts;
};

/// The options, or std::nullopt after --help.
std::optional<options> parse_args(int argc, char** argv) {
  options opts;
  opts.cluster.other_sources = ", or --address";
  command_line cl{"actorflow-console", description};
  cl.footer(footer);
  auto& app = cl.app();
  opts.cluster.add_cluster_to(app);
  app.add_option("--address", opts.address,
                 "one task's address; the cluster is learned from it")
    ->type_name("H:P")
    ->check(support::host_port_address())
    ->group("Cluster");
  app.add_option("--interval_ms", opts.interval_ms,
                 "how often tasks push updates")
    ->type_name("N")
    ->capture_default_str()
    ->check(support::integer_in(50, 60000));
  app.add_flag("--once", opts.once,
               "print one snapshot of the whole cluster (a text summary, or "
               "with --json a document) and exit: 0 when every task is up "
               "and no alert is active, 3 when one is down or never "
               "answered, or an alert is active");
  app.add_flag("--json", opts.json_out,
               "JSON instead of the terminal UI: with --once one document, "
               "without it one line per interval until SIGINT/SIGTERM (for "
               "scripts)");
  app.add_option("--timeout_s", opts.timeout_s,
                 "with --once: wait at most N s for every task to answer or "
                 "be seen down")
    ->type_name("N")
    ->capture_default_str()
    ->check(support::integer_in(1, 3600));
  app.add_option("--http", opts.http,
                 "serve the web UI there instead of the terminal UI (port 0: "
                 "a free one; the console prints its URL, with its token)")
    ->type_name("HOST:PORT")
    ->check(support::host_port_address());
  app.add_option("--web_dir", opts.web_dir,
                 "the web UI's files (default: next to the sources or the "
                 "installed share/actorflow/console)")
    ->type_name("DIR")
    ->check(support::non_empty());
  app.add_option("--web_allowed_hosts", opts.web_allowed_hosts,
                 "more names the web UI is served as (a proxy's, a DNS "
                 "name), comma-separated; requests with another Host get "
                 "403 (\"*\": any Host)")
    ->type_name("NAMES")
    ->check(support::non_empty())
    ->group("Web UI");
  app.add_option("--web_token", opts.web_token,
                 "the web UI's token is the first line of FILE (default: a "
                 "new one, in the URL the console prints)")
    ->type_name("FILE")
    ->check(support::non_empty())
    ->group("Web UI");
  app.add_option("--record", opts.record,
                 "also write what the console receives to FILE (JSON lines; "
                 "--replay shows it again)")
    ->type_name("FILE")
    ->check(support::non_empty())
    ->group("Recording");
  app.add_option("--replay", opts.replay,
                 "show a recording made with --record instead of a live "
                 "cluster (either UI, or --once/--json at its end)")
    ->type_name("FILE")
    ->check(support::non_empty())
    ->group("Recording");
  app.add_option("--replay_speed", opts.replay_speed,
                 "replay at N times the recorded pace")
    ->type_name("N")
    ->capture_default_str()
    ->check(support::positive_number())
    ->group("Recording");
  app.add_option("--alert", opts.alert_flags,
                 std::string{"set an alert rule, NAME=VALUE or NAME=off "
                             "(repeatable); rules: "}
                   + alert_rules::names
                   + "; defaults: task_down=on step_stalled_s=60 loss_nan=on "
                     "loss_jump=10 mailbox_growing=10 rss_growing_s=300")
    ->type_name("NAME=VALUE")
    ->group("Alerts");
  app.get_option("--http")->group("Web UI");
  app.get_option("--web_dir")->group("Web UI");
  if (!cl.parse(argc, argv))
    return std::nullopt;
  cl.apply();
  if (opts.address && opts.cluster.any_cluster_flag())
    throw usage_error("--address cannot be combined with --cluster, "
                      "--ps_hosts or --worker_hosts");
  if (opts.http && opts.json_out)
    throw usage_error("--http cannot be combined with --json");
  if (!opts.http && (opts.web_allowed_hosts || opts.web_token))
    throw usage_error(std::string{opts.web_token ? "--web_token"
                                                 : "--web_allowed_hosts"}
                      + " needs --http");
  if (opts.web_token)
    opts.token = read_token_file(*opts.web_token);
  if (opts.replay && (opts.record || opts.address
                      || opts.cluster.any_cluster_flag()))
    throw usage_error(std::string{"--replay cannot be combined with "}
                      + (opts.record ? "--record"
                                     : "--address, --cluster, --ps_hosts or "
                                       "--worker_hosts"));
  for (auto& a : opts.alert_flags) {
    try {
      opts.alerts.set(a);
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
  }
  return opts;
}

// The cluster a task at `address` belongs to, from its monitor document.
cluster_spec learn_cluster(const std::string& address, int timeout_s) {
  cluster_spec probe{
    std::map<std::string, std::vector<std::string>>{{"probe", {address}}}};
  cluster_watch watch{default_system(), probe, std::chrono::seconds(1)};
  auto until = std::chrono::steady_clock::now()
               + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    auto v = watch.view().front();
    if (v.has_node)
      return cluster_spec::from_json(v.node["cluster"].dump());
    if (v.state == "down")
      throw op_error(error_code::unavailable,
                     "--address " + address + ": " + v.error);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw op_error(error_code::deadline_exceeded,
                 "--address " + address + ": no answer within "
                   + std::to_string(timeout_s) + " s");
}

// The web UI's files: --web_dir, else the source tree's (a build tree's
// binary), else the installed ones; "" when none has index.html and uPlot.
std::filesystem::path web_dir(const std::optional<std::string>& flag) {
  std::vector<std::filesystem::path> candidates;
  if (flag)
    candidates.emplace_back(*flag);
  else
    candidates = {ACTORFLOW_CONSOLE_SOURCE_WEB_DIR,
                  ACTORFLOW_CONSOLE_INSTALLED_WEB_DIR};
  for (auto& dir : candidates)
    if (std::filesystem::exists(dir / "index.html")
        && std::filesystem::exists(dir / "node_modules/uplot/dist"))
      return dir;
  return {};
}

std::atomic<bool> stop_requested{false};

// --once's status when a task is down or never answered.
constexpr int exit_unhealthy = 3;

extern "C" void on_signal(int) {
  stop_requested = true;
}

int run(int argc, char** argv) {
  auto parsed = parse_args(argc, argv);
  if (!parsed)
    return 0;
  auto& opts = *parsed;
  cluster_spec cluster;
  if (!opts.address && !opts.replay) {
    std::optional<std::string> job;
    std::optional<std::string> task;
    std::string job_source;
    std::string task_source;
    cluster = resolve_cluster(opts.cluster, job, task, job_source,
                              task_source);
  }
  if (!opts.json_out && !opts.http && !opts.once && !::isatty(STDOUT_FILENO))
    throw usage_error("stdout is not a terminal; use --once (one summary), "
                      "--json, or both");
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  if (opts.address)
    cluster = learn_cluster(*opts.address, opts.timeout_s);
  auto watching =
    opts.replay ? std::make_unique<cluster_watch>(*opts.replay,
                                                  opts.replay_speed,
                                                  opts.alerts)
                : std::make_unique<cluster_watch>(
                  default_system(), cluster,
                  std::chrono::milliseconds(opts.interval_ms), opts.alerts,
                  opts.record.value_or(""));
  auto& watch = *watching;
  // Ages on screen: against the recording's time in a replay.
  display_clock() = [&watch] { return watch.now(); };
  if (opts.once) {
    auto until = std::chrono::steady_clock::now()
                 + std::chrono::seconds(opts.timeout_s);
    // Two updates of each task that is up: its rates are then measured,
    // not zero. A replay: its end.
    auto done = [&] {
      return opts.replay ? watch.replay_ended() : watch.settled(2);
    };
    while (!done() && !stop_requested
           && (opts.replay || std::chrono::steady_clock::now() < until))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto tasks = watch.view();
    auto active = watch.active_alerts();
    if (opts.json_out) {
      std::cout << watch.to_json().dump(2) << std::endl;
    } else {
      std::cout << once_summary(tasks, active) << std::flush;
    }
    return healthy(tasks, active) ? 0 : exit_unhealthy;
  }
  if (opts.json_out) {
    auto next = std::chrono::steady_clock::now();
    while (!stop_requested) {
      std::cout << watch.to_json().dump() << std::endl;
      next += std::chrono::milliseconds(opts.interval_ms);
      while (!stop_requested && std::chrono::steady_clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }
  if (opts.http) {
    auto dir = web_dir(opts.web_dir);
    if (dir.empty()) {
      log::error("the web UI's files are not there (index.html and "
                 "node_modules/uplot: run scripts/setup.sh, or give "
                 "--web_dir)");
      return 1;
    }
    host_port http;
    host_port::parse(*opts.http, http); // checked with the flags
    std::vector<std::string> allowed;
    if (opts.web_allowed_hosts)
      allowed = split_list("--web_allowed_hosts", *opts.web_allowed_hosts);
    // Generated unless given: then only the printed URL opens the page.
    auto token = opts.web_token ? opts.token : random_token();
    web_ui web{watch, dir, std::chrono::milliseconds(opts.interval_ms),
               [](const std::string& line) { log::warning(line); }};
    auto port = web.bind(http.host, http.port, allowed, token);
    if (port <= 0) {
      log::error("cannot listen on " + *opts.http);
      return 1;
    }
    auto url = "http://"
               + host_port{http.host, static_cast<uint16_t>(port)}.to_string()
               + "/";
    if (opts.web_token)
      std::cout << "actorflow-console: web UI at " << url << " (its token is "
                << "in " << *opts.web_token << ": open " << url
                << "?token=TOKEN once, or send Authorization: Bearer TOKEN)"
                << std::endl;
    else
      std::cout << "actorflow-console: web UI at " << url << "?token=" << token
                << std::endl;
    web.run(stop_requested);
    return 0;
  }
  terminal_ui ui{watch};
  ui.run(stop_requested);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  support::guarded_main("actorflow-console",
                        [&] { return run(argc, argv); });
}
