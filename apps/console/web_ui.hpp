#pragma once

// actorflow-console's web UI: one page (web/index.html) with the console's
// views and uPlot charts, updated live through server-sent events, and a
// step timeline: the page asks a master to trace its next step and shows
// the Chrome trace (also offered for download, for Perfetto). Served with
// Debian's cpp-httplib; uPlot comes from the npm registry into
// web/node_modules (scripts/setup.sh), never from this repository. Every
// request passes web_access (web_access.hpp) first: a Host the console is
// not served as, a cross-site request that would change something and a
// request without the console's token are refused before any handler
// runs, and said in the log (a few a minute at most).

#include <atomic>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "console/cluster_watch.hpp"
#include "console/web_access.hpp"

namespace actorflow::apps {

class web_ui {
public:
  /// Serves `watch` from the files in `web_dir` (index.html and
  /// node_modules/uplot/dist). Refusals are said through `log`.
  web_ui(cluster_watch& watch, std::filesystem::path web_dir,
         std::chrono::milliseconds interval,
         std::function<void(const std::string&)> log)
    : watch_(watch), dir_(std::move(web_dir)), interval_(interval),
      refusals_(std::move(log)) {
    http_.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        return admit(req, res) ? httplib::Server::HandlerResponse::Unhandled
                               : httplib::Server::HandlerResponse::Handled;
      });
    file("/", dir_ / "index.html", "text/html; charset=utf-8");
    file("/console.js", dir_ / "console.js", "application/javascript");
    file("/uPlot.iife.min.js",
         dir_ / "node_modules/uplot/dist/uPlot.iife.min.js",
         "application/javascript");
    file("/uPlot.min.css", dir_ / "node_modules/uplot/dist/uPlot.min.css",
         "text/css");
    http_.Get("/api/cluster", [this](const httplib::Request&,
                                     httplib::Response& res) {
      res.set_content(watch_.to_json().dump(), "application/json");
    });
    http_.Get("/events", [this](const httplib::Request&,
                                httplib::Response& res) {
      // One event per interval until the client goes or we stop.
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
        "text/event-stream", [this](size_t, httplib::DataSink& sink) {
          if (stopping_)
            return false;
          auto event = "data: " + watch_.to_json().dump() + "\n\n";
          if (!sink.write(event.data(), event.size()))
            return false;
          auto until = std::chrono::steady_clock::now() + interval_;
          while (!stopping_ && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return !stopping_;
        });
    });
    // What the tasks kept before the page opened, their logs, an actor's
    // recent figures: asked for by the page, not pushed every interval.
    http_.Get("/api/history", [this](const httplib::Request&,
                                     httplib::Response& res) {
      res.set_content(watch_.history_json().dump(), "application/json");
    });
    http_.Get("/api/logs", [this](const httplib::Request& req,
                                  httplib::Response& res) {
      json out;
      auto st = watch_.logs_json(req.get_param_value("task"),
                                 number_param(req, "after"), out);
      reply(res, st, std::move(out));
    });
    http_.Get("/api/actor_history", [this](const httplib::Request& req,
                                           httplib::Response& res) {
      json out;
      auto st = watch_.actor_history_json(req.get_param_value("task"),
                                          number_param(req, "id"), out);
      reply(res, st, std::move(out));
    });
    http_.Post("/api/trace", [this](const httplib::Request& req,
                                    httplib::Response& res) {
      auto st = watch_.request_trace(req.get_param_value("task"));
      reply(res, st, json{{"requested", st.ok()}});
    });
    http_.Get("/api/trace", [this](const httplib::Request& req,
                                   httplib::Response& res) {
      auto task = req.get_param_value("task");
      int64_t at_us = 0;
      std::string trace;
      auto st = watch_.last_trace(task, at_us, trace);
      if (st.ok() && at_us == 0)
        st = {error_code::not_found, "no traced step of " + task + " yet"};
      if (!st.ok())
        return reply(res, st, {});
      if (req.has_param("download"))
        res.set_header("Content-Disposition",
                       "attachment; filename=\"actorflow-trace.json\"");
      res.set_header("X-Traced-At-Us", std::to_string(at_us));
      res.set_content(std::move(trace), "application/json");
    });
  }

  /// Binds `host`:`port` (0: a free port); the port, or 0 if it cannot.
  /// It then answers requests whose Host is one of served_names(`host`,
  /// `allowed_hosts`) and that carry `token` (none needed if it is empty).
  int bind(const std::string& host, int port,
           const std::vector<std::string>& allowed_hosts,
           const std::string& token) {
    int bound = port == 0 ? http_.bind_to_any_port(host)
                          : (http_.bind_to_port(host, port) ? port : 0);
    access_ = web_access{served_names(host, allowed_hosts), token, bound};
    return bound;
  }

  /// Serves until `stop` becomes true (a signal).
  void run(const std::atomic<bool>& stop) {
    std::thread server{[this] { http_.listen_after_bind(); }};
    while (!stop)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stopping_ = true;
    http_.stop();
    server.join();
  }

private:
  // web_access's verdict on `req`: true to go on to the handler; else the
  // answer is in `res` and the refusal in the log.
  bool admit(const httplib::Request& req, httplib::Response& res) {
    web_request r;
    r.method = req.method;
    r.path = req.path;
    r.host = req.get_header_value("Host");
    r.origin = req.get_header_value("Origin");
    r.sec_fetch_site = req.get_header_value("Sec-Fetch-Site");
    r.authorization = req.get_header_value("Authorization");
    r.cookie = req.get_header_value("Cookie");
    r.has_token_param = req.has_param("token");
    r.token_param = req.get_param_value("token");
    auto v = access_.check(r);
    if (!v.set_cookie.empty())
      res.set_header("Set-Cookie", v.set_cookie);
    if (v.status == 0)
      return true;
    res.status = v.status;
    if (v.status == 303) {
      res.set_header("Location", v.location);
      return false;
    }
    if (v.status == 401)
      res.set_header("WWW-Authenticate", "Bearer realm=\"actorflow-console\"");
    // The reason quotes the request's headers: text, never a page.
    res.set_header("X-Content-Type-Options", "nosniff");
    refusals_.say("web UI: refused " + printable(req.method) + " "
                  + printable(req.path) + " from "
                  + req.remote_addr + ":" + std::to_string(req.remote_port)
                  + ": " + v.reason);
    res.set_content(std::string{v.status == 401 ? "401 Unauthorized: "
                                                : "403 Forbidden: "}
                      + v.reason + "\n",
                    "text/plain; charset=utf-8");
    return false;
  }

  void file(const std::string& path, std::filesystem::path on_disk,
            std::string type) {
    http_.Get(path, [on_disk, type](const httplib::Request&,
                                    httplib::Response& res) {
      std::ifstream in{on_disk, std::ios::binary};
      if (!in) {
        res.status = 404;
        res.set_content(on_disk.string() + " is missing (scripts/setup.sh "
                                           "installs it)\n",
                        "text/plain");
        return;
      }
      res.set_content(std::string{std::istreambuf_iterator<char>{in}, {}},
                      type);
    });
  }

  // A query parameter as an unsigned number (0 when absent or not one).
  static uint64_t number_param(const httplib::Request& req,
                               const char* name) {
    auto text = req.get_param_value(name);
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(),
                                     value);
    return ec == std::errc{} && end == text.data() + text.size() ? value : 0;
  }

  static void reply(httplib::Response& res, const status& st, json body) {
    if (!st.ok()) {
      res.status = st.code() == error_code::not_found ? 404 : 503;
      body = {{"error", st.to_string()}};
    }
    res.set_content(body.dump(), "application/json");
  }

  cluster_watch& watch_;
  std::filesystem::path dir_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> stopping_{false};
  refusal_log refusals_;
  // Set by bind, before the server's thread starts.
  web_access access_;
  httplib::Server http_;
};

} // namespace actorflow::apps
