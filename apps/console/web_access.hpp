#pragma once

// Who may use actorflow-console's web UI (web_ui.hpp), decided for each
// request before it is routed:
//
// - its Host must be a name the console is served as: the address it is
//   bound to; localhost, 127.0.0.1 and ::1 when that is a loopback address;
//   the machine's name and addresses when it is bound to every interface
//   (0.0.0.0, ::); and the names of --web_allowed_hosts ("*": any). A page
//   of another site that rebinds its own name to the console's address
//   (DNS rebinding) sends its own name: 403. The port is not checked (a
//   proxy in front may serve another).
// - a request that changes something (any method but GET and HEAD: POST
//   /api/trace) must come from the console's own page: an Origin that is
//   not http(s)://<Host>, or a Sec-Fetch-Site other than same-origin or
//   none, is refused (403). Clients that send neither (curl, scripts) go on
//   to the token check.
// - it must carry the console's token (unless it has none): an
//   `Authorization: Bearer TOKEN` header, the cookie the console set, or
//   `?token=TOKEN`, which sets that cookie (HttpOnly, SameSite=Strict; a
//   GET of / is then redirected to / without the token). Else 401.
//
// The refusals are said through a refusal_log: a few lines a minute at
// most, then how many were not shown. Free of httplib, so that the tests
// can drive it with any header values.

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/transport/refusal_log.hpp"

#include "actorflow/support/guarded_main.hpp"

namespace actorflow::apps {

inline std::string lowercase(std::string_view text) {
  std::string out{text};
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return out;
}

/// `text` for a log line or an answer: at most 100 characters, control
/// characters and non-ASCII bytes as '?' (a header is the client's).
inline std::string printable(std::string_view text) {
  std::string out{text.substr(0, 100)};
  for (auto& c : out)
    if (auto u = static_cast<unsigned char>(c); u < 0x20 || u >= 0x7f)
      c = '?';
  if (text.size() > 100)
    out += "...";
  return out;
}

/// The host name of a Host header's value, lowercase and without a
/// trailing dot: "Console.Example:8080" -> "console.example", "[::1]:80" ->
/// "::1"; "" if it is empty or malformed.
inline std::string host_header_name(std::string_view header) {
  std::string_view name;
  if (header.starts_with("[")) {
    auto close = header.find(']');
    if (close == std::string_view::npos)
      return {};
    auto rest = header.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(":"))
      return {};
    name = header.substr(1, close - 1);
  } else {
    name = header.substr(0, header.find(':'));
    if (header.find(':') != header.rfind(':'))
      return {}; // an IPv6 address must be in brackets
  }
  while (name.ends_with("."))
    name.remove_suffix(1);
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':'
          || c == '%'))
      return {};
  return lowercase(name);
}

/// True for "localhost", 127.0.0.0/8 and ::1.
inline bool is_loopback_host(const std::string& host) {
  if (lowercase(host) == "localhost")
    return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1
         && IN6_IS_ADDR_LOOPBACK(&v6);
}

/// True for the addresses that mean every interface.
inline bool is_wildcard_host(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

/// The names a console bound to `bind_host` is served as, `extra` (from
/// --web_allowed_hosts) included; lowercase.
inline std::vector<std::string>
served_names(const std::string& bind_host,
             const std::vector<std::string>& extra) {
  std::vector<std::string> names;
  auto add = [&](const std::string& name) {
    // Parsed as a Host header spells it: an IPv6 address in brackets.
    auto n = host_header_name(name.find(':') != std::string::npos
                                  && !name.starts_with("[")
                                ? "[" + name + "]"
                                : name);
    if (name == "*")
      n = "*";
    if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end())
      names.push_back(n);
  };
  add(bind_host);
  if (is_loopback_host(bind_host) || is_wildcard_host(bind_host))
    for (const char* name : {"localhost", "127.0.0.1", "::1"})
      add(name);
  if (is_wildcard_host(bind_host)) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0)
      add(name);
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) == 0) {
      for (auto* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr)
          continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (i->ifa_addr->sa_family == AF_INET)
          ::inet_ntop(AF_INET,
                      &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr,
                      text, sizeof(text));
        else if (i->ifa_addr->sa_family == AF_INET6)
          ::inet_ntop(AF_INET6,
                      &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                      text, sizeof(text));
        if (*text)
          add(text);
      }
      ::freeifaddrs(list);
    }
  }
  for (const auto& name : extra)
    add(name);
  return names;
}

using actorflow::refusal_log;

/// A fresh secret: 48 hex digits from getrandom(2).
inline std::string random_token() {
  unsigned char bytes[24];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    auto n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0)
      got += static_cast<size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

/// The token in `file` (--web_token): its first line without surrounding
/// whitespace. usage_error naming the flag if the file cannot be read or
/// its token is shorter than 16 characters (or has characters a URL or a
/// cookie would mangle).
inline std::string read_token_file(const std::string& file) {
  std::ifstream in{file};
  if (!in)
    throw support::usage_error("--web_token " + file + ": cannot be read");
  std::string line;
  std::getline(in, line);
  auto begin = line.find_first_not_of(" \t\r");
  auto end = line.find_last_not_of(" \t\r");
  auto token = begin == std::string::npos
                 ? std::string{}
                 : line.substr(begin, end - begin + 1);
  if (token.size() < 16)
    throw support::usage_error("--web_token " + file
                               + ": the token (its first line) must have 16 "
                                 "characters at least");
  for (unsigned char c : token)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~'))
      throw support::usage_error("--web_token " + file
                                 + ": the token may have only letters, "
                                   "digits and - _ . ~");
  return token;
}

/// One request as web_access sees it (the header values, "" when absent).
struct web_request {
  std::string method;
  std::string path;
  std::string host;           ///< Host
  std::string origin;         ///< Origin
  std::string sec_fetch_site; ///< Sec-Fetch-Site
  std::string authorization;  ///< Authorization
  std::string cookie;         ///< Cookie
  std::string token_param;    ///< ?token=
  bool has_token_param = false;
};

/// What to do with a request.
struct web_verdict {
  /// 0: go on to the handler; else answer with this status (403, 401, or
  /// 303 to `location`).
  int status = 0;
  /// Why it was refused, for the log and the answer.
  std::string reason;
  /// Set this cookie ("name=value; attributes") on the answer.
  std::string set_cookie;
  std::string location;
};

class web_access {
public:
  web_access() = default;

  /// Serves as `names` (served_names; "*" among them: any Host), needing
  /// `token` unless it is empty; the cookie is named after `port` (cookies
  /// are per host, not per port: two consoles on one host keep theirs).
  web_access(std::vector<std::string> names, std::string token, int port)
    : names_(std::move(names)), token_(std::move(token)),
      cookie_("actorflow_console_" + std::to_string(port)) {
  }

  const std::vector<std::string>& names() const noexcept {
    return names_;
  }

  web_verdict check(const web_request& req) const {
    web_verdict v;
    auto refuse = [&](int status, std::string why) {
      v.status = status;
      v.reason = std::move(why);
      return v;
    };
    // The Host: DNS rebinding.
    if (req.host.empty())
      return refuse(403, "no Host header");
    auto name = host_header_name(req.host);
    if (std::find(names_.begin(), names_.end(), "*") == names_.end()
        && (name.empty()
            || std::find(names_.begin(), names_.end(), name) == names_.end()))
      return refuse(403, "Host '" + printable(req.host)
                           + "' is not a name this console is served as");
    // Requests that change something: from the console's own page only.
    if (req.method != "GET" && req.method != "HEAD") {
      if (!req.origin.empty()) {
        auto origin = lowercase(req.origin);
        std::string_view rest{origin};
        bool scheme = rest.starts_with("http://") || rest.starts_with("https://");
        rest.remove_prefix(scheme ? rest.find("//") + 2 : 0);
        if (!scheme || rest != lowercase(req.host))
          return refuse(403, "Origin '" + printable(req.origin)
                               + "' is not this console's (a cross-site "
                                 "request)");
      } else if (!req.sec_fetch_site.empty()
                 && req.sec_fetch_site != "same-origin"
                 && req.sec_fetch_site != "none") {
        return refuse(403, "Sec-Fetch-Site '" + printable(req.sec_fetch_site)
                             + "' (a cross-site request)");
      }
    }
    if (token_.empty())
      return v;
    if (req.has_token_param) {
      if (!same(req.token_param, token_))
        return refuse(401, "wrong token in ?token=");
      v.set_cookie = cookie_ + "=" + token_
                     + "; Path=/; HttpOnly; SameSite=Strict";
      // The page without the token in the address bar and history.
      if (req.method == "GET" && req.path == "/") {
        v.status = 303;
        v.location = "/";
      }
      return v;
    }
    if (!req.authorization.empty()) {
      std::string_view auth{req.authorization};
      if (!auth.starts_with("Bearer ")
          || !same(auth.substr(7), token_))
        return refuse(401, "wrong token in the Authorization header");
      return v;
    }
    if (auto mine = cookie_value(req.cookie); !mine.empty()) {
      if (!same(mine, token_))
        return refuse(401, "wrong token in the cookie");
      return v;
    }
    return refuse(401, "no token (open the URL the console printed, with "
                       "?token=, or send Authorization: Bearer TOKEN)");
  }

private:
  // Compares in time independent of where they differ.
  static bool same(std::string_view a, std::string_view b) {
    if (a.size() != b.size())
      return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i)
      diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
  }

  // Our cookie's value in a Cookie header ("a=1; NAME=VALUE"), or "".
  std::string cookie_value(std::string_view header) const {
    while (!header.empty()) {
      auto end = header.find(';');
      auto item = header.substr(0, end);
      while (item.starts_with(" "))
        item.remove_prefix(1);
      if (item.starts_with(cookie_ + "="))
        return std::string{item.substr(cookie_.size() + 1)};
      if (end == std::string_view::npos)
        break;
      header.remove_prefix(end + 1);
    }
    return {};
  }

  std::vector<std::string> names_;
  std::string token_;
  std::string cookie_;
};

} // namespace actorflow::apps
