// `horarun --agent`: the one process horarun starts on each host of a job (docs/agent.md). The
// preflight starts it over one SSH exec channel, so the host's login shell runs once per job.
// It prints the host's interfaces (the --probe-interfaces report) and then the line
// "HORA-AGENT ready 1"; from there its stdin and stdout carry frames (cli/agent/frame.h).
//
// The launcher's own host runs its ranks through an agent too, a child of horarun on a socketpair
// (cli/agent/pipe_stream.h), so local and remote ranks take one code path.
//
// On OPEN it starts a child: this same binary with the given arguments, one of the hidden modes
// (--guard, --probe-listen, --probe-connect, --probe-interfaces), in the given directory, with
// pipes for stdin, stdout and stderr that it multiplexes on the channel. No shell runs; no
// secret is ever on a command line (a guard reads its request from stdin, as before).
//
// Lifetime: the agent lives exactly as long as its channel. When its stdin ends (horarun closed
// the channel, the connection dropped, horarun was killed) or it gets SIGTERM/SIGHUP/SIGINT, it
// closes every child's stdin — a guard then stops its rank's process group — waits for them at
// most kGrace, SIGKILLs what is left and exits. A CLOSE of one child does the same for that child.
// If the agent itself is SIGKILLed, the children's stdin pipes close with it and their
// PR_SET_PDEATHSIG fires: the guards stop their ranks. No process of the job outlives the agent,
// and the agent never outlives the job.
#pragma once

#include <chrono>

namespace hora::cli::agent {

// The line after which the channel carries frames (the preflight reads up to it).
inline constexpr const char* kReadyLine = "HORA-AGENT ready 1\n";

inline constexpr std::chrono::milliseconds kGrace{3000};

// How long after a CLOSE a child that has not exited is SIGKILLed (a guard normally stops its
// rank and exits within its own grace once its stdin closes).
inline constexpr std::chrono::milliseconds kCloseKillAfter{kGrace};

struct AgentOptions {
  // Send a STARTED frame with each child's pid (`horarun --agent --report-pids`): the launcher's
  // own host, whose stall check looks at the guards' processes.
  bool report_pids = false;
};

// Runs the agent on `in_fd`/`out_fd` (stdin/stdout); diagnostics go to stderr. Returns the exit
// code: 0 after a normal end, 2 after a protocol error from the launcher.
int run_agent(int in_fd, int out_fd, AgentOptions options = {});

}  // namespace hora::cli::agent
