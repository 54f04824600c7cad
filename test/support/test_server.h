// A real rendezvous server for tests: rdv::Server on 127.0.0.1, port 0 (read back), on an io
// thread of its own (server_thread.h), with a record of its events and real clients for it.
// The rendezvous, runtime and GPU tests share it. Waits are condition variables or
// deadline-bounded checks, never bare sleeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "test/support/server_thread.h"

namespace hora::test {

// Everything the server reported, filled on the io thread, read by the test thread.
struct Recorded {
  std::vector<std::pair<int, std::string>> connected;
  std::vector<std::tuple<int, bool, std::string>> disconnected;
  std::vector<std::pair<std::string, std::string>> rejected;
  std::vector<std::pair<std::string, std::string>> http_requests;  // peer, request start
};

// A job of `size` ranks on 127.0.0.1, port 0, with a fresh random secret.
rdv::ServerOptions server_options(int size);

class TestServer {
 public:
  // `events` are called (on the io thread) after the server's events have been recorded.
  explicit TestServer(int size, rdv::ServerEvents events = {});
  explicit TestServer(rdv::ServerOptions options, rdv::ServerEvents events = {});
  ~TestServer();  // stops the server and joins its thread
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  rdv::Server& server() { return served_->server(); }
  std::uint16_t port() const { return served_->server().port(); }
  const rdv::ServerOptions& options() const { return options_; }
  const rdv::Secret& secret() const { return options_.secret; }

  // What rank `rank` of this job connects with (10 s to connect).
  rdv::ClientOptions client_options(int rank) const;
  std::unique_ptr<rdv::Client> connect(int rank) const;

  // Posts itself to the io thread, like the launcher's abort.
  void abort_all(const std::string& reason) { server().abort_all(reason); }

  // Runs f on the io thread (where server methods must be called) and returns its result.
  template <typename F>
  auto on_io(F f) -> decltype(f()) {
    return served_->on_io(std::move(f));
  }

  // Read on the io thread.
  rdv::Server::Stats stats();
  // Requests parked at the server right now (a get, barrier or exchange waiting for others).
  std::size_t waits() { return stats().waits; }

  // Waits until pred(Recorded) holds; false if it still does not after `timeout`.
  template <typename Pred>
  bool wait_events(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(recorded_); });
  }

  // Waits until pred(Stats) holds, checking on the io thread until `timeout`; false after it.
  template <typename Pred>
  bool wait_stats(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred(stats())) return true;
      pause_between_checks();
    }
    return pred(stats());
  }

  Recorded recorded();

 private:
  static void pause_between_checks();
  rdv::ServerEvents recording(rdv::ServerEvents events);
  template <typename F>
  void record(F f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      f(recorded_);
    }
    cv_.notify_all();
  }

  rdv::ServerOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  Recorded recorded_;
  std::unique_ptr<ServerThread<rdv::Server>> served_;  // last: stopped before the rest goes
};

}  // namespace hora::test
