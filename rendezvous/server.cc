// The rendezvous server's connection side: the acceptor and one state machine per connection.
// The job's keys, waits, barriers and exchanges live in rendezvous/store.h (no sockets); this
// file turns frames into Store calls and Store replies into frames. Everything below runs on the
// one io_context thread, so the state needs no locks; abort_all() and stop() post themselves.
// Server::Impl's state is guarded by its ThreadRole io_thread_ (common/thread_annotations.h):
// clang refuses a function that touches it without being declared to run there, and every
// completion handler and posted lambda says that it does.
//
// A connection's phase (Phase):
//   kHandshake  accepted: HELLO{nonce} queued, auth deadline armed, reading the AUTH frame
//   kJoined     AUTH ok: registered under its rank, AUTH/OK (and ABORT if the job was already
//               aborted) queued, then a read loop of header -> payload -> handle
//   kClosing    rejected (REJECT{reason} queued) or said GOODBYE (GOODBYE/OK queued): out of
//               the job, nothing more is handled, leftover input is drained (so closing does not
//               reset the peer before it reads the answer), and the socket is closed once the
//               peer hangs up or kRejectLinger passes
//   kClosed     socket closed, connection forgotten
// EOF or an error in kHandshake/kJoined goes straight to kClosed (on_disconnected with
// clean=false for a joined rank). Its input side (Input) says what read is in flight: none, a
// header, a payload, the drain of a closing connection, or none any more (the peer hung up).
// A write is in flight whenever the output queue is not empty.
#include "rendezvous/server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <spdlog/logger.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/duration.h"
#include "common/endpoint.h"
#include "common/fd_limit.h"
#include "common/log_throttle.h"
#include "common/thread_annotations.h"
#include "rendezvous/errors.h"
#include "rendezvous/format.h"
#include "rendezvous/hmac.h"
#include "rendezvous/log.h"
#include "rendezvous/store.h"
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
// Receive buffers larger than this are released after the frame has been handled.
constexpr std::size_t kKeepPayloadCapacity = 1u << 20;
// Connections taken per wakeup of the listening socket, before others get a turn.
constexpr int kAcceptBurst = 64;
// How long to wait before accepting again when no descriptor is free.
constexpr std::chrono::milliseconds kAcceptRetry{100};
// Descriptors kept free for the launcher and its ranks: a base for the launcher's own files and
// per rank its pipes and its rendezvous connection.
constexpr std::uint64_t kFdReserveBase = 64;
constexpr std::uint64_t kFdReservePerRank = 4;

// How many connections may wait to authenticate at once: ServerOptions::max_unauthenticated, or
// the job's size if larger (every rank may connect at the same moment: a cap below that drops
// legitimate ranks, which then retry with backoff), lowered so that they can take at most half
// of the descriptors left after the reserve, plus the rendezvous connections the reserve keeps
// for the ranks (one each): a rank waiting to authenticate holds its own. (Counting those
// against the spare half made 4096 ranks that connected at once under a limit of 20000 lose
// all but 1776 of their first connections.)
std::size_t pending_connection_cap(const ServerOptions& o) {
  const FdLimit lim = fd_limit();
  const auto ranks = static_cast<std::uint64_t>(o.size);
  const std::uint64_t reserve = kFdReserveBase + kFdReservePerRank * ranks;
  std::uint64_t cap = std::max<std::uint64_t>(o.max_unauthenticated, ranks);
  if (lim.error.empty() && lim.soft != RLIM_INFINITY) {
    cap = std::min<std::uint64_t>(cap, ranks + (lim.soft > reserve ? (lim.soft - reserve) / 2 : 0));
  }
  return static_cast<std::size_t>(std::max<std::uint64_t>(cap, 1));
}

// What a rejection was for, in the words of a rate-limited summary line.
const char* rejection_kind(Status status) {
  switch (status) {
    case Status::kBadFrame: return "bad frame";
    case Status::kBadVersion: return "wrong protocol version";
    case Status::kTooLarge: return "frame too large";
    case Status::kUnknownOp: return "unknown op";
    case Status::kNotAuthenticated: return "request before authenticating";
    case Status::kAuthFailed: return "wrong proof (not this job's secret)";
    case Status::kAuthTimeout: return "did not authenticate in time";
    case Status::kSizeMismatch: return "wrong job size";
    case Status::kRankOutOfRange: return "rank out of range";
    case Status::kDuplicateRank: return "rank already connected";
    default: return wire::status_name(status);
  }
}

// A payload is read at most this much at a time, its buffer growing with what has arrived.
constexpr std::size_t kReadChunk = 64u << 10;

enum class Phase { kHandshake, kJoined, kClosing, kClosed };

// A frame queued for writing: its own bytes (header first), then optionally blocks shared with
// other connections' frames: a GATHER's records, and its column, `tail`, in `columns`.
struct OutFrame {
  Bytes head;
  std::shared_ptr<const Bytes> shared;
  std::shared_ptr<const std::uint8_t[]> columns;
  std::span<const std::uint8_t> tail;
  std::size_t size() const { return head.size() + (shared ? shared->size() : 0) + tail.size(); }
};
enum class Input { kIdle, kHeader, kPayload, kDraining, kEnded };

struct Connection {
  Connection(tcp::socket s, asio::io_context& io, Store::ClientId id_)
      : socket(std::move(s)),
        id(id_),
        auth_timer(io),
        body_timer(io),
        write_timer(io),
        linger_timer(io) {}

  std::string label() const { return rank >= 0 ? fmt::format("rank {} ({})", rank, peer) : peer; }
  // Past the handshake at some point (a closing connection may have been a rank).
  bool authenticated() const { return rank >= 0; }
  // Rejected, said goodbye, or closed: nothing it sends is handled any more.
  bool leaving() const { return phase == Phase::kClosing || phase == Phase::kClosed; }

  tcp::socket socket;
  Store::ClientId id;
  std::string peer;  // "ip:port"
  int rank = -1;     // set once authenticated
  Phase phase = Phase::kHandshake;
  Input input = Input::kIdle;
  std::size_t drained = 0;
  wire::Nonce nonce{};
  asio::steady_timer auth_timer, body_timer, write_timer, linger_timer;
  std::array<std::uint8_t, wire::kHeaderBytes> header_buf{};
  wire::Header header;
  Bytes payload;
  std::deque<OutFrame> out;  // front() is being written while not empty
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

class Server::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, ServerOptions options, ServerEvents ev)
      : io_(io),
        opts(std::move(options)),
        events(std::move(ev)),
        acceptor(io),
        accept_retry(io),
        wait_timer(io),
        throttle_timer(io),
        store(opts.size) {}

  // For Server's methods (their contract: the io thread, or before the io_context runs).
  asio::io_context& io() { return io_; }
  const ThreadRole& io_thread() const HORA_RETURN_CAPABILITY(io_thread_) { return io_thread_; }
  // After the destructor of Server: no callbacks into the launcher any more (any thread).
  void silence() { silenced = true; }
  // Set by start() (in Server's constructor), read-only afterwards.
  std::uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }
  const std::set<int>& ranks_seen() const HORA_REQUIRES(io_thread_) { return seen; }
  const wire::Bytes* value(const std::string& key) const HORA_REQUIRES(io_thread_) {
    return store.value(key);
  }

  std::set<int> ranks_connected() const HORA_REQUIRES(io_thread_) {
    std::set<int> out;
    for (const auto& [r, c] : by_rank) out.insert(r);
    return out;
  }
  Stats stats() const HORA_REQUIRES(io_thread_) {
    Store::Stats st = store.stats();
    Stats s;
    s.connections = conns.size();
    for (const auto& [id, c] : conns) s.receive_buffer_bytes += c->payload.capacity();
    s.keys = st.keys;
    s.waits = st.waits;
    s.barriers = st.barriers;
    s.exchanges = st.exchanges;
    return s;
  }

 private:
  // The io_context's thread: everything below but the constants is its alone.
  ThreadRole io_thread_;
  asio::io_context& io_;
  const ServerOptions opts;
  const ServerEvents events;
  std::atomic<bool> silenced{false};  // set by ~Server: no callbacks into the launcher any more
  // Set by start(), read-only afterwards.
  std::string address_;
  std::uint16_t port_ = 0;
  tcp listen_protocol = tcp::v4();  // the listening socket's, for the connections it accepts

  tcp::acceptor acceptor HORA_GUARDED_BY(io_thread_);
  asio::steady_timer accept_retry HORA_GUARDED_BY(io_thread_);
  // Armed for the store's next wait deadline.
  asio::steady_timer wait_timer HORA_GUARDED_BY(io_thread_);
  std::optional<Clock::time_point> wait_timer_at HORA_GUARDED_BY(io_thread_);
  // Repeated warnings: one line per kind per second.
  LogThrottle throttle HORA_GUARDED_BY(io_thread_);
  asio::steady_timer throttle_timer HORA_GUARDED_BY(io_thread_);
  bool throttle_timer_armed HORA_GUARDED_BY(io_thread_) = false;
  std::size_t pending_cap HORA_GUARDED_BY(io_thread_) = 1;  // see pending_connection_cap()
  // In kHandshake, oldest (lowest id) first.
  std::map<Store::ClientId, ConnPtr> pending HORA_GUARDED_BY(io_thread_);
  bool stopped HORA_GUARDED_BY(io_thread_) = false;

  Store store HORA_GUARDED_BY(io_thread_);
  std::set<int> seen HORA_GUARDED_BY(io_thread_);
  // Joined (authenticated and not leaving).
  std::map<int, ConnPtr> by_rank HORA_GUARDED_BY(io_thread_);
  // Elastic jobs: the newest round announced to each rank of this (older) round's server
  // (reset_rank()); a rank that authenticates later gets it right after the AUTH answer.
  std::map<int, wire::Reset> resets HORA_GUARDED_BY(io_thread_);
  Store::ClientId next_id HORA_GUARDED_BY(io_thread_) = 1;
  // Every open connection.
  std::unordered_map<Store::ClientId, ConnPtr> conns HORA_GUARDED_BY(io_thread_);

 public:
  // ---- start / stop -------------------------------------------------------------------------

  void start() HORA_REQUIRES(io_thread_) {
    if (opts.size < 1) {
      throw Error(fmt::format("rendezvous server: job size must be at least 1, got {}", opts.size));
    }
    if (opts.max_frame_bytes < wire::kMinMaxFrameBytes ||
        opts.max_frame_bytes > wire::kMaxMaxFrameBytes) {
      throw Error(fmt::format(
          "rendezvous server: max_frame_bytes must be from {} to {} (below 4 GiB), got {}",
          wire::kMinMaxFrameBytes, wire::kMaxMaxFrameBytes, opts.max_frame_bytes));
    }
    error_code ec;
    auto addr = asio::ip::make_address(opts.bind_address, ec);
    if (ec) {
      throw Error(
          fmt::format("could not start the rendezvous server: '{}' is not an IP address "
                      "({}); give an address of the chosen interface",
                      opts.bind_address, ec.message()));
    }
    address_ = addr.to_string();
    tcp::endpoint ep(addr, opts.port);
    std::string where = format_endpoint(address_, opts.port);
    auto fail = [&](const char* step) {
      throw Error(
          fmt::format("could not start the rendezvous server on {}: {}: {}{}", where, step,
                      ec.message(),
                      opts.port != 0 ? "; choose another port, or 0 for any free port" : ""));
    };
    // Opened here with SOCK_CLOEXEC (Asio's open() leaves it inheritable): the listening socket
    // must not leak into the guards and ranks the launcher starts.
    int lfd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0) {
      ec = error_code(errno, boost::system::system_category());
      fail("socket");
    }
    acceptor.assign(ep.protocol(), lfd, ec);
    if (ec) {
      ::close(lfd);
      fail("socket");
    }
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    acceptor.bind(ep, ec);
    if (ec) fail("bind");
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail("listen");
    port_ = acceptor.local_endpoint(ec).port();
    listen_protocol = ep.protocol();
    acceptor.native_non_blocking(true, ec);
    pending_cap = pending_connection_cap(opts);
    logger()->info("rendezvous server listening on {} for {} ranks",
                   format_endpoint(address_, port_), opts.size);
    accept();
  }

  void do_stop() HORA_REQUIRES(io_thread_) {
    if (stopped) return;
    stopped = true;
    error_code ec;
    acceptor.close(ec);
    accept_retry.cancel();
    wait_timer.cancel();
    throttle_timer.cancel();
    store.clear();
    by_rank.clear();
    std::vector<ConnPtr> all;
    for (auto& [id, c] : conns) all.push_back(c);
    for (const auto& c : all) finish_close(c);
    logger()->debug("rendezvous server on {} stopped", format_endpoint(address_, port_));
  }

  // ---- events ---------------------------------------------------------------------------------

  // A throwing launcher callback must not leave the server half-updated; it is logged instead.
  template <typename F, typename... Args>
  void emit(const F& f, Args&&... args) HORA_REQUIRES(io_thread_) {
    if (silenced || !f) return;
    try {
      f(std::forward<Args>(args)...);
    } catch (const std::exception& e) {
      logger()->error("rendezvous server event handler threw: {}", e.what());
    }
  }

  // ---- accepting and the handshake -------------------------------------------------------------

  // Waits until the listening socket is readable, then takes what is queued with accept4()
  // (close-on-exec from the start, which Asio's async_accept does not give).
  void accept() HORA_REQUIRES(io_thread_) {
    acceptor.async_wait(tcp::acceptor::wait_read, [self = shared_from_this()](error_code ec) {
      self->io_thread_.assert_held();
      if (self->stopped || ec == asio::error::operation_aborted) return;
      self->accept_ready();
    });
  }

  // The peer's address comes with accept4() and the protocol is the listening socket's: no
  // getpeername() or getsockname() per connection.
  void accept_ready() HORA_REQUIRES(io_thread_) {
    for (int i = 0; i < kAcceptBurst; ++i) {
      tcp::endpoint peer;
      socklen_t peer_len = static_cast<socklen_t>(peer.capacity());
      int fd =
          ::accept4(acceptor.native_handle(), peer.data(), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        tcp::socket s(io_);
        error_code ec;
        s.assign(listen_protocol, fd, ec);
        if (ec) {
          ::close(fd);
          continue;
        }
        std::optional<tcp::endpoint> from;
        if (peer_len <= peer.capacity()) {
          peer.resize(peer_len);
          from = peer;
        }
        on_accept(std::move(s), from);
        continue;
      }
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;  // that peer only
      if ((err == EMFILE || err == ENFILE) && drop_oldest_pending("no descriptor was free")) {
        continue;  // a descriptor was freed for the connection waiting in the backlog
      }
      // Out of descriptors (or memory) with no unauthenticated connection to give up: say why,
      // at the level horarun shows by default, and back off instead of spinning.
      warn_accept_failed(err);
      accept_retry.expires_after(kAcceptRetry);
      accept_retry.async_wait([self = shared_from_this()](error_code e) {
        self->io_thread_.assert_held();
        if (!e && !self->stopped) self->accept();
      });
      return;
    }
    accept();
  }

  void warn_accept_failed(int err) HORA_REQUIRES(io_thread_) {
    const std::string why = std::strerror(err);
    const std::string where = format_endpoint(address_, port_);
    if (!throttle.admit("accept " + why, Clock::now(), [where, why](std::uint64_t n) {
          return fmt::format(
              "rendezvous server on {}: accept failed {} times in the last "
              "1 s: {}",
              where, n, why);
        })) {
      return arm_throttle_timer();
    }
    std::string hint;
    if (err == EMFILE) {
      hint = fmt::format(" (the open-file limit is {}; raise it with ulimit -n)", fd_limit().soft);
    }
    logger()->error("rendezvous server on {}: cannot accept connections: {}{}; retrying in {}",
                    where, why, hint, format_duration(kAcceptRetry));
    arm_throttle_timer();
  }

  void on_accept(tcp::socket s, const std::optional<tcp::endpoint>& from)
      HORA_REQUIRES(io_thread_) {
    auto c = std::make_shared<Connection>(std::move(s), io_, next_id++);
    c->peer = from ? format_endpoint(from->address().to_string(), from->port())
                   : std::string("unknown peer");
    set_keepalive(c->socket);
    if (pending.size() >= pending_cap) {
      drop_oldest_pending(
          fmt::format("more than {} connections were waiting to authenticate", pending_cap));
    }
    conns.emplace(c->id, c);
    pending.emplace(c->id, c);
    if (RAND_bytes(c->nonce.data(), static_cast<int>(c->nonce.size())) != 1) {
      logger()->error("rendezvous server: OpenSSL RAND_bytes failed; closing {}", c->peer);
      finish_close(c);
      return;
    }
    logger()->debug("connection from {}", c->peer);
    send(c, wire::encode_frame(Op::kHello, Status::kOk, 0, wire::encode(wire::Hello{c->nonce})));
    c->auth_timer.expires_after(opts.auth_timeout);
    c->auth_timer.async_wait([self = shared_from_this(), c](error_code e) {
      self->io_thread_.assert_held();
      if (e || c->phase != Phase::kHandshake) return;
      self->reject(c, Status::kAuthTimeout,
                   fmt::format("did not authenticate within {} of connecting",
                               format_duration(self->opts.auth_timeout)),
                   0);
    });
    read_header(c);
  }

  void handle_auth(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    auto m = wire::decode_auth(c->payload);
    auto expected = auth_proof(opts.secret, c->nonce, m.rank);
    if (!equal_constant_time(expected, m.proof)) {
      return reject(c, Status::kAuthFailed,
                    fmt::format("authentication failed for rank {}: wrong proof (the peer does not "
                                "have this job's secret; HORA_SECRET must be the one horarun "
                                "passed)",
                                m.rank),
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
    c->phase = Phase::kJoined;
    pending.erase(c->id);
    c->rank = m.rank;
    by_rank[m.rank] = c;
    seen.insert(m.rank);
    logger()->info("rank {} connected from {}", m.rank, c->peer);
    send(c, wire::encode_frame(Op::kAuth, Status::kOk, c->header.request_id, {}));
    if (store.abort_reason()) {
      send(c, wire::encode_frame(Op::kAbort, Status::kAborted, 0,
                                 wire::encode_message(*store.abort_reason())));
    }
    if (auto it = resets.find(m.rank); it != resets.end()) {
      send(c, wire::encode_frame(Op::kReset, Status::kOk, 0, wire::encode(it->second)));
    }
    emit(events.on_connected, m.rank, c->peer);
  }

  // ---- reading --------------------------------------------------------------------------------

  void read_header(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    c->input = Input::kHeader;
    asio::async_read(c->socket, asio::buffer(c->header_buf),
                     [self = shared_from_this(), c](error_code ec, std::size_t) {
                       self->io_thread_.assert_held();
                       c->input = Input::kIdle;
                       if (c->phase == Phase::kClosed) return;
                       if (c->phase == Phase::kClosing) return self->drain(c, ec);
                       if (ec) return self->on_read_error(c, ec);
                       self->on_header(c);
                     });
  }

  void on_header(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    wire::Header h;
    std::string why;
    const bool handshake = c->phase == Phase::kHandshake;
    std::size_t limit =
        handshake ? wire::kHeaderBytes + wire::kAuthPayloadBytes : opts.max_frame_bytes;
    Status st = wire::decode_header(c->header_buf, limit, &h, &why);
    if (st == Status::kBadFrame && handshake) {
      if (const auto http = wire::http_request_start(c->header_buf)) {
        emit(events.on_http_request, c->peer, *http);
      }
    }
    if (st == Status::kTooLarge && handshake) {
      why += " (before authenticating, only the AUTH frame is accepted)";
    }
    if (st != Status::kOk) return reject(c, st, why, h.request_id);
    if (h.status != Status::kOk) {
      return reject(c, Status::kBadFrame,
                    fmt::format("{} request carries status {}; requests carry 0",
                                wire::op_name(h.op), static_cast<int>(h.status)),
                    h.request_id);
    }
    if (handshake) {
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
    c->payload.clear();
    c->input = Input::kPayload;
    c->body_timer.expires_after(opts.io_timeout);
    c->body_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      self->io_thread_.assert_held();
      if (ec || c->leaving() || c->input != Input::kPayload ||
          c->body_timer.expiry() > Clock::now()) {
        return;
      }
      self->reject(
          c, Status::kBadFrame,
          fmt::format("sent the header of a {} frame but not its {} payload bytes within {}",
                      wire::op_name(c->header.op), c->header.payload_bytes,
                      format_duration(self->opts.io_timeout)),
          c->header.request_id);
    });
    read_payload(c);
  }

  // Reads the payload in chunks, growing the buffer as bytes arrive: a header alone does not
  // make the server allocate the size it declares.
  void read_payload(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    const std::size_t have = c->payload.size();
    const std::size_t chunk = std::min<std::size_t>(c->header.payload_bytes - have, kReadChunk);
    c->payload.resize(have + chunk);  // grows the capacity geometrically, like push_back
    c->socket.async_read_some(asio::buffer(c->payload.data() + have, chunk),
                              [self = shared_from_this(), c, have](error_code ec, std::size_t n) {
                                self->io_thread_.assert_held();
                                if (c->phase == Phase::kClosed) return;
                                c->payload.resize(have + n);
                                if (!ec && !c->leaving() &&
                                    c->payload.size() < c->header.payload_bytes) {
                                  return self->read_payload(c);
                                }
                                c->input = Input::kIdle;
                                c->body_timer.cancel();
                                if (c->phase == Phase::kClosing) return self->drain(c, ec);
                                if (ec) return self->on_read_error(c, ec);
                                self->on_frame(c);
                              });
  }

  void on_frame(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    try {
      if (c->phase == Phase::kHandshake) {
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
    if (!c->leaving()) read_header(c);
  }

  void on_read_error(const ConnPtr& c, const error_code& ec) HORA_REQUIRES(io_thread_) {
    if (c->phase == Phase::kHandshake) {
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
  void drain(const ConnPtr& c, const error_code& ec) HORA_REQUIRES(io_thread_) {
    if (c->phase == Phase::kClosed) return;
    if (ec || c->drained >= kDrainLimitBytes) {
      c->input = Input::kEnded;
      if (c->out.empty()) finish_close(c);
      return;
    }
    if (c->payload.size() < 4096) c->payload.resize(4096);
    c->input = Input::kDraining;
    c->socket.async_read_some(asio::buffer(c->payload.data(), 4096),
                              [self = shared_from_this(), c](error_code e, std::size_t n) {
                                self->io_thread_.assert_held();
                                c->input = Input::kIdle;
                                c->drained += n;
                                self->drain(c, e);
                              });
  }

  // ---- writing --------------------------------------------------------------------------------

  void send(const ConnPtr& c, Bytes frame) HORA_REQUIRES(io_thread_) {
    send(c, OutFrame{std::move(frame), nullptr, {}, {}});
  }

  void send(const ConnPtr& c, OutFrame frame) HORA_REQUIRES(io_thread_) {
    if (c->phase == Phase::kClosed) return;
    c->out.push_back(std::move(frame));
    if (c->out.size() == 1) write_next(c);
  }

  void write_next(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    c->write_timer.expires_after(opts.io_timeout);
    c->write_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      self->io_thread_.assert_held();
      if (ec || c->phase == Phase::kClosed || c->out.empty() ||
          c->write_timer.expiry() > Clock::now()) {
        return;
      }
      self->drop(c, fmt::format("{} did not read a {}-byte frame within {}", c->label(),
                                c->out.front().size(), format_duration(self->opts.io_timeout)));
    });
    const OutFrame& f = c->out.front();
    const std::array<asio::const_buffer, 3> parts{asio::buffer(f.head),
                                                  f.shared ? asio::buffer(*f.shared)
                                                           : asio::const_buffer(),
                                                  asio::buffer(f.tail.data(), f.tail.size())};
    asio::async_write(c->socket, parts, [self = shared_from_this(), c](error_code ec, std::size_t) {
      self->io_thread_.assert_held();
      c->write_timer.cancel();
      if (c->phase == Phase::kClosed) return;
      if (ec) {
        return self->drop(c, fmt::format("write to {}: {}", c->peer, ec.message()));
      }
      c->out.pop_front();
      if (!c->out.empty()) return self->write_next(c);
      if (c->phase == Phase::kClosing) {
        error_code e;
        c->socket.shutdown(tcp::socket::shutdown_send, e);
        if (c->input == Input::kEnded) self->finish_close(c);
      }
    });
  }

  void respond(const ConnPtr& c, Op op, std::uint32_t id, Status status, Bytes payload)
      HORA_REQUIRES(io_thread_) {
    if (payload.size() + wire::kHeaderBytes > opts.max_frame_bytes) {
      std::string msg = fmt::format(
          "the {} response of {} bytes exceeds the frame limit of {} "
          "bytes (max_frame_bytes)",
          wire::op_name(op), payload.size() + wire::kHeaderBytes, opts.max_frame_bytes);
      logger()->warn("{}: {}", c->label(), msg);
      status = Status::kInvalid;
      payload = wire::encode_message(msg);
    }
    send(c, wire::encode_frame(op, status, id, payload));
  }

  // ---- leaving --------------------------------------------------------------------------------

  // Takes the connection out of the job (phase kClosing): its waits are dropped and, if it was a
  // joined rank, the launcher hears on_disconnected.
  void leave(const ConnPtr& c, bool clean, const std::string& reason) HORA_REQUIRES(io_thread_) {
    if (c->leaving()) return;
    const bool joined = c->phase == Phase::kJoined;
    c->phase = Phase::kClosing;
    pending.erase(c->id);
    c->auth_timer.cancel();
    store.forget(c->id);
    rearm_wait_timer();
    if (!joined) return;
    auto it = by_rank.find(c->rank);
    if (it == by_rank.end() || it->second != c) return;
    by_rank.erase(it);
    if (clean) {
      logger()->info("rank {} ({}) {}", c->rank, c->peer, reason);
    } else {
      logger()->warn("rank {} ({}) disconnected: {}", c->rank, c->peer, reason);
    }
    emit(events.on_disconnected, c->rank, clean, reason);
  }

  // The peer broke the protocol: tell it why, report it, and close.
  void reject(const ConnPtr& c, Status status, const std::string& reason, std::uint32_t id)
      HORA_REQUIRES(io_thread_) {
    if (c->leaving()) return;
    const std::string host = hora::endpoint_host(c->peer);
    const char* kind = rejection_kind(status);
    if (throttle.admit(fmt::format("rejected {} {}", host, kind), Clock::now(),
                       [host, kind](std::uint64_t n) {
                         return fmt::format(
                             "rejected {} connections from {} in the last 1 s: "
                             "{}",
                             n, host, kind);
                       })) {
      logger()->warn("rejected {}: {}", c->label(), reason);
    }
    arm_throttle_timer();
    leave(c, false, fmt::format("rejected: {}", reason));
    send(c, wire::encode_frame(Op::kReject, status, id, wire::encode_message(reason)));
    start_linger(c);
    emit(events.on_rejected, c->peer, reason);
  }

  void start_linger(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    c->linger_timer.expires_after(kRejectLinger);
    c->linger_timer.async_wait([self = shared_from_this(), c](error_code ec) {
      self->io_thread_.assert_held();
      if (!ec) self->finish_close(c);
    });
    if (c->input == Input::kIdle) drain(c, {});
  }

  // The connection died or stalled: no goodbye to send, just forget it.
  void drop(const ConnPtr& c, const std::string& reason) HORA_REQUIRES(io_thread_) {
    const bool refused = c->leaving();  // already logged as rejected
    leave(c, false, reason);
    if (!c->authenticated() && !refused) log_dropped(c, reason);
    finish_close(c);
  }

  void finish_close(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    if (c->phase == Phase::kClosed) return;
    // Still in the job only when reached by stop(): the launcher is shutting down and wants no
    // callbacks, so the waits are dropped without leave().
    if (!c->leaving()) store.forget(c->id);
    c->phase = Phase::kClosed;
    pending.erase(c->id);
    c->auth_timer.cancel();
    c->body_timer.cancel();
    c->write_timer.cancel();
    c->linger_timer.cancel();
    error_code ec;
    c->socket.shutdown(tcp::socket::shutdown_both, ec);
    c->socket.close(ec);
    c->out.clear();
    conns.erase(c->id);
  }

  // Gives up the connection that has waited longest to authenticate, to make room; false if
  // there is none.
  bool drop_oldest_pending(const std::string& why) HORA_REQUIRES(io_thread_) {
    if (pending.empty()) return false;
    ConnPtr oldest = pending.begin()->second;
    drop(oldest, fmt::format("dropped before authenticating: {} (the oldest goes first)", why));
    return true;
  }

  void log_dropped(const ConnPtr& c, const std::string& reason) HORA_REQUIRES(io_thread_) {
    const std::string host = hora::endpoint_host(c->peer);
    if (throttle.admit("dropped " + host, Clock::now(), [host](std::uint64_t n) {
          return fmt::format("dropped {} unauthenticated connections from {} in the last 1 s", n,
                             host);
        })) {
      logger()->warn("{}: {}", c->peer, reason);
    }
    arm_throttle_timer();
  }

  // Summaries of throttled warnings are written when their window ends.
  void arm_throttle_timer() HORA_REQUIRES(io_thread_) {
    if (throttle_timer_armed) return;
    auto next = throttle.next_flush();
    if (!next) return;
    throttle_timer_armed = true;
    throttle_timer.expires_at(*next);
    throttle_timer.async_wait([self = shared_from_this()](error_code ec) {
      self->io_thread_.assert_held();
      self->throttle_timer_armed = false;
      if (ec || self->stopped) return;
      for (const auto& line : self->throttle.flush(Clock::now())) logger()->warn("{}", line);
      self->arm_throttle_timer();
    });
  }

  // ---- requests -------------------------------------------------------------------------------

  void dispatch(const ConnPtr& c) HORA_REQUIRES(io_thread_) {
    const wire::Header& h = c->header;
    if (h.op == Op::kGoodbye) {
      const bool at_exit = c->payload.size() == 1 && c->payload[0] == wire::kGoodbyeAtExit;
      if (!c->payload.empty() && !at_exit) {
        return reject(c, Status::kBadFrame, "GOODBYE carries an unknown payload", h.request_id);
      }
      respond(c, Op::kGoodbye, h.request_id, Status::kOk, {});
      leave(c, true, at_exit ? wire::kGoodbyeAtExitReason : "said goodbye");
      start_linger(c);
      return;
    }
    deliver(store.handle(c->id, c->rank, h.op, h.request_id, std::move(c->payload), Clock::now()));
    c->payload.clear();
    rearm_wait_timer();
  }

  void deliver(Store::Replies replies) HORA_REQUIRES(io_thread_) {
    for (auto& r : replies) {
      auto it = conns.find(r.client);
      if (it == conns.end()) continue;
      if (r.header_room == wire::kHeaderBytes && r.wire_bytes() <= opts.max_frame_bytes) {
        // Built with room for the header: the frame is the reply's own buffers (and a block
        // shared with other replies), not a copy.
        wire::frame_in_place(r.op, r.status, r.id, r.payload, r.wire_bytes() - wire::kHeaderBytes);
        send(it->second,
             OutFrame{std::move(r.payload), std::move(r.shared), std::move(r.columns), r.tail});
      } else if (r.header_room != 0) {
        respond(it->second, r.op, r.id, r.status, r.body());
      } else {
        respond(it->second, r.op, r.id, r.status, std::move(r.payload));
      }
    }
  }

  // Keeps wait_timer armed for the store's earliest deadline.
  void rearm_wait_timer() HORA_REQUIRES(io_thread_) {
    auto next = store.next_deadline();
    if (next == wait_timer_at) return;
    wait_timer_at = next;
    if (!next) {
      wait_timer.cancel();
      return;
    }
    wait_timer.expires_at(*next);
    wait_timer.async_wait([self = shared_from_this()](error_code ec) {
      self->io_thread_.assert_held();
      if (ec || self->stopped) return;
      self->wait_timer_at.reset();
      self->on_wait_deadline();
    });
  }

  void on_wait_deadline() HORA_REQUIRES(io_thread_) {
    auto replies = store.expire(Clock::now());
    for (const auto& r : replies) {
      auto it = conns.find(r.client);
      std::string who = it != conns.end() ? it->second->label() : "a closed connection";
      logger()->info("{}: {}", who, wire::decode_message(r.payload));
    }
    deliver(std::move(replies));
    rearm_wait_timer();
  }

  // ---- elastic reset --------------------------------------------------------------------------

  void do_reset(int rank, const wire::Reset& reset) HORA_REQUIRES(io_thread_) {
    if (stopped) return;
    auto [it, fresh] = resets.try_emplace(rank, reset);
    if (!fresh) {
      if (it->second.round > reset.round) return;  // a newer round was announced already
      it->second = reset;
    }
    if (auto c = by_rank.find(rank); c != by_rank.end()) {
      send(c->second, wire::encode_frame(Op::kReset, Status::kOk, 0, wire::encode(reset)));
    }
  }

  // ---- abort ----------------------------------------------------------------------------------

  void do_abort(const std::string& reason) HORA_REQUIRES(io_thread_) {
    if (stopped) return;
    if (store.abort_reason()) {
      logger()->debug("abort ({}) ignored: the job was already aborted ({})", reason,
                      *store.abort_reason());
      return;
    }
    store.abort(reason);
    rearm_wait_timer();
    logger()->warn("aborting the job: {}", reason);
    // Every rank is told; nobody waits for the answers of its parked requests any more.
    for (auto& [r, c] : by_rank) {
      send(c, wire::encode_frame(Op::kAbort, Status::kAborted, 0, wire::encode_message(reason)));
    }
  }
};

Server::Server(boost::asio::io_context& io, ServerOptions options, ServerEvents events)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(events))) {
  impl_->io_thread().assert_held();  // the contract: before the io_context runs, or on its thread
  impl_->start();
}

Server::~Server() {
  impl_->silence();
  // Closing asio objects is only safe on the io thread or once the io_context no longer runs;
  // otherwise the stop is posted and pending handlers keep the Impl alive until it runs.
  if (impl_->io().stopped() || impl_->io().get_executor().running_in_this_thread()) {
    impl_->io_thread().assert_held();
    impl_->do_stop();
  } else {
    asio::post(impl_->io(), [impl = impl_] {
      impl->io_thread().assert_held();
      impl->do_stop();
    });
  }
}

std::uint16_t Server::port() const { return impl_->port(); }
const std::string& Server::address() const { return impl_->address(); }

// The io thread's (server.h): the caller says so by calling.
const std::set<int>& Server::ranks_seen() const {
  impl_->io_thread().assert_held();
  return impl_->ranks_seen();
}

std::set<int> Server::ranks_connected() const {
  impl_->io_thread().assert_held();
  return impl_->ranks_connected();
}

Server::Stats Server::stats() const {
  impl_->io_thread().assert_held();
  return impl_->stats();
}

std::optional<std::string> Server::value(const std::string& key) const {
  impl_->io_thread().assert_held();
  const wire::Bytes* v = impl_->value(key);
  if (v == nullptr) return std::nullopt;
  return std::string(v->begin(), v->end());
}

void Server::abort_all(const std::string& reason) {
  asio::post(impl_->io(), [impl = impl_, reason] {
    impl->io_thread().assert_held();
    impl->do_abort(reason);
  });
}

void Server::reset_rank(int rank, const wire::Reset& reset) {
  asio::post(impl_->io(), [impl = impl_, rank, reset] {
    impl->io_thread().assert_held();
    impl->do_reset(rank, reset);
  });
}

void Server::stop() {
  asio::post(impl_->io(), [impl = impl_] {
    impl->io_thread().assert_held();
    impl->do_stop();
  });
}

}  // namespace hora::rdv
