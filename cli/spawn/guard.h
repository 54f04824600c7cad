// The guard: the hidden mode `horarun --guard` that every rank runs under, locally (a child of
// horarun with pipes) and remotely (an SSH exec channel running `exec horarun --guard`).
//
// Protocol and ownership: the guard reads one GuardRequest from its stdin (guard_request.h),
// applies the environment on top of its own, enters the working directory and starts the
// command in a new process group (the command's stdin is /dev/null; stdout and stderr are the
// guard's own, so they reach the launcher unchanged). It then keeps reading stdin: a
// `terminate` line, end of file (launcher gone, SSH channel closed), SIGTERM/SIGINT/SIGHUP or
// the death of its parent (PR_SET_PDEATHSIG) make it send SIGTERM to the group and SIGKILL
// after the request's grace period. When the command exits, members of its group left behind
// are ended the same way. The guard is a child subreaper, so it reaps everything the command
// leaves behind.
//
// Exit: the command's exit code; if the command died of a signal, the guard re-raises that
// signal on itself with the default action (and no core dump), so its parent (horarun, or sshd
// for the launcher on the other end) sees the same signal. The guard is single-threaded: it
// uses fork() and a signalfd-driven poll loop.
#pragma once

#include <chrono>

namespace hora::cli {

struct GuardConfig {
  // How long the launcher may take to send the whole request after starting the guard.
  static constexpr std::chrono::seconds kDefaultRequestTimeout{60};

  int in_fd = 0;
  std::chrono::milliseconds request_timeout = kDefaultRequestTimeout;
};

// Runs the guard to completion. Returns the exit code for main(), or does not return when the
// command died of a signal (see above). Errors before the command starts are printed to stderr
// with exit codes as a shell uses them: 127 command not found, 126 not executable, 1 other.
int run_guard(const GuardConfig& config = {});

}  // namespace hora::cli
