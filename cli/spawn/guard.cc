#include "cli/spawn/guard.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/base/errors.h"
#include "cli/spawn/cpu_binding.h"
#include "cli/spawn/exec_failure.h"
#include "cli/spawn/guard_request.h"
#include "cli/spawn/shm_cleanup.h"
#include "common/duration.h"
#include "common/job_environment.h"
#include "common/unique_fd.h"
#include "common/write_all.h"

namespace hora::cli {
namespace {

// Marks every descriptor from `first` on close-on-exec (close_range, Linux 5.11; before that one
// by one up to the open-file limit). Async-signal-safe: for the child between fork and exec.
void close_on_exec_from(int first) {
  if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  rlimit limit{};
  const rlim_t last = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                          ? std::min<rlim_t>(limit.rlim_cur, 1u << 20)
                          : 65536;
  for (rlim_t fd = static_cast<rlim_t>(first); fd < last; ++fd) {
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  }
}

using Clock = std::chrono::steady_clock;

// After SIGKILL to the group, how long to wait for the members to disappear before giving up
// (a process stuck in uninterruptible sleep cannot be waited for forever).
constexpr std::chrono::milliseconds kAfterKill{2000};
// A request line longer than this is not a request; it is dropped.
constexpr std::size_t kMaxRequestLine = 1024;

const int kForwarded[] = {SIGTERM, SIGINT, SIGHUP};

int poll_timeout_ms(std::optional<Clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

[[noreturn]] void die_of_signal(int sig) {
  // The command dumped core already if it was going to; the guard must not add its own.
  struct rlimit no_core {
    0, 0
  };
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  // A signal whose default action is to ignore it (SIGCHLD, SIGURG, SIGWINCH) cannot have
  // killed the command; report it like a shell would.
  std::_Exit(128 + sig);
}

class Guard {
 public:
  explicit Guard(const GuardConfig& config) : config_(config) {}

  int run() {
    setup_signals();
    const pid_t parent = ::getppid();
    // Our parent (horarun, or sshd's session process) dying is the same as stdin closing.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent || parent == 1) {
      say("the launcher exited before the rank started");
      return 1;
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);

    std::optional<GuardRequest> request = read_request();
    if (!request) return 1;
    if (int rc = start(*request); rc != 0) return rc;
    supervise();
    // Everything the rank started is gone: its shared-memory segments that no rank unlinked
    // (the job ended before every local rank mapped them) go too (spawn/shm_cleanup.h).
    if (auto prefix =
            shm_prefix_for(std::getenv(job_env::kSecret), std::getenv(job_env::kHostIndex))) {
      remove_orphan_segments(*prefix);
    }
    if (WIFSIGNALED(status_)) die_of_signal(WTERMSIG(status_));
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 1;
  }

 private:
  void say(const std::string& message) {
    hora::write_all(2, fmt::format("horarun guard{}: {}\n", who_, message));
  }

  void setup_signals() {
    // SIGPIPE: a rank's launcher going away must not kill the guard mid-cleanup.
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int sig : kForwarded) sigaddset(&set, sig);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd_) {
      say(fmt::format("signalfd: {}", std::strerror(errno)));
      std::_Exit(1);
    }
  }

  // Drains the signalfd; returns the termination signals seen, reaps children on SIGCHLD.
  void handle_signals() {
    signalfd_siginfo info;
    while (::read(sigfd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (static_cast<int>(info.ssi_signo) == SIGCHLD) {
        reap();
      } else {
        pending_signal_ = static_cast<int>(info.ssi_signo);
      }
    }
  }

  void reap() {
    int st = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
      if (pid == child_) {
        child_alive_ = false;
        status_ = st;
      }
    }
  }

  std::optional<GuardRequest> read_request() {
    const auto deadline = Clock::now() + config_.request_timeout;
    std::string buffer;
    char chunk[65536];
    while (true) {
      std::size_t consumed = 0;
      try {
        if (auto request = GuardRequest::decode(buffer, consumed)) {
          leftover_ = buffer.substr(consumed);
          for (const auto& [name, value] : request->env) {
            if (name == "HORA_RANK") rank_ = value;
            if (name == "HORA_HOSTNAME") host_ = value;
          }
          if (!rank_.empty()) {
            who_ = fmt::format(" (rank {}{}{})", rank_, host_.empty() ? "" : " on ", host_);
          }
          return request;
        }
      } catch (const GuardProtocolError& e) {
        say(fmt::format("bad request on stdin: {}", e.what()));
        return std::nullopt;
      }
      pollfd fds[2] = {{config_.in_fd, POLLIN, 0}, {sigfd_.get(), POLLIN, 0}};
      const int timeout = poll_timeout_ms(deadline);
      if (timeout == 0) {
        say(
            fmt::format("no complete request on stdin within {} (got {} bytes); the launcher "
                        "stalled or the connection is broken",
                        hora::format_duration(config_.request_timeout), buffer.size()));
        return std::nullopt;
      }
      if (::poll(fds, 2, timeout) < 0 && errno != EINTR) {
        say(fmt::format("poll: {}", std::strerror(errno)));
        return std::nullopt;
      }
      if (fds[1].revents & POLLIN) {
        handle_signals();
        if (pending_signal_ != 0) die_of_signal(pending_signal_);  // nothing started yet
      }
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::read(config_.in_fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
          say("the launcher closed stdin before sending the whole request");
          return std::nullopt;
        }
        buffer.append(chunk, static_cast<std::size_t>(n));
      }
    }
  }

  // Applies the request and forks the command. Returns 0, or an exit code on failure.
  int start(const GuardRequest& request) {
    for (const auto& [name, value] : request.env) ::setenv(name.c_str(), value.c_str(), 1);
    if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
      say(
          fmt::format("cannot enter the working directory '{}': {}; the launcher's directory "
                      "must exist on every host",
                      request.cwd, std::strerror(errno)));
      return 1;
    }
    // --bind-to, --map-by: the guard binds itself, and the rank inherits it.
    auto variable = [](const char* name) -> std::optional<std::string> {
      const char* v = std::getenv(name);
      return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
    };
    if (auto error =
            apply_cpu_binding({variable("HORA_BIND_TO"), variable("HORA_MAP_BY"),
                               variable("HORA_LOCAL_RANK"), variable("HORA_LOCAL_SIZE")})) {
      say(*error);
      return 1;
    }
    grace_ = request.grace;
    std::vector<char*> argv;
    for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    const pid_t guard_pid = ::getpid();
    child_ = ::fork();
    if (child_ < 0) {
      say(fmt::format("fork: {}", std::strerror(errno)));
      return 1;
    }
    if (child_ == 0) {
      // The guard is single-threaded, so the child may use the allocator before exec.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != guard_pid) std::_Exit(1);  // the guard died before prctl took effect
      for (int sig : kForwarded) ::signal(sig, SIG_DFL);
      ::signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::prctl(PR_SET_CHILD_SUBREAPER, 0);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) {
        ::dup2(devnull, 0);
        if (devnull != 0) ::close(devnull);
      }
      // The rank gets 0, 1 and 2 only, whatever the guard inherited (from sshd remotely).
      close_on_exec_from(3);
      const char* path = std::getenv("PATH");
      const std::string search = path != nullptr ? path : "/bin:/usr/bin";
      // execvp would hand an executable script without `#!` to /bin/sh ("Syntax error: word
      // unexpected" from a Python file): say how to run it instead.
      if (std::string m = script_without_interpreter_message(request.argv[0], search); !m.empty()) {
        say(m);
        std::_Exit(126);
      }
      ::execvp(argv[0], argv.data());
      const int err = errno;
      say(exec_failure_message(request.argv[0], err, search));
      std::_Exit(exec_failure_exit_code(request.argv[0], err, search));
    }
    // Both sides call setpgid so the group exists before either relies on it.
    ::setpgid(child_, child_);
    pgid_ = child_;
    child_alive_ = true;
    return 0;
  }

  bool group_empty() const { return ::kill(-pgid_, 0) != 0 && errno == ESRCH; }

  // Children of this guard other than the rank's own process. The guard is a subreaper, so what
  // escaped the rank's process group (setsid, a daemon's double fork) is reparented here once
  // its parent exits; ending the rank ends these too.
  std::vector<pid_t> strays() const {
    std::vector<pid_t> out;
    const pid_t me = ::getpid();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string text;
      std::getline(stat, text);
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses; ppid follows the
      // last ')' and the state.
      const auto close = text.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(text.substr(close + 1));
      char state = 0;
      long ppid = 0;
      if (!(rest >> state >> ppid) || ppid != me) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      if (pid != child_ || !child_alive_) out.push_back(pid);
    }
    return out;
  }

  bool nothing_left() const { return group_empty() && strays().empty(); }

  // The rank's process group and every stray.
  void signal_all(int sig) {
    ::kill(-pgid_, sig);
    for (const pid_t p : strays()) ::kill(p, sig);
  }

  void begin_termination() {
    if (term_sent_) return;
    term_sent_ = true;
    signal_all(SIGTERM);
    // A stopped rank (SIGSTOP, Ctrl-Z) handles SIGTERM only once it runs again: continue it,
    // as systemd does, rather than waiting out the grace for SIGKILL.
    signal_all(SIGCONT);
    deadline_ = Clock::now() + grace_;
  }

  void handle_requests(std::string_view data) {
    leftover_.append(data);
    std::size_t eol;
    while ((eol = leftover_.find('\n')) != std::string::npos) {
      std::string line = leftover_.substr(0, eol);
      leftover_.erase(0, eol + 1);
      if (line + "\n" == GuardRequest::kTerminate) {
        begin_termination();
      } else {
        say(fmt::format("ignoring unknown request '{}'", line.substr(0, 64)));
      }
    }
    if (leftover_.size() > kMaxRequestLine) leftover_.clear();
  }

  void supervise() {
    handle_requests("");
    bool stdin_open = true;
    char chunk[4096];
    while (true) {
      if (!child_alive_) {
        if (nothing_left()) return;
        begin_termination();  // the command exited; end what it left behind
      }
      if (deadline_ && Clock::now() >= *deadline_) {
        if (!kill_sent_) {
          kill_sent_ = true;
          signal_all(SIGKILL);
          deadline_ = Clock::now() + kAfterKill;
        } else if (!child_alive_) {
          say("members of the rank's process group survived SIGKILL; leaving them");
          return;
        }
        // The command itself is still alive after SIGKILL (uninterruptible sleep): keep
        // waiting for it, since its exit status is what the launcher needs.
        else {
          deadline_.reset();
        }
      }
      pollfd fds[2] = {{stdin_open ? config_.in_fd : -1, POLLIN, 0}, {sigfd_.get(), POLLIN, 0}};
      if (::poll(fds, 2, poll_timeout_ms(deadline_)) < 0 && errno != EINTR) {
        say(fmt::format("poll: {}", std::strerror(errno)));
        begin_termination();
      }
      if (fds[1].revents & POLLIN) {
        handle_signals();
        if (pending_signal_ != 0) begin_termination();
      }
      if (stdin_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = ::read(config_.in_fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
          // The launcher is gone (or closed the channel): end the rank.
          stdin_open = false;
          begin_termination();
        } else {
          handle_requests(std::string_view(chunk, static_cast<std::size_t>(n)));
        }
      }
    }
  }

  GuardConfig config_;
  UniqueFd sigfd_;
  std::string rank_;
  std::string host_;
  std::string who_;
  std::string leftover_;  // bytes after the request: the start of later request lines
  pid_t child_ = -1;
  pid_t pgid_ = -1;
  bool child_alive_ = false;
  int status_ = 0;
  int pending_signal_ = 0;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  std::chrono::milliseconds grace_ = GuardRequest::kDefaultGrace;
  std::optional<Clock::time_point> deadline_;
};

}  // namespace

int run_guard(const GuardConfig& config) {
  Guard guard(config);
  return guard.run();
}

}  // namespace hora::cli
