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

// The first vector unaligned, then aligned stores from the first aligned destination address
// on (loads stay unaligned), four vectors per iteration, and the last vector unaligned again,
// ending exactly at dst + n (it may rewrite bytes already written with the same values).
// n >= kVectorCopyBytes, so there is always room for the head and the tail.

__attribute__((target("avx"))) void copy_avx(char* dst, const char* src, std::size_t n) {
  constexpr std::size_t kV = 32;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
  std::size_t i = kV - (reinterpret_cast<std::uintptr_t>(dst) & (kV - 1));
  for (; i + 4 * kV <= n; i += 4 * kV) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + kV));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 2 * kV));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 3 * kV));
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + kV), b);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + 2 * kV), c);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i + 3 * kV), d);
  }
  for (; i + kV <= n; i += kV) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + i),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - kV),
                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - kV)));
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
  if (n >= kVectorCopyBytes) {
    if (cpu_has_avx()) {
      copy_avx(static_cast<char*>(dst), static_cast<const char*>(src), n);
      return;
    }
  }
#endif
  if (n > 0) std::memcpy(dst, src, n);
}

}  // namespace hora::detail
