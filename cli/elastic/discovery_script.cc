#include "cli/elastic/discovery_script.h"
#include "common/text.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

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
    if (std::string why = parse_line(line, spec, slots); !why.empty()) {
      throw DiscoveryError(
          fmt::format("line {}: '{}' is not {} ({})", line_no, line, kLineForm, why));
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
          line_no, spec.address_for_display(), line, it->second.second, first.slots,
          first.slots == 1 ? "" : "s", first.user.empty() ? "" : " as " + first.user));
    }
  }
  hosts.erase(std::remove_if(hosts.begin(), hosts.end(),
                             [](const HostSpec& h) { return h.slots == 0; }),
              hosts.end());
  return hosts;
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
    result_ = DiscoveryResult{false,
                              {},
                              fmt::format("--host-discovery-script '{}': cannot make a pipe: {}",
                                          script_, std::strerror(e))};
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
  set_cloexec_nonblock(out_fd_);
  set_cloexec_nonblock(err_fd_);
  if (rc != 0) {
    close_fd(out_fd_);
    close_fd(err_fd_);
    result_ = DiscoveryResult{false,
                              {},
                              fmt::format("--host-discovery-script '{}': cannot start /bin/sh: {}",
                                          script_, std::strerror(rc))};
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

void DiscoveryRun::finish(DiscoveryResult result) {
  kill_and_reap();
  close_fd(out_fd_);
  close_fd(err_fd_);
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
      finish({false, {}, fmt::format("{} printed more than {} bytes", who, kMaxOutput)});
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
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const bool drained = out_fd_ < 0 && err_fd_ < 0;
    if (wait_status_ && (drained || now >= deadline_)) {
      // Exited, and its output read (or held open past the deadline by a process that left its
      // group: what was read counts).
      const int status = *wait_status_;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        try {
          finish({true, parse_discovery_output(out_, slots_per_host_), {}});
        } catch (const DiscoveryError& e) {
          finish({false, {}, fmt::format("{} printed {}", who, e.what())});
        }
      } else if (WIFEXITED(status)) {
        finish({false,
                {},
                fmt::format("{} exited with code {}{}", who, WEXITSTATUS(status), stderr_tail())});
      } else {
        finish({false,
                {},
                fmt::format("{} was killed by signal {} ({}){}", who, WTERMSIG(status),
                            strsignal(WTERMSIG(status)), stderr_tail())});
      }
      return result_;
    }
    if (now >= deadline_) {
      finish(
          {false,
           {},
           fmt::format("{} did not finish in time: killed at its deadline{}", who, stderr_tail())});
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
