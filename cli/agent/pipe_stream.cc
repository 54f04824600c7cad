#include "cli/agent/pipe_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "cli/agent/agent.h"

namespace hora::cli::agent {
namespace {

// Reaps `pid` if it exits before `deadline`: true with `*wstatus` set. Waits on a pidfd (woken
// the moment the child exits), not in sleeps.
bool reap_by(pid_t pid, PipeStream::Clock::time_point deadline, int* wstatus) {
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  while (true) {
    const pid_t r = ::waitpid(pid, wstatus, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return r == pid;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - PipeStream::Clock::now());
    if (left.count() <= 0) return false;
    if (pidfd) {
      pollfd p{pidfd.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(left, std::chrono::milliseconds(1)));
    }
  }
}

}  // namespace

PipeStream::PipeStream(std::vector<std::string> argv, std::string file)
    : argv_(std::move(argv)), file_(std::move(file)) {}

PipeStream::~PipeStream() {
  socket_.reset();  // the agent's stdin ends: it stops its children and exits
  if (pid_ > 0 && !reaped_) {
    // Bounded: the agent exits within its grace period once its stdin is closed; after that it
    // is killed (srun then ends the step).
    if (!reap_by(pid_, Clock::now() + kGrace + std::chrono::seconds(2), &wstatus_)) {
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &wstatus_, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

PipeStream::Started PipeStream::start(Clock::time_point deadline) {
  Started st;
  if (!spawn(st.failure)) return st;
  return wait_ready(deadline);
}

bool PipeStream::spawn(std::string& error) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    error = fmt::format("socketpair: {}", std::strerror(errno));
    return false;
  }
  UniqueFd mine(sv[0]), theirs(sv[1]);
  std::vector<char*> argv;
  for (std::string& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const char* file = file_.empty() ? argv[0] : file_.c_str();
  // Built before fork(): the child only makes async-signal-safe calls.
  const std::string cannot_run = fmt::format("horarun: cannot run {}: ", file);
  pid_ = ::fork();
  if (pid_ < 0) {
    error = fmt::format("fork: {}", std::strerror(errno));
    return false;
  }
  if (pid_ == 0) {
    // Killed with horarun, whatever kills it (srun then cancels its step).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    ::signal(SIGPIPE, SIG_DFL);
    ::setpgid(0, 0);
    ::dup2(theirs.get(), 0);
    ::dup2(theirs.get(), 1);
    // Not the rendezvous listening sockets or another agent's socket (some are not CLOEXEC).
    ::close_range(3, ~0U, 0);
    ::execvp(file, argv.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, cannot_run.data(), cannot_run.size());
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  theirs.reset();
  socket_ = std::move(mine);
  return true;
}

PipeStream::Started PipeStream::wait_ready(Clock::time_point deadline) {
  Started st;
  const std::string_view ready = kReadyLine;
  std::string got;
  while (true) {
    if (const std::size_t at = got.find(ready); at != std::string::npos) {
      st.ready = true;
      st.before = got.substr(0, at);
      rest_ = got.substr(at + ready.size());
      break;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      st.failure = fmt::format("`{}` printed no ready line in time", argv_.front());
      break;
    }
    pollfd p{socket_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) {
      st.failure = fmt::format("poll: {}", std::strerror(errno));
      break;
    }
    char buf[4096];
    const ssize_t n = (p.revents != 0) ? ::read(socket_.get(), buf, sizeof buf) : -1;
    if (n > 0) {
      got.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      st.before = got;
      st.failure = reap_description();
      break;
    }
  }
  if (st.ready) {
    const int flags = ::fcntl(socket_.get(), F_GETFL);
    ::fcntl(socket_.get(), F_SETFL, flags | O_NONBLOCK);
  }
  return st;
}

std::string PipeStream::reap_description() {
  if (pid_ > 0 && !reaped_) {
    // The stream ended, so the child is exiting; a short bounded wait for its status.
    reaped_ = reap_by(pid_, Clock::now() + std::chrono::seconds(1), &wstatus_);
  }
  if (!reaped_) return fmt::format("`{}` closed its output", argv_.front());
  if (WIFSIGNALED(wstatus_)) {
    const char* name = ::sigabbrev_np(WTERMSIG(wstatus_));
    return fmt::format("`{}` was killed by signal {}", argv_.front(), name ? name : "?");
  }
  return fmt::format("`{}` exited with status {}", argv_.front(), WEXITSTATUS(wstatus_));
}

void PipeStream::write(std::string_view data) {
  if (!closed_) out_.append(data);
}

std::string PipeStream::kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) {
  (void)deadline;
  if (pid_ <= 0 || reaped_ || static_cast<std::uint32_t>(pid_) != pid) {
    return fmt::format("the agent (pid {}) is not this launcher's child (pid {}), e.g. under srun",
                       pid, pid_);
  }
  if (::kill(pid_, SIGKILL) != 0) {
    return fmt::format("kill({}, SIGKILL): {}", pid_, std::strerror(errno));
  }
  return "";
}

void PipeStream::close() {
  if (closed_) return;
  closed_ = true;
  out_.clear();
  if (socket_) ::shutdown(socket_.get(), SHUT_WR);
}

Stream::Interest PipeStream::interest() const {
  Interest in;
  in.read = socket_ && !eof_;
  in.write = socket_ && !out_.empty() && !closed_;
  return in;
}

void PipeStream::ended(const std::string& why) {
  eof_ = true;
  if (link_ != nullptr) link_->on_closed(why);
}

void PipeStream::pump() {
  if (!socket_ || eof_) return;
  if (!rest_.empty() && link_ != nullptr) {
    const std::string r = std::move(rest_);
    rest_.clear();
    link_->on_data(r);
  }
  while (!out_.empty() && !closed_) {
    const ssize_t n = ::send(socket_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      out_.clear();
      break;  // the read side reports the end
    }
    out_.erase(0, static_cast<std::size_t>(n));
  }
  char buf[64 * 1024];
  for (int i = 0; i < 16 && !eof_; ++i) {
    const ssize_t n = ::read(socket_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      ended(fmt::format("the agent ended: {}", reap_description()));
      break;
    }
    if (link_ != nullptr) link_->on_data(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

std::unique_ptr<AgentLink> link_over_pipe(const std::string& host,
                                          std::unique_ptr<PipeStream> stream) {
  PipeStream* s = stream.get();
  auto link = std::make_unique<AgentLink>(host, std::move(stream));
  s->attach(link.get());
  return link;
}

}  // namespace hora::cli::agent
