// A rank on this machine as the launcher runs it: AgentRankProcessFactory starts the local agent
// (`horarun --agent --report-pids`, path in $HORARUN) and each rank's guard is the agent's child.
// Real processes, real pipes; every wait has a deadline.
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "cli/agent/process_state.h"
#include "cli/spawn/agent_rank_process.h"

using namespace hora::cli;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::string horarun_path() {
  const char* p = std::getenv("HORARUN");
  REQUIRE(p != nullptr);  // set by test/cli/meson.build
  return p;
}

// One rank under the guard, with its output and exit collected.
struct Harness {
  boost::asio::io_context io;
  HostSpec host{"", "localhost", 1};
  std::unique_ptr<AgentRankProcessFactory> factory;
  std::unique_ptr<RankProcess> process;
  std::string out, err;
  bool out_closed = false, err_closed = false;
  std::optional<ExitStatus> exit;

  void start(std::vector<std::string> argv, GuardRequest request = {}) {
    factory =
        std::make_unique<AgentRankProcessFactory>(io, std::vector<HostSpec>{host},
                                                  std::map<int, RemoteHost>{}, horarun_path());
    process = factory->create(0, host);
    request.argv = std::move(argv);
    RankProcess::Events ev;
    ev.on_output = [this](Stream s, std::string_view d) {
      (s == Stream::kStdout ? out : err).append(d);
    };
    ev.on_output_closed = [this](Stream s) {
      (s == Stream::kStdout ? out_closed : err_closed) = true;
    };
    ev.on_exit = [this](const ExitStatus& st) { exit = st; };
    process->start(request, std::move(ev));
  }

  // Runs the io_context until pred() holds; fails after the deadline.
  void run_until(const std::function<bool()>& pred, std::chrono::seconds deadline = 15s) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (!pred()) {
      REQUIRE(std::chrono::steady_clock::now() < end);
      io.run_for(20ms);
      io.restart();
    }
  }
  void run_to_end() {
    run_until([this] { return exit.has_value() && out_closed && err_closed; });
  }
};

bool process_gone(pid_t pid) {
  // Gone, or a zombie of someone else's (the guard reaps what it adopts before exiting).
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  return parse_stat_state(line) == 'Z';
}

// Polls a condition with a deadline (the process ends asynchronously), not a sync point.
bool wait_gone(pid_t pid, std::chrono::seconds deadline = 10s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!process_gone(pid) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(10ms);
  }
  return process_gone(pid);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const std::size_t paren = line.rfind(')');
  REQUIRE(paren != std::string::npos);
  std::istringstream rest(line.substr(paren + 2));
  char state = 0;
  long ppid = 0;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

}  // namespace

TEST_CASE("exit code, stdout and stderr come back") {
  Harness h;
  h.start({"sh", "-c", "echo out; echo err >&2; printf partial; exit 3"});
  h.run_to_end();
  CHECK_FALSE(h.exit->signaled);
  CHECK(h.exit->code == 3);
  CHECK(h.exit->exit_code() == 3);
  CHECK(h.exit->describe() == "exited with code 3");
  CHECK(h.out == "out\npartial");
  CHECK(h.err == "err\n");
  CHECK_FALSE(h.process->running());
}

TEST_CASE("a rank killed by a signal is reported as that signal") {
  Harness h;
  h.start({"sh", "-c", "kill -USR1 $$"});
  h.run_to_end();
  CHECK(h.exit->signaled);
  CHECK(h.exit->signal == SIGUSR1);
  CHECK(h.exit->exit_code() == 128 + SIGUSR1);
  CHECK(h.exit->describe() == "was killed by signal 10 (SIGUSR1)");
}

TEST_CASE("environment, working directory and stdin of the command") {
  Harness h;
  GuardRequest r;
  r.cwd = "/usr";
  r.env = {{"HORA_TEST_VAR", "two\nlines"}, {"PATH", "/usr/bin:/bin"}};
  h.start({"sh", "-c", "printf '%s|' \"$HORA_TEST_VAR\"; pwd; cat; echo end"}, r);
  h.run_to_end();
  CHECK(h.exit->success());
  // stdin is /dev/null: cat ends at once instead of reading the guard's protocol pipe.
  CHECK(h.out == "two\nlines|/usr\nend\n");
}

TEST_CASE("the command runs in its own process group, not horarun's") {
  Harness h;
  h.start({"sh", "-c", "ps -o pgid= -p $$; ps -o pid= -p $$"});
  h.run_to_end();
  REQUIRE(h.exit->success());
  std::istringstream lines(h.out);
  long pgid = 0, pid = 0;
  lines >> pgid >> pid;
  CHECK(pgid == pid);
  CHECK(pgid != static_cast<long>(::getpgrp()));
}

TEST_CASE("terminate ends the rank with SIGTERM") {
  Harness h;
  h.start({"sh", "-c", "echo ready; exec sleep 100"});
  h.run_until([&] { return h.out == "ready\n"; });
  const auto t0 = std::chrono::steady_clock::now();
  h.process->terminate();
  h.run_to_end();
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(h.exit->signaled);
  CHECK(h.exit->signal == SIGTERM);
}

TEST_CASE("a rank ignoring SIGTERM gets SIGKILL after the grace") {
  Harness h;
  GuardRequest r;
  r.grace = 300ms;
  h.start({"sh", "-c", "trap '' TERM; echo ready; sleep 100; echo survived"}, r);
  h.run_until([&] { return h.out == "ready\n"; });
  const auto t0 = std::chrono::steady_clock::now();
  h.process->terminate();
  h.run_to_end();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 300ms);  // a lower bound: no load can break it
  // No upper bound: SIGKILL (not an exit after `sleep 100`) proves the grace ended it.
  CHECK(h.exit->signaled);
  CHECK(h.exit->signal == SIGKILL);
  CHECK(h.out == "ready\n");
}

TEST_CASE("processes left in the rank's group are ended when the command exits") {
  Harness h;
  h.start({"sh", "-c", "sleep 100 & echo $!"});
  h.run_to_end();
  CHECK(h.exit->success());
  const pid_t leftover = static_cast<pid_t>(std::stol(h.out));
  CHECK(process_gone(leftover));
}

TEST_CASE("kill() ends the guard and the command with it") {
  Harness h;
  h.start({"sh", "-c", "echo $$; exec sleep 100"});
  h.run_until([&] { return !h.out.empty() && h.out.back() == '\n'; });
  const pid_t command = static_cast<pid_t>(std::stol(h.out));
  const pid_t guard = h.process->local_guard_pid();
  REQUIRE(guard > 0);
  h.process->kill();
  // The channel is closed by us: the rank is over for the supervisor at once (ssh(1)'s 255).
  h.run_until([&] { return h.exit.has_value(); });
  CHECK(h.exit->code == 255);
  CHECK_FALSE(h.process->running());
  // The agent closed the guard's stdin: the guard stops its command and exits.
  CHECK(wait_gone(command));
  CHECK(wait_gone(guard));
}

TEST_CASE("the guard's pid comes from the local agent, whose child it is") {
  Harness h;
  h.start({"sh", "-c", "echo ready; exec sleep 100"});
  h.run_until([&] { return h.out == "ready\n" && h.process->local_guard_pid() > 0; });
  const pid_t guard = h.process->local_guard_pid();
  CHECK_THAT(read_file("/proc/" + std::to_string(guard) + "/cmdline"), Contains("--guard"));
  // Its parent is the agent, a child of this process.
  const pid_t agent = parent_of(guard);
  CHECK(parent_of(agent) == ::getpid());
  CHECK_THAT(read_file("/proc/" + std::to_string(agent) + "/cmdline"), Contains("--agent"));
  h.process->terminate();
  h.run_to_end();
  CHECK(h.process->local_guard_pid() == -1);
}

TEST_CASE("a guard that does not answer a close is SIGKILLed by the agent") {
  Harness h;
  h.start({"sh", "-c", "echo $$; exec sleep 100"});
  h.run_until(
      [&] { return !h.out.empty() && h.out.back() == '\n' && h.process->local_guard_pid() > 0; });
  const pid_t command = static_cast<pid_t>(std::stol(h.out));
  const pid_t guard = h.process->local_guard_pid();
  // A stopped guard cannot see its stdin close; only the agent's SIGKILL ends it (and its
  // command with it, through PR_SET_PDEATHSIG).
  REQUIRE(::kill(guard, SIGSTOP) == 0);
  h.process->kill();
  h.run_until([&] { return h.exit.has_value(); });
  CHECK(wait_gone(guard, 30s));
  CHECK(wait_gone(command, 30s));
}

TEST_CASE("a command that cannot be run exits 127 with a message naming it") {
  Harness h;
  GuardRequest r;
  r.env = {{"HORA_RANK", "0"}, {"HORA_HOSTNAME", "localhost"}};
  h.start({"/no/such/program", "arg"}, r);
  h.run_to_end();
  CHECK(h.exit->code == 127);
  CHECK_THAT(h.err, Contains("(rank 0 on localhost)") &&
                        Contains("cannot run '/no/such/program'") &&
                        Contains("No such file or directory"));
}

TEST_CASE("a working directory that does not exist is reported") {
  Harness h;
  GuardRequest r;
  r.cwd = "/no/such/dir";
  h.start({"true"}, r);
  h.run_to_end();
  CHECK(h.exit->code == 1);
  CHECK_THAT(h.err, Contains("cannot enter the working directory '/no/such/dir'"));
}
