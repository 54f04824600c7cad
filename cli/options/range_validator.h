// CLI11's validator for a NumberRange (number_range.h): a flag's value is checked by
// parse_in_range() before CLI11 converts it, so a bad one gets hora's words
// ("--cycle-time-ms: '1e300' is not ..."; CLI11 puts the flag in front), never CLI11's own
// ("Could not convert").
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/options/number_range.h"

namespace hora::cli {

inline CLI::Validator in_range(NumberRange range) {
  return CLI::Validator(
      [range](std::string& value) -> std::string {
        std::string error;
        return parse_in_range(value, range, &error) ? std::string() : error;
      },
      "", "number range");
}

}  // namespace hora::cli
