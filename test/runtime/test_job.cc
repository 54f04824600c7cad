#include "test/runtime/test_job.h"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace hora::test {

std::vector<int> one_host(int n) { return std::vector<int>(static_cast<std::size_t>(n), 0); }

std::vector<detail::WorldInfo> make_worlds(const std::vector<int>& hosts, const TestServer& server,
                                           std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(hosts.size());
  std::vector<detail::WorldInfo> worlds(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    detail::WorldInfo& w = worlds[r];
    w.rank = r;
    w.size = n;
    w.host_index = hosts[r];
    w.local_rank = 0;
    w.local_size = 0;
    for (int j = 0; j < n; ++j) {
      if (hosts[j] != hosts[r]) continue;
      if (j < r) ++w.local_rank;
      ++w.local_size;
    }
  }
  for (int r = 0; r < n; ++r) {
    detail::WorldInfo& w = worlds[r];
    // cross_rank: index of this host among the hosts that have a rank with this local rank.
    w.cross_rank = 0;
    w.cross_size = 0;
    for (int j = 0; j < n; ++j) {
      if (worlds[j].local_rank != w.local_rank) continue;
      if (worlds[j].host_index < w.host_index) ++w.cross_rank;
      ++w.cross_size;
    }
    w.hostname = fmt::format("host{}", w.host_index);
    w.rendezvous_host = "127.0.0.1";
    w.rendezvous_port = server.port();
    w.secret = server.secret();
    w.timeout = timeout;
    w.start_timeout = std::chrono::seconds(20);
  }
  return worlds;
}

std::vector<RankResult> run_job(
    const std::vector<detail::WorldInfo>& worlds,
    const std::function<void(detail::Runtime&, const detail::WorldInfo&)>& body) {
  std::vector<RankResult> results(worlds.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < worlds.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        detail::Runtime runtime(worlds[r]);
        const auto start = std::chrono::steady_clock::now();
        try {
          body(runtime, worlds[r]);
        } catch (...) {
          results[r].elapsed = std::chrono::steady_clock::now() - start;
          throw;
        }
        results[r].elapsed = std::chrono::steady_clock::now() - start;
      } catch (...) {
        results[r].error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::string message_of(const std::exception_ptr& error) {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "(not a std::exception)";
  }
}

void rethrow_first(const std::vector<RankResult>& results) {
  for (std::size_t r = 0; r < results.size(); ++r) {
    if (results[r].error) {
      throw std::runtime_error(fmt::format("rank {} failed: {}", r, message_of(results[r].error)));
    }
  }
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  ::setenv(name, value, 1);
}

ScopedEnv::~ScopedEnv() { ::unsetenv(name_.c_str()); }

char thread_state(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

bool threads_settle_in(const std::vector<const std::atomic<pid_t>*>& tids, char state,
                       std::chrono::steady_clock::time_point deadline) {
  auto all_there = [&] {
    for (const std::atomic<pid_t>* tid : tids) {
      if (*tid == 0 || thread_state(*tid) != state) return false;
    }
    return true;
  };
  int settled = 0;
  while (settled < 100 && std::chrono::steady_clock::now() < deadline) {
    settled = all_there() ? settled + 1 : 0;
    std::this_thread::yield();
  }
  return settled == 100;
}

}  // namespace hora::test
