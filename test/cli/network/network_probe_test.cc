// The probe modes on this machine: the interface report round-trips through its parser, the
// listen/connect pair reaches real sockets, and the parsers reject cut-off output.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <sstream>

#include "cli/base/errors.h"
#include "cli/network/probe.h"

using namespace hora::cli;
using Catch::Matchers::Contains;

TEST_CASE("this machine's interfaces round-trip through the report") {
  const std::vector<NetworkInterface> mine = local_interfaces();
  REQUIRE_FALSE(mine.empty());
  std::ostringstream out;
  REQUIRE(run_probe_interfaces(out) == 0);
  const std::vector<NetworkInterface> parsed = parse_interfaces(out.str(), "this host");
  REQUIRE(parsed.size() == mine.size());
  bool saw_loopback = false;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    CHECK(parsed[i].name == mine[i].name);
    CHECK(parsed[i].up == mine[i].up);
    CHECK(parsed[i].loopback == mine[i].loopback);
    REQUIRE(parsed[i].addresses.size() == mine[i].addresses.size());
    for (std::size_t k = 0; k < mine[i].addresses.size(); ++k) {
      CHECK(parsed[i].addresses[k].address == mine[i].addresses[k].address);
      CHECK(parsed[i].addresses[k].prefix == mine[i].addresses[k].prefix);
      CHECK(parsed[i].addresses[k].ipv6 == mine[i].addresses[k].ipv6);
    }
    if (mine[i].loopback) {
      saw_loopback = true;
      CHECK(mine[i].preferred_address() == "127.0.0.1");
    }
  }
  CHECK(saw_loopback);
}

TEST_CASE("the report parser skips a banner and rejects cut-off or foreign output") {
  const std::string ok =
      "Welcome!\nhora-interfaces 1\niface lo up loopback 127.0.0.1/8 ::1/128\n"
      "iface eth0 down\nend\n";
  const auto parsed = parse_interfaces(ok, "h1");
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0].addresses[1].ipv6);
  CHECK_FALSE(parsed[1].up);
  CHECK_THROWS_WITH(parse_interfaces("hora-interfaces 1\niface lo up\n", "h1"),
                    Contains("h1") && Contains("ended before its 'end' line"));
  CHECK_THROWS_WITH(parse_interfaces("bash: horarun: command not found\n", "h2"),
                    Contains("h2") && Contains("--horarun-path"));
  CHECK_THROWS_WITH(parse_interfaces("hora-interfaces 1\niface eth0 up 10.0.0.1\nend\n", "h3"),
                    Contains("h3") && Contains("no /PREFIX"));
  CHECK_THROWS_AS(parse_interfaces("hora-interfaces 1\niface eth0 sideways\nend\n", "h3"), Error);
}

TEST_CASE("link-local IPv6 is never the preferred address") {
  NetworkInterface i;
  i.addresses = {{"fe80::1", 64, true}, {"2001:db8::1", 64, true}};
  CHECK(i.preferred_address() == "2001:db8::1");
  i.addresses = {{"fe80::1", 64, true}};
  CHECK(i.preferred_address().empty());
}

namespace {

// An output stream another thread may read: the writer's flush() wakes wait_for_line().
class SharedBuf : public std::streambuf {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  // Waits until `line` is a complete line of the output; false when `deadline` passes first.
  bool wait_for_line(const std::string& line, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline,
                          [&] { return text_.find(line + "\n") != std::string::npos; });
  }

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      std::lock_guard<std::mutex> lock(mu_);
      text_.push_back(static_cast<char>(c));
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<std::size_t>(n));
    return n;
  }
  int sync() override {
    cv_.notify_all();
    return 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
};

// A --probe-listen run in a thread, with the pipe that plays its stdin.
struct Listener {
  int stdin_pipe[2] = {-1, -1};
  SharedBuf buf;
  std::ostream out{&buf};
  std::ostringstream err;
  std::future<int> rc;

  explicit Listener(std::vector<std::string> args) {
    REQUIRE(::pipe2(stdin_pipe, O_CLOEXEC) == 0);
    rc = std::async(std::launch::async,
                    [this, args] { return run_probe_listen(args, stdin_pipe[0], out, err); });
  }
  int stop() {
    ::close(stdin_pipe[1]);
    const int r = rc.get();
    ::close(stdin_pipe[0]);
    return r;
  }
};

}  // namespace

TEST_CASE("listen and connect reach each other; wrong token, closed port and bad target fail") {
  Listener l({"tok-A"});
  // The listener flushes after "ready", once every socket listens.
  REQUIRE(
      l.buf.wait_for_line("ready", std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  const std::string text = l.buf.text();
  const std::vector<ProbeEndpoint> eps = parse_listen_output(text, "tok-A", "this host");
  if (eps.empty()) {
    CHECK(l.stop() == 0);
    WARN("no non-loopback address on this machine: nothing to connect to");
    return;
  }
  std::vector<std::string> targets;
  for (const ProbeEndpoint& e : eps) targets.push_back(e.target());
  ProbeEndpoint wrong = eps.front();
  wrong.token = "tok-B";
  targets.push_back(wrong.target());
  targets.push_back("tok-A@127.0.0.1:1");  // loopback is never listened on; port 1 is closed
  targets.push_back("no-at-sign");
  const auto outcomes = probe_connect(targets, std::chrono::milliseconds(2000));
  REQUIRE(outcomes.size() == targets.size());
  for (std::size_t i = 0; i < eps.size(); ++i) {
    INFO(outcomes[i].target << ": " << outcomes[i].detail);
    CHECK(outcomes[i].ok);
  }
  CHECK_FALSE(outcomes[eps.size()].ok);
  CHECK_THAT(outcomes[eps.size()].detail, Contains("not 'hora-probe tok-B'"));
  CHECK_FALSE(outcomes[eps.size() + 1].ok);
  CHECK_THAT(outcomes[eps.size() + 1].detail, Contains("connect: Connection refused"));
  CHECK_FALSE(outcomes[eps.size() + 2].ok);
  CHECK_THAT(outcomes[eps.size() + 2].detail, Contains("bad target"));
  CHECK(l.stop() == 0);  // ends when its stdin closes
}

TEST_CASE("connect output round-trips, and a silent target times out at the deadline") {
  // A listening socket that never accepts nor greets: the TCP handshake completes (backlog),
  // the greeting never comes.
  std::ostringstream out, err;
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s, 4) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string target = "t@127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_probe_connect({target, "--probe-timeout-ms", "300"}, out, err) == 0);
  const auto took = std::chrono::steady_clock::now() - t0;
  ::close(s);
  CHECK(took >= std::chrono::milliseconds(300));
  CHECK(took < std::chrono::seconds(3));
  const auto parsed = parse_connect_output(out.str(), "h1");
  REQUIRE(parsed.size() == 1);
  CHECK(parsed[0].target == target);
  CHECK_FALSE(parsed[0].ok);
  CHECK(parsed[0].detail == "connected, but no greeting within 300ms");
  CHECK_THROWS_WITH(parse_connect_output("connect x ok 1ms\n", "h1"),
                    Contains("h1") && Contains("'done'"));
}

TEST_CASE("mode argument errors exit 2") {
  std::ostringstream out, err;
  CHECK(run_probe_listen({}, 0, out, err) == 2);
  CHECK(run_probe_listen({"bad token!"}, 0, out, err) == 2);
  CHECK(run_probe_connect({"a@1.2.3.4:5", "extra"}, out, err) == 2);
  CHECK(run_probe_connect({"a@1.2.3.4:5", "--probe-timeout-ms", "0"}, out, err) == 2);
}
