// Every horovodrun 0.28 flag (horovod/runner/launch.py): accepted with the same meaning, passed
// to the ranks as Horovod's variable (and hora's), or refused with its reason. The table in
// docs/launcher.md ("horovodrun's flags") says the same.
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

#include "cli/options/options.h"

using namespace hora::cli;
using Catch::Matchers::Contains;

namespace {

Options parse(std::vector<std::string> args) {
  args.push_back("./train");
  return parse_options(args, {{"PATH", "/usr/bin"}});
}

std::map<std::string, std::string> tuning(std::vector<std::string> args) {
  Options o = parse(std::move(args));
  return {o.tuning.begin(), o.tuning.end()};
}

}  // namespace

TEST_CASE("tuning flags set Horovod's names as well as hora's") {
  auto t = tuning({"-np",
                   "2",
                   "--fusion-threshold-mb",
                   "32",
                   "--cycle-time-ms",
                   "3.5",
                   "--cache-capacity",
                   "256",
                   "--timeline-filename",
                   "tl.json",
                   "--timeline-mark-cycles",
                   "--no-stall-check",
                   "--stall-check-warning-time-seconds",
                   "20",
                   "--stall-check-shutdown-time-seconds",
                   "90",
                   "--gloo-timeout-seconds",
                   "40",
                   "--log-level",
                   "debug"});
  const std::map<std::string, std::string> want = {
      {"HORA_FUSION_THRESHOLD", "33554432"}, {"HOROVOD_FUSION_THRESHOLD", "33554432"},
      {"HORA_CYCLE_TIME_MS", "3.5"},         {"HOROVOD_CYCLE_TIME", "3.5"},
      {"HORA_CACHE_CAPACITY", "256"},        {"HOROVOD_CACHE_CAPACITY", "256"},
      {"HORA_TIMELINE", "tl.json"},          {"HOROVOD_TIMELINE", "tl.json"},
      {"HORA_TIMELINE_MARK_CYCLES", "1"},    {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
      {"HORA_STALL_CHECK_DISABLE", "1"},     {"HOROVOD_STALL_CHECK_DISABLE", "1"},
      {"HORA_STALL_CHECK_SECONDS", "20"},    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "20"},
      {"HORA_STALL_SHUTDOWN_SECONDS", "90"}, {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"},
      {"HORA_TIMEOUT_SECONDS", "40"},        {"HOROVOD_GLOO_TIMEOUT_SECONDS", "40"},
      {"HOROVOD_LOG_LEVEL", "DEBUG"},
  };
  CHECK(t == want);
}

TEST_CASE("Horovod-only tuning flags are passed to the ranks") {
  CHECK(tuning({"-np", "2", "--hierarchical-allreduce", "--no-hierarchical-allgather",
                "--torus-allreduce", "--num-nccl-streams", "2", "--thread-affinity", "0",
                "--mpi-threads-disable", "--log-without-timestamp"}) ==
        std::map<std::string, std::string>{{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                                           {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
                                           {"HOROVOD_TORUS_ALLREDUCE", "1"},
                                           {"HOROVOD_NUM_NCCL_STREAMS", "2"},
                                           {"HOROVOD_THREAD_AFFINITY", "0"},
                                           {"HOROVOD_MPI_THREADS_DISABLE", "1"},
                                           {"HOROVOD_LOG_HIDE_TIME", "1"}});
  // The last of --x / --no-x wins.
  CHECK(tuning({"-np", "2", "--hierarchical-allreduce", "--no-hierarchical-allreduce"}) ==
        std::map<std::string, std::string>{{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}});
  CHECK(tuning({"-np", "2", "--log-with-timestamp"}).at("HOROVOD_LOG_HIDE_TIME") == "0");
  CHECK(tuning({"-np", "2", "--log-hide-timestamp"}).at("HOROVOD_LOG_HIDE_TIME") == "1");
  CHECK(tuning({"-np", "2", "--no-log-hide-timestamp"}).at("HOROVOD_LOG_HIDE_TIME") == "0");
  // Negations of hora's own switches.
  CHECK(tuning({"-np", "2", "--no-stall-check", "--stall-check"}).empty());
  CHECK(tuning({"-np", "2", "--timeline-mark-cycles", "--no-timeline-mark-cycles"}).empty());
}

TEST_CASE("--autotune and its parameters, passed on only with --autotune (as horovodrun)") {
  CHECK(tuning({"-np", "2", "--autotune", "--autotune-log-file", "at.csv",
                "--autotune-warmup-samples", "2", "--autotune-steps-per-sample", "5",
                "--autotune-bayes-opt-max-samples", "10", "--autotune-gaussian-process-noise",
                "0.5"}) ==
        std::map<std::string, std::string>{{"HOROVOD_AUTOTUNE", "1"},
                                           {"HOROVOD_AUTOTUNE_LOG", "at.csv"},
                                           {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "2"},
                                           {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "5"},
                                           {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "10"},
                                           {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.5"}});
  CHECK(tuning({"-np", "2", "--autotune-warmup-samples", "2"}).empty());
  CHECK(tuning({"-np", "2", "--autotune", "--no-autotune"}).empty());
  CHECK_THROWS_WITH(parse({"-np", "2", "--autotune-gaussian-process-noise", "2"}),
                    Contains("[0, 1]"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--num-nccl-streams", "-1"}), Contains("at least 0"));
}

TEST_CASE("flags accepted with horovodrun's meaning") {
  CHECK(parse({"-np", "2", "--gloo"}).num_proc == 2);
  CHECK(parse({"-np", "2", "--disable-cache"}).num_proc == 2);
  CHECK(parse({"-hostfile", "hosts.txt"}).hostfile == "hosts.txt");
  CHECK_THAT(parse({"-v"}).help_text, Contains("horarun"));
  CHECK_THAT(parse({"--version"}).help_text, Contains("horovodrun 0.28"));
  CHECK_FALSE(parse({"-np", "2", "--no-horovod-rendezvous"}).horovod_rendezvous);
  CHECK(parse({"-np", "2"}).horovod_rendezvous);
  CHECK_FALSE(parse({"-np", "2", "--no-env-forwarding"}).forward_environment);
  CHECK(parse({"-np", "2"}).forward_environment);
}

TEST_CASE("flags hora refuses, each with its reason") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--mpi"}, "no MPI mode"},
      {{"--jsrun"}, "no MPI mode"},
      {{"--mpi-args", "-x FOO"}, "no MPI mode"},
      {{"--binding-args", "-bind-to none"}, "no MPI mode"},
      {{"--min-np", "2"}, "no elastic mode"},
      {{"--min-num-proc", "2"}, "no elastic mode"},
      {{"--max-np", "4"}, "no elastic mode"},
      {{"--slots-per-host", "2"}, "no elastic mode"},
      {{"--elastic-timeout", "600"}, "no elastic mode"},
      {{"--reset-limit", "3"}, "no elastic mode"},
      {{"--blacklist-cooldown-range", "10", "100"}, "no elastic mode"},
      {{"--host-discovery-script", "./d.sh"}, "no elastic mode"},
  };
  for (const auto& [args, why] : refused) {
    INFO(args.front());
    std::vector<std::string> a = {"-np", "2"};
    a.insert(a.end(), args.begin(), args.end());
    CHECK_THROWS_WITH(parse(a),
                      Contains(args.front()) && Contains(why) && Contains("drop the flag"));
  }
}

TEST_CASE("--config-file: horovodrun's YAML keys; the command line wins") {
  const std::string path = "/tmp/horovod_flags_test_config.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(
        "# horovodrun config\n"
        "controller: gloo\n"
        "params:\n"
        "  fusion_threshold_mb: 32\n"
        "  cycle_time_ms: 10   # ms\n"
        "  hierarchical_allreduce: true\n"
        "autotune:\n"
        "  enabled: true\n"
        "  log_file: \"at.csv\"\n"
        "timeline:\n"
        "  filename: 'tl # not a comment.json'\n"
        "stall_check:\n"
        "  enabled: false\n"
        "library_options:\n"
        "  gloo_timeout_seconds: 60\n"
        "logging:\n"
        "  level: DEBUG\n",
        f);
    std::fclose(f);
  }
  auto t = tuning({"-np", "2", "--config-file", path, "--cycle-time-ms", "2"});
  CHECK(t.at("HORA_FUSION_THRESHOLD") == "33554432");
  CHECK(t.at("HOROVOD_FUSION_THRESHOLD") == "33554432");
  CHECK(t.at("HORA_CYCLE_TIME_MS") == "2");  // the command line wins
  CHECK(t.at("HOROVOD_CYCLE_TIME") == "2");
  CHECK(t.at("HOROVOD_HIERARCHICAL_ALLREDUCE") == "1");
  CHECK(t.at("HOROVOD_AUTOTUNE") == "1");
  CHECK(t.at("HOROVOD_AUTOTUNE_LOG") == "at.csv");
  CHECK(t.at("HORA_TIMELINE") == "tl # not a comment.json");
  CHECK(t.at("HOROVOD_STALL_CHECK_DISABLE") == "1");
  CHECK(t.at("HOROVOD_GLOO_TIMEOUT_SECONDS") == "60");
  CHECK(t.at("HOROVOD_LOG_LEVEL") == "DEBUG");
  CHECK(parse({"-np", "2", "--config-file", path}).log_level == "debug");

  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("params:\n  no_such_key: 1\n", f);
  std::fclose(f);
  CHECK_THROWS_WITH(parse({"-np", "2", "--config-file", path}), Contains("no_such_key"));
  f = std::fopen(path.c_str(), "w");
  std::fputs("controller: mpi\n", f);
  std::fclose(f);
  CHECK_THROWS_WITH(parse({"-np", "2", "--config-file", path}), Contains("no MPI mode"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(parse({"-np", "2", "--config-file", path}), Contains("cannot read"));
}
