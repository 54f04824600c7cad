#include "common/fnv.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

TEST_CASE("Fnv1a64 over bytes is FNV-1a: the published test vectors") {
  CHECK(hora::Fnv1a64().value() == 0xcbf29ce484222325ULL);
  CHECK(hora::Fnv1a64().bytes("a", 1).value() == 0xaf63dc4c8601ec8cULL);
  const std::string foobar = "foobar";
  CHECK(hora::Fnv1a64().bytes(foobar.data(), foobar.size()).value() == 0x85944171f73967e8ULL);
}

TEST_CASE("Fnv1a64: mixing in pieces equals mixing the whole") {
  const std::string s = "hora-segment";
  CHECK(hora::Fnv1a64().bytes(s.data(), 4).bytes(s.data() + 4, s.size() - 4).value() ==
        hora::Fnv1a64().bytes(s.data(), s.size()).value());
}

TEST_CASE("Fnv1a64 words: one step per value, order matters") {
  // The loop shm_group.cc used before: h ^= v; h *= prime, per 64-bit value.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint64_t v : {std::uint64_t{7}, std::uint64_t{1} << 40}) {
    h ^= v;
    h *= 0x100000001b3ULL;
  }
  CHECK(hora::Fnv1a64().word(7).word(std::uint64_t{1} << 40).value() == h);
  CHECK(hora::Fnv1a64().word(1).word(2).value() != hora::Fnv1a64().word(2).word(1).value());
  CHECK(hora::Fnv1a64().word('a').value() == hora::Fnv1a64().bytes("a", 1).value());
}
