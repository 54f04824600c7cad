// The scopes of Horovod's Gloo rendezvous that one job may use, and how many ranks each has
// (docs/rendezvous.md, "Horovod's HTTP rendezvous").
//
// Horovod's workers form three Gloo contexts, each through its own scope of the HTTP store:
// `global` (every rank), `local_<HOROVOD_HOSTNAME>` (the ranks of one host) and
// `cross_<HOROVOD_LOCAL_RANK>` (the ranks with that local rank, one per host). Process sets
// (including the global one, which Horovod always creates) use the same names with the suffix
// `_process_set_hash_<hex>`; their sizes are chosen by the program, so the plan only bounds them
// by the size of the scope they derive from.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hora::rdv::horovod {

struct ScopePlan {
  int world_size = 1;
  std::map<std::string, int> sizes;  // "global", "local_<host>", "cross_<n>" -> ranks

  // Adds one rank's three scopes (idempotent for the same sizes).
  void add_rank(const std::string& hostname, int local_rank, int local_size, int cross_size);
};

// What a scope name means in a plan.
struct ScopeInfo {
  std::string base;          // the plan scope it is or derives from
  int base_size = 0;         // ranks in the base scope
  bool process_set = false;  // `<base>_process_set_hash_<hex>`
};

// Resolves a scope name against the plan; nullopt when the job has no such scope.
std::optional<ScopeInfo> resolve_scope(const ScopePlan& plan, std::string_view scope);

}  // namespace hora::rdv::horovod
