#include "cli/hosts/rank_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/base/errors.h"

namespace hora::cli {

int RankTable::job_size(const std::vector<HostSpec>& hosts, std::optional<int> np) {
  if (np) return *np;
  const long long slots = total_slots(hosts);
  if (slots > kMaxRanks) {
    throw UsageError(fmt::format(
        "the {} hosts have {} slots together, more than one job can have ranks ({}); give -np "
        "with the number of ranks to start",
        hosts.size(), slots, kMaxRanks));
  }
  return static_cast<int>(slots);
}

RankTable::RankTable(const std::vector<HostSpec>& hosts, int np) {
  if (np < 1) throw UsageError(fmt::format("-np must be at least 1, not {}", np));
  const long long slots = total_slots(hosts);
  if (np > slots) {
    throw UsageError(
        fmt::format("requested more processes (-np {}) than there are slots ({} on {} host{}); "
                    "lower -np or add slots with -H host:slots or --hostfile",
                    np, slots, hosts.size(), hosts.size() == 1 ? "" : "s"));
  }
  int next = 0;
  for (const HostSpec& spec : hosts) {
    if (next == np) break;
    const int here = std::min(spec.slots, np - next);
    HostSpec kept = spec;
    kept.slots = here;
    const int host_index = static_cast<int>(hosts_.size());
    hosts_.push_back(std::move(kept));
    for (int l = 0; l < here; ++l) {
      RankInfo info;
      info.rank = next++;
      info.local_rank = l;
      info.local_size = here;
      info.host_index = host_index;
      ranks_.push_back(info);
    }
  }
  // Hosts are in list order, so the hosts having local rank l are exactly those with more than
  // l ranks, and a host's cross rank is its position among them.
  for (RankInfo& info : ranks_) {
    int cross_rank = 0;
    int cross_size = 0;
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
      if (hosts_[h].slots > info.local_rank) {
        if (static_cast<int>(h) < info.host_index) ++cross_rank;
        ++cross_size;
      }
    }
    info.cross_rank = cross_rank;
    info.cross_size = cross_size;
  }
}

std::string RankTable::describe() const {
  std::string out = fmt::format("{:>5}  {:<24} {:>10} {:>10} {:>10} {:>10}\n", "rank", "host",
                                "local_rank", "local_size", "cross_rank", "cross_size");
  for (const RankInfo& r : ranks_) {
    const HostSpec& h = hosts_[static_cast<std::size_t>(r.host_index)];
    std::string host =
        h.user.empty() ? h.address_for_display() : h.user + "@" + h.address_for_display();
    out += fmt::format("{:>5}  {:<24} {:>10} {:>10} {:>10} {:>10}\n", r.rank, host, r.local_rank,
                       r.local_size, r.cross_rank, r.cross_size);
  }
  return out;
}

}  // namespace hora::cli
