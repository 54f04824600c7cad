// Test scaffolding for the rendezvous tests: the shared TestServer (test/support/test_server.h: a
// real Server on 127.0.0.1:0 driven by its own io thread, with a record of its events), and a raw
// socket peer that speaks (or abuses) the wire format by hand.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/unique_fd.h"
#include "rendezvous/hmac.h"
#include "rendezvous/secret.h"
#include "rendezvous/socket.h"
#include "rendezvous/wire.h"
#include "test/support/test_server.h"

namespace hora::rdv::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using hora::test::Recorded;
using hora::test::server_options;
using hora::test::TestServer;

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
