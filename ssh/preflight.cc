#include "ssh/preflight.h"

#include <thread>

#include "ssh/errors.h"

namespace hora::ssh {

std::vector<ProbeResult> probe_hosts(const std::vector<ProbeRequest>& requests,
                                     const PreflightOptions& options, Clock::time_point deadline) {
  std::vector<ProbeResult> results(requests.size());
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
        std::unique_ptr<Session> s = Session::connect(req.target, options.connect, deadline);
        out.local_address = s->local_address();
        if (!req.command.empty()) out.run = s->run(req.command, req.stdin_data, deadline);
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
