#include "test/support/test_server.h"

#include <thread>

#include "rendezvous/secret.h"

namespace hora::test {

rdv::ServerOptions server_options(int size) {
  rdv::ServerOptions o;
  o.bind_address = "127.0.0.1";
  o.port = 0;
  o.size = size;
  o.secret = rdv::generate_secret();
  return o;
}

TestServer::TestServer(int size, rdv::ServerEvents events)
    : TestServer(server_options(size), std::move(events)) {}

TestServer::TestServer(rdv::ServerOptions options, rdv::ServerEvents events)
    : options_(std::move(options)) {
  served_ = std::make_unique<ServerThread<rdv::Server>>(
      [this, ev = recording(std::move(events))](boost::asio::io_context& io) mutable {
        return std::make_unique<rdv::Server>(io, options_, std::move(ev));
      });
}

TestServer::~TestServer() { served_.reset(); }

rdv::ServerEvents TestServer::recording(rdv::ServerEvents events) {
  rdv::ServerEvents ev;
  ev.on_connected = [this, then = std::move(events.on_connected)](int rank,
                                                                  const std::string& peer) {
    record([&](Recorded& r) { r.connected.emplace_back(rank, peer); });
    if (then) then(rank, peer);
  };
  ev.on_disconnected = [this, then = std::move(events.on_disconnected)](int rank, bool clean,
                                                                        const std::string& reason) {
    record([&](Recorded& r) { r.disconnected.emplace_back(rank, clean, reason); });
    if (then) then(rank, clean, reason);
  };
  ev.on_rejected = [this, then = std::move(events.on_rejected)](const std::string& peer,
                                                                const std::string& reason) {
    record([&](Recorded& r) { r.rejected.emplace_back(peer, reason); });
    if (then) then(peer, reason);
  };
  ev.on_http_request = [this,
                        then = std::move(events.on_http_request)](const std::string& peer,
                                                                  const std::string& request) {
    record([&](Recorded& r) { r.http_requests.emplace_back(peer, request); });
    if (then) then(peer, request);
  };
  return ev;
}

rdv::ClientOptions TestServer::client_options(int rank) const {
  rdv::ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port();
  o.rank = rank;
  o.size = options_.size;
  o.secret = options_.secret;
  o.connect_timeout = std::chrono::seconds(10);
  return o;
}

std::unique_ptr<rdv::Client> TestServer::connect(int rank) const {
  return rdv::Client::connect(client_options(rank));
}

rdv::Server::Stats TestServer::stats() {
  return on_io([this] { return server().stats(); });
}

Recorded TestServer::recorded() {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

// A polling interval only: wait_stats decides by its condition, checked up to its deadline.
void TestServer::pause_between_checks() {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

}  // namespace hora::test
