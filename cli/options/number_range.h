// The ranges of horarun's numbers and their one parser: the command line's validators
// (options.cc), the --config-file's values (horovod_flags.cc) and horovodrun's variables
// (HOROVOD_START_TIMEOUT) go through parse_in_range(), so a value is parsed once, the same way,
// and an overflow (1e300, 99999999999) is refused with the same words wherever it comes from.
// Header-only (small; no source added to cli/meson.build).
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace hora::cli {

struct NumberRange {
  double lo = 0;
  double hi = 0;
  bool above_lo = false;  // (lo, hi] instead of [lo, hi]
  bool integer = false;   // whole numbers only (no fraction, no exponent)
  const char* what = "";  // what the number counts: "a number of seconds"
};

// A count passed on as it is (autotune samples, NCCL streams): a whole number of at least 0.
inline constexpr NumberRange kCountRange{0, 1e15, false, true, "a whole number"};

// Decimal text of a number for a variable or a message: integers without a fraction.
inline std::string number_text(double v) {
  if (std::abs(v) < 9e18 && v == static_cast<double>(static_cast<long long>(v))) {
    return std::to_string(static_cast<long long>(v));
  }
  return fmt::format("{}", v);
}

// `text` as a number in `range`; nullopt with *error saying what is wrong and what to give (no
// flag name: the caller puts the flag or config key in front).
inline std::optional<double> parse_in_range(const std::string& text, const NumberRange& range,
                                            std::string* error) {
  if (text.empty()) {
    *error = fmt::format("the value is empty; give {}", range.what);
    return std::nullopt;
  }
  if (range.integer) {
    long long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && v >= range.lo && v <= range.hi) {
      return static_cast<double>(v);
    }
    *error = fmt::format("'{}' is not {} from {} to {}", text, range.what, number_text(range.lo),
                         number_text(range.hi));
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool parsed = errno == 0 && end == text.c_str() + text.size() && std::isfinite(v);
  if (parsed && v <= range.hi && (range.above_lo ? v > range.lo : v >= range.lo)) return v;
  *error = fmt::format("'{}' is not {} {} {} and at most {}", text, range.what,
                       range.above_lo ? "greater than" : "of at least", number_text(range.lo),
                       number_text(range.hi));
  return std::nullopt;
}

}  // namespace hora::cli
