#include "cli/spawn/cpu_topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace hora::cli {
namespace {

namespace fs = std::filesystem;

// N for a directory entry named PREFIX + digits ("cpu12", "node1"), else nullopt.
std::optional<int> numbered(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  if (name.size() - prefix.size() > 6) return std::nullopt;
  int v = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

std::map<int, fs::path> numbered_entries(const fs::path& dir, const std::string& prefix) {
  std::map<int, fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (auto n = numbered(it->path().filename().string(), prefix)) out[*n] = it->path();
  }
  return out;
}

std::string read_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    throw std::runtime_error(
        fmt::format("cannot read {} (the host's CPU topology)", file.string()));
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int a = 0;
    int b = 0;
    char dash = 0;
    std::istringstream one(item);
    if (!(one >> a) || a < 0) return std::nullopt;
    b = a;
    if (one >> dash) {
      if (dash != '-' || !(one >> b) || b < a || b - a > 1 << 16) return std::nullopt;
    }
    one >> std::ws;
    if (!one.eof()) return std::nullopt;
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CpuTopology read_cpu_topology(const std::string& sysfs_root) {
  const fs::path system = fs::path(sysfs_root) / "devices" / "system";
  CpuTopology topo;
  std::map<int, std::vector<int>> sockets;
  std::vector<int> all;
  for (const auto& [cpu, dir] : numbered_entries(system / "cpu", "cpu")) {
    const fs::path id_file = dir / "topology" / "physical_package_id";
    int package = 0;
    std::error_code ec;
    if (fs::exists(id_file, ec)) {
      const std::string text = read_line(id_file);
      try {
        std::size_t used = 0;
        package = std::stoi(text, &used);
        if (used != text.size()) throw std::invalid_argument(text);
      } catch (const std::exception&) {
        throw std::runtime_error(
            fmt::format("{} holds '{}', not a socket number", id_file.string(), text));
      }
    }
    sockets[package].push_back(cpu);
    all.push_back(cpu);
  }
  if (all.empty()) {
    throw std::runtime_error(fmt::format("no CPU listed under {}", (system / "cpu").string()));
  }
  for (auto& [id, cpus] : sockets) topo.sockets.push_back(std::move(cpus));
  for (const auto& [node, dir] : numbered_entries(system / "node", "node")) {
    const fs::path list_file = dir / "cpulist";
    const std::string text = read_line(list_file);
    auto cpus = parse_cpu_list(text);
    if (!cpus) {
      throw std::runtime_error(
          fmt::format("{} holds '{}', not a CPU list", list_file.string(), text));
    }
    if (!cpus->empty()) topo.numa_nodes.push_back(std::move(*cpus));
  }
  if (topo.numa_nodes.empty()) topo.numa_nodes.push_back(all);
  return topo;
}

}  // namespace hora::cli
