#include "cli/spawn/cpu_binding.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

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

std::optional<std::string> apply_cpu_binding(const std::optional<std::string>& bind_to,
                                             const std::optional<std::string>& local_rank,
                                             const std::optional<std::string>& local_size) {
  if (!bind_to || *bind_to == "none" || bind_to->empty()) return std::nullopt;
  if (*bind_to != "core") {
    return fmt::format("HORA_BIND_TO='{}' is not a binding; use core or none (horarun --bind-to)",
                       *bind_to);
  }
  const std::optional<int> rank = small_integer(local_rank);
  const std::optional<int> size = small_integer(local_size);
  if (!rank || !size || *size < 1 || *rank >= *size) {
    return fmt::format(
        "--bind-to core needs HORA_LOCAL_RANK and HORA_LOCAL_SIZE (got '{}' and '{}')",
        local_rank.value_or(""), local_size.value_or(""));
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) {
    return fmt::format(
        "--bind-to core: cannot read this host's CPUs (sched_getaffinity: {}); use "
        "--bind-to none",
        std::strerror(errno));
  }
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) allowed.push_back(c);
  }
  if (allowed.empty()) return "--bind-to core: this process may run on no CPU; use --bind-to none";
  const std::vector<int> mine = cpus_for_rank(allowed, *rank, *size);
  CPU_ZERO(&mask);
  for (int c : mine) CPU_SET(c, &mask);
  if (::sched_setaffinity(0, sizeof mask, &mask) != 0) {
    return fmt::format(
        "--bind-to core: cannot bind local rank {} to CPUs {} (sched_setaffinity: "
        "{}); use --bind-to none",
        *rank, format_cpu_list(mine), std::strerror(errno));
  }
  return std::nullopt;
}

}  // namespace hora::cli
