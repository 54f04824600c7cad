#include "ssh/channel.h"

#include <libssh2.h>

#include <algorithm>

#include "ssh/libssh2_errors.h"
#include "ssh/session.h"

namespace hora::ssh {

std::string ExitInfo::describe() const {
  if (!error.empty()) return error;
  if (!exit_signal.empty()) return "killed by signal " + exit_signal;
  return "exit status " + std::to_string(exit_status);
}

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
      session_->fail_all("connection to " + session_->target_.describe() +
                         " lost: " + session_->last_error());
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
        fail("could not open an SSH channel on " + where + " for `" + command_ +
             "`: " + session_->last_error() +
             " (a common cause: sshd's MaxSessions, default 10, limits the channels of one "
             "connection)");
        return true;
      }
      session_->opening_ = nullptr;
      state_ = State::kStarting;
      return true;
    }
    case State::kStarting: {
      if (session_->starting_ != nullptr && session_->starting_ != this) return false;
      const int rc = libssh2_channel_exec(ch_, command_.c_str());
      if (rc == LIBSSH2_ERROR_EAGAIN) {
        session_->starting_ = this;
        return false;
      }
      session_->starting_ = nullptr;
      if (rc < 0) {
        if (is_session_fatal(rc)) {
          session_->fail_all("connection to " + where + " lost: " + session_->last_error());
        } else {
          fail("the server " + where + " refused to run `" + command_ +
               "`: " + session_->last_error());
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
        if (libssh2_channel_get_exit_signal(ch_, &sig, &sig_len, nullptr, nullptr, nullptr,
                                            nullptr) == 0 &&
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
    case State::kDone: return false;
  }
  return false;
}

}  // namespace hora::ssh
