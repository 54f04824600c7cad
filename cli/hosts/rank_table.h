// The rank table: which rank runs on which host, with Horovod's rank numbering.
//
// Ranks fill the hosts' slots in list order: with -H a:2,b:2 ranks 0,1 go to a and 2,3 to b.
// -np below the total fills the first slots and drops hosts that receive no rank; -np above it
// is a usage error. For rank r on host h:
//   local_rank  = r's position among the ranks on h;  local_size = ranks on h
//   cross_rank  = index of h among the hosts that have a rank with r's local_rank
//   cross_size  = number of hosts that have a rank with r's local_rank
// (horovod/runner/common/util/hosts.py). host_index is h's index among the hosts kept.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/hosts/host_list.h"

namespace hora::cli {

struct RankInfo {
  int rank = 0;
  int local_rank = 0;
  int local_size = 0;
  int cross_rank = 0;
  int cross_size = 0;
  int host_index = 0;  // index into RankTable::hosts()
};

class RankTable {
 public:
  // The most ranks one job can have: -np and the hosts' slots together are checked against it.
  static constexpr int kMaxRanks = 1 << 20;

  // The number of ranks of a job on `hosts`: `np` when given (-np), else every slot. Throws
  // UsageError when the slots together exceed kMaxRanks and no -np says how many to use.
  static int job_size(const std::vector<HostSpec>& hosts, std::optional<int> np);

  // Throws UsageError when np exceeds the slots (naming both numbers) or np < 1.
  RankTable(const std::vector<HostSpec>& hosts, int np);

  int size() const { return static_cast<int>(ranks_.size()); }
  const RankInfo& rank(int r) const { return ranks_.at(static_cast<std::size_t>(r)); }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  // Hosts that received at least one rank, in list order; slots = ranks placed there.
  const std::vector<HostSpec>& hosts() const { return hosts_; }
  const HostSpec& host_of(int r) const { return hosts_.at(rank(r).host_index); }

  // A human-readable table (for --dry-run and --verbose): one line per rank.
  std::string describe() const;

 private:
  std::vector<HostSpec> hosts_;
  std::vector<RankInfo> ranks_;
};

}  // namespace hora::cli
