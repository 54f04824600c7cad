// Every collective of the shared-memory transport, for every DataType and ReduceOp, at 1..4
// local ranks (forked processes on one real segment), with regions so small that every buffer
// crosses many chunks, and with the default region. Results are compared bit for bit with a
// reference computed from the same inputs by the reduce kernels (the values are small integers,
// exact in every type, so the order of reduction does not matter).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/copy.h"
#include "runtime/core/reduce.h"
#include "runtime/shm/segment.h"
#include "runtime/shm/shm_group.h"
#include "test/runtime/shm/shm_job.h"

using hora::DataType;
using hora::ReduceOp;
using hora::detail::shm::ShmGroup;
using hora::detail::shm::ShmOptions;
using namespace std::chrono_literals;

namespace {

const DataType kTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
                           DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                           DataType::kFloat32, DataType::kFloat64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};

template <typename T>
void put(void* data, std::size_t i, int v) {
  T x;
  if constexpr (std::is_same_v<T, hora::float16>) {
    x = hora::to_float16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, hora::bfloat16>) {
    x = hora::to_bfloat16(static_cast<float>(v));
  } else {
    x = static_cast<T>(v);
  }
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &x, sizeof(T));
}

void put_value(DataType type, void* data, std::size_t i, int v) {
  switch (type) {
    case DataType::kUInt8: return put<std::uint8_t>(data, i, v);
    case DataType::kInt8: return put<std::int8_t>(data, i, v);
    case DataType::kInt16: return put<std::int16_t>(data, i, v);
    case DataType::kInt32: return put<std::int32_t>(data, i, v);
    case DataType::kInt64: return put<std::int64_t>(data, i, v);
    case DataType::kFloat16: return put<hora::float16>(data, i, v);
    case DataType::kBFloat16: return put<hora::bfloat16>(data, i, v);
    case DataType::kFloat32: return put<float>(data, i, v);
    case DataType::kFloat64: return put<double>(data, i, v);
  }
}

using Bytes = std::vector<char>;

// Rank r's input for reductions: 1..3, so sums (<= 12) and products (<= 81) stay exact.
Bytes reduce_input(DataType type, std::size_t count, int r) {
  Bytes b(count * hora::size_of(type));
  for (std::size_t i = 0; i < count; ++i)
    put_value(type, b.data(), i, (r * 3 + static_cast<int>(i)) % 3 + 1);
  return b;
}

// Rank r's data for moves (allgather, broadcast, alltoall): 1..100, different per rank.
Bytes move_input(DataType type, std::size_t count, int r, std::size_t salt = 0) {
  Bytes b(count * hora::size_of(type));
  for (std::size_t i = 0; i < count; ++i) {
    put_value(type, b.data(), i, static_cast<int>((r * 37 + i * 7 + salt) % 100) + 1);
  }
  return b;
}

Bytes reference_reduce(DataType type, ReduceOp op, std::size_t count, int n) {
  Bytes acc = reduce_input(type, count, 0);
  const auto fn = hora::detail::reduce_function(type, op);
  for (int r = 1; r < n; ++r) {
    const Bytes x = reduce_input(type, count, r);
    fn(acc.data(), acc.data(), x.data(), count);
  }
  return acc;
}

std::size_t block(std::size_t count, int r, int n) {
  return count / n + (static_cast<std::size_t>(r) < count % n ? 1 : 0);
}

// Splits rank r sends to rank j.
std::size_t split(int r, int j, std::size_t m) {
  return static_cast<std::size_t>((r * 2 + j) % 3) * m;
}

std::string check(const Bytes& got, const Bytes& want, const std::string& what) {
  if (got == want) return "";
  std::size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  return fmt::format("{}: differs at byte {} of {}\n", what, at, want.size());
}

// Runs every collective for every type (and op) on this rank; returns what was wrong.
std::string all_collectives(ShmGroup& g, int r) {
  const int n = g.size();
  std::string errors;
  for (DataType type : kTypes) {
    const std::size_t e = hora::size_of(type);
    const std::string tn = hora::name_of(type);
    for (ReduceOp op : kOps) {
      for (std::size_t count : {1, 3, 100, 1000, 3000}) {
        Bytes buf = reduce_input(type, count, r);
        g.allreduce(buf.data(), count, type, op, "local");
        errors += check(buf, reference_reduce(type, op, count, n),
                        fmt::format("allreduce {} x {} {}", count, tn, hora::name_of(op)));
        // Out of place: the result in the receive buffer, the send buffer untouched.
        const Bytes send = reduce_input(type, count, r);
        Bytes recv(send.size());
        g.allreduce(send.data(), recv.data(), count, type, op, "local");
        errors +=
            check(recv, reference_reduce(type, op, count, n),
                  fmt::format("allreduce out of place {} x {} {}", count, tn, hora::name_of(op)));
        errors += check(send, reduce_input(type, count, r),
                        fmt::format("allreduce out of place {} x {} {}: send buffer", count, tn,
                                    hora::name_of(op)));
      }
      for (std::size_t count : {1, 7, 1000, 3000}) {
        std::vector<std::size_t> blocks;
        for (int k = 0; k < n; ++k) blocks.push_back(block(count, k, n));
        const Bytes in = reduce_input(type, count, r);
        Bytes out(blocks[r] * e);
        g.reducescatter(in.data(), out.data(), blocks, type, op, "local");
        const Bytes full = reference_reduce(type, op, count, n);
        std::size_t off = 0;
        for (int k = 0; k < r; ++k) off += blocks[k];
        errors += check(out, Bytes(full.begin() + off * e, full.begin() + (off + blocks[r]) * e),
                        fmt::format("reducescatter {} x {} {}", count, tn, hora::name_of(op)));
      }
    }
    for (std::size_t c : {1, 5, 1000, 2500}) {
      std::vector<std::size_t> counts;
      for (int k = 0; k < n; ++k) counts.push_back(k == 1 ? 0 : c + k);
      std::size_t total = 0;
      for (auto x : counts) total += x;
      Bytes want;
      for (int k = 0; k < n; ++k) {
        const Bytes part = move_input(type, counts[k], k);
        want.insert(want.end(), part.begin(), part.end());
      }
      const Bytes mine = move_input(type, counts[r], r);
      Bytes got(total * e);
      g.allgather(mine.data(), counts[r], got.data(), counts, type, "local");
      errors += check(got, want, fmt::format("allgather {} x {}", c, tn));
    }
    for (std::size_t count : {1, 1000, 5000}) {
      const int root = static_cast<int>(count % static_cast<std::size_t>(n));
      Bytes buf = r == root ? move_input(type, count, root) : Bytes(count * e, 0);
      g.broadcast(buf.data(), count, type, root, "local");
      errors += check(buf, move_input(type, count, root),
                      fmt::format("broadcast {} x {} from {}", count, tn, root));
    }
    for (std::size_t m : {1, 300}) {
      std::vector<std::size_t> send_splits, recv_splits;
      for (int j = 0; j < n; ++j) send_splits.push_back(split(r, j, m));
      for (int k = 0; k < n; ++k) recv_splits.push_back(split(k, r, m));
      Bytes send, want;
      for (int j = 0; j < n; ++j) {
        const Bytes part = move_input(type, send_splits[j], r, static_cast<std::size_t>(j));
        send.insert(send.end(), part.begin(), part.end());
      }
      for (int k = 0; k < n; ++k) {
        const Bytes part = move_input(type, recv_splits[k], k, static_cast<std::size_t>(r));
        want.insert(want.end(), part.begin(), part.end());
      }
      Bytes got(want.size(), 0);
      g.alltoall(send.data(), send_splits, got.data(), recv_splits, type, "local");
      errors += check(got, want, fmt::format("alltoall splits x{} {}", m, tn));
    }
    g.barrier("local");
  }
  return errors;
}

}  // namespace

TEST_CASE("every collective x every type x every op is right at 1..4 local ranks", "[shm]") {
  for (std::size_t region : {std::size_t{256}, ShmOptions::kDefaultRegionBytes}) {
    for (int n = 1; n <= 4; ++n) {
      const auto outcomes =
          hora::test::run_forked(n, hora::test::fresh_segment_name(), region, 20s, all_collectives);
      for (int r = 0; r < n; ++r) {
        INFO(n << " ranks, region " << region << " bytes, local rank " << r);
        CHECK(WIFEXITED(outcomes[r].status));
        CHECK(outcomes[r].report == "");
      }
    }
  }
}

TEST_CASE("ranks that are threads of one process share a group too", "[shm]") {
  const auto reports =
      hora::test::run_threads(3, hora::test::fresh_segment_name(), 512, 20s, all_collectives);
  for (int r = 0; r < 3; ++r) {
    INFO("local rank " << r);
    CHECK(reports[r] == "");
  }
}

TEST_CASE("in-place allgather, reducescatter and alltoall give the same results", "[shm]") {
  const auto reports = hora::test::run_threads(
      2, hora::test::fresh_segment_name(), 256, 20s, [](ShmGroup& g, int r) -> std::string {
        std::string errors;
        // allgather with sendbuf = this rank's block of recvbuf.
        std::vector<std::int32_t> all(200);
        for (int i = 0; i < 100; ++i) all[r * 100 + i] = r * 1000 + i;
        g.allgather(all.data() + r * 100, 100, all.data(), {100, 100}, DataType::kInt32, "local");
        for (int k = 0; k < 2; ++k) {
          for (int i = 0; i < 100; ++i) {
            if (all[k * 100 + i] != k * 1000 + i) errors = "allgather in place is wrong";
          }
        }
        // reducescatter with recvbuf = sendbuf.
        std::vector<std::int32_t> v(300, r + 1);
        g.reducescatter(v.data(), v.data(), {150, 150}, DataType::kInt32, ReduceOp::kSum, "local");
        for (int i = 0; i < 150; ++i) {
          if (v[i] != 3) errors += " reducescatter in place is wrong";
        }
        // alltoall with recvbuf = sendbuf.
        std::vector<std::int32_t> a(200);
        for (int i = 0; i < 200; ++i) a[i] = r * 1000 + i;
        g.alltoall(a.data(), {100, 100}, a.data(), {100, 100}, DataType::kInt32, "local");
        for (int k = 0; k < 2; ++k) {
          for (int i = 0; i < 100; ++i) {
            if (a[k * 100 + i] != k * 1000 + r * 100 + i) errors += " alltoall in place is wrong";
          }
        }
        return errors;
      });
  CHECK(reports[0] == "");
  CHECK(reports[1] == "");
}

TEST_CASE("outputs of kStreamOutputBytes and more (copied with non-temporal stores) are right",
          "[shm]") {
  // Odd element counts just past the threshold: the copies start and end unaligned.
  const std::size_t big = hora::detail::kStreamOutputBytes / 4 + 13;  // float32 elements
  for (int n : {2, 3}) {
    const auto outcomes = hora::test::run_forked(
        n, hora::test::fresh_segment_name(), ShmOptions::kDefaultRegionBytes, 60s,
        [big](ShmGroup& g, int r) -> std::string {
          const int size = g.size();
          const DataType f32 = DataType::kFloat32;
          std::string errors;
          const Bytes send = reduce_input(f32, big, r);
          Bytes recv(send.size());
          g.allreduce(send.data(), recv.data(), big, f32, ReduceOp::kSum, "local");
          errors += check(recv, reference_reduce(f32, ReduceOp::kSum, big, size), "allreduce");

          std::vector<std::size_t> counts;
          Bytes want;
          for (int k = 0; k < size; ++k) {
            counts.push_back(big / static_cast<std::size_t>(size) + static_cast<std::size_t>(k));
            const Bytes part = move_input(f32, counts[k], k);
            want.insert(want.end(), part.begin(), part.end());
          }
          const Bytes mine = move_input(f32, counts[r], r);
          Bytes got(want.size());
          g.allgather(mine.data(), counts[r], got.data(), counts, f32, "local");
          errors += check(got, want, "allgather");

          Bytes buf = r == 1 ? move_input(f32, big, 1) : Bytes(big * 4, 0);
          g.broadcast(buf.data(), big, f32, 1, "local");
          errors += check(buf, move_input(f32, big, 1), "broadcast");

          const std::size_t m = big / static_cast<std::size_t>(size);
          std::vector<std::size_t> splits(static_cast<std::size_t>(size), m);
          Bytes a2a_send, a2a_want;
          for (int j = 0; j < size; ++j) {
            const Bytes part = move_input(f32, m, r, static_cast<std::size_t>(j));
            a2a_send.insert(a2a_send.end(), part.begin(), part.end());
            const Bytes from = move_input(f32, m, j, static_cast<std::size_t>(r));
            a2a_want.insert(a2a_want.end(), from.begin(), from.end());
          }
          Bytes a2a_got(a2a_want.size(), 0);
          g.alltoall(a2a_send.data(), splits, a2a_got.data(), splits, f32, "local");
          errors += check(a2a_got, a2a_want, "alltoall");
          return errors;
        });
    for (int r = 0; r < n; ++r) {
      INFO(n << " ranks, local rank " << r);
      CHECK(WIFEXITED(outcomes[r].status));
      CHECK(outcomes[r].report == "");
    }
  }
}

TEST_CASE("a float sum is folded in rank order whichever rank reduces the element", "[shm]") {
  // Values whose sum depends on the order: ((1e8 + 1) - 1e8) + 0.5 is 0.5 in float32 (1 is
  // below 1e8's ulp), but a rank that starts from its own -1e8 gets 1.5. Past the small path's
  // 16 KiB every rank reduces its own slice, and slices move with the buffer's length (the
  // engine fuses different tensors from one run to the next): the result must not.
  const float kBase[] = {1e8f, 1.0f, -1e8f, 0.5f};
  auto value = [&](int r, std::size_t i) { return kBase[r] * static_cast<float>(i % 5 + 1); };
  const std::size_t count = 50000 + 3;  // 200 KB: many slices, an odd tail
  for (std::size_t region : {std::size_t{256}, ShmOptions::kDefaultRegionBytes}) {
    for (int n : {3, 4}) {
      const auto outcomes = hora::test::run_forked(
          n, hora::test::fresh_segment_name(), region, 30s, [&](ShmGroup& g, int r) -> std::string {
            std::vector<float> want(count);
            for (std::size_t i = 0; i < count; ++i) {
              float acc = value(0, i);
              for (int k = 1; k < n; ++k) acc += value(k, i);
              want[i] = acc;
            }
            std::vector<float> send(count), out(count), inplace(count);
            for (std::size_t i = 0; i < count; ++i) send[i] = inplace[i] = value(r, i);
            g.allreduce(send.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum,
                        "local");
            g.allreduce(inplace.data(), count, DataType::kFloat32, ReduceOp::kSum, "local");
            std::string errors;
            for (std::size_t i = 0; i < count && errors.empty(); ++i) {
              if (std::memcmp(&out[i], &want[i], 4) != 0 ||
                  std::memcmp(&inplace[i], &want[i], 4) != 0) {
                errors = fmt::format("element {}: {} out of place, {} in place, {} in rank order",
                                     i, out[i], inplace[i], want[i]);
              }
            }
            return errors;
          });
      for (int r = 0; r < n; ++r) {
        INFO(n << " ranks, region " << region << " bytes, local rank " << r);
        CHECK(WIFEXITED(outcomes[r].status));
        CHECK(outcomes[r].report == "");
      }
    }
  }
}

TEST_CASE("segment names differ between jobs and hosts, and between groups of one process",
          "[shm]") {
  using hora::detail::shm::Segment;
  const std::string a(32, 'a');
  const std::string b(32, 'b');
  const std::string a0 = Segment::make_name(a.data(), a.size(), 0);
  const std::string a0_again = Segment::make_name(a.data(), a.size(), 0);
  const std::string a1 = Segment::make_name(a.data(), a.size(), 1);
  const std::string b0 = Segment::make_name(b.data(), b.size(), 0);
  auto job_part = [](const std::string& name) { return name.substr(0, name.find('-', 6)); };
  CHECK(a0.rfind("/hora-", 0) == 0);
  CHECK(a0 != a0_again);
  CHECK(job_part(a0) == job_part(a0_again));
  CHECK(job_part(a0) != job_part(a1));
  CHECK(job_part(a0) != job_part(b0));
  CHECK(a0.size() < 255);  // NAME_MAX
}

TEST_CASE("the segment's name is gone once every rank mapped it", "[shm]") {
  const std::string name = hora::test::fresh_segment_name();
  const auto outcomes =
      hora::test::run_forked(3, name, 4096, 20s, [&](ShmGroup& g, int) -> std::string {
        g.barrier("local");
        // Every rank returned from attaching, so the last one to map it unlinked the name.
        const auto left = hora::test::shm_entries(name.substr(1));
        return left.empty() ? "" : "the segment's name still exists: " + left.front();
      });
  for (const auto& o : outcomes) CHECK(o.report == "");
  CHECK(hora::test::shm_entries(name.substr(1)).empty());
}
