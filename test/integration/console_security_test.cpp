// Who may use actorflow-console, and how it reaches a TLS cluster:
// - the web UI answers only the names it is served as (a page that
//   rebinds its own name to the console's address sends that name as its
//   Host: DNS rebinding), refuses cross-site requests that change
//   something, and needs its token; refusals are logged a few times a
//   minute at most (apps/console/web_access.hpp, driven here directly and
//   through the real console with forged headers);
// - the console watches a TLS cluster with its own client certificate, and
//   is refused without one.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/temp_dir.hpp"
#include "console/web_access.hpp"
#include "integration_util.hpp"
#include "tls_util.hpp"

using namespace actorflow;
using namespace actorflow::testing;
using json = nlohmann::json;

namespace {

const std::string console_path = ACTORFLOW_CONSOLE_PATH;

/// The web UI of a console started with `args` (after --http
/// 127.0.0.1:0): its port and the token its URL carries ("" if none).
struct web_console {
  std::unique_ptr<child_process> proc;
  int port = 0;
  std::string token;

  explicit web_console(std::vector<std::string> args) {
    std::vector<std::string> argv{console_path, "--http", "127.0.0.1:0",
                                  "--interval_ms", "300"};
    argv.insert(argv.end(), args.begin(), args.end());
    proc = std::make_unique<child_process>(argv);
    auto line = proc->wait_for_line("web UI at ", 15s);
    INFO("console: " << proc->out() << proc->err());
    REQUIRE(line);
    static const std::regex url{
      R"(web UI at http://127\.0\.0\.1:(\d+)/(\?token=([0-9a-f]+))?)"};
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, url));
    port = std::stoi(m[1].str());
    token = m[3].str();
  }

  httplib::Client client() const {
    httplib::Client http{"127.0.0.1", port};
    http.set_connection_timeout(5);
    http.set_read_timeout(10);
    return http;
  }

  /// The headers of a request from the console's own page: its Host and
  /// its token.
  httplib::Headers own(httplib::Headers more = {}) const {
    more.emplace("Host", "127.0.0.1:" + std::to_string(port));
    more.emplace("Authorization", "Bearer " + token);
    return more;
  }

  /// How many refusals the console logged so far.
  size_t refusals() {
    auto err = proc->err();
    size_t n = 0;
    for (auto at = err.find("web UI: refused"); at != std::string::npos;
         at = err.find("web UI: refused", at + 1))
      ++n;
    return n;
  }
};

int status_of(const httplib::Result& res) {
  return res ? res->status : -1;
}

} // namespace

TEST_CASE("console web access: Host names, cross-site requests, tokens and "
          "the refusal log, decided without a server",
          "[console][web][security]") {
  CHECK(apps::host_header_name("Console.Example.:8080") == "console.example");
  CHECK(apps::host_header_name("[::1]:80") == "::1");
  CHECK(apps::host_header_name("127.0.0.1") == "127.0.0.1");
  CHECK(apps::host_header_name("::1").empty()); // IPv6 needs brackets
  CHECK(apps::host_header_name("evil.example/x").empty());

  auto loopback = apps::served_names("127.0.0.1", {});
  CHECK(loopback
        == std::vector<std::string>{"127.0.0.1", "localhost", "::1"});
  CHECK(apps::served_names("10.1.2.3", {"console.example"})
        == std::vector<std::string>{"10.1.2.3", "console.example"});
  auto every = apps::served_names("0.0.0.0", {});
  CHECK(std::find(every.begin(), every.end(), "localhost") != every.end());

  apps::web_access access{loopback, "s3cret-token-1234", 8080};
  apps::web_request own;
  own.method = "GET";
  own.path = "/api/cluster";
  own.host = "localhost:8080";
  own.authorization = "Bearer s3cret-token-1234";
  CHECK(access.check(own).status == 0);
  SECTION("Host") {
    auto r = own;
    r.host = "evil.example:8080";
    CHECK(access.check(r).status == 403);
    r.host = "";
    CHECK(access.check(r).status == 403);
    // What the client sent is quoted, but not a terminal's escape.
    r.host = "evil\x1b[2J.example";
    auto v = access.check(r);
    CHECK(v.status == 403);
    CHECK(v.reason == "Host 'evil?[2J.example' is not a name this console is "
                      "served as");
    r.host = "[::1]:8080";
    CHECK(access.check(r).status == 0);
    apps::web_access any{{"*"}, "", 8080};
    r.host = "evil.example";
    CHECK(any.check(r).status == 0);
  }
  SECTION("cross-site requests that change something") {
    auto post = own;
    post.method = "POST";
    CHECK(access.check(post).status == 0); // no Origin: curl, a script
    post.origin = "http://localhost:8080";
    CHECK(access.check(post).status == 0);
    post.origin = "http://evil.example";
    CHECK(access.check(post).status == 403);
    post.origin = "http://localhost:9999"; // another port, another origin
    CHECK(access.check(post).status == 403);
    post.origin = "null";
    CHECK(access.check(post).status == 403);
    post.origin = "";
    post.sec_fetch_site = "cross-site";
    CHECK(access.check(post).status == 403);
    post.sec_fetch_site = "same-origin";
    CHECK(access.check(post).status == 0);
    // A GET only reads: a cross-site page cannot read the answer.
    auto get = own;
    get.origin = "http://evil.example";
    CHECK(access.check(get).status == 0);
  }
  SECTION("the token") {
    auto r = own;
    r.authorization = "";
    auto v = access.check(r);
    CHECK(v.status == 401);
    r.authorization = "Bearer s3cret-token-1235";
    CHECK(access.check(r).status == 401);
    r.authorization = "s3cret-token-1234";
    CHECK(access.check(r).status == 401);
    r.authorization = "";
    r.cookie = "a=b; actorflow_console_8080=s3cret-token-1234";
    CHECK(access.check(r).status == 0);
    r.cookie = "actorflow_console_9090=s3cret-token-1234"; // another console
    CHECK(access.check(r).status == 401);
    r.cookie = "";
    r.has_token_param = true;
    r.token_param = "s3cret-token-1234";
    v = access.check(r);
    CHECK(v.status == 0);
    CHECK(v.set_cookie
          == "actorflow_console_8080=s3cret-token-1234; Path=/; HttpOnly; "
             "SameSite=Strict");
    r.path = "/";
    v = access.check(r);
    CHECK(v.status == 303);
    CHECK(v.location == "/");
    r.token_param = "wrong";
    CHECK(access.check(r).status == 401);
    CHECK(access.check(r).set_cookie.empty());
  }
  SECTION("the refusal log: five lines a window, then how many were hidden") {
    std::vector<std::string> said;
    actorflow::refusal_log log{[&](const std::string& l) { said.push_back(l); }, 5,
                          std::chrono::seconds{60}};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i)
      log.say("refused " + std::to_string(i), t0 + std::chrono::seconds{i});
    REQUIRE(said.size() == 5);
    CHECK(said[4] == "refused 4");
    log.say("refused late", t0 + std::chrono::seconds{61});
    REQUIRE(said.size() == 6);
    CHECK(said[5]
          == "refused late (and 35 more refusals before, not shown)");
  }
}

TEST_CASE("console: the web UI answers only the names it is served as (a "
          "forged Host gets 403), and logs refusals a few times a minute",
          "[console][security]") {
  auto nobody = "127.0.0.1:" + std::to_string(free_port());
  web_console web{{"--ps_hosts", nobody, "--web_allowed_hosts",
                   "console.example"}};
  auto http = web.client();
  auto port = ":" + std::to_string(web.port);
  for (auto host : {"127.0.0.1" + port, "localhost" + port,
                    "console.example" + port}) {
    INFO(host);
    auto res = http.Get("/api/cluster", {{"Host", host},
                                         {"Authorization",
                                          "Bearer " + web.token}});
    REQUIRE(status_of(res) == 200);
    CHECK(json::parse(res->body)["tasks"].size() == 1);
  }
  // A rebound name: the browser sends the attacker's name as Host.
  for (auto path : {"/", "/api/cluster", "/events", "/api/trace?task=x"}) {
    INFO(path);
    auto res = http.Get(path, {{"Host", "rebind.evil.example" + port},
                               {"Authorization", "Bearer " + web.token}});
    CHECK(status_of(res) == 403);
    if (res)
      CHECK(res->body.find("{\"cluster\"") == std::string::npos);
  }
  auto err = err_with(*web.proc, "Host 'rebind.evil.example");
  CHECK_THAT(err, Catch::Contains("web UI: refused GET / from 127.0.0.1:"));
  CHECK_THAT(err, Catch::Contains("Host 'rebind.evil.example" + port
                                  + "' is not a name this console is served "
                                    "as"));
  // A flood is answered, but logged five times a minute at most.
  for (int i = 0; i < 30; ++i)
    CHECK(status_of(http.Get("/", {{"Host", "flood.evil.example"}})) == 403);
  CHECK(status_of(http.Get("/api/cluster", web.own())) == 200);
  std::this_thread::sleep_for(300ms);
  CHECK(web.refusals() == 5);
}

TEST_CASE("console: a cross-site POST to /api/trace is refused and traces "
          "nothing, one from the console's own page traces the next step",
          "[console][security]") {
  auto port = free_port();
  auto address = "127.0.0.1:" + std::to_string(port);
  auto spec = R"({"worker": [")" + address + R"("]})";
  child_process node{{node_path, "--cluster", spec, "--job", "worker",
                      "--parent-pid", std::to_string(::getpid())}};
  REQUIRE(node.wait_for_line("serving", 15s));
  web_console web{{"--cluster", spec}};
  auto http = web.client();
  const std::string task = "/job:worker/replica:0/task:0";
  // Up in the console.
  auto deadline = std::chrono::steady_clock::now() + 15s;
  bool up = false;
  // Polls the console's document; bounded by the deadline.
  while (!up && std::chrono::steady_clock::now() < deadline) {
    auto res = http.Get("/api/cluster", web.own());
    up = res && res->status == 200
         && json::parse(res->body)["tasks"][0]["state"] == "up";
    if (!up)
      std::this_thread::sleep_for(100ms);
  }
  REQUIRE(up);
  auto trace_path = "/api/trace?task=" + task;
  graph g;
  auto as_default = g.as_default();
  output c;
  {
    device_scope on_worker{"/job:worker/task:0"};
    c = constant(2.0f) * constant(3.0f);
  }
  session sess{"grpc://" + address, bounded(), &g};
  auto step_then_trace = [&] {
    CHECK(sess.run(c).scalar_value<float>() == 6.0f);
    return http.Get(trace_path.c_str(), web.own());
  };
  auto origin = "http://127.0.0.1:" + std::to_string(web.port);
  // A page of another site posting (a form, or fetch in no-cors mode)
  // with the user's token (the worst case: the cookie is SameSite=Strict).
  for (auto cross : {httplib::Headers{{"Origin", "http://evil.example"}},
                     httplib::Headers{{"Origin", "null"}},
                     httplib::Headers{{"Sec-Fetch-Site", "cross-site"}},
                     httplib::Headers{{"Origin", origin + "1"}}}) {
    auto res = http.Post(trace_path.c_str(), web.own(cross), "",
                         "application/x-www-form-urlencoded");
    CHECK(status_of(res) == 403);
  }
  // Without the token, from the right origin: 401, and nothing either.
  auto anonymous = http.Post(
    trace_path.c_str(),
    {{"Host", "127.0.0.1:" + std::to_string(web.port)}, {"Origin", origin}},
    "", "text/plain");
  CHECK(status_of(anonymous) == 401);
  // The master traced no step: nobody asked it to.
  auto none = step_then_trace();
  CHECK(status_of(none) == 404);
  CHECK_THAT(err_with(*web.proc, "cross-site request"),
             Catch::Contains("web UI: refused POST /api/trace from "
                             "127.0.0.1:"));
  // The console's own page: its Origin, and the cookie its URL set.
  auto cookie = "actorflow_console_" + std::to_string(web.port) + "="
                + web.token;
  auto own = http.Post(trace_path.c_str(),
                       {{"Host", "127.0.0.1:" + std::to_string(web.port)},
                        {"Origin", origin},
                        {"Sec-Fetch-Site", "same-origin"},
                        {"Cookie", cookie}},
                       "", "text/plain");
  REQUIRE(status_of(own) == 200);
  CHECK(json::parse(own->body)["requested"] == true);
  auto traced = step_then_trace();
  REQUIRE(status_of(traced) == 200);
  CHECK_FALSE(json::parse(traced->body)["traceEvents"].empty());
}

TEST_CASE("console: the web UI needs its token (401 without it or with a "
          "wrong one), the printed URL sets a cookie, --web_token FILE gives "
          "it",
          "[console][security]") {
  auto nobody = "127.0.0.1:" + std::to_string(free_port());
  SECTION("a new token, in the printed URL") {
    web_console web{{"--ps_hosts", nobody}};
    REQUIRE(web.token.size() == 48);
    auto http = web.client();
    httplib::Headers host{{"Host", "127.0.0.1:" + std::to_string(web.port)}};
    for (auto path : {"/", "/api/cluster", "/events", "/uPlot.min.css"}) {
      INFO(path);
      auto res = http.Get(path, host);
      CHECK(status_of(res) == 401);
      if (res) {
        CHECK(res->get_header_value("WWW-Authenticate")
              == "Bearer realm=\"actorflow-console\"");
        CHECK(res->get_header_value("Set-Cookie").empty());
      }
    }
    auto wrong = host;
    wrong.emplace("Authorization", "Bearer " + std::string(48, '0'));
    CHECK(status_of(http.Get("/api/cluster", wrong)) == 401);
    CHECK(status_of(http.Get("/?token=" + std::string(48, '0'), host)) == 401);
    // The printed URL: a cookie, and the page without the token.
    auto opened = http.Get("/?token=" + web.token, host);
    REQUIRE(status_of(opened) == 303);
    CHECK(opened->get_header_value("Location") == "/");
    auto set = opened->get_header_value("Set-Cookie");
    CHECK_THAT(set, Catch::StartsWith("actorflow_console_"
                                      + std::to_string(web.port) + "="
                                      + web.token + ";"));
    CHECK_THAT(set, Catch::Contains("HttpOnly"));
    CHECK_THAT(set, Catch::Contains("SameSite=Strict"));
    auto with_cookie = host;
    with_cookie.emplace("Cookie", set.substr(0, set.find(';')));
    auto page = http.Get("/", with_cookie);
    REQUIRE(status_of(page) == 200);
    CHECK_THAT(page->body, Catch::Contains("<!doctype html>"));
    CHECK(status_of(http.Get("/api/cluster", web.own())) == 200);
    CHECK_THAT(err_with(*web.proc, "no token"),
               Catch::Contains("web UI: refused GET / from 127.0.0.1:"));
  }
  SECTION("--web_token FILE") {
    temp_dir dir{"actorflow-console-token"};
    auto file = dir.write("token", "  my-own-console-token-0042\n");
    web_console web{{"--ps_hosts", nobody, "--web_token", file}};
    CHECK(web.token.empty()); // not printed
    CHECK_THAT(web.proc->out(), Catch::Contains("its token is in " + file));
    auto http = web.client();
    httplib::Headers auth{{"Host", "localhost"},
                          {"Authorization", "Bearer my-own-console-token-0042"}};
    CHECK(status_of(http.Get("/api/cluster", auth)) == 200);
    CHECK(status_of(http.Get("/api/cluster", {{"Host", "localhost"}})) == 401);
  }
  SECTION("bad flags") {
    temp_dir dir{"actorflow-console-token"};
    auto short_token = dir.write("short", "abc\n");
    auto res = run_process({console_path, "--ps_hosts", nobody, "--http",
                            "127.0.0.1:0", "--web_token", short_token},
                           10s);
    CHECK(res.status.code == 2);
    CHECK_THAT(res.err, Catch::Contains("--web_token " + short_token));
    res = run_process({console_path, "--ps_hosts", nobody, "--once", "--json",
                       "--web_allowed_hosts", "a.example"},
                      10s);
    CHECK(res.status.code == 2);
    CHECK_THAT(res.err, Catch::Contains("--web_allowed_hosts needs --http"));
  }
}

TEST_CASE("console: watches a TLS cluster with its client or monitor "
          "certificate, and sees it down without one",
          "[console][tls]") {
  pki keys{{"node:127.0.0.1,localhost", "client:client", "monitor:monitor",
            "stranger:stranger"}};
  auto opts = captured();
  opts.args = keys.flags("node");
  local_cluster nodes{node_path, {{"ps", 1}, {"worker", 1}}, opts};
  auto spec = nodes.spec().to_json();
  // --once exits 0 when every task is up, 3 when one is not.
  auto snapshot = [&](std::vector<std::string> flags, int code = 0) {
    std::vector<std::string> argv{console_path, "--cluster", spec, "--once",
                                  "--json", "--timeout_s", "10"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto res = run_process(argv, 30s);
    INFO(res.out << res.err);
    REQUIRE(res.status.code == code);
    return json::parse(res.out);
  };
  // Both tasks up, each with its document.
  auto check_watched = [](const json& doc) {
    REQUIRE(doc["tasks"].size() == 2);
    for (auto& t : doc["tasks"]) {
      INFO(t.dump());
      CHECK(t["state"] == "up");
      REQUIRE(t.contains("node"));
      CHECK(t["node"]["task"] == t["task"]);
    }
  };
  SECTION("with the client certificate") {
    check_watched(snapshot(keys.flags("client")));
    CHECK(nodes.process("ps", 0).err().find("refused") == std::string::npos);
  }
  SECTION("with a monitor certificate: everything the console asks is a "
          "monitor's to ask") {
    check_watched(snapshot(keys.flags("monitor")));
    for (const auto* job : {"ps", "worker"})
      CHECK(nodes.process(job, 0).err().find("may only watch")
            == std::string::npos);
  }
  SECTION("without a certificate") {
    auto doc = snapshot({}, 3);
    for (auto& t : doc["tasks"]) {
      INFO(t.dump());
      CHECK(t["state"] == "down");
      CHECK_FALSE(t.contains("node"));
      CHECK_THAT(t["error"].get<std::string>(),
                 Catch::Contains("a TLS cluster? give the console "
                                 "--tls_cert"));
    }
    CHECK_THAT(err_with(nodes.process("ps", 0), "refused TLS peer"),
               Catch::Contains("refused TLS peer 127.0.0.1:"));
  }
  SECTION("with a certificate for a name the nodes do not allow") {
    auto doc = snapshot(keys.flags("stranger"), 3);
    for (auto& t : doc["tasks"]) {
      INFO(t.dump());
      CHECK(t["state"] == "down");
      CHECK_THAT(t["error"].get<std::string>(),
                 Catch::Contains("does it accept this process's certificate "
                                 "name?"));
    }
    CHECK_THAT(err_with(nodes.process("worker", 0), "(DNS:stranger)"),
               Catch::Contains("certificate '/CN=stranger' (DNS:stranger, "
                               "URI:urn:actorflow:role:task) is "
                               "not for a host of the cluster nor an allowed "
                               "peer"));
  }
}
