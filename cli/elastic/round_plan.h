// The next round of an elastic job (docs/elastic.md, "Rounds"): which workers stay, which start
// where, and every rank's numbers. Pure: no I/O, no clock.
//
// The rule (Horovod's, horovod/runner/elastic/driver.py and horovod/runner/common/util/hosts.py,
// with stable worker identities):
// - Host order: the hosts that run workers now first, in the order of their workers' current
//   ranks (so they keep their order), then the other available hosts in the order given
//   (discovery's). Blacklisted hosts are left out.
// - A worker stays when its host is available (listed, not blacklisted) and its local slot is
//   below the host's slots. Past `max_np`, the workers of the last hosts (highest slots first)
//   are stopped.
// - New workers fill the free slots of the hosts in host order, lowest slot first, up to
//   `max_np` (every available slot when unset). For round 0 pass -np as max_np.
// - Ranks: each host's workers are contiguous, in local-slot order; hosts in host order.
//   local_rank is the worker's position on its host (its slot when the host's slots are all
//   used from 0), and cross_rank/cross_size are Horovod's (cli/hosts/rank_table.h).
//   Appending a host does not renumber the workers of the hosts before it.
// A host is one name (HostSpec::name); the user part goes with it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/hosts/host_list.h"
#include "cli/hosts/rank_table.h"

namespace hora::cli {

// A worker alive now.
struct CurrentWorker {
  int worker_id = 0;   // HORA_WORKER_ID: stable for the job's life
  std::string host;    // HostSpec::name
  int local_slot = 0;  // the slot it runs in on its host (0-based)
  int rank = 0;        // its rank in the current round (orders the hosts)
};

struct RoundInput {
  std::vector<CurrentWorker> workers;  // the alive workers; empty for round 0
  // The available hosts and their slots, in discovery order (or -H's). Hosts with 0 slots or
  // not listed here have no workers in the next round.
  std::vector<HostSpec> hosts;
  std::vector<std::string> blacklisted;  // Blacklist::blacklisted(now)
  int min_np = 1;
  std::optional<int> max_np;  // round 0: -np
  int next_worker_id = 0;     // the id of the first new worker; the others follow
};

// One rank of the next round.
struct PlannedRank {
  RankInfo info;        // rank, local_rank, local_size, cross_rank, cross_size, host_index
  int worker_id = 0;    // a kept worker's id, or a new one (>= RoundInput::next_worker_id)
  bool is_new = false;  // to be started
  int local_slot = 0;   // its slot on its host
};

struct RoundPlan {
  std::vector<PlannedRank> ranks;  // by rank: ranks[r].info.rank == r
  // The hosts with at least one rank, in host order; slots = the ranks there. RankInfo's
  // host_index indexes this.
  std::vector<HostSpec> hosts;
  std::vector<int> kept;     // ids of the workers that stay, by new rank
  std::vector<int> stopped;  // ids of alive workers that do not stay (to stop), ascending
  std::vector<int> started;  // ids of the new workers, by rank
  int size = 0;              // ranks.size()
  bool enough = false;       // size >= min_np: the round can start
  // kept.empty() after round 0 means no worker holds the last commit (Horovod stops the job then:
  // "No hosts from previous set remaining, unable to broadcast state").

  // worker id -> rank in this round; nullopt when the worker has no rank in it.
  std::optional<int> rank_of(int worker_id) const;
  // The host of rank r.
  const HostSpec& host_of(int rank) const;
};

// Throws std::invalid_argument when two workers share an id or a host's slot, or a host is
// listed twice.
RoundPlan plan_round(const RoundInput& input);

}  // namespace hora::cli
