#include "runtime/engine/response_cache.h"

#include <cassert>

namespace hora::detail::engine {

ResponseCache::ResponseCache(std::size_t capacity) : slots_(capacity), lru_pos_(capacity) {
  for (std::size_t i = 0; i < capacity; ++i) free_bits_.insert(i);
}

ResponseCache::Lookup ResponseCache::lookup(const Request& mine, int rank) const {
  auto it = by_name_.find(mine.name);
  if (it == by_name_.end()) return {State::kMiss, 0};
  const Response& cached = *slots_[it->second];
  return {cached.matches(mine, rank) ? State::kHit : State::kInvalid, it->second};
}

const Response& ResponseCache::at(std::size_t bit) const {
  assert(contains(bit));
  return *slots_[bit];
}

std::optional<std::size_t> ResponseCache::put(const Response& response) {
  if (slots_.empty() || !response.ok()) return std::nullopt;
  auto it = by_name_.find(response.request.name);
  if (it != by_name_.end()) {
    std::size_t bit = it->second;
    slots_[bit] = response;
    lru_.erase(lru_pos_[bit]);
    lru_.push_front(bit);
    lru_pos_[bit] = lru_.begin();
    return std::nullopt;
  }
  std::optional<std::size_t> evicted;
  if (free_bits_.empty()) {
    evicted = lru_.back();
    erase(*evicted);
  }
  std::size_t bit = *free_bits_.begin();
  free_bits_.erase(free_bits_.begin());
  slots_[bit] = response;
  by_name_.emplace(response.request.name, bit);
  used_bits_.insert(bit);
  lru_.push_front(bit);
  lru_pos_[bit] = lru_.begin();
  return evicted;
}

void ResponseCache::erase(std::size_t bit) {
  if (!contains(bit)) return;
  by_name_.erase(slots_[bit]->request.name);
  slots_[bit].reset();
  lru_.erase(lru_pos_[bit]);
  free_bits_.insert(bit);
  used_bits_.erase(bit);
}

}  // namespace hora::detail::engine
