#include "cli/network/probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli/base/errors.h"
#include "common/unique_fd.h"

namespace hora::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kInterfacesHeader = "hora-interfaces 1";
constexpr const char* kGreeting = "hora-probe ";
// An orphaned listener (its stdin never closes, e.g. a launcher that lost track of it) still
// ends: the probe as a whole is over long before this.
constexpr std::chrono::seconds kDefaultListenLifetime{120};

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = nl + 1;
  }
  return lines;
}

bool parse_int(const std::string& s, long long lo, long long hi, long long& out) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const unsigned char* bytes = nullptr;
  std::size_t n = 0;
  if (mask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    n = 4;
  } else if (mask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    n = 16;
  } else {
    return 0;
  }
  int bits = 0;
  for (std::size_t i = 0; i < n; ++i) bits += __builtin_popcount(bytes[i]);
  return bits;
}

bool valid_token(const std::string& token) {
  if (token.empty() || token.size() > 64) return false;
  return std::all_of(token.begin(), token.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// A parsed --probe-connect item.
struct Target {
  std::string text;
  std::string token;
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// "TOKEN@ADDRESS:PORT" or "TOKEN@[V6]:PORT"; returns why it is not one, or empty.
std::string parse_target(const std::string& text, Target& t) {
  t.text = text;
  const std::size_t at = text.find('@');
  if (at == std::string::npos) return "expected TOKEN@ADDRESS:PORT";
  t.token = text.substr(0, at);
  if (!valid_token(t.token)) return "bad token (letters, digits, '-', '_', '.'; at most 64)";
  std::string rest = text.substr(at + 1);
  std::string host;
  std::string port;
  if (!rest.empty() && rest[0] == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return "expected [IPV6]:PORT";
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string::npos) return "no :PORT";
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  long long p = 0;
  if (!parse_int(port, 1, 65535, p)) return fmt::format("bad port '{}'", port);
  std::memset(&t.addr, 0, sizeof t.addr);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&t.addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&t.addr);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(p));
    t.len = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(p));
    t.len = sizeof(sockaddr_in6);
  } else {
    return fmt::format("'{}' is not a numeric IPv4 or IPv6 address", host);
  }
  return {};
}

std::string errno_text(const char* step, int err) {
  return fmt::format("{}: {}", step, std::strerror(err));
}

// Rounded up, so a poll() with this timeout never wakes before the deadline (0 once it passed).
int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1'000'000));
}

}  // namespace

bool InterfaceAddress::link_local() const {
  if (!ipv6) return false;
  in6_addr a{};
  if (::inet_pton(AF_INET6, address.c_str(), &a) != 1) return false;
  return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

std::string NetworkInterface::preferred_address() const {
  for (const InterfaceAddress& a : addresses) {
    if (!a.ipv6) return a.address;
  }
  for (const InterfaceAddress& a : addresses) {
    if (!a.link_local()) return a.address;
  }
  return {};
}

std::vector<NetworkInterface> local_interfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    throw Error(fmt::format("cannot list this host's network interfaces: getifaddrs: {}",
                            std::strerror(errno)));
  }
  std::vector<NetworkInterface> out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_name == nullptr) continue;
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const NetworkInterface& i) { return i.name == ifa->ifa_name; });
    if (it == out.end()) {
      NetworkInterface ni;
      ni.name = ifa->ifa_name;
      out.push_back(std::move(ni));
      it = out.end() - 1;
    }
    it->up = (ifa->ifa_flags & IFF_UP) != 0 && (ifa->ifa_flags & IFF_RUNNING) != 0;
    it->loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    InterfaceAddress a;
    if (ifa->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr)->sin_addr, buf,
                  sizeof buf);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr, buf,
                  sizeof buf);
      a.ipv6 = true;
    } else {
      continue;  // AF_PACKET: the interface itself, already recorded above
    }
    a.address = buf;
    a.prefix = prefix_length(ifa->ifa_netmask);
    it->addresses.push_back(std::move(a));
  }
  ::freeifaddrs(list);
  for (NetworkInterface& i : out) {
    std::stable_sort(i.addresses.begin(), i.addresses.end(),
                     [](const InterfaceAddress& x, const InterfaceAddress& y) {
                       return !x.ipv6 && y.ipv6;
                     });
  }
  return out;
}

std::string format_interfaces(const std::vector<NetworkInterface>& interfaces) {
  std::string out = std::string(kInterfacesHeader) + "\n";
  for (const NetworkInterface& i : interfaces) {
    out += fmt::format("iface {} {}", i.name, i.up ? "up" : "down");
    if (i.loopback) out += " loopback";
    for (const InterfaceAddress& a : i.addresses) out += fmt::format(" {}/{}", a.address, a.prefix);
    out += "\n";
  }
  out += "end\n";
  return out;
}

std::vector<NetworkInterface> parse_interfaces(const std::string& text, const std::string& host) {
  const std::vector<std::string> lines = split_lines(text);
  auto bad = [&](std::size_t n, const std::string& why) {
    return Error(
        fmt::format("{}: the interface probe (horarun --probe-interfaces) printed an "
                    "unexpected line {} '{}': {}; is horarun on that host the same "
                    "version as here (--horarun-path)?",
                    host, n + 1, n < lines.size() ? lines[n] : "", why));
  };
  std::size_t n = 0;
  while (n < lines.size() && lines[n] != kInterfacesHeader) ++n;  // a login banner may come first
  if (n == lines.size()) {
    throw Error(
        fmt::format("{}: the interface probe (horarun --probe-interfaces) printed no "
                    "'{}' line; is horarun on that host the same version as here "
                    "(--horarun-path)? It printed: '{}'",
                    host, kInterfacesHeader, text.substr(0, 200)));
  }
  std::vector<NetworkInterface> out;
  for (++n; n < lines.size(); ++n) {
    const std::vector<std::string> w = split_words(lines[n]);
    if (w.empty()) continue;
    if (w[0] == "end") return out;
    if (w[0] != "iface" || w.size() < 3) throw bad(n, "expected 'iface NAME up|down ...' or 'end'");
    NetworkInterface i;
    i.name = w[1];
    if (w[2] == "up")
      i.up = true;
    else if (w[2] != "down")
      throw bad(n, "the state must be up or down");
    for (std::size_t k = 3; k < w.size(); ++k) {
      if (w[k] == "loopback") {
        i.loopback = true;
        continue;
      }
      const std::size_t slash = w[k].rfind('/');
      InterfaceAddress a;
      long long prefix = 0;
      if (slash == std::string::npos)
        throw bad(n, fmt::format("address '{}' has no /PREFIX", w[k]));
      a.address = w[k].substr(0, slash);
      a.ipv6 = a.address.find(':') != std::string::npos;
      if (!parse_int(w[k].substr(slash + 1), 0, a.ipv6 ? 128 : 32, prefix)) {
        throw bad(n, fmt::format("bad prefix in '{}'", w[k]));
      }
      in6_addr buf{};
      if (::inet_pton(a.ipv6 ? AF_INET6 : AF_INET, a.address.c_str(), &buf) != 1) {
        throw bad(n, fmt::format("'{}' is not a numeric address", a.address));
      }
      a.prefix = static_cast<int>(prefix);
      i.addresses.push_back(std::move(a));
    }
    out.push_back(std::move(i));
  }
  throw Error(
      fmt::format("{}: the interface probe (horarun --probe-interfaces) output ended "
                  "before its 'end' line (cut off: did the command die or the SSH "
                  "channel close?)",
                  host));
}

std::string ProbeEndpoint::target() const {
  if (address.find(':') != std::string::npos)
    return fmt::format("{}@[{}]:{}", token, address, port);
  return fmt::format("{}@{}:{}", token, address, port);
}

bool listen_output_complete(const std::string& text) {
  for (const std::string& line : split_lines(text)) {
    if (line == "ready") return true;
  }
  return false;
}

std::vector<ProbeEndpoint> parse_listen_output(const std::string& text, const std::string& token,
                                               const std::string& host) {
  std::vector<ProbeEndpoint> out;
  for (const std::string& line : split_lines(text)) {
    const std::vector<std::string> w = split_words(line);
    if (w.empty()) continue;
    if (w[0] == "ready") return out;
    if (w[0] == "skip") continue;
    long long port = 0;
    if (w[0] != "listen" || w.size() != 4 || !parse_int(w[3], 1, 65535, port)) {
      continue;  // not ours (e.g. a login banner); "ready" decides completeness
    }
    out.push_back(ProbeEndpoint{token, w[1], w[2], static_cast<std::uint16_t>(port)});
  }
  throw Error(
      fmt::format("{}: the listen probe (horarun --probe-listen) ended before printing "
                  "'ready'; it printed: '{}'",
                  host, text.substr(0, 300)));
}

std::string connect_argument(const std::vector<ProbeEndpoint>& targets) {
  std::vector<std::string> items;
  items.reserve(targets.size());
  for (const ProbeEndpoint& t : targets) items.push_back(t.target());
  return fmt::format("{}", fmt::join(items, ","));
}

std::vector<ConnectOutcome> parse_connect_output(const std::string& text, const std::string& host) {
  std::vector<ConnectOutcome> out;
  for (const std::string& line : split_lines(text)) {
    if (line == "done") return out;
    const std::vector<std::string> w = split_words(line);
    if (w.size() < 3 || w[0] != "connect") continue;
    ConnectOutcome c;
    c.target = w[1];
    c.ok = w[2] == "ok";
    const std::size_t pos = line.find(w[2], line.find(w[1]) + w[1].size()) + w[2].size();
    c.detail = pos < line.size() ? line.substr(pos + 1) : "";
    out.push_back(std::move(c));
  }
  throw Error(
      fmt::format("{}: the connect probe (horarun --probe-connect) ended before printing "
                  "'done'; it printed: '{}'",
                  host, text.substr(0, 300)));
}

std::vector<ConnectOutcome> probe_connect(const std::vector<std::string>& targets,
                                          std::chrono::milliseconds timeout) {
  // One non-blocking socket per target, all driven by one poll loop: the probe takes as long as
  // the slowest target (at most `timeout`), not the sum.
  enum class Phase { kConnecting, kReading, kDone };
  struct Attempt {
    Target t;
    UniqueFd fd;
    Phase phase = Phase::kDone;
    std::string got;
    Clock::time_point started;
    ConnectOutcome outcome;
  };
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<Attempt> attempts(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Attempt& a = attempts[i];
    a.outcome.target = targets[i];
    a.started = Clock::now();
    if (std::string why = parse_target(targets[i], a.t); !why.empty()) {
      a.outcome.detail = "bad target: " + why;
      continue;
    }
    a.fd = UniqueFd(::socket(a.t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!a.fd) {
      a.outcome.detail = errno_text("socket", errno);
      continue;
    }
    if (::connect(a.fd.get(), reinterpret_cast<const sockaddr*>(&a.t.addr), a.t.len) == 0) {
      a.phase = Phase::kReading;
    } else if (errno == EINPROGRESS) {
      a.phase = Phase::kConnecting;
    } else {
      a.outcome.detail = errno_text("connect", errno);
    }
  }
  const std::string expected_prefix = kGreeting;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      Attempt& a = attempts[i];
      if (a.phase == Phase::kDone) continue;
      fds.push_back(pollfd{a.fd.get(),
                           static_cast<short>(a.phase == Phase::kConnecting ? POLLOUT : POLLIN),
                           0});
      which.push_back(i);
    }
    if (fds.empty()) break;
    const int wait = ms_until(deadline);
    if (wait == 0) break;
    const int n = ::poll(fds.data(), fds.size(), wait);
    if (n < 0 && errno != EINTR) {
      for (std::size_t i : which) attempts[i].outcome.detail = errno_text("poll", errno);
      break;
    }
    for (std::size_t k = 0; k < fds.size() && n > 0; ++k) {
      if (fds[k].revents == 0) continue;
      Attempt& a = attempts[which[k]];
      if (a.phase == Phase::kConnecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(a.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          a.outcome.detail = errno_text("connect", err);
          a.phase = Phase::kDone;
        } else {
          a.phase = Phase::kReading;
        }
        continue;
      }
      char buf[128];
      const ssize_t r = ::recv(a.fd.get(), buf, sizeof buf, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r < 0) {
        a.outcome.detail = errno_text("connected, then recv", errno);
        a.phase = Phase::kDone;
        continue;
      }
      a.got.append(buf, static_cast<std::size_t>(r));
      const std::size_t nl = a.got.find('\n');
      if (r == 0 || nl != std::string::npos || a.got.size() > 200) {
        const std::string line = a.got.substr(0, nl);
        if (line == expected_prefix + a.t.token) {
          a.outcome.ok = true;
          a.outcome.detail =
              fmt::format("{}ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                      Clock::now() - a.started)
                                      .count());
        } else {
          a.outcome.detail = fmt::format(
              "connected, but the greeting was '{}', not 'hora-probe {}' (another host or "
              "program owns this address)",
              line.substr(0, 80), a.t.token);
        }
        a.phase = Phase::kDone;
      }
    }
  }
  for (Attempt& a : attempts) {
    if (a.phase == Phase::kConnecting) {
      a.outcome.detail = fmt::format("connect: no answer within {}ms", timeout.count());
    } else if (a.phase == Phase::kReading) {
      a.outcome.detail = fmt::format("connected, but no greeting within {}ms", timeout.count());
    }
  }
  std::vector<ConnectOutcome> out;
  out.reserve(attempts.size());
  for (Attempt& a : attempts) out.push_back(std::move(a.outcome));
  return out;
}

int run_probe_interfaces(std::ostream& out) {
  out << format_interfaces(local_interfaces());
  out.flush();
  return out ? 0 : 1;
}

ProbeListener::ProbeListener(const std::string& token) : greeting_(kGreeting + token + "\n") {
  if (!valid_token(token)) throw Error(fmt::format("invalid probe token '{}'", token));
  for (const NetworkInterface& i : local_interfaces()) {
    if (!i.up || i.loopback) continue;
    for (const InterfaceAddress& a : i.addresses) {
      if (a.link_local()) continue;
      Target t;
      if (!parse_target(fmt::format("x@{}:1", a.ipv6 ? "[" + a.address + "]" : a.address), t)
               .empty())
        continue;
      // Port 0: the kernel picks a free one. sin_port and sin6_port share their offset.
      reinterpret_cast<sockaddr_in*>(&t.addr)->sin_port = 0;
      UniqueFd fd(::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&t.addr), t.len) != 0 ||
          ::listen(fd.get(), 128) != 0 ||
          ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
        report_ += fmt::format("skip {} {} {}\n", i.name, a.address, std::strerror(errno));
        continue;
      }
      const std::uint16_t port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
      report_ += fmt::format("listen {} {} {}\n", i.name, a.address, port);
      sockets_.push_back(fd.release());
    }
  }
  report_ += "ready\n";
}

ProbeListener::~ProbeListener() {
  for (const int fd : sockets_) ::close(fd);
}

ProbeListener::Ended ProbeListener::serve(int stop_fd,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::string& error) const {
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{stop_fd, POLLIN, 0});
    for (const int l : sockets_) fds.push_back(pollfd{l, POLLIN, 0});
    const int wait = ms_until(deadline);
    if (wait == 0) return Ended::kDeadline;
    if (::poll(fds.data(), fds.size(), wait) < 0) {
      if (errno == EINTR) continue;
      error = errno_text("poll", errno);
      return Ended::kError;
    }
    if (fds[0].revents != 0) {
      char buf[256];
      const ssize_t r = ::read(stop_fd, buf, sizeof buf);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return Ended::kStopped;
    }
    for (std::size_t k = 1; k < fds.size(); ++k) {
      if ((fds[k].revents & POLLIN) == 0) continue;
      UniqueFd c(::accept4(fds[k].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      // A failed accept (the peer gave up already) or a short send costs that one probe only:
      // the connecting side reports it as a missing greeting.
      if (c) (void)::send(c.get(), greeting_.data(), greeting_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }
}

int run_probe_listen(const std::vector<std::string>& args, int stdin_fd, std::ostream& out,
                     std::ostream& err) {
  std::chrono::seconds lifetime = kDefaultListenLifetime;
  if (args.empty() || !valid_token(args[0]) || (args.size() != 1 && args.size() != 3) ||
      (args.size() == 3 && args[1] != "--lifetime-seconds")) {
    err << "horarun --probe-listen: usage: horarun --probe-listen TOKEN [--lifetime-seconds N] "
           "(TOKEN: letters, digits, '-', '_', '.')\n";
    return 2;
  }
  if (args.size() == 3) {
    long long s = 0;
    if (!parse_int(args[2], 1, 3600, s)) {
      err << "horarun --probe-listen: --lifetime-seconds must be 1..3600\n";
      return 2;
    }
    lifetime = std::chrono::seconds(s);
  }
  const ProbeListener listener(args[0]);
  out << listener.report();
  out.flush();
  // Serve until stdin closes: the launcher holds the other end and closes it when every
  // connect probe is done (or when it dies, which closes the SSH channel or pipe too).
  std::string error;
  switch (listener.serve(stdin_fd, Clock::now() + lifetime, error)) {
    case ProbeListener::Ended::kStopped: return 0;
    case ProbeListener::Ended::kDeadline:
      err << fmt::format("horarun --probe-listen: stdin still open after {} s; exiting\n",
                         lifetime.count());
      return 1;
    case ProbeListener::Ended::kError: break;
  }
  err << "horarun --probe-listen: " << error << "\n";
  return 1;
}

int run_probe_connect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::chrono::milliseconds timeout = kDefaultProbeTimeout;
  std::vector<std::string> targets;
  bool have_list = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--probe-timeout-ms" && i + 1 < args.size()) {
      long long ms = 0;
      if (!parse_int(args[++i], 1, 600'000, ms)) {
        err << "horarun --probe-connect: --probe-timeout-ms must be 1..600000\n";
        return 2;
      }
      timeout = std::chrono::milliseconds(ms);
    } else if (!have_list) {
      have_list = true;
      std::size_t start = 0;
      while (start <= args[i].size()) {
        std::size_t comma = args[i].find(',', start);
        if (comma == std::string::npos) comma = args[i].size();
        if (comma > start) targets.push_back(args[i].substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      err << "horarun --probe-connect: usage: horarun --probe-connect TOKEN@ADDRESS:PORT,... "
             "[--probe-timeout-ms N]\n";
      return 2;
    }
  }
  for (const ConnectOutcome& c : probe_connect(targets, timeout)) {
    out << fmt::format("connect {} {} {}\n", c.target, c.ok ? "ok" : "fail", c.detail);
  }
  out << "done\n";
  out.flush();
  return out ? 0 : 1;
}

int maybe_run_probe_mode(int argc, char** argv) {
  if (argc < 2) return -1;
  const std::string mode = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (mode == "--probe-interfaces") return run_probe_interfaces(std::cout);
    if (mode == "--probe-listen") return run_probe_listen(args, STDIN_FILENO, std::cout, std::cerr);
    if (mode == "--probe-connect") return run_probe_connect(args, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "horarun " << mode << ": " << e.what() << "\n";
    return 1;
  }
  return -1;
}

}  // namespace hora::cli
