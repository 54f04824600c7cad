#include "runtime/core/copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HORA_COPY_X86 1
#include <immintrin.h>
#endif

namespace hora::detail {
namespace {

#ifdef HORA_COPY_X86

// An aligned 32-byte store: non-temporal (kStream) or plain.
template <bool kStream>
__attribute__((target("avx"), always_inline)) inline void store_aligned(char* at, __m256i v) {
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(at), v);
  } else {
    _mm256_store_si256(reinterpret_cast<__m256i*>(at), v);
  }
}

__attribute__((target("avx"), always_inline)) inline __m256i load(const char* at) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
}

// The first vector unaligned, then aligned stores from the first aligned destination address
// on (loads stay unaligned), four vectors per iteration, and the last vector unaligned again,
// ending exactly at dst + n (it may rewrite bytes already written with the same values).
// n >= kVectorCopyBytes, so there is always room for the head and the tail. Non-temporal
// stores are fenced before the tail's plain store.
template <bool kStream>
__attribute__((target("avx"))) void copy_avx(char* dst, const char* src, std::size_t n) {
  constexpr std::size_t kV = 32;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), load(src));
  std::size_t i = kV - (reinterpret_cast<std::uintptr_t>(dst) & (kV - 1));
  for (; i + 4 * kV <= n; i += 4 * kV) {
    const __m256i a = load(src + i);
    const __m256i b = load(src + i + kV);
    const __m256i c = load(src + i + 2 * kV);
    const __m256i d = load(src + i + 3 * kV);
    store_aligned<kStream>(dst + i, a);
    store_aligned<kStream>(dst + i + kV, b);
    store_aligned<kStream>(dst + i + 2 * kV, c);
    store_aligned<kStream>(dst + i + 3 * kV, d);
  }
  for (; i + kV <= n; i += kV) store_aligned<kStream>(dst + i, load(src + i));
  if constexpr (kStream) _mm_sfence();
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - kV), load(src + n - kV));
  _mm256_zeroupper();
}

bool cpu_has_avx() {
  static const bool has = __builtin_cpu_supports("avx");
  return has;
}

#endif

}  // namespace

void copy_bytes(void* dst, const void* src, std::size_t n) {
#ifdef HORA_COPY_X86
  if (n >= kVectorCopyBytes && cpu_has_avx()) {
    copy_avx<false>(static_cast<char*>(dst), static_cast<const char*>(src), n);
    return;
  }
#endif
  if (n > 0) std::memcpy(dst, src, n);
}

void stream_bytes(void* dst, const void* src, std::size_t n) {
#ifdef HORA_COPY_X86
  if (n >= kVectorCopyBytes && cpu_has_avx()) {
    copy_avx<true>(static_cast<char*>(dst), static_cast<const char*>(src), n);
    return;
  }
#endif
  copy_bytes(dst, src, n);
}

}  // namespace hora::detail
