// rendezvous_bench: N simulated ranks in one process connect to a real rendezvous server on
// 127.0.0.1 and do the address exchange hora::init() uses to connect its Gloo mesh. Prints, per
// N: the time until every rank has connected and authenticated (all ranks connect at once, as
// in a job), the time until every rank has its answers, and the bytes each rank sends and
// receives (whole frames, headers included), the CPU time the server's io thread used meanwhile
// (the part a real job pays on the launcher) and the CPU time of the rest of the process (the
// simulated ranks). Every answer is checked as it arrives, against expectations made before the
// clock starts (a few memcmp calls: inside the timed part), and then dropped.
//
// Two exchanges:
//   mesh (default)  what libhora does now (runtime/gloo/mesh.cc): two GATHERs, "layout" with a
//                   mesh record per rank (runtime/gloo/mesh_record.h: version 2, IPv4, a
//                   14-byte host name, 8 ranks per host) and 4 bytes (two ports) per peer, then
//                   "groups" with no record and 4 bytes per peer.
//   --legacy        what it did before: one EXCHANGE of 136-byte slices (a whole Gloo TCP
//                   address) per rank pair.
//
// Two ways to drive the simulated ranks:
//   (default)       one event loop (epoll) drives every rank's own non-blocking connection,
//                   speaking the protocol with the functions rdv::Client uses (wire.h, hmac.h,
//                   gather_call.h): in a job every rank is a process of its own on its own
//                   host, so the simulated ranks should cost this one process no more than
//                   their protocol work, and leave the second core to the server.
//   --threads       every rank is an rdv::Client on a thread of its own (plus the client's
//                   reader thread): 2N threads on this machine's cores, so the time is mostly
//                   the scheduler's; for comparison.
//
//   rendezvous_bench [--legacy] [--threads] [N ...]      default: 64 256 1024
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "rendezvous/client.h"
#include "rendezvous/gather_call.h"
#include "rendezvous/hmac.h"
#include "rendezvous/log.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

namespace rdv = hora::rdv;
namespace wire = hora::rdv::wire;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSliceBytes = 136;  // legacy: a Gloo TCP address
constexpr std::size_t kPortBytes = 4;
constexpr int kRanksPerHost = 8;
constexpr auto kTimeout = 120s;
constexpr const char* kLayout = "hora/mesh/layout";
constexpr const char* kGroups = "hora/mesh/groups";

// Rank `rank`'s mesh record (runtime/gloo/mesh_record.h, version 2) in a job of n ranks placed
// kRanksPerHost to a host: host h is 10.x.y.z with the host number in x.y.z, named
// node-NNNNN.hpc; its ranks differ only in their local rank. 50 bytes.
rdv::Bytes make_record(int rank, int n) {
  const int host = rank / kRanksPerHost;
  const int hosts = (n + kRanksPerHost - 1) / kRanksPerHost;
  const int local_size = std::min(kRanksPerHost, n - host * kRanksPerHost);
  // Ranks with this local rank: one per host, but the last host may be short.
  const int local = rank % kRanksPerHost;
  const int cross_size = local < n - (hosts - 1) * kRanksPerHost ? hosts : hosts - 1;
  const std::string name = fmt::format("node-{:05d}.hpc", host);
  wire::Writer w;
  w.u8(2).u32(host).u32(local).u32(local_size).u32(host).u32(cross_size);
  w.u8(4).raw(std::array<std::uint8_t, 4>{10, static_cast<std::uint8_t>(host >> 16),
                                          static_cast<std::uint8_t>(host >> 8),
                                          static_cast<std::uint8_t>(host)});
  w.i64(-1);
  w.raw(std::array<std::uint8_t, 2>{static_cast<std::uint8_t>(name.size()), 0});
  w.raw(std::span(reinterpret_cast<const std::uint8_t*>(name.data()), name.size()));
  return w.take();
}

// The 4 bytes rank `from` addresses to rank `to` in gather number `round`.
std::uint8_t port_byte(int round, int from, int to, std::size_t k) {
  return static_cast<std::uint8_t>(round * 101 + from * 31 + to * 7 + static_cast<int>(k));
}

// Rank r's ports in gather `round`, n x kPortBytes: what it addresses to every rank (its
// upload), or, for its `column`, what every rank addresses to it.
rdv::Bytes ports(int round, int n, int r, bool column) {
  rdv::Bytes out(static_cast<std::size_t>(n) * kPortBytes);
  for (int j = 0; j < n; ++j) {
    for (std::size_t k = 0; k < kPortBytes; ++k) {
      out[j * kPortBytes + k] = column ? port_byte(round, j, r, k) : port_byte(round, r, j, k);
    }
  }
  return out;
}

// Slice from rank `from` to rank `to`: both ranks in the first bytes, the rest a pattern.
rdv::Bytes make_slice(int from, int to) {
  rdv::Bytes s(kSliceBytes);
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<std::uint8_t>(from * 31 + to * 7 + i);
  std::memcpy(s.data(), &from, sizeof from);
  std::memcpy(s.data() + sizeof from, &to, sizeof to);
  return s;
}

// Each rank needs a client socket and a server socket, plus some slack.
void raise_fd_limit(int n) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rlim_t want = static_cast<rlim_t>(2 * n + 64);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(rl.rlim_max, std::max(want, rl.rlim_cur));
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < want) {
    throw std::runtime_error(
        fmt::format("N = {} needs {} file descriptors, but RLIMIT_NOFILE is "
                    "{} (hard limit {}); raise it with ulimit -n",
                    n, want, rl.rlim_cur, rl.rlim_max));
  }
}

// CPU time the whole process has used so far, in ms.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// CPU time a thread has used so far, in ms.
double thread_cpu_ms(std::thread& t) {
  clockid_t id;
  timespec ts{};
  if (pthread_getcpuclockid(t.native_handle(), &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Result {
  int n;
  double connect_ms;
  double total_ms;
  double server_cpu_ms;
  double ranks_cpu_ms;
  std::size_t up_bytes;
  std::size_t down_bytes;
  long wrong;
};

// What every rank uploads, made before the clock starts.
struct Uploads {
  std::vector<std::vector<rdv::Bytes>> rows;   // legacy: rows[r][to]
  std::vector<std::vector<rdv::Bytes>> ports;  // mesh: ports[r][round], n x kPortBytes
  std::vector<rdv::Bytes> records;             // mesh: records[r]
  // What the answers must hold, made before the clock starts too, so that checking an answer
  // costs a few memcmp calls: every record back to back, and each rank's column per round.
  rdv::Bytes all_records;
  std::vector<std::size_t> record_offsets;
  std::vector<std::vector<rdv::Bytes>> columns;  // mesh: columns[r][round]
};

// One simulated rank's results. Each answer is checked as it arrives (counted in `wrong`) and
// then dropped, as libhora's mesh drops it once decoded: 4096 ranks keeping theirs would hold
// over a gigabyte, and fresh pages for every one of them would cost the one process running
// them more than their protocol work.
struct Rank {
  Clock::time_point connected;
  Clock::time_point done;
  long wrong = 0;
  std::size_t down_bytes = 0;  // answer frames, headers included
};

// The job as the ranks see it: its size, the server, and whether it is the legacy exchange.
struct Job {
  int n;
  bool legacy;
  std::uint16_t port;
  rdv::Secret secret;
  std::string server;  // "127.0.0.1:port", for messages
};

// Wrong entries in rank r's legacy EXCHANGE column (slice j must be what rank j sent it).
long check_column(const Uploads& up, int r, const std::vector<rdv::Bytes>& column) {
  long wrong = column.size() == up.rows.size() ? 0 : 1;
  for (std::size_t j = 0; j < std::min(column.size(), up.rows.size()); ++j) {
    if (column[j] != up.rows[j][r]) wrong++;
  }
  return wrong;
}

// Wrong entries in rank r's answer to GATHER `round` (0 layout, 1 groups): every rank's record
// (none in groups) and the ports every rank addressed to r. The records are compared as one
// block when they lie back to back in the answer's buffer (as the client decodes them), else
// one by one.
long check_gather(const Uploads& up, int r, int round, const rdv::GatherResult& g) {
  const std::size_t n = up.records.size();
  if (g.records.size() != n) return static_cast<long>(n);
  long wrong = 0;
  const rdv::Bytes& column = up.columns[r][round];
  if (!std::equal(g.column.begin(), g.column.end(), column.begin(), column.end())) {
    for (std::size_t j = 0; j < n; ++j) {
      if (!std::equal(g.slice(j).begin(), g.slice(j).end(), column.begin() + j * kPortBytes,
                      column.begin() + (j + 1) * kPortBytes)) {
        wrong++;
      }
    }
  }
  if (round == 1) {
    for (const auto& record : g.records) wrong += record.empty() ? 0 : 1;
    return wrong;
  }
  const std::uint8_t* base = g.records_buffer.data();
  bool back_to_back = g.records_buffer.size() == up.all_records.size();
  for (std::size_t j = 0; j < n && back_to_back; ++j) {
    back_to_back = g.records[j].data() == base + up.record_offsets[j] &&
                   g.records[j].size() == up.records[j].size();
  }
  if (back_to_back && g.records_buffer == up.all_records) return wrong;
  for (std::size_t j = 0; j < n; ++j) {
    const auto& record = g.records[j];
    if (!std::equal(record.begin(), record.end(), up.records[j].begin(), up.records[j].end())) {
      wrong++;
    }
  }
  return wrong;
}

// Ranks as threads, each with an rdv::Client.
void drive_with_threads(const Job& job, const Uploads& up, std::vector<Rank>& ranks,
                        Clock::time_point* t0) {
  const int n = job.n;
  std::vector<std::string> errors(n);
  std::vector<std::unique_ptr<rdv::Client>> clients(n);
  std::latch ready(n + 1);
  std::latch go(1);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Rank& me = ranks[r];
      ready.count_down();
      go.wait();
      try {
        rdv::ClientOptions co;
        co.host = "127.0.0.1";
        co.port = job.port;
        co.rank = r;
        co.size = n;
        co.secret = job.secret;
        co.connect_timeout = kTimeout;
        clients[r] = rdv::Client::connect(co);
        me.connected = Clock::now();
        if (job.legacy) {
          me.wrong += check_column(up, r, clients[r]->exchange("bench", up.rows[r], kTimeout));
        } else {
          for (int round = 0; round < 2; ++round) {
            const auto g = clients[r]->gather(round == 0 ? kLayout : kGroups,
                                              round == 0 ? std::span(up.records[r])
                                                         : std::span<const std::uint8_t>(),
                                              kPortBytes, up.ports[r][round], kTimeout);
            me.wrong += check_gather(up, r, round, g);
            me.down_bytes += wire::kHeaderBytes + g.payload.size();
          }
        }
        me.done = Clock::now();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  ready.arrive_and_wait();  // every rank thread exists and waits at the start line
  *t0 = Clock::now();
  go.count_down();
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  for (auto& c : clients) c->goodbye();
}

// ---- ranks driven by one event loop --------------------------------------------------------

// One rank's connection: what it waits for, its partial input and its unsent output.
struct Conn {
  enum class Stage { kConnecting, kHello, kAuth, kRequest, kGoodbye, kDone };
  int fd = -1;
  Stage stage = Stage::kConnecting;
  int step = 0;  // requests answered so far
  std::array<std::uint8_t, wire::kHeaderBytes> head{};
  std::size_t head_got = 0;
  wire::Header header;
  rdv::Bytes payload;
  std::size_t payload_got = 0;
  rdv::Bytes out;
  std::size_t out_sent = 0;
};

class Driver {
 public:
  Driver(const Job& job, const Uploads& up, std::vector<Rank>& ranks)
      : job_(job), up_(up), ranks_(ranks), conns_(job.n) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) throw std::runtime_error(fmt::format("epoll_create1: {}", strerror(errno)));
  }
  ~Driver() {
    for (auto& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
    }
    ::close(epfd_);
  }

  // Connects every rank at once and runs them until each has its answers.
  void run_job() {
    for (int r = 0; r < job_.n; ++r) open(r);
    loop(Conn::Stage::kGoodbye, "the exchange");
  }

  // Every rank says goodbye (as the clients do), so the server sees no drops.
  void say_goodbye() {
    for (int r = 0; r < job_.n; ++r) {
      send(r, wire::encode_frame(wire::Op::kGoodbye, wire::Status::kOk, 0xFFFFFFF0u, {}));
    }
    loop(Conn::Stage::kDone, "goodbye");
  }

 private:
  [[noreturn]] void fail(int r, const std::string& what) const {
    throw std::runtime_error(fmt::format("rank {} ({}): {}", r, job_.server, what));
  }

  void open(int r) {
    Conn& c = conns_[r];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) fail(r, fmt::format("socket: {}", strerror(errno)));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(job_.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
      fail(r, fmt::format("connect: {}", strerror(errno)));
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u32 = static_cast<std::uint32_t>(r);
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
      fail(r, fmt::format("epoll_ctl: {}", strerror(errno)));
    }
  }

  // Runs until every rank has reached `until`, or the deadline passes.
  void loop(Conn::Stage until, const char* what) {
    const auto deadline = Clock::now() + kTimeout;
    std::vector<epoll_event> events(1024);
    until_ = until;
    reached_ = 0;
    for (const Conn& c : conns_) reached_ += c.stage >= until ? 1 : 0;
    while (reached_ < job_.n) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        int late = 0;
        for (const Conn& c : conns_) late += c.stage < until ? 1 : 0;
        throw std::runtime_error(fmt::format("{} ranks did not finish {} within {} s", late, what,
                                             std::chrono::seconds(kTimeout).count()));
      }
      const int k = ::epoll_wait(epfd_, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(left.count()));
      if (k < 0 && errno != EINTR)
        throw std::runtime_error(fmt::format("epoll_wait: {}", strerror(errno)));
      for (int i = 0; i < k; ++i) on_ready(static_cast<int>(events[i].data.u32));
    }
  }

  void on_ready(int r) {
    Conn& c = conns_[r];
    if (c.stage == Conn::Stage::kDone) return;
    if (c.stage == Conn::Stage::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) fail(r, fmt::format("connect: {}", strerror(err)));
      c.stage = Conn::Stage::kHello;
    }
    flush(r);
    receive(r);
  }

  void send(int r, rdv::Bytes frame) {
    Conn& c = conns_[r];
    if (c.out_sent < c.out.size()) {
      c.out.insert(c.out.end(), frame.begin(), frame.end());
    } else {
      c.out = std::move(frame);
      c.out_sent = 0;
    }
    flush(r);
  }

  void flush(int r) {
    Conn& c = conns_[r];
    while (c.out_sent < c.out.size()) {
      const ssize_t k =
          ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (k > 0) {
        c.out_sent += static_cast<std::size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes it
      fail(r, fmt::format("send: {}", strerror(errno)));
    }
    // Sent: the memory goes back for the next rank's frame (kept, 4096 uploads would be fresh
    // pages each).
    rdv::Bytes().swap(c.out);
    c.out_sent = 0;
  }

  // Reads whole frames until the socket has nothing more.
  void receive(int r) {
    Conn& c = conns_[r];
    for (;;) {
      std::uint8_t* at;
      std::size_t want;
      if (c.head_got < c.head.size()) {
        at = c.head.data() + c.head_got;
        want = c.head.size() - c.head_got;
      } else {
        at = c.payload.data() + c.payload_got;
        want = c.payload.size() - c.payload_got;
      }
      const ssize_t k = ::recv(c.fd, at, want, 0);
      if (k == 0) {
        if (c.stage == Conn::Stage::kGoodbye) {
          advance(c, Conn::Stage::kDone);  // the server closed after answering GOODBYE
          return;
        }
        fail(r, "the server closed the connection");
      }
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        fail(r, fmt::format("recv: {}", strerror(errno)));
      }
      if (c.head_got < c.head.size()) {
        c.head_got += static_cast<std::size_t>(k);
        if (c.head_got < c.head.size()) continue;
        std::string why;
        if (wire::decode_header(c.head, wire::kDefaultMaxFrameBytes, &c.header, &why) !=
            wire::Status::kOk) {
          fail(r, "protocol error: " + why);
        }
        c.payload.resize(c.header.payload_bytes);
        c.payload_got = 0;
      } else {
        c.payload_got += static_cast<std::size_t>(k);
      }
      if (c.payload_got < c.payload.size()) continue;
      c.head_got = 0;
      on_frame(r);
      if (c.stage == Conn::Stage::kDone) return;
    }
  }

  void advance(Conn& c, Conn::Stage stage) {
    c.stage = stage;
    if (stage == until_) ++reached_;
  }

  void expect(int r, wire::Op op, std::uint32_t id) {
    const wire::Header& h = conns_[r].header;
    if (h.op == op && h.status == wire::Status::kOk && h.request_id == id) return;
    std::string msg;
    if (h.status != wire::Status::kOk) {
      try {
        msg = ": " + wire::decode_message(conns_[r].payload);
      } catch (const wire::DecodeError&) {
        msg = " (unreadable message)";
      }
    }
    fail(r, fmt::format("expected {} OK with id {}, got {} {} with id {}{}", wire::op_name(op), id,
                        wire::op_name(h.op), wire::status_name(h.status), h.request_id, msg));
  }

  void on_frame(int r) {
    Conn& c = conns_[r];
    Rank& me = ranks_[r];
    switch (c.stage) {
      case Conn::Stage::kHello: {
        expect(r, wire::Op::kHello, 0);
        const wire::Hello hello = wire::decode_hello(c.payload);
        const wire::AuthRequest auth{r, job_.n, rdv::auth_proof(job_.secret, hello.nonce, r)};
        c.stage = Conn::Stage::kAuth;
        send(r, wire::encode_frame(wire::Op::kAuth, wire::Status::kOk, 0, wire::encode(auth)));
        return;
      }
      case Conn::Stage::kAuth:
        expect(r, wire::Op::kAuth, 0);
        me.connected = Clock::now();
        c.stage = Conn::Stage::kRequest;
        return request(r);
      case Conn::Stage::kRequest:
        me.down_bytes += wire::kHeaderBytes + c.payload.size();
        if (job_.legacy) {
          expect(r, wire::Op::kExchange, 1);
          me.wrong += check_column(up_, r, wire::decode_slices(c.payload));
        } else {
          expect(r, wire::Op::kGather, static_cast<std::uint32_t>(c.step + 1));
          const auto g = rdv::decode_gather_answer(r, job_.n, c.step == 0 ? kLayout : kGroups,
                                                   job_.server, kPortBytes, std::move(c.payload));
          me.wrong += check_gather(up_, r, c.step, g);
          c.payload = {};
        }
        ++c.step;
        if (c.step < (job_.legacy ? 1 : 2)) return request(r);
        me.done = Clock::now();
        return advance(c, Conn::Stage::kGoodbye);
      case Conn::Stage::kGoodbye:
        expect(r, wire::Op::kGoodbye, 0xFFFFFFF0u);
        return advance(c, Conn::Stage::kDone);
      default: fail(r, fmt::format("unexpected {} frame", wire::op_name(c.header.op)));
    }
  }

  // Sends the rank's next request (GATHER layout, GATHER groups, or the legacy EXCHANGE).
  void request(int r) {
    Conn& c = conns_[r];
    const auto id = static_cast<std::uint32_t>(c.step + 1);
    if (job_.legacy) {
      send(r, wire::encode_frame(wire::Op::kExchange, wire::Status::kOk, id,
                                 wire::encode_exchange("bench",
                                                       std::chrono::milliseconds(kTimeout).count(),
                                                       up_.rows[r])));
      return;
    }
    const bool layout = c.step == 0;
    const rdv::Bytes payload = rdv::encode_gather_call(r, job_.n, layout ? kLayout : kGroups,
                                                       layout ? std::span(up_.records[r])
                                                              : std::span<const std::uint8_t>(),
                                                       kPortBytes, up_.ports[r][c.step], kTimeout);
    send(r, wire::encode_frame(wire::Op::kGather, wire::Status::kOk, id, payload));
  }

  const Job& job_;
  const Uploads& up_;
  std::vector<Rank>& ranks_;
  std::vector<Conn> conns_;
  int epfd_ = -1;
  Conn::Stage until_ = Conn::Stage::kDone;  // what loop() waits for every rank to reach
  int reached_ = 0;                         // ranks that have
};

Result run(int n, bool legacy, bool threads) {
  raise_fd_limit(n);
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  rdv::ServerOptions so;
  so.size = n;
  so.secret = rdv::generate_secret();
  rdv::Server server(io, so);
  std::thread io_thread([&] { io.run(); });
  // The server's thread is joined however this ends.
  struct Joiner {
    rdv::Server& server;
    decltype(work)& guard;
    std::thread& thread;
    ~Joiner() {
      server.stop();
      guard.reset();
      thread.join();
    }
  } joiner{server, work, io_thread};
  const Job job{n, legacy, server.port(), so.secret, fmt::format("127.0.0.1:{}", server.port())};

  Uploads up;
  for (int r = 0; r < n; ++r) {
    if (legacy) {
      up.rows.emplace_back();
      up.rows[r].reserve(n);
      for (int to = 0; to < n; ++to) up.rows[r].push_back(make_slice(r, to));
      continue;
    }
    up.records.push_back(make_record(r, n));
    up.record_offsets.push_back(up.all_records.size());
    up.all_records.insert(up.all_records.end(), up.records[r].begin(), up.records[r].end());
    up.ports.push_back({ports(0, n, r, false), ports(1, n, r, false)});
    up.columns.push_back({ports(0, n, r, true), ports(1, n, r, true)});
  }
  std::vector<Rank> ranks(n);
  Clock::time_point t0;
  double cpu0 = 0;
  double server_cpu = 0;
  double all_cpu = 0;
  if (threads) {
    // The threads are started (and the clock) inside; their start-up counts as the ranks'.
    cpu0 = thread_cpu_ms(io_thread);
    all_cpu = process_cpu_ms();
    drive_with_threads(job, up, ranks, &t0);
    server_cpu = thread_cpu_ms(io_thread) - cpu0;
    all_cpu = process_cpu_ms() - all_cpu;
  } else {
    Driver driver(job, up, ranks);
    cpu0 = thread_cpu_ms(io_thread);
    all_cpu = process_cpu_ms();
    t0 = Clock::now();
    driver.run_job();
    server_cpu = thread_cpu_ms(io_thread) - cpu0;
    all_cpu = process_cpu_ms() - all_cpu;
    driver.say_goodbye();
  }
  Clock::time_point last_connected = t0;
  Clock::time_point last_done = t0;
  for (const Rank& rank : ranks) {
    last_connected = std::max(last_connected, rank.connected);
    last_done = std::max(last_done, rank.done);
  }
  long wrong = 0;
  for (const Rank& rank : ranks) wrong += rank.wrong;
  std::size_t up_bytes = 0;
  std::size_t down_bytes = 0;
  if (legacy) {
    wire::ExchangeRequest req{"bench", 0, up.rows[0]};
    up_bytes = wire::kHeaderBytes + wire::encode(req).size();
    down_bytes = wire::kHeaderBytes + wire::slices_wire_bytes(up.rows[0]);
  } else {
    up_bytes =
        2 * wire::kHeaderBytes +
        wire::encode_gather(kLayout, 0, up.records[0], kPortBytes, n, up.ports[0][0]).size() +
        wire::encode_gather(kGroups, 0, {}, kPortBytes, n, up.ports[0][1]).size();
    down_bytes = ranks[0].down_bytes;
  }

  auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - t0).count();
  };
  return {n,        ms(last_connected), ms(last_done), server_cpu, all_cpu - server_cpu,
          up_bytes, down_bytes,         wrong};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  bool legacy = false;
  bool threads = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--legacy") == 0) {
      legacy = true;
      continue;
    }
    if (std::strcmp(argv[i], "--threads") == 0) {
      threads = true;
      continue;
    }
    int n = std::atoi(argv[i]);
    if (n < 1) {
      std::fprintf(stderr,
                   "usage: %s [--legacy] [--threads] [N ...]   (N >= 1; default 64 256 1024)\n",
                   argv[0]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {64, 256, 1024};
  // Per-connection info lines would swamp the table.
  hora::rdv::logger()->set_level(spdlog::level::warn);

  const char* driven = threads ? "one thread and rdv::Client per rank" : "ranks in one event loop";
  if (legacy) {
    std::printf("# legacy: one EXCHANGE of %zu-byte slices per rank pair, 127.0.0.1, %s\n",
                kSliceBytes, driven);
  } else {
    std::printf(
        "# mesh: GATHER of a %zu-byte record (%d ranks per host) + %zu bytes per peer, then "
        "GATHER of %zu bytes per peer; 127.0.0.1, %s\n",
        make_record(0, 1).size(), kRanksPerHost, kPortBytes, kPortBytes, driven);
  }
  std::printf("%6s %12s %22s %16s %15s %12s %12s %7s\n", "N", "connect(ms)", "connect+exchange(ms)",
              "server CPU(ms)", "ranks CPU(ms)", "up B/rank", "down B/rank", "#wrong");
  int status = 0;
  for (int n : sizes) {
    try {
      auto r = run(n, legacy, threads);
      std::printf("%6d %12.1f %22.1f %16.1f %15.1f %12zu %12zu %7ld\n", r.n, r.connect_ms,
                  r.total_ms, r.server_cpu_ms, r.ranks_cpu_ms, r.up_bytes, r.down_bytes, r.wrong);
      std::fflush(stdout);
      if (r.wrong != 0) status = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "N = %d failed: %s\n", n, e.what());
      status = 1;
    }
  }
  return status;
}
