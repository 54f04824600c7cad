// The preflight's check that the user's program resolves on every remote host (docs/launcher.md,
// "Remote hosts"): a missing `python3` on one host is one preflight error naming the host and
// the PATH searched, not exit 127 from every rank of that host.
//
// The check runs in the preflight's probe command, in the job's working directory, with the
// PATH the rank will get: -x PATH if given, else horarun's PATH when the environment is
// forwarded (the default), else the remote user's own. A program with a '/' is checked as a
// file relative to that directory; a bare name is searched in PATH for an executable file, as
// the guard's execvp does.
#pragma once

#include <optional>
#include <string>

#include "cli/options/options.h"

namespace hora::cli {

struct CommandCheck {
  std::string program;              // argv[0]; empty: no check
  std::string cwd;                  // the ranks' working directory
  std::optional<std::string> path;  // the PATH ranks get; nullopt: the remote user's
};

// The check for this job (empty program when the options have no command).
CommandCheck command_check_for(const Options& options, const Environment& env,
                               const std::string& cwd);

// A POSIX shell snippet that prints one line, `HORA-COMMAND found FILE`, `HORA-COMMAND
// not-executable FILE` or `HORA-COMMAND missing PATH` (the PATH searched). Empty without a
// program.
std::string command_probe_snippet(const CommandCheck& check);

// Takes the HORA-COMMAND line off the front of `probe_output` and judges it: "" when the program
// was found, else the problem ("h1: 'python3' is not in PATH=... there; ..."). A missing line
// is reported as such.
std::string take_command_verdict(std::string& probe_output, const CommandCheck& check,
                                 const std::string& where);

}  // namespace hora::cli
