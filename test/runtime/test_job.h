// A hora job inside one test process: a real rendezvous server (TestServer,
// test/support/test_server.h) and one thread per rank, each with its own hora::detail::Runtime
// built from a WorldInfo, as a launched rank would build it from its environment.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/world.h"
#include "runtime/process/runtime.h"
#include "test/support/test_server.h"

namespace hora::test {

// Horovod's layout for ranks placed on hosts in order: hosts[r] is rank r's host index
// (non-decreasing). Host h is named "host<h>".
std::vector<detail::WorldInfo> make_worlds(const std::vector<int>& hosts, const TestServer& server,
                                           std::chrono::milliseconds timeout);

// n ranks on one host.
std::vector<int> one_host(int n);

struct RankResult {
  std::exception_ptr error;  // what the rank's body (or its init) threw, if anything
  std::chrono::steady_clock::duration elapsed{};  // time spent in the body
};

// Runs body(runtime, world) on one thread per rank, after building each rank's Runtime (which
// joins the job). Returns when every thread finished. Runtimes are destroyed (shutdown) after
// the body returns, on the rank's thread.
std::vector<RankResult> run_job(
    const std::vector<detail::WorldInfo>& worlds,
    const std::function<void(detail::Runtime&, const detail::WorldInfo&)>& body);

// Rethrows the first rank error (for REQUIRE_NOTHROW-style checks with the rank named).
void rethrow_first(const std::vector<RankResult>& results);

// Catch2 helper: the message of an exception_ptr ("" when null).
std::string message_of(const std::exception_ptr& error);

// Sets an environment variable for its lifetime (the rank threads of a job read it in init()),
// then unsets it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
};

// Whether `error` holds an E (or a subclass).
template <typename E>
bool is(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Linux state of thread `tid` of this process, from /proc ('S' = sleeping, e.g. in a condition
// variable wait or recv(2); 'R' = running; '?' when unknown).
char thread_state(pid_t tid);

// Polls until each of `tids` (0: that thread has not started) has been in `state` for 100 polls
// in a row, or until `deadline`; true when they settled there. For "the collective is blocked".
bool threads_settle_in(const std::vector<const std::atomic<pid_t>*>& tids, char state,
                       std::chrono::steady_clock::time_point deadline);

}  // namespace hora::test
