// A rank program for test/runtime/shm/shm_lifetime_test.sh and scripts/soak.sh (public API only):
// hora::init(), ITERATIONS allreduces of 256 Ki floats (checked), hora::shutdown(). Rank 0
// prints "shm_lifetime_child: N ranks, ITERATIONS allreduces ok".
#include <hora/hora.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 1;
  try {
    hora::init();
    const double n = hora::size();
    for (int i = 0; i < iterations; ++i) {
      std::vector<float> v(256 * 1024, static_cast<float>(hora::rank() + 1));
      hora::allreduce(v, hora::ReduceOp::kSum);
      if (v.back() != static_cast<float>(n * (n + 1) / 2)) {
        std::fprintf(stderr, "shm_lifetime_child: rank %d got %g\n", hora::rank(), v.back());
        return 1;
      }
    }
    if (hora::rank() == 0) {
      std::printf("shm_lifetime_child: %d ranks, %d allreduces ok\n", hora::size(), iterations);
    }
    hora::shutdown();
    return 0;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "shm_lifetime_child: %s\n", e.what());
    return 1;
  }
}
