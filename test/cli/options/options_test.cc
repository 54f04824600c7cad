#include <catch2/catch.hpp>

#include <algorithm>

#include "cli/base/errors.h"
#include "cli/launch/job_hosts.h"
#include "cli/options/options.h"
#include "cli/remote/remote_hosts.h"

using Catch::Matchers::Contains;
using hora::cli::Environment;
using hora::cli::Options;
using hora::cli::parse_options;
using hora::cli::split_command_line;
using hora::cli::UsageError;
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
  // A repeatable option takes one value per occurrence: the command is not a second value.
  split = split_command_line({"-x", "A=1", "--network-interface", "lo", "train", "-x", "B"});
  CHECK(split.options == Args{"-x", "A=1", "--network-interface", "lo"});
  CHECK(split.command == Args{"train", "-x", "B"});
}

TEST_CASE("horovodrun's options parse into Options") {
  Options o = parse_options({"-np",
                             "8",
                             "-H",
                             "a:4,b:4",
                             "--start-timeout",
                             "45",
                             "--verbose",
                             "--output-filename",
                             "logs",
                             "-prefix-timestamp",
                             "--log-level",
                             "DEBUG",
                             "-p",
                             "12345",
                             "-i",
                             "/k",
                             "--ssh-config",
                             "/c",
                             "--ssh-strict-host-key-checking",
                             "no",
                             "--network-interfaces",
                             "eth0, ib0",
                             "--network-interface",
                             "eth2",
                             "--network-interface",
                             "eth0",
                             "-x",
                             "A=1",
                             "--env",
                             "B",
                             "--tcp",
                             "--force-ssh",
                             "--horarun-path",
                             "/opt/horarun",
                             "./train",
                             "--epochs",
                             "3"},
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
  CHECK(o.ssh_fanout == Options::kDefaultSshFanout);
  CHECK(o.ssh_fanout == hora::cli::RemoteOptions::kDefaultSshFanout);
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
      {{"-np", "0", "x"}, "--num-proc: '0' is not a number of ranks (-np) from 1 to"},
      {{"-np", "two", "x"}, "num-proc"},
      {{"-np", "2", "-H", "a:2", "--hostfile", "f", "x"}, "use one of them"},
      {{"-np", "2", "--bogus", "x"}, "--bogus"},
      {{"-np", "2", "--log-level", "loud", "x"}, "use trace, debug, info, warning, error or fatal"},
      {{"-np", "2", "--start-timeout", "0", "x"}, "'0' is not a number of seconds from 1 to"},
      {{"-np", "2", "-p", "70000", "x"}, "--ssh-port: '70000' is not a port from 1 to 65535"},
      {{"-np", "2", "--ssh-strict-host-key-checking", "maybe", "x"}, "yes, accept-new or no"},
      {{"-np", "2", "-x", "UNSET_VAR_FOR_TEST", "x"}, "-x UNSET_VAR_FOR_TEST=VALUE"},
      {{"-np", "2", "-x", "=1", "x"}, "variable name is empty"},
      {{"-np", "2", "--network-interfaces", "eth0,,eth1", "x"}, "empty interface name"},
      {{"-np", "2", "-H"}, "--hosts"},
      {{"-np", "2", "--bogus", "--verbose", "x"}, "unknown option --bogus"},
      // A value that expanded to nothing: the next option is not taken for the value.
      {{"--ssh-config", "-np", "4", "-H", "a:2", "x"},
       "--ssh-config has no value: the argument after it is -np, another option"},
      {{"-np", "2", "--hostfile", "--verbose", "x"}, "--hostfile has no value"},
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
  Options o =
      parse_options({"-np", "2", "--timeline-filename", "tl.json", "--timeline-mark-cycles",
                     "--fusion-threshold-mb", "64", "--cycle-time-ms", "2.5", "--cache-capacity",
                     "0", "--no-stall-check", "--stall-check-warning-time-seconds", "30",
                     "--stall-check-shutdown-time-seconds", "0", "--gloo-timeout-seconds", "45",
                     "x"},
                    {});
  // hora's names first; Horovod's for the same settings follow
  // (test/cli/options/horovod_flags_test.cc).
  const Tuning hora_names(o.tuning.begin(),
                          o.tuning.begin() + std::min<std::size_t>(9, o.tuning.size()));
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
  CHECK(parse_options({"-np", "2", "--bind-to", "core", "x"}, {}).tuning ==
        Tuning{{"HORA_BIND_TO", "core"}});
  CHECK(parse_options({"-np", "2", "--bind-to", "Socket", "--map-by", "NUMA", "x"}, {}).tuning ==
        Tuning{{"HORA_BIND_TO", "socket"}, {"HORA_MAP_BY", "numa"}});
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--bind-to", "board", "x"}, {}),
                    Contains("--bind-to"));
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--cycle-time-ms", "0", "x"}, {}),
                    Contains("--cycle-time-ms"));
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--cache-capacity", "-1", "x"}, {}),
                    Contains("--cache-capacity"));
  CHECK_THROWS_AS(parse_options({"-np", "2", "--fusion-threshold-mb", "lots", "x"}, {}),
                  UsageError);
}

TEST_CASE("--log-level takes spdlog's names and horovodrun's fatal, in any case") {
  auto level = [](const char* given) {
    return parse_options({"-np", "1", "--log-level", given, "x"}, {}).log_level;
  };
  CHECK(level("WARN") == "warning");
  CHECK(level("warning") == "warning");
  CHECK(level("err") == "error");
  // Passed on unchanged: HORA_LOG_LEVEL=fatal, HOROVOD_LOG_LEVEL=FATAL.
  CHECK(level("Fatal") == "fatal");
  CHECK(level("trace") == "trace");
  CHECK_THROWS_WITH(level("off"), Contains("--log-level off: unknown level"));
}

TEST_CASE("empty host lists are usage errors, not localhost") {
  CHECK_THROWS_WITH(parse_options({"-H", "", "x"}, {}), Contains("--hosts: the value is empty"));
  CHECK_THROWS_WITH(parse_options({"-np", "2", "-H", "", "x"}, {}),
                    Contains("--hosts: the value is empty"));
  CHECK_THROWS_WITH(parse_options({"--hostfile", "", "x"}, {}),
                    Contains("--hostfile: the value is empty"));
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--hostfile=", "x"}, {}),
                    Contains("--hostfile: the value is empty"));
}

TEST_CASE("-np '' says the value is empty, not that -np is missing") {
  CHECK_THROWS_AS(parse_options({"-np", "", "x"}, {}), UsageError);
  CHECK_THROWS_WITH(parse_options({"-np", "", "x"}, {}), Contains("the value is empty"));
  CHECK_THROWS_WITH(parse_options({"-np=", "x"}, {}), Contains("the value is empty"));
}

TEST_CASE("every number is range-checked where it is parsed, naming the flag") {
  struct Case {
    Args args;
    const char* says;
  };
  const Case cases[] = {
      {{"--fusion-threshold-mb", "1e300"}, "--fusion-threshold-mb: '1e300'"},
      {{"--fusion-threshold-mb", "-1"}, "--fusion-threshold-mb"},
      {{"--fusion-threshold-mb", "nan"}, "--fusion-threshold-mb"},
      {{"--cycle-time-ms", "1e300"}, "--cycle-time-ms: '1e300'"},
      {{"--cycle-time-ms", "inf"}, "--cycle-time-ms"},
      {{"--stall-check-warning-time-seconds", "1e300"}, "--stall-check-warning-time-seconds"},
      {{"--stall-check-shutdown-time-seconds", "1e300"}, "--stall-check-shutdown-time-seconds"},
      {{"--gloo-timeout-seconds", "1e300"}, "--gloo-timeout-seconds"},
      {{"--cache-capacity", "65537"}, "--cache-capacity"},
      {{"--cache-capacity", "99999999999999999999"}, "--cache-capacity"},
      {{"--start-timeout", "99999999999"}, "--start-timeout"},
      {{"-np", "99999999999"}, "--num-proc"},
      {{"-np", "2000000"}, "--num-proc"},
      {{"--ssh-fanout", "-1"}, "--ssh-fanout: '-1'"},
      {{"--ssh-fanout", "100001"}, "--ssh-fanout"},
  };
  for (const Case& c : cases) {
    Args args = c.args;
    if (args[0] != "-np") args.insert(args.begin(), {"-np", "2"});
    args.push_back("x");
    INFO("args: " << Catch::Detail::stringify(args));
    CHECK_THROWS_AS(parse_options(args, {}), UsageError);
    CHECK_THROWS_WITH(parse_options(args, {}), Contains(c.says));
  }
  // The largest values still pass, and reach the ranks without overflow.
  Options o = parse_options({"-np", "1", "--fusion-threshold-mb", "1048576", "--cycle-time-ms",
                             "60000", "--cache-capacity", "65536", "x"},
                            {});
  CHECK(o.tuning[0] ==
        std::pair<std::string, std::string>{"HORA_FUSION_THRESHOLD", "1099511627776"});
  CHECK(parse_options({"-np", "1", "--ssh-fanout", "0", "x"}, {}).ssh_fanout == 0);
  CHECK(parse_options({"-np", "1", "--ssh-fanout", "100000", "x"}, {}).ssh_fanout == 100000);
}

TEST_CASE("-np without -H has the bound of one host's slots") {
  CHECK(parse_options({"-np", "65536", "x"}, {}).num_proc == 65536);
  CHECK_THROWS_WITH(parse_options({"-np", "65537", "x"}, {}),
                    Contains("-np 65537: without -H or --hostfile") && Contains("at most 65536"));
  // With -H the slots bound it (the rank table checks -np against them).
  CHECK(parse_options({"-np", "65537", "-H", "a:65536,b:1", "x"}, {}).num_proc == 65537);
}

TEST_CASE("--launcher: slurm inside an allocation without -H, ssh otherwise, refused outside") {
  const hora::cli::Environment alloc = {{"SLURM_JOB_ID", "12"},
                                        {"SLURM_JOB_NODELIST", "n[1-2]"},
                                        {"SLURM_TASKS_PER_NODE", "3,1"}};
  // auto inside an allocation, no -H: the allocation's hosts (read by the launch pipeline, once),
  // -np their slots.
  Options o = parse_options({"true"}, alloc);
  CHECK(o.slurm);
  CHECK(o.hosts_from_allocation);
  CHECK_FALSE(o.num_proc.has_value());
  const hora::cli::JobHosts job = hora::cli::resolve_job_hosts(o, alloc);
  REQUIRE(job.table.hosts().size() == 2);
  CHECK(job.table.hosts()[0].name == "n1");
  CHECK(job.table.hosts()[0].slots == 3);
  CHECK(job.table.size() == 4);
  // -np is still the user's when given.
  CHECK(parse_options({"-np", "2", "true"}, alloc).num_proc == 2);
  // auto with -H inside an allocation: SSH, as before.
  Options h = parse_options({"-H", "a:1", "true"}, alloc);
  CHECK_FALSE(h.slurm);
  // --launcher slurm with -H: srun to the listed hosts.
  Options hs = parse_options({"--launcher", "slurm", "-H", "n1:1", "true"}, alloc);
  CHECK(hs.slurm);
  CHECK_FALSE(hs.hosts_from_allocation);
  // --launcher ssh inside an allocation: no srun, and -np is required again.
  CHECK_THROWS_AS(parse_options({"--launcher", "ssh", "true"}, alloc), hora::cli::UsageError);
  // Outside an allocation --launcher slurm says what to do.
  try {
    parse_options({"--launcher", "slurm", "-np", "2", "true"}, {});
    FAIL("no error");
  } catch (const hora::cli::UsageError& e) {
    CHECK(std::string(e.what()).find("run horarun inside salloc or an sbatch script") !=
          std::string::npos);
  }
  CHECK_THROWS_AS(parse_options({"--launcher", "pbs", "-np", "2", "true"}, {}),
                  hora::cli::UsageError);
  // Outside an allocation auto is SSH.
  CHECK_FALSE(parse_options({"-np", "2", "true"}, {}).slurm);
}

// mpirun's and torchrun's spellings: aliases of hora's options, or hora's behaviour.
TEST_CASE("mpirun's and torchrun's spellings set what hora's own options set") {
  CHECK(parse_options({"-n", "3", "x"}, {}).num_proc == 3);
  CHECK(parse_options({"--np", "3", "x"}, {}).num_proc == 3);
  CHECK(parse_options({"--host", "localhost:2", "x"}, {}).hosts == "localhost:2");
  CHECK(parse_options({"--machinefile", "hosts.txt", "-np", "2", "x"}, {}).hostfile == "hosts.txt");
  CHECK(parse_options({"-machinefile", "hosts.txt", "-np", "2", "x"}, {}).hostfile == "hosts.txt");
  // torchrun: one host, --nproc-per-node ranks on it.
  CHECK(parse_options({"--nproc-per-node", "4", "x"}, {}).num_proc == 4);
  CHECK(parse_options({"--nproc_per_node=2", "--nnodes", "1", "--standalone", "x"}, {}).num_proc ==
        2);
  CHECK_THROWS_WITH(parse_options({"--nproc-per-node", "2", "--nnodes", "2", "x"}, {}),
                    Contains("list the 2 hosts with -H"));
  CHECK_THROWS_WITH(parse_options({"--nproc-per-node", "2", "-H", "a:2,b:2", "x"}, {}),
                    Contains("give each host's slots there"));
  CHECK_THROWS_WITH(parse_options({"-np", "3", "--nproc-per-node", "2", "x"}, {}),
                    Contains("disagree"));
  // The option values never reach the command.
  CHECK(parse_options({"--nproc-per-node", "1", "train", "-n", "5"}, {}).command ==
        Args{"train", "-n", "5"});
}

TEST_CASE("mpirun's options without a meaning in hora are accepted with a warning") {
  const Options quiet = parse_options({"-np", "1", "x"}, {});
  CHECK(quiet.warnings.empty());
  const Options root = parse_options({"--allow-run-as-root", "-np", "1", "x"}, {});
  REQUIRE(root.warnings.size() == 1);
  CHECK_THAT(root.warnings[0],
             Contains("--allow-run-as-root is ignored") && Contains("run as root"));
  const Options mca =
      parse_options({"--mca", "btl_tcp_if_include", "lo", "-np", "1", "train", "a"}, {});
  REQUIRE(mca.warnings.size() == 1);
  CHECK_THAT(mca.warnings[0],
             Contains("--mca btl_tcp_if_include lo is ignored") && Contains("Open MPI parameter"));
  CHECK(mca.command == Args{"train", "a"});
}

// `horarun -np 1 ""` names the empty program, not a directory on PATH.
TEST_CASE("an empty program is a usage error naming it") {
  CHECK_THROWS_WITH(parse_options({"-np", "1", ""}, {}), Contains("the program to run is empty"));
  CHECK_THROWS_WITH(parse_options({"-np", "1", "--", "", "a"}, {}),
                    Contains("the program to run is empty"));
}

// mpirun's output, directory and placement options.
TEST_CASE("mpirun's output and placement options set hora's") {
  const Options plain = parse_options({"-np", "1", "x"}, {});
  CHECK_FALSE(plain.tag_output);
  CHECK_FALSE(plain.prefix_timestamp);
  CHECK_FALSE(plain.merge_stderr);
  CHECK_FALSE(plain.display_map);
  CHECK(plain.working_directory.empty());
  CHECK(parse_options({"--tag-output", "-np", "1", "x"}, {}).tag_output);
  CHECK(parse_options({"-tag-output", "-np", "1", "x"}, {}).tag_output);
  CHECK(parse_options({"--timestamp-output", "-np", "1", "x"}, {}).prefix_timestamp);
  CHECK(parse_options({"-timestamp-output", "-np", "1", "x"}, {}).prefix_timestamp);
  CHECK(parse_options({"--merge-stderr-to-stdout", "-np", "1", "x"}, {}).merge_stderr);
  CHECK(parse_options({"--display-map", "-np", "1", "x"}, {}).display_map);
  CHECK(parse_options({"-report-bindings", "-np", "1", "x"}, {}).display_map);
  CHECK(parse_options({"-wdir", "/tmp", "-np", "1", "x"}, {}).working_directory == "/tmp");
  CHECK(parse_options({"--wdir", "sub", "-np", "1", "x"}, {}).working_directory == "sub");
  CHECK_THROWS_WITH(parse_options({"--wdir=", "-np", "1", "x"}, {}), Contains("a directory"));
  // -N/-npernode: ranks on the one host, as --nproc-per-node.
  CHECK(parse_options({"-N", "3", "x"}, {}).num_proc == 3);
  CHECK(parse_options({"-npernode", "2", "x"}, {}).num_proc == 2);
  CHECK_THROWS_WITH(parse_options({"-N", "2", "-H", "a:2,b:2", "x"}, {}),
                    Contains("give each host's slots there"));
  CHECK_THROWS_WITH(parse_options({"-np", "3", "-N", "2", "x"}, {}), Contains("disagree"));
  // --oversubscribe: -np above the slots of -H places the rest one per host, round and round,
  // as Open MPI does; without it the same -np is refused.
  CHECK(parse_options({"--oversubscribe", "-np", "64", "x"}, {}).num_proc == 64);
  const Options over = parse_options({"-oversubscribe", "-np", "7", "-H", "a:2,b:1", "x"}, {});
  CHECK(over.oversubscribe);
  const hora::cli::JobHosts placed = hora::cli::resolve_job_hosts(over, {});
  REQUIRE(placed.table.hosts().size() == 2);
  CHECK(placed.table.hosts()[0].slots == 4);
  CHECK(placed.table.hosts()[1].slots == 3);
  CHECK(placed.table.size() == 7);
  CHECK_THROWS_WITH(
      hora::cli::resolve_job_hosts(parse_options({"-np", "7", "-H", "a:2,b:1", "x"}, {}), {}),
      Contains("more processes (-np 7) than there are slots"));
  // Placement: slot, core, socket and numa reach the guard (HORA_MAP_BY, HORA_BIND_TO); others
  // are refused, naming what hora does.
  using Tuning = std::vector<std::pair<std::string, std::string>>;
  CHECK(parse_options({"--map-by", "slot", "-np", "1", "x"}, {}).num_proc == 1);
  CHECK(parse_options({"--map-by", "socket", "-np", "1", "x"}, {}).tuning ==
        Tuning{{"HORA_MAP_BY", "socket"}});
  CHECK(parse_options({"-bind-to", "numa", "-np", "1", "x"}, {}).tuning ==
        Tuning{{"HORA_BIND_TO", "numa"}});
  CHECK_THROWS_WITH(parse_options({"--map-by", "board", "-np", "1", "x"}, {}),
                    Contains("--map-by board: hora maps") && Contains("socket or numa"));
  CHECK_THROWS_WITH(parse_options({"--bind-to", "l3cache", "-np", "1", "x"}, {}),
                    Contains("--bind-to l3cache: hora binds to none") && Contains("core") &&
                        Contains("socket or numa"));
  const Options core = parse_options({"-bind-to", "core", "-np", "1", "x"}, {});
  CHECK(std::find(core.tuning.begin(), core.tuning.end(),
                  std::pair<std::string, std::string>{"HORA_BIND_TO", "core"}) !=
        core.tuning.end());
  // The values never reach the command, and the command's own -N stays its own.
  CHECK(
      parse_options({"-N", "1", "--tag-output", "train", "-N", "5", "--tag-output"}, {}).command ==
      Args{"train", "-N", "5", "--tag-output"});
}
