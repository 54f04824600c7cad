#include "cli/agent/agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/agent/frame.h"
#include "cli/agent/liveness.h"
#include "cli/agent/process_state.h"
#include "cli/agent/relay_children.h"
#include "cli/network/probe.h"
#include "common/unique_fd.h"
#include "common/write_all.h"

namespace hora::cli::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Above this many bytes waiting for the launcher, children's output is not read (they block in
// their writes until the channel drains): the agent's memory stays bounded.
constexpr std::size_t kOutputHighWater = 8u << 20;

// The modes an OPEN may start; anything else is refused.
bool allowed_mode(const std::string& arg) {
  return arg == "--guard" || arg == "--probe-listen" || arg == "--probe-connect" ||
         arg == "--probe-interfaces";
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

struct Child {
  pid_t pid = -1;
  UniqueFd in, out, err;  // our ends of its pipes
  std::string in_queue;
  bool eof_requested = false;
  bool reaped = false;
  std::optional<Clock::time_point> kill_at;  // after a CLOSE: SIGKILL if still running then
  int wstatus = 0;
  char reported_state = 0;  // the state last sent in a STATE frame; 0: running
};

class Agent {
 public:
  Agent(int in_fd, int out_fd, AgentOptions options)
      : in_fd_(in_fd), out_fd_(out_fd), options_(options) {}

  int run();

 private:
  void open_child(std::uint32_t id, const std::string& payload);
  void handle(const Frame& f);
  void read_launcher();
  void read_child(std::uint32_t id, Child& c, bool stderr_stream);
  void write_child(Child& c);
  void reap();
  void finish_children();
  void flush_output();
  void begin_shutdown();
  void failed(std::uint32_t id, const std::string& why) {
    append_frame(out_queue_, FrameType::kFailed, id, why);
  }

  // The poll timeout until the next kill deadline or heartbeat.
  int next_deadline_ms() const;
  // A HEARTBEAT when one is due (docs/agent.md, "Liveness").
  void heartbeat();
  // STATE frames for children whose rank stopped, or runs again, since the last look.
  void report_states();
  void kill_overdue();

  int in_fd_;
  int out_fd_;
  AgentOptions options_;
  UniqueFd sigfd_;
  FrameDecoder decoder_;
  std::string out_queue_;
  std::map<std::uint32_t, Child> children_;
  bool input_open_ = true;
  bool output_broken_ = false;
  bool shutting_down_ = false;
  Clock::time_point kill_at_{};
  bool killed_ = false;
  Clock::time_point next_heartbeat_ = Clock::now();
  int rc_ = 0;
  // The hosts this agent starts and carries for the launcher (the fan-out tree).
  RelayChildren relay_{out_queue_};
};

void Agent::open_child(std::uint32_t id, const std::string& payload) {
  if (children_.count(id) != 0) return failed(id, fmt::format("child id {} is in use", id));
  const std::optional<OpenRequest> req = decode_open(payload);
  if (!req) return failed(id, "malformed OPEN request");
  if (!allowed_mode(req->args.front())) {
    return failed(id, fmt::format("'{}' is not a mode the agent starts", req->args.front()));
  }
  int p_in[2], p_out[2], p_err[2];
  if (::pipe2(p_in, O_CLOEXEC) != 0)
    return failed(id, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd in_r(p_in[0]), in_w(p_in[1]);
  if (::pipe2(p_out, O_CLOEXEC) != 0)
    return failed(id, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd out_r(p_out[0]), out_w(p_out[1]);
  if (::pipe2(p_err, O_CLOEXEC) != 0)
    return failed(id, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd err_r(p_err[0]), err_w(p_err[1]);

  std::vector<std::string> args;
  args.push_back("horarun");
  args.insert(args.end(), req->args.begin(), req->args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string cwd = req->cwd;
  // Reported by the child before it exits when it cannot chdir or exec.
  const std::string chdir_error = fmt::format("cannot change to directory {}: ", cwd);

  const pid_t pid = ::fork();
  if (pid < 0) return failed(id, fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // The child: async-signal-safe calls only.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in_r.get(), 0);
    ::dup2(out_w.get(), 1);
    ::dup2(err_w.get(), 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      const char* why = std::strerror(errno);
      (void)!::write(2, chdir_error.data(), chdir_error.size());
      (void)!::write(2, why, std::strlen(why));
      (void)!::write(2, "\n", 1);
      ::_exit(127);
    }
    ::execv("/proc/self/exe", argv.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, "cannot run the horarun binary: ", 31);
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  Child c;
  c.pid = pid;
  c.in = std::move(in_w);
  c.out = std::move(out_r);
  c.err = std::move(err_r);
  set_nonblocking(c.in.get());
  set_nonblocking(c.out.get());
  set_nonblocking(c.err.get());
  children_.emplace(id, std::move(c));
  if (options_.report_pids) {
    append_frame(out_queue_, FrameType::kStarted, id, encode_pid(static_cast<std::uint32_t>(pid)));
  }
}

void Agent::handle(const Frame& f) {
  if (f.type == FrameType::kOpen) {
    if (shutting_down_) return failed(f.id, "the agent is shutting down");
    return open_child(f.id, f.payload);
  }
  switch (f.type) {
    case FrameType::kRelayOpen: {
      const std::string why =
          shutting_down_ ? "the agent is shutting down" : relay_.open(f.payload);
      if (!why.empty()) {
        hora::write_all(2, fmt::format("horarun --agent: cannot relay: {}\n", why));
        rc_ = 2;
        begin_shutdown();
      }
      return;
    }
    case FrameType::kRelayData: return relay_.data(f.id, f.payload);
    case FrameType::kRelayClose: return relay_.close(f.id);
    case FrameType::kRelayKill: return relay_.kill(f.id, f.payload);
    default: break;
  }
  const auto it = children_.find(f.id);
  if (it == children_.end()) return;  // a child that already ended; late input is dropped
  Child& c = it->second;
  switch (f.type) {
    case FrameType::kStdin:
      if (c.in && !c.eof_requested) c.in_queue += f.payload;
      break;
    case FrameType::kStdinEof:
      c.eof_requested = true;
      if (c.in_queue.empty()) c.in.reset();
      break;
    case FrameType::kClose:
      c.in_queue.clear();
      c.in.reset();
      c.out.reset();
      c.err.reset();
      if (!c.kill_at) c.kill_at = Clock::now() + kCloseKillAfter;
      break;
    default: break;  // agent -> launcher types are ignored when they come the other way
  }
}

void Agent::read_launcher() {
  char buf[64 * 1024];
  const ssize_t n = ::read(in_fd_, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    input_open_ = false;
    begin_shutdown();
    return;
  }
  decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  while (std::optional<Frame> f = decoder_.next()) handle(*f);
  if (!decoder_.error().empty()) {
    const std::string why =
        fmt::format("horarun --agent: protocol error from the launcher: {}\n", decoder_.error());
    hora::write_all(2, why);
    rc_ = 2;
    input_open_ = false;
    begin_shutdown();
  }
}

void Agent::read_child(std::uint32_t id, Child& c, bool stderr_stream) {
  UniqueFd& fd = stderr_stream ? c.err : c.out;
  char buf[64 * 1024];
  while (fd && out_queue_.size() < kOutputHighWater) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      fd.reset();
      return;
    }
    append_chunked(out_queue_, stderr_stream ? FrameType::kStderr : FrameType::kStdout, id,
                   std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

void Agent::write_child(Child& c) {
  while (c.in && !c.in_queue.empty()) {
    const ssize_t n = ::write(c.in.get(), c.in_queue.data(), c.in_queue.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // the child closed its stdin: what is left cannot be delivered
      c.in_queue.clear();
      c.in.reset();
      return;
    }
    c.in_queue.erase(0, static_cast<std::size_t>(n));
  }
  if (c.in && c.in_queue.empty() && c.eof_requested) c.in.reset();
}

void Agent::reap() {
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& [id, c] : children_) {
      if (c.pid == pid) {
        c.reaped = true;
        c.wstatus = status;
      }
    }
  }
}

// Children that were reaped: their remaining output (what they wrote before exiting is in the
// pipes), then EXIT. Output pipes still held open by a grandchild are not waited for.
void Agent::finish_children() {
  for (auto it = children_.begin(); it != children_.end();) {
    Child& c = it->second;
    if (!c.reaped) {
      ++it;
      continue;
    }
    if (out_queue_.size() >= kOutputHighWater && (c.out || c.err)) {
      ++it;  // drain later, when the launcher took some
      continue;
    }
    read_child(it->first, c, false);
    read_child(it->first, c, true);
    if (out_queue_.size() >= kOutputHighWater && (c.out || c.err)) {
      ++it;
      continue;
    }
    ExitCode code;
    if (WIFEXITED(c.wstatus)) code.status = static_cast<std::uint32_t>(WEXITSTATUS(c.wstatus));
    if (WIFSIGNALED(c.wstatus)) code.signal = static_cast<std::uint32_t>(WTERMSIG(c.wstatus));
    append_frame(out_queue_, FrameType::kExit, it->first, encode_exit(code));
    it = children_.erase(it);
  }
}

void Agent::flush_output() {
  while (!out_queue_.empty() && !output_broken_) {
    const ssize_t n = ::write(out_fd_, out_queue_.data(), out_queue_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      // Nobody reads us any more: the launcher is gone. Stop the job's processes.
      output_broken_ = true;
      out_queue_.clear();
      begin_shutdown();
      return;
    }
    out_queue_.erase(0, static_cast<std::size_t>(n));
  }
}

int Agent::next_deadline_ms() const {
  std::optional<Clock::time_point> next;
  if (shutting_down_ && !killed_) next = kill_at_;
  for (const auto& [id, c] : children_) {
    if (c.kill_at && !c.reaped && (!next || *c.kill_at < *next)) next = c.kill_at;
  }
  if (!next || next_heartbeat_ < *next) next = next_heartbeat_;
  return static_cast<int>(std::max<long long>(
      1, std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count()));
}

void Agent::heartbeat() {
  const auto now = Clock::now();
  if (now < next_heartbeat_) return;
  next_heartbeat_ = now + kHeartbeatInterval;
  if (output_broken_) return;
  append_frame(out_queue_, FrameType::kHeartbeat, 0,
               encode_pid(static_cast<std::uint32_t>(::getpid())));
  // On the launcher's own host (--report-pids) the launcher reads /proc itself.
  if (!options_.report_pids) report_states();
}

void Agent::report_states() {
  std::vector<pid_t> guards;
  for (const auto& [id, c] : children_) {
    if (!c.reaped && c.pid > 0) guards.push_back(c.pid);
  }
  if (guards.empty()) return;
  const std::map<pid_t, StuckProcess> stuck = stuck_processes_of_guards(guards);
  for (auto& [id, c] : children_) {
    if (c.reaped || c.pid <= 0) continue;
    const auto found = stuck.find(c.pid);
    const char state = found == stuck.end() ? 0 : found->second.state;
    if (state == c.reported_state) continue;
    c.reported_state = state;
    std::string payload;
    if (state != 0) {
      payload.push_back(state);
      payload += encode_pid(static_cast<std::uint32_t>(found->second.pid));
    }
    append_frame(out_queue_, FrameType::kState, id, payload);
  }
}

void Agent::kill_overdue() {
  const auto now = Clock::now();
  const bool all = shutting_down_ && !killed_ && now >= kill_at_;
  if (all) killed_ = true;
  for (auto& [id, c] : children_) {
    if (c.reaped) continue;
    if (all || (c.kill_at && now >= *c.kill_at)) {
      ::kill(c.pid, SIGKILL);
      c.kill_at.reset();
    }
  }
}

void Agent::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  kill_at_ = Clock::now() + kGrace;
  relay_.close_all();  // the relayed hosts' agents see their stdin end and stop their ranks
  for (auto& [id, c] : children_) {
    c.in_queue.clear();
    c.in.reset();  // a guard takes EOF as the order to stop its rank
  }
}

int Agent::run() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  sigfd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_) {
    hora::write_all(2, fmt::format("horarun --agent: signalfd: {}\n", std::strerror(errno)));
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);

  // The preflight's report: this host's interfaces, then the switch to frames.
  std::ostringstream report;
  run_probe_interfaces(report);
  hora::write_all(out_fd_, report.str());
  hora::write_all(out_fd_, kReadyLine);
  set_nonblocking(in_fd_);
  set_nonblocking(out_fd_);

  while (true) {
    if (shutting_down_ && children_.empty() && (out_queue_.empty() || output_broken_) &&
        relay_.idle()) {
      break;
    }
    kill_overdue();
    heartbeat();
    std::vector<pollfd> fds;
    std::vector<std::pair<std::uint32_t, int>> who;  // child id, 0 stdin / 1 stdout / 2 stderr
    fds.push_back({sigfd_.get(), POLLIN, 0});
    fds.push_back({input_open_ ? in_fd_ : -1, POLLIN, 0});
    fds.push_back({!out_queue_.empty() && !output_broken_ ? out_fd_ : -1, POLLOUT, 0});
    const bool room = out_queue_.size() < kOutputHighWater;
    const bool relay_again = relay_.add_pollfds(fds, room);
    const std::size_t children_first = fds.size();
    for (auto& [id, c] : children_) {
      if (c.in && !c.in_queue.empty()) {
        fds.push_back({c.in.get(), POLLOUT, 0});
        who.emplace_back(id, 0);
      }
      if (room && c.out) {
        fds.push_back({c.out.get(), POLLIN, 0});
        who.emplace_back(id, 1);
      }
      if (room && c.err) {
        fds.push_back({c.err.get(), POLLIN, 0});
        who.emplace_back(id, 2);
      }
    }
    if (::poll(fds.data(), fds.size(), relay_again ? 0 : next_deadline_ms()) < 0 &&
        errno != EINTR) {
      hora::write_all(2, fmt::format("horarun --agent: poll: {}\n", std::strerror(errno)));
      begin_shutdown();
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(sigfd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo == SIGCHLD) continue;
        if (!shutting_down_ && !output_broken_) {
          // Before the children stop: the launcher then names this agent, not their exits.
          const int sig = static_cast<int>(info.ssi_signo);
          const char* abbrev = ::sigabbrev_np(sig);
          append_frame(out_queue_, FrameType::kEnding, 0,
                       fmt::format("was terminated by signal {} (SIG{})", sig,
                                   abbrev != nullptr ? abbrev : "?"));
        }
        begin_shutdown();
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) read_launcher();
    relay_.pump(out_queue_.size() < kOutputHighWater);
    for (std::size_t i = 0; i < who.size(); ++i) {
      const short ev = fds[children_first + i].revents;
      if (ev == 0) continue;
      const auto it = children_.find(who[i].first);
      if (it == children_.end()) continue;
      if (who[i].second == 0)
        write_child(it->second);
      else
        read_child(it->first, it->second, who[i].second == 2);
    }
    reap();
    finish_children();
    if (fds[2].revents != 0 || !out_queue_.empty()) flush_output();
  }
  return rc_;
}

}  // namespace

int run_agent(int in_fd, int out_fd, AgentOptions options) {
  Agent agent(in_fd, out_fd, options);
  return agent.run();
}

}  // namespace hora::cli::agent
