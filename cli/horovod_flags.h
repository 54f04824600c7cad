// horovodrun 0.28's flags that hora handles beyond its own (docs/launcher.md, "horovodrun's
// flags"): each is accepted with the same meaning, passed to the ranks, or refused with the
// reason. Registered on options.cc's CLI11 app; the values land in Options.
#pragma once

#include <optional>
#include <string>

#include "cli/options.h"

namespace CLI {
class App;
}

namespace hora::cli {

// Raw values as CLI11 fills them.
struct HorovodRawFlags {
  bool no_horovod_rendezvous = false;
  bool no_env_forwarding = false;
};

void add_horovod_flags(CLI::App& app, HorovodRawFlags& raw);

// Checks the values and writes them into `options` (options.tuning, ...). Throws UsageError.
void apply_horovod_flags(const HorovodRawFlags& raw, const Environment& env, Options& options);

// horovodrun's single-dash spellings hora also takes; nullopt if `arg` is none of them.
std::optional<std::string> rewrite_horovod_single_dash(const std::string& arg);

}  // namespace hora::cli
