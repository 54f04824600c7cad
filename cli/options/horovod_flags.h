// horovodrun 0.28's flags that hora handles beyond its own (docs/launcher.md, "horovodrun's
// flags"): each is accepted with the same meaning, passed to the ranks as Horovod's variable, or
// refused with the reason. Registered on options.cc's CLI11 app; the values land in Options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/options/options.h"

namespace CLI {
class App;
}

namespace hora::cli {

// Raw values as CLI11 fills them.
struct HorovodRawFlags {
  bool no_horovod_rendezvous = false;
  bool no_env_forwarding = false;
  bool version = false;
  bool gloo = false;
  bool disable_cache = false;
  std::string config_file;
  // Tri-state switches: --x / --no-x (the last one given wins; unset: not passed on).
  std::optional<bool> hierarchical_allreduce, hierarchical_allgather, torus_allreduce, autotune,
      mpi_threads_disable, log_with_timestamp, stall_check, timeline_mark_cycles;
  std::string autotune_log_file;
  std::optional<long long> autotune_warmup_samples, autotune_steps_per_sample,
      autotune_bayes_opt_max_samples, num_nccl_streams, thread_affinity;
  std::optional<double> autotune_gaussian_process_noise;
  // Refused: given means a usage error naming the reason.
  std::vector<std::pair<std::string, std::string>> refused;  // flag, reason
};

void add_horovod_flags(CLI::App& app, HorovodRawFlags& raw);

// Checks the values and writes them into `options`: refused flags throw UsageError; -v sets
// help_text to the version; Horovod's HOROVOD_* tuning names join options.tuning next to hora's
// HORA_* ones (from options.tuning and options.log_level).
void apply_horovod_flags(const HorovodRawFlags& raw, const Environment& env, Options& options);

// horovodrun's single-dash spellings hora also takes (-hostfile, -v); nullopt otherwise.
std::optional<std::string> rewrite_horovod_single_dash(const std::string& arg);

}  // namespace hora::cli
