#include "ssh/session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh2.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "ssh/errors.h"
#include "ssh/format.h"
#include "ssh/key_file.h"
#include "ssh/libssh2_errors.h"
#include "ssh/log.h"

namespace hora::ssh {
namespace {

// libssh2_init() is documented as not thread-safe; sessions are created from preflight threads.
void init_libssh2_once() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] { rc = libssh2_init(0); });
  if (rc != 0) throw Error("libssh2_init failed (" + std::to_string(rc) + ")");
}

std::chrono::milliseconds elapsed_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

std::string numeric_host(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

int port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

std::string endpoint_of(const sockaddr* sa, socklen_t len) {
  const std::string host = numeric_host(sa, len);
  const std::string port = std::to_string(port_of(sa));
  return sa->sa_family == AF_INET6 ? "[" + host + "]:" + port : host + ":" + port;
}
// recv() for libssh2 that also counts the bytes it delivers. pump() uses the count to know when
// a pass over the channels ran without new input: only then is every channel's view of its
// queue final (see Session::pump). `abstract` points at Session::recv_bytes_.
LIBSSH2_RECV_FUNC(counting_recv) {
  const ssize_t n = ::recv(socket, buffer, length, flags);
  if (n < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
  *static_cast<std::size_t*>(*abstract) += static_cast<std::size_t>(n);
  return n;
}

// Appended to a name resolution failure when the host is no ssh_config alias: a misspelt alias
// ("h9" for "h1") matches no Host line, so it is looked up as a host name and fails there, which
// alone reads like a DNS problem. Empty for an alias, or a Target that resolve() did not make.
std::string not_an_alias_note(const Target& t) {
  if (!t.from_config || !t.host_entry.empty()) return {};
  if (t.config_files.empty())
    return "; no ssh_config file was read, so " + t.alias + " is no Host alias";
  // At most 8 files by name: an Include tree can read up to 256.
  constexpr std::size_t kListed = 8;
  std::string files;
  for (std::size_t i = 0; i < t.config_files.size() && i < kListed; ++i) {
    files += (files.empty() ? "" : ", ") + t.config_files[i];
  }
  if (t.config_files.size() > kListed) {
    files += " and " + std::to_string(t.config_files.size() - kListed) + " more files";
  }
  return "; " + t.alias + " matches no Host entry in " + files +
         ", so it was looked up as a host name (a misspelt alias?)";
}

// Host key algorithms that can verify a known_hosts key of `type` (RSA keys sign with SHA-2 now).
std::vector<std::string> algorithms_for_key_type(const std::string& type) {
  if (type == "ssh-rsa") return {"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"};
  return {type};
}

}  // namespace

// ---------------------------------------------------------------------------------------- misc

std::vector<ResolvedAddress> resolve_with_getaddrinfo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_FAIL) {
      throw ResolveError(host + ": name does not resolve (" + ::gai_strerror(rc) +
                         "); check the host name, or its HostName in ssh_config");
    }
    throw ResolveError(host + ": cannot resolve the name: " + ::gai_strerror(rc) +
                       (rc == EAI_AGAIN ? " (temporary DNS failure; try again)" : ""));
  }
  std::vector<ResolvedAddress> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    ResolvedAddress a;
    std::memcpy(&a.addr, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    out.push_back(a);
  }
  ::freeaddrinfo(res);
  return out;
}

ConnectOptions ConnectOptions::from_environment() {
  ConnectOptions o;
  if (const char* sock = std::getenv("SSH_AUTH_SOCK"); sock != nullptr) o.agent_socket = sock;
  return o;
}

// ------------------------------------------------------------------------------------- Session

Session::Session(Target target, ConnectOptions options)
    : target_(std::move(target)), options_(std::move(options)), started_(Clock::now()) {}

Session::~Session() {
  for (auto& ch : channels_) {
    // No handlers from a destructor: they may reach into objects being torn down with us.
    if (!ch->done()) {
      ch->complete(ExitInfo{-1, "", "the SSH session to " + target_.describe() + " was closed"},
                   false);
    }
    ch->ch_ = nullptr;  // freed with the session below
    ch->session_ = nullptr;
  }
  if (session_ != nullptr) {
    // Best effort, never blocking: say goodbye if the socket takes it, then shut the socket so
    // that libssh2's teardown (which would wait for channel closes) sees a dead connection.
    libssh2_session_disconnect(session_, "hora: done");
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    for (int i = 0; i < 100 && libssh2_session_free(session_) == LIBSSH2_ERROR_EAGAIN; ++i) {
    }
    session_ = nullptr;
  }
  if (fd_ >= 0) ::close(fd_);
}

std::string Session::last_error() const {
  char* msg = nullptr;
  int len = 0;
  libssh2_session_last_error(session_, &msg, &len, 0);
  return msg != nullptr && len > 0 ? std::string(msg, static_cast<std::size_t>(len))
                                   : "unknown libssh2 error";
}

bool Session::wait(Clock::time_point deadline) const {
  const Interest want = interest();
  pollfd p{};
  p.fd = fd_;
  p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
  if (want.again) return true;
  if (p.events == 0) p.events = POLLIN;  // idle session: wake on anything (e.g. a disconnect)
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 60'000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the next libssh2 call report the error
  }
}

std::string Session::timeout_knob(bool by_connect_timeout) const {
  // horarun has no flag for the connect timeout; ssh_config's ConnectTimeout is the knob
  // (config.h).
  if (by_connect_timeout)
    return "ConnectTimeout in ssh_config (now " + format_duration(target_.connect_timeout) + ")";
  return "--start-timeout";
}

int Session::await(const std::function<int()>& call, Clock::time_point deadline, const char* step,
                   bool by_connect_timeout) {
  while (true) {
    const int rc = call();
    if (rc != LIBSSH2_ERROR_EAGAIN) return rc;
    const int dirs = libssh2_session_block_directions(session_);
    pollfd p{};
    p.fd = fd_;
    p.events = static_cast<short>(((dirs & LIBSSH2_SESSION_BLOCK_INBOUND) ? POLLIN : 0) |
                                  ((dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? POLLOUT : 0));
    if (p.events == 0) p.events = POLLIN;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        throw TimeoutError(target_.alias + ": timed out after " +
                           format_duration(elapsed_since(started_)) + " during " + step + " with " +
                           remote_endpoint_ +
                           "; the host or its sshd is too slow or stuck (raise " +
                           timeout_knob(by_connect_timeout) + " if it is only slow)");
      }
      const int n = ::poll(&p, 1, static_cast<int>(left.count() + 1));
      if (n > 0 || (n < 0 && errno != EINTR)) break;
    }
  }
}

std::unique_ptr<Session> Session::connect(const Target& target, const ConnectOptions& options,
                                          Clock::time_point deadline) {
  init_libssh2_once();
  std::unique_ptr<Session> s(new Session(target, options));
  s->open_socket(deadline);
  s->handshake(deadline);
  s->verify_host_key();
  s->authenticate(deadline);
  return s;
}

void Session::open_socket(Clock::time_point deadline) {
  std::vector<ResolvedAddress> addrs;
  try {
    addrs = options_.resolver(target_.hostname, target_.port);
  } catch (const ResolveError& e) {
    // Say which alias led to the name when they differ ("gpu1 (HostName gpu1.lab): ..."), and
    // when the host is not an alias at all.
    const std::string prefix = target_.alias != target_.hostname
                                   ? target_.alias + " (HostName " + target_.hostname + "): "
                                   : "";
    throw ResolveError(prefix + e.what() + not_an_alias_note(target_));
  }
  if (addrs.empty()) {
    throw ResolveError(target_.hostname + ": name does not resolve (no addresses)" +
                       not_an_alias_note(target_));
  }

  const auto connect_deadline = std::min(deadline, Clock::now() + target_.connect_timeout);
  std::vector<std::string> failures;
  bool all_timeouts = true;
  for (const ResolvedAddress& a : addrs) {
    const auto* sa = reinterpret_cast<const sockaddr*>(&a.addr);
    const std::string ep = endpoint_of(sa, a.len);
    const auto t0 = Clock::now();
    const int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      failures.push_back("cannot create a socket for " + ep + ": " + std::strerror(errno));
      all_timeouts = false;
      continue;
    }
    int err = 0;
    if (::connect(fd, sa, a.len) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        err = ETIMEDOUT;
        while (true) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(connect_deadline -
                                                                                  Clock::now());
          if (left.count() <= 0) break;
          const int n = ::poll(&p, 1, static_cast<int>(left.count() + 1));
          if (n < 0 && errno == EINTR) continue;
          if (n > 0) {
            socklen_t len = sizeof err;
            if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
          }
          break;
        }
      }
    }
    if (err == 0) {
      fd_ = fd;
      remote_endpoint_ = ep;
      break;
    }
    ::close(fd);
    if (err == ETIMEDOUT) {
      failures.push_back(
          "timed out after " + format_duration(elapsed_since(t0)) + " connecting to " + ep +
          "; is the host up and reachable from here, or is a firewall dropping port " +
          std::to_string(target_.port) + "? (raise " + timeout_knob(connect_deadline < deadline) +
          " if it is only slow to answer)");
      continue;
    }
    all_timeouts = false;
    if (err == ECONNREFUSED) {
      failures.push_back("connection refused on " + ep +
                         " — is sshd running there? wrong -p/--ssh-port (or Port in ssh_config)?");
    } else if (err == EHOSTUNREACH || err == ENETUNREACH) {
      failures.push_back(ep + " is unreachable (" + std::strerror(err) +
                         "); check the address (HostName) and the routes to it");
    } else {
      failures.push_back("cannot connect to " + ep + ": " + std::strerror(err));
    }
  }
  if (fd_ < 0) {
    std::string msg = target_.alias + ": ";
    for (std::size_t i = 0; i < failures.size(); ++i) msg += (i ? "; " : "") + failures[i];
    if (all_timeouts) throw TimeoutError(msg);
    throw ConnectError(msg);
  }

  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    local_address_ = numeric_host(reinterpret_cast<sockaddr*>(&local), len);
  }
  // Exec channels carry small, latency-sensitive messages (guard control); and a dead host
  // should be noticed by the launcher within tens of seconds, not the kernel's hours.
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 15, intvl = 5, cnt = 3;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

void Session::handshake(Clock::time_point deadline) {
  session_ = libssh2_session_init_ex(nullptr, nullptr, nullptr, &recv_bytes_);
  if (session_ == nullptr)
    throw Error(target_.alias + ": libssh2_session_init failed (out of memory?)");
  libssh2_session_callback_set(session_, LIBSSH2_CALLBACK_RECV,
                               reinterpret_cast<void*>(&counting_recv));
  libssh2_session_set_blocking(session_, 0);

  known_hosts_.emplace(target_.known_hosts_files);
  // Ask for the host key types we can verify first, as OpenSSH does; otherwise a host known by
  // its ed25519 key could present an ECDSA key and look "new".
  const std::vector<std::string> known =
      known_hosts_->known_types(known_hosts_name(target_.hostname, target_.port));
  if (!known.empty()) {
    const char** algs = nullptr;
    const int n = libssh2_session_supported_algs(session_, LIBSSH2_METHOD_HOSTKEY, &algs);
    std::vector<std::string> supported;
    for (int i = 0; i < n; ++i) supported.emplace_back(algs[i]);
    if (algs != nullptr && n > 0) libssh2_free(session_, algs);
    std::vector<std::string> order;
    for (const std::string& type : known) {
      for (const std::string& alg : algorithms_for_key_type(type)) {
        if (std::find(supported.begin(), supported.end(), alg) != supported.end() &&
            std::find(order.begin(), order.end(), alg) == order.end()) {
          order.push_back(alg);
        }
      }
    }
    for (const std::string& alg : supported) {
      if (std::find(order.begin(), order.end(), alg) == order.end()) order.push_back(alg);
    }
    std::string pref;
    for (const std::string& alg : order) pref += (pref.empty() ? "" : ",") + alg;
    if (!pref.empty()) libssh2_session_method_pref(session_, LIBSSH2_METHOD_HOSTKEY, pref.c_str());
  }

  // OpenSSH's ConnectTimeout also bounds the banner exchange: a port that accepts but never
  // speaks SSH fails in connect_timeout, not at the overall deadline.
  const auto hs_deadline = std::min(deadline, Clock::now() + target_.connect_timeout);
  const int rc = await([&] { return libssh2_session_handshake(session_, fd_); }, hs_deadline,
                       "the SSH handshake", hs_deadline < deadline);
  if (rc != 0) {
    throw ConnectError(target_.alias + ": connected to " + remote_endpoint_ +
                       " but the SSH handshake failed: " + last_error() +
                       " — is an SSH server listening on port " + std::to_string(target_.port) +
                       "? (wrong -p/--ssh-port?)");
  }
}

void Session::verify_host_key() {
  std::size_t len = 0;
  int type = 0;
  const char* raw = libssh2_session_hostkey(session_, &len, &type);
  if (raw == nullptr || len == 0) {
    throw HostKeyError(target_.alias + ": the server at " + remote_endpoint_ + " sent no host key");
  }
  host_key_ = HostKey::from_blob(std::string(raw, len));
  const std::string name = known_hosts_name(target_.hostname, target_.port);
  const KnownHosts::Lookup found = known_hosts_->check(name, host_key_);
  const std::string offered = host_key_.type + " key " + host_key_.fingerprint();
  switch (found.status) {
    case KnownHosts::Status::kKnown: return;
    case KnownHosts::Status::kRevoked:
      throw HostKeyError(target_.alias + ": the host key of " + name + " (" + offered +
                         ") is marked @revoked in " + found.entry.file + ":" +
                         std::to_string(found.entry.line) + "; refusing to connect");
    case KnownHosts::Status::kChanged: {
      const std::string where = found.entry.file + ":" + std::to_string(found.entry.line);
      if (target_.host_key_policy == HostKeyPolicy::kNo) {
        logger()->warn(
            "{}: the host key of {} CHANGED (now {}; {} has {}); connecting anyway because "
            "StrictHostKeyChecking is no",
            target_.alias, name, offered, where, found.entry.key.fingerprint());
        return;
      }
      throw HostKeyError(
          target_.alias + ": the host key of " + name + " has CHANGED: the server offers " +
          offered + ", but " + where + " holds a different " + found.entry.key.type + " key (" +
          found.entry.key.fingerprint() +
          "). Someone may be intercepting the connection, or the host was reinstalled. If the "
          "change is expected, remove the old key with: ssh-keygen -R '" +
          name + "' -f " + found.entry.file + " (or delete line " +
          std::to_string(found.entry.line) + "), then retry");
    }
    case KnownHosts::Status::kNew: break;
  }
  if (target_.host_key_policy == HostKeyPolicy::kYes) {
    const std::string file = target_.known_hosts_files.empty() ? std::string("~/.ssh/known_hosts")
                                                               : target_.known_hosts_files.front();
    throw HostKeyError(target_.alias + ": the host key of " + name + " is not known (" + offered +
                       ") and StrictHostKeyChecking is yes; check the fingerprint and add it with: "
                       "ssh-keyscan -p " +
                       std::to_string(target_.port) + " " + target_.hostname + " >> " + file +
                       ", or use --ssh-strict-host-key-checking accept-new");
  }
  if (target_.known_hosts_files.empty()) {
    logger()->warn("{}: new host key {} for {} not recorded (UserKnownHostsFile none)",
                   target_.alias, offered, name);
    return;
  }
  const std::string& file = target_.known_hosts_files.front();
  const std::string why = known_hosts_->add_or_remember(file, name, host_key_);
  if (why.empty()) {
    logger()->info("{}: recorded the new host key of {} ({}) in {}", target_.alias, name, offered,
                   file);
  } else if (first_unwritable_report(file)) {
    // OpenSSH warns and goes on; so do we, once per file (a read-only ~/.ssh, e.g. a Kubernetes
    // Secret mount, would otherwise warn once per host).
    logger()->warn(
        "{}; connecting anyway (StrictHostKeyChecking is {}), as ssh does; new host keys are not "
        "recorded this run. Point UserKnownHostsFile at a writable file (ssh_config, "
        "--ssh-config) to keep them, or set it to none to silence this",
        why, to_string(target_.host_key_policy));
  }
}

std::shared_ptr<Channel> Session::exec(std::string command, Channel::Handlers handlers) {
  std::shared_ptr<Channel> ch(new Channel(this, std::move(command), std::move(handlers)));
  if (!error_.empty()) {
    ch->complete(ExitInfo{-1, "", error_});
    return ch;
  }
  channels_.push_back(ch);
  return ch;
}

Session::Interest Session::interest() const {
  Interest want;
  if (session_ == nullptr || !error_.empty()) return want;
  want.again = again_;
  // Only read when some channel can use the data: an idle session would otherwise be reported
  // readable forever (e.g. on a server keepalive) with nobody consuming it.
  want.read = active_channels() > 0;
  const int dirs = libssh2_session_block_directions(session_);
  want.write = (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0;
  return want;
}

std::size_t Session::active_channels() const {
  return static_cast<std::size_t>(
      std::count_if(channels_.begin(), channels_.end(), [](const auto& c) { return !c->done(); }));
}

void Session::fail_all(const std::string& why) {
  if (error_.empty()) {
    error_ = why;
    logger()->warn("{}", why);
  }
  for (auto& ch : channels_) {
    if (!ch->done()) {
      ch->ch_ = nullptr;  // unusable; freed with the session
      ch->complete(ExitInfo{-1, "", why});
    }
  }
}

void Session::pump() {
  // Handlers may call pump() indirectly (e.g. through run()); the outer call finishes the work.
  if (pumping_ || session_ == nullptr) return;
  pumping_ = true;
  again_ = false;
  // A pass steps every channel once. Any libssh2 read drains the socket into per-channel queues,
  // so data for a channel stepped earlier in the pass may arrive during a later step. Hence the
  // loop ends only after a pass that made no progress AND received no bytes: then every queue
  // was seen in its final state and the next data will make the socket readable again. The
  // budgets keep one busy connection from starving the caller's event loop (interest().again):
  // at most kMaxPasses passes, kPumpBytes received, kPumpTime spent. A connection that never
  // runs dry (ranks printing as fast as they can) would otherwise hold the loop for seconds per
  // call — its handlers format and write every line — and delay the launcher's timers, the agent
  // watchdog among them (24 s for a 5 s agent timeout, docs/agent.md "Liveness").
  constexpr int kMaxPasses = 64;
  constexpr std::size_t kPumpBytes = 1 << 20;
  constexpr auto kPumpTime = std::chrono::milliseconds(50);
  const auto started = std::chrono::steady_clock::now();
  const std::size_t bytes_at_start = recv_bytes_;
  for (int pass = 0; error_.empty(); ++pass) {
    if (pass == kMaxPasses || recv_bytes_ - bytes_at_start >= kPumpBytes ||
        std::chrono::steady_clock::now() - started >= kPumpTime) {
      again_ = true;
      break;
    }
    const std::size_t bytes_before = recv_bytes_;
    bool progress = false;
    for (std::size_t i = 0; i < channels_.size() && error_.empty(); ++i) {
      std::shared_ptr<Channel> ch = channels_[i];  // handlers may exec() and grow channels_
      if (!ch->done()) progress |= ch->step();
    }
    if (!progress && recv_bytes_ == bytes_before) break;
  }
  std::erase_if(channels_, [](const auto& c) { return c->done(); });
  pumping_ = false;
}

Session::Started Session::run_command(const std::string& command, std::string_view stdin_data,
                                      bool close_stdin, std::string_view marker,
                                      Clock::time_point deadline) {
  auto result = std::make_shared<RunResult>();
  Channel::Handlers h;
  h.on_stdout = [result](std::string_view d) { result->out.append(d); };
  h.on_stderr = [result](std::string_view d) { result->err.append(d); };
  const auto t0 = Clock::now();
  Started started;
  started.channel = exec(command, std::move(h));
  const std::shared_ptr<Channel>& ch = started.channel;
  if (!stdin_data.empty()) ch->write(stdin_data);
  if (close_stdin) ch->close_stdin();
  while (true) {
    pump();
    if (!marker.empty()) {
      if (const std::size_t at = result->out.find(marker); at != std::string::npos) {
        started.reached = true;
        started.rest = result->out.substr(at + marker.size());
        result->out.resize(at);
        started.run = *result;
        ch->set_handlers({});
        return started;
      }
    }
    if (ch->done()) break;
    if (!wait(deadline)) {
      ch->close();
      pump();
      throw TimeoutError(
          target_.alias + ": `" + command + "` did not " + (marker.empty() ? "finish" : "start") +
          " within " + format_duration(elapsed_since(t0)) + " on " + target_.describe() +
          (result->err.empty() ? std::string() : "; its stderr so far: " + result->err));
    }
  }
  const ExitInfo& exit = *ch->exit();
  if (!exit.error.empty())
    throw ChannelError(target_.alias + ": running `" + command + "`: " + exit.error);
  result->exit_status = exit.exit_status;
  result->exit_signal = exit.exit_signal;
  started.run = std::move(*result);
  started.channel.reset();
  return started;
}

RunResult Session::run(const std::string& command, std::string_view stdin_data,
                       Clock::time_point deadline) {
  return run_command(command, stdin_data, true, {}, deadline).run;
}

Session::Started Session::start_until(const std::string& command, std::string_view marker,
                                      Clock::time_point deadline) {
  return run_command(command, {}, false, marker, deadline);
}

}  // namespace hora::ssh
