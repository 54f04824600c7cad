// Test scaffolding for the rendezvous tests: a real Server on 127.0.0.1:0 driven by its own io
// thread, a recorder for its events, and a raw socket peer that speaks (or abuses) the wire
// format by hand. Waits are condition variables or deadline-bounded checks, never sleeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "rendezvous/client.h"
#include "rendezvous/hmac.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/socket.h"
#include "rendezvous/wire.h"

namespace hora::rdv::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Everything the server reported, filled on the io thread, read by the test thread.
struct Recorded {
  std::vector<std::pair<int, std::string>> connected;
  std::vector<std::tuple<int, bool, std::string>> disconnected;
  std::vector<std::pair<std::string, std::string>> rejected;
};

inline ServerOptions test_options(int size) {
  ServerOptions o;
  o.bind_address = "127.0.0.1";
  o.port = 0;
  o.size = size;
  o.secret = generate_secret();
  return o;
}

class TestServer {
 public:
  explicit TestServer(ServerOptions options) : options_(std::move(options)) {
    ServerEvents ev;
    ev.on_connected = [this](int rank, const std::string& peer) {
      record([&](Recorded& r) { r.connected.emplace_back(rank, peer); });
    };
    ev.on_disconnected = [this](int rank, bool clean, const std::string& reason) {
      record([&](Recorded& r) { r.disconnected.emplace_back(rank, clean, reason); });
    };
    ev.on_rejected = [this](const std::string& peer, const std::string& reason) {
      record([&](Recorded& r) { r.rejected.emplace_back(peer, reason); });
    };
    server_ = std::make_unique<Server>(io_, options_, std::move(ev));
    thread_ = std::thread([this] { io_.run(); });
  }

  ~TestServer() {
    work_.reset();
    io_.stop();
    thread_.join();
    server_.reset();  // io is stopped: the server closes everything synchronously
  }

  Server& server() { return *server_; }
  std::uint16_t port() const { return server_->port(); }
  const ServerOptions& options() const { return options_; }

  ClientOptions client_options(int rank) const {
    ClientOptions o;
    o.host = "127.0.0.1";
    o.port = server_->port();
    o.rank = rank;
    o.size = options_.size;
    o.secret = options_.secret;
    o.connect_timeout = 10s;
    return o;
  }

  std::unique_ptr<Client> connect(int rank) { return Client::connect(client_options(rank)); }

  // Runs f on the io thread (where server methods must be called) and returns its result.
  template <typename F>
  auto on_io(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    if (result.wait_for(10s) != std::future_status::ready) {
      throw std::runtime_error("io thread did not run the posted task within 10 s");
    }
    return result.get();
  }

  Server::Stats stats() {
    return on_io([this] { return server_->stats(); });
  }

  // Waits until pred(Recorded) holds; false if it still does not after `timeout`.
  template <typename Pred>
  bool wait_events(Pred pred, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(recorded_); });
  }

  // Waits until pred(Stats) holds, checking on the io thread each time the server may have
  // changed; false after `timeout`.
  template <typename Pred>
  bool wait_stats(Pred pred, std::chrono::milliseconds timeout = 10s) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (pred(stats())) return true;
      // Polling interval only: the outcome depends on the condition, checked up to the deadline.
      std::this_thread::sleep_for(2ms);
    }
    return pred(stats());
  }

  Recorded recorded() {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }

 private:
  template <typename F>
  void record(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(recorded_);
    cv_.notify_all();
  }

  ServerOptions options_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  Recorded recorded_;
};

struct Frame {
  wire::Header header;
  wire::Bytes payload;
};

// A hand-driven connection: sends whatever bytes a test wants and reads frames back.
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port) {
    std::string why;
    fd_ = net::connect_tcp("127.0.0.1", port, Clock::now() + 5s, &why);
    if (!fd_) throw std::runtime_error("raw peer could not connect: " + why);
  }

  void send(const wire::Bytes& bytes) {
    auto r = net::write_all(fd_.get(), bytes, Clock::now() + 5s);
    if (!r) throw std::runtime_error("raw peer send failed: " + r.why);
  }

  void send_text(const std::string& text) { send(wire::Bytes(text.begin(), text.end())); }

  // A header as the test wants it, byte by byte.
  void send_header(std::uint8_t version, std::uint8_t op, std::uint32_t payload_bytes,
                   std::uint32_t id = 7) {
    wire::Bytes h(wire::kHeaderBytes);
    wire::Header hd;
    hd.version = version;
    hd.op = static_cast<wire::Op>(op);
    hd.request_id = id;
    hd.payload_bytes = payload_bytes;
    wire::encode_header(hd, h.data());
    send(h);
  }

  // The next frame, or nullopt at end of stream. Throws on timeout or a malformed frame.
  std::optional<Frame> read_frame(std::chrono::milliseconds timeout = 5s) {
    auto deadline = Clock::now() + timeout;
    std::array<std::uint8_t, wire::kHeaderBytes> hb{};
    auto r = net::read_exact(fd_.get(), hb, deadline);
    if (r.status == net::IoStatus::kEof) return std::nullopt;
    if (r.status == net::IoStatus::kError && r.why.find("reset") != std::string::npos) {
      return std::nullopt;
    }
    if (!r) throw std::runtime_error("raw peer read failed: " + r.why);
    Frame f;
    std::string why;
    auto st = wire::decode_header(hb, wire::kDefaultMaxFrameBytes, &f.header, &why);
    if (st != wire::Status::kOk) throw std::runtime_error("raw peer got a bad frame: " + why);
    f.payload.resize(f.header.payload_bytes);
    r = net::read_exact(fd_.get(), f.payload, deadline);
    if (!r) throw std::runtime_error("raw peer payload read failed: " + r.why);
    return f;
  }

  // True if the server closes the connection within the timeout (no more frames).
  bool closed_by_server(std::chrono::milliseconds timeout = 5s) {
    for (;;) {
      auto f = read_frame(timeout);
      if (!f) return true;
    }
  }

  wire::Nonce read_hello() {
    auto f = read_frame();
    if (!f || f->header.op != wire::Op::kHello) throw std::runtime_error("expected HELLO");
    return wire::decode_hello(f->payload).nonce;
  }

  // Completes the handshake as `rank`; throws if the server does not answer AUTH/OK.
  void authenticate(int rank, int size, const Secret& secret) {
    auto nonce = read_hello();
    wire::AuthRequest a{rank, size, auth_proof(secret, nonce, rank)};
    send(wire::encode_frame(wire::Op::kAuth, wire::Status::kOk, 0, wire::encode(a)));
    auto f = read_frame();
    if (!f || f->header.op != wire::Op::kAuth || f->header.status != wire::Status::kOk) {
      throw std::runtime_error("raw peer was not authenticated");
    }
  }

  // Reads the REJECT the server sends after misbehaviour, then expects the connection to close.
  // Returns {status, reason}.
  // A HELLO still unread (the peer misbehaved before reading it) is skipped.
  std::pair<wire::Status, std::string> expect_reject() {
    auto f = read_frame();
    if (f && f->header.op == wire::Op::kHello) f = read_frame();
    if (!f) throw std::runtime_error("connection closed without a REJECT frame");
    if (f->header.op != wire::Op::kReject) {
      throw std::runtime_error(std::string("expected REJECT, got ") + wire::op_name(f->header.op));
    }
    if (!closed_by_server()) throw std::runtime_error("server did not close after REJECT");
    return {f->header.status, wire::decode_message(f->payload)};
  }

 private:
  UniqueFd fd_;
};

}  // namespace hora::rdv::test
