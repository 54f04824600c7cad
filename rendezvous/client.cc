// The blocking rendezvous client.
//
// Threads: any number of caller threads issue requests; one reader thread owns the receive
// side. A caller registers a Pending under a fresh request id (mu_), writes its frame
// (write_mu_, so frames never interleave), then sleeps on cv_ until the reader fills its Pending,
// the connection fails, or its deadline passes. The reader thread is the only one that reads
// the socket; it also turns ABORT frames and unexpected drops into the failed state and calls
// the abort handler (outside the lock).
//
// States: kOpen -> kFailed (ABORT received, connection lost, protocol error: calls throw
// AbortedError) or kClosed (goodbye() or destruction: calls throw Error). Closing sets leaving_
// first, so the end of stream that follows is not mistaken for a failure.
#include "rendezvous/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "rendezvous/format.h"
#include "rendezvous/gather_call.h"
#include "rendezvous/hmac.h"
#include "rendezvous/log.h"
#include "rendezvous/socket.h"
#include "rendezvous/wire.h"

namespace hora::rdv {

static_assert(ClientOptions::kDefaultMaxFrameBytes == wire::kDefaultMaxFrameBytes);

namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::Status;
using namespace std::chrono_literals;

// Beyond a request's own timeout (which the server enforces and reports), how long we wait for
// the server's answer before concluding the server itself is stuck.
constexpr std::chrono::milliseconds kAnswerGrace = 5s;
// Once the first byte of a frame has arrived, the rest must follow within this.
constexpr auto kFrameTimeout = 30s;
// A connection failure lasting this long is logged as a warning (once).
constexpr std::chrono::seconds kWarnAfter{2};
// The handshake may run past connect_timeout by at most this much (a slow but live server).
constexpr auto kHandshakeMin = 5s;
// Backoff between connection attempts.
constexpr std::chrono::milliseconds kFirstBackoff = 50ms;
constexpr std::chrono::milliseconds kMaxBackoff = 1s;

std::string quoted(const char* what, const std::string& name) {
  return fmt::format("{} '{}'", what, name);
}

class ClientImpl final : public Client {
 public:
  ClientImpl(const ClientOptions& options, UniqueFd fd, std::string server)
      : opts_(options), fd_(std::move(fd)), server_(std::move(server)) {
    reader_ = std::thread([this] { reader_loop(); });
  }

  ~ClientImpl() override { close_connection(); }

  Bytes call(Op op, const Bytes& payload, std::chrono::milliseconds timeout,
             const std::string& what);
  void goodbye(bool at_exit);
  void set_abort_handler(std::function<void(const std::string&)> handler);
  void set_reset_handler(std::function<void(const wire::Reset&)> handler);

  const ClientOptions opts_;
  const UniqueFd fd_;
  const std::string server_;

 private:
  enum class State { kOpen, kFailed, kClosed };
  struct Pending {
    bool done = false;
    Status status = Status::kOk;
    Bytes payload;
  };

  void reader_loop();
  // Returns false when the connection cannot be used any more (and sets *failure).
  bool handle_frame(const wire::Header& h, Bytes payload, std::string* failure);
  // kOpen -> kFailed: wakes every caller and calls the handler once with handler_arg.
  void fail(std::string for_calls, std::string handler_arg);
  void throw_unusable_locked(const std::string& what) const;
  void close_connection();

  std::thread reader_;
  std::mutex write_mu_;  // one frame on the wire at a time

  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kOpen;
  bool leaving_ = false;       // goodbye()/destructor in progress: end of stream is expected
  std::string failure_;        // what calls throw once kFailed
  std::string local_failure_;  // set by a caller that broke the stream, for the reader to report
  std::string handler_arg_;    // what the abort handler is (or will be) called with
  std::function<void(const std::string&)> handler_;
  bool handler_called_ = false;
  std::function<void(const wire::Reset&)> reset_handler_;
  std::vector<wire::Reset> early_resets_;  // RESETs read before a reset handler was set
  std::uint32_t next_id_ = 1;              // 0 is the handshake's and unsolicited frames' id
  std::map<std::uint32_t, std::shared_ptr<Pending>> pending_;
};

ClientImpl& impl(Client* c) { return *static_cast<ClientImpl*>(c); }
const ClientImpl& impl(const Client* c) { return *static_cast<const ClientImpl*>(c); }

void ClientImpl::throw_unusable_locked(const std::string& what) const {
  if (state_ == State::kFailed) throw AbortedError(failure_);
  throw Error(
      fmt::format("rank {}: cannot {}: the connection to the rendezvous server {} was "
                  "closed (goodbye() was called or the client is being destroyed)",
                  opts_.rank, what, server_));
}

Bytes ClientImpl::call(Op op, const Bytes& payload, std::chrono::milliseconds timeout,
                       const std::string& what) {
  if (timeout.count() < 0) timeout = 0ms;
  auto deadline = Clock::now() + timeout + kAnswerGrace;
  if (payload.size() + wire::kHeaderBytes > opts_.max_frame_bytes) {
    throw ProtocolError(
        fmt::format("rank {}: {} is {} bytes, over the rendezvous frame limit of {} bytes "
                    "(max_frame_bytes)",
                    opts_.rank, what, payload.size() + wire::kHeaderBytes, opts_.max_frame_bytes));
  }
  auto p = std::make_shared<Pending>();
  std::uint32_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kOpen || (leaving_ && op != Op::kGoodbye)) throw_unusable_locked(what);
    id = next_id_++;
    if (next_id_ == 0) next_id_ = 1;
    pending_[id] = p;
  }
  auto frame = wire::encode_frame(op, Status::kOk, id, payload);
  net::IoResult written;
  {
    std::lock_guard<std::mutex> wlock(write_mu_);
    written = net::write_all(fd_.get(), frame, deadline);
    if (!written) {
      // Part of the frame may be on the wire, so the stream is unusable: break it and let the
      // reader thread report the loss (it calls the abort handler).
      std::lock_guard<std::mutex> lock(mu_);
      if (local_failure_.empty()) {
        local_failure_ = fmt::format("rank {}: sending {} to the rendezvous server {} failed: {}",
                                     opts_.rank, what, server_, written.why);
      }
      ::shutdown(fd_.get(), SHUT_RDWR);
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!written) {
    pending_.erase(id);
    if (state_ == State::kFailed) throw AbortedError(failure_);
    if (written.status == net::IoStatus::kTimeout) {
      throw TimeoutError(
          fmt::format("rank {}: could not send {} to the rendezvous server {} "
                      "within {} (the server is not reading)",
                      opts_.rank, what, server_, format_duration(timeout + kAnswerGrace)));
    }
    throw AbortedError(local_failure_);
  }
  cv_.wait_until(lock, deadline, [&] { return p->done || state_ != State::kOpen; });
  pending_.erase(id);
  if (!p->done) {
    if (state_ != State::kOpen) throw_unusable_locked(what);
    throw TimeoutError(
        fmt::format("rank {}: no answer from the rendezvous server {} to {} "
                    "within {}",
                    opts_.rank, server_, what, format_duration(timeout + kAnswerGrace)));
  }
  lock.unlock();
  if (p->status == Status::kOk) return std::move(p->payload);
  std::string msg;
  try {
    msg = wire::decode_message(p->payload);
  } catch (const wire::DecodeError& e) {
    msg = fmt::format("(unreadable message: {})", e.what());
  }
  switch (p->status) {
    case Status::kTimeout: throw TimeoutError(msg);
    case Status::kAborted:
      throw AbortedError(fmt::format("rank {}: the launcher aborted the job: {}", opts_.rank, msg));
    case Status::kInvalid:
      throw Error(fmt::format("rank {}: rendezvous server {} refused {}: {}", opts_.rank, server_,
                              what, msg));
    default:
      throw ProtocolError(
          fmt::format("rank {}: rendezvous server {} answered {} with status {}: "
                      "{}",
                      opts_.rank, server_, what, wire::status_name(p->status), msg));
  }
}

void ClientImpl::reader_loop() {
  std::string failure;
  for (;;) {
    std::array<std::uint8_t, wire::kHeaderBytes> hb{};
    // Between frames the connection may idle for as long as the job runs: the first byte has
    // no deadline (a shutdown() from close_connection() wakes us); the rest of the frame does.
    auto r = net::read_exact(fd_.get(), std::span(hb).first(1), std::nullopt);
    if (r) r = net::read_exact(fd_.get(), std::span(hb).subspan(1), Clock::now() + kFrameTimeout);
    if (!r) {
      failure =
          r.status == net::IoStatus::kEof ? std::string("the server closed the connection") : r.why;
      break;
    }
    wire::Header h;
    std::string why;
    Status st = wire::decode_header(std::span<const std::uint8_t, wire::kHeaderBytes>(hb),
                                    opts_.max_frame_bytes, &h, &why);
    if (st != Status::kOk) {
      failure = "protocol error: " + why;
      break;
    }
    Bytes payload(h.payload_bytes);
    if (!payload.empty()) {
      r = net::read_exact(fd_.get(), payload, Clock::now() + kFrameTimeout);
      if (!r) {
        failure = fmt::format("while reading a {}-byte {} frame: {}", payload.size(),
                              wire::op_name(h.op), r.why);
        break;
      }
    }
    if (!handle_frame(h, std::move(payload), &failure)) break;
  }

  std::string local;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_) {
      state_ = State::kClosed;
      cv_.notify_all();
      return;
    }
    local = local_failure_;
  }
  std::string reason = !local.empty() ? local
                                      : fmt::format(
                                            "rank {}: lost the connection to the rendezvous server "
                                            "{}: {} (did horarun exit?)",
                                            opts_.rank, server_, failure);
  fail(reason, reason);
}

bool ClientImpl::handle_frame(const wire::Header& h, Bytes payload, std::string* failure) {
  switch (h.op) {
    case Op::kAbort: {
      std::string reason;
      try {
        reason = wire::decode_message(payload);
      } catch (const wire::DecodeError& e) {
        reason = fmt::format("(unreadable reason: {})", e.what());
      }
      logger()->warn("rank {}: the launcher aborted the job: {}", opts_.rank, reason);
      fail(fmt::format("rank {}: the launcher aborted the job: {}", opts_.rank, reason), reason);
      // Keep reading: the connection stays up until the launcher or we close it.
      return true;
    }
    case Op::kReset: {
      wire::Reset reset;
      try {
        reset = wire::decode_reset(payload);
      } catch (const wire::DecodeError& e) {
        *failure = fmt::format("the server sent a malformed RESET: {}", e.what());
        return false;
      }
      std::function<void(const wire::Reset&)> handler;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (reset_handler_) {
          handler = reset_handler_;
        } else {
          early_resets_.push_back(reset);
        }
      }
      if (handler) handler(reset);
      if (reset.interrupt) {
        const std::string reason = fmt::format(
            "the launcher is resetting the job to round {} (a worker was lost; elastic mode)",
            reset.round);
        logger()->info("rank {}: {}", opts_.rank, reason);
        fail(fmt::format("rank {}: {}", opts_.rank, reason), reason);
      }
      return true;  // the connection stays up until the launcher or we close it
    }
    case Op::kReject: {
      std::string msg;
      try {
        msg = wire::decode_message(payload);
      } catch (const wire::DecodeError& e) {
        msg = fmt::format("(unreadable reason: {})", e.what());
      }
      *failure = fmt::format("the server rejected this connection ({}): {}",
                             wire::status_name(h.status), msg);
      return false;
    }
    case Op::kHello:
    case Op::kAuth:
      *failure = fmt::format("protocol error: unexpected {} frame after the handshake",
                             wire::op_name(h.op));
      return false;
    default: break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(h.request_id);
  if (it == pending_.end()) {
    // The caller gave up (its own deadline passed) before the answer came: nothing to do.
    logger()->debug("rank {}: late {} answer for request {} ignored", opts_.rank,
                    wire::op_name(h.op), h.request_id);
    return true;
  }
  it->second->done = true;
  it->second->status = h.status;
  it->second->payload = std::move(payload);
  cv_.notify_all();
  return true;
}

void ClientImpl::fail(std::string for_calls, std::string handler_arg) {
  std::function<void(const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kOpen) return;
    state_ = State::kFailed;
    failure_ = std::move(for_calls);
    handler_arg_ = std::move(handler_arg);
    if (handler_ && !handler_called_) {
      handler_called_ = true;
      handler = handler_;
    }
    cv_.notify_all();
  }
  if (handler) handler(handler_arg_);  // handler_arg_ is not written again once kFailed
}

void ClientImpl::set_abort_handler(std::function<void(const std::string&)> handler) {
  std::function<void(const std::string&)> call_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(handler);
    if (state_ == State::kFailed && !handler_called_ && handler_) {
      handler_called_ = true;
      call_now = handler_;
    }
  }
  if (call_now) call_now(handler_arg_);
}

void ClientImpl::set_reset_handler(std::function<void(const wire::Reset&)> handler) {
  std::vector<wire::Reset> early;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reset_handler_ = handler;
    early.swap(early_resets_);
  }
  if (handler) {
    for (const wire::Reset& r : early) handler(r);
  }
}

void ClientImpl::goodbye(bool at_exit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leaving_) return;
    leaving_ = true;
  }
  bool said = false;
  try {
    call(Op::kGoodbye, at_exit ? Bytes{wire::kGoodbyeAtExit} : Bytes{}, 0ms, "goodbye");
    said = true;
  } catch (const Error& e) {
    // Leaving is best effort: if the server is gone or the job aborted, the rank leaves anyway
    // and the launcher sees a drop instead of a goodbye.
    logger()->debug("rank {}: goodbye to {} not acknowledged: {}", opts_.rank, server_, e.what());
  }
  close_connection();
  logger()->debug("rank {}: left the rendezvous server {}{}", opts_.rank, server_,
                  said ? "" : " (without acknowledgement)");
}

void ClientImpl::close_connection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    leaving_ = true;
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kOpen) state_ = State::kClosed;
  cv_.notify_all();
}

// The handshake on a fresh connection. Returns true when authenticated, false (with *why) when
// worth retrying; throws AuthError/ProtocolError when retrying cannot help.
bool handshake(int fd, const ClientOptions& o, const std::string& server,
               Clock::time_point deadline, std::string* why) {
  std::array<std::uint8_t, wire::kHeaderBytes> hb{};
  wire::Header h;
  std::string bad;
  auto read_frame = [&](const char* step, Bytes* payload) -> bool {
    auto r = net::read_exact(fd, hb, deadline);
    if (!r) {
      *why = fmt::format("{}: {}", step,
                         r.status == net::IoStatus::kEof
                             ? std::string("the server closed the connection")
                             : r.why);
      return false;
    }
    Status st = wire::decode_header(std::span<const std::uint8_t, wire::kHeaderBytes>(hb),
                                    o.max_frame_bytes, &h, &bad);
    if (st != Status::kOk) {
      throw ProtocolError(fmt::format("rank {}: {} does not speak hora's rendezvous protocol: {}",
                                      o.rank, server, bad));
    }
    payload->resize(h.payload_bytes);
    r = net::read_exact(fd, *payload, deadline);
    if (!r) {
      *why = fmt::format("{}: {}", step, r.why);
      return false;
    }
    return true;
  };

  Bytes payload;
  if (!read_frame("waiting for HELLO", &payload)) return false;
  if (h.op != Op::kHello) {
    throw ProtocolError(
        fmt::format("rank {}: {} opened with {} instead of HELLO; is that port "
                    "the rendezvous server (HORA_RENDEZVOUS)?",
                    o.rank, server, wire::op_name(h.op)));
  }
  wire::Hello hello;
  try {
    hello = wire::decode_hello(payload);
  } catch (const wire::DecodeError& e) {
    throw ProtocolError(
        fmt::format("rank {}: malformed HELLO from {}: {}", o.rank, server, e.what()));
  }
  wire::AuthRequest auth{o.rank, o.size, auth_proof(o.secret, hello.nonce, o.rank)};
  auto frame = wire::encode_frame(Op::kAuth, Status::kOk, 0, wire::encode(auth));
  if (auto r = net::write_all(fd, frame, deadline); !r) {
    *why = fmt::format("sending AUTH: {}", r.why);
    return false;
  }
  if (!read_frame("waiting for the AUTH answer", &payload)) return false;
  if (h.op == Op::kReject) {
    std::string msg;
    try {
      msg = wire::decode_message(payload);
    } catch (const wire::DecodeError& e) {
      msg = fmt::format("(unreadable reason: {})", e.what());
    }
    throw AuthError(fmt::format("rank {}: the rendezvous server {} refused this rank ({}): {}",
                                o.rank, server, wire::status_name(h.status), msg));
  }
  if (h.op != Op::kAuth || h.status != Status::kOk || !payload.empty()) {
    throw ProtocolError(fmt::format("rank {}: {} answered AUTH with {} (status {})", o.rank, server,
                                    wire::op_name(h.op), wire::status_name(h.status)));
  }
  return true;
}

}  // namespace

std::unique_ptr<Client> Client::connect(const ClientOptions& o) {
  std::string server = format_endpoint(o.host, o.port);
  if (o.host.empty() || o.port == 0) {
    throw Error(
        fmt::format("rank {}: no rendezvous server address (got '{}'); HORA_RENDEZVOUS "
                    "must be host:port",
                    o.rank, server));
  }
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    throw Error(
        fmt::format("rank {} of {} is not a valid rank (HORA_RANK, HORA_SIZE)", o.rank, o.size));
  }
  if (o.max_frame_bytes < wire::kMinMaxFrameBytes || o.max_frame_bytes > wire::kMaxMaxFrameBytes) {
    throw Error(
        fmt::format("rendezvous client: max_frame_bytes must be from {} to {} (below 4 GiB), "
                    "got {}",
                    wire::kMinMaxFrameBytes, wire::kMaxMaxFrameBytes, o.max_frame_bytes));
  }
  const auto started = Clock::now();
  auto deadline = started + o.connect_timeout;
  // horarun starts the server before any rank, so a failure that lasts is worth a warning the
  // user sees while the rank keeps trying (an address this host cannot route to, a firewall),
  // rather than only the final error at the deadline.
  bool warned = false;
  // Each distinct reason with how often it happened, in order of first appearance.
  std::vector<std::pair<std::string, int>> reasons;
  int attempts = 0;
  auto backoff = kFirstBackoff;
  for (;;) {
    ++attempts;
    std::string why;
    UniqueFd fd = net::connect_tcp(o.host, o.port, deadline, &why);
    if (fd &&
        handshake(fd.get(), o, server, std::max(deadline, Clock::now() + kHandshakeMin), &why)) {
      logger()->debug("rank {}: connected to the rendezvous server {} after {} attempt{}", o.rank,
                      server, attempts, attempts == 1 ? "" : "s");
      return std::unique_ptr<Client>(new ClientImpl(o, std::move(fd), server));
    }
    auto it =
        std::find_if(reasons.begin(), reasons.end(), [&](const auto& p) { return p.first == why; });
    if (it == reasons.end()) {
      // Log each new reason once; repeats would flood the log while horarun is starting.
      logger()->debug("rank {}: rendezvous server {} not reachable yet ({}); retrying for up to {}",
                      o.rank, server, why, format_duration(o.connect_timeout));
      reasons.emplace_back(why, 1);
    } else {
      ++it->second;
    }
    auto now = Clock::now();
    if (!warned && now - started >= kWarnAfter && now < deadline) {
      warned = true;
      logger()->warn("rank {}: cannot reach the rendezvous server at {} ({}); still trying for {}",
                     o.rank, server, why,
                     format_duration(
                         std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
    }
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  std::string detail;
  for (const auto& [why, n] : reasons) {
    if (!detail.empty()) detail += "; ";
    detail += reasons.size() == 1 ? why : fmt::format("{} ({}x)", why, n);
  }
  throw ConnectError(
      fmt::format("rank {}: could not reach the rendezvous server at {} within {} "
                  "after {} attempt{}: {} (check HORA_RENDEZVOUS and that horarun "
                  "is still running)",
                  o.rank, server, format_duration(o.connect_timeout), attempts,
                  attempts == 1 ? "" : "s", detail));
}

Client::~Client() = default;

void Client::set(const std::string& key, const Bytes& value, std::chrono::milliseconds timeout) {
  impl(this).call(Op::kSet, wire::encode(wire::SetRequest{key, value}), timeout,
                  quoted("set", key));
}

Bytes Client::get(const std::string& key, std::chrono::milliseconds timeout) {
  auto what = quoted("get", key);
  auto payload = impl(this).call(
      Op::kGet, wire::encode(wire::WaitRequest{key, static_cast<std::uint64_t>(timeout.count())}),
      timeout, what);
  try {
    return wire::decode_bytes(payload);
  } catch (const wire::DecodeError& e) {
    throw ProtocolError(fmt::format("rank {}: malformed answer to {} from {}: {}", rank(), what,
                                    server(), e.what()));
  }
}

std::int64_t Client::add(const std::string& key, std::int64_t delta,
                         std::chrono::milliseconds timeout) {
  auto what = quoted("add to", key);
  auto payload =
      impl(this).call(Op::kAdd, wire::encode(wire::AddRequest{key, delta}), timeout, what);
  try {
    return wire::decode_i64(payload);
  } catch (const wire::DecodeError& e) {
    throw ProtocolError(fmt::format("rank {}: malformed answer to {} from {}: {}", rank(), what,
                                    server(), e.what()));
  }
}

void Client::del(const std::string& key, std::chrono::milliseconds timeout) {
  impl(this).call(Op::kDel, wire::encode(wire::DelRequest{key}), timeout, quoted("delete", key));
}

void Client::barrier(const std::string& name, std::chrono::milliseconds timeout) {
  impl(this).call(Op::kBarrier,
                  wire::encode(
                      wire::WaitRequest{name, static_cast<std::uint64_t>(timeout.count())}),
                  timeout, quoted("barrier", name));
}

std::vector<Bytes> Client::exchange(const std::string& name, const std::vector<Bytes>& slices,
                                    std::chrono::milliseconds timeout) {
  auto what = quoted("exchange", name);
  const int size = impl(this).opts_.size;
  if (static_cast<int>(slices.size()) != size) {
    throw Error(fmt::format("rank {}: {} needs one slice per rank ({}), got {}", rank(), what, size,
                            slices.size()));
  }
  auto payload =
      impl(this).call(Op::kExchange,
                      wire::encode_exchange(name, static_cast<std::uint64_t>(timeout.count()),
                                            slices),
                      timeout, what);
  std::vector<Bytes> column;
  try {
    column = wire::decode_slices(payload);
  } catch (const wire::DecodeError& e) {
    throw ProtocolError(fmt::format("rank {}: malformed answer to {} from {}: {}", rank(), what,
                                    server(), e.what()));
  }
  if (static_cast<int>(column.size()) != size) {
    throw ProtocolError(fmt::format("rank {}: {} returned {} slices for a job of {} ranks", rank(),
                                    what, column.size(), size));
  }
  return column;
}

GatherResult Client::gather(const std::string& name, std::span<const std::uint8_t> record,
                            std::size_t width, std::span<const std::uint8_t> slices,
                            std::chrono::milliseconds timeout) {
  const int size = impl(this).opts_.size;
  auto payload =
      impl(this).call(Op::kGather,
                      encode_gather_call(rank(), size, name, record, width, slices, timeout),
                      timeout, quoted("gather", name));
  return decode_gather_answer(rank(), size, name, server(), width, std::move(payload));
}

void Client::goodbye(bool at_exit) { impl(this).goodbye(at_exit); }

void Client::set_abort_handler(std::function<void(const std::string& reason)> handler) {
  impl(this).set_abort_handler(std::move(handler));
}

void Client::set_reset_handler(std::function<void(const wire::Reset& reset)> handler) {
  impl(this).set_reset_handler(std::move(handler));
}

int Client::rank() const { return impl(this).opts_.rank; }
const std::string& Client::server() const { return impl(this).server_; }

}  // namespace hora::rdv
