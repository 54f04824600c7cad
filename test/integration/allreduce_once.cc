// A rank program for the scale case of horarun's integration tests (test/integration/
// horarun_test.sh `scale`) and for bench/bench_scale.sh. Public API only: hora::init(), one
// allreduce of (rank + 1) over every rank, checked against n (n + 1) / 2, hora::shutdown().
// Rank 0 prints "allreduce_once: N ranks, sum S ok"; a wrong sum exits 1 naming the rank.
#include <hora/hora.h>

#include <cstdio>

int main() {
  hora::init();
  const int n = hora::size();
  const double mine = hora::rank() + 1;
  double sum = 0;
  hora::allreduce(&mine, &sum, 1, hora::DataType::kFloat64, hora::ReduceOp::kSum);
  const double want = static_cast<double>(n) * (n + 1) / 2;
  int status = 0;
  if (sum != want) {
    std::fprintf(stderr, "allreduce_once: rank %d of %d got %.0f, want %.0f\n", hora::rank(), n,
                 sum, want);
    status = 1;
  } else if (hora::rank() == 0) {
    std::printf("allreduce_once: %d ranks, sum %.0f ok\n", n, sum);
  }
  hora::shutdown();
  return status;
}
