#include "cli/elastic/discovery_script.h"
#include "common/text.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

extern char** environ;

namespace hora::cli {
namespace {

constexpr std::string_view kLineForm = "host:slots";

// One line as -H takes one item (cli/hosts/host_list.h: the same host names, user@ and
// [ipv6]), plus 0 slots; `slots` -1 when the line gives none. Returns why the line is not that,
// or empty.
std::string parse_line(std::string_view line, HostSpec& out, int& slots) {
  if (line.find(',') != std::string_view::npos) return "one host a line, no commas";
  // The slots follow the first ':' after the host (after its ']' for IPv6).
  const std::size_t bracket = line.find(']');
  const std::size_t host_end = bracket == std::string_view::npos ? 0 : bracket;
  const std::size_t colon = line.find(':', host_end);
  const bool has_slots = colon != std::string_view::npos;
  std::string item(line);
  const bool zero = has_slots && line.substr(colon + 1) == "0";
  if (zero) item = std::string(line.substr(0, colon)) + ":1";
  try {
    std::vector<HostSpec> parsed = parse_host_list(item);
    out = std::move(parsed.at(0));
  } catch (const UsageError& e) {
    // "-H item 'ITEM': WHY; expected FORMS": WHY is what the line gets.
    std::string_view why = e.what();
    const std::string prefix = fmt::format("-H item '{}': ", item);
    if (why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
    why = why.substr(0, why.find("; expected "));
    return std::string(why);
  }
  slots = zero ? 0 : has_slots ? out.slots : -1;
  return {};
}

// A line as it may be shown in a message: control bytes (a NUL would cut the message short
// wherever it is printed as a C string) as escapes.
std::string printable(std::string_view line) {
  std::string out;
  for (const char c : line) {
    const auto u = static_cast<unsigned char>(c);
    if (u == 0) {
      out += "\\0";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

ino_t pipe_inode(int fd) {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// The processes other than this one with a descriptor on one of `pipes` (by inode), from
// /proc/<pid>/fd.
std::vector<pid_t> holders_of(const std::set<ino_t>& pipes) {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    const std::string fd_dir = fmt::format("/proc/{}/fd", pid);
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // gone, or not ours to look at
    bool holds = false;
    while (const dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      char target[64];
      const std::string link = fd_dir + "/" + f->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      unsigned long ino = 0;
      if (std::sscanf(target, "pipe:[%lu]", &ino) == 1 && pipes.count(ino) != 0) holds = true;
    }
    ::closedir(fds);
    if (holds) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return out;
}

std::string comm_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string comm;
  std::getline(in, comm);
  return comm;
}

DiscoveryResult failure(std::string error) {
  DiscoveryResult r;
  r.error = std::move(error);
  return r;
}

void set_cloexec_nonblock(int fd) {
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::vector<HostSpec> parse_discovery_output(std::string_view text,
                                             std::optional<int> slots_per_host) {
  std::vector<HostSpec> hosts;                              // with 0-slot hosts, dropped at the end
  std::map<std::string, std::pair<std::size_t, int>> seen;  // name -> index, line
  int line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    HostSpec spec;
    int slots = -1;
    const std::string why = line.find('\0') != std::string_view::npos
                                ? std::string("it holds a NUL byte")
                                : parse_line(line, spec, slots);
    if (!why.empty()) {
      throw DiscoveryError(fmt::format("line {}: '{}' is not {} ({})", line_no, printable(line),
                                       kLineForm, printable(why)));
    }
    if (slots < 0) {
      if (!slots_per_host) {
        throw DiscoveryError(
            fmt::format("line {}: '{}' has no slots; print {}:slots, or give --slots-per-host",
                        line_no, line, spec.address_for_display()));
      }
      slots = *slots_per_host;
    }
    spec.slots = slots;
    auto [it, inserted] = seen.emplace(spec.name, std::make_pair(hosts.size(), line_no));
    if (inserted) {
      hosts.push_back(std::move(spec));
      continue;
    }
    const HostSpec& first = hosts[it->second.first];
    if (first.slots != spec.slots || first.user != spec.user) {
      throw DiscoveryError(fmt::format(
          "line {}: host '{}' is listed again, as '{}' (line {} listed it with {} slot{}{}); "
          "print each host once",
          line_no, spec.address_for_display(), printable(line), it->second.second, first.slots,
          first.slots == 1 ? "" : "s", first.user.empty() ? "" : " as " + first.user));
    }
  }
  hosts.erase(std::remove_if(hosts.begin(), hosts.end(),
                             [](const HostSpec& h) { return h.slots == 0; }),
              hosts.end());
  return hosts;
}

std::string second_name_warning(const HostSpec& host, const std::string& kept) {
  return fmt::format(
      "elastic: the discovery script lists {}:{}, which is this machine, already a host of the "
      "job as {}; ignoring it (two ranks on one machine would get local_rank 0): list this "
      "machine once, with all its slots",
      host.address_for_display(), host.slots, kept);
}

DiscoveryRun::DiscoveryRun(std::string script, std::optional<int> slots_per_host,
                           std::chrono::steady_clock::time_point deadline)
    : script_(std::move(script)), slots_per_host_(slots_per_host), deadline_(deadline) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    result_ = failure(fmt::format("--host-discovery-script '{}': cannot make a pipe: {}", script_,
                                  std::strerror(e)));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  // Its own process group (killed as one), default signal actions and an empty mask whatever
  // horarun blocks or ignores.
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string sh = "/bin/sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), script_.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  out_pipe_ = pipe_inode(out_fd_);
  err_pipe_ = pipe_inode(err_fd_);
  set_cloexec_nonblock(out_fd_);
  set_cloexec_nonblock(err_fd_);
  if (rc != 0) {
    close_fd(out_fd_);
    close_fd(err_fd_);
    result_ = failure(fmt::format("--host-discovery-script '{}': cannot start /bin/sh: {}", script_,
                                  std::strerror(rc)));
    return;
  }
  pid_ = pid;
}

DiscoveryRun::~DiscoveryRun() {
  kill_and_reap();
  close_fd(out_fd_);
  close_fd(err_fd_);
}

void DiscoveryRun::kill_and_reap() {
  if (pid_ < 0) return;
  // The pid is not reaped yet, so the group id cannot have been reused.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_ && !wait_status_) wait_status_ = status;
  pid_ = -1;
}

void DiscoveryRun::read_available() {
  char buf[65536];
  for (int* fd : {&out_fd_, &err_fd_}) {
    while (*fd >= 0) {
      const ssize_t n = ::read(*fd, buf, sizeof buf);
      if (n > 0) {
        if (fd == &out_fd_) {
          const std::size_t room = kMaxOutput - std::min(out_.size(), kMaxOutput);
          out_.append(buf, std::min(static_cast<std::size_t>(n), room));
          if (static_cast<std::size_t>(n) > room) {
            too_much_ = true;
            close_fd(*fd);
          }
        } else {
          err_.append(buf, static_cast<std::size_t>(n));
          if (err_.size() > kStderrKept) err_.erase(0, err_.size() - kStderrKept);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_fd(*fd);  // EOF or an error
    }
  }
}

std::string DiscoveryRun::stderr_tail() const {
  // Its last kStderrLines non-blank lines, on one line.
  std::vector<std::string_view> lines;
  std::string_view text = err_;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    if (!line.empty()) lines.push_back(line);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  if (lines.empty()) return {};
  const std::size_t from = lines.size() > kStderrLines ? lines.size() - kStderrLines : 0;
  std::string tail;
  for (std::size_t i = from; i < lines.size(); ++i) {
    if (!tail.empty()) tail += " | ";
    tail += lines[i];
  }
  return fmt::format("; its stderr ends: {}", tail);
}

// Kills the processes that still hold the write end of the script's stdout or stderr: the
// script's own process group is gone by now, so these left it (setsid, a daemon). Each is killed
// with its own process group when it leads one. Returns what was done, for the warning.
std::string DiscoveryRun::kill_pipe_holders() {
  std::set<ino_t> pipes;
  if (out_fd_ >= 0 && out_pipe_ != 0) pipes.insert(out_pipe_);
  if (err_fd_ >= 0 && err_pipe_ != 0) pipes.insert(err_pipe_);
  if (pipes.empty()) return {};
  std::vector<std::string> named;
  for (const pid_t pid : holders_of(pipes)) {
    named.push_back(fmt::format("{} ({})", pid, comm_of(pid)));
    if (::getpgid(pid) == pid) ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  if (named.empty()) return {};
  return fmt::format(
      "--host-discovery-script '{}' left process{} {} outside its process group (setsid?) "
      "holding its output; killed {} (a discovery script must not leave processes behind)",
      script_, named.size() == 1 ? "" : "es", fmt::join(named, ", "),
      named.size() == 1 ? "it" : "them");
}

void DiscoveryRun::finish(DiscoveryResult result) {
  kill_and_reap();
  const std::string killed = kill_pipe_holders();
  if (!killed.empty()) warning_ = killed;
  close_fd(out_fd_);
  close_fd(err_fd_);
  result.warning = warning_;
  result_ = std::move(result);
}

std::optional<DiscoveryResult> DiscoveryRun::poll(std::chrono::milliseconds wait) {
  if (result_) return result_;
  const std::string who = fmt::format("--host-discovery-script '{}'", script_);
  const auto start = std::chrono::steady_clock::now();
  const auto until = std::min(deadline_, start + wait);
  while (true) {
    read_available();
    if (too_much_) {
      finish(failure(fmt::format("{} printed more than {} bytes", who, kMaxOutput)));
      return result_;
    }
    if (!wait_status_ && pid_ >= 0) {
      // Exited? Seen without reaping it, so its process group is still ours to kill.
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid_) {
        int status = 0;
        ::kill(-pid_, SIGKILL);  // whatever it left running in its group
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        wait_status_ = status;
        pid_ = -1;
        exited_at_ = std::chrono::steady_clock::now();
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (wait_status_ && (out_fd_ >= 0 || err_fd_ >= 0) && exited_at_ && !leftovers_killed_ &&
        now >= std::min(deadline_, *exited_at_ + kLeftoverGrace)) {
      // Exited, but its output is still held open by a process that left its group: that one
      // is killed, and the pipes then reach their end (the loop reads on).
      leftovers_killed_ = true;
      warning_ = kill_pipe_holders();
    }
    const bool drained = out_fd_ < 0 && err_fd_ < 0;
    if (wait_status_ && (drained || now >= deadline_)) {
      // Exited, and its output read (or held open past the deadline by a process that could not
      // be killed: what was read counts).
      const int status = *wait_status_;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        try {
          DiscoveryResult ok;
          ok.ok = true;
          ok.hosts = parse_discovery_output(out_, slots_per_host_);
          finish(std::move(ok));
        } catch (const DiscoveryError& e) {
          finish(failure(fmt::format("{} printed {}", who, e.what())));
        }
      } else if (WIFEXITED(status)) {
        finish(failure(
            fmt::format("{} exited with code {}{}", who, WEXITSTATUS(status), stderr_tail())));
      } else {
        finish(failure(fmt::format("{} was killed by signal {} ({}){}", who, WTERMSIG(status),
                                   strsignal(WTERMSIG(status)), stderr_tail())));
      }
      return result_;
    }
    if (now >= deadline_) {
      finish(failure(
          fmt::format("{} did not finish in time: killed at its deadline{}", who, stderr_tail())));
      return result_;
    }
    if (now >= until) return std::nullopt;
    // Wait for output, at most 20 ms at a time: the exit of a script that closed its pipes early
    // is noticed without a signal.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    const int timeout_ms = static_cast<int>(std::min<long long>(left.count(), 20));
    pollfd fds[2];
    nfds_t n = 0;
    for (int fd : {out_fd_, err_fd_}) {
      if (fd >= 0) fds[n++] = pollfd{fd, POLLIN, 0};
    }
    if (n == 0) {
      ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    } else {
      ::poll(fds, n, timeout_ms);
    }
  }
}

DiscoveryResult run_discovery_script(const std::string& script, std::optional<int> slots_per_host,
                                     std::chrono::steady_clock::time_point deadline) {
  DiscoveryRun run(script, slots_per_host, deadline);
  while (true) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (auto result = run.poll(std::max(left, std::chrono::milliseconds(0)))) return *result;
  }
}

}  // namespace hora::cli
