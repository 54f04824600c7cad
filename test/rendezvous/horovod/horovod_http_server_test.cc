// Horovod's HTTP rendezvous served over real sockets on 127.0.0.1: clients that speak exactly
// what Horovod's worker sends (horovod_http_client.h) form the three contexts and a process set
// concurrently; broken requests are refused while the others are served.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

#include "rendezvous/horovod/http_server.h"
#include "test/rendezvous/horovod/horovod_http_client.h"
#include "test/rendezvous/horovod/horovod_plans.h"
#include "test/support/server_thread.h"

using namespace hora::rdv::horovod;
using namespace hora::rdv::horovod::test;
using namespace std::chrono_literals;

namespace {

// HttpServer on its own io thread (test/support/server_thread.h), with what it reported.
class TestHttpServer {
 public:
  explicit TestHttpServer(ScopePlan plan, HttpServerOptions options = {})
      : served_([&](boost::asio::io_context& io) {
          HttpServerEvents ev;
          ev.on_rejected = [this](const std::string& peer, const std::string& reason) {
            std::lock_guard<std::mutex> lock(mu_);
            rejected_.push_back(peer + ": " + reason);
          };
          ev.on_rank_seen = [this](int rank, const std::string&) {
            std::lock_guard<std::mutex> lock(mu_);
            seen_.push_back(rank);
          };
          return std::make_unique<HttpServer>(io, std::move(plan), options, std::move(ev));
        }) {}

  std::uint16_t port() const { return served_.server().port(); }
  HorovodHttpClient client() const { return HorovodHttpClient("127.0.0.1", port(), 20s); }
  std::vector<std::string> rejected() {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }
  std::vector<int> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  bool closed(const std::string& scope) {
    return served_.on_io([&] { return served_.server().store().closed(scope); });
  }

 private:
  std::mutex mu_;
  std::vector<std::string> rejected_;
  std::vector<int> seen_;
  hora::test::ServerThread<HttpServer> served_;  // last: stopped before what its events fill
};

// What Horovod's GlooContext::Initialize + InitializeForProcessSet do for one rank, with the
// layout of plan_of(hosts, per_host), in re-initialisation `round`. Returns the number of 404s
// seen while polling.
int horovod_worker(const HorovodHttpClient& c, int rank, int hosts, int per_host, int round) {
  const int host = rank / per_host;
  const int local = rank % per_host;
  const std::string me = "addr-of-" + std::to_string(rank);
  int not_found = 0;
  auto all = c.rendezvous("global", rank, hosts * per_host, me, &not_found, round);
  for (int r = 0; r < hosts * per_host; ++r) {
    if (all[static_cast<std::size_t>(r)] != "addr-of-" + std::to_string(r)) {
      throw std::runtime_error("global: wrong value for rank " + std::to_string(r));
    }
  }
  c.rendezvous("local_h" + std::to_string(host), local, per_host, me, &not_found, round);
  c.rendezvous("cross_" + std::to_string(local), host, hosts, me, &not_found, round);
  // The global process set, which Horovod registers at init: same ranks, hashed scope names.
  const std::string suffix = "_process_set_hash_7d48533536350577";
  c.rendezvous("global" + suffix, rank, hosts * per_host, me, &not_found, round);
  c.rendezvous("local_h" + std::to_string(host) + suffix, local, per_host, me, &not_found, round);
  c.rendezvous("cross_" + std::to_string(local) + suffix, host, hosts, me, &not_found, round);
  return not_found;
}

void run_job(TestHttpServer& ts, int hosts, int per_host, int round = 0) {
  const int size = hosts * per_host;
  std::vector<std::future<int>> workers;
  for (int r = 0; r < size; ++r) {
    workers.push_back(std::async(std::launch::async, [&ts, r, hosts, per_host, round] {
      return horovod_worker(ts.client(), r, hosts, per_host, round);
    }));
  }
  // Whether a worker polled past a 404 depends on how the threads were scheduled, so it is not
  // asserted here; the polling path is pinned by "a GET before the PUT is answered 404" below.
  for (auto& w : workers) w.get();
}

}  // namespace

TEST_CASE("ranks form global, local, cross and process-set contexts as Horovod's workers do") {
  auto [hosts, per_host] = GENERATE(table<int, int>({{1, 1}, {1, 2}, {1, 4}, {2, 2}, {3, 1}}));
  CAPTURE(hosts, per_host);
  TestHttpServer ts(plan_of(hosts, per_host));
  run_job(ts, hosts, per_host);
  CHECK(ts.rejected().empty());
  CHECK(ts.closed("global"));
  CHECK(ts.closed("local_h0"));
  CHECK(ts.closed("cross_0"));
  auto seen = ts.seen();
  std::sort(seen.begin(), seen.end());
  std::vector<int> all(static_cast<std::size_t>(hosts * per_host));
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
  // hvd.shutdown(); hvd.init() (an elastic reset): the same scopes rendezvous again, from empty.
  CHECK(ts.client().get("global", "0").status == 404);
  run_job(ts, hosts, per_host, 1);
  CHECK(ts.rejected().empty());
  CHECK(ts.closed("global"));
  CHECK(ts.closed("local_h0"));
  CHECK(ts.closed("cross_0"));
  // hvd.elastic.run's notification service, one key per slot.
  CHECK(ts.client().put("worker_addresses", "h0:0", "gASV").status == 200);
  CHECK(ts.client().get("worker_addresses", "h0:0").body == "gASV");
  CHECK(ts.client().get("rank_and_size", "h0:0").body == "0," + std::to_string(hosts * per_host) +
                                                             ",0," + std::to_string(per_host) +
                                                             ",0," + std::to_string(hosts));
}

TEST_CASE("the reply to a GET carries the stored bytes, binary included") {
  TestHttpServer ts(plan_of(1, 2));
  const std::string bytes("\0\x01\xff\r\n\r\nzz", 9);
  CHECK(ts.client().put("global", "0", bytes).status == 200);
  const HttpReply r = ts.client().get("global", "0");
  CHECK(r.status == 200);
  CHECK(r.body == bytes);
  CHECK(ts.client().get("global", "1").status == 404);
}

TEST_CASE("broken requests are refused and the job's clients are still served") {
  TestHttpServer ts(plan_of(1, 2));
  const HorovodHttpClient c = ts.client();
  REQUIRE(c.put("global", "0", "before").status == 200);

  SECTION("a body over the limit is answered 413 and not stored") {
    // The header announces 10 MiB; the server answers after the header, before the body.
    auto r =
        c.raw("PUT /global/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10485760\r\n\r\nxx");
    REQUIRE(r);
    CHECK(r->status == 413);
    CHECK(c.get("global", "1").status == 404);
  }
  SECTION("a scope outside the plan is answered 403") {
    auto r = c.put("local_somewhere_else", "0", "x");
    CHECK(r.status == 403);
    CHECK_THAT(r.body, Catch::Contains("local_somewhere_else"));
  }
  SECTION("a malformed request line is answered 400") {
    auto r = c.raw("this is not http\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  SECTION("an unknown method is answered 405") {
    auto r = c.raw("POST /global/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 405);
  }
  SECTION("a connection that sends half a request and goes away") {
    std::string why;
    auto fd = hora::rdv::net::connect_tcp("127.0.0.1", ts.port(), hora::rdv::net::Clock::now() + 5s,
                                          &why);
    REQUIRE(fd);
    const std::string half = "PUT /global/1 HTTP/1.1\r\nContent-Le";
    REQUIRE(hora::rdv::net::write_all(fd.get(),
                                      std::span(reinterpret_cast<const std::uint8_t*>(half.data()),
                                                half.size()),
                                      hora::rdv::net::Clock::now() + 5s));
  }
  CHECK(c.get("global", "0").body == "before");
  // Both ranks of the job still rendezvous.
  auto a = std::async(std::launch::async, [&] { return c.rendezvous("local_h0", 0, 2, "a"); });
  auto b = c.rendezvous("local_h0", 1, 2, "b");
  CHECK(a.get() == std::vector<std::string>{"a", "b"});
  CHECK(b == std::vector<std::string>{"a", "b"});
}

TEST_CASE("an idle connection is closed after io_timeout; others are served meanwhile") {
  HttpServerOptions o;
  o.io_timeout = 300ms;
  TestHttpServer ts(plan_of(1, 1), o);
  std::string why;
  auto idle =
      hora::rdv::net::connect_tcp("127.0.0.1", ts.port(), hora::rdv::net::Clock::now() + 5s, &why);
  REQUIRE(idle);
  CHECK(ts.client().put("global", "0", "x").status == 200);
  std::uint8_t byte = 0;
  const auto r = hora::rdv::net::read_exact(idle.get(), std::span(&byte, 1),
                                            hora::rdv::net::Clock::now() + 10s);
  CHECK(r.status == hora::rdv::net::IoStatus::kEof);
}

TEST_CASE("connections beyond the limit are closed at once") {
  HttpServerOptions o;
  o.max_connections = 1;
  TestHttpServer ts(plan_of(1, 1), o);
  std::string why;
  auto first =
      hora::rdv::net::connect_tcp("127.0.0.1", ts.port(), hora::rdv::net::Clock::now() + 5s, &why);
  REQUIRE(first);
  // The second is refused (closed without a reply) while the first is open.
  CHECK_FALSE(ts.client().raw("GET /global/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  first = hora::UniqueFd();
  // Once the first is gone, a new one is served (the server notices the close first).
  for (int i = 0; i < 500; ++i) {
    auto r = ts.client().raw("GET /global/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    if (r) {
      CHECK(r->status == 404);
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  FAIL("no connection served after the first closed");
}

TEST_CASE("the listening socket and accepted connections are close-on-exec") {
  TestHttpServer ts(plan_of(1, 1));
  std::string why;
  auto client =
      hora::rdv::net::connect_tcp("127.0.0.1", ts.port(), hora::rdv::net::Clock::now() + 5s, &why);
  REQUIRE(client);
  // The server side of that connection exists once a request has been answered on it.
  const std::string get = "GET /global/0 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  REQUIRE(ts.client().raw(get));
  // Every descriptor of this process whose local port is the server's: the listener and the
  // server's end of each connection (a client's local port is never the server's).
  int found = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
    if (ss.ss_family != AF_INET) continue;
    if (ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port) != ts.port()) continue;
    INFO("descriptor " << fd);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    ++found;
  }
  CHECK(found >= 2);  // the listener and the open client's connection
}

TEST_CASE("a GET before the PUT is answered 404, and the value once it is there") {
  TestHttpServer ts(plan_of(1, 2));
  const HttpReply before = ts.client().get("global", "1");
  CHECK(before.status == 404);
  CHECK(ts.client().put("global", "1", "addr-of-1").status == 200);
  const HttpReply after = ts.client().get("global", "1");
  CHECK(after.status == 200);
  CHECK(after.body == "addr-of-1");
}

TEST_CASE("a connection from another user's socket is closed before a byte is read") {
  // The server is told the job's user is someone else, so this process's own
  // connections are another user's.
  HttpServerOptions o;
  o.owner_uid = ::geteuid() + 1;
  TestHttpServer ts(plan_of(1, 2), o);
  for (int i = 0; i < 20; ++i) {
    CHECK_FALSE(
        ts.client().raw("PUT /global/rank_0 HTTP/1.1\r\nHost: x\r\nContent-Length: "
                        "1\r\n\r\nx"));
  }
  CHECK(ts.seen().empty());
  const auto rejected = ts.rejected();
  // Rate-limited: the first in full, the other 19 only counted (one call per host and kind).
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0],
             Catch::Contains(
                 fmt::format("the connecting socket belongs to uid {}, not to the job's user "
                             "(uid {})",
                             ::geteuid(), ::geteuid() + 1)));
}
