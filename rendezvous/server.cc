// The rendezvous server. Everything below runs on the one io_context thread, so the state needs
// no locks; abort_all() and stop() post themselves there.
//
// Life of a connection:
//   accept -> HELLO{nonce} queued, auth deadline armed, header read started
//   AUTH ok  -> authenticated: registered under its rank, AUTH/OK (and ABORT if the job was
//               already aborted) queued, then a read loop of header -> payload -> handle
//   misbehaviour (anywhere) -> reject(): REJECT{reason} queued, the connection is "closing":
//               detached from the job, nothing more is handled, leftover input is drained
//               (so closing does not reset the peer before it reads the REJECT), and the socket
//               is closed once the peer hangs up or kRejectLinger passes.
//   GOODBYE  -> GOODBYE/OK queued, detached cleanly, then closed like a rejected connection.
//   EOF/error -> detached (on_disconnected with clean=false) and closed.
//
// Waiting requests (GET on a missing key, BARRIER, EXCHANGE) are Waits with their own timer;
// each belongs to its connection and is dropped with it. A Wait ends by being satisfied (OK), by
// its timer (TIMEOUT naming what was missing), or by its connection going away (no answer).
#include "rendezvous/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <openssl/rand.h>
#include <spdlog/logger.h>

#include "rendezvous/errors.h"
#include "rendezvous/format.h"
#include "rendezvous/hmac.h"
#include "rendezvous/log.h"
#include "rendezvous/wire.h"

namespace hora::rdv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using Bytes = wire::Bytes;
using wire::Op;
using wire::Status;
using namespace std::chrono_literals;

static_assert(ServerOptions::kDefaultMaxFrameBytes == wire::kDefaultMaxFrameBytes);

namespace {

// How long a rejected (or departing) peer gets to read our last frame and hang up before we
// close; and how much of its leftover input we read meanwhile.
constexpr auto kRejectLinger = 1s;
constexpr std::size_t kDrainLimitBytes = 1u << 20;
// Longest wait a request may ask for (protects the timer arithmetic from absurd values).
constexpr std::chrono::milliseconds kMaxWait = std::chrono::hours(24 * 7);
// Receive buffers larger than this are released after the frame has been handled.
constexpr std::size_t kKeepPayloadCapacity = 1u << 20;

struct Connection {
  Connection(tcp::socket s, asio::io_context& io)
      : socket(std::move(s)), auth_timer(io), body_timer(io), write_timer(io), linger_timer(io) {}

  std::string label() const {
    return rank >= 0 ? fmt::format("rank {} ({})", rank, peer) : peer;
  }

  tcp::socket socket;
  std::string peer;  // "ip:port"
  int rank = -1;     // set once authenticated
  bool authenticated = false;
  bool detached = false;  // no longer part of the job: waits dropped, rank unregistered
  bool closing = false;   // nothing more is handled; input is drained until close
  bool closed = false;    // socket closed, connection forgotten
  bool reading = false;   // a read is in flight
  bool awaiting_body = false;
  bool read_done = false;  // peer hung up (or read failed) while closing
  bool writing = false;
  std::size_t drained = 0;
  wire::Nonce nonce{};
  asio::steady_timer auth_timer, body_timer, write_timer, linger_timer;
  std::array<std::uint8_t, wire::kHeaderBytes> header_buf{};
  wire::Header header;
  Bytes payload;
  std::deque<Bytes> out;
  std::set<std::uint64_t> waits;  // tokens of this connection's pending Waits
};
using ConnPtr = std::shared_ptr<Connection>;

void set_keepalive(tcp::socket& s) {
  // Kernel keepalive bounds how long a vanished rank host (no FIN, no RST) goes unnoticed:
  // about idle + interval * count = 10 + 5 * 3 s. Failures only weaken detection: ignored.
  error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  s.set_option(asio::socket_base::keep_alive(true), ec);
  int fd = s.native_handle();
  int idle = 10, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

struct Server::Impl : std::enable_shared_from_this<Impl> {
  enum class WaitKind { kGet, kBarrier, kExchange };
  struct Wait {
    WaitKind kind;
    ConnPtr conn;
    std::uint32_t id;
    Op op;
    std::string name;
    std::chrono::milliseconds timeout;
    std::unique_ptr<asio::steady_timer> timer;
  };
  // A barrier or exchange lives while someone waits in it. `left` are ranks that entered and
  // then gave up (timed out or disconnected) while others still waited: timeout messages name
  // them apart from the ranks that never came.
  struct Barrier {
    std::map<int, std::uint64_t> entered;  // rank -> token
    std::set<int> left;
  };
  // A rank's row: the EXCHANGE payload as received, and views of its slices inside it (moving
  // the payload vector keeps its buffer, so the views stay valid).
  struct Upload {
    std::uint64_t token;
    Bytes payload;
    std::vector<std::span<const std::uint8_t>> slices;
  };
  struct Exchange {
    std::map<int, Upload> uploads;  // rank -> its row
    std::set<int> left;
  };

  Impl(asio::io_context& io_, ServerOptions options, ServerEvents ev)
      : io(io_), opts(std::move(options)), events(std::move(ev)), acceptor(io_),
        accept_retry(io_) {}

  asio::io_context& io;
  ServerOptions opts;
  ServerEvents events;
  std::atomic<bool> silenced{false};  // set by ~Server: no callbacks into the launcher any more
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;
  std::string address;
  std::uint16_t port = 0;
  bool stopped = false;
  std::optional<std::string> abort_reason;

  std::set<int> seen;
  std::map<int, ConnPtr> by_rank;  // authenticated, not detached
  std::set<ConnPtr> conns;         // every open connection

  std::unordered_map<std::string, Bytes> kv;
  std::uint64_t next_token = 1;
  std::unordered_map<std::uint64_t, Wait> waits;
  std::unordered_map<std::string, std::vector<std::uint64_t>> get_waiters;
  std::unordered_map<std::string, Barrier> barriers;
  std::unordered_map<std::string, Exchange> exchanges;

  // ---- start / stop -------------------------------------------------------------------------

  void start() {
    if (opts.size < 1) {
      throw Error(fmt::format("rendezvous server: job size must be at least 1, got {}", opts.size));
    }
    if (opts.max_frame_bytes < wire::kMinMaxFrameBytes) {
      throw Error(fmt::format("rendezvous server: max_frame_bytes must be at least {}, got {}",
                             wire::kMinMaxFrameBytes, opts.max_frame_bytes));
    }
    error_code ec;
    auto addr = asio::ip::make_address(opts.bind_address, ec);
    if (ec) {
      throw Error(fmt::format("could not start the rendezvous server: '{}' is not an IP address "
                              "({}); give an address of the chosen interface",
                              opts.bind_address, ec.message()));
    }
    address = addr.to_string();
    tcp::endpoint ep(addr, opts.port);
    std::string where = format_endpoint(address, opts.port);
    auto fail = [&](const char* step) {
      throw Error(fmt::format("could not start the rendezvous server on {}: {}: {}{}", where, step,
                              ec.message(),
                              opts.port != 0 ? "; choose another port, or 0 for any free port"
                                             : ""));
    };
    acceptor.open(ep.protocol(), ec);
    if (ec) fail("socket");
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    acceptor.bind(ep, ec);
    if (ec) fail("bind");
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail("listen");
    port = acceptor.local_endpoint(ec).port();
    logger()->info("rendezvous server listening on {} for {} ranks",
                   format_endpoint(address, port), opts.size);
    accept();
  }

  void do_stop() {
    if (stopped) return;
    stopped = true;
    error_code ec;
    acceptor.close(ec);
    accept_retry.cancel();
    for (auto& [token, w] : waits) w.timer->cancel();
    waits.clear();
    get_waiters.clear();
    barriers.clear();
    exchanges.clear();
    by_rank.clear();
    auto all = conns;
    for (const auto& c : all) finish_close(c);
    logger()->debug("rendezvous server on {} stopped", format_endpoint(address, port));
  }

  // ---- events ---------------------------------------------------------------------------------

  // A throwing launcher callback must not leave the server half-updated; it is logged instead.
  template <typename F, typename... Args>
  void emit(const F& f, Args&&... args) {
    if (silenced || !f) return;
    try {
      f(std::forward<Args>(args)...);
    } catch (const std::exception& e) {
      logger()->error("rendezvous server event handler threw: {}", e.what());
    }
  }

  // ---- accepting and the handshake -------------------------------------------------------------

  void accept() {
    acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket s) {
      if (self->stopped || ec == asio::error::operation_aborted) return;
      if (ec) {
        // Typically EMFILE: back off instead of spinning; the pending peers wait in the backlog.
        self->logger_warn_accept(ec);
        self->accept_retry.expires_after(100ms);
        self->accept_retry.async_wait([self](error_code e) {
          if (!e && !self->stopped) self->accept();
        });
        return;
      }
      self->on_accept(std::move(s));
      self->accept();
    });
  }

  void logger_warn_accept(const error_code& ec) {
    logger()->warn("rendezvous server on {}: accept: {}; retrying in 100 ms",
                   format_endpoint(address, port), ec.message());
  }

  void on_accept(tcp::socket s) {
    auto c = std::make_shared<Connection>(std::move(s), io);
    error_code ec;
    auto rep = c->socket.remote_endpoint(ec);
    c->peer = ec ? std::string("unknown peer") : format_endpoint(rep.address().to_string(), rep.port());
    set_keepalive(c->socket);
    conns.insert(c);
    if (RAND_bytes(c->nonce.data(), static_cast<int>(c->nonce.size())) != 1) {
      logger()->error("rendezvous server: OpenSSL RAND_bytes failed; closing {}", c->peer);
      finish_close(c);
      return;
    }
    logger()->debug("connection from {}", c->peer);
    send(c, wire::encode_frame(Op::kHello, Status::kOk, 0, wire::encode(wire::Hello{c->nonce})));
    c->auth_timer.expires_after(opts.auth_timeout);
    c->auth_timer.async_wait([self = shared_from_this(), c](error_code e) {
      if (e || c->authenticated || c->closing || c->closed) return;
      self->reject(c, Status::kAuthTimeout,
                   fmt::format("did not authenticate within {} of connecting",
                               format_duration(self->opts.auth_timeout)),
                   0);
    });
    read_header(c);
  }

  void handle_auth(const ConnPtr& c) {
    auto m = wire::decode_auth(c->payload);
    auto expected = auth_proof(opts.secret, c->nonce, m.rank);
    if (!equal_constant_time(expected, m.proof)) {
      return reject(c, Status::kAuthFailed,
                    fmt::format("authentication failed for rank {}: wrong proof (the peer does not "
                                "have this job's secret; HORA_SECRET must be the one horarun "
                                "passed)", m.rank),
                    c->header.request_id);
    }
    if (m.size != opts.size) {
      return reject(c, Status::kSizeMismatch,
                    fmt::format("rank {} believes the job has {} ranks, but it has {}", m.rank,
                                m.size, opts.size),
                    c->header.request_id);
    }
    if (m.rank < 0 || m.rank >= opts.size) {
      return reject(c, Status::kRankOutOfRange,
                    fmt::format("rank {} is out of range for a job of {} ranks", m.rank, opts.size),
                    c->header.request_id);
    }
    if (auto it = by_rank.find(m.rank); it != by_rank.end()) {
      return reject(c, Status::kDuplicateRank,
                    fmt::format("rank {} is already connected from {}", m.rank, it->second->peer),
                    c->header.request_id);
    }
    c->auth_timer.cancel();
    c->authenticated = true;
    c->rank = m.rank;
    by_rank[m.rank] = c;
    seen.insert(m.rank);
    logger()->info("rank {} connected from {}", m.rank, c->peer);
    send(c, wire::encode_frame(Op::kAuth, Status::kOk, c->header.request_id, {}));
    if (abort_reason) {
      send(c, wire::encode_frame(Op::kAbort, Status::kAborted, 0,
                                 wire::encode_message(*abort_reason)));
    }
    emit(events.on_connected, m.rank, c->peer);
  }

  // ---- reading --------------------------------------------------------------------------------

  void read_header(const ConnPtr& c) {
    c->reading = true;
    asio::async_read(c->socket, asio::buffer(c->header_buf),
                     [self = shared_from_this(), c](error_code ec, std::size_t) {
                       c->reading = false;
                       if (c->closed) return;
                       if (c->closing) return self->drain(c, ec);
                       if (ec) return self->on_read_error(c, ec);
                       self->on_header(c);
                     });
  }

  void on_header(const ConnPtr& c) {
    wire::Header h;
    std::string why;
    std::size_t limit = c->authenticated ? opts.max_frame_bytes
                                         : wire::kHeaderBytes + wire::kAuthPayloadBytes;
    Status st = wire::decode_header(c->header_buf, limit, &h, &why);
    if (st == Status::kTooLarge && !c->authenticated) {
      why += " (before authenticating, only the AUTH frame is accepted)";
    }
    if (st != Status::kOk) return reject(c, st, why, h.request_id);
    if (h.status != Status::kOk) {
      return reject(c, Status::kBadFrame,
                    fmt::format("{} request carries status {}; requests carry 0",
                                wire::op_name(h.op), static_cast<int>(h.status)),
                    h.request_id);
    }
    if (!c->authenticated) {
      if (h.op != Op::kAuth) {
        if (wire::is_request_op(h.op)) {
          return reject(c, Status::kNotAuthenticated,
                        fmt::format("sent {} before authenticating", wire::op_name(h.op)),
                        h.request_id);
        }
        return reject(c, Status::kUnknownOp,
                      fmt::format("sent {}, an op only the server sends", wire::op_name(h.op)),
                      h.request_id);
      }
      if (h.payload_bytes != wire::kAuthPayloadBytes) {
        return reject(c, Status::kBadFrame,
                      fmt::format("AUTH payload is {} bytes, expected {}", h.payload_bytes,
                                  wire::kAuthPayloadBytes),
                      h.request_id);
      }
    } else if (!wire::is_request_op(h.op)) {
      return reject(c, Status::kUnknownOp,
                    h.op == Op::kAuth
                        ? std::string("sent AUTH again after authenticating")
                        : fmt::format("sent {}, an op only the server sends", wire::op_name(h.op)),
                    h.request_id);
    }
    c->header = h;
    if (h.payload_bytes == 0) {
      c->payload.clear();
      return on_frame(c);
    }
    c->payload.resize(h.payload_bytes);
    c->awaiting_body = true;
    c->body_timer.expires_after(opts.io_timeout);
    c->body_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      if (ec || c->closed || c->closing || !c->awaiting_body ||
          c->body_timer.expiry() > Clock::now()) {
        return;
      }
      self->reject(c, Status::kBadFrame,
                   fmt::format("sent the header of a {} frame but not its {} payload bytes within {}",
                               wire::op_name(c->header.op), c->header.payload_bytes,
                               format_duration(self->opts.io_timeout)),
                   c->header.request_id);
    });
    c->reading = true;
    asio::async_read(c->socket, asio::buffer(c->payload),
                     [self = shared_from_this(), c](error_code ec, std::size_t) {
                       c->reading = false;
                       c->awaiting_body = false;
                       c->body_timer.cancel();
                       if (c->closed) return;
                       if (c->closing) return self->drain(c, ec);
                       if (ec) return self->on_read_error(c, ec);
                       self->on_frame(c);
                     });
  }

  void on_frame(const ConnPtr& c) {
    try {
      if (!c->authenticated) {
        handle_auth(c);
      } else {
        dispatch(c);
      }
    } catch (const wire::DecodeError& e) {
      reject(c, Status::kBadFrame,
             fmt::format("malformed {} payload: {}", wire::op_name(c->header.op), e.what()),
             c->header.request_id);
    }
    if (c->payload.capacity() > kKeepPayloadCapacity) Bytes().swap(c->payload);
    if (!c->closing && !c->closed) read_header(c);
  }

  void on_read_error(const ConnPtr& c, const error_code& ec) {
    if (!c->authenticated) {
      // A peer that leaves before authenticating was not refused; it is only logged.
      logger()->info("{} closed the connection before authenticating ({})", c->peer,
                     ec == asio::error::eof ? "end of stream" : ec.message());
      return finish_close(c);
    }
    drop(c, ec == asio::error::eof
                ? std::string("connection closed without goodbye (the process exited or was "
                              "killed)")
                : fmt::format("read from {}: {}", c->peer, ec.message()));
  }

  // Reads and discards what a closing peer still sends until it hangs up, so our close does
  // not turn into a reset that destroys the REJECT or GOODBYE answer before the peer reads it.
  void drain(const ConnPtr& c, const error_code& ec) {
    if (c->closed) return;
    if (ec || c->drained >= kDrainLimitBytes) {
      c->read_done = true;
      if (!c->writing && c->out.empty()) finish_close(c);
      return;
    }
    if (c->payload.size() < 4096) c->payload.resize(4096);
    c->reading = true;
    c->socket.async_read_some(
        asio::buffer(c->payload.data(), 4096),
        [self = shared_from_this(), c](error_code e, std::size_t n) {
          c->reading = false;
          c->drained += n;
          self->drain(c, e);
        });
  }

  // ---- writing --------------------------------------------------------------------------------

  void send(const ConnPtr& c, Bytes frame) {
    if (c->closed) return;
    c->out.push_back(std::move(frame));
    if (!c->writing) write_next(c);
  }

  void write_next(const ConnPtr& c) {
    c->writing = true;
    c->write_timer.expires_after(opts.io_timeout);
    c->write_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      if (ec || c->closed || !c->writing || c->write_timer.expiry() > Clock::now()) return;
      self->drop(c, fmt::format("{} did not read a {}-byte frame within {}", c->label(),
                                c->out.front().size(), format_duration(self->opts.io_timeout)));
    });
    asio::async_write(c->socket, asio::buffer(c->out.front()),
                      [self = shared_from_this(), c](error_code ec, std::size_t) {
                        c->writing = false;
                        c->write_timer.cancel();
                        if (c->closed) return;
                        if (ec) {
                          return self->drop(c, fmt::format("write to {}: {}", c->peer,
                                                           ec.message()));
                        }
                        c->out.pop_front();
                        if (!c->out.empty()) return self->write_next(c);
                        if (c->closing) {
                          error_code e;
                          c->socket.shutdown(tcp::socket::shutdown_send, e);
                          if (c->read_done) self->finish_close(c);
                        }
                      });
  }

  void respond(const ConnPtr& c, Op op, std::uint32_t id, Status status, Bytes payload) {
    if (payload.size() + wire::kHeaderBytes > opts.max_frame_bytes) {
      std::string msg = fmt::format("the {} response of {} bytes exceeds the frame limit of {} "
                                    "bytes (max_frame_bytes)",
                                    wire::op_name(op), payload.size() + wire::kHeaderBytes,
                                    opts.max_frame_bytes);
      logger()->warn("{}: {}", c->label(), msg);
      status = Status::kInvalid;
      payload = wire::encode_message(msg);
    }
    send(c, wire::encode_frame(op, status, id, payload));
  }

  // ---- leaving --------------------------------------------------------------------------------

  // Takes the connection out of the job: its waits are dropped and, if it was a registered
  // rank, the launcher hears on_disconnected.
  void detach(const ConnPtr& c, bool clean, const std::string& reason) {
    if (c->detached) return;
    c->detached = true;
    auto tokens = c->waits;
    for (auto t : tokens) remove_wait(t);
    if (!c->authenticated) return;
    auto it = by_rank.find(c->rank);
    if (it == by_rank.end() || it->second != c) return;
    by_rank.erase(it);
    if (clean) {
      logger()->info("rank {} ({}) said goodbye", c->rank, c->peer);
    } else {
      logger()->warn("rank {} ({}) disconnected: {}", c->rank, c->peer, reason);
    }
    emit(events.on_disconnected, c->rank, clean, reason);
  }

  // The peer broke the protocol: tell it why, report it, and close.
  void reject(const ConnPtr& c, Status status, const std::string& reason, std::uint32_t id) {
    if (c->closing || c->closed) return;
    logger()->warn("rejected {}: {}", c->label(), reason);
    c->closing = true;
    c->auth_timer.cancel();
    send(c, wire::encode_frame(Op::kReject, status, id, wire::encode_message(reason)));
    start_linger(c);
    detach(c, false, fmt::format("rejected: {}", reason));
    emit(events.on_rejected, c->peer, reason);
  }

  void start_linger(const ConnPtr& c) {
    c->linger_timer.expires_after(kRejectLinger);
    c->linger_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      if (!ec) self->finish_close(c);
    });
    if (!c->reading) drain(c, {});
  }

  // The connection died or stalled: no goodbye to send, just forget it.
  void drop(const ConnPtr& c, const std::string& reason) {
    detach(c, false, reason);
    if (!c->authenticated) logger()->info("{} dropped: {}", c->peer, reason);
    finish_close(c);
  }

  void finish_close(const ConnPtr& c) {
    if (c->closed) return;
    c->closed = true;
    c->closing = true;
    if (!c->detached) {
      // Only reached by stop(): the launcher is shutting down and wants no callbacks.
      c->detached = true;
      for (auto t : std::set<std::uint64_t>(c->waits)) remove_wait(t);
    }
    c->auth_timer.cancel();
    c->body_timer.cancel();
    c->write_timer.cancel();
    c->linger_timer.cancel();
    error_code ec;
    c->socket.shutdown(tcp::socket::shutdown_both, ec);
    c->socket.close(ec);
    c->out.clear();
    conns.erase(c);
  }

  // ---- requests -------------------------------------------------------------------------------

  void dispatch(const ConnPtr& c) {
    const wire::Header& h = c->header;
    std::uint32_t id = h.request_id;
    if (h.op == Op::kGoodbye) {
      if (!c->payload.empty()) {
        return reject(c, Status::kBadFrame, "GOODBYE carries a payload", id);
      }
      respond(c, Op::kGoodbye, id, Status::kOk, {});
      c->closing = true;
      start_linger(c);
      detach(c, true, "said goodbye");
      return;
    }
    if (abort_reason) {
      // Requests after an abort still get an answer, so no rank blocks on a dead job; the
      // payload is checked anyway, so a malformed one is still rejected.
      (void)decode_any(h.op, c->payload);
      return respond(c, h.op, id, Status::kAborted, wire::encode_message(*abort_reason));
    }
    switch (h.op) {
      case Op::kSet: {
        auto m = wire::decode_set(c->payload);
        kv[m.key] = std::move(m.value);
        respond(c, h.op, id, Status::kOk, {});
        wake_getters(m.key);
        return;
      }
      case Op::kGet: {
        auto m = wire::decode_wait(c->payload);
        if (auto it = kv.find(m.key); it != kv.end()) {
          return respond(c, h.op, id, Status::kOk, wire::encode_bytes(it->second));
        }
        auto timeout = clamp(m.timeout_ms);
        if (timeout.count() == 0) {
          return respond(c, h.op, id, Status::kTimeout,
                         wire::encode_message(get_timeout_message(m.key, timeout)));
        }
        auto token = add_wait(c, WaitKind::kGet, id, m.key, timeout);
        get_waiters[m.key].push_back(token);
        return;
      }
      case Op::kAdd: {
        auto m = wire::decode_add(c->payload);
        std::int64_t value = 0;
        if (auto it = kv.find(m.key); it != kv.end()) {
          if (it->second.size() != 8) {
            return respond(c, h.op, id, Status::kInvalid,
                           wire::encode_message(fmt::format(
                               "add to key '{}': it holds a {}-byte value, not a counter "
                               "(8 bytes, little-endian int64)", m.key, it->second.size())));
          }
          value = wire::decode_i64(it->second);  // a counter is stored as its 8 LE bytes
        }
        // Two's-complement wrap-around instead of signed-overflow UB.
        value = static_cast<std::int64_t>(static_cast<std::uint64_t>(value) +
                                          static_cast<std::uint64_t>(m.delta));
        auto stored = wire::encode_i64(value);
        kv[m.key] = stored;
        respond(c, h.op, id, Status::kOk, std::move(stored));
        wake_getters(m.key);
        return;
      }
      case Op::kDel: {
        auto m = wire::decode_del(c->payload);
        bool existed = kv.erase(m.key) > 0;
        return respond(c, h.op, id, Status::kOk, wire::encode_u8(existed ? 1 : 0));
      }
      case Op::kBarrier:
        return handle_barrier(c, wire::decode_wait(c->payload));
      case Op::kExchange:
        return handle_exchange(c, wire::decode_exchange_view(c->payload));
      default:
        // on_header only lets request ops through.
        return reject(c, Status::kUnknownOp,
                      fmt::format("sent {}, which is not a request", wire::op_name(h.op)), id);
    }
  }

  static int decode_any(Op op, const Bytes& payload) {
    switch (op) {
      case Op::kSet: wire::decode_set(payload); break;
      case Op::kGet:
      case Op::kBarrier: wire::decode_wait(payload); break;
      case Op::kAdd: wire::decode_add(payload); break;
      case Op::kDel: wire::decode_del(payload); break;
      case Op::kExchange: wire::decode_exchange_view(payload); break;
      default: break;
    }
    return 0;
  }

  static std::chrono::milliseconds clamp(std::uint64_t ms) {
    return std::chrono::milliseconds(
        std::min<std::uint64_t>(ms, static_cast<std::uint64_t>(kMaxWait.count())));
  }

  static std::string get_timeout_message(const std::string& key, std::chrono::milliseconds t) {
    return fmt::format("get of key '{}' timed out after {}: no rank has set it", key,
                       format_duration(t));
  }

  // "waiting for ranks 1, 3 of 4", plus "(rank 0 entered but left: ...)" when some did.
  template <typename Map>
  std::string describe_missing(const Map& present, const std::set<int>& left) const {
    std::vector<int> missing;
    for (int r = 0; r < opts.size; ++r) {
      if (!present.count(r) && !left.count(r)) missing.push_back(r);
    }
    std::string out = missing.empty() ? std::string("waiting for no rank that never came")
                                      : "waiting for " + format_ranks(missing, opts.size);
    if (!left.empty()) {
      out += fmt::format(" ({} {} entered but left: timed out or disconnected)",
                         left.size() == 1 ? "rank" : "ranks",
                         format_rank_list(std::vector<int>(left.begin(), left.end())));
    }
    return out;
  }

  void handle_barrier(const ConnPtr& c, const wire::WaitRequest& m) {
    auto& b = barriers[m.key];
    if (b.entered.count(c->rank)) {
      return respond(c, Op::kBarrier, c->header.request_id, Status::kInvalid,
                     wire::encode_message(fmt::format(
                         "rank {} entered barrier '{}' again while already waiting in it",
                         c->rank, m.key)));
    }
    b.entered[c->rank] = add_wait(c, WaitKind::kBarrier, c->header.request_id, m.key,
                                  clamp(m.timeout_ms));
    if (static_cast<int>(b.entered.size()) < opts.size) return;
    std::vector<std::uint64_t> tokens;
    for (auto& [r, t] : b.entered) tokens.push_back(t);
    barriers.erase(m.key);
    for (auto t : tokens) complete_wait(t, {});
  }

  void handle_exchange(const ConnPtr& c, wire::ExchangeView m) {
    std::uint32_t id = c->header.request_id;
    if (static_cast<int>(m.slices.size()) != opts.size) {
      return respond(c, Op::kExchange, id, Status::kInvalid,
                     wire::encode_message(fmt::format(
                         "exchange '{}': rank {} uploaded {} slices, but the job has {} ranks "
                         "(one slice per rank)", m.name, c->rank, m.slices.size(), opts.size)));
    }
    auto& ex = exchanges[m.name];
    if (ex.uploads.count(c->rank)) {
      return respond(c, Op::kExchange, id, Status::kInvalid,
                     wire::encode_message(fmt::format(
                         "rank {} entered exchange '{}' again while already waiting in it",
                         c->rank, m.name)));
    }
    auto token = add_wait(c, WaitKind::kExchange, id, m.name, clamp(m.timeout_ms));
    ex.uploads[c->rank] = Upload{token, std::move(c->payload), std::move(m.slices)};
    if (static_cast<int>(ex.uploads.size()) < opts.size) return;

    // Everyone uploaded: hand each rank its column, copied out of the rows. The exchange is
    // forgotten and its rows freed here; the columns are freed as their writes complete.
    Exchange done = std::move(ex);
    exchanges.erase(m.name);
    std::vector<const Upload*> rows;
    rows.reserve(opts.size);
    for (const auto& [rank, up] : done.uploads) rows.push_back(&up);
    std::vector<std::pair<std::uint64_t, Bytes>> columns;
    columns.reserve(opts.size);
    for (int r = 0; r < opts.size; ++r) {
      std::size_t bytes = 4;
      for (const Upload* row : rows) bytes += 4 + row->slices[r].size();
      wire::Writer w;
      w.reserve(bytes);
      w.u32(static_cast<std::uint32_t>(opts.size));
      for (const Upload* row : rows) w.bytes(row->slices[r]);
      columns.emplace_back(rows[r]->token, w.take());
    }
    rows.clear();
    done.uploads.clear();
    for (auto& [token, column] : columns) complete_wait(token, std::move(column));
  }

  void wake_getters(const std::string& key) {
    auto it = get_waiters.find(key);
    if (it == get_waiters.end()) return;
    auto tokens = std::move(it->second);
    get_waiters.erase(it);
    const Bytes& value = kv.at(key);
    for (auto t : tokens) complete_wait(t, wire::encode_bytes(value));
  }

  std::uint64_t add_wait(const ConnPtr& c, WaitKind kind, std::uint32_t id, const std::string& name,
                         std::chrono::milliseconds timeout) {
    std::uint64_t token = next_token++;
    auto timer = std::make_unique<asio::steady_timer>(io);
    timer->expires_after(timeout);
    timer->async_wait([self = shared_from_this(), token](error_code ec) {
      if (!ec) self->on_wait_timeout(token);
    });
    waits.emplace(token, Wait{kind, c, id, c->header.op, name, timeout, std::move(timer)});
    c->waits.insert(token);
    return token;
  }

  // Answers a wait with OK and forgets it. The caller has already taken it out of its
  // barrier/exchange/get list.
  void complete_wait(std::uint64_t token, Bytes payload) {
    auto it = waits.find(token);
    if (it == waits.end()) return;
    Wait w = std::move(it->second);
    waits.erase(it);
    w.timer->cancel();
    w.conn->waits.erase(token);
    respond(w.conn, w.op, w.id, Status::kOk, std::move(payload));
  }

  // Forgets a wait without answering it, taking it out of its barrier/exchange/get list.
  void remove_wait(std::uint64_t token) {
    auto it = waits.find(token);
    if (it == waits.end()) return;
    Wait& w = it->second;
    switch (w.kind) {
      case WaitKind::kGet: {
        auto g = get_waiters.find(w.name);
        if (g != get_waiters.end()) {
          std::erase(g->second, token);
          if (g->second.empty()) get_waiters.erase(g);
        }
        break;
      }
      case WaitKind::kBarrier: {
        auto b = barriers.find(w.name);
        if (b != barriers.end()) {
          b->second.entered.erase(w.conn->rank);
          b->second.left.insert(w.conn->rank);
          if (b->second.entered.empty()) barriers.erase(b);
        }
        break;
      }
      case WaitKind::kExchange: {
        auto e = exchanges.find(w.name);
        if (e != exchanges.end()) {
          e->second.uploads.erase(w.conn->rank);
          e->second.left.insert(w.conn->rank);
          if (e->second.uploads.empty()) exchanges.erase(e);
        }
        break;
      }
    }
    w.timer->cancel();
    w.conn->waits.erase(token);
    waits.erase(it);
  }

  void on_wait_timeout(std::uint64_t token) {
    auto it = waits.find(token);
    if (it == waits.end()) return;
    const Wait& w = it->second;
    std::string msg;
    switch (w.kind) {
      case WaitKind::kGet:
        msg = get_timeout_message(w.name, w.timeout);
        break;
      case WaitKind::kBarrier:
        msg = fmt::format("barrier '{}' timed out after {} {}", w.name,
                          format_duration(w.timeout),
                          describe_missing(barriers[w.name].entered, barriers[w.name].left));
        break;
      case WaitKind::kExchange:
        msg = fmt::format("exchange '{}' timed out after {} {}", w.name,
                          format_duration(w.timeout),
                          describe_missing(exchanges[w.name].uploads, exchanges[w.name].left));
        break;
    }
    logger()->info("{}: {}", w.conn->label(), msg);
    ConnPtr conn = w.conn;
    Op op = w.op;
    std::uint32_t id = w.id;
    remove_wait(token);
    respond(conn, op, id, Status::kTimeout, wire::encode_message(msg));
  }

  // ---- abort ----------------------------------------------------------------------------------

  void do_abort(const std::string& reason) {
    if (stopped) return;
    if (abort_reason) {
      logger()->debug("abort ({}) ignored: the job was already aborted ({})", reason,
                      *abort_reason);
      return;
    }
    abort_reason = reason;
    logger()->warn("aborting the job: {}", reason);
    for (auto& [r, c] : by_rank) {
      send(c, wire::encode_frame(Op::kAbort, Status::kAborted, 0, wire::encode_message(reason)));
    }
    // Every rank was told; nobody waits for these answers any more.
    for (auto& [token, w] : waits) {
      w.timer->cancel();
      w.conn->waits.erase(token);
    }
    waits.clear();
    get_waiters.clear();
    barriers.clear();
    exchanges.clear();
  }
};

Server::Server(boost::asio::io_context& io, ServerOptions options, ServerEvents events)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(events))) {
  impl_->start();
}

Server::~Server() {
  impl_->silenced = true;
  // Closing asio objects is only safe on the io thread or once the io_context no longer runs;
  // otherwise the stop is posted and pending handlers keep the Impl alive until it runs.
  if (impl_->io.stopped() || impl_->io.get_executor().running_in_this_thread()) {
    impl_->do_stop();
  } else {
    asio::post(impl_->io, [impl = impl_] { impl->do_stop(); });
  }
}

std::uint16_t Server::port() const { return impl_->port; }
const std::string& Server::address() const { return impl_->address; }
const std::set<int>& Server::ranks_seen() const { return impl_->seen; }

std::set<int> Server::ranks_connected() const {
  std::set<int> out;
  for (const auto& [r, c] : impl_->by_rank) out.insert(r);
  return out;
}

Server::Stats Server::stats() const {
  Stats s;
  s.connections = impl_->conns.size();
  s.keys = impl_->kv.size();
  s.waits = impl_->waits.size();
  s.barriers = impl_->barriers.size();
  s.exchanges = impl_->exchanges.size();
  return s;
}

void Server::abort_all(const std::string& reason) {
  asio::post(impl_->io, [impl = impl_, reason] { impl->do_abort(reason); });
}

void Server::stop() {
  asio::post(impl_->io, [impl = impl_] { impl->do_stop(); });
}

}  // namespace hora::rdv
