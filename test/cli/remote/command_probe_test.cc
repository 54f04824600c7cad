// The preflight's program check: the snippet run by a real /bin/sh, judged as the preflight does.
#include "cli/remote/command_probe.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

using namespace hora::cli;

namespace {

// Runs the snippet as the probe would (sh -c) and returns its stdout.
std::string run_snippet(const std::string& snippet) {
  const std::string cmd = "/bin/sh -c '" + [&] {
    std::string q;
    for (char c : snippet) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q;
  }() + "'";
  FILE* f = ::popen(cmd.c_str(), "r");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  REQUIRE(::pclose(f) == 0);
  return out;
}

std::string verdict(const CommandCheck& check, std::string* rest = nullptr) {
  std::string out = run_snippet(command_probe_snippet(check) + "; echo after");
  std::string v = take_command_verdict(out, check, "h1");
  if (rest) *rest = out;
  return v;
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/command_probe_test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  void file(const std::string& name, mode_t mode) {
    std::ofstream(path + "/" + name) << "#!/bin/sh\n";
    ::chmod((path + "/" + name).c_str(), mode);
  }
  std::string path;
};

}  // namespace

TEST_CASE("a bare name is searched in the PATH the ranks get") {
  TempDir d;
  d.file("mytool", 0755);
  d.file("notexec", 0644);
  CommandCheck check{"mytool", "/", "/nonexistent:" + d.path};
  std::string rest;
  CHECK(verdict(check, &rest) == "");
  CHECK(rest == "after\n");  // the line is taken off; the rest of the output stays
  check.program = "python-not-here-xyz";
  const std::string missing = verdict(check);
  CHECK_THAT(missing,
             Catch::Contains("h1: 'python-not-here-xyz' is not found there in PATH=/nonexistent:" +
                             d.path));
  CHECK_THAT(missing, Catch::Contains("-x PATH="));
  check.program = "notexec";  // a file without x is not a program, as for execvp
  CHECK_THAT(verdict(check), Catch::Contains("is not found there"));
  // Shell builtins are not programs: only files count.
  check.program = "cd";
  check.path = d.path;
  CHECK_THAT(verdict(check), Catch::Contains("is not found"));
}

TEST_CASE("without a forwarded PATH the remote user's own is searched and shown") {
  CommandCheck check{"sh", "/", std::nullopt};
  CHECK(verdict(check) == "");
  check.program = "no-such-program-xyz";
  CHECK_THAT(verdict(check), Catch::Contains("PATH=" + std::string(std::getenv("PATH"))));
  CHECK_THAT(verdict(check), Catch::Contains("the remote user's PATH"));
}

TEST_CASE("a program with a slash is checked relative to the ranks' directory") {
  TempDir d;
  d.file("train", 0755);
  d.file("data.txt", 0644);
  CommandCheck check{"./train", d.path, std::nullopt};
  CHECK(verdict(check) == "");
  check.program = "./data.txt";
  CHECK_THAT(verdict(check), Catch::Contains("is not an executable file"));
  check.program = "./missing";
  CHECK_THAT(verdict(check), Catch::Contains("does not exist there (relative to " + d.path + ")"));
  check.program = d.path + "/train";
  check.cwd = "/";
  CHECK(verdict(check) == "");
}

TEST_CASE("names with shell characters are quoted") {
  TempDir d;
  d.file("it's $x", 0755);
  CommandCheck check{"it's $x", "/", d.path};
  CHECK(verdict(check) == "");
}

TEST_CASE("command_check_for picks the PATH: -x, else horarun's when forwarded, else none") {
  Options o;
  o.command = {"python3", "train.py"};
  const Environment env = {{"PATH", "/venv/bin:/usr/bin"}};
  CHECK(command_check_for(o, env, "/w").path == std::optional<std::string>("/venv/bin:/usr/bin"));
  o.forward_environment = false;
  CHECK_FALSE(command_check_for(o, env, "/w").path);
  o.env_forward = {{"PATH", "/x"}};
  CHECK(command_check_for(o, env, "/w").path == std::optional<std::string>("/x"));
  CHECK(command_check_for(o, env, "/w").program == "python3");
  CHECK(command_check_for(Options{}, env, "/w").program.empty());
  CHECK(command_probe_snippet(CommandCheck{}).empty());
}
