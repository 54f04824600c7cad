#include <catch2/catch.hpp>

#include "cli/errors.h"
#include "cli/options.h"

using hora::cli::Environment;
using hora::cli::Options;
using hora::cli::parse_options;
using hora::cli::split_command_line;
using hora::cli::UsageError;
using Catch::Matchers::Contains;
using Args = std::vector<std::string>;

TEST_CASE("-np is rewritten among the options only") {
  auto split = split_command_line({"-np", "4", "-H", "localhost:4", "mpirun", "-np", "2", "-cb"});
  CHECK(split.options == Args{"--num-proc", "4", "-H", "localhost:4"});
  CHECK(split.command == Args{"mpirun", "-np", "2", "-cb"});

  CHECK(split_command_line({"-np4", "x"}).options == Args{"--num-proc=4"});
  CHECK(split_command_line({"-np=3", "x"}).options == Args{"--num-proc=3"});
  CHECK(split_command_line({"-cb"}).options == Args{"--check-build"});
  CHECK(split_command_line({"-prefix-timestamp", "-np", "1", "x"}).options ==
        Args{"--prefix-output-with-timestamp", "--num-proc", "1"});
}

TEST_CASE("the command starts at the first non-option or after --") {
  auto split = split_command_line({"--verbose", "-x", "A=1", "--", "--weird-program", "-np"});
  CHECK(split.options == Args{"--verbose", "-x", "A=1"});
  CHECK(split.command == Args{"--weird-program", "-np"});
  // An option's value that looks like a command is still the option's value.
  split = split_command_line({"--output-filename", "out", "--log-level=debug", "train"});
  CHECK(split.options == Args{"--output-filename", "out", "--log-level=debug"});
  CHECK(split.command == Args{"train"});
}

TEST_CASE("horovodrun's options parse into Options") {
  Options o = parse_options({"-np", "8", "-H", "a:4,b:4", "--start-timeout", "45", "--verbose",
                             "--output-filename", "logs", "-prefix-timestamp", "--log-level",
                             "DEBUG", "-p", "12345", "-i", "/k", "--ssh-config", "/c",
                             "--ssh-strict-host-key-checking", "no", "--network-interfaces",
                             "eth0, ib0", "--network-interface", "eth2", "--network-interface",
                             "eth0", "-x", "A=1", "--env", "B", "--tcp", "--force-ssh",
                             "--horarun-path", "/opt/horarun", "./train", "--epochs", "3"},
                            Environment{{"B", "from-env"}});
  CHECK(o.num_proc == 8);
  CHECK(o.hosts == "a:4,b:4");
  CHECK(o.start_timeout == std::chrono::seconds(45));
  CHECK(o.verbose);
  CHECK(o.output_filename == "logs");
  CHECK(o.prefix_timestamp);
  CHECK(o.log_level == "debug");
  CHECK(o.ssh_port == 12345);
  CHECK(o.ssh_identity_file == "/k");
  CHECK(o.ssh_config == "/c");
  CHECK(o.ssh_strict_host_key_checking == "no");
  CHECK(o.network_interfaces == Args{"eth0", "ib0", "eth2"});
  REQUIRE(o.env_forward.size() == 2);
  CHECK(o.env_forward[0] == std::pair<std::string, std::string>{"A", "1"});
  CHECK(o.env_forward[1] == std::pair<std::string, std::string>{"B", "from-env"});
  CHECK(o.tcp);
  CHECK(o.force_ssh);
  CHECK(o.horarun_path == "/opt/horarun");
  CHECK(o.command == Args{"./train", "--epochs", "3"});
  CHECK(o.help_text.empty());
}

TEST_CASE("defaults") {
  Options o = parse_options({"-np", "2", "true"}, {});
  CHECK(o.num_proc == 2);
  CHECK(o.hosts.empty());
  CHECK(o.start_timeout == Options::kDefaultStartTimeout);
  CHECK(o.log_level.empty());
  CHECK(o.ssh_strict_host_key_checking == "accept-new");
  CHECK_FALSE(o.verbose);
  CHECK_FALSE(o.dry_run);
  CHECK_FALSE(o.check_build);
  CHECK(o.command == Args{"true"});
}

TEST_CASE("HOROVOD_START_TIMEOUT applies unless --start-timeout is given") {
  CHECK(parse_options({"-np", "1", "x"}, {{"HOROVOD_START_TIMEOUT", "7"}}).start_timeout ==
        std::chrono::seconds(7));
  CHECK(parse_options({"-np", "1", "--start-timeout", "9", "x"}, {{"HOROVOD_START_TIMEOUT", "7"}})
            .start_timeout == std::chrono::seconds(9));
  CHECK_THROWS_WITH(parse_options({"-np", "1", "x"}, {{"HOROVOD_START_TIMEOUT", "soon"}}),
                    Contains("HOROVOD_START_TIMEOUT='soon'"));
}

TEST_CASE("usage errors say what to change") {
  struct Case {
    Args args;
    const char* says;
  };
  const Case cases[] = {
      {{"./train"}, "-np is required"},
      {{"-np", "2"}, "no command given"},
      {{"-np", "0", "x"}, "at least 1"},
      {{"-np", "two", "x"}, "num-proc"},
      {{"-np", "2", "-H", "a:2", "--hostfile", "f", "x"}, "use one of them"},
      {{"-np", "2", "--bogus", "x"}, "--bogus"},
      {{"-np", "2", "--log-level", "loud", "x"}, "use trace, debug, info, warning or error"},
      {{"-np", "2", "--start-timeout", "0", "x"}, "at least 1"},
      {{"-np", "2", "-p", "70000", "x"}, "1..65535"},
      {{"-np", "2", "--ssh-strict-host-key-checking", "maybe", "x"}, "yes, accept-new or no"},
      {{"-np", "2", "-x", "UNSET_VAR_FOR_TEST", "x"}, "-x UNSET_VAR_FOR_TEST=VALUE"},
      {{"-np", "2", "-x", "=1", "x"}, "variable name is empty"},
      {{"-np", "2", "--network-interfaces", "eth0,,eth1", "x"}, "empty interface name"},
      {{"-np", "2", "-H"}, "--hosts"},
  };
  for (const Case& c : cases) {
    INFO("args: " << Catch::Detail::stringify(c.args));
    CHECK_THROWS_AS(parse_options(c.args, {}), UsageError);
    CHECK_THROWS_WITH(parse_options(c.args, {}), Contains(c.says));
  }
}

TEST_CASE("-H alone sets -np to its slots only via the launcher; --check-build needs nothing") {
  Options o = parse_options({"-H", "a:2,b:3", "x"}, {});
  CHECK_FALSE(o.num_proc.has_value());
  CHECK(parse_options({"-cb"}, {}).check_build);
  CHECK(parse_options({"--dry-run", "-np", "2"}, {}).dry_run);
}

TEST_CASE("--help returns the help text") {
  Options o = parse_options({"--help"}, {});
  CHECK_THAT(o.help_text, Contains("--num-proc"));
  CHECK_THAT(o.help_text, Contains("--hostfile"));
}

TEST_CASE("horovodrun's engine flags become the runtime's variables") {
  using Tuning = std::vector<std::pair<std::string, std::string>>;
  Options o = parse_options(
      {"-np", "2", "--timeline-filename", "tl.json", "--timeline-mark-cycles",
       "--fusion-threshold-mb", "64", "--cycle-time-ms", "2.5", "--cache-capacity", "0",
       "--no-stall-check", "--stall-check-warning-time-seconds", "30",
       "--stall-check-shutdown-time-seconds", "0", "--gloo-timeout-seconds", "45", "x"},
      {});
  // hora's names first; Horovod's for the same settings follow (test/cli/horovod_flags_test.cc).
  const Tuning hora_names(o.tuning.begin(), o.tuning.begin() + std::min<std::size_t>(9, o.tuning.size()));
  CHECK(hora_names == Tuning{{"HORA_TIMELINE", "tl.json"},
                           {"HORA_TIMELINE_MARK_CYCLES", "1"},
                           {"HORA_FUSION_THRESHOLD", "67108864"},
                           {"HORA_CYCLE_TIME_MS", "2.5"},
                           {"HORA_CACHE_CAPACITY", "0"},
                           {"HORA_STALL_CHECK_DISABLE", "1"},
                           {"HORA_STALL_CHECK_SECONDS", "30"},
                           {"HORA_STALL_SHUTDOWN_SECONDS", "0"},
                           {"HORA_TIMEOUT_SECONDS", "45"}});
  CHECK(parse_options({"-np", "2", "x"}, {}).tuning.empty());
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--cycle-time-ms", "0", "x"}, {}),
                    Contains("--cycle-time-ms"));
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--cache-capacity", "-1", "x"}, {}),
                    Contains("--cache-capacity"));
  CHECK_THROWS_AS(parse_options({"-np", "2", "--fusion-threshold-mb", "lots", "x"}, {}),
                  UsageError);
}
