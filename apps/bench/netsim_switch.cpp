// The bench's simulated network's switch (the hidden `--netsim-switch`
// mode; the group that measures across it is netsim.cpp): it makes the
// hosts' network namespaces and one TUN device in each (moved there, its
// file descriptor kept here), reads every IP packet a host sends, and
// writes it into the destination host's device when the links' model
// (link_model.hpp) says it arrives. It is the user-space stand-in for a
// bridge with `tc netem delay D rate R` on every port, which this kernel
// may not offer (Firecracker's lacks sch_netem).

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <vector>

#include "bench/groups.hpp"
#include "bench/link_model.hpp"
#include "bench/netsim.hpp"

namespace actorflow::bench {

namespace {

/// Jumbo packets of up to 64 KB, as loopback's (and a NIC's segmentation
/// offload hands the stack): one packet per 64 KB keeps the switch's
/// per-packet work small enough for 10 Gbit/s on this host.
constexpr int link_mtu = 65000;

/// The namespaces of a switch named `name` (`hosts` of them) and their
/// devices: made by the constructor, removed by the destructor.
class sim_hosts {
public:
  /// Throws std::runtime_error (what is made so far removed again).
  sim_hosts(std::string name, int hosts) : name_(std::move(name)) {
    try {
      make(hosts);
    } catch (...) {
      remove();
      throw;
    }
  }

  sim_hosts(const sim_hosts&) = delete;
  sim_hosts& operator=(const sim_hosts&) = delete;

  ~sim_hosts() {
    remove();
  }

  const std::vector<int>& fds() const noexcept {
    return fds_;
  }

private:
  void make(int hosts) {
    for (int i = 0; i < hosts; ++i) {
      auto ns = netns_name(name_, i);
      ip_command({"netns", "add", ns});
      made_.push_back(ns);
      auto dev = device_name(name_, i);
      int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0)
        throw std::runtime_error("netsim: /dev/net/tun: "
                                 + std::string{std::strerror(errno)});
      fds_.push_back(fd);
      ifreq ifr{};
      ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
      std::strncpy(ifr.ifr_name, dev.c_str(), IFNAMSIZ - 1);
      if (::ioctl(fd, TUNSETIFF, &ifr) != 0)
        throw std::runtime_error("netsim: TUNSETIFF " + dev + ": "
                                 + std::strerror(errno));
      // The device goes to the host's namespace; its descriptor stays
      // here, the switch's end of the link.
      ip_command({"link", "set", "dev", dev, "netns", ns});
      ip_command({"-n", ns, "link", "set", "lo", "up"});
      ip_command({"-n", ns, "addr", "add", host_ip(i) + "/24", "dev", dev});
      ip_command({"-n", ns, "link", "set", "dev", dev, "mtu",
                  std::to_string(link_mtu), "up"});
    }
  }

  void remove() noexcept {
    for (int fd : fds_)
      ::close(fd);
    fds_.clear();
    for (const auto& ns : made_) {
      try {
        ip_command({"netns", "del", ns});
      } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
      }
    }
    made_.clear();
  }

  std::string name_;
  std::vector<std::string> made_;
  std::vector<int> fds_;
};

/// A packet on its way: reaching the switch (`at_switch`), or its host.
/// `data` is a whole buffer (link_mtu and more), `size` of it the packet.
struct in_flight {
  int64_t at;
  uint64_t seq;
  bool at_switch;
  int dst;
  size_t size;
  std::vector<char> data;
};

struct later {
  bool operator()(const in_flight& a, const in_flight& b) const noexcept {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// The destination host of an IPv4 packet on the subnet, or -1.
int destination(const char* p, ssize_t n, int hosts) {
  if (n < 20 || (static_cast<unsigned char>(p[0]) >> 4) != 4)
    return -1;
  auto b = [&](int i) { return static_cast<unsigned char>(p[i]); };
  if (b(16) != 10 || b(17) != 77 || b(18) != 0)
    return -1;
  int host = b(19) - 1;
  return host >= 0 && host < hosts ? host : -1;
}

} // namespace

int serve_netsim_switch(pid_t parent, const std::string& name, int hosts,
                        int64_t delay_us, double rate_mbit) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (parent > 0 && ::getppid() != parent)
    return 1;
  if (hosts < 2 || hosts > max_hosts || delay_us < 0 || !(rate_mbit > 0)) {
    std::cerr << "netsim switch: --hosts 2.." << max_hosts
              << ", --delay_us >= 0, --rate_mbit > 0\n";
    return 2;
  }
  // The devices are named after the switch (NAMEt<i>), and Linux takes at
  // most IFNAMSIZ - 1 characters.
  if (name.empty() || device_name(name, hosts - 1).size() >= IFNAMSIZ) {
    std::cerr << "netsim switch: --name '" << name << "' must be 1 to "
              << IFNAMSIZ - 2 - std::to_string(hosts - 1).size()
              << " characters (its devices are NAMEt<host>)\n";
    return 2;
  }
  // Timers to the microsecond: the default slack (50 us) would be half of
  // the 100 us link's delay.
  ::prctl(PR_SET_TIMERSLACK, 1UL);
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&stop, sig);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  int sfd = ::signalfd(-1, &stop, SFD_CLOEXEC);
  link_model links{static_cast<size_t>(hosts),
                   {.delay_ns = delay_us * 1000,
                    .bits_per_s = rate_mbit * 1e6,
                    .queue_bytes = uint64_t{4} << 20}};
  std::optional<sim_hosts> sim;
  try {
    sim.emplace(name, hosts);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(hosts); // the signal
  ::epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
  for (int i = 0; i < hosts; ++i) {
    ev.data.u32 = static_cast<uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, sim->fds()[i], &ev);
  }
  std::cout << switch_marker << std::endl;
  std::vector<in_flight> heap;
  std::vector<std::vector<char>> spare;
  uint64_t seq = 0, packets = 0, dropped = 0, foreign = 0;
  // Buffers are reused whole: a packet's size travels beside it.
  auto buffer = [&] {
    if (spare.empty())
      return std::vector<char>(link_mtu + 100);
    auto b = std::move(spare.back());
    spare.pop_back();
    return b;
  };
  auto push = [&](in_flight p) {
    heap.push_back(std::move(p));
    std::push_heap(heap.begin(), heap.end(), later{});
  };
  for (bool running = true; running;) {
    timespec wait{};
    timespec* timeout = nullptr;
    if (!heap.empty()) {
      auto left = std::max<int64_t>(heap.front().at - now_ns(), 0);
      wait.tv_sec = left / 1'000'000'000;
      wait.tv_nsec = left % 1'000'000'000;
      timeout = &wait;
    }
    epoll_event ready[max_hosts + 1];
    int n = ::epoll_pwait2(ep, ready, max_hosts + 1, timeout, nullptr);
    if (n < 0 && errno != EINTR)
      break;
    for (int k = 0; k < n; ++k) {
      auto src = static_cast<int>(ready[k].data.u32);
      if (src == hosts) {
        running = false;
        break;
      }
      // A burst at most, then the due packets: a busy sender does not
      // hold up the deliveries.
      for (int burst = 0; burst < 64; ++burst) {
        auto b = buffer();
        auto got = ::read(sim->fds()[src], b.data(), b.size());
        if (got <= 0) {
          spare.push_back(std::move(b));
          break;
        }
        int dst = destination(b.data(), got, hosts);
        if (dst < 0 || dst == src) {
          ++foreign; // IPv6 neighbour chatter and the like
          spare.push_back(std::move(b));
          continue;
        }
        ++packets;
        auto at = links.send(now_ns(), src, static_cast<uint64_t>(got));
        if (!at) {
          ++dropped;
          spare.push_back(std::move(b));
          continue;
        }
        push({*at, seq++, true, dst, static_cast<size_t>(got), std::move(b)});
      }
    }
    for (auto now = now_ns(); !heap.empty() && heap.front().at <= now;) {
      std::pop_heap(heap.begin(), heap.end(), later{});
      auto p = std::move(heap.back());
      heap.pop_back();
      if (p.at_switch) {
        auto at = links.forward(p.at, p.dst, p.size);
        if (at) {
          push({*at, seq++, false, p.dst, p.size, std::move(p.data)});
          continue;
        }
        ++dropped;
      } else if (::write(sim->fds()[p.dst], p.data.data(), p.size) < 0) {
        ++dropped;
      }
      spare.push_back(std::move(p.data));
    }
  }
  std::cerr << "netsim switch: " << packets << " packets, " << dropped
            << " dropped, " << foreign << " not for a host\n";
  ::close(ep);
  ::close(sfd);
  return 0;
}

} // namespace actorflow::bench
