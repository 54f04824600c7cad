// The replicated table of announced requests that are not yet ready on every rank.
//
// Every rank feeds it the same gathered NegotiationMessages in the same order (rank 0's first),
// so its contents, and therefore the list of names that become ready and the agreed Responses,
// are identical on all ranks. The only local, per-rank fields are the timestamps used by the
// stall check; they never influence which ops run.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/engine/response.h"

namespace hora::detail::engine {

class MessageTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MessageTable(int size) : size_(size), joined_(static_cast<std::size_t>(size), false) {}

  // Records `rank`'s request; first_seen estimates when that rank submitted it. Returns true when
  // every rank has now submitted request.name or joined. A join request (OpType::kJoin) marks
  // `rank` joined until the join is taken: from then on no entry waits for that rank, and other
  // entries may become ready (ready_names()); an op other than allreduce is then ready (to be
  // refused) as soon as one rank has submitted it. Throws hora::Error if `rank` already announced
  // the name (an engine invariant: names are unique among a rank's in-flight ops).
  bool add(int rank, const Request& request, Clock::time_point first_seen);

  // Removes a ready name and returns the agreed Response, or a kMismatch Response whose error
  // names two disagreeing ranks and their values (or, with joined ranks, says that only
  // allreduce runs alongside a join, as Horovod's does). The join's Response carries the last
  // rank to join in request.root; taking it ends the join (no rank is joined any more).
  Response take(const std::string& name);
  // Every entry that is ready now, in name order (the same on every rank).
  std::vector<std::string> ready_names() const;
  bool any_joined() const { return joined_count_ > 0; }
  bool joined(int rank) const { return joined_[static_cast<std::size_t>(rank)]; }

  struct Pending {
    std::string name;
    OpType type = OpType::kAllreduce;
    std::vector<int> submitted;  // ascending
    std::vector<int> missing;    // ascending
    Clock::time_point first_seen;
  };
  // Removes a name that not every rank submitted (stall shutdown); nullopt if absent.
  std::optional<Pending> erase(const std::string& name);
  // Names waiting since before `cutoff`, in name order.
  std::vector<Pending> pending_since(Clock::time_point cutoff) const;

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<std::optional<Request>> by_rank;
    int submitted = 0;
    Clock::time_point first_seen;
  };
  Pending describe(const std::string& name, const Entry& entry) const;
  bool ready(const Entry& entry) const;

  int size_;
  std::vector<bool> joined_;  // by rank: announced the join now pending
  int joined_count_ = 0;
  int last_joined_ = -1;
  std::map<std::string, Entry> entries_;
};

}  // namespace hora::detail::engine
