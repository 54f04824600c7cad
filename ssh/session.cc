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

// Errors that end the whole connection, as opposed to one channel.
bool is_session_fatal(int rc) {
  switch (rc) {
    case LIBSSH2_ERROR_CHANNEL_OUTOFORDER:
    case LIBSSH2_ERROR_CHANNEL_FAILURE:
    case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
    case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
    case LIBSSH2_ERROR_CHANNEL_CLOSED:
    case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
    case LIBSSH2_ERROR_CHANNEL_WINDOW_FULL:
    case LIBSSH2_ERROR_REQUEST_DENIED:
    case LIBSSH2_ERROR_EAGAIN:
      return false;
    default:
      return rc < 0;
  }
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

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Fingerprint of an OpenSSH .pub file ("type base64 comment"), or empty when unreadable.
std::string pub_file_fingerprint(const std::string& path) {
  std::istringstream fields(read_first_line(path));
  std::string type, b64;
  fields >> type >> b64;
  try {
    return HostKey::from_base64(type, b64).fingerprint();
  } catch (const Error&) {
    return {};
  }
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// Whether a private key file is protected by a passphrase, judged from its text: OpenSSH's own
// format ("-----BEGIN OPENSSH PRIVATE KEY-----") names its cipher right after the magic
// "openssh-key-v1\0" in the base64 body ("none" when unencrypted); PEM keys carry a
// "Proc-Type: 4,ENCRYPTED" header; encrypted PKCS#8 keys begin "-----BEGIN ENCRYPTED PRIVATE
// KEY-----". hora has no terminal to ask for a passphrase and libssh2 cannot use such a key
// without one, so it is not offered to the server at all (which would also spend one of sshd's
// MaxAuthTries). False when the file is unreadable or not recognised: libssh2 then says what it
// makes of it.
bool key_file_is_encrypted(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::string body;  // the start of an OpenSSH key's base64, enough for the cipher name
  bool openssh = false;
  for (int n = 0; n < 64 && std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("-----BEGIN ENCRYPTED PRIVATE KEY-----", 0) == 0) return true;
    if (line.rfind("Proc-Type:", 0) == 0) return line.find("ENCRYPTED") != std::string::npos;
    if (line == "-----BEGIN OPENSSH PRIVATE KEY-----") {
      openssh = true;
    } else if (openssh) {
      if (line.rfind("-----END", 0) == 0 || body.size() >= 256) break;
      body += line;
    }
  }
  if (!openssh) return false;
  std::string raw;
  try {
    raw = base64_decode(body.substr(0, std::min<std::size_t>(body.size(), 256) / 4 * 4));
  } catch (const Error&) {
    return false;  // not base64 after all: let libssh2 report the file
  }
  static constexpr std::string_view kMagic("openssh-key-v1\0", 15);
  if (raw.size() < kMagic.size() + 4 || raw.compare(0, kMagic.size(), kMagic) != 0) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + kMagic.size();
  const std::size_t len = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
  if (raw.size() < kMagic.size() + 4 + len) return false;
  return raw.compare(kMagic.size() + 4, len, "none") != 0;
}

// Appended to a name resolution failure when the host is no ssh_config alias: a misspelt alias
// ("h9" for "h1") matches no Host line, so it is looked up as a host name and fails there, which
// alone reads like a DNS problem. Empty for an alias, or a Target that resolve() did not make.
std::string not_an_alias_note(const Target& t) {
  if (!t.from_config || !t.host_entry.empty()) return {};
  if (t.config_files.empty()) return "; no ssh_config file was read, so " + t.alias + " is no Host alias";
  std::string files;
  for (const std::string& f : t.config_files) files += (files.empty() ? "" : ", ") + f;
  return "; " + t.alias + " matches no Host entry in " + files + ", so it was looked up as a host name (a misspelt alias?)";
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

std::string ExitInfo::describe() const {
  if (!error.empty()) return error;
  if (!exit_signal.empty()) return "killed by signal " + exit_signal;
  return "exit status " + std::to_string(exit_status);
}

// ------------------------------------------------------------------------------------- Channel

Channel::Channel(Session* session, std::string command, Handlers handlers)
    : session_(session), command_(std::move(command)), handlers_(std::move(handlers)) {}

Channel::~Channel() = default;  // ch_ is freed by the session (step() or ~Session)

void Channel::write(std::string_view data) {
  if (done() || eof_requested_ || close_requested_) return;  // documented: dropped
  if (stdin_sent_ > 0 && stdin_sent_ == stdin_.size()) {
    stdin_.clear();
    stdin_sent_ = 0;
  }
  stdin_.append(data);
}

void Channel::close_stdin() {
  if (!done()) eof_requested_ = true;
}

void Channel::close() {
  if (!done()) close_requested_ = true;
}

void Channel::complete(ExitInfo info, bool notify) {
  if (done()) return;
  state_ = State::kDone;
  exit_ = std::move(info);
  stdin_.clear();
  stdin_sent_ = 0;
  if (notify && handlers_.on_exit) handlers_.on_exit(*exit_);
}

void Channel::fail(const std::string& why) {
  if (ch_ != nullptr && session_ != nullptr) {
    // The channel is unusable; free it without waiting for the server (best effort: a channel
    // that would block on close is freed with the session instead).
    if (libssh2_channel_free(ch_) == 0) ch_ = nullptr;
  }
  ExitInfo info;
  info.error = why;
  complete(std::move(info));
}

bool Channel::drain(int stream) {
  // Bounded per call so one chatty rank cannot starve the others within a pump() pass.
  constexpr std::size_t kMaxPerStep = 256 * 1024;
  char buf[32768];
  std::size_t total = 0;
  while (total < kMaxPerStep && state_ == State::kRunning) {
    const ssize_t n = libssh2_channel_read_ex(ch_, stream, buf, sizeof buf);
    if (n > 0) {
      total += static_cast<std::size_t>(n);
      const auto& h = stream == 0 ? handlers_.on_stdout : handlers_.on_stderr;
      if (h) h(std::string_view(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n == 0 || n == LIBSSH2_ERROR_EAGAIN) break;
    if (is_session_fatal(static_cast<int>(n))) {
      session_->fail_all("connection to " + session_->target_.describe() + " lost: " +
                         session_->last_error());
    } else {
      fail("reading the output of `" + command_ + "` on " + session_->target_.describe() +
           " failed: " + session_->last_error());
    }
    return true;
  }
  return total > 0;
}

bool Channel::step() {
  LIBSSH2_SESSION* s = session_->session_;
  const std::string& where = session_->target_.describe();
  switch (state_) {
    case State::kQueued:
    case State::kOpening: {
      if (close_requested_) {
        if (session_->opening_ == this) return false;  // libssh2 must finish this open first
        complete(ExitInfo{-1, "", "closed by us before the command started"});
        return true;
      }
      if (session_->opening_ != nullptr && session_->opening_ != this) return false;
      ch_ = libssh2_channel_open_session(s);
      if (ch_ == nullptr) {
        const int rc = libssh2_session_last_errno(s);
        if (rc == LIBSSH2_ERROR_EAGAIN) {
          session_->opening_ = this;
          state_ = State::kOpening;
          return false;
        }
        session_->opening_ = nullptr;
        if (is_session_fatal(rc)) {
          session_->fail_all("connection to " + where + " lost: " + session_->last_error());
          return true;
        }
        fail("could not open an SSH channel on " + where + " for `" + command_ + "`: " +
             session_->last_error() +
             " (a common cause: sshd's MaxSessions, default 10, limits the channels of one connection)");
        return true;
      }
      session_->opening_ = nullptr;
      state_ = State::kStarting;
      return true;
    }
    case State::kStarting: {
      const int rc = libssh2_channel_exec(ch_, command_.c_str());
      if (rc == LIBSSH2_ERROR_EAGAIN) return false;
      if (rc < 0) {
        if (is_session_fatal(rc)) {
          session_->fail_all("connection to " + where + " lost: " + session_->last_error());
        } else {
          fail("the server " + where + " refused to run `" + command_ + "`: " + session_->last_error());
        }
        return true;
      }
      state_ = State::kRunning;
      return true;
    }
    case State::kRunning: {
      if (close_requested_) {
        state_ = State::kClosing;
        return true;
      }
      bool progress = false;
      while (stdin_sent_ < stdin_.size()) {
        const std::size_t want = std::min<std::size_t>(stdin_.size() - stdin_sent_, 32768);
        const ssize_t n = libssh2_channel_write(ch_, stdin_.data() + stdin_sent_, want);
        if (n == LIBSSH2_ERROR_EAGAIN) break;
        if (n < 0) {
          if (is_session_fatal(static_cast<int>(n))) {
            session_->fail_all("connection to " + where + " lost: " + session_->last_error());
            return true;
          }
          // The remote side no longer takes input (it closed the channel): drop what is left.
          stdin_.clear();
          stdin_sent_ = 0;
          eof_sent_ = true;
          break;
        }
        stdin_sent_ += static_cast<std::size_t>(n);
        progress = true;
      }
      if (eof_requested_ && !eof_sent_ && stdin_sent_ == stdin_.size()) {
        const int rc = libssh2_channel_send_eof(ch_);
        if (rc == 0) {
          eof_sent_ = true;
          progress = true;
        } else if (rc != LIBSSH2_ERROR_EAGAIN) {
          if (is_session_fatal(rc)) {
            session_->fail_all("connection to " + where + " lost: " + session_->last_error());
            return true;
          }
          eof_sent_ = true;  // the channel is closing anyway; nothing more to send
        }
      }
      progress |= drain(0);
      if (state_ != State::kRunning) return true;
      progress |= drain(1);
      if (state_ != State::kRunning) return true;
      // libssh2_channel_eof() stays 0 while output is still queued, so this sees EOF only after
      // both streams were delivered.
      if (libssh2_channel_eof(ch_) == 1) {
        remote_eof_ = true;
        state_ = State::kClosing;
        progress = true;
      }
      return progress;
    }
    case State::kClosing: {
      if (!close_sent_) {
        if (remote_eof_ && !close_requested_) {
          // The exit-status/exit-signal request may come after the EOF; the server's CLOSE comes
          // after both. Wait for it (without blocking) before reading them.
          const int rc = libssh2_channel_wait_closed(ch_);
          if (rc == LIBSSH2_ERROR_EAGAIN) return false;
          if (rc < 0 && is_session_fatal(rc)) {
            session_->fail_all("connection to " + where + " lost: " + session_->last_error());
            return true;
          }
        }
        const int rc = libssh2_channel_close(ch_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return false;
        close_sent_ = true;
      }
      ExitInfo info;
      if (!remote_eof_) {
        info.error = "closed by us before `" + command_ + "` finished on " + where;
      } else {
        char* sig = nullptr;
        std::size_t sig_len = 0;
        if (libssh2_channel_get_exit_signal(ch_, &sig, &sig_len, nullptr, nullptr, nullptr, nullptr) == 0 &&
            sig != nullptr) {
          info.exit_signal.assign(sig, sig_len);
          libssh2_free(s, sig);
        }
        info.exit_status = info.exit_signal.empty() ? libssh2_channel_get_exit_status(ch_) : -1;
      }
      const int rc = libssh2_channel_free(ch_);
      if (rc == LIBSSH2_ERROR_EAGAIN) return false;  // cannot happen after close; retried if so
      ch_ = nullptr;
      complete(std::move(info));
      return true;
    }
    case State::kDone:
      return false;
  }
  return false;
}

// ------------------------------------------------------------------------------------- Session

Session::Session(Target target, ConnectOptions options)
    : target_(std::move(target)), options_(std::move(options)), started_(Clock::now()) {}

Session::~Session() {
  for (auto& ch : channels_) {
    // No handlers from a destructor: they may reach into objects being torn down with us.
    if (!ch->done()) {
      ch->complete(ExitInfo{-1, "", "the SSH session to " + target_.describe() + " was closed"}, false);
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
  return msg != nullptr && len > 0 ? std::string(msg, static_cast<std::size_t>(len)) : "unknown libssh2 error";
}

bool Session::wait(Clock::time_point deadline) const {
  const Interest want = interest();
  pollfd p{};
  p.fd = fd_;
  p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
  if (want.again) return true;
  if (p.events == 0) p.events = POLLIN;  // idle session: wake on anything (e.g. a disconnect)
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 60'000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the next libssh2 call report the error
  }
}

std::string Session::timeout_knob(bool by_connect_timeout) const {
  // horarun has no flag for the connect timeout; ssh_config's ConnectTimeout is the knob (config.h).
  if (by_connect_timeout) return "ConnectTimeout in ssh_config (now " + format_duration(target_.connect_timeout) + ")";
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
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        throw TimeoutError(target_.alias + ": timed out after " + format_duration(elapsed_since(started_)) +
                           " during " + step + " with " + remote_endpoint_ +
                           "; the host or its sshd is too slow or stuck (raise " + timeout_knob(by_connect_timeout) +
                           " if it is only slow)");
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
    const std::string prefix =
        target_.alias != target_.hostname ? target_.alias + " (HostName " + target_.hostname + "): " : "";
    throw ResolveError(prefix + e.what() + not_an_alias_note(target_));
  }
  if (addrs.empty()) {
    throw ResolveError(target_.hostname + ": name does not resolve (no addresses)" + not_an_alias_note(target_));
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
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(connect_deadline - Clock::now());
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
      failures.push_back("timed out after " + format_duration(elapsed_since(t0)) + " connecting to " + ep +
                         "; is the host up and reachable from here, or is a firewall dropping port " +
                         std::to_string(target_.port) + "? (raise " +
                         timeout_knob(connect_deadline < deadline) + " if it is only slow to answer)");
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
  if (session_ == nullptr) throw Error(target_.alias + ": libssh2_session_init failed (out of memory?)");
  libssh2_session_callback_set(session_, LIBSSH2_CALLBACK_RECV, reinterpret_cast<void*>(&counting_recv));
  libssh2_session_set_blocking(session_, 0);

  known_hosts_.emplace(target_.known_hosts_files);
  // Ask for the host key types we can verify first, as OpenSSH does; otherwise a host known by
  // its ed25519 key could present an ECDSA key and look "new".
  const std::vector<std::string> known = known_hosts_->known_types(known_hosts_name(target_.hostname, target_.port));
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
  const int rc = await([&] { return libssh2_session_handshake(session_, fd_); }, hs_deadline, "the SSH handshake",
                       hs_deadline < deadline);
  if (rc != 0) {
    throw ConnectError(target_.alias + ": connected to " + remote_endpoint_ + " but the SSH handshake failed: " +
                       last_error() + " — is an SSH server listening on port " + std::to_string(target_.port) +
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
    case KnownHosts::Status::kKnown:
      return;
    case KnownHosts::Status::kRevoked:
      throw HostKeyError(target_.alias + ": the host key of " + name + " (" + offered + ") is marked @revoked in " +
                         found.entry.file + ":" + std::to_string(found.entry.line) + "; refusing to connect");
    case KnownHosts::Status::kChanged: {
      const std::string where = found.entry.file + ":" + std::to_string(found.entry.line);
      if (target_.host_key_policy == HostKeyPolicy::kNo) {
        logger()->warn("{}: the host key of {} CHANGED (now {}; {} has {}); connecting anyway because "
                       "StrictHostKeyChecking is no",
                       target_.alias, name, offered, where, found.entry.key.fingerprint());
        return;
      }
      throw HostKeyError(target_.alias + ": the host key of " + name + " has CHANGED: the server offers " + offered +
                         ", but " + where + " holds a different " + found.entry.key.type + " key (" +
                         found.entry.key.fingerprint() +
                         "). Someone may be intercepting the connection, or the host was reinstalled. If the "
                         "change is expected, remove the old key with: ssh-keygen -R '" + name + "' -f " +
                         found.entry.file + " (or delete line " + std::to_string(found.entry.line) + "), then retry");
    }
    case KnownHosts::Status::kNew:
      break;
  }
  if (target_.host_key_policy == HostKeyPolicy::kYes) {
    const std::string file = target_.known_hosts_files.empty() ? std::string("~/.ssh/known_hosts")
                                                               : target_.known_hosts_files.front();
    throw HostKeyError(target_.alias + ": the host key of " + name + " is not known (" + offered +
                       ") and StrictHostKeyChecking is yes; check the fingerprint and add it with: ssh-keyscan -p " +
                       std::to_string(target_.port) + " " + target_.hostname + " >> " + file +
                       ", or use --ssh-strict-host-key-checking accept-new");
  }
  if (target_.known_hosts_files.empty()) {
    logger()->warn("{}: new host key {} for {} not recorded (UserKnownHostsFile none)", target_.alias, offered, name);
    return;
  }
  known_hosts_->add(target_.known_hosts_files.front(), name, host_key_);
  logger()->info("{}: recorded the new host key of {} ({}) in {}", target_.alias, name, offered,
                 target_.known_hosts_files.front());
}

void Session::authenticate(Clock::time_point deadline) {
  const std::string& user = target_.user;
  const unsigned user_len = static_cast<unsigned>(user.size());
  char* list = nullptr;
  int rc = await(
      [&] {
        list = libssh2_userauth_list(session_, user.c_str(), user_len);
        return list != nullptr ? 0 : libssh2_session_last_errno(session_);
      },
      deadline, "authentication");
  if (libssh2_userauth_authenticated(session_)) {
    auth_method_ = "none (the server asked for no authentication)";
    return;
  }
  const std::string who = user + "@" + target_.describe();
  if (list == nullptr) {
    throw AuthError(who + ": cannot ask the server for its authentication methods: " + last_error());
  }
  const std::string methods = list;
  if (methods.find("publickey") == std::string::npos) {
    throw AuthError(who + ": the server accepts only " + methods +
                    "; hora logs in without passwords (public keys from ssh-agent or key files). Set up key "
                    "authentication for " + user + " on " + target_.alias);
  }

  std::vector<std::string> tried;
  std::size_t agent_notes = 0;  // entries of `tried` about the agent itself, not a refused key
  bool connection_gone = false;
  auto gone = [&](int code) {
    if (is_session_fatal(code) && code != LIBSSH2_ERROR_AUTHENTICATION_FAILED &&
        code != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED && code != LIBSSH2_ERROR_FILE) {
      connection_gone = true;
    }
    return connection_gone;
  };

  // Fingerprints of the identity files' .pub halves, for IdentitiesOnly.
  std::vector<std::string> allowed_fps;
  if (target_.identities_only) {
    for (const std::string& f : target_.identity_files) {
      if (auto fp = pub_file_fingerprint(f + ".pub"); !fp.empty()) allowed_fps.push_back(fp);
    }
  }

  if (!options_.agent_socket.empty()) {
    LIBSSH2_AGENT* agent = libssh2_agent_init(session_);
    struct AgentCloser {
      LIBSSH2_AGENT* a;
      ~AgentCloser() {
        if (a != nullptr) {
          libssh2_agent_disconnect(a);
          libssh2_agent_free(a);
        }
      }
    } closer{agent};
    const std::string where = "ssh-agent at " + options_.agent_socket;
    if (agent == nullptr) {
      tried.push_back(where + ": cannot initialise");
      ++agent_notes;
    } else {
      libssh2_agent_set_identity_path(agent, options_.agent_socket.c_str());
      if (libssh2_agent_connect(agent) != 0) {
        tried.push_back(where + ": cannot connect (" + last_error() + "; is SSH_AUTH_SOCK stale?)");
        ++agent_notes;
      } else if (libssh2_agent_list_identities(agent) != 0) {
        tried.push_back(where + ": cannot list its keys (" + last_error() + ")");
        ++agent_notes;
      } else {
        libssh2_agent_publickey* id = nullptr;
        libssh2_agent_publickey* prev = nullptr;
        int offered = 0;
        while (!connection_gone && libssh2_agent_get_identity(agent, &id, prev) == 0) {
          prev = id;
          std::string desc;
          try {
            const HostKey key = HostKey::from_blob(std::string(reinterpret_cast<char*>(id->blob), id->blob_len));
            if (target_.identities_only &&
                std::find(allowed_fps.begin(), allowed_fps.end(), key.fingerprint()) == allowed_fps.end()) {
              continue;  // IdentitiesOnly: only agent keys that belong to a configured key file
            }
            desc = key.type + " " + key.fingerprint();
          } catch (const Error&) {
            desc = "unparsable key";
          }
          if (id->comment != nullptr && *id->comment != '\0') desc += " (" + std::string(id->comment) + ")";
          ++offered;
          rc = await([&] { return libssh2_agent_userauth(agent, user.c_str(), id); }, deadline,
                     "authentication with ssh-agent");
          if (rc == 0) {
            auth_method_ = "ssh-agent key " + desc;
            return;
          }
          tried.push_back("ssh-agent key " + desc + ": refused");
          gone(rc);
        }
        if (offered == 0) {
          tried.push_back(where + ": no usable keys" +
                          std::string(target_.identities_only ? " matching IdentityFile (IdentitiesOnly yes)"
                                                              : " (add one with ssh-add)"));
          ++agent_notes;
        }
      }
    }
  }

  bool any_file = false;
  // Key files libssh2 cannot use as they are: passphrase-protected (`locked`, seen from the file
  // itself, never offered) or failing to load. The fix for these is ssh-agent, not authorized_keys.
  std::vector<std::string> locked;
  std::vector<std::string> unloadable;
  for (const std::string& file : target_.identity_files) {
    if (connection_gone) break;
    if (!file_exists(file)) {
      if (!target_.identity_files_are_defaults) tried.push_back("key file " + file + ": not found");
      continue;
    }
    any_file = true;
    if (key_file_is_encrypted(file)) {
      locked.push_back(file);
      tried.push_back("key file " + file + ": protected by a passphrase, which hora cannot ask for (no terminal)");
      continue;
    }
    const std::string pub = file + ".pub";
    const bool have_pub = file_exists(pub);
    rc = await(
        [&] {
          return libssh2_userauth_publickey_fromfile_ex(session_, user.c_str(), user_len,
                                                        have_pub ? pub.c_str() : nullptr, file.c_str(), "");
        },
        deadline, "authentication with key files");
    if (rc == 0) {
      auth_method_ = "key file " + file;
      return;
    }
    const std::string err = last_error();
    // With a .pub file, libssh2 offers the public key first and reads the private key only to
    // sign once the server accepted it; a private key it cannot read then fails in its signing
    // callback ("Callback returned error") with the code the server's refusals also use.
    const bool sign_failed =
        rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED && err.find("Callback returned error") != std::string::npos;
    if (rc == LIBSSH2_ERROR_FILE || rc == LIBSSH2_ERROR_KEYFILE_AUTH_FAILED || sign_failed) {
      unloadable.push_back(file);
      tried.push_back("key file " + file + ": " +
                      (sign_failed ? "the server accepts its public key " + pub +
                                         ", but libssh2 cannot load the private key (unknown format, or a passphrase)"
                                   : "libssh2 cannot load it (" + err + ")"));
    } else {
      std::string why = "key file " + file + ": refused by the server";
      // libssh2 before 1.11 signs RSA user keys with ssh-rsa (SHA-1) only, which OpenSSH 8.8+
      // refuses unless PubkeyAcceptedAlgorithms allows it; say so rather than leave a mystery.
      if (have_pub && LIBSSH2_VERSION_NUM < 0x010b00 && read_first_line(pub).rfind("ssh-rsa ", 0) == 0) {
        why += " (an RSA key: this libssh2 " LIBSSH2_VERSION
               " can only sign with ssh-rsa/SHA-1, which OpenSSH 8.8+ refuses by default; use an ed25519 or "
               "ECDSA key, or allow PubkeyAcceptedAlgorithms +ssh-rsa on the server)";
      }
      tried.push_back(why);
    }
    gone(rc);
  }

  std::string msg = "authentication failed for " + who + ". Tried: ";
  if (!any_file && target_.identity_files_are_defaults) {
    tried.push_back("no key files (none of the defaults exist: " + target_.identity_files[0] + ", id_ecdsa, id_rsa)");
  }
  // Whether anything failed for a reason authorized_keys (or another key) would fix.
  const bool other_failures = tried.size() > locked.size() + unloadable.size() + agent_notes;
  if (options_.agent_socket.empty()) tried.insert(tried.begin(), "no ssh-agent (SSH_AUTH_SOCK is not set)");
  for (std::size_t i = 0; i < tried.size(); ++i) msg += (i ? "; " : "") + tried[i];
  msg += ". The server accepts: " + methods + ".";
  if (connection_gone) {
    msg += " The server closed the connection after these attempts (sshd's MaxAuthTries?): " + last_error() + ".";
  }
  auto join = [](const std::vector<std::string>& files) {
    std::string out;
    for (const std::string& f : files) out += (out.empty() ? "" : " ") + f;
    return out;
  };
  std::vector<std::string> fixes;
  if (!locked.empty()) {
    fixes.push_back("load the passphrase-protected key" + std::string(locked.size() > 1 ? "s" : "") +
                    " into ssh-agent (ssh-add " + join(locked) +
                    ") and run horarun with that agent's SSH_AUTH_SOCK, or use a key without a passphrase");
  }
  if (!unloadable.empty()) {
    fixes.push_back("check that ssh-keygen -y -f " + unloadable.front() +
                    " reads the key; if it asks for a passphrase, load the key into ssh-agent (ssh-add " +
                    join(unloadable) + ") or use a key without a passphrase");
  }
  if (other_failures || fixes.empty()) {
    fixes.push_back("authorise one of these public keys in ~" + user + "/.ssh/authorized_keys on " + target_.alias +
                    " (ssh-copy-id), or name the right key with -i/--ssh-identity-file or IdentityFile in "
                    "ssh_config, or load it into ssh-agent");
  }
  msg += " Fix: ";
  for (std::size_t i = 0; i < fixes.size(); ++i) msg += (i ? "; or " : "") + fixes[i];
  msg += ".";
  throw AuthError(msg);
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
  // was seen in its final state and the next data will make the socket readable again. The pass
  // limit keeps one busy connection from starving the caller's event loop (interest().again).
  constexpr int kMaxPasses = 64;
  int pass = 0;
  for (; pass < kMaxPasses && error_.empty(); ++pass) {
    const std::size_t bytes_before = recv_bytes_;
    bool progress = false;
    for (std::size_t i = 0; i < channels_.size() && error_.empty(); ++i) {
      std::shared_ptr<Channel> ch = channels_[i];  // handlers may exec() and grow channels_
      if (!ch->done()) progress |= ch->step();
    }
    if (!progress && recv_bytes_ == bytes_before) break;
  }
  if (pass == kMaxPasses) again_ = true;
  std::erase_if(channels_, [](const auto& c) { return c->done(); });
  pumping_ = false;
}

RunResult Session::run(const std::string& command, std::string_view stdin_data, Clock::time_point deadline) {
  auto result = std::make_shared<RunResult>();
  Channel::Handlers h;
  h.on_stdout = [result](std::string_view d) { result->out.append(d); };
  h.on_stderr = [result](std::string_view d) { result->err.append(d); };
  const auto t0 = Clock::now();
  std::shared_ptr<Channel> ch = exec(command, std::move(h));
  if (!stdin_data.empty()) ch->write(stdin_data);
  ch->close_stdin();
  while (true) {
    pump();
    if (ch->done()) break;
    if (!wait(deadline)) {
      ch->close();
      pump();
      throw TimeoutError(target_.alias + ": `" + command + "` did not finish within " +
                         format_duration(elapsed_since(t0)) + " on " + target_.describe() +
                         (result->err.empty() ? std::string() : "; its stderr so far: " + result->err));
    }
  }
  const ExitInfo& exit = *ch->exit();
  if (!exit.error.empty()) throw ChannelError(target_.alias + ": running `" + command + "`: " + exit.error);
  result->exit_status = exit.exit_status;
  result->exit_signal = exit.exit_signal;
  return std::move(*result);
}

}  // namespace hora::ssh
