// A rendezvous server of `size` ranks on its own io_context thread (127.0.0.1, port 0, read
// back), and real clients for it: the fixture of the GPU backend's tests.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "rendezvous/client.h"
#include "rendezvous/server.h"

namespace hora::test {

class TestServer {
 public:
  explicit TestServer(int size, rdv::Secret secret = {})
      : secret_(secret), work_(io_.get_executor()) {
    rdv::ServerOptions options;
    options.size = size;
    options.secret = secret_;
    server_ = std::make_unique<rdv::Server>(io_, options);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    server_->stop();
    work_.reset();
    thread_.join();
    // The server is destroyed after its io_context stopped running handlers.
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::unique_ptr<rdv::Client> connect(int rank, int size) {
    rdv::ClientOptions options;
    options.host = "127.0.0.1";
    options.port = server_->port();
    options.rank = rank;
    options.size = size;
    options.secret = secret_;
    options.connect_timeout = std::chrono::seconds(10);
    return rdv::Client::connect(options);
  }

  rdv::Server& server() { return *server_; }

 private:
  rdv::Secret secret_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<rdv::Server> server_;
  std::thread thread_;
};

}  // namespace hora::test
