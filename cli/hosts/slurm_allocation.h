// Hosts and slots of a Slurm allocation: inside `salloc`, `sbatch` or an `srun` step,
// horarun without -H takes its host list from the variables Slurm sets (docs/slurm.md).
//
//   SLURM_JOB_ID               set: we are inside an allocation (else slurm_hosts() is nullopt)
//   SLURM_JOB_NODELIST         the nodes, as a hostlist expression: "h[1-3,5],gpu[01-02],login"
//                              (SLURM_NODELIST, its older name, when it is unset)
//   SLURM_TASKS_PER_NODE       tasks per node in node order: "2(x3),1" is 2,2,2,1; a host's slots
//   SLURM_JOB_CPUS_PER_NODE    CPUs per node, same form; the slots when SLURM_TASKS_PER_NODE is
//                              unset, divided by SLURM_CPUS_PER_TASK when that is set
//   SLURM_NTASKS               when set, caps the total slots (the last hosts give theirs up)
//
// Tasks, not CPUs, are the slots: one task is one process (one rank), and `salloc -n 6 -c 2`
// gives 4 CPUs but 2 tasks per node. Pure functions: nothing here runs Slurm's tools. Every error
// is a UsageError that names the variable, shows its value and says what to do.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/base/environment.h"
#include "cli/hosts/host_list.h"
#include "common/job_environment.h"

namespace hora::cli {

// The most hosts a hostlist expression may expand to (a typo such as n[1-99999999] must not
// allocate gigabytes).
inline constexpr int kMaxSlurmHosts = 1 << 16;

// Parses a per-node count list, "2(x3),1" -> {2, 2, 2, 1}: comma-separated counts, each
// optionally followed by "(xN)" to repeat it N times. Counts are 0..HostSpec::kMaxSlots.
// `variable` names the variable in messages. Throws UsageError.
std::vector<int> parse_slurm_counts(std::string_view text, std::string_view variable);

// Expands a Slurm hostlist expression into node names, in order: comma-separated items, each a
// name with bracketed ranges, "n[1-3,5]" -> n1 n2 n3 n5. A range keeps the width of its lower
// bound ("gpu[08-10]" -> gpu08 gpu09 gpu10); several bracket groups give every combination
// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2), as Slurm does. Throws UsageError naming `variable`.
std::vector<std::string> expand_slurm_hostlist(std::string_view text, std::string_view variable);

// The allocation's hosts with their slots, in SLURM_JOB_NODELIST order, nodes without a slot
// left out; nullopt when SLURM_JOB_ID is unset. Throws UsageError when the variables are missing,
// malformed or disagree.
std::optional<std::vector<HostSpec>> slurm_hosts(const Environment& env);

// The variable that lets horarun run as one task of a multi-task srun step (each task then
// launches a whole job of its own).
inline constexpr std::string_view kAllowSrunStepVariable = job_env::kAllowSrunStep;

// Throws UsageError when horarun is one of several tasks of an srun step (`srun -n2 horarun ...`:
// SLURM_STEP_ID set and SLURM_STEP_NUM_TASKS, or SLURM_NTASKS when that is unset, above 1), which
// would run as many separate jobs, unless HORA_ALLOW_SRUN_STEP=1. horarun's own agents are
// one-task steps (cli/remote/slurm_agents.h) and the batch script of sbatch is no srun step.
void check_not_srun_task(const Environment& env);

}  // namespace hora::cli
