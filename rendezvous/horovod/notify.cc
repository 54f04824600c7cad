#include "rendezvous/horovod/notify.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <optional>

#include "rendezvous/hmac.h"

namespace hora::rdv::horovod {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderBytes = 32 + 4;  // HMAC-SHA256 || int32 length

std::string name_of(const WorkerEndpoint& e) {
  const bool v6 = e.address.find(':') != std::string::npos;
  return v6 ? fmt::format("[{}]:{}", e.address, e.port) : fmt::format("{}:{}", e.address, e.port);
}

std::string ms(std::chrono::milliseconds d) { return fmt::format("{} ms", d.count()); }

class Sender : public Notification, public std::enable_shared_from_this<Sender> {
 public:
  Sender(asio::io_context& io, std::vector<WorkerEndpoint> endpoints,
         const std::array<std::uint8_t, 32>& key, std::string body, NotifyOptions options,
         NotifyDone done, std::string_view expect_in_reply)
      : io_(io),
        endpoints_(std::move(endpoints)),
        key_(key),
        options_(options),
        done_(std::move(done)),
        expect_(expect_in_reply),
        socket_(io),
        step_timer_(io),
        deadline_timer_(io),
        failures_(endpoints_.size()) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(body.data());
    const Digest digest = hmac_sha256(key_, std::span(p, body.size()));
    request_.assign(reinterpret_cast<const char*>(digest.data()), digest.size());
    const auto n = static_cast<std::uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) request_ += static_cast<char>((n >> (8 * i)) & 0xffu);
    request_ += body;
  }

  void start() {
    if (endpoints_.empty()) {
      return asio::post(io_, [self = shared_from_this()] {
        self->finish_error("the worker listed no address for its notification service");
      });
    }
    deadline_timer_.expires_after(options_.deadline);
    deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->finished_) return;
      const std::string why = fmt::format("the deadline of {} for the whole notification passed",
                                          ms(self->options_.deadline));
      if (self->waiting_retry_) {
        self->finish_all(why);
      } else {
        self->fail_step(why);
        self->finish_all("");
      }
    });
    asio::post(io_, [self = shared_from_this()] { self->try_current(); });
  }

  void cancel() override {
    if (finished_) return;
    finished_ = true;
    stop_io();
    deadline_timer_.cancel();
  }

 private:
  const WorkerEndpoint& current() const { return endpoints_[index_]; }

  // The current address failed at the current step; remember why.
  void fail_step(const std::string& why) {
    if (index_ < failures_.size()) {
      failures_[index_] =
          fmt::format("{} ({}): {}: {}", name_of(current()), current().interface, step_, why);
    }
  }

  void stop_io() {
    error_code ec;
    socket_.close(ec);
    step_timer_.cancel();
  }

  // Bounds the step now started; closing the socket makes its handler see operation_aborted.
  void arm_step(std::chrono::milliseconds limit) {
    ++step_id_;
    step_timer_.expires_after(limit);
    step_timer_.async_wait([self = shared_from_this(), id = step_id_, limit](error_code ec) {
      if (ec || self->finished_ || id != self->step_id_) return;
      self->timed_out_ = true;
      self->timed_out_after_ = limit;
      error_code ignored;
      self->socket_.close(ignored);
    });
  }

  // The handler of a step: true when it may go on; otherwise the failure is recorded and the
  // next address (or pass) is tried.
  bool step_ok(error_code ec) {
    if (finished_) return false;
    if (!ec) return true;
    if (timed_out_) {
      fail_step(fmt::format("no progress within {}", ms(timed_out_after_)));
    } else if (ec == asio::error::eof) {
      // Horovod's service drops a request whose HMAC does not match its key without a word.
      fail_step("the worker closed the connection without a reply (is the key the one it sent?)");
    } else {
      fail_step(ec.message());
    }
    next();
    return false;
  }

  void try_current() {
    if (finished_) return;
    stop_io();
    timed_out_ = false;
    error_code ec;
    const auto address = asio::ip::make_address(current().address, ec);
    step_ = "connect";
    if (ec) {
      fail_step("not an IP address");
      return next();
    }
    socket_ = tcp::socket(io_);
    arm_step(options_.connect_timeout);
    socket_.async_connect(tcp::endpoint(address, current().port),
                          [self = shared_from_this()](error_code e) {
                            if (self->step_ok(e)) self->send();
                          });
  }

  void send() {
    step_ = "send the request";
    arm_step(options_.io_timeout);
    asio::async_write(socket_, asio::buffer(request_),
                      [self = shared_from_this()](error_code e, std::size_t) {
                        if (self->step_ok(e)) self->read_header();
                      });
  }

  void read_header() {
    step_ = "read the reply's header";
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](error_code e, std::size_t) {
                       if (self->step_ok(e)) self->read_body();
                     });
  }

  void read_body() {
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(header_[32 + i]) << (8 * i);
    step_ = "read the reply";
    if (static_cast<std::int32_t>(n) < 0 || n > options_.max_reply_bytes) {
      fail_step(fmt::format("a reply of {} bytes announced (at most {} expected)",
                            static_cast<std::int32_t>(n), options_.max_reply_bytes));
      return next();
    }
    reply_.assign(n, '\0');
    asio::async_read(socket_, asio::buffer(reply_),
                     [self = shared_from_this()](error_code e, std::size_t) {
                       if (self->step_ok(e)) self->check_reply();
                     });
  }

  void check_reply() {
    step_ = "check the reply";
    const auto* p = reinterpret_cast<const std::uint8_t*>(reply_.data());
    const Digest digest = hmac_sha256(key_, std::span(p, reply_.size()));
    if (!equal_constant_time(digest, std::span(header_.data(), 32))) {
      fail_step(
          "its HMAC does not match the worker's key (another process on that port, or the "
          "worker restarted with a new key)");
      return next();
    }
    if (!expect_.empty() && reply_.find(expect_) == std::string::npos) {
      fail_step(fmt::format("the worker answered something other than {} ({} bytes)", expect_,
                            reply_.size()));
      return next();
    }
    finished_ = true;
    stop_io();
    deadline_timer_.cancel();
    NotifyResult r;
    r.ok = true;
    r.endpoint = name_of(current());
    r.reply = std::move(reply_);
    done_(r);
  }

  void next() {
    if (finished_) return;
    stop_io();
    if (++index_ < endpoints_.size()) return try_current();
    index_ = 0;
    if (++pass_ >= options_.attempts) return finish_all("");
    ++step_id_;
    waiting_retry_ = true;
    step_timer_.expires_after(options_.retry_delay);
    step_timer_.async_wait([self = shared_from_this(), id = step_id_](error_code ec) {
      if (ec || self->finished_ || id != self->step_id_) return;
      self->waiting_retry_ = false;
      self->try_current();
    });
  }

  // `note`: why it ended early (the deadline passed between two passes), or empty.
  void finish_all(const std::string& note) {
    std::string why = note;
    for (const std::string& f : failures_) {
      if (f.empty()) continue;
      if (!why.empty()) why += "; ";
      why += f;
    }
    const int passes = std::min(pass_ + 1, options_.attempts);
    finish_error(
        fmt::format("notifying the worker's notification service failed at every "
                    "address ({} attempt{}): {}",
                    passes, passes == 1 ? "" : "s", why));
  }

  void finish_error(std::string why) {
    if (finished_) return;
    finished_ = true;
    stop_io();
    deadline_timer_.cancel();
    NotifyResult r;
    r.endpoint = endpoints_.empty() ? std::string() : name_of(current());
    r.error = std::move(why);
    done_(r);
  }

  asio::io_context& io_;
  std::vector<WorkerEndpoint> endpoints_;
  std::array<std::uint8_t, 32> key_;
  NotifyOptions options_;
  NotifyDone done_;
  std::string expect_;
  tcp::socket socket_;
  asio::steady_timer step_timer_;
  asio::steady_timer deadline_timer_;
  std::vector<std::string> failures_;  // per address: its last failure
  std::string request_;
  std::array<std::uint8_t, kHeaderBytes> header_{};
  std::string reply_;
  std::string step_ = "connect";
  std::size_t index_ = 0;
  int pass_ = 0;
  std::uint64_t step_id_ = 0;
  bool timed_out_ = false;
  std::chrono::milliseconds timed_out_after_{0};
  bool waiting_retry_ = false;
  bool finished_ = false;
};

bool is_loopback(const std::string& address) {
  error_code ec;
  const auto a = asio::ip::make_address(address, ec);
  return !ec && a.is_loopback();
}

}  // namespace

std::shared_ptr<Notification> send_to_worker(asio::io_context& io,
                                             std::vector<WorkerEndpoint> endpoints,
                                             const std::array<std::uint8_t, 32>& key,
                                             std::string body, NotifyOptions options,
                                             NotifyDone done) {
  auto s = std::make_shared<Sender>(io, std::move(endpoints), key, std::move(body), options,
                                    std::move(done), std::string_view());
  s->start();
  return s;
}

std::shared_ptr<Notification> notify_hosts_updated(asio::io_context& io,
                                                   std::vector<WorkerEndpoint> endpoints,
                                                   const std::array<std::uint8_t, 32>& key,
                                                   std::int64_t timestamp, HostUpdate res,
                                                   NotifyOptions options, NotifyDone done) {
  // horovod.runner.common.util.network.AckResponse, pickled by class name.
  auto s =
      std::make_shared<Sender>(io, std::move(endpoints), key, hosts_updated_pickle(timestamp, res),
                               options, std::move(done), "AckResponse");
  s->start();
  return s;
}

std::vector<WorkerEndpoint> order_endpoints(const std::vector<WorkerEndpoint>& endpoints,
                                            std::string_view known_address,
                                            bool worker_on_this_machine) {
  std::vector<WorkerEndpoint> out;
  for (const WorkerEndpoint& e : endpoints) {
    if (!known_address.empty() && e.address == known_address) out.push_back(e);
  }
  for (const WorkerEndpoint& e : endpoints) {
    if (e.address != known_address && !is_loopback(e.address)) out.push_back(e);
  }
  if (worker_on_this_machine) {
    for (const WorkerEndpoint& e : endpoints) {
      if (e.address != known_address && is_loopback(e.address)) out.push_back(e);
    }
  }
  return out;
}

}  // namespace hora::rdv::horovod
