// Peers that break the protocol are refused, reported through on_rejected and disconnected,
// while an honest rank connected to the same server keeps working.
#include <catch2/catch.hpp>

#include "test/rendezvous/harness.h"

using namespace hora::rdv;
using namespace hora::rdv::test;
using wire::Op;
using wire::Status;

namespace {

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Fixture {
  Fixture() : ts(make_options()), good(ts.connect(0)) { good->set("before", bytes_of("ok"), 5s); }

  static ServerOptions make_options() {
    auto o = server_options(2);
    o.max_frame_bytes = 4096;
    o.auth_timeout = 500ms;
    return o;
  }

  // The server reported exactly one rejection with a reason containing `text`.
  void expect_one_rejection(const std::string& text) {
    REQUIRE(ts.wait_events([](const Recorded& r) { return !r.rejected.empty(); }));
    auto rec = ts.recorded();
    REQUIRE(rec.rejected.size() == 1);
    CHECK_THAT(rec.rejected[0].first, Catch::StartsWith("127.0.0.1:"));
    CHECK_THAT(rec.rejected[0].second, Catch::Contains(text));
  }

  // The honest rank is unaffected: still connected, requests still answered.
  void expect_good_client_fine() {
    good->set("after", bytes_of("still here"), 5s);
    CHECK(good->get("before", 5s) == bytes_of("ok"));
    CHECK(good->get("after", 5s) == bytes_of("still here"));
    CHECK(ts.on_io([&] { return ts.server().ranks_connected(); }).count(0) == 1);
  }

  TestServer ts;
  std::unique_ptr<Client> good;
};

}  // namespace

TEST_CASE_METHOD(Fixture, "wrong secret is rejected", "[rejection]") {
  auto o = ts.client_options(1);
  o.secret[5] ^= 0x40;
  CHECK_THROWS_MATCHES(Client::connect(o), AuthError,
                       Catch::Matchers::Predicate<AuthError>(
                           [](const AuthError& e) {
                             std::string m = e.what();
                             return m.find("AUTH_FAILED") != std::string::npos &&
                                    m.find("wrong proof") != std::string::npos &&
                                    m.find("rank 1") != std::string::npos;
                           },
                           "names rank, AUTH_FAILED and the wrong proof"));
  expect_one_rejection("authentication failed for rank 1");
  expect_good_client_fine();
  CHECK(ts.on_io([&] { return ts.server().ranks_seen(); }) == std::set<int>{0});
}

TEST_CASE_METHOD(Fixture, "an AUTH without a proof is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.read_hello();
  p.send(wire::encode_frame(Op::kAuth, Status::kOk, 0, wire::Writer().i32(1).i32(2).take()));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadFrame);
  CHECK_THAT(reason, Catch::Contains("AUTH payload is 8 bytes, expected 40"));
  expect_one_rejection("AUTH payload");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "garbage bytes are rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.send_text(std::string("\x01\x02 binary junk\r\n", 16));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadFrame);
  CHECK_THAT(reason, Catch::Contains("not a hora rendezvous frame (first bytes 0x01 0x02"));
  expect_one_rejection("not a hora rendezvous frame");
  CHECK(ts.recorded().http_requests.empty());
  expect_good_client_fine();
}

// What a Horovod worker's Gloo store sends when HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT name a hora
// port: the launcher is told it was HTTP, and by what request, before the rejection.
TEST_CASE_METHOD(Fixture, "an HTTP request is rejected and reported as one", "[rejection]") {
  RawPeer p(ts.port());
  p.send_text("PUT /global/rank_0 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd");
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadFrame);
  CHECK_THAT(reason, Catch::Contains("an HTTP request (\"PUT /global/rank...\")"));
  expect_one_rejection("an HTTP request");
  const auto rec = ts.recorded();
  REQUIRE(rec.http_requests.size() == 1);
  CHECK_THAT(rec.http_requests[0].first, Catch::StartsWith("127.0.0.1:"));
  CHECK(rec.http_requests[0].second == "PUT /global/rank");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "an oversized frame before authentication is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.read_hello();
  p.send_header(wire::kVersion, static_cast<std::uint8_t>(Op::kAuth), 1u << 30);
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kTooLarge);
  CHECK_THAT(reason, Catch::Contains("only the AUTH frame is accepted"));
  expect_one_rejection("exceeds the limit");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "an oversized frame after authentication is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  p.send_header(wire::kVersion, static_cast<std::uint8_t>(Op::kSet), 8192);
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kTooLarge);
  CHECK_THAT(reason, Catch::Contains("8208 bytes exceeds the limit of 4096"));
  expect_one_rejection("exceeds the limit of 4096");
  // The authenticated rank is also reported as disconnected, not cleanly.
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.disconnected.size() == 1; }));
  auto d = ts.recorded().disconnected[0];
  CHECK(std::get<0>(d) == 1);
  CHECK_FALSE(std::get<1>(d));
  CHECK_THAT(std::get<2>(d), Catch::Contains("rejected"));
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "the client refuses to send a frame over its limit", "[rejection]") {
  auto o = ts.client_options(1);
  o.max_frame_bytes = 4096;
  auto c = Client::connect(o);
  CHECK_THROWS_AS(c->set("big", Bytes(5000), 5s), ProtocolError);
  c->set("small", Bytes(100), 5s);  // nothing was sent: the connection is intact
  CHECK(ts.recorded().rejected.empty());
}

TEST_CASE_METHOD(Fixture, "an unknown op is rejected, before or after authentication",
                 "[rejection]") {
  const bool authenticated = GENERATE(false, true);
  RawPeer p(ts.port());
  if (authenticated) {
    p.authenticate(1, 2, ts.options().secret);
  } else {
    p.read_hello();
  }
  p.send_header(wire::kVersion, 0x7f, 0);
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kUnknownOp);
  CHECK_THAT(reason, Catch::Contains("unknown op 0x7f"));
  expect_one_rejection("unknown op 0x7f");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a server-only op from a client is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  p.send(wire::encode_frame(Op::kAbort, Status::kOk, 0, wire::encode_message("x")));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kUnknownOp);
  CHECK_THAT(reason, Catch::Contains("ABORT, an op only the server sends"));
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a bad version is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.read_hello();
  p.send_header(1, static_cast<std::uint8_t>(Op::kAuth), wire::kAuthPayloadBytes);
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadVersion);
  CHECK_THAT(reason, Catch::Contains("protocol version 1 is not supported"));
  expect_one_rejection("version 1");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a second connection for a connected rank is rejected", "[rejection]") {
  CHECK_THROWS_MATCHES(ts.connect(0), AuthError,
                       Catch::Matchers::Predicate<AuthError>(
                           [](const AuthError& e) {
                             return std::string(e.what()).find(
                                        "rank 0 is already connected from "
                                        "127.0.0.1:") != std::string::npos;
                           },
                           "names the rank and the existing connection"));
  expect_one_rejection("already connected");
  expect_good_client_fine();
  // The first connection still owns rank 0, and no disconnect was reported for it.
  CHECK(ts.recorded().disconnected.empty());
}

TEST_CASE_METHOD(Fixture, "a rank out of range or a wrong job size is rejected", "[rejection]") {
  SECTION("rank out of range") {
    // The proof is right for rank 5, so only the range check can refuse it.
    RawPeer p(ts.port());
    auto n = p.read_hello();
    wire::AuthRequest a{5, 2, auth_proof(ts.options().secret, n, 5)};
    p.send(wire::encode_frame(Op::kAuth, Status::kOk, 0, wire::encode(a)));
    auto [status, reason] = p.expect_reject();
    CHECK(status == Status::kRankOutOfRange);
    CHECK_THAT(reason, Catch::Contains("rank 5 is out of range for a job of 2 ranks"));
    expect_one_rejection("out of range");
  }
  SECTION("size mismatch") {
    RawPeer p(ts.port());
    auto n = p.read_hello();
    wire::AuthRequest a{1, 3, auth_proof(ts.options().secret, n, 1)};
    p.send(wire::encode_frame(Op::kAuth, Status::kOk, 0, wire::encode(a)));
    auto [status, reason] = p.expect_reject();
    CHECK(status == Status::kSizeMismatch);
    CHECK_THAT(reason, Catch::Contains("believes the job has 3 ranks, but it has 2"));
    expect_one_rejection("believes the job has 3 ranks");
  }
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a request before authentication is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.read_hello();
  p.send(wire::encode_frame(Op::kGet, Status::kOk, 1,
                            wire::encode(wire::WaitRequest{"before", 1000})));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kNotAuthenticated);
  CHECK_THAT(reason, Catch::Contains("sent GET before authenticating"));
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a peer that never authenticates is cut off at the deadline",
                 "[rejection]") {
  RawPeer p(ts.port());
  p.read_hello();
  auto start = Clock::now();
  auto [status, reason] = p.expect_reject();
  CHECK(Clock::now() - start >= 400ms);
  CHECK(status == Status::kAuthTimeout);
  CHECK_THAT(reason, Catch::Contains("did not authenticate within 500 ms"));
  expect_one_rejection("did not authenticate");
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a malformed payload after authentication is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  // A SET whose key length runs past the end of the payload.
  p.send(wire::encode_frame(Op::kSet, Status::kOk, 3, wire::Writer().u32(100).take()));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadFrame);
  CHECK_THAT(reason, Catch::Contains("malformed SET payload"));
  expect_good_client_fine();
}

TEST_CASE_METHOD(Fixture, "a request carrying a status is rejected", "[rejection]") {
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  p.send(wire::encode_frame(Op::kDel, Status::kTimeout, 3, wire::encode(wire::DelRequest{"k"})));
  auto [status, reason] = p.expect_reject();
  CHECK(status == Status::kBadFrame);
  CHECK_THAT(reason, Catch::Contains("requests carry 0"));
  expect_good_client_fine();
}

TEST_CASE("a header alone does not make the server allocate its declared payload",
          "[rejection][memory]") {
  auto o = server_options(2);
  o.max_frame_bytes = 64u << 20;
  TestServer ts(o);
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  // Declares 60 MiB, sends 100 bytes of it and stops.
  p.send_header(wire::kVersion, static_cast<std::uint8_t>(Op::kSet), 60u << 20);
  p.send(Bytes(100, 0x55));
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.receive_buffer_bytes >= 100; }));
  CHECK(ts.stats().receive_buffer_bytes < (1u << 20));
}

TEST_CASE("a payload that arrives in pieces is assembled whole", "[rejection][memory]") {
  TestServer ts(server_options(2));
  RawPeer p(ts.port());
  p.authenticate(1, 2, ts.options().secret);
  const std::string key = "big";
  Bytes value(300000);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::uint8_t>(i * 7);
  Bytes frame =
      wire::encode_frame(Op::kSet, Status::kOk, 9, wire::encode(wire::SetRequest{key, value}));
  for (std::size_t at = 0; at < frame.size(); at += 70000) {
    p.send(Bytes(frame.begin() + at, frame.begin() + std::min(frame.size(), at + 70000)));
  }
  auto ok = p.read_frame();
  REQUIRE(ok);
  CHECK(ok->header.status == Status::kOk);
  auto c = ts.connect(0);
  CHECK(c->get(key, 5s) == value);
}

TEST_CASE("a frame limit of 4 GiB or more is refused by server and client", "[rejection]") {
  auto o = server_options(1);
  o.max_frame_bytes = std::size_t{4} << 30;
  CHECK_THROWS_WITH(TestServer(o), Catch::Contains("below 4 GiB"));
  TestServer ts(server_options(1));
  auto co = ts.client_options(0);
  co.max_frame_bytes = std::size_t{4} << 30;
  CHECK_THROWS_WITH(Client::connect(co), Catch::Contains("below 4 GiB"));
}
