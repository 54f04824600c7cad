#include "rendezvous/transpose.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hora::rdv {

namespace {

constexpr std::size_t kTileRows = 64;
constexpr std::size_t kTileColumns = 256;

// One slice of `width` bytes; the widths GATHER uses in hora without a call.
inline void copy_slice(std::uint8_t* to, const std::uint8_t* from, std::size_t width) {
  switch (width) {
    case 2: std::memcpy(to, from, 2); break;
    case 4: std::memcpy(to, from, 4); break;
    case 8: std::memcpy(to, from, 8); break;
    default: std::memcpy(to, from, width); break;
  }
}

// Rows j..j+3 by columns r..r+3 of 4-byte slices.
inline void transpose_4x4(const std::vector<const std::uint8_t*>& rows,
                          const std::vector<std::uint8_t*>& columns, std::size_t j, std::size_t r) {
#if defined(__SSE2__)
  auto load = [&](std::size_t k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j + k] + r * 4));
  };
  const __m128i a = load(0), b = load(1), c = load(2), d = load(3);
  const __m128i ab_lo = _mm_unpacklo_epi32(a, b), ab_hi = _mm_unpackhi_epi32(a, b);
  const __m128i cd_lo = _mm_unpacklo_epi32(c, d), cd_hi = _mm_unpackhi_epi32(c, d);
  auto store = [&](std::size_t i, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(columns[r + i] + j * 4), v);
  };
  store(0, _mm_unpacklo_epi64(ab_lo, cd_lo));
  store(1, _mm_unpackhi_epi64(ab_lo, cd_lo));
  store(2, _mm_unpacklo_epi64(ab_hi, cd_hi));
  store(3, _mm_unpackhi_epi64(ab_hi, cd_hi));
#else
  for (std::size_t k = 0; k < 4; ++k) {
    for (std::size_t i = 0; i < 4; ++i)
      copy_slice(columns[r + i] + (j + k) * 4, rows[j + k] + (r + i) * 4, 4);
  }
#endif
}

// Rows j0..j1 by columns r0..r1, one slice at a time.
void transpose_tile(const std::vector<const std::uint8_t*>& rows,
                    const std::vector<std::uint8_t*>& columns, std::size_t width, std::size_t j0,
                    std::size_t j1, std::size_t r0, std::size_t r1) {
  for (std::size_t j = j0; j < j1; ++j) {
    const std::uint8_t* from = rows[j] + r0 * width;
    const std::size_t at = j * width;
    for (std::size_t r = r0; r < r1; ++r, from += width) copy_slice(columns[r] + at, from, width);
  }
}

// The same for 4-byte slices, 4 x 4 at a time, the edges (fewer than 4 left) one at a time.
void transpose_tile_4(const std::vector<const std::uint8_t*>& rows,
                      const std::vector<std::uint8_t*>& columns, std::size_t j0, std::size_t j1,
                      std::size_t r0, std::size_t r1) {
  const std::size_t j4 = j0 + (j1 - j0) / 4 * 4;
  const std::size_t r4 = r0 + (r1 - r0) / 4 * 4;
  for (std::size_t j = j0; j < j4; j += 4) {
    for (std::size_t r = r0; r < r4; r += 4) transpose_4x4(rows, columns, j, r);
  }
  transpose_tile(rows, columns, 4, j0, j4, r4, r1);
  transpose_tile(rows, columns, 4, j4, j1, r0, r1);
}

}  // namespace

void transpose_slices(const std::vector<const std::uint8_t*>& rows,
                      const std::vector<std::uint8_t*>& columns, std::size_t width) {
  if (width == 0) return;
  for (std::size_t r0 = 0; r0 < columns.size(); r0 += kTileColumns) {
    const std::size_t r1 = std::min(columns.size(), r0 + kTileColumns);
    for (std::size_t j0 = 0; j0 < rows.size(); j0 += kTileRows) {
      const std::size_t j1 = std::min(rows.size(), j0 + kTileRows);
      if (width == 4) {
        transpose_tile_4(rows, columns, j0, j1, r0, r1);
      } else {
        transpose_tile(rows, columns, width, j0, j1, r0, r1);
      }
    }
  }
}

}  // namespace hora::rdv
