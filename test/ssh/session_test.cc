// Session and Channel (ssh/session.h) against a real sshd on 127.0.0.1 (test/ssh/local_sshd.h).
#include "ssh/session.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <boost/asio.hpp>
#include <fstream>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "common/logger.h"
#include "ssh/errors.h"
#include "test/read_file.h"
#include "test/ssh/local_sshd.h"
#include "test/ssh/skip_main.h"

HORA_TEST_MAIN_SKIP_UNLESS(hora::ssh::test::LocalSshd::unavailable_reason())

using namespace hora::ssh;
using hora::ssh::test::LocalSshd;
using hora::ssh::test::sh;
using namespace std::chrono_literals;

using hora::test::slurp;

namespace {

// The remote command runs under root's login shell, whose startup files may write to stderr
// before it (on this machine image pyenv's rehash does, when many shells start at once). Stream
// separation is what these tests check, so stderr must END with the command's own output.
inline bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

Clock::time_point in(std::chrono::milliseconds d) { return Clock::now() + d; }

// A TCP socket bound to a kernel-chosen port on 127.0.0.1, listening or not. Closed on scope exit.
struct Socket {
  int fd = -1;
  int port = 0;
  explicit Socket(bool listening, int backlog = 16) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    if (listening) REQUIRE(::listen(fd, backlog) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Socket() { ::close(fd); }
};

// A private ssh-agent (`ssh-agent -D`) on a socket in `dir`; killed and reaped on scope exit.
struct Agent {
  std::string sock;
  pid_t pid = -1;
  explicit Agent(const std::string& dir) : sock(dir + "/agent.sock") {
    pid = ::fork();
    if (pid == 0) {
      ::freopen("/dev/null", "w", stdout);  // its "SSH_AUTH_SOCK=..." banner is noise here
      ::execl("/usr/bin/ssh-agent", "ssh-agent", "-D", "-a", sock.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    REQUIRE(pid > 0);
    // Waits (at most 4 s) for the socket, so that ssh-add finds the agent.
    sh("for i in $(seq 200); do [ -S " + sock + " ] && break; sleep 0.02; done; [ -S " + sock +
       " ]");
  }
  ~Agent() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void clear() const { sh("SSH_AUTH_SOCK=" + sock + " ssh-add -q -D 2>&1"); }
  // Adds `key`; a passphrase is given through SSH_ASKPASS, as there is no terminal.
  void add(const std::string& key, const std::string& passphrase = "") const {
    if (passphrase.empty()) {
      sh("SSH_AUTH_SOCK=" + sock + " ssh-add -q " + key + " 2>&1 </dev/null");
      return;
    }
    const std::string askpass = key + ".askpass";
    std::ofstream(askpass) << "#!/bin/sh\necho '" << passphrase << "'\n";
    std::filesystem::permissions(askpass, std::filesystem::perms::owner_all);
    sh("SSH_AUTH_SOCK=" + sock + " SSH_ASKPASS=" + askpass +
       " SSH_ASKPASS_REQUIRE=force DISPLAY=none ssh-add -q " + key + " 2>&1 </dev/null");
  }
};

// What() of the AuthError that connecting to `t` must end in; fails the test if it connects.
std::string auth_failure(const Target& t) {
  try {
    Session::connect(t, {}, in(10s));
  } catch (const AuthError& e) {
    return e.what();
  }
  FAIL("authenticated to " + t.describe() + " when it should not");
  return {};
}

// Drives `session` until `done()` holds, failing the test at the deadline.
template <typename Pred>
void pump_until(Session& session, Pred done, Clock::time_point deadline) {
  while (true) {
    session.pump();
    if (done()) return;
    REQUIRE(session.wait(deadline));
  }
}

}  // namespace

TEST_CASE("connect with a key file and run a command: stdout, stderr and exit status apart",
          "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  CHECK(s->local_address() == "127.0.0.1");
  CHECK(s->remote_endpoint() == "127.0.0.1:" + std::to_string(sshd.port()));
  CHECK(s->auth_method() == "key file " + sshd.client_key());
  CHECK(s->host_key().fingerprint() == sshd.host_fingerprint());

  const RunResult r = s->run("echo out; echo err >&2; echo more; exit 3", "", in(10s));
  CHECK(r.out == "out\nmore\n");
  CHECK(ends_with(r.err, "err\n"));
  CHECK(r.exit_status == 3);
  CHECK(r.exit_signal.empty());

  // The same session runs further commands.
  CHECK(s->run("true", "", in(10s)).exit_status == 0);
}

TEST_CASE("a command killed by a signal reports the signal name", "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  const RunResult r = s->run("echo before; kill -TERM $$", "", in(10s));
  CHECK(r.out == "before\n");
  CHECK(r.exit_signal == "TERM");
  CHECK(r.exit_status == -1);
}

TEST_CASE("stdin reaches the command and EOF ends it; data larger than the SSH window flows",
          "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  CHECK(s->run("cat", "hello\nworld\n", in(10s)).out == "hello\nworld\n");

  const std::string big(5'000'000, 'x');  // > 2 MiB default window, both directions
  const RunResult r = s->run("cat", big, in(30s));
  CHECK(r.out.size() == big.size());
  CHECK(r.out == big);
}

TEST_CASE("several channels on one session progress independently through pump()", "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  constexpr int kN = 6;
  std::vector<std::shared_ptr<Channel>> chans;
  std::vector<std::string> out(kN), err(kN);
  std::vector<int> exit_order;
  for (int i = 0; i < kN; ++i) {
    Channel::Handlers h;
    h.on_stdout = [&out, i](std::string_view d) { out[i].append(d); };
    h.on_stderr = [&err, i](std::string_view d) { err[i].append(d); };
    h.on_exit = [&exit_order, i](const ExitInfo&) { exit_order.push_back(i); };
    // Each command waits for its own line of input, so only our writes decide who ends first.
    chans.push_back(s->exec("read line; echo \"$line-" + std::to_string(i) + "\"; echo e" +
                                std::to_string(i) + " >&2; exit " + std::to_string(i),
                            std::move(h)));
  }
  const auto deadline = in(20s);
  // Feed the last channel only: it must finish while every other one is still waiting.
  chans[kN - 1]->write("last\n");
  pump_until(
      *s, [&] { return chans[kN - 1]->done(); }, deadline);
  for (int i = 0; i < kN - 1; ++i) CHECK_FALSE(chans[i]->done());
  CHECK(out[kN - 1] == "last-5\n");

  for (int i = kN - 2; i >= 0; --i) chans[i]->write("in" + std::to_string(i) + "\n");
  pump_until(
      *s, [&] { return s->active_channels() == 0; }, deadline);
  for (int i = 0; i < kN - 1; ++i) {
    CHECK(out[i] == "in" + std::to_string(i) + "-" + std::to_string(i) + "\n");
    CHECK(ends_with(err[i], "e" + std::to_string(i) + "\n"));
    REQUIRE(chans[i]->exit());
    CHECK(chans[i]->exit()->exit_status == i);
    CHECK(chans[i]->exit()->error.empty());
  }
  CHECK(exit_order.size() == kN);
  CHECK(exit_order.front() == kN - 1);
}

TEST_CASE("close() closes the remote command's stdin and reports the channel closed by us",
          "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  const std::string marker = sshd.dir() / "stdin-closed";
  std::string started;
  Channel::Handlers h;
  h.on_stdout = [&](std::string_view d) { started.append(d); };
  auto ch = s->exec("echo started; cat >/dev/null; echo eof > " + marker, std::move(h));
  const auto deadline = in(10s);
  pump_until(
      *s, [&] { return started == "started\n"; }, deadline);
  CHECK_FALSE(ch->done());
  ch->close();
  pump_until(
      *s, [&] { return ch->done(); }, deadline);
  REQUIRE(ch->exit());
  CHECK_THAT(ch->exit()->error, Catch::Contains("closed by us"));
  // The remote `cat` saw EOF and the command went on to write the marker. A second channel
  // waits for it remotely, bounded by its own deadline.
  const RunResult r =
      s->run("for i in $(seq 100); do [ -f " + marker + " ] && exit 0; sleep 0.05; done; exit 1",
             "", deadline);
  CHECK(r.exit_status == 0);
  CHECK(slurp(marker) == "eof\n");
}

TEST_CASE("run() past its deadline closes the channel and says what did not finish", "[session]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  const auto t0 = Clock::now();
  REQUIRE_THROWS_AS(s->run("echo working >&2; sleep 60", "", in(1s)), TimeoutError);
  CHECK(Clock::now() - t0 < 30s);  // at the 1 s deadline, not after the 60 s sleep
  try {
    s->run("echo working >&2; sleep 30", "", in(500ms));
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("sleep 30") && Catch::Contains("did not finish within") &&
                             Catch::Contains("working"));
  }
  // The session stays usable.
  CHECK(s->run("echo ok", "", in(10s)).out == "ok\n");
}

TEST_CASE("destroying a session with running channels leaves them done with an error",
          "[session]") {
  LocalSshd sshd;
  std::shared_ptr<Channel> ch;
  bool handler_ran = false;
  {
    auto s = Session::connect(sshd.target(), {}, in(10s));
    Channel::Handlers h;
    h.on_exit = [&](const ExitInfo&) { handler_ran = true; };
    ch = s->exec("sleep 30", std::move(h));
    s->pump();
  }
  CHECK(ch->done());
  REQUIRE(ch->exit());
  CHECK_FALSE(ch->exit()->error.empty());
  CHECK_FALSE(handler_ran);
  ch->write("ignored");  // harmless after the session is gone
  ch->close();
}

TEST_CASE("wrong port: connection refused, naming host:port and the flag", "[session][errors]") {
  LocalSshd sshd;
  Socket closed(
      /*listening=*/false);  // bound, not listening: connects are refused, port stays ours
  Target t = sshd.target();
  t.alias = "server1";
  t.port = closed.port;
  const std::string ep = "127.0.0.1:" + std::to_string(closed.port);
  REQUIRE_THROWS_AS(Session::connect(t, {}, in(10s)), ConnectError);
  REQUIRE_THROWS_WITH(Session::connect(t, {}, in(10s)),
                      Catch::StartsWith("server1: connection refused on " + ep) &&
                          Catch::Contains("-p/--ssh-port"));
}

TEST_CASE("a port that accepts but never speaks SSH times out in the handshake",
          "[session][errors]") {
  LocalSshd sshd;
  Socket silent(/*listening=*/true);  // the kernel completes the TCP handshake; nobody answers
  Target t = sshd.target();
  t.port = silent.port;
  t.connect_timeout = 1s;
  const auto t0 = Clock::now();
  // ConnectTimeout (1 s) ran out before the caller's deadline: the message names that knob, the
  // one a user can set (horarun has no --ssh-connect-timeout).
  REQUIRE_THROWS_WITH(Session::connect(t, {}, in(60s)),
                      Catch::Contains("timed out") && Catch::Contains("SSH handshake") &&
                          Catch::Contains("127.0.0.1:" + std::to_string(silent.port)) &&
                          Catch::Contains("raise ConnectTimeout in ssh_config (now 1 s)") &&
                          !Catch::Contains("--ssh-connect-timeout"));
  CHECK(Clock::now() - t0 < 30s);  // ConnectTimeout, not the 60 s deadline

  // The caller's deadline (horarun's --start-timeout) runs out first: that is what to raise.
  t.connect_timeout = 60s;
  const auto t1 = Clock::now();
  REQUIRE_THROWS_WITH(Session::connect(t, {}, in(1s)),
                      Catch::Contains("SSH handshake") &&
                          Catch::Contains("raise --start-timeout") &&
                          !Catch::Contains("ConnectTimeout") &&
                          !Catch::Contains("--ssh-connect-timeout"));
  CHECK(Clock::now() - t1 < 30s);  // the 1 s deadline, not the 60 s ConnectTimeout
}

TEST_CASE("TCP connect timeout: a listener whose queue is full drops our SYN",
          "[session][errors]") {
  LocalSshd sshd;
  Socket full(/*listening=*/true, /*backlog=*/0);
  // Fill the accept queue (backlog 0 admits one connection); further SYNs are dropped.
  std::vector<int> fillers;
  for (int i = 0; i < 2; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(full.port));
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(fd);
  }
  Target t = sshd.target();
  t.alias = "slowhost";
  t.port = full.port;
  t.connect_timeout = 1s;
  const auto t0 = Clock::now();
  try {
    Session::connect(t, {}, in(60s));
    FAIL("connect succeeded");
  } catch (const TimeoutError& e) {
    // Either the TCP connect or (if the kernel let us in after all) the handshake timed out.
    CHECK_THAT(e.what(), Catch::StartsWith("slowhost: ") && Catch::Contains("timed out after 1") &&
                             Catch::Contains("127.0.0.1:" + std::to_string(full.port)) &&
                             Catch::Contains("raise ConnectTimeout in ssh_config (now 1 s)") &&
                             !Catch::Contains("--ssh-connect-timeout"));
  }
  CHECK(Clock::now() - t0 < 30s);  // ConnectTimeout, not the 60 s deadline
  for (int fd : fillers) ::close(fd);
}

TEST_CASE("an unauthorised key: the error lists the keys tried and what the server accepts",
          "[session][errors]") {
  LocalSshd sshd;
  Target t = sshd.target();
  const std::string missing = sshd.dir() / "no_such_key";
  t.identity_files = {missing, sshd.stranger_key()};
  try {
    Session::connect(t, {}, in(10s));
    FAIL("authenticated with an unauthorised key");
  } catch (const AuthError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::StartsWith("authentication failed for root@127.0.0.1:" +
                                    std::to_string(sshd.port())));
    CHECK_THAT(m, Catch::Contains("key file " + missing + ": not found"));
    CHECK_THAT(m, Catch::Contains("key file " + sshd.stranger_key() + ": refused by the server"));
    CHECK_THAT(m, Catch::Contains("no ssh-agent"));
    CHECK_THAT(m, Catch::Contains("The server accepts: publickey"));
    CHECK_THAT(m, Catch::Contains("-i/--ssh-identity-file"));
  }
}

TEST_CASE("a changed host key is refused with its fingerprint and the known_hosts line",
          "[session][hostkey]") {
  LocalSshd sshd;
  const std::string old_line = sshd.known_hosts_line();
  sshd.regenerate_host_key();
  // Line 1: another host; line 2: the stale key for our server.
  std::ofstream(sshd.known_hosts())
      << "otherhost ssh-ed25519 "
         "AAAAC3NzaC1lZDI1NTE5AAAAIMv7Xg+2JgXkfyMVkSphZ07NJorYsJRU5i9guTFXtsO8\n"
      << old_line << "\n";
  for (HostKeyPolicy policy : {HostKeyPolicy::kYes, HostKeyPolicy::kAcceptNew}) {
    Target t = sshd.target();
    t.host_key_policy = policy;
    try {
      Session::connect(t, {}, in(10s));
      FAIL("connected despite a changed host key");
    } catch (const HostKeyError& e) {
      const std::string m = e.what();
      CHECK_THAT(m, Catch::Contains("CHANGED"));
      CHECK_THAT(m, Catch::Contains(sshd.host_fingerprint()));
      CHECK_THAT(m, Catch::Contains(sshd.known_hosts() + ":2"));
      CHECK_THAT(m, Catch::Contains("ssh-keygen -R '[127.0.0.1]:" + std::to_string(sshd.port()) +
                                    "'"));
    }
  }
  // StrictHostKeyChecking=no connects anyway (and warns).
  Target t = sshd.target();
  t.host_key_policy = HostKeyPolicy::kNo;
  CHECK(Session::connect(t, {}, in(10s))->run("echo hi", "", in(10s)).out == "hi\n");
}

TEST_CASE("accept-new records an unknown host; yes refuses it", "[session][hostkey]") {
  LocalSshd sshd;
  const std::string kh = sshd.dir() / "fresh/known_hosts";  // neither file nor directory exists yet
  Target t = sshd.target();
  t.known_hosts_files = {kh};

  t.host_key_policy = HostKeyPolicy::kYes;
  REQUIRE_THROWS_WITH(Session::connect(t, {}, in(10s)),
                      Catch::Contains("not known") && Catch::Contains(sshd.host_fingerprint()) &&
                          Catch::Contains("accept-new"));
  CHECK_FALSE(std::filesystem::exists(kh));

  t.host_key_policy = HostKeyPolicy::kAcceptNew;
  REQUIRE_NOTHROW(Session::connect(t, {}, in(10s)));
  CHECK(slurp(kh) == sshd.known_hosts_line() + "\n");

  // Now known: even the strict policy connects, and nothing more is appended.
  t.host_key_policy = HostKeyPolicy::kYes;
  REQUIRE_NOTHROW(Session::connect(t, {}, in(10s)));
  CHECK(slurp(kh) == sshd.known_hosts_line() + "\n");
}

TEST_CASE("a known_hosts file that cannot be written: warned about once, not fatal",
          "[session][hostkey]") {
  LocalSshd sshd;
  // Below a regular file nothing can be created, even by root; test/kubernetes/ checks a real
  // read-only bind mount of ~/.ssh, as the MPI Operator mounts its Secret.
  const std::string blocker = sshd.dir() / "not_a_dir";
  std::ofstream(blocker).close();
  const std::string kh = blocker + "/known_hosts";
  std::ostringstream log;
  auto logger = hora::named_logger("ssh");
  auto saved = logger->sinks();
  logger->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_st>(log)};
  struct Restore {
    std::shared_ptr<spdlog::logger> logger;
    std::vector<spdlog::sink_ptr> sinks;
    ~Restore() { logger->sinks() = sinks; }
  } restore{logger, saved};

  Target t = sshd.target();
  t.known_hosts_files = {kh};
  t.host_key_policy = HostKeyPolicy::kYes;
  REQUIRE_THROWS_WITH(Session::connect(t, {}, in(10s)), Catch::Contains("not known"));
  for (HostKeyPolicy policy : {HostKeyPolicy::kAcceptNew, HostKeyPolicy::kNo}) {
    t.host_key_policy = policy;
    CHECK(Session::connect(t, {}, in(10s))->run("echo hi", "", in(10s)).out == "hi\n");
  }
  const std::string text = log.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("cannot record the host key of") && Catch::Contains(kh) &&
                       Catch::Contains("connecting anyway (StrictHostKeyChecking is accept-new)") &&
                       Catch::Contains("UserKnownHostsFile"));
  // Two connections, one warning.
  std::size_t count = 0;
  for (std::size_t at = text.find("connecting anyway"); at != std::string::npos;
       at = text.find("connecting anyway", at + 1)) {
    ++count;
  }
  CHECK(count == 1);
  CHECK_FALSE(std::filesystem::exists(kh));
}

TEST_CASE("ssh-agent authentication is tried first when an agent socket is given",
          "[session][agent]") {
  LocalSshd sshd;
  const Agent agent(sshd.dir().path().string());
  agent.add(sshd.client_key());

  Target t = sshd.target();
  t.identity_files = {sshd.stranger_key()};  // a file that would fail: the agent must be used
  ConnectOptions o;
  o.agent_socket = agent.sock;
  auto s = Session::connect(t, o, in(10s));
  CHECK_THAT(s->auth_method(), Catch::StartsWith("ssh-agent key ssh-ed25519 SHA256:") &&
                                   Catch::Contains("hora-test-client"));
  CHECK(s->run("echo via-agent", "", in(10s)).out == "via-agent\n");

  // An agent that holds only unauthorised keys is listed among the attempts.
  agent.clear();
  agent.add(sshd.stranger_key());
  REQUIRE_THROWS_WITH(Session::connect(t, o, in(10s)),
                      Catch::Contains("ssh-agent key ssh-ed25519") &&
                          Catch::Contains("hora-test-stranger): refused"));
}

// libssh2 cannot use a passphrase-protected key without the passphrase, and hora has no terminal
// to ask for it: the error must say "ssh-add FILE", not blame the server's authorized_keys.
TEST_CASE("a passphrase-protected key file: the error says to load it into ssh-agent",
          "[session][errors][agent]") {
  LocalSshd sshd;
  const std::string client_pub = sshd.client_key() + ".pub";  // authorised on the server
  // The authorised key, re-encrypted: OpenSSH format with and without its .pub beside it.
  const std::string locked = sshd.dir() / "locked_ed25519";
  sh("cp " + sshd.client_key() + " " + locked + " && cp " + client_pub + " " + locked +
     ".pub && ssh-keygen -q -p -P '' -N secret -f " + locked);
  const std::string locked_nopub = sshd.dir() / "locked_nopub";
  sh("cp " + locked + " " + locked_nopub);
  // A PEM-format (Proc-Type: 4,ENCRYPTED) key, authorised too.
  const std::string pem = sshd.dir() / "locked_pem_ecdsa";
  sh("ssh-keygen -q -t ecdsa -m PEM -N secret -f " + pem + " && cat " + pem + ".pub >> " +
     (sshd.dir() / "authorized_keys"));
  REQUIRE_THAT(sh("cat " + pem), Catch::Contains("ENCRYPTED"));

  for (const std::string& key : {locked, locked_nopub, pem}) {
    INFO(key);
    Target t = sshd.target();
    t.identity_files = {key};
    const std::string m = auth_failure(t);
    CHECK_THAT(m, Catch::Contains("key file " + key + ": protected by a passphrase"));
    CHECK_THAT(m, Catch::Contains("ssh-add " + key));
    CHECK_THAT(m, Catch::Contains("without a passphrase"));
    // Nothing was refused, so the authorized_keys advice would mislead.
    CHECK_THAT(m, !Catch::Contains("refused by the server") && !Catch::Contains("ssh-copy-id"));
  }

  // Beside a key the server refuses, both problems and both fixes are named.
  Target mixed = sshd.target();
  mixed.identity_files = {sshd.stranger_key(), locked};
  const std::string m = auth_failure(mixed);
  CHECK_THAT(m, Catch::Contains("key file " + sshd.stranger_key() + ": refused by the server"));
  CHECK_THAT(m, Catch::Contains("key file " + locked + ": protected by a passphrase"));
  CHECK_THAT(m, Catch::Contains("ssh-add " + locked) && Catch::Contains("ssh-copy-id"));
  CHECK_THAT(m, !Catch::Contains(locked + ": refused"));

  // A private key libssh2 cannot read at all, whose authorised .pub the server accepts: libssh2
  // fails only when signing. Not "refused" either: the message points at the key file.
  const std::string broken = sshd.dir() / "broken_key";
  std::ofstream(broken) << "this is not a private key\n";
  sh("cp " + client_pub + " " + broken + ".pub");
  Target bt = sshd.target();
  bt.identity_files = {broken};
  const std::string bm = auth_failure(bt);
  CHECK_THAT(bm, Catch::Contains("key file " + broken + ": the server accepts its public key") &&
                     Catch::Contains("cannot load the private key"));
  CHECK_THAT(bm, Catch::Contains("ssh-add " + broken) && !Catch::Contains("refused by the server"));

  // The advice works: once the key is in ssh-agent, the same target authenticates through it.
  const Agent agent(sshd.dir().path().string());
  agent.add(locked, "secret");
  Target t = sshd.target();
  t.identity_files = {locked};
  ConnectOptions o;
  o.agent_socket = agent.sock;
  auto s = Session::connect(t, o, in(10s));
  CHECK_THAT(s->auth_method(), Catch::StartsWith("ssh-agent key ssh-ed25519 SHA256:"));
  CHECK(s->run("echo unlocked", "", in(10s)).out == "unlocked\n");
}

TEST_CASE("name resolution goes through the resolver seam, and its errors name the alias",
          "[session][errors]") {
  Target t;
  t.alias = "server3";
  t.hostname = "server3.lab";
  t.port = 2222;
  ConnectOptions o;
  std::string asked;
  o.resolver = [&](const std::string& host, int port) -> std::vector<ResolvedAddress> {
    asked = host + ":" + std::to_string(port);
    throw ResolveError(host + ": name does not resolve");
  };
  REQUIRE_THROWS_AS(Session::connect(t, o, in(5s)), ResolveError);
  CHECK(asked == "server3.lab:2222");
  REQUIRE_THROWS_WITH(Session::connect(t, o, in(5s)),
                      Catch::StartsWith(
                          "server3 (HostName server3.lab): server3.lab: name does not resolve"));
}

// A misspelt alias is looked up as a host name; the failure must say that it is no alias, naming
// the ssh_config file read. All lookups go to a fake resolver: no DNS query leaves this test.
TEST_CASE(
    "a name that is no Host alias and does not resolve: the error says it matches no Host entry",
    "[session][errors]") {
  hora::ssh::test::TempDir dir;
  const std::string cfg = dir.write("ssh_config",
                                    "Host h1 h2\n"
                                    "  HostName 198.18.0.11\n"
                                    "Host *\n"
                                    "  User root\n");
  ConfigSource src;
  src.file = cfg;
  std::vector<std::string> asked;
  ConnectOptions o;
  o.resolver = [&](const std::string& host, int) -> std::vector<ResolvedAddress> {
    asked.push_back(host);
    throw ResolveError(
        host +
        ": cannot resolve the name: Temporary failure in name resolution (temporary DNS "
        "failure; try again)");
  };

  // h9 matches only `Host *`, which names no host.
  REQUIRE_THROWS_AS(Session::connect(resolve("h9", {}, src), o, in(5s)), ResolveError);
  REQUIRE_THROWS_WITH(
      Session::connect(resolve("h9", {}, src), o, in(5s)),
      Catch::StartsWith("h9: cannot resolve the name: Temporary failure in name resolution") &&
          Catch::EndsWith("; h9 matches no Host entry in " + cfg +
                          ", so it was looked up as a host name (a misspelt alias?)"));

  // An alias whose HostName fails says which name it looked up, and nothing about Host entries.
  REQUIRE_THROWS_WITH(Session::connect(resolve("h1", {}, src), o, in(5s)),
                      Catch::StartsWith("h1 (HostName 198.18.0.11): 198.18.0.11: cannot resolve") &&
                          !Catch::Contains("Host entry"));

  // No ssh_config read at all (--ssh-config none): said so.
  src.file = "none";
  REQUIRE_THROWS_WITH(Session::connect(resolve("h9", {}, src), o, in(5s)),
                      Catch::EndsWith("; no ssh_config file was read, so h9 is no Host alias"));

  // A Target made by hand did not come from ssh_config: no claim about it.
  Target manual;
  manual.alias = manual.hostname = "h9";
  REQUIRE_THROWS_WITH(Session::connect(manual, o, in(5s)), !Catch::Contains("Host"));
  CHECK(asked == std::vector<std::string>{"h9", "h9", "198.18.0.11", "h9", "h9"});
}

TEST_CASE("getaddrinfo resolver: numeric addresses without any lookup", "[session]") {
  const auto v4 = resolve_with_getaddrinfo("127.0.0.1", 22);
  REQUIRE_FALSE(v4.empty());
  CHECK(v4[0].addr.ss_family == AF_INET);
}

TEST_CASE("many channels streaming stdout and stderr at once lose nothing and all finish",
          "[session][stress]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  constexpr int kN = 8;
  std::vector<std::size_t> out(kN), err(kN);
  std::vector<std::shared_ptr<Channel>> chans;
  for (int i = 0; i < kN; ++i) {
    Channel::Handlers h;
    h.on_stdout = [&out, i](std::string_view d) { out[i] += d.size(); };
    // Count the zero bytes the command wrote (not any text the login shell printed).
    h.on_stderr = [&err, i](std::string_view d) { err[i] += std::count(d.begin(), d.end(), '\0'); };
    // ~1 MB on stdout and ~0.5 MB on stderr per channel, interleaved by the shell.
    chans.push_back(
        s->exec("head -c 1000000 /dev/zero; head -c 500000 /dev/zero >&2; "
                "head -c 48576 /dev/zero; exit " +
                    std::to_string(i + 10),
                std::move(h)));
  }
  pump_until(
      *s, [&] { return s->active_channels() == 0; }, in(60s));
  for (int i = 0; i < kN; ++i) {
    // Why a channel ended without its status, should it (seen once under ASan and heavy load).
    INFO("channel " << i << " error: '" << chans[i]->exit()->error << "'");
    CHECK(out[i] == 1'048'576);
    CHECK(err[i] == 500'000);
    CHECK(chans[i]->exit()->exit_status == i + 10);
  }
}

TEST_CASE("channels driven from a Boost.Asio loop as session.h describes", "[session][asio]") {
  LocalSshd sshd;
  auto s = Session::connect(sshd.target(), {}, in(10s));
  boost::asio::io_context io;
  boost::asio::posix::stream_descriptor sd(io, s->fd());
  bool read_armed = false, write_armed = false;
  std::function<void()> kick = [&] {
    s->pump();
    const Session::Interest want = s->interest();
    if (want.again) boost::asio::post(io, [&] { kick(); });
    if (want.read && !read_armed) {
      read_armed = true;
      sd.async_wait(sd.wait_read, [&](boost::system::error_code ec) {
        read_armed = false;
        if (!ec) kick();
      });
    }
    if (want.write && !write_armed) {
      write_armed = true;
      sd.async_wait(sd.wait_write, [&](boost::system::error_code ec) {
        write_armed = false;
        if (!ec) kick();
      });
    }
  };

  // Two "ranks": each echoes what it reads (like a guard reading its environment block), and
  // the second only gets its input after the first has answered, written from the first's
  // stdout handler (inside pump(); the pump in progress carries it).
  std::string out0, out1;
  int finished = 0;
  std::shared_ptr<Channel> c1;
  Channel::Handlers h0;
  h0.on_stdout = [&](std::string_view d) {
    out0.append(d);
    if (out0 == "env-0\n") {
      c1->write("env-1\n");
      c1->close_stdin();
      kick();
    }
  };
  h0.on_exit = [&](const ExitInfo&) {
    if (++finished == 2) io.stop();
  };
  Channel::Handlers h1;
  h1.on_stdout = [&](std::string_view d) { out1.append(d); };
  h1.on_exit = [&](const ExitInfo&) {
    if (++finished == 2) io.stop();
  };
  auto c0 = s->exec("cat", std::move(h0));
  c1 = s->exec("cat; exit 9", std::move(h1));
  c0->write("env-0\n");
  c0->close_stdin();
  kick();

  io.run_for(20s);  // stopped by the second on_exit; the bound only matters when that never comes
  sd.release();
  CHECK(finished == 2);
  CHECK(out0 == "env-0\n");
  CHECK(out1 == "env-1\n");
  CHECK(c1->exit()->exit_status == 9);
}

TEST_CASE("more channels than sshd's MaxSessions: the extra ones fail and say why",
          "[session][errors]") {
  LocalSshd sshd("MaxSessions 2\n");
  auto s = Session::connect(sshd.target(), {}, in(10s));
  std::vector<std::shared_ptr<Channel>> chans;
  for (int i = 0; i < 3; ++i) chans.push_back(s->exec("cat"));
  pump_until(
      *s, [&] { return chans[2]->done(); }, in(10s));
  REQUIRE(chans[2]->exit());
  CHECK_THAT(chans[2]->exit()->error, Catch::Contains("MaxSessions"));
  CHECK_FALSE(chans[0]->done());
  CHECK_FALSE(chans[1]->done());
  // The session survives: close the two and they end normally.
  for (int i = 0; i < 2; ++i) chans[i]->close_stdin();
  pump_until(
      *s, [&] { return s->active_channels() == 0; }, in(10s));
  CHECK(chans[0]->exit()->exit_status == 0);
}

TEST_CASE("ECDSA key files authenticate too", "[session]") {
  LocalSshd sshd;
  const std::string key = sshd.dir() / "client_ecdsa";
  sh("ssh-keygen -q -t ecdsa -N '' -f " + key + " && cat " + key + ".pub >> " +
     (sshd.dir() / "authorized_keys"));
  Target t = sshd.target();
  t.identity_files = {key};
  CHECK(Session::connect(t, {}, in(10s))->auth_method() == "key file " + key);
}

// libssh2 1.10 signs with ssh-rsa (SHA-1), which OpenSSH >= 8.8 refuses by default; rsa-sha2
// user authentication came with libssh2 1.11. The refusal must point at that, not just "refused".
TEST_CASE("an RSA key refused by a current sshd: the error explains the SHA-1 signature problem",
          "[session]") {
  LocalSshd strict;
  const std::string key = strict.dir() / "client_rsa";
  sh("ssh-keygen -q -t rsa -b 2048 -N '' -f " + key + " && cat " + key + ".pub >> " +
     (strict.dir() / "authorized_keys"));
  Target t = strict.target();
  t.identity_files = {key};
  try {
    auto s = Session::connect(t, {}, in(10s));
    SUCCEED("this libssh2 signs RSA with SHA-2");  // a newer libssh2: nothing to explain
  } catch (const AuthError& e) {
    CHECK_THAT(e.what(), Catch::Contains(key + ": refused by the server") &&
                             Catch::Contains("ssh-rsa") && Catch::Contains("ed25519"));
  }
  // A server that still accepts ssh-rsa signatures takes the same key.
  LocalSshd lenient("MaxSessions 50\nPubkeyAcceptedAlgorithms +ssh-rsa\n");
  sh("cat " + key + ".pub >> " + (lenient.dir() / "authorized_keys"));
  Target t2 = lenient.target();
  t2.identity_files = {key};
  CHECK(Session::connect(t2, {}, in(10s))->auth_method() == "key file " + key);
}
