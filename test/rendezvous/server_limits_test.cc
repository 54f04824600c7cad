// The server under floods and scarcity: repeated warnings are rate-limited, unauthenticated
// connections are capped (oldest dropped first), running out of descriptors is said at the
// default level without stopping the server, and no descriptor leaks into a child process.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "test/rendezvous/harness.h"

extern char** environ;

using namespace hora::rdv;
using namespace hora::rdv::test;

namespace {

// Every line the "rendezvous" logger writes, as "level: text". Registered before any server
// exists, so the server's logger() returns this one.
std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_sink() {
  static auto sink = [] {
    auto s = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100000);
    s->set_pattern("%l: %v");
    auto l = std::make_shared<spdlog::logger>("rendezvous", s);
    l->set_level(spdlog::level::info);
    spdlog::register_logger(l);
    return s;
  }();
  return sink;
}

std::vector<std::string> lines_matching(const std::regex& re) {
  std::vector<std::string> out;
  for (auto l : log_sink()->last_formatted()) {
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (std::regex_search(l, re)) out.push_back(l);
  }
  return out;
}

// Polls the log until pred(lines) holds or 10 s pass.
template <typename Pred>
bool wait_log(Pred pred) {
  auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);  // polling interval only
  }
  return pred();
}

int raw_connect(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

TEST_CASE("a flood of rejected connections costs one line per second, with a count", "[limits]") {
  log_sink();
  TestServer ts(server_options(1));
  constexpr int kFlood = 200;
  for (int i = 0; i < kFlood; ++i) {
    RawPeer p(ts.port());
    p.send_text("GARBAGE!GARBAGE!");  // 16 bytes: a header with a bad magic
  }
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.rejected.size() == kFlood; }));
  const std::regex full("^warning: rejected 127\\.0\\.0\\.1:\\d+: ");
  const std::regex summary(
      "^warning: rejected (\\d+) connections from 127\\.0\\.0\\.1 in the last 1 s: bad frame$");
  // Every rejection is accounted for: logged in full or counted in a summary (which includes the
  // full line of its window).
  auto counted = [&] {
    std::size_t n = 0;
    for (const auto& l : lines_matching(summary)) {
      std::smatch m;
      std::regex_search(l, m, summary);
      n += std::stoul(m[1]);
    }
    return n;
  };
  const bool summarised = wait_log([&] { return !lines_matching(summary).empty(); });
  if (!summarised) {
    for (const auto& l : log_sink()->last_formatted(20)) UNSCOPED_INFO(l);
  }
  REQUIRE(summarised);
  const auto full_lines = lines_matching(full).size();
  // One full line per quiet start; 200 without the limit.
  CHECK(full_lines >= 1);
  CHECK(full_lines < 10);
  CHECK(wait_log([&] { return counted() + full_lines >= kFlood; }));
}

TEST_CASE("a job's ranks may all wait to authenticate at once, past the cap", "[limits]") {
  log_sink();
  auto o = server_options(8);
  o.max_unauthenticated = 4;
  o.auth_timeout = 60s;
  TestServer ts(o);
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i < 9; ++i) {
    peers.push_back(std::make_unique<RawPeer>(ts.port()));
    peers.back()->read_hello();
  }
  // The cap is the job's size (8): the ninth makes the server drop the oldest, and only it.
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.connections == 8; }));
  CHECK(peers[0]->closed_by_server());
  CHECK(ts.stats().connections == 8);
}

// The highest descriptor this process has open.
int highest_open_fd() {
  int highest = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d)) highest = std::max(highest, std::atoi(e->d_name));
    ::closedir(d);
  }
  return highest;
}

TEST_CASE("under a tight descriptor limit a job's ranks may still all wait to authenticate",
          "[limits]") {
  log_sink();
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // For n ranks the server keeps 64 + 4n descriptors for the launcher and its ranks. A limit
  // below that leaves no spare descriptors: strangers get none, but each rank's own rendezvous
  // connection is part of the reserve, so all n may wait at once (the cap was 1). The limit
  // leaves room above the descriptors open now for n + 1 peers and the server's sockets.
  const int highest = highest_open_fd();
  const int n = std::max(32, (highest - 24) / 2 + 8);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest + 2 * n + 40);
  REQUIRE(low.rlim_cur < static_cast<rlim_t>(64 + 4 * n));
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  auto o = server_options(n);
  o.auth_timeout = 60s;
  std::optional<TestServer> ts;
  ts.emplace(o);  // the cap is fixed when the server starts
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i <= n; ++i) {
    peers.push_back(std::make_unique<RawPeer>(ts->port()));
    peers.back()->read_hello();
  }
  // The cap is the job's size: peer n + 1 makes the server drop the oldest, and only it.
  REQUIRE(ts->wait_stats([&](const Server::Stats& s) { return s.connections == std::size_t(n); }));
  CHECK(peers[0]->closed_by_server());
  CHECK(ts->stats().connections == static_cast<std::size_t>(n));
}

TEST_CASE("connections waiting to authenticate are capped, the oldest dropped first", "[limits]") {
  log_sink();
  auto o = server_options(1);
  o.max_unauthenticated = 4;
  o.auth_timeout = 60s;
  TestServer ts(o);
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i < 10; ++i) {
    peers.push_back(std::make_unique<RawPeer>(ts.port()));
    peers.back()->read_hello();  // accepted (in order) before the next one connects
  }
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.connections == 4; }));
  for (int i = 0; i < 6; ++i) CHECK(peers[i]->closed_by_server());
  CHECK_FALSE(lines_matching(std::regex("more than 4 connections were waiting to authenticate "
                                        "\\(the oldest goes first\\)"))
                  .empty());
  // The rank still gets in (a waiting stranger makes room for it).
  auto c = ts.connect(0);
  c->set("k", {}, 5s);
  CHECK(ts.on_io([&] { return ts.server().ranks_connected(); }).count(0) == 1);
}

TEST_CASE("out of descriptors: accept failure is said at the default level, serving goes on",
          "[limits]") {
  log_sink();
  TestServer ts(server_options(1));
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // Use up every descriptor under a low soft limit, then free one for our own socket: the
  // server has none left for accepting it.
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 16);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> fillers;
  for (;;) {
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  ::close(fillers.back());
  fillers.pop_back();
  int peer = raw_connect(ts.port());
  REQUIRE(peer >= 0);
  const bool said = wait_log([] {
    return !lines_matching(std::regex("^error: rendezvous server on 127\\.0\\.0\\.1:\\d+: cannot "
                                      "accept connections: Too many open files \\(the open-file "
                                      "limit is \\d+; raise it with ulimit -n\\); retrying in "
                                      "100 ms$"))
                .empty();
  });
  for (int fd : fillers) ::close(fd);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  if (!said) {
    for (const auto& l : log_sink()->last_formatted(10)) UNSCOPED_INFO(l);
  }
  CHECK(said);
  // Descriptors are back: the waiting connection is accepted and greeted.
  std::array<std::uint8_t, wire::kHeaderBytes> hello{};
  auto r = net::read_exact(peer, hello, Clock::now() + 10s);
  ::close(peer);
  CHECK(r);
  ts.connect(0)->set("k", {}, 5s);
}

TEST_CASE("no rendezvous socket leaks into a child process", "[limits]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);  // a client socket here, an accepted one in the server
  c->set("k", {}, 5s);
  pid_t pid = 0;
  const char* argv[] = {"sleep", "30", nullptr};
  REQUIRE(::posix_spawnp(&pid, "sleep", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
  std::vector<std::string> sockets;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  // The child has exec'd once its fd table no longer shows this test binary's extra threads'
  // view; readlink of /proc/<pid>/exe names sleep.
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline;) {
    char exe[4096] = {};
    ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0 && std::string(exe, n).find("sleep") != std::string::npos) break;
    std::this_thread::sleep_for(5ms);  // polling interval only
  }
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      char target[256] = {};
      ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
      if (n > 0 && std::string(target, n).rfind("socket:", 0) == 0) {
        sockets.push_back(std::string(e->d_name) + " -> " + std::string(target, n));
      }
    }
    ::closedir(d);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  INFO("sockets in the child: " << sockets.size());
  for (const auto& s : sockets) UNSCOPED_INFO(s);
  CHECK(sockets.empty());
}
