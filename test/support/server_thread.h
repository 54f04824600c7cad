// A server under test on an io_context thread of its own: the shape every server fixture of the
// tests shares (TestServer below for rdv::Server, the Horovod HTTP tests for HttpServer).
// The server is built before the thread runs (the servers' contract: built before their
// io_context runs or on its thread); on_io() runs code on that thread, where the servers' other
// methods must be called; teardown stops the io_context, joins the thread, then destroys the
// server, which closes everything synchronously once its io_context no longer runs.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace hora::test {

template <typename S>
class ServerThread {
 public:
  // make(io) returns the server (a std::unique_ptr<S>) built on `io`.
  template <typename Make>
  explicit ServerThread(Make make) : server_(make(io_)) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~ServerThread() {
    work_.reset();
    io_.stop();
    thread_.join();
    server_.reset();
  }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  S& server() { return *server_; }
  const S& server() const { return *server_; }

  // Runs f on the io thread and returns its result; throws if the thread does not run it
  // within 10 s (a deadline the tests never reach when they pass).
  template <typename F>
  auto on_io(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      throw std::runtime_error("the test server's io thread did not run the posted task in 10 s");
    }
    return result.get();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::unique_ptr<S> server_;
  std::thread thread_;
};

}  // namespace hora::test
