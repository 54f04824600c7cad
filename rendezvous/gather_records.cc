#include "rendezvous/gather_records.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace hora::rdv::wire {

namespace {

// An equal stretch of at most this many bytes between two differing runs is sent as literal
// bytes: a patch of its own would cost at least 2 bytes of varints.
constexpr std::size_t kMergeGap = 2;

void put_varint(Bytes& out, std::size_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

// The general case of read_varint: more than one byte, or none left.
std::uint32_t read_long_varint(const std::uint8_t*& p, const std::uint8_t* end,
                               std::uint32_t record, const char* field) {
  std::uint32_t v = 0;
  for (int shift = 0;; shift += 7) {
    if (p == end) {
      throw DecodeError(
          fmt::format("gather answer: record {}'s coding ends inside its {}", record, field));
    }
    const std::uint8_t b = *p++;
    if (shift == 28 && b > 0x0f) {
      throw DecodeError(
          fmt::format("gather answer: record {}'s {} does not fit 32 bits", record, field));
    }
    v |= static_cast<std::uint32_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
}

// Nearly every varint of a block is one byte: that case inline, the rest out of line.
inline std::uint32_t read_varint(const std::uint8_t*& p, const std::uint8_t* end,
                                 std::uint32_t record, const char* field) {
  if (p != end && *p < 0x80) return *p++;
  return read_long_varint(p, end, record, field);
}

// memcpy for the few bytes a patch usually carries, without a call.
inline void copy_bytes(std::uint8_t* to, const std::uint8_t* from, std::size_t n) {
  if (n > 8) {
    std::memcpy(to, from, n);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) to[i] = from[i];
}

// Codes `rec` against `prev` (see gather_records.h): runs of differing bytes, neighbours merged
// across short equal stretches. `runs` is scratch space (start, length), reused across records.
void code_record(Bytes& out, std::span<const std::uint8_t> prev, std::span<const std::uint8_t> rec,
                 std::vector<std::pair<std::size_t, std::size_t>>& runs) {
  const std::size_t len = rec.size();
  const std::size_t common = std::min(len, prev.size());
  auto differs = [&](std::size_t i) { return i >= common || rec[i] != prev[i]; };
  runs.clear();
  std::size_t i = 0;
  while (i < len) {
    while (i < len && !differs(i)) ++i;
    if (i == len) break;
    const std::size_t start = i;
    while (i < len) {
      if (differs(i)) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < len && !differs(j) && j - i <= kMergeGap) ++j;
      if (j == len || j - i > kMergeGap) break;
      i = j;  // a short equal stretch, then more differences: one patch
    }
    runs.emplace_back(start, i - start);
  }
  put_varint(out, len);
  put_varint(out, runs.size());
  std::size_t at = 0;
  for (const auto& [start, n] : runs) {
    put_varint(out, start - at);
    put_varint(out, n);
    out.insert(out.end(), rec.begin() + static_cast<std::ptrdiff_t>(start),
               rec.begin() + static_cast<std::ptrdiff_t>(start + n));
    at = start + n;
  }
}

}  // namespace

Bytes encode_gather_records(std::span<const std::span<const std::uint8_t>> records) {
  std::size_t total = 0;
  for (const auto& rec : records) total += rec.size();
  if (total > kMaxGatherRecordsBytes) {
    throw std::invalid_argument(
        fmt::format("encode_gather_records: {} bytes of records (at most {})", total,
                    kMaxGatherRecordsBytes));
  }
  Bytes coded;
  coded.reserve(records.size() * 8 + 64);
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  std::span<const std::uint8_t> prev;
  for (const auto& rec : records) {
    code_record(coded, prev, rec, runs);
    prev = rec;
  }
  Writer out;
  out.reserve(12 + coded.size());
  out.u32(length_u32(records.size(), "GATHER record count"));
  out.u32(static_cast<std::uint32_t>(total));
  out.bytes(coded);
  return out.take();
}

void read_gather_records(Reader& r, GatherReplyView* m) {
  const std::uint32_t n = r.u32();
  const std::uint32_t total = r.u32();
  const std::span<const std::uint8_t> coded = r.view();
  // Every record costs at least 2 coded bytes, and none is longer than the literal bytes sent
  // so far, so an honest `total` is at most n x the coded size: anything else (or more than the
  // cap) is refused before anything is allocated.
  if (total > kMaxGatherRecordsBytes || std::uint64_t{n} * 2 > coded.size() ||
      total > std::uint64_t{n} * coded.size()) {
    throw DecodeError(
        fmt::format("gather answer: {} records of {} bytes in {} coded bytes (records need at "
                    "least 2 coded bytes each and at most {} bytes in all)",
                    n, total, coded.size(), kMaxGatherRecordsBytes));
  }
  m->records_buffer.resize(total);
  std::vector<std::span<const std::uint8_t>> records;  // a local: kept in registers below
  records.reserve(n);
  std::uint8_t* out = m->records_buffer.data();
  const std::uint8_t* const out_end = out + total;
  const std::uint8_t* p = coded.data();
  const std::uint8_t* const end = p + coded.size();
  const std::uint8_t* prev = nullptr;
  std::size_t prev_len = 0;
  for (std::uint32_t j = 0; j < n; ++j) {
    const std::size_t len = read_varint(p, end, j, "length");
    if (len > static_cast<std::size_t>(out_end - out)) {
      throw DecodeError(
          fmt::format("gather answer: record {} ({} bytes) runs past the {} bytes of records the "
                      "answer declared",
                      j, len, total));
    }
    const std::uint32_t patches = read_varint(p, end, j, "patch count");
    const std::size_t common = std::min(len, prev_len);
    if (common > 0) std::memcpy(out, prev, common);
    std::size_t at = 0;
    for (std::uint32_t k = 0; k < patches; ++k) {
      const std::size_t skip = read_varint(p, end, j, "patch offset");
      const std::size_t lit = read_varint(p, end, j, "patch length");
      if (skip > common - std::min(at, common) || lit > len - at - skip ||
          lit > static_cast<std::size_t>(end - p)) {
        throw DecodeError(
            fmt::format("gather answer: record {} ({} bytes) has a patch of {} bytes at {} that "
                        "does not fit it, the previous record or the coding",
                        j, len, lit, at + skip));
      }
      copy_bytes(out + at + skip, p, lit);
      p += lit;
      at += skip + lit;
    }
    if (at < len && len > prev_len) {
      throw DecodeError(fmt::format(
          "gather answer: record {} ({} bytes) leaves bytes from {} on unpatched past the "
          "previous record's {}",
          j, len, at, prev_len));
    }
    records.emplace_back(out, len);
    prev = out;
    prev_len = len;
    out += len;
  }
  if (p != end || out != out_end) {
    throw DecodeError(
        fmt::format("gather answer: the records' coding has {} bytes left over, and the records "
                    "fill {} of the {} bytes declared",
                    end - p, out - m->records_buffer.data(), total));
  }
  m->records = std::move(records);
}

}  // namespace hora::rdv::wire
