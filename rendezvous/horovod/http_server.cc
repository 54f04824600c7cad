#include "rendezvous/horovod/http_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "common/log_throttle.h"
#include "rendezvous/errors.h"
#include "rendezvous/horovod/socket_owner.h"
#include "rendezvous/log.h"

namespace hora::rdv::horovod {
namespace {

void set_close_on_exec(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::uint32_t kHeaderLimit = 8u << 10;

Method method_of(http::verb v) {
  switch (v) {
    case http::verb::get: return Method::kGet;
    case http::verb::put: return Method::kPut;
    case http::verb::delete_: return Method::kDelete;
    default: return Method::kOther;
  }
}

std::string peer_of(const tcp::socket& s) {
  error_code ec;
  const tcp::endpoint ep = s.remote_endpoint(ec);
  if (ec) return "(unknown peer)";
  const std::string a = ep.address().to_string();
  return ep.address().is_v6() ? fmt::format("[{}]:{}", a, ep.port())
                              : fmt::format("{}:{}", a, ep.port());
}

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  class Connection;

  asio::io_context& io;
  HttpServerOptions options;
  HttpServerEvents events;
  Store store;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::set<Connection*> connections;
  std::set<int> reported;  // global ranks reported through on_rank_seen
  struct Held {
    std::shared_ptr<Connection> connection;  // nothing else keeps a held connection alive
    bool keep_alive = false;
  };
  std::multimap<std::string, Held> held;  // elastic: rank_and_size GETs by slot
  std::uint16_t port = 0;
  bool stopped = false;
  uid_t owner_uid;
  std::size_t remote_connections = 0;  // connections from other hosts
  LogThrottle throttle;
  asio::steady_timer throttle_timer;
  bool throttle_armed = false;

  Impl(asio::io_context& io_, ScopePlan plan, HttpServerOptions opts, HttpServerEvents ev)
      : io(io_),
        options(std::move(opts)),
        events(std::move(ev)),
        store(std::move(plan)),
        owner_uid(options.owner_uid.value_or(::geteuid())),
        throttle_timer(io_) {
    if (options.bind_addresses.empty()) options.bind_addresses.push_back("127.0.0.1");
    store.set_elastic(options.elastic);
  }

  // Every refusal: the first of its kind from a host in full, the rest of the second counted
  // (a flood costs one line per second, and never blocks the event loop on a slow log).
  void rejected(const std::string& peer, const std::string& reason, const std::string& kind) {
    std::string host = peer.substr(0, peer.rfind(':'));
    if (host.size() > 64) host.resize(64);
    if (throttle.admit(kind + " " + host, std::chrono::steady_clock::now(),
                       [host, kind](std::uint64_t n) {
                         return fmt::format(
                             "Horovod rendezvous: refused {} requests or connections from {} "
                             "in the last 1 s: {}",
                             n, host, kind);
                       })) {
      if (events.on_rejected) {
        events.on_rejected(peer, reason);
      } else {
        logger()->warn("Horovod rendezvous: refused a request from {}: {}", peer, reason);
      }
    }
    arm_throttle();
  }

  void arm_throttle() {
    const auto next = throttle.next_flush();
    if (throttle_armed || !next || stopped) return;
    throttle_armed = true;
    throttle_timer.expires_at(*next);
    throttle_timer.async_wait([self = shared_from_this()](error_code ec) {
      self->throttle_armed = false;
      if (ec || self->stopped) return;
      for (const std::string& line : self->throttle.flush(std::chrono::steady_clock::now())) {
        if (self->events.on_rejections_counted) {
          self->events.on_rejections_counted(line);
        } else {
          logger()->warn("{}", line);
        }
      }
      self->arm_throttle();
    });
  }

  void bind_all() {
    port = options.port;
    for (const std::string& address : options.bind_addresses) {
      error_code ec;
      const auto addr = asio::ip::make_address(address, ec);
      if (ec) throw Error(fmt::format("Horovod rendezvous: '{}' is not an IP address", address));
      auto acceptor = std::make_unique<tcp::acceptor>(io);
      const tcp::endpoint ep(addr, port);
      acceptor->open(ep.protocol(), ec);
      // Asio opens sockets inheritable; nothing horarun starts may hold the listening socket.
      if (!ec) set_close_on_exec(acceptor->native_handle());
      if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor->bind(ep, ec);
      if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        throw Error(fmt::format("Horovod rendezvous: cannot listen on {}:{}: {}", address, port,
                                ec.message()));
      }
      port = acceptor->local_endpoint().port();
      acceptors.push_back(std::move(acceptor));
    }
  }

  void start() {
    for (auto& a : acceptors) accept(*a);
    for (const std::string& address : options.bind_addresses) {
      logger()->info("Horovod rendezvous (HTTP) listening on {}:{}",
                     address.find(':') != std::string::npos ? "[" + address + "]" : address, port);
    }
  }

  void accept(tcp::acceptor& acceptor) {
    acceptor.async_accept([self = shared_from_this(), &acceptor](error_code ec, tcp::socket s) {
      if (self->stopped || !acceptor.is_open()) return;
      if (!ec) {
        // Accepted on the event loop's thread, which is also the only one that starts processes:
        // no child can be forked between accept() and this.
        set_close_on_exec(s.native_handle());
        self->admit(std::move(s));
      }
      self->accept(acceptor);
    });
  }

  void admit(tcp::socket socket);
  void hold(const std::string& slot, std::shared_ptr<Connection> c, bool keep_alive,
            const std::string& peer);
  std::size_t release(const std::string& slot);
  void begin_round(ScopePlan plan);

  void stop();
};

class HttpServer::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Impl> server, tcp::socket socket, bool remote)
      : server_(std::move(server)),
        peer_(peer_of(socket)),
        remote_(remote),
        stream_(std::move(socket)) {
    server_->connections.insert(this);
    server_->remote_connections += remote_;
  }
  ~Connection() {
    server_->connections.erase(this);
    server_->remote_connections -= remote_;
  }

  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_->store.max_body_bytes());
    stream_.expires_after(server_->options.io_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       self->on_read(ec);
                     });
  }

  void close() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  // The reply to a held request.
  void answer(const Reply& reply, bool keep_alive) {
    respond(static_cast<http::status>(reply.status), reply.body, keep_alive);
  }

 private:
  void on_read(error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        server_->stopped) {
      return close();
    }
    if (ec == beast::error::timeout) {
      if (parser_->got_some()) {
        server_->rejected(peer_, "request not complete in time", "slow request");
      }
      return close();
    }
    if (ec == http::error::body_limit) {
      return refuse(http::status::payload_too_large, fmt::format("body over the limit of {} bytes",
                                                                 server_->store.max_body_bytes()));
    }
    if (ec == http::error::header_limit) {
      return refuse(http::status::bad_request, "request header over 8 KiB");
    }
    if (ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == http::error::partial_message) {
      return close();
    }
    if (ec) return refuse(http::status::bad_request, "malformed request: " + ec.message());

    http::request<http::string_body> req = parser_->release();
    const auto target = req.target();
    const std::string_view target_view(target.data(), target.size());
    const Method method = method_of(req.method());
    // PUT /worker_addresses/<slot>: the body goes to on_worker_addresses once the store took it.
    constexpr std::string_view kAddresses = "/worker_addresses/";
    const bool addresses = method == Method::kPut && server_->events.on_worker_addresses &&
                           target_view.substr(0, kAddresses.size()) == kAddresses;
    std::string addresses_body = addresses ? req.body() : std::string();
    Reply reply = server_->store.handle(method, target_view, std::move(req.body()));
    if (!reply.deferred_slot.empty()) {
      return server_->hold(reply.deferred_slot, shared_from_this(), req.keep_alive(), peer_);
    }
    if (!reply.refusal.empty()) {
      server_->rejected(peer_,
                        fmt::format("{} {}: {}", req.method_string().to_string(),
                                    std::string(target.data(), target.size()), reply.refusal),
                        fmt::format("{} answered {}", req.method_string().to_string(),
                                    reply.status));
    }
    if (server_->store.global_ranks_seen().size() != server_->reported.size()) note_new_ranks();
    respond(static_cast<http::status>(reply.status), std::move(reply.body), req.keep_alive());
    if (addresses && reply.status == 200) {
      server_->events.on_worker_addresses(std::string(target_view.substr(kAddresses.size())),
                                          addresses_body, peer_);
    }
  }

  void note_new_ranks() {
    // The store only grows its set; report ranks not reported yet.
    for (int r : server_->store.global_ranks_seen()) {
      if (server_->reported.insert(r).second && server_->events.on_rank_seen) {
        server_->events.on_rank_seen(r, peer_);
      }
    }
  }

  void refuse(http::status status, const std::string& why) {
    server_->rejected(peer_, why, fmt::format("answered {}", static_cast<int>(status)));
    respond(status, why + "\n", false);
  }

  void respond(http::status status, std::string body, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->body() = std::move(body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    stream_.expires_after(server_->options.io_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, keep_alive](error_code ec, std::size_t) {
                        if (ec || !keep_alive || self->server_->stopped) return self->close();
                        self->read();
                      });
  }

  std::shared_ptr<Impl> server_;
  std::string peer_;
  bool remote_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

void HttpServer::Impl::admit(tcp::socket socket) {
  const std::string peer = peer_of(socket);
  auto refuse = [&](const std::string& reason, const std::string& kind) {
    rejected(peer, reason, kind);
    error_code ec;
    socket.close(ec);
  };
  error_code ec1, ec2;
  const tcp::endpoint from = socket.remote_endpoint(ec1);
  const tcp::endpoint to = socket.local_endpoint(ec2);
  if (ec1 || ec2) return refuse("the connection closed before it was checked", "closed early");
  // A peer on this machine has a socket here: it must be the job's user's. A peer without one
  // is on another host (or already gone: loopback without a socket is refused).
  const std::optional<uid_t> uid = socket_owner(from, to);
  const bool remote = !uid && !from.address().is_loopback();
  if (uid && *uid != owner_uid) {
    return refuse(fmt::format("the connecting socket belongs to uid {}, not to the job's user "
                              "(uid {})",
                              *uid, owner_uid),
                  "another user's connection");
  }
  if (!uid && !remote) {
    return refuse(
        "no socket of this machine matches the connection (closed, or another network "
        "namespace)",
        "unknown local peer");
  }
  if (remote && !options.allowed_remote.empty()) {
    const std::string a = from.address().is_v6() && from.address().to_v6().is_v4_mapped()
                              ? from.address().to_v6().to_v4().to_string()
                              : from.address().to_string();
    if (std::find(options.allowed_remote.begin(), options.allowed_remote.end(), a) ==
        options.allowed_remote.end()) {
      return refuse(fmt::format("{} is not the address of one of the job's hosts", a),
                    "not a job host");
    }
  }
  const std::size_t reserved = std::min(options.reserved_connections, options.max_connections);
  if (connections.size() >= options.max_connections ||
      (remote && remote_connections >= options.max_connections - reserved)) {
    return refuse(fmt::format("more than {} open connections{}", options.max_connections,
                              remote ? fmt::format(" ({} kept for this machine's ranks)", reserved)
                                     : std::string()),
                  "too many connections");
  }
  std::make_shared<Connection>(shared_from_this(), std::move(socket), remote)->read();
}

void HttpServer::Impl::hold(const std::string& slot, std::shared_ptr<Connection> c, bool keep_alive,
                            const std::string& peer) {
  // No read is pending while held, and the reply re-arms the stream's timeout: io_timeout does
  // not cut a held request, however long the round takes.
  held.emplace(slot, Held{std::move(c), keep_alive});
  if (events.on_rank_and_size) events.on_rank_and_size(slot, peer);
}

std::size_t HttpServer::Impl::release(const std::string& slot) {
  if (stopped) return 0;
  auto [first, last] = held.equal_range(slot);
  std::vector<Held> due;
  for (auto it = first; it != last; ++it) due.push_back(std::move(it->second));
  held.erase(first, last);
  const Reply reply = store.rank_and_size_reply(slot);
  for (Held& h : due) h.connection->answer(reply, h.keep_alive);
  return due.size();
}

void HttpServer::Impl::begin_round(ScopePlan plan) {
  store.begin_round(std::move(plan));
  reported.clear();
  // A held worker the new plan has no slot for is out of the job: it hears so now.
  std::set<std::string> removed;
  for (const auto& [slot, unused] : held) {
    if (find_slot(store.plan(), slot) == nullptr) removed.insert(slot);
  }
  for (const std::string& slot : removed) release(slot);
}

void HttpServer::Impl::stop() {
  if (stopped) return;
  stopped = true;
  error_code ec;
  for (auto& a : acceptors) a->close(ec);
  throttle_timer.cancel();
  for (Connection* c : std::set<Connection*>(connections)) c->close();
  held.clear();  // held connections hold the server: let both go
}

HttpServer::HttpServer(asio::io_context& io, ScopePlan plan, HttpServerOptions options,
                       HttpServerEvents events)
    : impl_(std::make_shared<Impl>(io, std::move(plan), std::move(options), std::move(events))) {
  impl_->bind_all();
  impl_->start();
}

HttpServer::~HttpServer() { impl_->stop(); }

std::uint16_t HttpServer::port() const { return impl_->port; }
const std::vector<std::string>& HttpServer::addresses() const {
  return impl_->options.bind_addresses;
}
const Store& HttpServer::store() const { return impl_->store; }
std::size_t HttpServer::connections() const { return impl_->connections.size(); }
void HttpServer::stop() { impl_->stop(); }

void HttpServer::begin_round(ScopePlan plan) { impl_->begin_round(std::move(plan)); }
std::size_t HttpServer::release_rank_and_size(const std::string& slot) {
  return impl_->release(slot);
}
std::size_t HttpServer::release_round() {
  std::set<std::string> slots;
  for (const auto& [slot, unused] : impl_->held) slots.insert(slot);
  std::size_t n = 0;
  for (const std::string& slot : slots) n += impl_->release(slot);
  return n;
}
std::vector<std::string> HttpServer::held_rank_and_size() const {
  std::vector<std::string> out;
  for (const auto& [slot, unused] : impl_->held) out.push_back(slot);
  return out;
}
void HttpServer::allow_remote(const std::string& address) {
  auto& allowed = impl_->options.allowed_remote;
  if (std::find(allowed.begin(), allowed.end(), address) == allowed.end()) {
    allowed.push_back(address);
  }
}

}  // namespace hora::rdv::horovod
