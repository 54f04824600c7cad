// runtime/core's kernels at the sizes and alignments where vector code has its edges:
// copy_bytes and stream_bytes (their own vector loops from kVectorCopyBytes up) and the reductions
// built at -O3 (vectorized bodies with scalar heads and tails).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <hora/types.h>
#include <catch2/catch.hpp>

#include "runtime/core/copy.h"
#include "runtime/core/reduce.h"

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

unsigned char pattern(std::size_t i) { return static_cast<unsigned char>(i * 131 + (i >> 8) + 7); }

}  // namespace

TEST_CASE(
    "copy_bytes and stream_bytes copy exactly n bytes at every alignment, below and above "
    "the vector size",
    "[copy]") {
  const std::size_t k = hora::detail::kVectorCopyBytes;
  const std::vector<std::size_t> sizes = {0,       1,          15,         31,
                                          32,      33,         k - 1,      k,
                                          k + 1,   k + 31,     k + 32,     k + 127,
                                          k + 128, 3 * k + 77, 65536 + 13, std::size_t{1} << 20};
  for (auto copy : {hora::detail::copy_bytes, hora::detail::stream_bytes}) {
    for (std::size_t n : sizes) {
      for (std::size_t src_off : {0, 1, 8, 31, 32, 33}) {
        for (std::size_t dst_off : {0, 1, 16, 31, 32, 63}) {
          std::vector<unsigned char> src(n + src_off + kGuard);
          for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
          std::vector<unsigned char> dst(kGuard + dst_off + n + kGuard, kGuardByte);
          unsigned char* d = dst.data() + kGuard + dst_off;
          copy(d, src.data() + src_off, n);
          INFO((copy == hora::detail::copy_bytes ? "copy_bytes" : "stream_bytes")
               << ": n " << n << ", source offset " << src_off << ", destination offset "
               << dst_off);
          CHECK(std::memcmp(d, src.data() + src_off, n) == 0);
          bool guards_intact = true;
          for (std::size_t i = 0; i < kGuard + dst_off; ++i) guards_intact &= dst[i] == kGuardByte;
          for (std::size_t i = kGuard + dst_off + n; i < dst.size(); ++i) {
            guards_intact &= dst[i] == kGuardByte;
          }
          CHECK(guards_intact);
        }
      }
    }
  }
}

TEST_CASE(
    "vectorized reductions agree with element-by-element arithmetic at odd counts and "
    "offsets",
    "[reduce]") {
  using hora::DataType;
  using hora::ReduceOp;
  for (std::size_t count : {1, 3, 7, 8, 9, 17, 63, 64, 65, 1000, 4099}) {
    for (std::size_t off : {0, 1, 3}) {  // elements: misaligns every pointer but the first
      INFO("count " << count << ", offset " << off);
      std::vector<float> fa(count + off), fb(count + off), fo(count + off + 1, -1.0f);
      std::vector<std::int32_t> ia(count + off), ib(count + off), io(count + off + 1, -1);
      for (std::size_t i = 0; i < count + off; ++i) {
        fa[i] = static_cast<float>(i) * 0.5f - 3.0f;
        fb[i] = static_cast<float>(i % 17) * 1.25f;
        ia[i] = static_cast<std::int32_t>(i * 2654435761u);
        ib[i] = static_cast<std::int32_t>(i * 40503u) - 7;
      }
      hora::detail::reduce_function(DataType::kFloat32, ReduceOp::kSum)(fo.data() + off,
                                                                        fa.data() + off, fb.data(),
                                                                        count);
      hora::detail::reduce_function(DataType::kInt32, ReduceOp::kMax)(io.data() + off, ia.data(),
                                                                      ib.data() + off, count);
      bool sums = true;
      bool maxima = true;
      for (std::size_t i = 0; i < count; ++i) {
        sums &= fo[off + i] == fa[off + i] + fb[i];
        maxima &= io[off + i] == std::max(ia[i], ib[off + i]);
      }
      CHECK(sums);
      CHECK(maxima);
      CHECK(fo[off + count] == -1.0f);  // nothing written past the end
      CHECK(io[off + count] == -1);
    }
  }
}
