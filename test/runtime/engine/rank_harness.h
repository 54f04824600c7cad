// Runs N ranks of the engine in one process: one ThreadWorld, one ThreadTransport and one Engine
// per rank, and one thread per rank running the test's body. Catch2 assertions are not
// thread-safe, so bodies record what they saw and the test asserts on the main thread after
// run() returns; an exception escaping a body is rethrown by run().
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "test/runtime/engine/thread_transport.h"

namespace hora::test {

// Engine options for tests: a 0.5 ms cycle, so ops move without waiting for the default tick.
inline detail::engine::EngineOptions fast_options() {
  detail::engine::EngineOptions o;
  o.cycle_time = std::chrono::microseconds(500);
  return o;
}

// A file name under /tmp unique to this process: "/tmp/<prefix>_<pid>_<stem>".
inline std::string temp_path(const std::string& prefix, const std::string& stem) {
  return "/tmp/" + prefix + "_" + std::to_string(::getpid()) + "_" + stem;
}

class RankHarness {
 public:
  using Engine = detail::engine::Engine;
  using EngineOptions = detail::engine::EngineOptions;

  struct Rank {
    int rank = 0;
    int size = 0;
    Engine* engine = nullptr;
    ThreadTransport* transport = nullptr;
    RankHarness* harness = nullptr;
    // A barrier among the bodies (not through the engine), with a deadline.
    void barrier(const std::string& what) const;
  };

  RankHarness(int size, EngineOptions options);
  ~RankHarness();

  // Runs before(rank) for every rank on this thread before any engine starts (ops submitted here
  // all meet in the engines' first cycle), then starts the engines and runs body(rank) on one
  // thread per rank, then joins them. Engines stay up for further run() calls.
  void run(const std::function<void(Rank&)>& body,
           const std::function<void(Rank&)>& before = nullptr);
  // Shuts every engine down (in rank order).
  void shutdown_all();

  Engine& engine(int rank) { return *engines_[static_cast<std::size_t>(rank)]; }
  ThreadTransport& transport(int rank) { return *transports_[static_cast<std::size_t>(rank)]; }

  // Stall-check warnings logged by each rank.
  std::vector<std::string> warnings(int rank);
  // Waits until some warning of `rank` contains `needle`; false at the deadline.
  bool wait_for_warning(int rank, const std::string& needle, std::chrono::milliseconds timeout);

 private:
  int size_;
  ThreadWorld world_;
  ThreadWorld sync_;  // for Rank::barrier
  std::vector<std::unique_ptr<ThreadTransport>> transports_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<Rank> ranks_;
  bool started_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<std::string>> warnings_;
};

}  // namespace hora::test
