// A rank program for test/integration/gloo_sync_test.sh: allreduces that the Gloo backend runs
// on its sync pairs (HORA_GLOO_SYNC, runtime/gloo/sync_policy.h) when they are at most
// HORA_GLOO_SYNC_BYTES, next to larger ones that stay on the async pairs. Public API only.
//
//   sync_probe check     blocking and async (engine) allreduces of sizes around the threshold,
//                        every op and int32/float32/float64, in place and not, interleaved and
//                        repeated; every rank checks every element against the reference.
//                        Prints "sync_probe rank R of N: C checks, F failures"; exits 1 on any
//   sync_probe kill      rank 1 SIGKILLs itself while the others are in a 64-byte allreduce;
//                        the others print "rank R failed as expected: <message>" and exit 1
//   sync_probe abort DIR ranks 2 and up write DIR/<rank>.pid and sleep outside any collective;
//                        ranks 0 and 1 write theirs, print "rank R entering" and enter a 64-byte
//                        allreduce, where rank 0 waits for rank 2 (recursive doubling at -np 4)
//                        until the launcher's abort (the test kills rank 3); they print "rank R
//                        failed as expected: <message>"
#include <hora/async.h>
#include <hora/error.h>
#include <hora/hora.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using hora::DataType;
using hora::ReduceOp;

int g_checks = 0;
int g_failures = 0;

// Element i of rank r: small integers, so every sum, product, min and max is exact.
double input(int r, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::kProduct) return static_cast<double>(1 + (r + i) % 2);
  const double v = static_cast<double>((r * 5 + i * 3) % 13);
  return i % 2 == 1 ? -v : v;
}

double expected(int n, std::size_t i, ReduceOp op) {
  double acc = input(0, i, op);
  for (int r = 1; r < n; ++r) {
    const double v = input(r, i, op);
    switch (op) {
      case ReduceOp::kSum: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = v < acc ? v : acc; break;
      case ReduceOp::kMax: acc = v > acc ? v : acc; break;
      default: break;
    }
  }
  return acc;
}

template <typename T>
void check_one(std::size_t count, ReduceOp op, bool in_place, bool async, const char* type) {
  const int n = hora::size();
  const int me = hora::rank();
  std::vector<T> in(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<T>(input(me, i, op));
  std::vector<T> out(count, T(-1));
  T* result = in_place ? in.data() : out.data();
  if (async) {
    const std::string name = "sync_probe/" + std::to_string(count) + "/" + type + "/" +
                             hora::name_of(op) + (in_place ? "/in" : "/out");
    hora::Handle h = hora::allreduce_async(name, in.data(), result, count, hora::dtype_of<T>(), op);
    hora::synchronize(h);
  } else {
    hora::allreduce(in.data(), result, count, hora::dtype_of<T>(), op);
  }
  ++g_checks;
  for (std::size_t i = 0; i < count; ++i) {
    const double want = expected(n, i, op);
    if (static_cast<double>(result[i]) != want) {
      if (++g_failures <= 10) {
        std::fprintf(stderr,
                     "MISMATCH rank %d: %s allreduce (%s) of %zu x %s%s, element %zu: %g, want "
                     "%g\n",
                     me, async ? "async" : "blocking", hora::name_of(op), count, type,
                     in_place ? " in place" : "", i, static_cast<double>(result[i]), want);
      }
      return;
    }
  }
}

int mode_check() {
  hora::init();
  // Bytes from 4 to past the default threshold (64 KiB) and the limit (128 KiB).
  const std::vector<std::size_t> counts{1, 2, 3, 255, 1024, 16383, 16384, 16385, 40000};
  for (int repeat = 0; repeat < 2; ++repeat) {
    for (std::size_t count : counts) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
        for (bool in_place : {false, true}) {
          check_one<float>(count, op, in_place, false, "float32");
          check_one<std::int32_t>(count, op, in_place, false, "int32");
          check_one<double>(count / 2 + 1, op, in_place, false, "float64");
        }
      }
      check_one<float>(count, ReduceOp::kSum, false, true, "float32");
    }
  }
  // Many small ones in a row: the sync contexts' tags (and slots) advance every op.
  for (int i = 0; i < 500; ++i)
    check_one<float>(1 + i % 7, ReduceOp::kSum, i % 2 == 0, false, "float32");
  std::printf("sync_probe rank %d of %d: %d checks, %d failures\n", hora::rank(), hora::size(),
              g_checks, g_failures);
  hora::shutdown();
  return g_failures == 0 ? 0 : 1;
}

int small_allreduce_expecting_failure() {
  try {
    std::vector<float> v(16, 1.0f);
    hora::allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    std::fprintf(stderr, "rank %d: the allreduce completed without every rank\n", hora::rank());
    return 2;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d failed as expected: %s\n", hora::rank(), e.what());
    return 1;
  }
}

int mode_kill() {
  hora::init();
  hora::barrier();
  // The others are about to enter (or are in) an allreduce that needs this rank.
  if (hora::rank() == 1) ::kill(::getpid(), SIGKILL);
  return small_allreduce_expecting_failure();
}

int mode_abort(const std::string& dir) {
  hora::init();
  hora::barrier();
  const int me = hora::rank();
  if (std::FILE* f = std::fopen((dir + "/" + std::to_string(me) + ".pid").c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  if (me >= 2) {
    for (;;) ::pause();  // alive, connections open, in no collective: ended by the launcher
  }
  std::printf("rank %d entering\n", me);
  std::fflush(stdout);
  return small_allreduce_expecting_failure();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "check") return mode_check();
    if (mode == "kill") return mode_kill();
    if (mode == "abort" && argc > 2) return mode_abort(argv[2]);
  } catch (const hora::Error& e) {
    // (init() may be what failed: no hora::rank() here)
    std::fprintf(stderr, "sync_probe %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: sync_probe check|kill|abort DIR\n");
  return 2;
}
