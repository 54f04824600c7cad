// Horovod's HTTP rendezvous in an elastic job (docs/rendezvous.md, "Elastic jobs"): the store's
// round swap and deferred rank_and_size without sockets, then the server over real sockets on
// 127.0.0.1 with clients that send what Horovod's worker sends (horovod_http_client.h): held
// GETs answered when the launcher releases them, "-1,..." for a removed slot (never 404), the
// hooks, and stop() with requests held.
#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "rendezvous/horovod/http_server.h"
#include "rendezvous/horovod/pickle.h"
#include "test/rendezvous/horovod/horovod_http_client.h"
#include "test/rendezvous/horovod/horovod_plans.h"
#include "test/support/server_thread.h"

using namespace hora::rdv::horovod;
using namespace hora::rdv::horovod::test;
using namespace std::chrono_literals;

namespace {

const std::string kRemoved = "-1,-1,-1,-1,-1,-1";

// What the server reported, under a lock; wait() blocks on a condition with a deadline.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> asked;                              // on_rank_and_size slots
  std::vector<std::pair<std::string, std::string>> addresses;  // on_worker_addresses
  std::vector<int> seen;                                       // on_rank_seen

  template <typename Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 10s, [&] { return pred(*this); });
  }
};

// An elastic server on its own io thread (test/support/server_thread.h); `on_asked` runs on that
// thread for every held GET.
class ElasticServer {
 public:
  explicit ElasticServer(ScopePlan plan, bool elastic = true,
                         std::chrono::milliseconds io_timeout = 30s,
                         std::function<void(HttpServer&, const std::string&)> on_asked = {})
      : served_([&](boost::asio::io_context& io) {
          HttpServerOptions o;
          o.elastic = elastic;
          o.io_timeout = io_timeout;
          HttpServerEvents ev;
          ev.on_rank_and_size = [this, on_asked](const std::string& slot, const std::string&) {
            note([&] { events_.asked.push_back(slot); });
            if (on_asked) on_asked(served_.server(), slot);
          };
          ev.on_worker_addresses = [this](const std::string& slot, const std::string& body,
                                          const std::string&) {
            note([&] { events_.addresses.emplace_back(slot, body); });
          };
          ev.on_rank_seen = [this](int rank, const std::string&) {
            note([&] { events_.seen.push_back(rank); });
          };
          return std::make_unique<HttpServer>(io, std::move(plan), o, std::move(ev));
        }) {}

  HorovodHttpClient client() const {
    return HorovodHttpClient("127.0.0.1", served_.server().port(), 20s);
  }
  Events& events() { return events_; }

  template <typename F>
  auto on_io(F f) -> decltype(f(std::declval<HttpServer&>())) {
    return served_.on_io([&] { return f(served_.server()); });
  }

 private:
  template <typename F>
  void note(F f) {
    {
      std::lock_guard<std::mutex> lock(events_.mu);
      f();
    }
    events_.cv.notify_all();
  }

  Events events_;
  hora::test::ServerThread<HttpServer> served_;  // last: stopped before what its events fill
};

// GET /rank_and_size/<slot> on a thread of its own (it may be held).
std::future<std::optional<HttpReply>> ask(const HorovodHttpClient& c, const std::string& slot) {
  return std::async(std::launch::async, [c, slot] {
    return c.raw("GET /rank_and_size/" + slot +
                 " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  });
}

std::string answer(std::future<std::optional<HttpReply>>& f) {
  REQUIRE(f.wait_for(20s) == std::future_status::ready);
  const std::optional<HttpReply> r = f.get();
  REQUIRE(r);
  CHECK(r->status == 200);
  return r->body;
}

std::size_t asked(ElasticServer& s, std::size_t n) {
  REQUIRE(s.events().wait([n](Events& e) { return e.asked.size() >= n; }));
  return n;
}

}  // namespace

TEST_CASE("store: elastic rank_and_size of a plan slot is deferred; others are -1 at once") {
  Store s(plan_of(2, 2));
  // Fixed jobs: answered at once, as before.
  CHECK(s.handle(Method::kGet, "/rank_and_size/h1:0", "").body == "2,4,0,2,1,2");
  s.set_elastic(true);
  const Reply held = s.handle(Method::kGet, "/rank_and_size/h1:0", "");
  CHECK(held.deferred_slot == "h1:0");
  CHECK(held.body.empty());
  const Reply gone = s.handle(Method::kGet, "/rank_and_size/h7:0", "");
  CHECK(gone.deferred_slot.empty());
  CHECK(gone.status == 200);
  CHECK(gone.body == kRemoved);
  CHECK(s.rank_and_size_reply("h1:1").body == "3,4,1,2,1,2");
  CHECK(s.rank_and_size_reply("h2:0").body == kRemoved);
  // Writes stay refused.
  CHECK(s.handle(Method::kPut, "/rank_and_size/h1:0", "x").status == 403);
}

TEST_CASE("store: begin_round swaps the plan and clears every scope, as Horovod's init(plan)") {
  Store s(plan_of(2, 1));
  REQUIRE(s.handle(Method::kPut, "/global/0", "a").status == 200);
  REQUIRE(s.handle(Method::kPut, "/local_h0/0", "a").status == 200);
  REQUIRE(s.handle(Method::kDelete, "/local_h0/0", "").status == 200);
  REQUIRE(s.handle(Method::kPut, "/worker_addresses/h1:0", "b").status == 200);
  REQUIRE(s.closed("local_h0"));
  REQUIRE(s.global_ranks_seen() == std::set<int>{0});
  const std::size_t small_limit = s.max_body_bytes();
  s.begin_round(plan_of(3, 2));  // grow: 2 ranks -> 6
  CHECK(s.round() == 1);
  CHECK(s.stats().keys == 0);
  CHECK_FALSE(s.closed("local_h0"));
  CHECK(s.global_ranks_seen().empty());
  CHECK(s.handle(Method::kGet, "/global/0", "").status == 404);
  CHECK(s.plan().world_size == 6);
  CHECK(s.max_body_bytes() > small_limit);  // follows the plan's size
  CHECK(s.handle(Method::kPut, "/local_h2/1", "c").status == 200);
  CHECK(s.handle(Method::kPut, "/cross_1/2", "c").status == 200);
  CHECK(s.handle(Method::kGet, "/rank_and_size/h2:1", "").body == "5,6,1,2,2,3");
  s.begin_round(plan_of(1, 1));  // shrink to h0 alone
  CHECK(s.handle(Method::kPut, "/local_h2/1", "c").status == 403);
  CHECK(s.handle(Method::kPut, "/worker_addresses/h1:0", "b").status == 403);
  CHECK(s.handle(Method::kGet, "/rank_and_size/h1:0", "").body == kRemoved);
  // A limit given by the caller stays.
  StoreLimits fixed;
  fixed.max_body_bytes = 1000;
  Store t(plan_of(1, 1), fixed);
  t.begin_round(plan_of(4, 4));
  CHECK(t.max_body_bytes() == 1000);
}

TEST_CASE("a held rank_and_size GET is answered on release, from the plan current then") {
  ElasticServer s(plan_of(1, 2));
  auto c = s.client();
  auto f = ask(c, "h0:1");
  asked(s, 1);
  CHECK(f.wait_for(0s) == std::future_status::timeout);  // held, not answered
  CHECK(s.on_io([](HttpServer& h) { return h.held_rank_and_size(); }) ==
        std::vector<std::string>{"h0:1"});
  // The next round: h1 joins with two ranks; h0:1 keeps rank 1 of 4, cross size 2.
  s.on_io([](HttpServer& h) {
    h.begin_round(plan_of(2, 2));
    return 0;
  });
  CHECK(f.wait_for(0s) == std::future_status::timeout);  // still held: h0:1 is in the plan
  CHECK(s.on_io([](HttpServer& h) { return h.release_round(); }) == 1);
  CHECK(answer(f) == "1,4,1,2,0,2");
  CHECK(s.on_io([](HttpServer& h) { return h.held_rank_and_size(); }).empty());
}

TEST_CASE("release_rank_and_size answers one slot's requests; others stay held") {
  ElasticServer s(plan_of(2, 1));
  auto c = s.client();
  auto a = ask(c, "h0:0");
  auto b = ask(c, "h1:0");
  auto a2 = ask(c, "h0:0");  // the same slot asked twice: both answered
  asked(s, 3);
  CHECK(s.on_io([](HttpServer& h) { return h.release_rank_and_size("h0:0"); }) == 2);
  CHECK(answer(a) == "0,2,0,1,0,2");
  CHECK(answer(a2) == "0,2,0,1,0,2");
  CHECK(b.wait_for(0s) == std::future_status::timeout);
  CHECK(s.on_io([](HttpServer& h) { return h.release_rank_and_size("h0:0"); }) == 0);
  CHECK(s.on_io([](HttpServer& h) { return h.release_rank_and_size("h1:0"); }) == 1);
  CHECK(answer(b) == "1,2,0,1,1,2");
}

TEST_CASE("a removed slot hears -1 at once: at its GET, or when begin_round drops it") {
  ElasticServer s(plan_of(2, 1));
  auto c = s.client();
  // Not in the plan: answered at once, never 404, not reported as asked.
  const HttpReply r = c.get("rank_and_size", "h5:0");
  CHECK(r.status == 200);
  CHECK(r.body == kRemoved);
  auto gone = ask(c, "h1:0");
  auto kept = ask(c, "h0:0");
  asked(s, 2);
  s.on_io([](HttpServer& h) {
    h.begin_round(plan_of(1, 1));  // h1 is gone
    return 0;
  });
  CHECK(answer(gone) == kRemoved);
  CHECK(kept.wait_for(0s) == std::future_status::timeout);
  CHECK(s.on_io([](HttpServer& h) { return h.held_rank_and_size(); }) ==
        std::vector<std::string>{"h0:0"});
  s.on_io([](HttpServer& h) { return h.release_round(); });
  CHECK(answer(kept) == "0,1,0,1,0,1");
  std::vector<std::string> held = s.events().asked;  // the two asked concurrently: any order
  std::sort(held.begin(), held.end());
  CHECK(held == std::vector<std::string>{"h0:0", "h1:0"});
}

TEST_CASE("a held request outlives io_timeout; a hook may answer at once") {
  ElasticServer s(plan_of(1, 1), true, 100ms);
  auto c = s.client();
  auto f = ask(c, "h0:0");
  asked(s, 1);
  // Several io_timeouts pass while the request is held: the connection must still be there.
  std::this_thread::sleep_for(500ms);
  s.on_io([](HttpServer& h) { return h.release_round(); });
  CHECK(answer(f) == "0,1,0,1,0,1");

  ElasticServer now(plan_of(1, 2), true, 30s,
                    [](HttpServer& h, const std::string& slot) { h.release_rank_and_size(slot); });
  const HttpReply r = now.client().get("rank_and_size", "h0:1");
  CHECK(r.status == 200);
  CHECK(r.body == "1,2,1,2,0,1");
}

TEST_CASE("stop() closes held requests: the worker sees the connection end, no reply") {
  ElasticServer s(plan_of(1, 1));
  auto f = ask(s.client(), "h0:0");
  asked(s, 1);
  s.on_io([](HttpServer& h) {
    h.stop();
    return 0;
  });
  REQUIRE(f.wait_for(20s) == std::future_status::ready);
  CHECK_FALSE(f.get());
  CHECK(s.on_io([](HttpServer& h) { return h.held_rank_and_size(); }).empty());
  CHECK(s.on_io([](HttpServer& h) { return h.release_round(); }) == 0);
}

TEST_CASE("on_worker_addresses gets a stored body; on_rank_seen reports each round again") {
  ElasticServer s(plan_of(2, 1));
  auto c = s.client();
  // A body as hvd.elastic.run sends it (base64 of cloudpickle of ({'lo': [('127.0.0.1',
  // 40123)], 'eth0': [('10.0.0.2', 40123), ('10.0.0.3', 1)]}, bytes(range(32))))).
  const std::string body =
      "gAWVbQAAAAAAAAB9lCiMAmxvlF2UjAkxMjcuMC4wLjGUTbuchpRhjARldGgwlF2UKIwIMTAuMC4wLjKUTbuchpSMCDEw"
      "LjAuMC4zlEsBhpRldUMgAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+UhpQu";
  CHECK(c.put("worker_addresses", "h1:0", body).status == 200);
  CHECK(c.put("worker_addresses", "h9:0", body).status == 403);  // not a slot: not reported
  REQUIRE(s.events().wait([](Events& e) { return !e.addresses.empty(); }));
  CHECK(s.events().addresses.size() == 1);
  CHECK(s.events().addresses[0].first == "h1:0");
  CHECK(parse_worker_addresses(s.events().addresses[0].second).endpoints.size() == 3);

  CHECK(c.put("global", "0", "addr").status == 200);
  REQUIRE(s.events().wait([](Events& e) { return e.seen.size() == 1; }));
  s.on_io([](HttpServer& h) {
    h.begin_round(plan_of(2, 1));
    return 0;
  });
  CHECK(c.get("global", "0").status == 404);  // the store was cleared
  CHECK(c.put("global", "0", "addr").status == 200);
  REQUIRE(s.events().wait([](Events& e) { return e.seen.size() == 2; }));
  CHECK(s.events().seen == std::vector<int>{0, 0});
}

TEST_CASE("without elastic, rank_and_size is answered at once and nothing is held") {
  ElasticServer s(plan_of(2, 1), false);
  const HttpReply r = s.client().get("rank_and_size", "h1:0");
  CHECK(r.status == 200);
  CHECK(r.body == "1,2,0,1,1,2");
  CHECK(s.events().asked.empty());
  CHECK(s.on_io([](HttpServer& h) { return h.held_rank_and_size(); }).empty());
}
