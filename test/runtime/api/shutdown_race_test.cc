// hora::shutdown() racing with calls on other threads (a world of one, public API only).
//
// Threads call rank(), size(), hostname(), allreduce() and is_initialized() in a tight loop while
// the main thread shuts the process down under them, many times over. Every call must either
// complete with the right answer or throw hora::UsageError naming the reason ("called after
// hora::shutdown()" or "called before hora::init()"); none may touch the runtime after it is
// destroyed. Under AddressSanitizer (meson setup -Db_sanitize=address,undefined) a use after free
// fails this test; without a sanitizer it would usually pass even with the defect, so the
// sanitizer build is what proves it (CONTRIBUTING.md, "Sanitizers").
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <hora/hora.h>
#include <catch2/catch.hpp>

namespace {

constexpr int kIterations = 200;
constexpr int kThreads = 3;
// Calls each thread makes before the main thread may shut down, so shutdown always lands while
// every thread is in its loop (a structural overlap, not a timing guess).
constexpr int kCallsBeforeShutdown = 50;

// One call of the public API; returns false if it threw an unexpected error.
bool one_call(int which, std::string& unexpected) {
  try {
    switch (which % 5) {
      case 0:
        if (hora::rank() != 0) unexpected = "rank() != 0 in a world of one";
        break;
      case 1:
        if (hora::size() != 1) unexpected = "size() != 1 in a world of one";
        break;
      case 2: {
        const std::string host = hora::hostname();
        (void)host;
        break;
      }
      case 3: {
        float in[4] = {1, 2, 3, 4};
        float out[4] = {};
        hora::allreduce(in, out, 4, hora::DataType::kFloat32, hora::ReduceOp::kSum);
        if (out[3] != 4.0f) unexpected = "allreduce of one rank changed the data";
        break;
      }
      case 4: (void)hora::is_initialized(); break;
    }
  } catch (const hora::UsageError& e) {
    const std::string what = e.what();
    if (what.find("called after hora::shutdown()") == std::string::npos &&
        what.find("called before hora::init()") == std::string::npos) {
      unexpected = "unexpected UsageError: " + what;
    }
  } catch (const std::exception& e) {
    unexpected = std::string("unexpected exception: ") + e.what();
  }
  return unexpected.empty();
}

}  // namespace

TEST_CASE("calls racing with hora::shutdown() fail cleanly or complete") {
  ::unsetenv("HORA_RANK");  // a world of one, whatever the test runner's environment holds

  for (int iteration = 0; iteration < kIterations; ++iteration) {
    hora::init();
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::vector<std::string> unexpected(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        int calls = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          if (!one_call(calls + t, unexpected[t])) break;
          if (++calls == kCallsBeforeShutdown) ready.fetch_add(1);
        }
        if (calls < kCallsBeforeShutdown) ready.fetch_add(1);  // failed early: do not hold up
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    hora::shutdown();
    stop.store(true);
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      INFO("iteration " << iteration << " thread " << t);
      REQUIRE(unexpected[t].empty());
    }
  }
  CHECK_FALSE(hora::is_initialized());
}
