// The client's connection life: connect retries and their error, abort delivery, goodbye vs drop.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>

#include "test/rendezvous/harness.h"

using namespace hora::rdv;
using namespace hora::rdv::test;

namespace {

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A TCP port on 127.0.0.1 that is bound but not listening: connecting to it is refused, and no
// one else can take it while this object lives.
class ReservedPort {
 public:
  ReservedPort() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::runtime_error("bind failed");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  std::uint16_t port() const { return port_; }
  void release() { fd_ = hora::UniqueFd(); }

 private:
  hora::UniqueFd fd_;
  std::uint16_t port_ = 0;
};

// Collects abort-handler calls; tests wait on it with a deadline.
struct AbortLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> reasons;
  std::vector<std::thread::id> threads;

  std::function<void(const std::string&)> handler() {
    return [this](const std::string& reason) {
      std::lock_guard<std::mutex> lock(mu);
      reasons.push_back(reason);
      threads.push_back(std::this_thread::get_id());
      cv.notify_all();
    };
  }
  bool wait_for_calls(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return reasons.size() >= n; });
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return reasons.size();
  }
};

}  // namespace

TEST_CASE("connecting to a port nobody serves fails with every attempt accounted for", "[client]") {
  ReservedPort port;
  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port.port();
  o.rank = 3;
  o.size = 4;
  o.connect_timeout = 400ms;
  auto start = Clock::now();
  try {
    Client::connect(o);
    FAIL("connect succeeded");
  } catch (const ConnectError& e) {
    std::string m = e.what();
    INFO(m);
    CHECK_THAT(m, Catch::StartsWith("rank 3: could not reach the rendezvous server at 127.0.0.1:" +
                                    std::to_string(port.port()) + " within 400 ms after "));
    CHECK_THAT(m, Catch::Contains(" attempts: connect: Connection refused (check HORA_RENDEZVOUS"));
  }
  auto took = Clock::now() - start;
  CHECK(took >= 400ms);
  CHECK(took < 30s);  // gave up after connect_timeout instead of retrying on
}

TEST_CASE("an unresolvable host name is reported as such", "[client]") {
  ClientOptions o;
  o.host = "no-such-host.invalid";
  o.port = 1;
  o.connect_timeout = 100ms;
  CHECK_THROWS_MATCHES(Client::connect(o), ConnectError,
                       Catch::Matchers::Predicate<ConnectError>(
                           [](const ConnectError& e) {
                             return std::string(e.what()).find("getaddrinfo") != std::string::npos;
                           },
                           "mentions getaddrinfo"));
}

TEST_CASE("bad options are refused before connecting", "[client]") {
  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = 1;
  o.rank = 4;
  o.size = 4;
  CHECK_THROWS_WITH(Client::connect(o), Catch::Contains("rank 4 of 4 is not a valid rank"));
  o.rank = 0;
  o.port = 0;
  CHECK_THROWS_WITH(Client::connect(o), Catch::Contains("HORA_RENDEZVOUS must be host:port"));
}

TEST_CASE("connect keeps retrying until the server comes up", "[client]") {
  ReservedPort port;
  auto options = server_options(1);
  options.port = port.port();
  ClientOptions o;
  o.host = "127.0.0.1";
  o.port = port.port();
  o.secret = options.secret;
  o.connect_timeout = 20s;
  auto connecting = std::async(std::launch::async, [&] { return Client::connect(o); });
  // The client has been refused at least once before the server exists.
  CHECK(connecting.wait_for(200ms) == std::future_status::timeout);
  port.release();
  TestServer ts(options);
  REQUIRE(connecting.wait_for(10s) == std::future_status::ready);
  auto c = connecting.get();
  c->set("k", bytes_of("v"), 5s);
  CHECK(c->get("k", 5s) == bytes_of("v"));
  CHECK(c->server() == "127.0.0.1:" + std::to_string(port.port()));
  CHECK(c->rank() == 0);
}

TEST_CASE("abort_all reaches every client and fails blocked and later calls", "[client]") {
  TestServer ts(server_options(3));
  std::vector<std::unique_ptr<Client>> clients;
  AbortLog logs[3];
  for (int r = 0; r < 3; ++r) {
    clients.push_back(ts.connect(r));
    clients[r]->set_abort_handler(logs[r].handler());
  }
  auto blocked = std::async(std::launch::async, [&] { return clients[1]->get("never", 30s); });
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  ts.server().abort_all("rank 2 on node7 exited with code 3");
  for (int r = 0; r < 3; ++r) {
    REQUIRE(logs[r].wait_for_calls(1));
    CHECK(logs[r].reasons[0] == "rank 2 on node7 exited with code 3");
    CHECK(logs[r].threads[0] != std::this_thread::get_id());
  }
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_MATCHES(blocked.get(), AbortedError,
                       Catch::Matchers::Message("rank 1: the launcher aborted the job: rank 2 on "
                                                "node7 exited with code 3"));
  CHECK_THROWS_AS(clients[0]->set("k", {}, 5s), AbortedError);
  CHECK_THROWS_AS(clients[2]->barrier("b", 5s), AbortedError);
  // A second abort does not call the handlers again.
  ts.server().abort_all("again");
  CHECK(ts.stats().waits == 0);
  for (auto& l : logs) CHECK(l.count() == 1);
}

TEST_CASE("a rank connecting after the abort is told right after authenticating", "[client]") {
  TestServer ts(server_options(2));
  ts.server().abort_all("rank 0 failed");
  ts.stats();  // the posted abort has run
  auto c = ts.connect(1);
  AbortLog log;
  c->set_abort_handler(log.handler());
  REQUIRE(log.wait_for_calls(1));
  CHECK(log.reasons[0] == "rank 0 failed");
  CHECK_THROWS_WITH(c->get("x", 5s), Catch::Contains("rank 0 failed"));
}

TEST_CASE("requests answered ABORTED when they race with the abort", "[client]") {
  // A raw peer sees the server's side: after the abort, requests get status ABORTED.
  TestServer ts(server_options(1));
  RawPeer p(ts.port());
  p.authenticate(0, 1, ts.options().secret);
  ts.server().abort_all("stop now");
  auto abort = p.read_frame();
  REQUIRE(abort);
  CHECK(abort->header.op == wire::Op::kAbort);
  CHECK(wire::decode_message(abort->payload) == "stop now");
  p.send(wire::encode_frame(wire::Op::kSet, wire::Status::kOk, 9,
                            wire::encode(wire::SetRequest{"k", {}})));
  auto answer = p.read_frame();
  REQUIRE(answer);
  CHECK(answer->header.request_id == 9);
  CHECK(answer->header.status == wire::Status::kAborted);
  CHECK(ts.stats().keys == 0);
}

TEST_CASE("goodbye is a clean disconnect, a drop is not", "[client]") {
  TestServer ts(server_options(2));
  auto a = ts.connect(0);
  auto b = ts.connect(1);
  AbortLog log;
  a->set_abort_handler(log.handler());
  a->goodbye();
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.disconnected.size() == 1; }));
  auto first = ts.recorded().disconnected[0];
  CHECK(std::get<0>(first) == 0);
  CHECK(std::get<1>(first));
  CHECK_THROWS_WITH(a->get("k", 1s), Catch::Contains("was closed"));
  CHECK(log.count() == 0);  // leaving on purpose is not an abort

  b.reset();  // destroyed without goodbye
  REQUIRE(ts.wait_events([](const Recorded& r) { return r.disconnected.size() == 2; }));
  auto second = ts.recorded().disconnected[1];
  CHECK(std::get<0>(second) == 1);
  CHECK_FALSE(std::get<1>(second));
  CHECK_THAT(std::get<2>(second), Catch::Contains("without goodbye"));

  // A rank that said goodbye may connect again (e.g. init after shutdown).
  auto again = ts.connect(0);
  again->set("k", bytes_of("v"), 5s);
}

TEST_CASE("the server going away calls the abort handler and fails calls", "[client]") {
  auto ts = std::make_unique<TestServer>(server_options(1));
  auto c = ts->connect(0);
  AbortLog log;
  c->set_abort_handler(log.handler());
  auto blocked = std::async(std::launch::async, [&] { return c->get("never", 30s); });
  REQUIRE(ts->wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  ts.reset();
  REQUIRE(log.wait_for_calls(1));
  CHECK_THAT(log.reasons[0], Catch::Contains("rank 0: lost the connection to the rendezvous "
                                             "server 127.0.0.1:"));
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(blocked.get(), AbortedError);
  CHECK_THROWS_AS(c->set("k", {}, 1s), AbortedError);
  c->goodbye();  // harmless on a dead connection
}

TEST_CASE("concurrent requests on one client are matched to their answers", "[client]") {
  TestServer ts(server_options(1));
  auto c = ts.connect(0);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        c->set(key, bytes_of(key), 5s);
        if (c->get(key, 5s) != bytes_of(key)) wrong++;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(ts.stats().keys == 400);
}

namespace {

// Collects reset-handler calls (elastic jobs); tests wait on it with a deadline.
struct ResetLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<wire::Reset> resets;

  std::function<void(const wire::Reset&)> handler() {
    return [this](const wire::Reset& r) {
      std::lock_guard<std::mutex> lock(mu);
      resets.push_back(r);
      cv.notify_all();
    };
  }
  bool wait_for_calls(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return resets.size() >= n; });
  }
};

wire::Reset reset_for(std::uint32_t round, bool interrupt, int rank, int size) {
  wire::Reset r;
  r.round = round;
  r.interrupt = interrupt;
  r.rank = rank;
  r.size = size;
  r.local_rank = rank;
  r.local_size = size;
  r.cross_rank = 0;
  r.cross_size = 1;
  r.rendezvous = "127.0.0.1:4242";
  return r;
}

}  // namespace

TEST_CASE("RESET without interrupt reaches the handler and the connection goes on", "[client]") {
  TestServer ts(server_options(2));
  auto c0 = ts.connect(0);
  auto c1 = ts.connect(1);
  ResetLog log;
  AbortLog aborts;
  c1->set_reset_handler(log.handler());
  c1->set_abort_handler(aborts.handler());
  ts.server().reset_rank(1, reset_for(1, false, 2, 4));
  REQUIRE(log.wait_for_calls(1));
  CHECK(log.resets[0] == reset_for(1, false, 2, 4));
  // Not interrupted: requests still work and no abort was called.
  c1->set("k", bytes_of("v"), 5s);
  CHECK(c0->get("k", 5s) == bytes_of("v"));
  CHECK(aborts.count() == 0);
  // An older round than one already announced is not sent again.
  ts.server().reset_rank(1, reset_for(0, false, 0, 2));
  ts.stats();
  c1->set("k2", bytes_of("w"), 5s);
  {
    std::lock_guard<std::mutex> lock(log.mu);
    CHECK(log.resets.size() == 1);
  }
}

TEST_CASE("RESET with interrupt fails calls as an abort does, naming the round", "[client]") {
  TestServer ts(server_options(2));
  auto c0 = ts.connect(0);
  ResetLog log;
  AbortLog aborts;
  c0->set_reset_handler(log.handler());
  c0->set_abort_handler(aborts.handler());
  auto blocked = std::async(std::launch::async, [&] { return c0->get("never", 30s); });
  REQUIRE(ts.wait_stats([](const Server::Stats& s) { return s.waits == 1; }));
  ts.server().reset_rank(0, reset_for(3, true, 0, 1));
  REQUIRE(log.wait_for_calls(1));
  REQUIRE(aborts.wait_for_calls(1));
  CHECK_THAT(aborts.reasons[0], Catch::Contains("round 3"));
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_WITH(blocked.get(), Catch::Contains("resetting the job to round 3"));
}

TEST_CASE("a rank authenticating after a RESET gets it right away, even before a handler",
          "[client]") {
  TestServer ts(server_options(2));
  ts.server().reset_rank(1, reset_for(5, false, 0, 3));
  ts.stats();  // the posted reset has run
  auto c1 = ts.connect(1);
  // Read before the handler was set: kept and handed over when it is.
  ResetLog log;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    c1->set_reset_handler(log.handler());
    if (log.wait_for_calls(1, 50ms)) break;
  }
  REQUIRE(log.wait_for_calls(1));
  CHECK(log.resets[0].round == 5);
  CHECK(log.resets[0].size == 3);
}
