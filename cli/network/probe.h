// The network probes horarun runs on every host before choosing interfaces (docs/network.md,
// "The probe protocol"). Three hidden modes of the horarun binary, each a small text protocol on
// stdout so the launcher can run them over an SSH exec channel and parse what comes back:
//
//   horarun --probe-interfaces
//       Prints this host's interfaces (getifaddrs, no `ip`), then "end":
//           hora-interfaces 1
//           iface lo up loopback 127.0.0.1/8 ::1/128
//           iface eth0 up 198.18.1.11/24 fe80::1c2:3ff:fe04:506/64
//           iface eth2 down
//           end
//       One line per interface: name, "up"/"down", "loopback" when it is one, then its
//       addresses as ADDRESS/PREFIX (IPv6 without a scope). "end" proves the list is complete.
//
//   horarun --probe-listen TOKEN
//       Listens on port 0 of every candidate address (up, not loopback, IPv4 or non-link-local
//       IPv6), one socket per address, prints one "listen IFACE ADDRESS PORT" line per socket
//       and then "ready", and keeps accepting until its stdin closes (EOF or error), then exits
//       0. Every accepted connection is sent "hora-probe TOKEN\n" and closed: the TOKEN (chosen
//       by the launcher, different per host) lets the connecting side tell the host it meant
//       from another host that happens to own the same address (docker0's 172.17.0.1 exists on
//       many hosts). Addresses it cannot bind are reported as "skip IFACE ADDRESS REASON".
//
//   horarun --probe-connect TOKEN@ADDRESS:PORT,...   ([v6]:PORT for IPv6)
//       Connects to every target at once (non-blocking sockets, one poll loop), reads the
//       greeting, and prints one line per target in the order given, then "done":
//           connect TOKEN@ADDRESS:PORT ok 2ms
//           connect TOKEN@ADDRESS:PORT fail connect: Connection refused
//       A target is ok only when the TCP connection was established and the greeting carried
//       its TOKEN; everything ends at one deadline (--probe-timeout-ms, default 2000).
//
// The launcher's sequence (cli/network/choice.h builds the decision from the results): run
// --probe-interfaces on every host (the preflight's probe); start --probe-listen on every host
// and read up to "ready"; run --probe-connect on every host with every *other* host's endpoints;
// close the listeners' stdin. A target reached by connect proves that the source host can open
// TCP connections to that address of that interface, which is what Gloo and NCCL will do.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace hora::cli {

struct InterfaceAddress {
  std::string address;  // numeric, IPv6 without scope
  int prefix = 0;
  bool ipv6 = false;
  bool link_local() const;  // fe80::/10 (needs a scope, so never a probe target)
};

struct NetworkInterface {
  std::string name;
  bool up = false;                          // IFF_UP and IFF_RUNNING
  bool loopback = false;                    // IFF_LOOPBACK
  std::vector<InterfaceAddress> addresses;  // IPv4 first, in the order the kernel lists them

  // The address peers should use: the first IPv4, else the first IPv6 that is not link-local,
  // else empty.
  std::string preferred_address() const;
};

// This machine's interfaces (getifaddrs), in the kernel's order. Throws Error when getifaddrs
// fails.
std::vector<NetworkInterface> local_interfaces();

// The --probe-interfaces output for `interfaces`, and its parser. parse_interfaces throws Error
// naming `host` and the offending line when the text is not a complete report.
std::string format_interfaces(const std::vector<NetworkInterface>& interfaces);
std::vector<NetworkInterface> parse_interfaces(const std::string& text, const std::string& host);

// One listening socket of --probe-listen, as seen by the launcher.
struct ProbeEndpoint {
  std::string token;  // the listener's TOKEN
  std::string iface;
  std::string address;
  std::uint16_t port = 0;

  // "TOKEN@198.18.1.11:4000", "TOKEN@[2001:db8::1]:4000": an item of --probe-connect.
  std::string target() const;
};

// Parses --probe-listen output up to "ready" (what follows is ignored). Throws Error naming
// `host` when "ready" is missing or a line is malformed.
std::vector<ProbeEndpoint> parse_listen_output(const std::string& text, const std::string& token,
                                               const std::string& host);
// True once `text` holds the "ready" line (the launcher reads the listener's stdout until then).
bool listen_output_complete(const std::string& text);

struct ConnectOutcome {
  std::string target;  // as given to --probe-connect
  bool ok = false;
  std::string detail;  // "2ms" or the reason it failed
};

// The --probe-connect argument for `targets` (comma-separated ProbeEndpoint::target()).
std::string connect_argument(const std::vector<ProbeEndpoint>& targets);
// Parses --probe-connect output; throws Error naming `host` when "done" is missing.
std::vector<ConnectOutcome> parse_connect_output(const std::string& text, const std::string& host);

// The in-process probes behind the modes; the launcher may call them directly for its own host.
//
// Connects to every target ("TOKEN@ADDRESS:PORT") in parallel and waits for each greeting, all
// within `timeout`. Never throws for a target's failure; a malformed target fails alone.
std::vector<ConnectOutcome> probe_connect(const std::vector<std::string>& targets,
                                          std::chrono::milliseconds timeout);

inline constexpr std::chrono::milliseconds kDefaultProbeTimeout{2000};

// The listening half of --probe-listen, for the mode and for the launcher's own host. The
// constructor binds port 0 on every candidate address of this machine right away (throws Error
// for a malformed token); report() is the mode's output up to and including "ready" (what
// parse_listen_output reads); serve() greets every connection until `stop_fd` reports EOF or an
// error (kStopped), the deadline passes (kDeadline) or poll fails (kError, `error` says why).
// serve() may run on another thread than the one that constructed the listener.
class ProbeListener {
 public:
  enum class Ended { kStopped, kDeadline, kError };

  explicit ProbeListener(const std::string& token);
  ~ProbeListener();
  ProbeListener(const ProbeListener&) = delete;
  ProbeListener& operator=(const ProbeListener&) = delete;

  const std::string& report() const { return report_; }
  Ended serve(int stop_fd, std::chrono::steady_clock::time_point deadline,
              std::string& error) const;

 private:
  std::string greeting_;
  std::string report_;
  std::vector<int> sockets_;
};

// Mode entry points. `args` are the arguments after the mode flag.
int run_probe_interfaces(std::ostream& out);
// Serves until `stdin_fd` reports EOF or an error; prints to `out` (flushed after "ready").
int run_probe_listen(const std::vector<std::string>& args, int stdin_fd, std::ostream& out,
                     std::ostream& err);
int run_probe_connect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// For main.cc: when argv[1] is one of the three probe modes, runs it and returns its exit code
// (0 ok, 2 bad arguments); otherwise returns -1 and the caller goes on. Uses stdin/stdout/stderr.
int maybe_run_probe_mode(int argc, char** argv);

}  // namespace hora::cli
