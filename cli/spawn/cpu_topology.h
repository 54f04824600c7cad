// This host's CPU topology as --bind-to socket|numa and --map-by socket|numa need it: which CPUs
// share a socket (physical package) and which a NUMA node, read from sysfs. The root is a
// parameter ("/sys" on a real host) so tests can feed a fake tree.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hora::cli {

struct CpuTopology {
  // Each socket's CPUs, ascending, sockets by ascending physical_package_id.
  std::vector<std::vector<int>> sockets;
  // Each NUMA node's CPUs, ascending, nodes by ascending node number (nodes without CPUs left
  // out). A host without /sys/devices/system/node has one node holding every CPU.
  std::vector<std::vector<int>> numa_nodes;
};

// Reads ROOT/devices/system/cpu/cpuN/topology/physical_package_id (a CPU without it is on
// socket 0) and ROOT/devices/system/node/nodeN/cpulist. Throws std::runtime_error naming the file
// when one is unreadable or malformed, or when no CPU is listed.
CpuTopology read_cpu_topology(const std::string& sysfs_root);

// "0-3,8" -> {0, 1, 2, 3, 8} (sysfs's and Cpus_allowed_list's format); nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace hora::cli
