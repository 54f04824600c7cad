// Every horovodrun 0.28 flag (horovod/runner/launch.py): accepted with the same meaning, passed
// to the ranks as Horovod's variable (and hora's), or refused with its reason. The table in
// docs/launcher.md ("horovodrun's flags") says the same.
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

#include "cli/base/errors.h"
#include "cli/options/options.h"

using namespace hora::cli;
using Catch::Matchers::Contains;

namespace {

std::string fmt_args(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) out += a + " ";
  return out;
}

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
  // The ranges' words (cli/options/number_range.h), never CLI11's "Could not convert".
  CHECK_THROWS_WITH(parse({"-np", "2", "--autotune-gaussian-process-noise", "2"}),
                    Contains("'2' is not a noise level of at least 0 and at most 1"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--num-nccl-streams", "-1"}),
                    Contains("--num-nccl-streams: '-1' is not a whole number from 0 to"));
  CHECK_THROWS_WITH(parse({"-np", "2", "--autotune-warmup-samples", "abc"}),
                    Contains("--autotune-warmup-samples: 'abc' is not a whole number"));
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
  };
  for (const auto& [args, why] : refused) {
    INFO(args.front());
    std::vector<std::string> a = {"-np", "2"};
    a.insert(a.end(), args.begin(), args.end());
    CHECK_THROWS_WITH(parse(a),
                      Contains(args.front()) && Contains(why) && Contains("drop the flag"));
  }
}

TEST_CASE("elastic flags: accepted with horovodrun's meanings and defaults") {
  Options o = parse({"-np", "2", "-H", "a:2,b:2"});
  CHECK_FALSE(o.elastic.elastic());
  CHECK(o.elastic.min_np == 0);
  CHECK(o.max_restarts == 0);

  o = parse({"-np", "4", "--min-np", "2", "--max-np", "8", "-H", "a:2,b:2"});
  CHECK(o.elastic.elastic());
  CHECK(o.elastic.min_np == 2);
  CHECK(o.elastic.max_np == 8);
  CHECK(o.num_proc == 4);
  CHECK(o.elastic.discovery_script.empty());
  CHECK_FALSE(o.elastic.slots_per_host.has_value());
  CHECK(o.elastic.elastic_timeout == std::chrono::seconds(600));
  CHECK_FALSE(o.elastic.reset_limit.has_value());
  CHECK_FALSE(o.elastic.blacklist_cooldown.has_value());

  o = parse({"--min-num-proc", "2", "--max-num-proc", "4", "--host-discovery-script",
             "./discover.sh --zone a", "--slots-per-host", "4", "--elastic-timeout", "30",
             "--reset-limit", "0", "--blacklist-cooldown-range", "10", "100"});
  CHECK(o.elastic.elastic());
  CHECK(o.elastic.min_np == 2);
  CHECK(o.num_proc == 2);  // -np defaults to --min-np
  CHECK(o.elastic.max_np == 4);
  CHECK(o.elastic.discovery_script == "./discover.sh --zone a");
  CHECK(o.elastic.slots_per_host == 4);
  CHECK(o.elastic.elastic_timeout == std::chrono::seconds(30));
  CHECK(o.elastic.reset_limit == 0);
  REQUIRE(o.elastic.blacklist_cooldown.has_value());
  CHECK(o.elastic.blacklist_cooldown->first == std::chrono::seconds(10));
  CHECK(o.elastic.blacklist_cooldown->second == std::chrono::seconds(100));
  CHECK(o.command == std::vector<std::string>{"./train"});  // the range takes two values only

  // --min-np defaults to -np (horovodrun: min_num_proc or num_proc); a script alone is elastic.
  o = parse({"-np", "3", "--host-discovery-script", "./d.sh"});
  CHECK(o.elastic.elastic());
  CHECK(o.elastic.min_np == 3);
  // --max-np alone makes the job elastic too (docs/elastic.md).
  o = parse({"-np", "2", "--max-np", "4", "--hostfile", "hosts.txt"});
  CHECK(o.elastic.elastic());
  CHECK(o.elastic.min_np == 2);
  // HOROVOD_ELASTIC_TIMEOUT, unless --elastic-timeout.
  auto with_env = [](std::vector<std::string> args, const std::string& timeout) {
    args.push_back("./train");
    return parse_options(args, {{"PATH", "/usr/bin"}, {"HOROVOD_ELASTIC_TIMEOUT", timeout}});
  };
  CHECK(with_env({"-np", "2", "--min-np", "1", "-H", "a:2"}, "45").elastic.elastic_timeout ==
        std::chrono::seconds(45));
  CHECK(with_env({"-np", "2", "--min-np", "1", "-H", "a:2", "--elastic-timeout", "7"}, "45")
            .elastic.elastic_timeout == std::chrono::seconds(7));
  CHECK_THROWS_WITH(with_env({"-np", "2", "--min-np", "1", "-H", "a:2"}, "soon"),
                    Contains("HOROVOD_ELASTIC_TIMEOUT='soon'") && Contains("--elastic-timeout"));
  // Outside an elastic job the other elastic flags are accepted and change nothing (horovodrun
  // ignores them there).
  o = parse({"-np", "2", "--slots-per-host", "2", "--reset-limit", "3", "--elastic-timeout", "60",
             "--blacklist-cooldown-range", "1", "2"});
  CHECK_FALSE(o.elastic.elastic());
  CHECK(o.num_proc == 2);
  // torchrun's --max-restarts.
  CHECK(parse({"-np", "2", "--max-restarts", "3"}).max_restarts == 3);
  // hora's --horovod-elastic: off unless given.
  CHECK_FALSE(parse({"-np", "2", "--min-np", "1", "-H", "a:2"}).elastic.horovod);
  CHECK(parse({"--horovod-elastic", "--min-np", "1", "--host-discovery-script", "./d.sh"})
            .elastic.horovod);
}

TEST_CASE("elastic flags: bad values and contradictions name the flag") {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> bad = {
      {{"--min-np", "0", "-H", "a:2"}, {"--min-np", "'0' is not a number of ranks from 1"}},
      {{"--min-np", "x", "-H", "a:2"}, {"--min-np", "'x'"}},
      {{"--max-np", "-1", "-H", "a:2"}, {"--max-np", "'-1'"}},
      {{"--max-np", "99999999", "-H", "a:2"}, {"--max-np", "1048576"}},
      {{"--host-discovery-script", ""}, {"--host-discovery-script", "empty"}},
      {{"--slots-per-host", "0"}, {"--slots-per-host", "'0' is not a number of slots"}},
      {{"--elastic-timeout", "0"}, {"--elastic-timeout", "from 1 to 2592000"}},
      {{"--reset-limit", "-1"}, {"--reset-limit", "'-1'"}},
      {{"--blacklist-cooldown-range", "0", "10"}, {"--blacklist-cooldown-range", "from 1 to 3600"}},
      {{"--blacklist-cooldown-range", "10", "3601"}, {"--blacklist-cooldown-range", "'3601'"}},
      {{"--blacklist-cooldown-range", "100", "10"},
       {"--blacklist-cooldown-range 100 10", "give MIN MAX"}},
      {{"--max-restarts", "-1"}, {"--max-restarts", "'-1'"}},
      // Contradictions.
      {{"--min-np", "2", "-H", "a:2", "--max-np", "1"}, {"--min-np 2 is above --max-np 1"}},
      {{"--min-np", "4", "-H", "a:4"}, {"-np 2 is below --min-np 4"}},
      {{"--max-np", "1", "-H", "a:4"}, {"-np 2 is above --max-np 1"}},
      {{"--host-discovery-script", "./d.sh", "-H", "a:2"},
       {"--host-discovery-script and -H/--hosts both given"}},
      {{"--host-discovery-script", "./d.sh", "--hostfile", "h.txt"},
       {"--host-discovery-script and --hostfile both given"}},
      {{"--min-np", "1"}, {"needs its hosts", "--host-discovery-script", "-H/--hostfile"}},
      {{"--min-np", "1", "-H", "a:2", "--max-restarts", "2"},
       {"--max-restarts 2", "resets instead", "give one of them"}},
      {{"--horovod-elastic", "-H", "a:2"}, {"--horovod-elastic", "only an elastic job"}},
      {{"--horovod-elastic", "--no-horovod-rendezvous", "--min-np", "1", "-H", "a:2"},
       {"--horovod-elastic and --no-horovod-rendezvous both given", "give one of them"}},
  };
  for (const auto& [args, words] : bad) {
    std::vector<std::string> a = {"-np", "2"};
    a.insert(a.end(), args.begin(), args.end());
    INFO(fmt_args(a));
    try {
      parse(a);
      FAIL("accepted");
    } catch (const UsageError& e) {
      for (const std::string& w : words) CHECK_THAT(e.what(), Contains(w));
    }
  }
  // Without -np an elastic job needs --min-np (horovodrun needs -np).
  CHECK_THROWS_WITH(parse_options({"--host-discovery-script", "./d.sh", "./train"}, {}),
                    Contains("needs -np N") && Contains("--min-np N"));
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
