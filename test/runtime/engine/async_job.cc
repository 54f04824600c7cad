// A rank program for the engine's integration tests (async_job_test.cc runs it under horarun).
// Public API only. Prints "ASYNC_JOB_OK rank R" and exits 0 when every check passed; otherwise
// prints "ASYNC_JOB_FAIL rank R: <what>" to stderr and exits 1.
//
//   async_job [scenario]
//     all       (default) every async collective, submitted in a different order on each rank,
//               several steps (the cache path), a mismatch, a callback
//     orphan    rank 0 submits an op no other rank submits; with HORA_STALL_SHUTDOWN_SECONDS set
//               it must fail with hora::TimeoutError; the ranks then meet in a blocking barrier
//     inflight  rank 0 submits an op no other rank submits and calls hora::shutdown(): the op
//               must fail with hora::Error ("hora was shut down before ...")
#include <hora/async.h>
#include <hora/hora.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

int g_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ASYNC_JOB_FAIL rank %d: %s\n", g_rank, what.c_str());
  std::exit(1);
}

void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

void scenario_all() {
  const int n = hora::size();
  const int me = hora::rank();
  constexpr int kTensors = 30;
  constexpr int kSteps = 4;
  std::vector<std::vector<float>> grads(kTensors);
  std::mt19937 rng(static_cast<unsigned>(me) * 31u + 7u);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<hora::Handle> handles;
    for (int i : order) {
      auto& g = grads[static_cast<std::size_t>(i)];
      g.assign(static_cast<std::size_t>(1 + i * 97), static_cast<float>(me + i + step));
      handles.push_back(
          hora::allreduce_async("grad/" + std::to_string(i), g, hora::ReduceOp::kSum));
    }
    for (const auto& h : handles) hora::synchronize(h);
    for (int i = 0; i < kTensors; ++i) {
      const float expect = static_cast<float>(n * (i + step) + n * (n - 1) / 2);
      check(grads[static_cast<std::size_t>(i)].back() == expect,
            "allreduce grad/" + std::to_string(i) + " step " + std::to_string(step));
    }
  }

  std::vector<std::int32_t> gin(static_cast<std::size_t>(me + 1), me), gout;
  std::vector<double> weights(16, me == n - 1 ? 2.5 : 0.0);
  std::vector<std::size_t> splits;
  std::vector<std::int64_t> a2a_in, a2a_out;
  for (int q = 0; q < n; ++q) {
    splits.push_back(static_cast<std::size_t>(q + 1));
    for (int k = 0; k <= q; ++k) a2a_in.push_back(100 * me + q);
  }
  std::vector<float> rs_in(10, 1.0f), rs_out(10 / n + 1);
  std::atomic<bool> callback_ok{false};
  std::vector<float> cb(3, 1.0f);
  // Reverse submission order on odd ranks.
  std::vector<hora::Handle> hs(5);
  auto submit = [&](int k) {
    switch (k) {
      case 0: hs[0] = hora::allgather_async("gather", gin, &gout); break;
      case 1: hs[1] = hora::broadcast_async("weights", weights, n - 1); break;
      case 2: hs[2] = hora::alltoall_async("a2a", a2a_in, splits, &a2a_out); break;
      case 3:
        hs[3] = hora::reducescatter_async("rs", rs_in.data(), rs_out.data(), 10,
                                          hora::DataType::kFloat32, hora::ReduceOp::kSum);
        break;
      default:
        hs[4] = hora::allreduce_async("cb", cb, hora::ReduceOp::kAverage,
                                      [&](std::exception_ptr e) { callback_ok = e == nullptr; });
    }
  };
  for (int k = 0; k < 5; ++k) submit(me % 2 == 0 ? k : 4 - k);
  for (const auto& h : hs) hora::synchronize(h);
  std::vector<std::int32_t> expect_gather;
  for (int q = 0; q < n; ++q)
    expect_gather.insert(expect_gather.end(), static_cast<std::size_t>(q + 1), q);
  check(gout == expect_gather, "allgather");
  check(weights == std::vector<double>(16, 2.5), "broadcast");
  std::vector<std::int64_t> expect_a2a;
  for (int q = 0; q < n; ++q) {
    for (int k = 0; k <= me; ++k) expect_a2a.push_back(100 * q + me);
  }
  check(a2a_out == expect_a2a, "alltoall");
  check(hora::received_counts(hs[2]) ==
            std::vector<std::size_t>(static_cast<std::size_t>(n), static_cast<std::size_t>(me + 1)),
        "alltoall received counts");
  check(rs_out[0] == static_cast<float>(n), "reducescatter");
  check(cb[0] == 1.0f, "allreduce average");

  // The last rank disagrees about the count: every rank must see the same MismatchError.
  std::vector<float> m(8, 1.0f);
  try {
    hora::synchronize(hora::allreduce_async("mismatch", m.data(), m.data(), me == n - 1 ? 4 : 8,
                                            hora::DataType::kFloat32, hora::ReduceOp::kSum));
    if (n > 1) fail("mismatch was not detected");
  } catch (const hora::MismatchError& e) {
    std::printf("MISMATCH rank %d: %s\n", me, e.what());
  }
  // A callback runs on the engine thread after synchronize() may already have returned.
  hora::barrier();
  check(callback_ok.load(), "callback");
}

void scenario_orphan() {
  std::vector<float> v(4, 1.0f);
  if (hora::rank() == 0) {
    try {
      hora::synchronize(hora::allreduce_async("orphan", v, hora::ReduceOp::kSum));
      fail("the orphan op completed");
    } catch (const hora::TimeoutError& e) {
      std::printf("ORPHAN_TIMEOUT rank 0: %s\n", e.what());
    }
  }
  hora::barrier();
}

void scenario_inflight() {
  std::vector<float> v(4, 1.0f);
  hora::Handle h;
  if (g_rank == 0) h = hora::allreduce_async("inflight", v, hora::ReduceOp::kSum);
  hora::barrier();
  hora::shutdown();
  if (g_rank == 0) {
    try {
      hora::synchronize(h);
      fail("the in-flight op completed");
    } catch (const hora::Error& e) {
      std::printf("INFLIGHT_FAILED rank 0: %s\n", e.what());
    }
  }
}

// Training-like steps: two named allreduces per step with work between their submissions, then
// a wait for both. Run with a cycle time far longer than the job (HORA_CYCLE_TIME_MS=60000), so
// every cycle comes from a wait: a waiting caller must never be left for a tick.
void scenario_steps() {
  std::vector<float> a(1024), b(256);
  volatile double sink = 0;
  for (int step = 0; step < 200; ++step) {
    std::fill(a.begin(), a.end(), 1.0f);
    std::fill(b.begin(), b.end(), 2.0f);
    hora::Handle ha = hora::allreduce_async("step/a", a, hora::ReduceOp::kSum);
    // Uneven work, as a backward pass between two layers' gradients.
    for (int i = 0; i < 2000 * (1 + (step + g_rank) % 5); ++i) sink = sink + i * 0.5;
    hora::Handle hb = hora::allreduce_async("step/b", b, hora::ReduceOp::kSum);
    hora::synchronize(ha);
    hora::synchronize(hb);
    check(a[0] == static_cast<float>(hora::size()) &&
              b[0] == 2.0f * static_cast<float>(hora::size()),
          "step sums");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "all";
  try {
    hora::init();
    g_rank = hora::rank();
    if (scenario == "all") {
      scenario_all();
    } else if (scenario == "orphan") {
      scenario_orphan();
    } else if (scenario == "inflight") {
      scenario_inflight();
    } else if (scenario == "steps") {
      scenario_steps();
    } else {
      fail("unknown scenario " + scenario);
    }
    std::printf("ASYNC_JOB_OK rank %d\n", g_rank);
    std::fflush(stdout);
    hora::shutdown();  // a second call (scenario inflight) is harmless
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
