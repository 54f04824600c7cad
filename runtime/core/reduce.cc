#include "runtime/core/reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace hora::detail {
namespace {

// Arithmetic on storage type S through compute type C. Integers compute in the unsigned type of
// the same width so overflow wraps instead of being undefined.
template <typename T>
struct Traits {
  using Compute = T;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};
template <>
struct Traits<float16> {
  using Compute = float;
  static float load(float16 v) { return to_float(v); }
  static float16 store(float v) { return to_float16(v); }
};
template <>
struct Traits<bfloat16> {
  using Compute = float;
  static float load(bfloat16 v) { return to_float(v); }
  static bfloat16 store(float v) { return to_bfloat16(v); }
};

template <typename C>
C add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename C>
C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Promote to at least unsigned int before multiplying: uint16 * uint16 would promote to
    // signed int and could overflow.
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename C>
C min_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

template <typename C>
C max_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}

template <typename T, typename Op>
void reduce_loop(void* out, const void* a, const void* b, std::size_t count, Op op) {
  using Tr = Traits<T>;
  // memcpy per element: buffers come from users and may be unaligned; compilers turn this
  // into plain loads for aligned data.
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < count; ++i) {
    T va;
    T vb;
    std::memcpy(&va, x + i * sizeof(T), sizeof(T));
    std::memcpy(&vb, y + i * sizeof(T), sizeof(T));
    const T r = Tr::store(op(Tr::load(va), Tr::load(vb)));
    std::memcpy(o + i * sizeof(T), &r, sizeof(T));
  }
}

// --- 16-bit floats: converted a block at a time so the conversions and the float32 arithmetic
// vectorize (per element, the branchy conversions ran ~40x slower than float32). ---

constexpr std::size_t kBlock = 256;

// The loops below run over whole blocks with a trip count known at compile time (so GCC's
// -O2 cost model vectorizes them) and over the tail with a runtime count.
template <std::size_t N>
void bf16_to_float_n(const unsigned char* in, float* out, std::size_t n) {
  std::uint16_t bits[kBlock];
  const std::size_t m = N != 0 ? N : n;
  std::memcpy(bits, in, m * 2);
  for (std::size_t i = 0; i < m; ++i) out[i] = std::bit_cast<float>(std::uint32_t{bits[i]} << 16);
}

template <std::size_t N>
void float_to_bf16_n(const float* in, unsigned char* out, std::size_t n) {
  std::uint16_t bits[kBlock];
  const std::size_t m = N != 0 ? N : n;
  for (std::size_t i = 0; i < m; ++i) {
    // to_bfloat16() without branches: round to nearest even, NaN stays a (quiet) NaN.
    const std::uint32_t x = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const std::uint32_t quiet_nan = (x >> 16) | 0x40u;
    bits[i] = static_cast<std::uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  std::memcpy(out, bits, m * 2);
}

void bf16_to_float(const unsigned char* in, float* out, std::size_t n) {
  if (n == kBlock) return bf16_to_float_n<kBlock>(in, out, n);
  bf16_to_float_n<0>(in, out, n);
}

void float_to_bf16(const float* in, unsigned char* out, std::size_t n) {
  if (n == kBlock) return float_to_bf16_n<kBlock>(in, out, n);
  float_to_bf16_n<0>(in, out, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HORA_HAVE_F16C_PATH 1
#include <cpuid.h>
#include <immintrin.h>

// The F16C instructions convert 8 halves per instruction, rounding to nearest even with the
// same results as to_float16() (NaNs are quieted, keeping their top payload bits). Compiled
// for F16C only here and used only when the CPU has it.
__attribute__((target("avx,f16c"))) void f16_to_float_f16c(const unsigned char* in, float* out,
                                                           std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    out[i] = to_float(float16{bits});
  }
}

__attribute__((target("avx,f16c"))) void float_to_f16_f16c(const float* in, unsigned char* out,
                                                           std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) {
    const std::uint16_t bits = to_float16(in[i]).bits;
    std::memcpy(out + 2 * i, &bits, 2);
  }
}

// F16C from CPUID leaf 1 itself: clang 14's __builtin_cpu_supports does not know "f16c".
// "avx" there also checks that the OS saves the AVX registers.
bool cpu_has_f16c() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
           (c & bit_F16C) != 0;
  }();
  return has;
}
#endif

void f16_to_float(const unsigned char* in, float* out, std::size_t n) {
#ifdef HORA_HAVE_F16C_PATH
  if (cpu_has_f16c()) return f16_to_float_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, in + 2 * i, 2);
    out[i] = to_float(float16{bits});
  }
}

void float_to_f16(const float* in, unsigned char* out, std::size_t n) {
#ifdef HORA_HAVE_F16C_PATH
  if (cpu_has_f16c()) return float_to_f16_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t bits = to_float16(in[i]).bits;
    std::memcpy(out + 2 * i, &bits, 2);
  }
}

template <typename T, typename Op>
void reduce_16bit(void* out, const void* a, const void* b, std::size_t count, Op op) {
  constexpr bool half = std::is_same_v<T, float16>;
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  float fa[kBlock];
  float fb[kBlock];
  for (std::size_t start = 0; start < count; start += kBlock) {
    const std::size_t n = std::min(kBlock, count - start);
    // Both inputs are read before the output is written: out may alias a or b.
    if constexpr (half) {
      f16_to_float(x + 2 * start, fa, n);
      f16_to_float(y + 2 * start, fb, n);
    } else {
      bf16_to_float(x + 2 * start, fa, n);
      bf16_to_float(y + 2 * start, fb, n);
    }
    if (n == kBlock) {
      for (std::size_t i = 0; i < kBlock; ++i) fa[i] = op(fa[i], fb[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) fa[i] = op(fa[i], fb[i]);
    }
    if constexpr (half) {
      float_to_f16(fa, o + 2 * start, n);
    } else {
      float_to_bf16(fa, o + 2 * start, n);
    }
  }
}

template <typename T>
ReduceFn for_op(ReduceOp op) {
  using C = typename Traits<T>::Compute;
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return [](void* o, const void* a, const void* b, std::size_t n) {
          reduce_16bit<T>(o, a, b, n, [](float p, float q) { return add<float>(p, q); });
        };
      case ReduceOp::kProduct:
        return [](void* o, const void* a, const void* b, std::size_t n) {
          reduce_16bit<T>(o, a, b, n, [](float p, float q) { return mul<float>(p, q); });
        };
      case ReduceOp::kMin:
        return [](void* o, const void* a, const void* b, std::size_t n) {
          reduce_16bit<T>(o, a, b, n, [](float p, float q) { return min_of<float>(p, q); });
        };
      case ReduceOp::kMax:
        return [](void* o, const void* a, const void* b, std::size_t n) {
          reduce_16bit<T>(o, a, b, n, [](float p, float q) { return max_of<float>(p, q); });
        };
    }
    return nullptr;
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, [](C p, C q) { return add<C>(p, q); });
      };
    case ReduceOp::kProduct:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, [](C p, C q) { return mul<C>(p, q); });
      };
    case ReduceOp::kMin:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, [](C p, C q) { return min_of<C>(p, q); });
      };
    case ReduceOp::kMax:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, [](C p, C q) { return max_of<C>(p, q); });
      };
  }
  return nullptr;
}

template <typename T>
void divide_loop(void* data, std::size_t count, int n) {
  using Tr = Traits<T>;
  using C = typename Tr::Compute;
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    C c = Tr::load(v);
    if constexpr (std::is_integral_v<C>) {
      c = static_cast<C>(static_cast<std::int64_t>(c) / n);  // C++ division truncates toward zero
    } else {
      c = c / static_cast<C>(n);
    }
    const T r = Tr::store(c);
    std::memcpy(p + i * sizeof(T), &r, sizeof(T));
  }
}

}  // namespace

ReduceFn reduce_function(DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kUInt8: return for_op<std::uint8_t>(op);
    case DataType::kInt8: return for_op<std::int8_t>(op);
    case DataType::kInt16: return for_op<std::int16_t>(op);
    case DataType::kInt32: return for_op<std::int32_t>(op);
    case DataType::kInt64: return for_op<std::int64_t>(op);
    case DataType::kFloat16: return for_op<float16>(op);
    case DataType::kBFloat16: return for_op<bfloat16>(op);
    case DataType::kFloat32: return for_op<float>(op);
    case DataType::kFloat64: return for_op<double>(op);
  }
  return nullptr;
}

void divide(void* data, std::size_t count, DataType type, int n) {
  switch (type) {
    case DataType::kUInt8: return divide_loop<std::uint8_t>(data, count, n);
    case DataType::kInt8: return divide_loop<std::int8_t>(data, count, n);
    case DataType::kInt16: return divide_loop<std::int16_t>(data, count, n);
    case DataType::kInt32: return divide_loop<std::int32_t>(data, count, n);
    case DataType::kInt64: return divide_loop<std::int64_t>(data, count, n);
    case DataType::kFloat16: return divide_loop<float16>(data, count, n);
    case DataType::kBFloat16: return divide_loop<bfloat16>(data, count, n);
    case DataType::kFloat32: return divide_loop<float>(data, count, n);
    case DataType::kFloat64: return divide_loop<double>(data, count, n);
  }
}

}  // namespace hora::detail
