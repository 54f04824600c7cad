// horovodrun's --config-file: the file goes through the checks of a
// file named by a flag (a regular file of bounded size: no directory, FIFO or device), and its
// numbers through the ranges of the flags they stand for, refused in the same words, naming the
// key and the flag.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "cli/base/errors.h"
#include "cli/options/options.h"
#include "test/ssh/temp_dir.h"  // hora::ssh::test::TempDir

using namespace hora::cli;
using Catch::Matchers::Contains;
using hora::ssh::test::TempDir;

namespace {

Options parse_with(const std::string& config, std::vector<std::string> more = {}) {
  std::vector<std::string> args{"-np", "2", "--config-file", config};
  args.insert(args.end(), more.begin(), more.end());
  args.push_back("./train");
  return parse_options(args, {{"PATH", "/usr/bin"}});
}

// parse_with() under a deadline: a file that blocks the reader fails the test, not hangs it.
void check_refused(const std::string& config, const std::string& says) {
  INFO("--config-file " << config);
  auto result = std::async(std::launch::async, [&] {
    try {
      parse_with(config);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  });
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK_THAT(result.get(), Contains(says));
}

std::map<std::string, std::string> tuning(const Options& o) {
  return {o.tuning.begin(), o.tuning.end()};
}

}  // namespace

TEST_CASE("--config-file: only a regular file of bounded size, each refusal naming the path") {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string big = dir.write("big.yaml", "");
  REQUIRE(::truncate(big.c_str(), 2 << 20) == 0);  // zeros: over the bound before the NUL check
  const std::string nul = dir.write("nul.yaml", std::string("params:\n  cycle_time_ms: 1\0\n", 28));

  check_refused(dir.path().string(),
                "--config-file " + dir.path().string() + ": is a directory, not a regular file");
  check_refused(fifo, "--config-file " + fifo + ": is a FIFO, not a regular file");
  check_refused("/dev/zero", "--config-file /dev/zero: is a device, not a regular file");
  check_refused(big, "--config-file " + big + ": is larger than 1024 KiB");
  check_refused(nul, ": contains NUL bytes");
  check_refused(dir / "missing.yaml", "cannot read the file (No such file or directory)");
  // Every refusal says what to give instead.
  check_refused(fifo, "give horovodrun's YAML config file");

  // /dev/null is an empty config, as for --ssh-config.
  CHECK(tuning(parse_with("/dev/null")).count("HORA_CYCLE_TIME_MS") == 0);
}

TEST_CASE("--config-file: numbers take their flag's range and words, naming key and flag") {
  TempDir dir;
  struct Case {
    const char* yaml;
    const char* says;
  };
  const Case cases[] = {
      {"params:\n  fusion_threshold_mb: 1e300\n",
       "params.fusion_threshold_mb: '1e300' is not a size in MiB of at least 0 and at most "
       "1048576 (as --fusion-threshold-mb)"},
      {"params:\n  fusion_threshold_mb: -1\n", "(as --fusion-threshold-mb)"},
      {"params:\n  cycle_time_ms: 1e300\n",
       "params.cycle_time_ms: '1e300' is not a number of milliseconds greater than 0 and at most "
       "60000 (as --cycle-time-ms)"},
      {"params:\n  cycle_time_ms: 0\n", "(as --cycle-time-ms)"},
      {"params:\n  cache_capacity: 99999999999\n",
       "params.cache_capacity: '99999999999' is not a number of entries (0: no cache) from 0 to "
       "65536 (as --cache-capacity)"},
      {"params:\n  cache_capacity: 1.5\n", "(as --cache-capacity)"},
      {"stall_check:\n  warning_time_seconds: 1e300\n",
       "stall_check.warning_time_seconds: '1e300' is not a number of seconds greater than 0 and "
       "at most 2592000 (as --stall-check-warning-time-seconds)"},
      {"stall_check:\n  shutdown_time_seconds: inf\n", "(as --stall-check-shutdown-time-seconds)"},
      {"library_options:\n  gloo_timeout_seconds: 1e300\n", "(as --gloo-timeout-seconds)"},
      {"library_options:\n  gloo_timeout_seconds: nan\n", "(as --gloo-timeout-seconds)"},
      {"params:\n  cycle_time_ms: ''\n", "params.cycle_time_ms: the value is empty"},
      // Counts: whole numbers, never cast from an overflowing double.
      {"autotune:\n  warmup_samples: 1e300\n",
       "autotune.warmup_samples: '1e300' is not a whole number from 0 to 1000000000000000 (as "
       "--autotune-warmup-samples)"},
      {"library_options:\n  num_nccl_streams: -1\n",
       "library_options.num_nccl_streams: '-1' is not a whole number from 0 to 1000000000000000 "
       "(as --num-nccl-streams)"},
      {"autotune:\n  gaussian_process_noise: 2\n",
       "autotune.gaussian_process_noise: '2' is not a noise level of at least 0 and at most 1 (as "
       "--autotune-gaussian-process-noise)"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write("c.yaml", c.yaml);
    INFO(c.yaml);
    CHECK_THROWS_AS(parse_with(path), UsageError);
    CHECK_THROWS_WITH(parse_with(path), Contains("--config-file " + path + ": ") &&
                                            Contains(c.says) &&
                                            Contains("fix the value in the file"));
  }
  // The flags' messages are the same words, so one range serves both.
  CHECK_THROWS_WITH(parse_options({"-np", "2", "--cycle-time-ms", "1e300", "x"}, {}),
                    Contains("'1e300' is not a number of milliseconds greater than 0 and at most "
                             "60000"));

  // The bounds themselves pass, and reach the ranks as the flags' values would.
  const std::string path = dir.write("max.yaml",
                                     "params:\n  fusion_threshold_mb: 1048576\n"
                                     "  cycle_time_ms: 60000\n  cache_capacity: 65536\n"
                                     "stall_check:\n  warning_time_seconds: 2592000\n"
                                     "library_options:\n  gloo_timeout_seconds: 2.5\n");
  auto t = tuning(parse_with(path));
  CHECK(t.at("HORA_FUSION_THRESHOLD") == "1099511627776");
  CHECK(t.at("HORA_CYCLE_TIME_MS") == "60000");
  CHECK(t.at("HORA_CACHE_CAPACITY") == "65536");
  CHECK(t.at("HORA_STALL_CHECK_SECONDS") == "2592000");
  CHECK(t.at("HORA_TIMEOUT_SECONDS") == "2.5");
  // The command line still wins; the file's values are checked all the same.
  t = tuning(parse_with(path, {"--cycle-time-ms", "3"}));
  CHECK(t.at("HORA_CYCLE_TIME_MS") == "3");
}

// A flow mapping (`params: {...}`) reads as the block form does. A
// flow collection left open is a YAML syntax error with its line and column, not an unknown key.
TEST_CASE("--config-file: flow mappings read as blocks; an unclosed bracket names its place") {
  TempDir dir;
  const Options block =
      parse_with(dir.write("block.yaml", "params:\n  cycle_time_ms: 7\n  cache_capacity: 9\n"));
  const Options flow =
      parse_with(dir.write("flow.yaml", "params: {cycle_time_ms: 7, cache_capacity: 9}\n"));
  CHECK(flow.tuning == block.tuning);
  CHECK_FALSE(flow.tuning.empty());
  const std::string open = dir.write("open.yaml", "# settings\nparams: [1,2\n");
  CHECK_THROWS_WITH(parse_with(open), Contains(open + ":2:9: YAML syntax error: '[' is never "
                                                      "closed"));
}

// The file is read by a YAML library (yaml-cpp), so what horovodrun's yaml.safe_load
// takes, hora takes, and to the same settings.
TEST_CASE("--config-file: flow mappings over lines, anchors, aliases and merge keys") {
  TempDir dir;
  const Options block = parse_with(dir.write("block.yaml",
                                             "params:\n  cycle_time_ms: 7\n  cache_capacity: 9\n"
                                             "stall_check:\n  warning_time_seconds: 30\n"
                                             "  shutdown_time_seconds: 30\n"));
  REQUIRE(tuning(block).at("HORA_CYCLE_TIME_MS") == "7");
  const char* same[] = {
      // A flow mapping over several lines, and flow mappings nested in one.
      "params: {\n  cycle_time_ms: 7,\n  cache_capacity: 9\n}\n"
      "stall_check: {warning_time_seconds: 30, shutdown_time_seconds: 30}\n",
      // A mapping held by an anchor outside horovodrun's keys, used through an alias.
      "defaults: &d {cycle_time_ms: 7, cache_capacity: 9}\nparams: *d\n"
      "stall_check: {warning_time_seconds: &s 30, shutdown_time_seconds: *s}\n",
      // Merge keys: the mapping's own keys win over the merged ones.
      "defaults: &d\n  cycle_time_ms: 1\n  cache_capacity: 9\n"
      "params:\n  <<: *d\n  cycle_time_ms: 7\n"
      "stall_check: {warning_time_seconds: 30, shutdown_time_seconds: 30}\n",
      // A list of merged mappings: the earlier wins.
      "a: &a {cycle_time_ms: 7}\nb: &b {cycle_time_ms: 1, cache_capacity: 9}\n"
      "params: {<<: [*a, *b]}\n"
      "stall_check: {warning_time_seconds: 30, shutdown_time_seconds: 30}\n",
      // Quotes, comments, a document start, and null settings (left out, as horovodrun does).
      "--- # horovodrun's config\nparams:\n  cycle_time_ms: \"7\"  # ms\n"
      "  cache_capacity: '9'\n  fusion_threshold_mb: ~\n  hierarchical_allreduce: null\n"
      "timeline:\nstall_check:\n  warning_time_seconds: 30\n  shutdown_time_seconds: 30\n",
      // A key given twice keeps its last value, as in PyYAML; a section given twice, its last.
      "params: {cycle_time_ms: 1, fusion_threshold_mb: 8}\n"
      "params: {cycle_time_ms: 1, cycle_time_ms: 7, cache_capacity: 9}\n"
      "stall_check: {warning_time_seconds: 30, shutdown_time_seconds: 30}\n",
  };
  for (const char* yaml : same) {
    INFO(yaml);
    CHECK(tuning(parse_with(dir.write("same.yaml", yaml))) == tuning(block));
  }
}

TEST_CASE("--config-file: booleans as PyYAML's YAML 1.1 reads them") {
  TempDir dir;
  for (const char* yes : {"true", "True", "yes", "Yes", "on", "ON"}) {
    const std::string path =
        dir.write("b.yaml", fmt::format("params: {{hierarchical_allreduce: {}}}\n", yes));
    CHECK(tuning(parse_with(path)).at("HOROVOD_HIERARCHICAL_ALLREDUCE") == "1");
  }
  for (const char* no : {"false", "FALSE", "no", "No", "off", "Off"}) {
    const std::string path =
        dir.write("b.yaml", fmt::format("params:\n  hierarchical_allreduce: {}\n", no));
    CHECK(tuning(parse_with(path)).at("HOROVOD_HIERARCHICAL_ALLREDUCE") == "0");
  }
}

TEST_CASE("--config-file: what yaml.safe_load refuses is refused, naming line and column") {
  TempDir dir;
  struct Case {
    const char* yaml;
    const char* says;
  };
  const Case cases[] = {
      {"params:\n  cycle_time_ms: 7: 8\n", ":2:19: YAML syntax error: illegal map value"},
      {"params: *nope\n", ":1:9: YAML syntax error: the referenced anchor is not defined"},
      {"params: {cycle_time_ms: 7\n", ":1:9: YAML syntax error: '{' is never closed"},
      {"- params\n", ":1:1: the file holds a list, not a mapping of settings"},
      {"just words\n", "the file holds 'just words', not a mapping of settings"},
      {"params: {cycle_time_ms: 7}\n---\nparams: {cycle_time_ms: 8}\n",
       "holds 2 YAML documents ('---'); horovodrun reads a single one"},
      {"params: {cycle_time_ms: [1, 2]}\n",
       ":1:25: params.cycle_time_ms: a list is nested deeper than horovodrun's settings"},
      {"params:\n  <<: 5\n", ":2:7: a merge key ('<<') takes a mapping or a list of mappings"},
      // A tag safe_load has no constructor for (as Python's object tags) is not dropped silently.
      {"params: {cycle_time_ms: !Ref 7}\n",
       ":1:25: the tag '!Ref' is not one yaml.safe_load reads"},
      {"? [a, b]\n: 1\n", ":1:3: a key is a list, not a name"},
      // An anchor that is used nowhere does not hide an unknown key.
      {"defaults: &d {cycle_time_ms: 7}\nparams: {cycle_time_ms: 7}\n",
       "unknown setting 'defaults.cycle_time_ms'"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.write("bad.yaml", c.yaml);
    check_refused(path, "--config-file " + path);
    check_refused(path, c.says);
  }
  // Aliases that expand to a huge tree ("billion laughs") are refused, not followed.
  std::string laughs = "l0: &l0 {cycle_time_ms: 7}\n";
  for (int i = 1; i <= 9; ++i) {
    laughs += fmt::format("l{}: &l{} {{<<: [", i, i);
    for (int j = 0; j < 10; ++j) laughs += fmt::format("{}*l{}", j ? ", " : "", i - 1);
    laughs += "]}\n";
  }
  laughs += "params: *l9\n";
  check_refused(dir.write("laughs.yaml", laughs), "expand to more than 100000 entries");
}
