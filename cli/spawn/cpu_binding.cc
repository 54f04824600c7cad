#include "cli/spawn/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

namespace hora::cli {
namespace {

std::optional<int> small_integer(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 9) return std::nullopt;
  int v = 0;
  for (char c : *text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<CpuLevel> level_named(const std::string& name) {
  if (name == "none") return CpuLevel::none;
  if (name == "core" || name == "slot") return CpuLevel::core;
  if (name == "socket") return CpuLevel::socket;
  if (name == "numa") return CpuLevel::numa;
  return std::nullopt;
}

const char* level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::none: return "none";
    case CpuLevel::core: return "core";
    case CpuLevel::socket: return "socket";
    case CpuLevel::numa: return "numa";
  }
  return "?";
}

// Each object's CPUs inside `allowed` (both ascending); objects with none left out.
std::vector<std::vector<int>> within(const std::vector<std::vector<int>>& objects,
                                     const std::vector<int>& allowed) {
  std::vector<std::vector<int>> out;
  for (const auto& cpus : objects) {
    std::vector<int> both;
    std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(),
                          std::back_inserter(both));
    if (!both.empty()) out.push_back(std::move(both));
  }
  return out;
}

const std::vector<std::vector<int>>& objects_at(const CpuTopology& topology, CpuLevel level) {
  return level == CpuLevel::socket ? topology.sockets : topology.numa_nodes;
}

bool intersects(const std::vector<int>& a, const std::vector<int>& b) {
  return std::find_first_of(a.begin(), a.end(), b.begin(), b.end()) != a.end();
}

}  // namespace

std::vector<int> cpus_for_rank(const std::vector<int>& allowed, int local_rank, int local_size) {
  const auto n = allowed.size();
  const auto r = static_cast<std::size_t>(local_rank);
  const auto s = static_cast<std::size_t>(local_size);
  if (n < s) return {allowed[r % n]};
  const std::size_t share = n / s;
  return {allowed.begin() + static_cast<std::ptrdiff_t>(r * share),
          allowed.begin() + static_cast<std::ptrdiff_t>((r + 1) * share)};
}

std::vector<int> cpus_for_placement(const CpuTopology& topology, const std::vector<int>& allowed,
                                    CpuLevel bind, std::optional<CpuLevel> map, int local_rank,
                                    int local_size) {
  const bool by_object = map == CpuLevel::socket || map == CpuLevel::numa;
  if (bind == CpuLevel::none) return {};
  if (bind == CpuLevel::core && !by_object) return cpus_for_rank(allowed, local_rank, local_size);
  // Mapping: the place, and this rank's index k among the m ranks mapped there.
  std::vector<int> place;
  int k = 0;
  int m = 1;
  const CpuLevel map_level = by_object                ? *map
                             : !map && local_size > 2 ? CpuLevel::numa  // mpirun's default
                                                      : CpuLevel::core;
  std::vector<std::vector<int>> places;
  if (map_level != CpuLevel::core) places = within(objects_at(topology, map_level), allowed);
  if (!places.empty()) {
    const int n = static_cast<int>(places.size());
    const int o = local_rank % n;
    place = places[static_cast<std::size_t>(o)];
    k = local_rank / n;
    m = (local_size - o + n - 1) / n;
  } else {  // by core: CPU r of the mask
    place = {allowed[static_cast<std::size_t>(local_rank) % allowed.size()]};
  }
  if (bind == CpuLevel::core) return cpus_for_rank(place, k, m);
  // Binding to an object: the one holding the place, or round-robin over those inside it.
  std::vector<std::vector<int>> candidates;
  for (auto& object : within(objects_at(topology, bind), allowed)) {
    if (intersects(object, place)) candidates.push_back(std::move(object));
  }
  if (candidates.empty()) return place;  // the topology lists none of these CPUs
  return candidates[static_cast<std::size_t>(k) % candidates.size()];
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::string> plan_cpu_binding(const BindingVariables& variables,
                                            const std::vector<int>& allowed,
                                            const std::string& sysfs_root, std::vector<int>& cpus) {
  cpus.clear();
  std::optional<CpuLevel> map;
  if (variables.map_by && !variables.map_by->empty()) {
    map = level_named(*variables.map_by);
    if (!map || *map == CpuLevel::none) {
      return fmt::format(
          "HORA_MAP_BY='{}' is not a mapping; use slot, core, socket or numa (horarun --map-by)",
          *variables.map_by);
    }
  }
  CpuLevel bind = CpuLevel::none;
  if (variables.bind_to && !variables.bind_to->empty()) {
    const auto named =
        *variables.bind_to == "slot" ? std::nullopt : level_named(*variables.bind_to);
    if (!named) {
      return fmt::format(
          "HORA_BIND_TO='{}' is not a binding; use none, core, socket or numa (horarun "
          "--bind-to)",
          *variables.bind_to);
    }
    bind = *named;
  } else if (map == CpuLevel::socket || map == CpuLevel::numa) {
    bind = *map;  // mpirun binds to the object it maps by
  }
  if (bind == CpuLevel::none) return std::nullopt;
  const std::string flag = fmt::format("--bind-to {}", level_name(bind));
  const std::optional<int> rank = small_integer(variables.local_rank);
  const std::optional<int> size = small_integer(variables.local_size);
  if (!rank || !size || *size < 1 || *rank >= *size) {
    return fmt::format("{} needs HORA_LOCAL_RANK and HORA_LOCAL_SIZE (got '{}' and '{}')", flag,
                       variables.local_rank.value_or(""), variables.local_size.value_or(""));
  }
  if (allowed.empty()) return flag + ": this process may run on no CPU; use --bind-to none";
  CpuTopology topology;
  const bool needs_topology = bind == CpuLevel::socket || bind == CpuLevel::numa ||
                              map == CpuLevel::socket || map == CpuLevel::numa;
  if (needs_topology) {
    try {
      topology = read_cpu_topology(sysfs_root);
    } catch (const std::exception& e) {
      return fmt::format("{}{}: {}; use --bind-to core or none", flag,
                         map ? fmt::format(" --map-by {}", level_name(*map)) : "", e.what());
    }
  }
  cpus = cpus_for_placement(topology, allowed, bind, map, *rank, *size);
  return std::nullopt;
}

std::optional<std::string> apply_cpu_binding(const BindingVariables& variables) {
  const bool asked = (variables.bind_to && !variables.bind_to->empty()) ||
                     (variables.map_by && !variables.map_by->empty());
  if (!asked) return std::nullopt;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) {
    return fmt::format(
        "--bind-to: cannot read this host's CPUs (sched_getaffinity: {}); use --bind-to none",
        std::strerror(errno));
  }
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) allowed.push_back(c);
  }
  std::vector<int> mine;
  if (auto error = plan_cpu_binding(variables, allowed, "/sys", mine)) return error;
  if (mine.empty()) return std::nullopt;
  CPU_ZERO(&mask);
  for (int c : mine) CPU_SET(c, &mask);
  if (::sched_setaffinity(0, sizeof mask, &mask) != 0) {
    return fmt::format(
        "--bind-to {}: cannot bind local rank {} to CPUs {} (sched_setaffinity: {}); use "
        "--bind-to none",
        variables.bind_to.value_or(variables.map_by.value_or("")),
        variables.local_rank.value_or(""), format_cpu_list(mine), std::strerror(errno));
  }
  return std::nullopt;
}

}  // namespace hora::cli
