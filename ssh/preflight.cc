#include "ssh/preflight.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ssh/errors.h"

namespace hora::ssh {
namespace {

// A counting gate with a deadline on the wait (std::counting_semaphore's try_acquire_until has
// no portable bound on its maximum; this one is plain).
class Gate {
 public:
  explicit Gate(int n) : free_(n) {}
  bool acquire(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return free_ > 0; })) return false;
    --free_;
    return true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

struct Slot {
  Slot(Gate& g, Clock::time_point deadline) : gate(g), acquired(g.acquire(deadline)) {}
  ~Slot() {
    if (acquired) gate.release();
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  Gate& gate;
  bool acquired;
};

}  // namespace

std::vector<ProbeResult> probe_hosts(const std::vector<ProbeRequest>& requests,
                                     const PreflightOptions& options, Clock::time_point deadline) {
  std::vector<ProbeResult> results(requests.size());
  Gate gate(std::max(1, options.max_connecting));
  std::vector<std::thread> threads;
  threads.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    // Each thread writes only results[i]; join() below publishes them to this thread.
    threads.emplace_back([&, i] {
      const ProbeRequest& req = requests[i];
      ProbeResult& out = results[i];
      out.target = req.target;
      const auto t0 = Clock::now();
      try {
        std::unique_ptr<Session> s;
        {
          // Up to max_connecting handshakes at once (sshd's MaxStartups); each slot is held at
          // most until the deadline, which bounds every wait here.
          const Slot slot(gate, deadline);
          if (!slot.acquired) {
            throw TimeoutError(req.target.alias + ": the preflight's deadline passed while " +
                               "waiting to connect (too many hosts at once)");
          }
          s = Session::connect(req.target, options.connect, deadline);
        }
        out.local_address = s->local_address();
        if (!req.command.empty() && !req.keep_running_after.empty()) {
          Session::Started st = s->start_until(req.command, req.keep_running_after, deadline);
          out.run = std::move(st.run);
          out.started = std::move(st.channel);
          out.started_rest = std::move(st.rest);
        } else if (!req.command.empty()) {
          out.run = s->run(req.command, req.stdin_data, deadline);
        }
        if (options.keep_sessions) out.session = std::move(s);
      } catch (const std::exception& e) {
        out.error = std::current_exception();
        out.error_message = e.what();
      }
      out.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    });
  }
  // Every wait inside a thread is bounded by `deadline`, so these joins are too.
  for (std::thread& t : threads) t.join();
  return results;
}

std::string describe_failures(const std::vector<ProbeResult>& results) {
  std::size_t failed = 0;
  std::string lines;
  for (const ProbeResult& r : results) {
    if (r.ok()) continue;
    ++failed;
    lines += "\n  " + r.error_message;
  }
  if (failed == 0) return {};
  return "preflight failed on " + std::to_string(failed) + " of " + std::to_string(results.size()) +
         (results.size() == 1 ? " host:" : " hosts:") + lines;
}

}  // namespace hora::ssh
