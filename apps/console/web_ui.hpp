#pragma once

// actorflow-console's web UI: one page (web/index.html) with the console's
// views and uPlot charts, updated live through server-sent events, and a
// step timeline: the page asks a master to trace its next step and shows
// the Chrome trace (also offered for download, for Perfetto). Served with
// Debian's cpp-httplib; uPlot comes from the npm registry into
// web/node_modules (scripts/setup.sh), never from this repository.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <httplib.h>

#include "console/cluster_watch.hpp"

namespace actorflow::apps {

class web_ui {
public:
  /// Serves `watch` from the files in `web_dir` (index.html and
  /// node_modules/uplot/dist).
  web_ui(cluster_watch& watch, std::filesystem::path web_dir,
         std::chrono::milliseconds interval)
    : watch_(watch), dir_(std::move(web_dir)), interval_(interval) {
    file("/", dir_ / "index.html", "text/html; charset=utf-8");
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
  int bind(const std::string& host, int port) {
    return port == 0 ? http_.bind_to_any_port(host)
                     : (http_.bind_to_port(host, port) ? port : 0);
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
  httplib::Server http_;
};

} // namespace actorflow::apps
