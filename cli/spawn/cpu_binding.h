// --bind-to and --map-by: which CPUs of a host a rank may run on, with Open MPI's meaning for
// socket and numa and hora's own equal shares for core.
//
// The guard applies it to itself before it forks the rank (the rank inherits it), from the
// rank's environment: HORA_BIND_TO (none, core, socket or numa), HORA_MAP_BY (slot, core,
// socket or numa; unset: the default), HORA_LOCAL_RANK and HORA_LOCAL_SIZE. Only the CPUs the
// guard may use count (its affinity mask: a cpuset, a container's limit or a Slurm allocation's
// CPUs are respected); a socket or NUMA node is the part of it inside that mask.
//
// The rules (docs/launcher.md, "CPU binding"):
// - the mapping puts local rank r on a place: with --map-by socket|numa, socket/node
//   r % count (round-robin, as mpirun --map-by socket); with --map-by core|slot, and by default
//   when the host has at most 2 local ranks, the CPU r of the mask (mpirun's default, by core);
//   by default with more local ranks, NUMA node r % count (mpirun's default, by numa);
// - the binding gives it CPUs from that place: socket|numa, all CPUs of the socket/node holding
//   the place (round-robin over those inside it when the place is larger); core, an equal share
//   of the place's CPUs among the ranks mapped there;
// - --bind-to core without --map-by socket|numa keeps hora's equal shares of the whole mask;
//   --map-by socket|numa without --bind-to binds to that object (as mpirun does).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/spawn/cpu_topology.h"

namespace hora::cli {

// Local rank `local_rank` of `local_size` over the CPUs in `allowed` (in order): with at least as
// many CPUs as ranks, the rank's equal share (allowed.size() / local_size CPUs, consecutive);
// with fewer, the one CPU local_rank % allowed.size() (ranks share CPUs round-robin).
// Precondition: allowed is non-empty, 0 <= local_rank < local_size.
std::vector<int> cpus_for_rank(const std::vector<int>& allowed, int local_rank, int local_size);

enum class CpuLevel { none, core, socket, numa };

// The CPUs for local rank `local_rank` of `local_size`, binding at `bind` (not none) after
// mapping by `map` (nullopt: the default; core: by core, also for slot). `allowed` ascending,
// non-empty.
std::vector<int> cpus_for_placement(const CpuTopology& topology, const std::vector<int>& allowed,
                                    CpuLevel bind, std::optional<CpuLevel> map, int local_rank,
                                    int local_size);

// The rank's variables as the guard reads them.
struct BindingVariables {
  std::optional<std::string> bind_to;     // HORA_BIND_TO
  std::optional<std::string> map_by;      // HORA_MAP_BY
  std::optional<std::string> local_rank;  // HORA_LOCAL_RANK
  std::optional<std::string> local_size;  // HORA_LOCAL_SIZE
};

// The CPUs this rank is to be bound to (`cpus`; left empty: no binding), given the CPUs it may
// use (`allowed`, ascending) and sysfs at `sysfs_root` (read only for socket or numa). Returns an
// error message saying what to change, or nullopt.
std::optional<std::string> plan_cpu_binding(const BindingVariables& variables,
                                            const std::vector<int>& allowed,
                                            const std::string& sysfs_root, std::vector<int>& cpus);

// Binds this process as `variables` ask (nothing for none), reading /sys. Returns an error
// message saying what to change, or nullopt on success.
std::optional<std::string> apply_cpu_binding(const BindingVariables& variables);

// "0-3,8" for {0, 1, 2, 3, 8}: how Linux lists CPU sets (Cpus_allowed_list).
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace hora::cli
