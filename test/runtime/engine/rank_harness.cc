#include "test/runtime/engine/rank_harness.h"

#include <exception>
#include <thread>

namespace hora::test {

void RankHarness::Rank::barrier(const std::string& what) const {
  harness->sync_.barrier(rank, what);
}

RankHarness::RankHarness(int size, EngineOptions options)
    : size_(size), world_(size), sync_(size), warnings_(static_cast<std::size_t>(size)) {
  for (int r = 0; r < size; ++r) {
    transports_.push_back(std::make_unique<ThreadTransport>(world_, r));
    engines_.push_back(
        std::make_unique<Engine>(*transports_.back(), options, [this, r](const std::string& block) {
          std::lock_guard<std::mutex> lock(mu_);
          warnings_[static_cast<std::size_t>(r)].push_back(block);
          cv_.notify_all();
        }));
    ranks_.push_back(Rank{r, size, engines_.back().get(), transports_.back().get(), this});
  }
}

RankHarness::~RankHarness() { shutdown_all(); }

void RankHarness::run(const std::function<void(Rank&)>& body,
                      const std::function<void(Rank&)>& before) {
  if (before) {
    for (Rank& r : ranks_) before(r);
  }
  if (!started_) {
    for (auto& e : engines_) e->start();
    started_ = true;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size_));
  std::vector<std::thread> threads;
  for (Rank& r : ranks_) {
    threads.emplace_back([&, rank = &r] {
      try {
        if (body) body(*rank);
      } catch (...) {
        errors[static_cast<std::size_t>(rank->rank)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void RankHarness::shutdown_all() {
  for (auto& e : engines_) e->shutdown();
}

std::vector<std::string> RankHarness::warnings(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_[static_cast<std::size_t>(rank)];
}

bool RankHarness::wait_for_warning(int rank, const std::string& needle,
                                   std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    for (const std::string& w : warnings_[static_cast<std::size_t>(rank)]) {
      if (w.find(needle) != std::string::npos) return true;
    }
    return false;
  });
}

}  // namespace hora::test
