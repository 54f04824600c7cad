#include <hora/types.h>

#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <hora/error.h>
#include <hora/hora.h>

#include "runtime/core/blocks.h"

namespace hora {

std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::kUInt8:
    case DataType::kInt8: return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  return 0;  // not a DataType: callers validate with size_of(type) == 0
}

const char* name_of(DataType type) {
  switch (type) {
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
  }
  return "unknown";
}

const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "avg";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "prod";
  }
  return "unknown";
}

const char* name_of(Scope scope) {
  switch (scope) {
    case Scope::kGlobal: return "global";
    case Scope::kLocal: return "local";
    case Scope::kCross: return "cross";
  }
  return "unknown";
}

// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
float to_float(float16 v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = v.bits & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, or NaN keeping its payload
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    bits = sign | std::bit_cast<std::uint32_t>(magnitude);
  }
  return std::bit_cast<float>(bits);
}

float16 to_float16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {
    if (magnitude == 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};
    // NaN: keep the top payload bits and force the quiet bit so it never becomes inf.
    return {static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  }
  if (magnitude >= 0x477ff000u) {
    // 65520 and above round to infinity (65504 is the largest finite half).
    return {static_cast<std::uint16_t>(sign | 0x7c00u)};
  }
  if (magnitude >= 0x38800000u) {
    // Normal half. Rebias the exponent, keep 10 mantissa bits, round the 13 dropped bits
    // to nearest even; a carry out of the mantissa correctly bumps the exponent.
    std::uint32_t half = ((magnitude >> 23) - 127 + 15) << 10 | ((magnitude >> 13) & 0x3ffu);
    const std::uint32_t dropped = magnitude & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
    return {static_cast<std::uint16_t>(sign | half)};
  }
  // Subnormal half (or zero): the value is m * 2^(e-150) with the implicit bit in m; a half
  // subnormal counts units of 2^-24, so shift right by 126 - e and round to nearest even.
  const std::uint32_t e = magnitude >> 23;
  if (e < 102) return {sign};  // below 2^-25: rounds to zero
  const std::uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - e;  // 14..24
  std::uint32_t half = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return {static_cast<std::uint16_t>(sign | half)};
}

// bfloat16 is the upper half of a float32.
float to_float(bfloat16 v) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16);
}

bfloat16 to_bfloat16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};  // quiet NaN, never inf
  }
  // Round to nearest even on the 16 dropped bits; overflow rounds to inf as it should.
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<std::uint16_t>(rounded >> 16)};
}

// Declared in <hora/hora.h>: runtime/core/blocks.h's split, checked.
std::size_t reducescatter_count(std::size_t count, int rank, int nranks) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    throw UsageError(fmt::format("hora::reducescatter_count: rank {} is not in 0..{} (nranks = {})",
                                 rank, nranks - 1, nranks));
  }
  return detail::block_count(count, rank, nranks);
}

}  // namespace hora
