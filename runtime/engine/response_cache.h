// Horovod's response cache, replicated on every rank.
//
// After a named op has run once, its agreed Response is remembered under a bit position. When a
// rank later submits the same name with the same signature, it does not announce the request:
// it sets that bit in the cycle's bit vector, and the op runs when the AND over all ranks has the
// bit set. That is what makes a steady-state training step cost one small allreduce instead of a
// full negotiation of names.
//
// Replication invariant: every rank calls put() and erase() with the same arguments in the same
// order (they follow the agreed response list and the agreed invalid bits), so bit positions,
// contents and LRU order are identical everywhere. lookup() is local and read-only.
#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/engine/request.h"
#include "runtime/engine/response.h"

namespace hora::detail::engine {

class ResponseCache {
 public:
  // capacity 0 disables the cache: lookup() always misses and put() stores nothing.
  explicit ResponseCache(std::size_t capacity);

  std::size_t capacity() const { return slots_.size(); }
  std::size_t size() const { return by_name_.size(); }
  // One past the highest bit in use (0 when empty). Identical on every rank, so the engine sizes
  // the cycle's bit vector with it: a job with 200 cached names exchanges 4 words per half, not
  // capacity / 64.
  std::size_t bit_limit() const { return used_bits_.empty() ? 0 : *used_bits_.rbegin() + 1; }

  enum class State {
    kMiss,     // the name is not cached: announce it in a full negotiation
    kHit,      // cached with the same signature: set `bit`
    kInvalid,  // cached with a different signature: every rank must drop `bit`
  };
  struct Lookup {
    State state = State::kMiss;
    std::size_t bit = 0;
  };
  Lookup lookup(const Request& mine, int rank) const;

  bool contains(std::size_t bit) const { return bit < slots_.size() && slots_[bit].has_value(); }
  const Response& at(std::size_t bit) const;  // requires contains(bit)

  // Records an executed (successful) response as the most recently used entry: refreshes the
  // name's existing bit, or takes the lowest free bit, evicting the least recently used entry
  // when full. Returns the evicted bit, if any.
  std::optional<std::size_t> put(const Response& response);
  void erase(std::size_t bit);

 private:
  std::vector<std::optional<Response>> slots_;
  std::unordered_map<std::string, std::size_t> by_name_;
  std::list<std::size_t> lru_;  // front: most recently used
  std::vector<std::list<std::size_t>::iterator> lru_pos_;
  std::set<std::size_t> free_bits_;
  std::set<std::size_t> used_bits_;
};

}  // namespace hora::detail::engine
