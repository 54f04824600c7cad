// Messages for a rank's command that cannot be run: each case makes the real
// file, runs execv on it to get the kernel's errno, and checks what the guard would say.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/spawn/exec_failure.h"

using Catch::Matchers::Contains;
using hora::cli::exec_failure_exit_code;
using hora::cli::exec_failure_message;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/hora-exec-failure-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// errno of execv(file) in a child (the test process must not be replaced).
int exec_errno(const std::string& file) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char* argv[] = {const_cast<char*>(file.c_str()), nullptr};
    ::execv(file.c_str(), argv);
    const int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    std::_Exit(0);
  }
  ::close(fds[1]);
  int err = 0;
  const ssize_t n = ::read(fds[0], &err, sizeof err);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(n == static_cast<ssize_t>(sizeof err));
  return err;
}

void write_script(const std::string& file, const std::string& text) {
  std::ofstream(file) << text;
  REQUIRE(::chmod(file.c_str(), 0755) == 0);
}

}  // namespace

TEST_CASE("a script whose #! interpreter is missing says so, not 'No such file'") {
  TempDir dir;
  const std::string script = dir.path + "/train.sh";
  write_script(script, "#!/nonexistent/python9 -u\nprint(1)\n");
  const int err = exec_errno(script);
  REQUIRE(err == ENOENT);
  const std::string msg = exec_failure_message(script, err, "/usr/bin:/bin");
  CHECK_THAT(msg, Contains("#! interpreter '/nonexistent/python9' does not exist"));
  CHECK_THAT(msg, !Contains("No such file"));
  CHECK(exec_failure_exit_code(script, err, "/usr/bin:/bin") == 126);
}

TEST_CASE("a script found in PATH is inspected the same way") {
  TempDir dir;
  write_script(dir.path + "/myjob", "#!/nonexistent/sh\n");
  const int err = exec_errno(dir.path + "/myjob");
  CHECK_THAT(exec_failure_message("myjob", err, "/nonexistent-dir:" + dir.path),
             Contains("#! interpreter '/nonexistent/sh' does not exist"));
}

TEST_CASE("a directory given as the command says it is a directory, not 'Permission denied'") {
  TempDir dir;
  const int err = exec_errno(dir.path);
  const std::string msg = exec_failure_message(dir.path, err, "/usr/bin:/bin");
  CHECK_THAT(msg, Contains(dir.path + " is a directory"));
  CHECK_THAT(msg, !Contains("Permission denied"));
}

TEST_CASE("a command that does not exist keeps the PATH hint and exit code 127") {
  const std::string msg = exec_failure_message("no-such-command-xyz", ENOENT, "/usr/bin:/bin");
  CHECK_THAT(msg, Contains("No such file or directory; check the command and PATH"));
  CHECK(exec_failure_exit_code("no-such-command-xyz", ENOENT, "/usr/bin:/bin") == 127);
}

TEST_CASE("a file without execute permission keeps the system's reason and says how to run it") {
  TempDir dir;
  const std::string file = dir.path + "/train.py";
  std::ofstream(file) << "print(1)\n";
  const int err = exec_errno(file);
  REQUIRE(err == EACCES);
  const std::string msg = exec_failure_message(file, err, "");
  CHECK_THAT(msg, Contains("Permission denied"));
  CHECK_THAT(msg, Contains("is not executable; give its interpreter first (horarun ... python3 " +
                           file + ")"));
  CHECK_THAT(msg, Contains("chmod +x"));
}

TEST_CASE("a script in the current directory named without ./ says PATH is searched") {
  // `horarun -np 2 train.py`, as users type it.
  TempDir dir;
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old) != nullptr);
  REQUIRE(::chdir(dir.path.c_str()) == 0);
  std::ofstream("train.py") << "print(1)\n";
  const std::string msg = exec_failure_message("train.py", ENOENT, "/usr/bin:/bin");
  const int code = exec_failure_exit_code("train.py", ENOENT, "/usr/bin:/bin");
  REQUIRE(::chdir(old) == 0);
  CHECK_THAT(msg, Contains("a command without a '/' is looked up in PATH, and 'train.py' is in "
                           "the current directory; write ./train.py"));
  CHECK_THAT(msg, Contains("horarun ... python3 train.py"));
  CHECK(code == 127);
}

TEST_CASE("an executable Python script without #! is caught before exec hands it to /bin/sh") {
  // `chmod +x train.py; horarun -np 2 ./train.py`: execvp would run it with /bin/sh, which
  // fails with "Syntax error: word unexpected".
  TempDir dir;
  const std::string py = dir.path + "/train.py";
  write_script(py, "import os\nprint(os.getpid())\n");
  const std::string msg = hora::cli::script_without_interpreter_message(py, "");
  CHECK_THAT(msg, Contains("has no #! line, so it would run as a shell script") &&
                      Contains("horarun ... python3 " + py) && Contains("#!/usr/bin/env python3"));
  // Found through PATH too.
  CHECK_THAT(hora::cli::script_without_interpreter_message("train.py", dir.path),
             Contains("horarun ... python3 train.py"));
  // Not caught: a script with #!, a shell script without one (sh runs those on purpose), a file
  // without execute permission (exec fails and exec_failure_message explains), a missing file.
  const std::string ok = dir.path + "/ok.py";
  write_script(ok, "#!/usr/bin/env python3\nprint(1)\n");
  CHECK(hora::cli::script_without_interpreter_message(ok, "").empty());
  const std::string sh = dir.path + "/run.sh";
  write_script(sh, "echo hi\n");
  CHECK(hora::cli::script_without_interpreter_message(sh, "").empty());
  const std::string noexec = dir.path + "/noexec.py";
  std::ofstream(noexec) << "print(1)\n";
  CHECK(hora::cli::script_without_interpreter_message(noexec, "").empty());
  CHECK(hora::cli::script_without_interpreter_message(dir.path + "/missing.py", "").empty());
}
