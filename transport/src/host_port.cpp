#include "actorflow/transport/host_port.hpp"

namespace actorflow {

status host_port::parse(std::string_view text, host_port& out) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("Invalid host:port \"" + std::string{text}
                            + "\": " + why);
  };
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return bad("no port");
  auto host = text.substr(0, colon);
  auto port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find_first_of("[]:") != std::string_view::npos)
    return bad("an IPv6 address needs brackets ([::1]:2222)");
  if (host.empty())
    return bad("no host");
  if (port_text.empty() || port_text.size() > 5)
    return bad("the port must be a number in 0..65535");
  uint32_t port = 0;
  for (auto c : port_text) {
    if (c < '0' || c > '9')
      return bad("the port must be a number in 0..65535");
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port > 65535)
    return bad("the port must be a number in 0..65535");
  out.host = std::string{host};
  out.port = static_cast<uint16_t>(port);
  return {};
}

std::string host_port::to_string() const {
  auto p = std::to_string(port);
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + p;
  return host + ":" + p;
}

std::string host_of(std::string_view address) {
  host_port hp;
  if (host_port::parse(address, hp).ok())
    return hp.host;
  // A bare bracketed IPv6 address.
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  return std::string{address};
}

} // namespace actorflow
