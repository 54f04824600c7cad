// horarun's entry point: gathers argv, the environment and the working directory, hands them
// to the launch pipeline (cli/launch/launcher.h) and maps its exceptions to exit codes
// (docs/errors.md).
// `horarun --guard` is the hidden guard mode every rank runs under (docs/launcher.md).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/agent/agent.h"
#include "cli/base/errors.h"
#include "cli/launch/launcher.h"
#include "cli/network/probe.h"
#include "cli/spawn/guard.h"

extern char** environ;

namespace {

using namespace hora::cli;

Environment gather_environment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::string current_directory() {
  std::vector<char> buf(4096);
  while (::getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE) {
      throw Error(fmt::format("cannot read the current directory: {}", std::strerror(errno)));
    }
    buf.resize(buf.size() * 2);
  }
  return buf.data();
}

// Descriptors 0-2 closed by the caller (`horarun ... >&-`) would be taken by the first socket or
// pipe horarun opens, and rank output would be written into an SSH connection or an eventfd.
// Point each closed one at /dev/null first (open() returns the lowest free descriptor).
void ensure_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ensure_standard_descriptors();
  if (argc >= 2 && std::strcmp(argv[1], "--guard") == 0) return run_guard();
  // The per-host agent, started by the preflight on every remote host (cli/agent/agent.h).
  if (argc >= 2 && std::strcmp(argv[1], "--agent") == 0) {
    agent::AgentOptions options;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--report-pids") != 0) {
        fmt::print(stderr, "horarun --agent: unknown option '{}'\n", argv[i]);
        return 2;
      }
      options.report_pids = true;
    }
    return agent::run_agent(0, 1, options);
  }
  // Hidden probe modes run on remote hosts by the preflight (cli/network/probe.h).
  if (const int rc = maybe_run_probe_mode(argc, argv); rc >= 0) return rc;

  // A closed terminal or pipe is handled where output is written; it must not kill the job.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    LaunchContext ctx;
    ctx.args.assign(argv + 1, argv + argc);
    ctx.env = gather_environment();
    ctx.cwd = current_directory();
    return run_launcher(ctx);
  } catch (const UsageError& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "horarun: {}\n", e.what());
    return 1;
  }
}
