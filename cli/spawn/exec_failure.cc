#include "cli/spawn/exec_failure.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>

namespace hora::cli {
namespace {

// The file execvp would have tried: `command` itself when it has a '/', else the first entry
// of `path` that holds something of that name. nullopt when there is none.
std::optional<std::string> locate(const std::string& command, const std::string& path) {
  struct stat st {};
  if (command.find('/') != std::string::npos) {
    if (::stat(command.c_str(), &st) == 0) return command;
    return std::nullopt;
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    // An empty entry means the current directory. (Built by appending: gcc 12's -Wrestrict
    // misfires on assigning a literal to the substring.)
    std::string candidate = colon == start ? std::string(".") : path.substr(start, colon - start);
    candidate += '/';
    candidate += command;
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
    start = colon + 1;
  }
  return std::nullopt;
}

// The interpreter a `#!` line names, or nullopt when the file does not start with one.
std::optional<std::string> shebang_interpreter(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char head[2] = {0, 0};
  if (!in.read(head, 2) || head[0] != '#' || head[1] != '!') return std::nullopt;
  std::string line;
  std::getline(in, line);
  const std::size_t b = line.find_first_not_of(" \t");
  if (b == std::string::npos) return std::string();
  const std::size_t e = line.find_first_of(" \t\r", b);
  return line.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

bool is_directory(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// How to run `command` through an interpreter: "python3 train.py" for a Python script, else a
// generic hint.
std::string with_interpreter(const std::string& command) {
  const bool python = command.size() > 3 && command.compare(command.size() - 3, 3, ".py") == 0;
  return python ? fmt::format("give its interpreter first (horarun ... python3 {})", command)
                : fmt::format("give its interpreter first (horarun ... bash {}, python3 {}, ...)",
                              command, command);
}

}  // namespace

std::string exec_failure_message(const std::string& command, int err, const std::string& path) {
  const std::optional<std::string> file = locate(command, path);
  if (file && is_directory(*file)) {
    return fmt::format("cannot run '{}': {} is a directory, not a program", command, *file);
  }
  if (file && err == ENOENT) {
    // The file is there, so what is missing is what the kernel loads to run it.
    if (const std::optional<std::string> interp = shebang_interpreter(*file)) {
      if (interp->empty()) {
        return fmt::format("cannot run '{}': its #! line names no interpreter", command);
      }
      return fmt::format(
          "cannot run '{}': its #! interpreter '{}' does not exist; install it or fix the "
          "script's first line",
          command, *interp);
    }
    return fmt::format(
        "cannot run '{}': {} exists, but the loader it needs does not (a program built for "
        "another system?)",
        command, *file);
  }
  if (!file && err == ENOENT && command.find('/') == std::string::npos && is_regular(command)) {
    // `horarun -np 2 train.py`: there, but a command without a '/' is looked up in PATH only.
    return fmt::format(
        "cannot run '{}': a command without a '/' is looked up in PATH, and '{}' is in the "
        "current directory; write ./{} (if it is executable, with a #! line), or {}",
        command, command, command, with_interpreter(command));
  }
  if (file && err == EACCES && is_regular(*file) && ::access(file->c_str(), X_OK) != 0) {
    return fmt::format(
        "cannot run '{}': {}: {} is not executable; {}, or make it executable (chmod +x, with a "
        "#! line)",
        command, std::strerror(err), *file, with_interpreter(command));
  }
  return fmt::format("cannot run '{}': {}{}", command, std::strerror(err),
                     err == ENOENT ? "; check the command and PATH" : "");
}

std::string script_without_interpreter_message(const std::string& command,
                                               const std::string& path) {
  const bool python = command.size() > 3 && command.compare(command.size() - 3, 3, ".py") == 0;
  if (!python) return "";
  const std::optional<std::string> file = locate(command, path);
  if (!file || !is_regular(*file) || ::access(file->c_str(), X_OK) != 0) return "";
  if (shebang_interpreter(*file)) return "";
  return fmt::format(
      "cannot run '{}': {} has no #! line, so it would run as a shell script; {}, or make its "
      "first line #!/usr/bin/env python3",
      command, *file, with_interpreter(command));
}

int exec_failure_exit_code(const std::string& command, int err, const std::string& path) {
  return err == ENOENT && !locate(command, path) ? 127 : 126;
}

}  // namespace hora::cli
