// FNV-1a, 64 bits: a fast hash for telling things apart (names of shared-memory segments, a
// collective's identity compared across ranks), not for secrets or tables under attack.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hora {

class Fnv1a64 {
 public:
  // Mixes in `n` bytes, one at a time (the FNV-1a of the byte string).
  Fnv1a64& bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) step(b[i]);
    return *this;
  }
  // Mixes in one 64-bit value in a single step (cheaper than its 8 bytes; a different hash).
  Fnv1a64& word(std::uint64_t v) {
    step(v);
    return *this;
  }
  std::uint64_t value() const { return hash_; }

 private:
  void step(std::uint64_t v) {
    hash_ ^= v;
    hash_ *= 0x100000001b3ULL;
  }

  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace hora
