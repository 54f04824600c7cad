// The notification client (rendezvous/horovod/notify.h) against a fake worker service on
// 127.0.0.1 that frames and checks messages as Horovod's BasicService does: one io_context,
// the client and the fake on it, each test bounded by io.run_for. horovod_pickle_real_test.py
// checks the same client against Horovod's own WorkerNotificationService.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <numeric>
#include <optional>

#include "rendezvous/hmac.h"
#include "rendezvous/horovod/notify.h"

using namespace hora::rdv::horovod;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using Key = std::array<std::uint8_t, 32>;

Key key_of(std::uint8_t first) {
  Key k;
  std::iota(k.begin(), k.end(), first);
  return k;
}

// cloudpickle.dumps(horovod.runner.common.util.network.AckResponse(), protocol=5).
const std::string kAck(
    "\x80\x05\x95\x39\x00\x00\x00\x00\x00\x00\x00\x8c\x22horovod.runner.common.util.network\x94"
    "\x8c\x0b"
    "AckResponse\x94\x93\x94)\x81\x94.",
    68);

std::string frame(const Key& key, const std::string& body) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(body.data());
  const hora::rdv::Digest d = hora::rdv::hmac_sha256(key, std::span(p, body.size()));
  std::string out(reinterpret_cast<const char*>(d.data()), d.size());
  const auto n = static_cast<std::uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xffu);
  return out + body;
}

// A worker's notification service: reads one framed request per connection and checks its HMAC
// with `key`, then answers as `mode` says.
class FakeWorker {
 public:
  enum class Mode { kAck, kWrongKey, kOtherReply, kSilent };

  FakeWorker(asio::io_context& io, Key key, Mode mode)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        key_(key),
        mode_(mode) {
    accept();
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int connections = 0;
  std::vector<std::string> bodies;  // requests whose HMAC matched
  int bad_hmac = 0;

 private:
  struct Conn {
    tcp::socket socket;
    std::array<std::uint8_t, 36> header{};
    std::string body;
    std::string reply;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      ++connections;
      auto c = std::make_shared<Conn>(Conn{std::move(s), {}, {}, {}});
      asio::async_read(c->socket, asio::buffer(c->header),
                       [this, c](boost::system::error_code e, std::size_t) {
                         if (!e) read_body(c);
                       });
      accept();
    });
  }

  void read_body(std::shared_ptr<Conn> c) {
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(c->header[32 + i]) << (8 * i);
    c->body.assign(n, '\0');
    asio::async_read(c->socket, asio::buffer(c->body),
                     [this, c](boost::system::error_code e, std::size_t) {
                       if (e) return;
                       const std::string expected = frame(key_, c->body).substr(0, 32);
                       if (std::memcmp(expected.data(), c->header.data(), 32) == 0) {
                         bodies.push_back(c->body);
                       } else {
                         ++bad_hmac;
                       }
                       answer(c);
                     });
  }

  void answer(std::shared_ptr<Conn> c) {
    switch (mode_) {
      case Mode::kAck: c->reply = frame(key_, kAck); break;
      case Mode::kWrongKey: c->reply = frame(key_of(99), kAck); break;
      case Mode::kOtherReply: c->reply = frame(key_, "not an acknowledgement"); break;
      case Mode::kSilent: held_.push_back(c); return;  // keeps the connection open, says nothing
    }
    asio::async_write(c->socket, asio::buffer(c->reply),
                      [c](boost::system::error_code, std::size_t) {
                        boost::system::error_code ignored;
                        c->socket.close(ignored);
                      });
  }

  tcp::acceptor acceptor_;
  Key key_;
  Mode mode_;
  std::vector<std::shared_ptr<Conn>> held_;
};

// A port nothing listens on: bound, then closed.
std::uint16_t closed_port(asio::io_context& io) {
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::uint16_t p = a.local_endpoint().port();
  a.close();
  return p;
}

struct Run {
  asio::io_context io;
  std::optional<NotifyResult> result;
  int calls = 0;

  NotifyDone done() {
    return [this](const NotifyResult& r) {
      ++calls;
      result = r;
      io.stop();
    };
  }
  NotifyResult wait() {
    io.run_for(20s);
    REQUIRE(result);
    return *result;
  }
};

WorkerEndpoint local(std::uint16_t port) { return {"lo", "127.0.0.1", port}; }

NotifyOptions quick() {
  NotifyOptions o;
  o.retry_delay = 10ms;
  return o;
}

}  // namespace

TEST_CASE("HostsUpdatedRequest reaches the worker framed with its key; its AckResponse is read") {
  Run run;
  FakeWorker w(run.io, key_of(1), FakeWorker::Mode::kAck);
  notify_hosts_updated(run.io, {local(w.port())}, key_of(1), 1800000000, HostUpdate::kAdded,
                       quick(), run.done());
  const NotifyResult r = run.wait();
  CHECK(r.ok);
  CHECK(r.error.empty());
  CHECK(r.endpoint == "127.0.0.1:" + std::to_string(w.port()));
  CHECK(r.reply == kAck);
  CHECK(w.bad_hmac == 0);
  REQUIRE(w.bodies.size() == 1);
  CHECK(w.bodies[0] == hosts_updated_pickle(1800000000, HostUpdate::kAdded));
  CHECK(run.calls == 1);
}

TEST_CASE("an address that refuses is skipped for the next one") {
  Run run;
  FakeWorker w(run.io, key_of(1), FakeWorker::Mode::kAck);
  const std::uint16_t dead = closed_port(run.io);
  notify_hosts_updated(run.io, {{"eth0", "127.0.0.1", dead}, local(w.port())}, key_of(1), 7,
                       HostUpdate::kRemoved, quick(), run.done());
  const NotifyResult r = run.wait();
  CHECK(r.ok);
  CHECK(r.endpoint == "127.0.0.1:" + std::to_string(w.port()));
  CHECK(w.bodies.size() == 1);
}

TEST_CASE("a reply whose HMAC does not match fails after every attempt, naming address and step") {
  Run run;
  FakeWorker w(run.io, key_of(1), FakeWorker::Mode::kWrongKey);
  notify_hosts_updated(run.io, {local(w.port())}, key_of(1), 7, HostUpdate::kAdded, quick(),
                       run.done());
  const NotifyResult r = run.wait();
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("failed at every address (3 attempts)") &&
                          Contains("127.0.0.1:" + std::to_string(w.port()) +
                                   " (lo): check the reply: its HMAC does not match"));
  CHECK(w.connections == 3);
  CHECK(w.bodies.size() == 3);  // the request itself was right each time
}

TEST_CASE(
    "a reply other than AckResponse fails; send_to_worker returns any reply; another key is "
    "refused") {
  Run run;
  FakeWorker w(run.io, key_of(2), FakeWorker::Mode::kOtherReply);
  NotifyOptions o = quick();
  o.attempts = 1;
  notify_hosts_updated(run.io, {local(w.port())}, key_of(2), 7, HostUpdate::kAdded, o, run.done());
  const NotifyResult r = run.wait();
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("(1 attempt)") &&
                          Contains("answered something other than AckResponse (22 bytes)"));
  // send_to_worker does not look into the reply: the same answer is returned.
  Run raw;
  FakeWorker w2(raw.io, key_of(2), FakeWorker::Mode::kOtherReply);
  send_to_worker(raw.io, {local(w2.port())}, key_of(2), "ping", o, raw.done());
  const NotifyResult r2 = raw.wait();
  CHECK(r2.ok);
  CHECK(r2.reply == "not an acknowledgement");
  CHECK(w2.bodies == std::vector<std::string>{"ping"});
  // A worker with another key sees a request whose HMAC does not match (and answers nothing
  // that the client would accept).
  Run other;
  FakeWorker w3(other.io, key_of(3), FakeWorker::Mode::kWrongKey);
  send_to_worker(other.io, {local(w3.port())}, key_of(2), "ping", o, other.done());
  CHECK_FALSE(other.wait().ok);
  CHECK(w3.bad_hmac == 1);
}

TEST_CASE("a silent worker is given up after the I/O timeout, or the overall deadline") {
  Run run;
  FakeWorker w(run.io, key_of(1), FakeWorker::Mode::kSilent);
  NotifyOptions o = quick();
  o.attempts = 2;
  o.io_timeout = 100ms;
  notify_hosts_updated(run.io, {local(w.port())}, key_of(1), 7, HostUpdate::kAdded, o, run.done());
  const NotifyResult r = run.wait();
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("(2 attempts)") &&
                          Contains("(lo): read the reply's header: no progress within 100 ms"));
  CHECK(w.connections == 2);

  Run late;
  FakeWorker w2(late.io, key_of(1), FakeWorker::Mode::kSilent);
  NotifyOptions d = quick();
  d.deadline = 100ms;
  notify_hosts_updated(late.io, {local(w2.port())}, key_of(1), 7, HostUpdate::kAdded, d,
                       late.done());
  const NotifyResult r2 = late.wait();
  CHECK_FALSE(r2.ok);
  CHECK_THAT(r2.error, Contains("read the reply's header: the deadline of 100 ms for the whole "
                                "notification passed"));
}

TEST_CASE("no address fails through done, never from inside the call; cancel() silences done") {
  Run run;
  notify_hosts_updated(run.io, {}, key_of(1), 7, HostUpdate::kAdded, quick(), run.done());
  CHECK(run.calls == 0);
  const NotifyResult r = run.wait();
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Contains("listed no address"));

  Run cancelled;
  FakeWorker w(cancelled.io, key_of(1), FakeWorker::Mode::kSilent);
  auto n = notify_hosts_updated(cancelled.io, {local(w.port())}, key_of(1), 7, HostUpdate::kAdded,
                                quick(), cancelled.done());
  // Run until the fake worker has the request, then cancel: nothing may call done.
  for (int i = 0; i < 2000 && w.bodies.empty(); ++i) cancelled.io.run_for(10ms);
  REQUIRE(w.bodies.size() == 1);
  n->cancel();
  cancelled.io.run_for(200ms);
  CHECK(cancelled.calls == 0);
}

TEST_CASE("order_endpoints: the known address first, loopback only for a worker on this machine") {
  const std::vector<WorkerEndpoint> worker{{"lo", "127.0.0.1", 5},
                                           {"eth0", "10.0.0.2", 5},
                                           {"eth1", "198.18.0.3", 5},
                                           {"lo6", "::1", 5}};
  CHECK(order_endpoints(worker, "198.18.0.3", false) ==
        std::vector<WorkerEndpoint>{worker[2], worker[1]});
  CHECK(order_endpoints(worker, "198.18.0.3", true) ==
        std::vector<WorkerEndpoint>{worker[2], worker[1], worker[0], worker[3]});
  CHECK(order_endpoints(worker, "", true) ==
        std::vector<WorkerEndpoint>{worker[1], worker[2], worker[0], worker[3]});
  CHECK(order_endpoints(worker, "127.0.0.1", false) ==
        std::vector<WorkerEndpoint>{worker[0], worker[1], worker[2]});
}
