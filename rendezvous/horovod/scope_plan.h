// The scopes of Horovod's HTTP rendezvous that one job may use, and how many ranks each has
// (docs/rendezvous.md, "Horovod's HTTP rendezvous").
//
// Horovod's workers form three Gloo contexts, each through its own scope of the HTTP store:
// `global` (every rank), `local_<HOROVOD_HOSTNAME>` (the ranks of one host) and
// `cross_<HOROVOD_LOCAL_RANK>` (the ranks with that local rank, one per host). Process sets
// (including the global one, which Horovod always creates) use the same names with the suffix
// `_process_set_hash_<hex>`; their sizes are chosen by the program, so the plan only bounds them
// by the size of the scope they derive from.
//
// Two more scopes belong to Horovod's elastic API (horovod/runner/elastic/), keyed by slot,
// `<HOROVOD_HOSTNAME>:<HOROVOD_LOCAL_RANK>`: `worker_addresses`, where `hvd.elastic.run` stores
// the address of the rank's notification service, and `rank_and_size`, which the launcher
// answers (read-only) with the slot's "rank,size,local_rank,local_size,cross_rank,cross_size"
// when a worker started with HOROVOD_ELASTIC=1 re-initialises.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hora::rdv::horovod {

// One rank's place in the job, in Horovod's numbering.
struct Slot {
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

struct ScopePlan {
  int world_size = 1;
  std::map<std::string, int> sizes;   // "global", "local_<host>", "cross_<n>" -> ranks
  std::map<std::string, Slot> slots;  // "<host>:<local rank>" -> that rank's slot

  // Adds one rank's three scopes and its slot (idempotent for the same rank).
  void add_rank(const std::string& hostname, const Slot& slot);
};

enum class ScopeKind {
  kGloo,             // global, local_<host>, cross_<n>: a Gloo context's rendezvous, in rounds
  kProcessSet,       // <one of those>_process_set_hash_<hex>
  kWorkerAddresses,  // worker_addresses: one key per slot, stored as sent
  kRankAndSize,      // rank_and_size: one key per slot, answered from the plan, read-only
};

// What a scope name means in a plan.
struct ScopeInfo {
  std::string base;   // the plan scope it is or derives from (the name itself for slot scopes)
  int base_size = 0;  // ranks in the base scope (slot scopes: the job's size)
  ScopeKind kind = ScopeKind::kGloo;
};

inline constexpr std::string_view kWorkerAddressesScope = "worker_addresses";
inline constexpr std::string_view kRankAndSizeScope = "rank_and_size";

// Resolves a scope name against the plan; nullopt when the job has no such scope.
std::optional<ScopeInfo> resolve_scope(const ScopePlan& plan, std::string_view scope);

// The slot a key of a slot scope names ("<host>:<local rank>"); nullptr when the plan has none.
const Slot* find_slot(const ScopePlan& plan, std::string_view key);

}  // namespace hora::rdv::horovod
