// An elastic training loop in C++ (docs/elastic.md): run it with horarun's elastic flags, e.g.
//
//   horarun -np 4 --min-np 2 --host-discovery-script ./hosts.sh ./elastic_train --steps 200
//
// Its state is a weight vector and the step count. Every step averages a gradient over the
// ranks (a vector of ones: the average is 1 at any size), adds (step + 1) times it to the
// weights, and commits. When a host is lost, every rank goes back to the last commit on the
// ranks that are left and goes on; when one is added, every rank moves to the bigger job at the
// next commit. Either way the final weights are the same as in a job that never changed size:
// steps * (steps + 1) / 2 in every element, on every rank. It prints one line per step on rank
// 0 and a summary line on every rank.
#include <hora/elastic.h>
#include <hora/hora.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct TrainState : hora::elastic::State {
  std::vector<double> weights = std::vector<double>(4096, 0.0);
  std::int32_t step = 0;
  std::vector<double> saved_weights = weights;
  std::int32_t saved_step = 0;

  void save() override {
    saved_weights = weights;
    saved_step = step;
  }
  void restore() override {
    weights = saved_weights;
    step = saved_step;
  }
  void sync() override {
    hora::broadcast(weights, 0);
    std::vector<std::int32_t> s{step};
    hora::broadcast(s, 0);
    step = s[0];
  }
};

std::uint64_t checksum(const std::vector<double>& v) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(double); ++i) {
    h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

int flag_value(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = flag_value(argc, argv, "--steps", 100);
  const int step_ms = flag_value(argc, argv, "--step-ms", 20);
  try {
    hora::init();
    TrainState state;
    state.register_reset_callback([] {
      std::printf("reset: now rank %d of %d (round %d)\n", hora::rank(), hora::size(),
                  hora::elastic::round());
      std::fflush(stdout);
    });
    hora::elastic::run(state, [&](TrainState& s) {
      while (s.step < steps) {
        std::vector<double> gradient(s.weights.size(), 1.0);
        hora::allreduce(gradient, hora::ReduceOp::kAverage);
        for (std::size_t i = 0; i < s.weights.size(); ++i) {
          s.weights[i] += gradient[i] * (s.step + 1);
        }
        ++s.step;
        if (hora::rank() == 0) {
          std::printf("step %d size %d\n", s.step, hora::size());
          std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
        s.commit();
      }
    });
    const double expected = static_cast<double>(steps) * (steps + 1) / 2;
    bool right = true;
    for (double w : state.weights) right = right && w == expected;
    std::printf("done: rank %d of %d, round %d, step %d, weights %016llx %s\n", hora::rank(),
                hora::size(), hora::elastic::round(), state.step,
                static_cast<unsigned long long>(checksum(state.weights)),
                right ? "right" : "WRONG");
    hora::shutdown();
    return right ? 0 : 3;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "elastic_train: %s\n", e.what());
    return 1;
  }
}
