// Every collective x dtype x op of the public API, checked against a reference computed
// locally from the same deterministic inputs every rank can generate. Run through horarun at
// -np 1..4. Uses ONLY <hora/hora.h>. Prints one summary line per rank; exits 1 on any mismatch.
#include <hora/hora.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using hora::DataType;
using hora::ReduceOp;

int g_failures = 0;
int g_checks = 0;

void fail(const std::string& what) {
  ++g_failures;
  if (g_failures <= 20) std::fprintf(stderr, "MISMATCH rank %d: %s\n", hora::rank(), what.c_str());
}

// Input element i of rank r, as a double small enough to be exact in every dtype: products
// of values in 1..3 from the first 4 ranks (1 from the others) stay below 127 (int8) and exact
// in float16/bfloat16, and sums of |v| <= 10 over up to 12 ranks fit int8.
double input(int r, std::size_t i, DataType t, ReduceOp op) {
  if (op == ReduceOp::kProduct) return r < 4 ? static_cast<double>(1 + (r + i) % 3) : 1.0;
  const bool is_signed = t != DataType::kUInt8;
  const double v = static_cast<double>((r * 7 + static_cast<int>(i) * 3) % 11);
  return is_signed && (i % 2 == 1) ? -v : v;
}

// Typed storage of doubles.
std::vector<std::uint8_t> encode(const std::vector<double>& v, DataType t) {
  std::vector<std::uint8_t> out(v.size() * hora::size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    void* p = out.data() + i * hora::size_of(t);
    switch (t) {
      case DataType::kUInt8: {
        auto x = static_cast<std::uint8_t>(v[i]);
        std::memcpy(p, &x, 1);
        break;
      }
      case DataType::kInt8: {
        auto x = static_cast<std::int8_t>(v[i]);
        std::memcpy(p, &x, 1);
        break;
      }
      case DataType::kInt16: {
        auto x = static_cast<std::int16_t>(v[i]);
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kInt32: {
        auto x = static_cast<std::int32_t>(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kInt64: {
        auto x = static_cast<std::int64_t>(v[i]);
        std::memcpy(p, &x, 8);
        break;
      }
      case DataType::kFloat16: {
        auto x = hora::to_float16(static_cast<float>(v[i]));
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kBFloat16: {
        auto x = hora::to_bfloat16(static_cast<float>(v[i]));
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kFloat32: {
        auto x = static_cast<float>(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kFloat64: std::memcpy(p, &v[i], 8); break;
    }
  }
  return out;
}

double decode(const std::uint8_t* p, DataType t) {
  switch (t) {
    case DataType::kUInt8: {
      std::uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DataType::kInt8: {
      std::int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DataType::kInt16: {
      std::int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case DataType::kInt32: {
      std::int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kInt64: {
      std::int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DataType::kFloat16: {
      hora::float16 x;
      std::memcpy(&x, p, 2);
      return hora::to_float(x);
    }
    case DataType::kBFloat16: {
      hora::bfloat16 x;
      std::memcpy(&x, p, 2);
      return hora::to_float(x);
    }
    case DataType::kFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
  }
  return 0;
}

bool is_integer(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

double reduce_reference(std::size_t i, DataType t, ReduceOp op, int n) {
  double acc = input(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    const double v = input(r, i, t, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProduct: acc *= v; break;
    }
  }
  if (op == ReduceOp::kAverage) acc = is_integer(t) ? std::trunc(acc / n) : acc / n;
  return acc;
}

bool close_enough(double got, double want, DataType t) {
  if (is_integer(t)) return got == want;
  // Averages of small integers: exact in float32/64; float16/bfloat16 round the quotient.
  const double tol = t == DataType::kBFloat16 ? 0.02 : t == DataType::kFloat16 ? 0.005 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

const DataType kTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
                           DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                           DataType::kFloat32, DataType::kFloat64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};

std::string label(const char* coll, DataType t, const char* extra = "") {
  return std::string(coll) + " " + hora::name_of(t) + extra;
}

void check_allreduce(std::size_t count, bool in_place) {
  const int r = hora::rank(), n = hora::size();
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      std::vector<double> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = input(r, i, t, op);
      std::vector<std::uint8_t> send = encode(in, t);
      std::vector<std::uint8_t> recv(send.size());
      if (in_place) {
        hora::allreduce(send.data(), send.data(), count, t, op);
        recv = send;
      } else {
        hora::allreduce(send.data(), recv.data(), count, t, op);
      }
      for (std::size_t i = 0; i < count; ++i) {
        ++g_checks;
        const double got = decode(recv.data() + i * hora::size_of(t), t);
        const double want = reduce_reference(i, t, op, n);
        if (!close_enough(got, want, t)) {
          fail(label("allreduce", t) + " " + hora::name_of(op) + (in_place ? " in-place" : "") +
               " [" + std::to_string(i) + "] got " + std::to_string(got) + " want " +
               std::to_string(want));
          break;
        }
      }
    }
  }
}

void check_reducescatter(std::size_t count) {
  const int r = hora::rank(), n = hora::size();
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      std::vector<double> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = input(r, i, t, op);
      std::vector<std::uint8_t> send = encode(in, t);
      const std::size_t mine = hora::reducescatter_count(count, r, n);
      std::size_t offset = 0;
      for (int q = 0; q < r; ++q) offset += hora::reducescatter_count(count, q, n);
      std::vector<std::uint8_t> recv(std::max<std::size_t>(mine, 1) * hora::size_of(t));
      hora::reducescatter(send.data(), count, recv.data(), t, op);
      for (std::size_t i = 0; i < mine; ++i) {
        ++g_checks;
        const double got = decode(recv.data() + i * hora::size_of(t), t);
        const double want = reduce_reference(offset + i, t, op, n);
        if (!close_enough(got, want, t)) {
          fail(label("reducescatter", t) + " " + hora::name_of(op) + " [" +
               std::to_string(offset + i) + "] got " + std::to_string(got) + " want " +
               std::to_string(want));
          break;
        }
      }
    }
  }
}

void check_allgather() {
  const int r = hora::rank(), n = hora::size();
  for (DataType t : kTypes) {
    // Rank q contributes q+1 elements (and rank 0 also none-extra): counts differ per rank.
    const std::size_t mine = static_cast<std::size_t>(r) + 1;
    std::vector<double> in(mine);
    for (std::size_t i = 0; i < mine; ++i) in[i] = input(r, i, t, ReduceOp::kSum);
    std::vector<std::uint8_t> send = encode(in, t);
    std::vector<std::size_t> counts = hora::allgather_counts(mine);
    std::size_t total = 0;
    for (int q = 0; q < n; ++q) {
      ++g_checks;
      if (counts.at(static_cast<std::size_t>(q)) != static_cast<std::size_t>(q) + 1) {
        fail(label("allgather_counts", t));
      }
      total += counts[static_cast<std::size_t>(q)];
    }
    std::vector<std::uint8_t> recv(total * hora::size_of(t));
    hora::allgather(send.data(), mine, recv.data(), counts, t);
    std::size_t at = 0;
    for (int q = 0; q < n; ++q) {
      for (std::size_t i = 0; i < counts[static_cast<std::size_t>(q)]; ++i, ++at) {
        ++g_checks;
        const double got = decode(recv.data() + at * hora::size_of(t), t);
        const double want = input(q, i, t, ReduceOp::kSum);
        if (!close_enough(got, want, t)) {
          fail(label("allgather", t) + " from rank " + std::to_string(q));
          break;
        }
      }
    }
  }
}

void check_broadcast(std::size_t count) {
  const int r = hora::rank(), n = hora::size();
  for (DataType t : kTypes) {
    for (int root = 0; root < n; ++root) {
      std::vector<double> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = input(r, i, t, ReduceOp::kMax);
      std::vector<std::uint8_t> buf = encode(in, t);
      hora::broadcast(buf.data(), count, t, root);
      for (std::size_t i = 0; i < count; ++i) {
        ++g_checks;
        const double got = decode(buf.data() + i * hora::size_of(t), t);
        if (!close_enough(got, input(root, i, t, ReduceOp::kMax), t)) {
          fail(label("broadcast", t) + " root " + std::to_string(root));
          break;
        }
      }
    }
  }
}

void check_alltoall() {
  const int r = hora::rank(), n = hora::size();
  for (DataType t : kTypes) {
    // Rank r sends (r + q) % 3 elements to rank q; element k to q has value f(r, q, k).
    auto value = [&](int from, int to, std::size_t k) {
      return input(from, static_cast<std::size_t>(to) * 5 + k, t, ReduceOp::kSum);
    };
    std::vector<std::size_t> send_splits(static_cast<std::size_t>(n));
    std::vector<double> in;
    for (int q = 0; q < n; ++q) {
      send_splits[static_cast<std::size_t>(q)] = static_cast<std::size_t>((r + q) % 3);
      for (std::size_t k = 0; k < send_splits[static_cast<std::size_t>(q)]; ++k)
        in.push_back(value(r, q, k));
    }
    std::vector<std::uint8_t> send = encode(in, t);
    std::vector<std::size_t> recv_splits = hora::alltoall_splits(send_splits);
    std::size_t total = 0;
    for (int q = 0; q < n; ++q) {
      ++g_checks;
      if (recv_splits.at(static_cast<std::size_t>(q)) != static_cast<std::size_t>((q + r) % 3)) {
        fail(label("alltoall_splits", t));
      }
      total += recv_splits[static_cast<std::size_t>(q)];
    }
    std::vector<std::uint8_t> recv(std::max<std::size_t>(total, 1) * hora::size_of(t));
    hora::alltoall(send.data(), send_splits, recv.data(), recv_splits, t);
    std::size_t at = 0;
    for (int q = 0; q < n; ++q) {
      for (std::size_t k = 0; k < recv_splits[static_cast<std::size_t>(q)]; ++k, ++at) {
        ++g_checks;
        const double got = decode(recv.data() + at * hora::size_of(t), t);
        if (!close_enough(got, value(q, r, k), t)) {
          fail(label("alltoall", t) + " from rank " + std::to_string(q));
          break;
        }
      }
    }
  }
}

}  // namespace

int main() {
  try {
    hora::init();
    // Sizes: 1 element, one not divisible by the rank count, and one large enough for the
    // ring algorithms to split into several chunks.
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{10007}}) {
      check_allreduce(count, false);
      check_allreduce(count, true);
      check_reducescatter(count);
      check_broadcast(count);
    }
    check_allgather();
    check_alltoall();
    hora::barrier();
    std::printf("collectives_check rank %d of %d: %d checks, %d failures\n", hora::rank(),
                hora::size(), g_checks, g_failures);
    hora::shutdown();
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "collectives_check: %s\n", e.what());
    return 1;
  }
  return g_failures == 0 ? 0 : 1;
}
