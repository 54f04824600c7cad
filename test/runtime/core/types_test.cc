// hora/types.h: sizes, names, and the float16 / bfloat16 conversions the 16-bit reductions use.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <hora/types.h>
#include <catch2/catch.hpp>

#include "runtime/core/reduce.h"

using hora::bfloat16;
using hora::float16;

namespace {

std::uint16_t half_bits(float f) { return hora::to_float16(f).bits; }
std::uint16_t bf16_bits(float f) { return hora::to_bfloat16(f).bits; }
float from_half(std::uint16_t bits) { return hora::to_float(float16{bits}); }
float from_bf16(std::uint16_t bits) { return hora::to_float(bfloat16{bits}); }

}  // namespace

TEST_CASE("size_of and name_of cover every type, op and scope", "[types]") {
  CHECK(hora::size_of(hora::DataType::kUInt8) == 1);
  CHECK(hora::size_of(hora::DataType::kInt8) == 1);
  CHECK(hora::size_of(hora::DataType::kInt32) == 4);
  CHECK(hora::size_of(hora::DataType::kInt64) == 8);
  CHECK(hora::size_of(hora::DataType::kFloat16) == 2);
  CHECK(hora::size_of(hora::DataType::kBFloat16) == 2);
  CHECK(hora::size_of(hora::DataType::kFloat32) == 4);
  CHECK(hora::size_of(hora::DataType::kFloat64) == 8);
  CHECK(hora::size_of(static_cast<hora::DataType>(42)) == 0);
  CHECK(std::string(hora::name_of(hora::DataType::kBFloat16)) == "bfloat16");
  CHECK(std::string(hora::name_of(hora::DataType::kUInt8)) == "uint8");
  CHECK(std::string(hora::name_of(hora::ReduceOp::kAverage)) == "avg");
  CHECK(std::string(hora::name_of(hora::ReduceOp::kProduct)) == "prod");
  CHECK(std::string(hora::name_of(hora::Scope::kCross)) == "cross");
  CHECK(hora::dtype_of<float>() == hora::DataType::kFloat32);
  CHECK(hora::dtype_of<hora::bfloat16>() == hora::DataType::kBFloat16);
}

TEST_CASE("float16 converts exact values both ways", "[types][float16]") {
  CHECK(half_bits(0.0f) == 0x0000);
  CHECK(half_bits(-0.0f) == 0x8000);
  CHECK(half_bits(1.0f) == 0x3c00);
  CHECK(half_bits(-2.0f) == 0xc000);
  CHECK(half_bits(65504.0f) == 0x7bff);    // largest finite
  CHECK(half_bits(0x1p-14f) == 0x0400);    // smallest normal
  CHECK(half_bits(0x1p-24f) == 0x0001);    // smallest subnormal
  CHECK(half_bits(0x3ffp-24f) == 0x03ff);  // largest subnormal
  CHECK(from_half(0x3c00) == 1.0f);
  CHECK(from_half(0x7bff) == 65504.0f);
  CHECK(from_half(0x0001) == 0x1p-24f);
  CHECK(from_half(0x03ff) == 0x3ffp-24f);
  CHECK(std::signbit(from_half(0x8000)));
  // Every finite half survives a round trip through float.
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00) continue;
    REQUIRE(half_bits(from_half(static_cast<std::uint16_t>(b))) == b);
  }
}

TEST_CASE("float16 rounds to nearest, ties to even", "[types][float16]") {
  // Between 1 (0x3c00) and the next half 1 + 2^-10 (0x3c01).
  CHECK(half_bits(1.0f + 0x1p-11f) == 0x3c00);             // tie: stays even
  CHECK(half_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // above the tie
  CHECK(half_bits(1.0f + 0x1p-10f + 0x1p-11f) == 0x3c02);  // tie at odd 0x3c01: up to even
  CHECK(half_bits(1.0f + 0x1p-12f) == 0x3c00);             // below the tie
  // Mantissa carry into the exponent: just below 2 rounds up to 2.
  CHECK(half_bits(2.0f - 0x1p-12f) == 0x4000);
  // Subnormals: 2^-25 is half of the smallest subnormal: a tie, rounds to even (zero).
  CHECK(half_bits(0x1p-25f) == 0x0000);
  CHECK(half_bits(0x1.8p-25f) == 0x0001);
  CHECK(half_bits(0x3p-25f) == 0x0002);   // 1.5 units: tie, to even 2
  CHECK(half_bits(-0x1p-30f) == 0x8000);  // underflow keeps the sign
  // The largest subnormal plus half a unit rounds to the smallest normal.
  CHECK(half_bits(0x3ffp-24f + 0x1p-25f) == 0x0400);
}

TEST_CASE("float16 overflow, infinity and NaN", "[types][float16]") {
  CHECK(half_bits(65519.0f) == 0x7bff);  // below the midpoint to 65536
  CHECK(half_bits(65520.0f) == 0x7c00);  // the midpoint rounds to infinity
  CHECK(half_bits(1e10f) == 0x7c00);
  CHECK(half_bits(-1e10f) == 0xfc00);
  CHECK(half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
  const std::uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);  // still a NaN, not infinity
  // A signalling NaN whose payload sits in the low float bits must not become infinity.
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  CHECK((half_bits(low_payload_nan) & 0x03ff) != 0);
  CHECK(std::isinf(from_half(0x7c00)));
  CHECK(std::isnan(from_half(0x7e00)));
}

TEST_CASE("bfloat16 conversions round to nearest even and keep inf and NaN", "[types][bfloat16]") {
  CHECK(bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits(-2.0f) == 0xc000);
  CHECK(from_bf16(0x3f80) == 1.0f);
  // 1 + 2^-8 is the midpoint between 1 (0x3f80) and 1 + 2^-7 (0x3f81): to even.
  CHECK(bf16_bits(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(bf16_bits(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  CHECK(bf16_bits(1.0f + 0x1p-7f + 0x1p-8f) == 0x3f82);           // midpoint above odd: up
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  CHECK(bf16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(bf16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(std::isnan(from_bf16(bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(from_bf16(bf16_bits(std::bit_cast<float>(0x7f800001u)))));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0) continue;  // NaNs may be quieted
    REQUIRE(bf16_bits(from_bf16(static_cast<std::uint16_t>(b))) == b);
  }
}

TEST_CASE("reductions: wrap-around integers, 16-bit floats, NaN in min/max, average", "[reduce]") {
  using hora::DataType;
  using hora::ReduceOp;
  {
    std::uint8_t a[2] = {250, 3}, b[2] = {10, 4}, out[2];
    hora::detail::reduce_function(DataType::kUInt8, ReduceOp::kSum)(out, a, b, 2);
    CHECK(out[0] == 4);  // 260 mod 256
    CHECK(out[1] == 7);
  }
  {
    std::int8_t a[1] = {100}, b[1] = {100}, out[1];
    hora::detail::reduce_function(DataType::kInt8, ReduceOp::kSum)(out, a, b, 1);
    CHECK(out[0] == -56);  // wraps, no undefined behaviour
  }
  {
    float16 a[1] = {hora::to_float16(1.5f)}, b[1] = {hora::to_float16(2.25f)}, out[1];
    hora::detail::reduce_function(DataType::kFloat16, ReduceOp::kProduct)(out, a, b, 1);
    CHECK(hora::to_float(out[0]) == 3.375f);
  }
  {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float a[2] = {nan, 1.0f}, b[2] = {0.0f, nan}, out[2];
    hora::detail::reduce_function(DataType::kFloat32, ReduceOp::kMin)(out, a, b, 2);
    CHECK(std::isnan(out[0]));
    CHECK(std::isnan(out[1]));
  }
  {
    std::int32_t v[3] = {-7, 7, 9};
    hora::detail::divide(v, 3, DataType::kInt32, 2);
    CHECK(v[0] == -3);  // truncates toward zero
    CHECK(v[1] == 3);
    CHECK(v[2] == 4);
  }
  {
    bfloat16 v[1] = {hora::to_bfloat16(3.0f)};
    hora::detail::divide(v, 1, DataType::kBFloat16, 2);
    CHECK(hora::to_float(v[0]) == 1.5f);
  }
}

TEST_CASE("16-bit reductions over many elements agree with the scalar conversions",
          "[reduce][float16][bfloat16]") {
  // Blocks of 256 take the vectorized (and, for float16, F16C) paths; 1000 elements also
  // exercise the tail. Every 16-bit pattern appears, NaNs and infinities included.
  const std::size_t n = 1000;
  for (std::uint32_t base = 0; base < 0x10000; base += n) {
    std::vector<std::uint16_t> a(n), b(n), out(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = static_cast<std::uint16_t>(base + i);
      b[i] = static_cast<std::uint16_t>((base + i) * 40503u + 7u);  // a scrambled partner
    }
    for (auto op : {hora::ReduceOp::kSum, hora::ReduceOp::kProduct, hora::ReduceOp::kMax}) {
      hora::detail::reduce_function(hora::DataType::kFloat16, op)(out.data(), a.data(), b.data(),
                                                                  n);
      for (std::size_t i = 0; i < n; ++i) {
        const float x = from_half(a[i]), y = from_half(b[i]);
        const float r = op == hora::ReduceOp::kSum       ? x + y
                        : op == hora::ReduceOp::kProduct ? x * y
                                                         : (std::isnan(x)   ? x
                                                            : std::isnan(y) ? y
                                                                            : std::max(x, y));
        const std::uint16_t want = half_bits(r);
        if (std::isnan(r)) {
          REQUIRE(std::isnan(from_half(out[i])));
        } else {
          INFO("float16 " << hora::name_of(op) << " of " << a[i] << " and " << b[i]);
          REQUIRE(out[i] == want);
        }
      }
      hora::detail::reduce_function(hora::DataType::kBFloat16, op)(out.data(), a.data(), b.data(),
                                                                   n);
      for (std::size_t i = 0; i < n; ++i) {
        const float x = from_bf16(a[i]), y = from_bf16(b[i]);
        const float r = op == hora::ReduceOp::kSum       ? x + y
                        : op == hora::ReduceOp::kProduct ? x * y
                                                         : (std::isnan(x)   ? x
                                                            : std::isnan(y) ? y
                                                                            : std::max(x, y));
        if (std::isnan(r)) {
          REQUIRE(std::isnan(from_bf16(out[i])));
        } else {
          INFO("bfloat16 " << hora::name_of(op) << " of " << a[i] << " and " << b[i]);
          REQUIRE(out[i] == bf16_bits(r));
        }
      }
    }
  }
}
