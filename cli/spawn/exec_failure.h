// Why a rank's command could not be started, said plainly: the guard's child calls this when
// execvp() fails. errno alone misleads: a script whose `#!` interpreter is missing fails with
// ENOENT though the script exists, and a directory fails with EACCES.
#pragma once

#include <string>

namespace hora::cli {

// The message for `command` (argv[0] as given, searched in `path` like execvp when it has no
// '/') failing with `err`, e.g. "cannot run './train.sh': its #! interpreter '/usr/bin/python9'
// does not exist; install it or fix the script's first line".
std::string exec_failure_message(const std::string& command, int err, const std::string& path);

// Before exec: a message when `command` is a Python script (`.py`) that would run but has no `#!`
// line. execvp hands such a file to /bin/sh, which fails with "Syntax error: word unexpected"
// or "import: not found"; the message says to run it with its interpreter
// (`horarun ... python3 train.py`). "" otherwise (exec then goes on as usual).
std::string script_without_interpreter_message(const std::string& command, const std::string& path);

// The exit code a shell gives the same failure: 127 when the command was not found, else 126.
int exec_failure_exit_code(const std::string& command, int err, const std::string& path);

}  // namespace hora::cli
