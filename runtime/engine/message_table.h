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

  explicit MessageTable(int size) : size_(size) {}

  // Records `rank`'s request; first_seen estimates when that rank submitted it. Returns true when
  // every rank has now submitted request.name. Throws hora::Error if `rank` already announced
  // the name (an engine invariant: names are unique among a rank's in-flight ops).
  bool add(int rank, const Request& request, Clock::time_point first_seen);

  // Removes a name every rank has submitted and returns the agreed Response, or a kMismatch
  // Response whose error names two disagreeing ranks and their values.
  Response take(const std::string& name);

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

  int size_;
  std::map<std::string, Entry> entries_;
};

}  // namespace hora::detail::engine
