// hora's words for two mistakes CLI11 would report in its own ("--num-proc: At Most 1 required
// but received 2", "--env: 1 required TEXT missing"): an option that takes one value given more
// than once, and an option left without its value at the end of the command line. Both say the
// option as the user spelled it (-np, not --num-proc) and what to write instead. Used by
// options.cc's parse_command_line(); header-only (no source added to cli/meson.build).
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

namespace hora::cli {

// The command line as CLI11 was given it (`args`), and where each came from in the user's
// (`spelled`, through `origin`).
struct OptionArgs {
  const std::vector<std::string>& args;
  const std::vector<std::size_t>& origin;
  const std::vector<std::string>& spelled;
};

// Whether `o` takes a fixed number of values (-np N, --blacklist-cooldown-range MIN MAX), not
// a flag and not a repeatable option (-x).
inline bool takes_fixed_values(const CLI::Option& o) {
  return o.get_expected_min() >= 1 && o.get_expected_min() == o.get_expected_max() &&
         o.get_items_expected_max() == o.get_expected_min();
}

// Before parsing: an option that takes one value keeps every value it is given, so that
// repeated_option() can name them instead of CLI11 refusing the second. (One of several values,
// as --blacklist-cooldown-range, is left to CLI11, which then refuses a value too few; the
// message is repeated_option()'s all the same.)
inline void count_single_values(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (takes_fixed_values(*o) && o->get_expected_min() == 1) {
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
}

// The option args[i] names ("--num-proc" or "--num-proc=3"), or nullptr.
inline const CLI::Option* option_at(const CLI::App& app, const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return nullptr;
  const std::size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
  return app.get_option_no_throw(arg.substr(0, eq));
}

// The message for the first option that takes a fixed number of values and is given more than
// once in args[0, options_end) (the options part after a parse; all of args after CLI11 refused
// them), naming each occurrence; nullopt when none is.
inline std::optional<std::string> repeated_option(const CLI::App& app, const OptionArgs& a,
                                                  std::size_t options_end) {
  for (const CLI::Option* o : app.get_options()) {
    const int values = o->get_expected_min();
    if (!takes_fixed_values(*o)) continue;
    std::vector<std::string> given;  // "-np 2", "--num-proc=3", as typed
    std::string first;
    for (std::size_t i = 0; i < options_end; ++i) {
      if (option_at(app, a.args[i]) != o) continue;
      const std::string& typed = a.spelled[a.origin[i]];
      const bool joined = i + 1 >= options_end || a.origin[i + 1] != a.origin[i] + 1 ||
                          a.args[i].find('=') != std::string::npos;
      if (first.empty()) {
        // As typed (-np, --num-proc); the option's own name for a joined -np4.
        const std::size_t eq = typed.find('=');
        first = !joined || eq != std::string::npos ? typed.substr(0, eq) : o->get_name();
      }
      std::string occurrence = typed;
      for (std::size_t v = 1; !joined && v <= static_cast<std::size_t>(values); ++v) {
        if (i + v < options_end) occurrence += " " + a.spelled[a.origin[i + v]];
      }
      given.push_back(occurrence);
    }
    if (given.size() < 2) continue;
    return fmt::format("{} is given {} times ({}); it takes {}: give it once, e.g. {}", first,
                       given.size(), fmt::join(given, ", "),
                       values == 1 ? "one value" : fmt::format("{} values", values), given.back());
  }
  return std::nullopt;
}

// After CLI11 refused the command line: when the last option given lacks its value (`-x` at the
// end, `--blacklist-cooldown-range 5`), the message that says which and how to write it.
inline std::optional<std::string> missing_value(const CLI::App& app, const OptionArgs& a) {
  for (std::size_t i = a.args.size(); i-- > 0;) {
    const CLI::Option* o = option_at(app, a.args[i]);
    if (o == nullptr) continue;
    const std::size_t after = a.args.size() - i - 1;
    if (a.args[i].find('=') != std::string::npos ||
        after >= static_cast<std::size_t>(o->get_expected_min())) {
      return std::nullopt;
    }
    // The form the help text starts with ("NAME[=VALUE]: ...", "MIN MAX: ..."), else VALUE.
    const std::string& help = o->get_description();
    const std::size_t colon = help.find(": ");
    const bool form = colon != std::string::npos && colon > 0 &&
                      std::isupper(static_cast<unsigned char>(help[0])) != 0;
    const std::string typed = a.spelled[a.origin[i]];
    const std::string name = o->get_name();
    return fmt::format("{}{} {}; write {} {} before the command ({})", typed,
                       typed == name ? "" : " (" + name + ")",
                       after == 0 ? "has no value: it is the last argument"
                                  : "lacks a value at the end of the command line",
                       typed, form ? help.substr(0, colon) : "VALUE",
                       form ? help.substr(colon + 2) : help);
  }
  return std::nullopt;
}

}  // namespace hora::cli
