// --bind-to core: which CPUs of a host a rank may run on (mpirun's --bind-to core, with each
// rank given an equal share of the host's CPUs so a rank's own threads keep several).
//
// The guard applies it to itself before it forks the rank (the rank inherits it), from the
// rank's environment: HORA_BIND_TO (core or none), HORA_LOCAL_RANK and HORA_LOCAL_SIZE. The CPUs
// shared out are those the guard may use (its affinity mask: a cpuset, a container's limit or a
// Slurm allocation's CPUs are respected).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hora::cli {

// Local rank `local_rank` of `local_size` over the CPUs in `allowed` (in order): with at least as
// many CPUs as ranks, the rank's equal share (allowed.size() / local_size CPUs, consecutive);
// with fewer, the one CPU local_rank % allowed.size() (ranks share CPUs round-robin).
// Precondition: allowed is non-empty, 0 <= local_rank < local_size.
std::vector<int> cpus_for_rank(const std::vector<int>& allowed, int local_rank, int local_size);

// Binds this process as HORA_BIND_TO in `env_value` asks (nullopt or "none": nothing). Returns
// an error message saying what to change, or nullopt on success.
std::optional<std::string> apply_cpu_binding(const std::optional<std::string>& bind_to,
                                             const std::optional<std::string>& local_rank,
                                             const std::optional<std::string>& local_size);

// "0-3,8" for {0, 1, 2, 3, 8}: how Linux lists CPU sets (Cpus_allowed_list).
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace hora::cli
