#include "cli/spawn/local_rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/read.hpp>

#include "cli/errors.h"

extern char** environ;

namespace hora::cli {
namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe(const std::string& who, const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw SpawnError(
        fmt::format("{}: cannot create the {} pipe: {}; raise the open-files limit "
                    "(ulimit -n) if it says 'Too many open files'",
                    who, what, std::strerror(errno)));
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

ExitStatus from_wait_status(int st) {
  ExitStatus s;
  if (WIFSIGNALED(st)) {
    s.signaled = true;
    s.signal = WTERMSIG(st);
  } else {
    s.code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  return s;
}

}  // namespace

LocalRankProcess::LocalRankProcess(boost::asio::io_context& io, int rank, std::string host,
                                   std::string self_exe, std::string argv0)
    : io_(io),
      rank_(rank),
      host_(std::move(host)),
      self_exe_(std::move(self_exe)),
      argv0_(std::move(argv0)) {}

LocalRankProcess::~LocalRankProcess() {
  *alive_ = false;
  if (pid_ > 0 && !exit_) {
    // The supervisor always waits for its ranks; this is the path for exceptions and tests.
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string LocalRankProcess::who() const { return fmt::format("rank {} on {}", rank_, host_); }

void LocalRankProcess::start(const GuardRequest& request, Events events) {
  events_ = std::move(events);
  const std::string block = request.encode();
  Pipe in = make_pipe(who(), "stdin");
  Pipe out = make_pipe(who(), "stdout");
  Pipe err = make_pipe(who(), "stderr");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out.write.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err.write.get(), 2);
  // The guard gets 0, 1 and 2 only: not the rendezvous listening sockets (Horovod's HTTP one is
  // opened by Asio without SOCK_CLOEXEC), another rank's pipes, or a descriptor horarun's caller
  // left open (issue 15 item 5; test: integration rank_fds).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // horarun ignores SIGPIPE and the io_context may have handlers installed; the guard starts
  // from defaults and an empty mask (it sets up its own).
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT}) sigaddset(&defaults, sig);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  // The guard gets a process group of its own: a terminal's Ctrl-C (SIGINT to the foreground
  // group) must reach horarun alone, which then ends the job in order and reports the
  // interrupt, rather than racing guards that would report their ranks' SIGTERM first.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

  std::string guard_flag = "--guard";
  char* argv[] = {argv0_.data(), guard_flag.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, self_exe_.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    throw SpawnError(fmt::format("{}: cannot start the guard {} --guard: {}", who(), self_exe_,
                                 std::strerror(rc)));
  }
  pid_ = pid;
  // The child holds its own copies now; ours must close or EOF would never come.
  in.read.reset();
  out.write.reset();
  err.write.reset();

  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd < 0) {
    throw SpawnError(fmt::format("{}: pidfd_open: {} (Linux 5.3 or later is required)", who(),
                                 std::strerror(errno)));
  }
  pidfd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, pidfd);

  // The request is small next to the pipe buffer in practice; a large -x set may exceed it,
  // and the blocking write then completes as the guard reads (it does so right after exec).
  if (!write_all(in.write.get(), block)) {
    throw SpawnError(fmt::format("{}: the guard exited before reading its request ({})", who(),
                                 std::strerror(errno)));
  }
  // Later writes (terminate) must never block the io_context.
  ::fcntl(in.write.get(), F_SETFL, ::fcntl(in.write.get(), F_GETFL) | O_NONBLOCK);
  stdin_ = std::move(in.write);

  out_[0] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, out.read.release());
  out_[1] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, err.read.release());
  read_output(Stream::kStdout);
  read_output(Stream::kStderr);
  watch_exit();
}

void LocalRankProcess::read_output(Stream stream) {
  const int i = static_cast<int>(stream);
  auto& buf = buffers_[static_cast<std::size_t>(i)];
  out_[static_cast<std::size_t>(i)]->async_read_some(
      boost::asio::buffer(buf),
      [this, stream, i, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec,
                                                             std::size_t n) {
        if (alive.expired()) return;
        if (n > 0 && events_.on_output) {
          events_.on_output(stream,
                            std::string_view(buffers_[static_cast<std::size_t>(i)].data(), n));
        }
        if (ec) {
          // EOF, or operation_aborted after close_output(): either way the stream is done.
          auto& sd = out_[static_cast<std::size_t>(i)];
          if (sd) {
            boost::system::error_code ignored;
            sd->close(ignored);
            sd.reset();
          }
          if (events_.on_output_closed) events_.on_output_closed(stream);
          return;
        }
        read_output(stream);
      });
}

void LocalRankProcess::watch_exit() {
  pidfd_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [this,
                      alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
                       if (alive.expired() || ec == boost::asio::error::operation_aborted) return;
                       int st = 0;
                       pid_t r;
                       while ((r = ::waitpid(pid_, &st, WNOHANG)) < 0 && errno == EINTR) {
                       }
                       if (r == 0) {  // spurious wake-up: not exited yet
                         watch_exit();
                         return;
                       }
                       exit_ = r == pid_ ? from_wait_status(st) : ExitStatus{false, 1, 0};
                       stdin_.reset();
                       boost::system::error_code ignored;
                       pidfd_->close(ignored);
                       if (events_.on_exit) events_.on_exit(*exit_);
                     });
}

void LocalRankProcess::terminate() {
  if (!running() || !stdin_) return;
  // EAGAIN (a full pipe) means the guard is not reading; the supervisor's kill() follows.
  write_all(stdin_.get(), GuardRequest::kTerminate);
}

void LocalRankProcess::kill() {
  // The guard's death takes the command with it (PR_SET_PDEATHSIG=SIGKILL in the command).
  if (running()) ::kill(pid_, SIGKILL);
}

void LocalRankProcess::close_output() {
  for (auto& sd : out_) {
    if (sd) {
      boost::system::error_code ignored;
      sd->cancel(ignored);
    }
  }
}

}  // namespace hora::cli
