// One remote command on an SSH session: an exec channel and how it ended. Channels are created by
// Session::exec() (ssh/session.h) and make progress only inside Session::pump().
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

// libssh2's channel type, so users of this header need not include libssh2.h.
struct _LIBSSH2_CHANNEL;

namespace hora::ssh {

// How a command on a channel ended.
struct ExitInfo {
  // The command's exit status; -1 when it was killed by a signal or no status was received.
  int exit_status = -1;
  // Signal name without "SIG" ("TERM", "KILL") when the command was killed by one, else empty.
  std::string exit_signal;
  // Non-empty when the channel failed rather than the command finishing: the channel could not
  // be opened, the exec request was refused, the connection was lost, or we closed it first.
  std::string error;

  bool ok() const { return error.empty() && exit_signal.empty() && exit_status == 0; }
  // "exit status 3", "killed by signal TERM", or the error.
  std::string describe() const;
};

class Session;

// One remote command (an SSH "exec" channel). Created by Session::exec(); all I/O happens inside
// Session::pump(). stdout and stderr are delivered separately, in arrival order per stream.
class Channel {
 public:
  struct Handlers {
    std::function<void(std::string_view)> on_stdout;  // may be empty: data is dropped
    std::function<void(std::string_view)> on_stderr;
    // Called exactly once, when done, from pump()/run() — except when the Session is destroyed
    // first: then the channel becomes done() with an error and no handler runs.
    std::function<void(const ExitInfo&)> on_exit;
  };
  enum class State { kQueued, kOpening, kStarting, kRunning, kClosing, kDone };

  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Queues bytes for the command's stdin (sent by pump(), respecting the SSH window). Data
  // written after close_stdin()/close(), or after the command ended, is dropped.
  void write(std::string_view data);
  // Sends EOF on stdin once everything queued is written.
  void close_stdin();
  // Closes the channel now, whatever is still queued. The remote sshd then closes the command's
  // stdin/stdout/stderr (a hora guard takes that as the order to stop its rank). on_exit runs
  // with error "closed by us" unless the command had already finished.
  void close();

  // Replaces the handlers (e.g. when a command started by Session::start_until() is handed to
  // its long-term owner). Not from inside one of this channel's own handlers.
  void set_handlers(Handlers handlers) { handlers_ = std::move(handlers); }

  State state() const { return state_; }
  bool done() const { return state_ == State::kDone; }
  // Set once done().
  const std::optional<ExitInfo>& exit() const { return exit_; }
  const std::string& command() const { return command_; }
  // Bytes queued for stdin and not yet accepted by the SSH layer.
  std::size_t pending_stdin() const { return stdin_.size() - stdin_sent_; }

 private:
  friend class Session;
  Channel(Session* session, std::string command, Handlers handlers);

  // One step of the state machine; returns true when it made progress (state change or bytes
  // moved), so Session::pump() loops until no channel can move without waiting for the socket.
  bool step();
  bool drain(int stream);  // 0 = stdout, 1 = extended data (stderr)
  bool finish_close();
  void complete(ExitInfo info, bool notify = true);
  void fail(const std::string& why);

  Session* session_;
  std::string command_;
  Handlers handlers_;
  State state_ = State::kQueued;
  _LIBSSH2_CHANNEL* ch_ = nullptr;
  std::string stdin_;
  std::size_t stdin_sent_ = 0;
  bool eof_requested_ = false;
  bool eof_sent_ = false;
  bool close_requested_ = false;
  bool close_sent_ = false;
  bool remote_eof_ = false;  // the command's output ended (not set when we closed first)
  std::optional<ExitInfo> exit_;
};

}  // namespace hora::ssh
