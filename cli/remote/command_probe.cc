#include "cli/remote/command_probe.h"

#include <fmt/format.h>

#include <algorithm>

#include "ssh/format.h"

namespace hora::cli {
namespace {

constexpr std::string_view kTag = "HORA-COMMAND ";

}  // namespace

CommandCheck command_check_for(const Options& options, const Environment& env,
                               const std::string& cwd) {
  CommandCheck check;
  if (options.command.empty()) return check;
  check.program = options.command.front();
  check.cwd = cwd;
  const auto x = std::find_if(options.env_forward.rbegin(), options.env_forward.rend(),
                              [](const auto& kv) { return kv.first == "PATH"; });
  if (x != options.env_forward.rend()) {
    check.path = x->second;
  } else if (options.forward_environment) {
    if (auto it = env.find("PATH"); it != env.end()) check.path = it->second;
  }
  return check;
}

std::string command_probe_snippet(const CommandCheck& check) {
  if (check.program.empty()) return {};
  const std::string prog = ssh::shell_quote(check.program);
  // In a subshell: the probe's own directory and PATH stay as they were.
  std::string s = fmt::format("(cd {} 2>/dev/null; ", ssh::shell_quote(check.cwd));
  if (check.path) s += fmt::format("PATH={}; ", ssh::shell_quote(*check.path));
  if (check.program.find('/') != std::string::npos) {
    return s + fmt::format(
                   "if [ -f {0} ] && [ -x {0} ]; then echo '{1}found '{0}; elif [ -e {0} ]; then "
                   "echo '{1}not-executable '{0}; else echo '{1}missing '\"$PATH\"; fi)",
                   prog, kTag);
  }
  // Each PATH entry in turn, an empty one meaning the current directory (as execvp).
  return s + fmt::format(
                 "hora_found=; hora_ifs=$IFS; IFS=:; for hora_d in $PATH; do "
                 "[ -n \"$hora_d\" ] || hora_d=.; "
                 "if [ -f \"$hora_d\"/{0} ] && [ -x \"$hora_d\"/{0} ]; then "
                 "hora_found=\"$hora_d\"/{0}; break; fi; done; IFS=$hora_ifs; "
                 "if [ -n \"$hora_found\" ]; then echo \"{1}found $hora_found\"; "
                 "else echo \"{1}missing $PATH\"; fi)",
                 prog, kTag);
}

std::string take_command_verdict(std::string& probe_output, const CommandCheck& check,
                                 const std::string& where) {
  if (check.program.empty()) return {};
  const std::size_t nl = probe_output.find('\n');
  const std::string line = probe_output.substr(0, nl);
  probe_output = nl == std::string::npos ? std::string() : probe_output.substr(nl + 1);
  if (line.rfind(kTag, 0) != 0) {
    return fmt::format("{}: the check for the program '{}' printed no result", where,
                       check.program);
  }
  const std::string rest = line.substr(kTag.size());
  const std::size_t sp = rest.find(' ');
  const std::string state = rest.substr(0, sp);
  const std::string detail = sp == std::string::npos ? std::string() : rest.substr(sp + 1);
  if (state == "found") return {};
  const std::string path_source =
      check.path ? "the PATH the ranks get (horarun's, or -x PATH)" : "the remote user's PATH";
  if (state == "not-executable") {
    return fmt::format("{}: '{}' exists there (in {}) but is not an executable file", where,
                       check.program, check.cwd);
  }
  if (check.program.find('/') != std::string::npos) {
    return fmt::format(
        "{}: '{}' does not exist there (relative to {}); install it there or "
        "give a path that exists on every host",
        where, check.program, check.cwd);
  }
  return fmt::format(
      "{}: '{}' is not found there in PATH={} ({}); install it there, give its "
      "absolute path, or set the ranks' PATH with -x PATH=...",
      where, check.program, detail, path_source);
}

}  // namespace hora::cli
