#include "rendezvous/horovod/scope_plan.h"

#include <algorithm>

namespace hora::rdv::horovod {
namespace {

constexpr std::string_view kProcessSetSuffix = "_process_set_hash_";
// std::hash<std::string> printed with std::hex: at most 16 lowercase digits.
constexpr std::size_t kMaxHashDigits = 16;

bool is_hex_hash(std::string_view s) {
  return !s.empty() && s.size() <= kMaxHashDigits && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

}  // namespace

void ScopePlan::add_rank(const std::string& hostname, const Slot& slot) {
  sizes["global"] = world_size;
  sizes["local_" + hostname] = slot.local_size;
  sizes["cross_" + std::to_string(slot.local_rank)] = slot.cross_size;
  slots[hostname + ":" + std::to_string(slot.local_rank)] = slot;
}

std::optional<ScopeInfo> resolve_scope(const ScopePlan& plan, std::string_view scope) {
  if (scope == kWorkerAddressesScope) {
    return ScopeInfo{std::string(scope), plan.world_size, ScopeKind::kWorkerAddresses};
  }
  if (scope == kRankAndSizeScope) {
    return ScopeInfo{std::string(scope), plan.world_size, ScopeKind::kRankAndSize};
  }
  if (auto it = plan.sizes.find(std::string(scope)); it != plan.sizes.end()) {
    return ScopeInfo{it->first, it->second, ScopeKind::kGloo};
  }
  const std::size_t at = scope.rfind(kProcessSetSuffix);
  if (at == std::string_view::npos) return std::nullopt;
  if (!is_hex_hash(scope.substr(at + kProcessSetSuffix.size()))) return std::nullopt;
  auto it = plan.sizes.find(std::string(scope.substr(0, at)));
  if (it == plan.sizes.end()) return std::nullopt;
  return ScopeInfo{it->first, it->second, ScopeKind::kProcessSet};
}

const Slot* find_slot(const ScopePlan& plan, std::string_view key) {
  auto it = plan.slots.find(std::string(key));
  return it == plan.slots.end() ? nullptr : &it->second;
}

}  // namespace hora::rdv::horovod
