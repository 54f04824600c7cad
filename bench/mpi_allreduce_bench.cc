// The MPI twin of bench/allreduce_bench.cc, for side-by-side comparisons (bench_compare.sh):
// the same sizes, shapes, iteration counts and nccl-tests columns, float32 sum, over MPI.
//
//   mpirun -np 4 mpi_allreduce_bench -b 4 -e 64M -f 2 --collective allreduce,allgather
//
// Options (a subset of allreduce_bench's, same meaning): -b MIN, -e MAX, -f FACTOR, -n ITERS,
// -w WARMUP, -c 0|1, -r ROOT, --collective L, --full-iters. Times are averaged over the ranks
// (allreduce_bench's default -a 1). Shapes as there: allreduce and broadcast move `size` bytes;
// allgather receives `size` bytes (size/n per rank), reducescatter sends `size` bytes, alltoall
// sends `size` bytes per rank. busbw factors: allreduce 2(n-1)/n, broadcast 1, others (n-1)/n.
// In place: MPI_IN_PLACE (allgather: this rank's block of recvbuf; reducescatter: MPI's
// MPI_Reduce_scatter_block with MPI_IN_PLACE); broadcast is in place only ("n/a" out of place).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

enum class Collective { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

const char* name_of(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kReducescatter: return "reducescatter";
  }
  return "?";
}

struct Options {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = 1 << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  bool full_iters = false;
  int root = 0;
  std::vector<Collective> collectives = {Collective::kAllreduce};
};

std::size_t parse_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  if (suffix == "K" || suffix == "k")
    v *= 1024;
  else if (suffix == "M" || suffix == "m")
    v *= 1024 * 1024;
  else if (suffix == "G" || suffix == "g")
    v *= 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    throw std::invalid_argument("bad size: " + text);
  return static_cast<std::size_t>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "-b")
      o.min_bytes = parse_size(value());
    else if (a == "-e")
      o.max_bytes = parse_size(value());
    else if (a == "-f")
      o.factor = std::stod(value());
    else if (a == "-n")
      o.iters = std::stoi(value());
    else if (a == "-w")
      o.warmup = std::stoi(value());
    else if (a == "-c")
      o.check = value() != "0";
    else if (a == "-r")
      o.root = std::stoi(value());
    else if (a == "--full-iters")
      o.full_iters = true;
    else if (a == "--collective") {
      o.collectives.clear();
      std::string list = value();
      std::size_t at = 0;
      while (at <= list.size()) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, comma - at);
        bool found = false;
        for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                             Collective::kAlltoall, Collective::kReducescatter}) {
          if (name == name_of(c)) {
            o.collectives.push_back(c);
            found = true;
          }
        }
        if (!found) throw std::invalid_argument("unknown collective: " + name);
        at = comma + 1;
      }
    } else {
      throw std::invalid_argument("unknown option: " + a);
    }
  }
  return o;
}

struct Shape {
  std::size_t count;  // elements of the larger buffer
  std::size_t per;    // elements per rank (allgather, reducescatter, alltoall)
};

Shape shape_for(Collective c, std::size_t bytes, int n) {
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  if (c == Collective::kAllreduce || c == Collective::kBroadcast) return {count, count};
  const std::size_t per = std::max<std::size_t>(1, count / std::size_t(n));
  return {per * std::size_t(n), per};
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) / n;
    case Collective::kBroadcast: return 1.0;
    default: return double(n - 1) / n;
  }
}

struct Result {
  bool available = false;
  double usec = 0, algbw = 0, busbw = 0;
  long long wrong = 0;
};

struct Buffers {
  std::vector<float> send, recv;
};

// Inputs: rank r's element i is (r + i) % 7 + 1 (sums stay exact in float32).
float input(int r, std::size_t i) { return float((std::size_t(r) + i) % 7 + 1); }

void fill(Collective c, const Shape& s, int me, int n, bool in_place, Buffers& b) {
  (void)n;
  std::vector<float>& src = in_place ? b.recv : b.send;
  switch (c) {
    case Collective::kAllreduce:
    case Collective::kAlltoall:
    case Collective::kReducescatter:
      for (std::size_t i = 0; i < s.count; ++i) src[i] = input(me, i);
      break;
    case Collective::kBroadcast:
      for (std::size_t i = 0; i < s.count; ++i) b.recv[i] = me == 0 ? input(0, i) : 0.0f;
      break;
    case Collective::kAllgather:
      for (std::size_t i = 0; i < s.per; ++i) {
        (in_place ? b.recv[std::size_t(me) * s.per + i] : b.send[i]) = input(me, i);
      }
      break;
  }
}

void run_once(Collective c, const Shape& s, bool in_place, int root, Buffers& b) {
  const int count = int(s.count);
  const int per = int(s.per);
  void* send = in_place ? MPI_IN_PLACE : static_cast<void*>(b.send.data());
  switch (c) {
    case Collective::kAllreduce:
      MPI_Allreduce(send, b.recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case Collective::kAllgather:
      MPI_Allgather(send, per, MPI_FLOAT, b.recv.data(), per, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Collective::kBroadcast:
      MPI_Bcast(b.recv.data(), count, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case Collective::kAlltoall:
      MPI_Alltoall(send, per, MPI_FLOAT, b.recv.data(), per, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case Collective::kReducescatter:
      MPI_Reduce_scatter_block(send, b.recv.data(), per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
  }
}

long long count_wrong(Collective c, const Shape& s, int me, int n, int root, const Buffers& b) {
  long long wrong = 0;
  auto sum_at = [&](std::size_t i) {
    float v = 0;
    for (int r = 0; r < n; ++r) v += input(r, i);
    return v;
  };
  switch (c) {
    case Collective::kAllreduce:
      for (std::size_t i = 0; i < s.count; ++i) wrong += b.recv[i] != sum_at(i);
      break;
    case Collective::kBroadcast:
      for (std::size_t i = 0; i < s.count; ++i) wrong += b.recv[i] != input(root, i);
      break;
    case Collective::kAllgather:
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < s.per; ++i)
          wrong += b.recv[std::size_t(r) * s.per + i] != input(r, i);
      }
      break;
    case Collective::kAlltoall:
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < s.per; ++i) {
          wrong += b.recv[std::size_t(r) * s.per + i] != input(r, std::size_t(me) * s.per + i);
        }
      }
      break;
    case Collective::kReducescatter:
      for (std::size_t i = 0; i < s.per; ++i)
        wrong += b.recv[i] != sum_at(std::size_t(me) * s.per + i);
      break;
  }
  return wrong;
}

Result measure(const Options& o, Collective c, const Shape& s, bool in_place, Buffers& b) {
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  Result r;
  if (c == Collective::kBroadcast && !in_place) return r;
  r.available = true;
  if (c == Collective::kBroadcast && o.root != 0) throw std::invalid_argument("-r: only 0");
  long long wrong = 0;
  if (o.check) {
    fill(c, s, me, n, in_place, b);
    run_once(c, s, in_place, o.root, b);
    wrong = count_wrong(c, s, me, n, o.root, b);
  }
  int iters = o.iters;
  int warmup = o.warmup;
  const std::size_t bytes = s.count * sizeof(float);
  const std::size_t scale_above = 1 << 20;  // as allreduce_bench
  if (!o.full_iters && bytes > scale_above) {
    const double scale = double(scale_above) / double(bytes);
    iters = std::max(std::min(o.iters, 2), int(o.iters * scale));
    warmup = std::min(o.warmup, std::max(1, int(o.warmup * scale)));
  }
  for (int i = 0; i < warmup; ++i) run_once(c, s, in_place, o.root, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run_once(c, s, in_place, o.root, b);
  double usec =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      iters;
  double total = 0;
  long long wrong_total = 0;
  MPI_Allreduce(&usec, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&wrong, &wrong_total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  r.usec = total / n;
  r.algbw = double(bytes) / (r.usec * 1e-6) / 1e9;
  r.busbw = r.algbw * bus_factor(c, n);
  r.wrong = o.check ? wrong_total : -1;
  return r;
}

void print_result(const Result& r) {
  if (!r.available) {
    std::printf("  %7s %7s %7s %6s", "n/a", "n/a", "n/a", "n/a");
    return;
  }
  const char* time_format = r.usec >= 10000.0 ? "  %7.0f" : r.usec >= 100.0 ? "  %7.1f" : "  %7.2f";
  std::printf(time_format, r.usec);
  if (r.wrong < 0)
    std::printf(" %7.2f %7.2f %6s", r.algbw, r.busbw, "N/A");
  else
    std::printf(" %7.2f %7.2f %6lld", r.algbw, r.busbw, r.wrong);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    if (me == 0) std::fprintf(stderr, "mpi_allreduce_bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  const bool leader = me == 0;
  if (leader) {
    std::printf(
        "# mpi_allreduce_bench: %d rank%s  minBytes %zu  maxBytes %zu  step: %g(factor)"
        "  warmup iters: %d  iters: %d  validation: %d\n",
        n, n == 1 ? "" : "s", o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters,
        o.check ? 1 : 0);
  }
  long long wrong = 0;
  for (Collective c : o.collectives) {
    if (leader) {
      std::printf("#\n# Collective: %s\n#\n", name_of(c));
      std::printf("#%47s%22s%10s%20s%12s\n", "", "out-of-place", "", "in-place", "");
      std::printf("# %10s %12s %8s %6s %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n", "size", "count",
                  "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                  "busbw", "#wrong");
      std::printf("# %10s %12s %8s %6s %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n", "(B)",
                  "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                  "(GB/s)", "");
    }
    std::size_t previous = 0;
    for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
      const Shape s = shape_for(c, bytes, n);
      std::size_t next = std::size_t(std::ceil(double(bytes) * o.factor));
      bytes = next <= bytes ? bytes + 1 : next;
      if (s.count == previous) continue;
      previous = s.count;
      Buffers b;
      b.send.assign(s.count, 0.0f);
      b.recv.assign(s.count, 0.0f);
      const bool reduces = c == Collective::kAllreduce || c == Collective::kReducescatter;
      const Result out = measure(o, c, s, false, b);
      const Result in = measure(o, c, s, true, b);
      wrong += std::max(0LL, out.wrong) + std::max(0LL, in.wrong);
      if (leader) {
        std::printf("  %10zu %12zu %8s %6s %6d", s.count * sizeof(float), s.count, "float32",
                    reduces ? "sum" : "none", c == Collective::kBroadcast ? o.root : -1);
        print_result(out);
        print_result(in);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
