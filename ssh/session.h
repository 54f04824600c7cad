// One SSH connection to one host (libssh2), and the exec channels that run commands on it.
//
// Life of a Session:
//   1. Session::connect() — blocking, bounded by a deadline: resolve the name, TCP connect (also
//      bounded by Target::connect_timeout), SSH handshake, host key check against known_hosts
//      with the Target's policy, authentication without a password (ssh-agent first when
//      ConnectOptions::agent_socket is set, then the identity files). Each failure throws the
//      ssh::Error subclass for its step with a message that names the host and says what to do.
//   2. exec() — opens an exec channel per command (several per session: one per rank on the
//      host). Channels make progress only inside pump().
//   3. The owner's event loop waits on fd() for interest() and calls pump() when the socket is
//      ready (and after calling exec/write/close_stdin/close, so queued work starts). pump() never
//      blocks: it moves every channel as far as it can and returns.
//   4. run() is a blocking convenience built on the same machinery (preflight probes).
//
// Threading: a Session and its Channels are not thread-safe. Use each session from one thread at
// a time (different sessions may be used concurrently from different threads — preflight does).
// A session may be handed to another thread between calls (e.g. created by a preflight worker,
// then driven by the launcher's Asio thread). Channel handlers run inside pump()/run(), on the
// calling thread; they may call write()/close_stdin()/close() on any channel and exec() on the
// session, but must not destroy the Session.
//
// Driving a session from Boost.Asio (the launcher), one driver per session; this is what
// test/ssh/session_test.cc ("driven from a Boost.Asio loop") runs:
//
//     // sd_ wraps session_->fd() without owning it: call sd_.release() before the session dies.
//     void Driver::kick() {  // call after exec()/write()/close_stdin()/close(); waits call it too
//       session_->pump();
//       const Session::Interest want = session_->interest();
//       if (want.again) asio::post(io_, [this] { kick(); });
//       if (want.read && !read_armed_) {
//         read_armed_ = true;
//         sd_.async_wait(sd_.wait_read, [this](auto ec) { read_armed_ = false; if (!ec) kick(); });
//       }
//       if (want.write && !write_armed_) {
//         write_armed_ = true;
//         sd_.async_wait(sd_.wait_write, [this](auto ec) { write_armed_ = false; if (!ec) kick();
//         });
//       }
//     }
//
// pump() is cheap when there is nothing to do, so kicking more often than needed is harmless;
// kicking too rarely is not (data queued with write() waits for the next pump()).
//
// Ownership: the Session owns the socket and the libssh2 session; exec() returns a shared_ptr to
// a Channel that the session also keeps until the channel is finished. Destroying the Session
// closes every channel (the remote commands see their stdin close) and the connection; Channel
// objects that outlive it report done() with an error.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ssh/channel.h"
#include "ssh/config.h"
#include "ssh/known_hosts.h"

// libssh2 types, so users of this header need not include libssh2.h.
struct _LIBSSH2_SESSION;

namespace hora::ssh {

using Clock = std::chrono::steady_clock;

// Name resolution seam: returns the addresses of `host` (numeric or a name) for `port`, or throws
// ResolveError. The default uses getaddrinfo(); tests substitute names they control.
struct ResolvedAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};
using Resolver = std::function<std::vector<ResolvedAddress>(const std::string& host, int port)>;
std::vector<ResolvedAddress> resolve_with_getaddrinfo(const std::string& host, int port);

struct ConnectOptions {
  // ssh-agent socket; empty = do not use an agent. from_environment() takes $SSH_AUTH_SOCK.
  std::string agent_socket;
  Resolver resolver = resolve_with_getaddrinfo;

  static ConnectOptions from_environment();
};

struct RunResult {
  int exit_status = -1;
  std::string exit_signal;
  std::string out;  // stdout
  std::string err;  // stderr
};

class Session {
 public:
  // Not movable: libssh2 keeps a pointer to recv_bytes_, and channels point at their session.
  // Connects, verifies the host key and authenticates; see the file comment. Throws
  // ResolveError, ConnectError, TimeoutError, HostKeyError or AuthError.
  static std::unique_ptr<Session> connect(const Target& target, const ConnectOptions& options,
                                          Clock::time_point deadline);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Target& target() const { return target_; }
  // The connection's socket, for the event loop. Owned by the session: do not close it.
  int fd() const { return fd_; }
  // The address of this machine that the host sees us connect from (getsockname), numeric, no
  // port: the address to give ranks on that host for reaching the launcher.
  const std::string& local_address() const { return local_address_; }
  // "198.18.0.11:12345": the address actually connected to.
  const std::string& remote_endpoint() const { return remote_endpoint_; }
  const HostKey& host_key() const { return host_key_; }
  // How we authenticated, for --verbose: "ssh-agent key SHA256:... (comment)", "key file /x/id".
  const std::string& auth_method() const { return auth_method_; }

  // Starts `command` (run by the remote user's shell) on a new channel. Handlers run inside
  // pump()/run(). Never blocks; call pump() afterwards.
  std::shared_ptr<Channel> exec(std::string command, Channel::Handlers handlers = {});

  struct Interest {
    bool read = false;
    bool write = false;
    bool again = false;  // pump() stopped early on a busy connection: call it again without waiting
  };
  // What to wait for on fd() before calling pump() again: read while any channel is unfinished
  // (the server may send at any time; an idle session needs no watching), write when libssh2 has
  // output it could not send yet.
  Interest interest() const;

  // Moves every channel as far as possible without blocking, calling handlers. When the
  // connection fails, every unfinished channel completes with an error and error() is set.
  void pump();

  // Non-empty once the connection failed ("connection to h1 (198.18.0.11:12345) lost: ...").
  const std::string& error() const { return error_; }
  // Channels not yet done.
  std::size_t active_channels() const;

  // Blocking: runs `command`, writes `stdin_data` then EOF, collects stdout/stderr until the
  // command ends. Throws TimeoutError when `deadline` passes first (the channel is closed), and
  // ChannelError when the channel fails. Other channels of this session keep progressing.
  RunResult run(const std::string& command, std::string_view stdin_data,
                Clock::time_point deadline);

  // Like run(), but for a command that keeps running: stdin stays open, and the call returns as
  // soon as the command's stdout holds `marker`. Then `reached` is set, `run.out` holds stdout
  // before the marker, `rest` what followed it, and the command goes on on `channel` (give it
  // its owner's handlers with Channel::set_handlers() before the next pump()). When the command
  // ends first, `reached` is false and `run` says how it ended. Throws like run().
  struct Started {
    RunResult run;
    bool reached = false;
    std::shared_ptr<Channel> channel;
    std::string rest;
  };
  Started start_until(const std::string& command, std::string_view marker,
                      Clock::time_point deadline);

  // Blocks until fd() is ready for interest() or `deadline` passes; returns false on timeout.
  // For blocking helpers and tests; an event loop uses its own wait instead.
  bool wait(Clock::time_point deadline) const;
  // run() and start_until(): an empty marker waits for the command's end.
  Started run_command(const std::string& command, std::string_view stdin_data, bool close_stdin,
                      std::string_view marker, Clock::time_point deadline);

 private:
  friend class Channel;
  Session(Target target, ConnectOptions options);

  void open_socket(Clock::time_point deadline);
  void handshake(Clock::time_point deadline);
  void verify_host_key();
  // Public-key login in steps (ssh/authenticate.cc): the agent's keys, then each identity file.
  void authenticate(Clock::time_point deadline);
  struct AuthAttempts;
  bool authenticate_with_agent(AuthAttempts& a, Clock::time_point deadline);
  bool authenticate_with_key_file(AuthAttempts& a, const std::string& file,
                                  Clock::time_point deadline);
  [[noreturn]] void throw_auth_failure(AuthAttempts& a) const;
  // Runs a libssh2 call until it stops returning LIBSSH2_ERROR_EAGAIN, waiting on the socket in
  // between; throws TimeoutError naming `step` when `deadline` passes. `by_connect_timeout`: the
  // deadline is Target::connect_timeout's rather than the caller's, so the message says to raise
  // ConnectTimeout in ssh_config instead of horarun's --start-timeout.
  int await(const std::function<int()>& call, Clock::time_point deadline, const char* step,
            bool by_connect_timeout = false);
  // "ConnectTimeout in ssh_config (now 10 s)" or "--start-timeout": what bounded a wait.
  std::string timeout_knob(bool by_connect_timeout) const;
  std::string last_error() const;
  void fail_all(const std::string& why);

  // Bytes received from the socket so far, counted by libssh2's recv callback (see pump()).
  std::size_t recv_bytes_ = 0;
  std::optional<KnownHosts> known_hosts_;
  bool again_ = false;

  Target target_;
  ConnectOptions options_;
  Clock::time_point started_;
  int fd_ = -1;
  _LIBSSH2_SESSION* session_ = nullptr;
  std::string local_address_;
  std::string remote_endpoint_;
  HostKey host_key_;
  std::string auth_method_;
  std::string error_;
  std::vector<std::shared_ptr<Channel>> channels_;
  Channel* opening_ = nullptr;  // libssh2 opens one channel at a time per session
  // ... and one exec request at a time: libssh2 1.10's wait for a request's reply
  // (_libssh2_packet_requirev) fails with "Failed waiting for channel success" when the packet it
  // reads is another channel's CHANNEL_SUCCESS, so two channels awaiting their exec replies at
  // once could kill the whole session (seen under ASan on a loaded machine: every channel of
  // ssh_session_test's many-channel cases ended with that error).
  Channel* starting_ = nullptr;
  bool pumping_ = false;
};

}  // namespace hora::ssh
