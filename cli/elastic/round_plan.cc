#include "cli/elastic/round_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace hora::cli {

std::optional<int> RoundPlan::rank_of(int worker_id) const {
  for (const PlannedRank& r : ranks) {
    if (r.worker_id == worker_id) return r.info.rank;
  }
  return std::nullopt;
}

const HostSpec& RoundPlan::host_of(int rank) const {
  return hosts.at(
      static_cast<std::size_t>(ranks.at(static_cast<std::size_t>(rank)).info.host_index));
}

RoundPlan plan_round(const RoundInput& input) {
  // The available hosts by name.
  const std::set<std::string> blacklisted(input.blacklisted.begin(), input.blacklisted.end());
  std::map<std::string, const HostSpec*> available;
  for (const HostSpec& h : input.hosts) {
    if (!available.emplace(h.name, &h).second) {
      throw std::invalid_argument(fmt::format("plan_round: host '{}' is listed twice", h.name));
    }
  }
  auto usable = [&](const std::string& name) -> const HostSpec* {
    const auto it = available.find(name);
    if (it == available.end() || blacklisted.count(name) != 0 || it->second->slots <= 0) {
      return nullptr;
    }
    return it->second;
  };

  // The workers by host, each host's in slot order; hosts ordered by their lowest current rank.
  std::set<int> ids;
  std::map<std::string, std::map<int, const CurrentWorker*>> by_host;  // host -> slot -> worker
  std::map<std::string, int> first_rank;
  for (const CurrentWorker& w : input.workers) {
    if (!ids.insert(w.worker_id).second) {
      throw std::invalid_argument(fmt::format("plan_round: worker id {} twice", w.worker_id));
    }
    if (!by_host[w.host].emplace(w.local_slot, &w).second) {
      throw std::invalid_argument(
          fmt::format("plan_round: two workers in slot {} of host '{}'", w.local_slot, w.host));
    }
    auto [it, inserted] = first_rank.emplace(w.host, w.rank);
    if (!inserted) it->second = std::min(it->second, w.rank);
  }
  std::vector<std::string> running_hosts;
  for (const auto& [host, rank] : first_rank) running_hosts.push_back(host);
  std::sort(running_hosts.begin(), running_hosts.end(),
            [&](const std::string& a, const std::string& b) {
              return first_rank[a] < first_rank[b];
            });

  // Host order: the running hosts that remain, then the others as given.
  std::vector<const HostSpec*> order;
  std::set<std::string> ordered;
  for (const std::string& host : running_hosts) {
    if (const HostSpec* h = usable(host)) {
      order.push_back(h);
      ordered.insert(host);
    }
  }
  for (const HostSpec& h : input.hosts) {
    if (ordered.count(h.name) == 0 && usable(h.name) != nullptr) order.push_back(&h);
  }

  const long long cap =
      std::min<long long>(input.max_np.value_or(RankTable::kMaxRanks), RankTable::kMaxRanks);
  // Per host (in order): the slots used, each with its worker (nullptr: new).
  std::vector<std::map<int, const CurrentWorker*>> slots(order.size());
  long long count = 0;
  std::set<int> kept_ids;
  // Kept workers first: they are never displaced by new ones.
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto it = by_host.find(order[i]->name);
    if (it == by_host.end()) continue;
    for (const auto& [slot, worker] : it->second) {
      if (slot < 0 || slot >= order[i]->slots || count >= cap) continue;
      slots[i].emplace(slot, worker);
      kept_ids.insert(worker->worker_id);
      ++count;
    }
  }
  // Then new workers in the free slots, host by host, lowest slot first.
  for (std::size_t i = 0; i < order.size() && count < cap; ++i) {
    for (int slot = 0; slot < order[i]->slots && count < cap; ++slot) {
      if (slots[i].emplace(slot, nullptr).second) ++count;
    }
  }

  RoundPlan plan;
  std::vector<HostSpec> counts;
  std::vector<std::vector<std::pair<int, const CurrentWorker*>>> placed;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (slots[i].empty()) continue;
    HostSpec h = *order[i];
    h.slots = static_cast<int>(slots[i].size());
    counts.push_back(h);
    placed.emplace_back(slots[i].begin(), slots[i].end());
  }
  plan.hosts = counts;
  int next_id = input.next_worker_id;
  if (count > 0) {
    // Horovod's numbering of these per-host counts; host h's local rank l is its l-th slot.
    const RankTable table(counts, static_cast<int>(count));
    for (const RankInfo& info : table.ranks()) {
      const auto& [slot, worker] = placed[static_cast<std::size_t>(info.host_index)]
                                         [static_cast<std::size_t>(info.local_rank)];
      PlannedRank r;
      r.info = info;
      r.local_slot = slot;
      r.is_new = worker == nullptr;
      r.worker_id = worker != nullptr ? worker->worker_id : next_id++;
      (r.is_new ? plan.started : plan.kept).push_back(r.worker_id);
      plan.ranks.push_back(r);
    }
  }
  for (int id : ids) {
    if (kept_ids.count(id) == 0) plan.stopped.push_back(id);
  }
  plan.size = static_cast<int>(plan.ranks.size());
  plan.enough = plan.size >= input.min_np;
  return plan;
}

}  // namespace hora::cli
