// cli/agent/process_state.h: the state letter of /proc/<pid>/stat, and a stopped process among
// a "guard"'s children (this test process plays the guard).
#include "cli/agent/process_state.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using hora::cli::parse_stat_state;
using hora::cli::stuck_process_of_guard;

TEST_CASE("the state is the field after the last ')', whatever the command name holds") {
  CHECK(parse_stat_state("1234 (python3) S 1 1234 1234 0") == 'S');
  CHECK(parse_stat_state("1234 (a) T (b) t 1 1234 1234 0") == 't');
  CHECK(parse_stat_state("1234 (x") == std::nullopt);
  CHECK(parse_stat_state("") == std::nullopt);
}

TEST_CASE("a stopped child of the guard is found, with its state; a sleeping one is not") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::setpgid(0, 0);
    ::pause();
    ::_exit(0);
  }
  CHECK_FALSE(stuck_process_of_guard(::getpid()).has_value());
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int st = 0;
  REQUIRE(::waitpid(child, &st, WUNTRACED) == child);  // stopped now
  const auto stuck = stuck_process_of_guard(::getpid());
  REQUIRE(stuck.has_value());
  CHECK(stuck->pid == child);
  CHECK(stuck->state == 'T');
  CHECK(stuck->describe() == "state T, stopped");
  ::kill(child, SIGKILL);
  ::waitpid(child, &st, 0);
}
