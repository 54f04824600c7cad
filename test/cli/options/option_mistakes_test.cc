// Command-line mistakes that CLI11 would report in its own words: an option
// that takes one value given twice, an option left without its value, an empty
// --output-filename; and -x values of the runtime's duration variables, which take the ranges
// of the flags that set them (item 6). Each message names the option as typed and what to write.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cli/base/errors.h"
#include "cli/options/options.h"

using namespace hora::cli;
using Catch::Matchers::Contains;
using Args = std::vector<std::string>;

namespace {

struct Case {
  Args args;
  std::vector<const char*> says;
};

void check_refused(const Case& c) {
  INFO("args: " << Catch::Detail::stringify(c.args));
  std::string message = "accepted";
  try {
    parse_options(c.args, {{"PATH", "/usr/bin"}});
  } catch (const UsageError& e) {
    message = e.what();
  }
  for (const char* words : c.says) CHECK_THAT(message, Contains(words));
  // Never CLI11's own texts.
  CHECK_THAT(message, !Contains("At Most") && !Contains("required") && !Contains("TEXT missing"));
}

}  // namespace

TEST_CASE("an option that takes one value, given twice, names both and what to write") {
  const Case cases[] = {
      {{"-np", "2", "-np", "3", "./train"},
       {"-np is given 2 times (-np 2, -np 3)", "give it once, e.g. -np 3"}},
      {{"--num-proc=2", "-np", "3", "./train"},
       {"--num-proc is given 2 times (--num-proc=2, -np 3)"}},
      {{"-np", "2", "-H", "a:1", "--hosts", "b:1", "./train"},
       {"-H is given 2 times (-H a:1, --hosts b:1)"}},
      {{"-np", "2", "--start-timeout", "5", "--start-timeout", "6", "./train"},
       {"--start-timeout is given 2 times"}},
      {{"-np", "2", "--config-file", "a.yaml", "--config-file", "b.yaml", "./train"},
       {"--config-file is given 2 times"}},
      {{"-np", "2", "--blacklist-cooldown-range", "1", "2", "--blacklist-cooldown-range", "3", "4",
        "./train"},
       {"--blacklist-cooldown-range is given 2 times (--blacklist-cooldown-range 1 2, "
        "--blacklist-cooldown-range 3 4); it takes 2 values"}},
  };
  for (const Case& c : cases) check_refused(c);
  // The command's own options are the command's: not counted.
  Options o = parse_options({"-np", "2", "./train", "-np", "3"}, {});
  CHECK(*o.num_proc == 2);
  CHECK(o.command == Args{"./train", "-np", "3"});
  // Repeatable options stay repeatable.
  o = parse_options({"-np", "1", "-x", "A=1", "-x", "B=2", "./train"}, {});
  CHECK(o.env_forward.size() == 2);
}

TEST_CASE("an option without its value at the end says which, and how to write it") {
  const Case cases[] = {
      {{"-np", "2", "-x"},
       {"-x (--env) has no value: it is the last argument", "write -x NAME[=VALUE] before"}},
      {{"-x"}, {"-x (--env) has no value"}},
      {{"-np"}, {"-np (--num-proc) has no value", "write -np VALUE"}},
      {{"-np", "2", "-H"}, {"-H (--hosts) has no value"}},
      {{"-np", "2", "--blacklist-cooldown-range", "5"},
       {"--blacklist-cooldown-range lacks a value at the end of the command line",
        "write --blacklist-cooldown-range MIN MAX before the command"}},
  };
  for (const Case& c : cases) check_refused(c);
}

TEST_CASE("--output-filename \"\" is refused, not ignored") {
  check_refused({{"-np", "2", "--output-filename", "", "./train"},
                 {"--output-filename: the value is empty", "leave --output-filename out"}});
  check_refused(
      {{"-np", "2", "--output-filename=", "./train"}, {"--output-filename: the value is empty"}});
  CHECK(parse_options({"-np", "2", "--output-filename", "out", "./train"}, {}).output_filename ==
        "out");
}

TEST_CASE("-x of the runtime's durations takes the range of the flag that sets it") {
  const Case cases[] = {
      {{"-np", "1", "-x", "HORA_STALL_CHECK_SECONDS=1e300", "./train"},
       {"-x HORA_STALL_CHECK_SECONDS=1e300: '1e300' is not a number of seconds",
        "(as --stall-check-warning-time-seconds)"}},
      {{"-np", "1", "-x", "HORA_TIMEOUT_SECONDS=-5", "./train"}, {"(as --gloo-timeout-seconds)"}},
      {{"-np", "1", "-x", "HORA_CYCLE_TIME_MS=inf", "./train"}, {"(as --cycle-time-ms)"}},
  };
  for (const Case& c : cases) check_refused(c);
  // -x NAME takes the value from horarun's environment: checked the same.
  CHECK_THROWS_WITH(parse_options({"-np", "1", "-x", "HORA_STALL_SHUTDOWN_SECONDS", "./train"},
                                  {{"HORA_STALL_SHUTDOWN_SECONDS", "1e300"}}),
                    Contains("(as --stall-check-shutdown-time-seconds)"));
  const Options o =
      parse_options({"-np", "1", "-x", "HORA_STALL_CHECK_SECONDS=2.5", "./train"}, {});
  CHECK(o.env_forward.back() ==
        std::pair<std::string, std::string>{"HORA_STALL_CHECK_SECONDS", "2.5"});
}
