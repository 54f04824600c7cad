// rendezvous_bench: N simulated ranks in one process do one exchange of 136-byte slices (the
// size of a Gloo TCP address) against a real rendezvous server on 127.0.0.1, the step
// hora::init() uses to connect its Gloo mesh. Prints, per N: the time to connect and
// authenticate all ranks, the exchange's wall time (first upload to last column received), and
// the bytes each rank sends and receives (whole frames, headers included). Every received
// column is checked (outside the timed part).
//
// Each rank is one thread blocked in Client::exchange (plus its client's reader thread), so the
// server sees N independent connections, as in a real job.
//
//   rendezvous_bench [N ...]      default: 64 256 1024
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/client.h"
#include "rendezvous/log.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

namespace rdv = hora::rdv;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSliceBytes = 136;
constexpr auto kTimeout = 60s;

// Slice from rank `from` to rank `to`: both ranks in the first bytes, the rest a pattern.
rdv::Bytes make_slice(int from, int to) {
  rdv::Bytes s(kSliceBytes);
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(from * 31 + to * 7 + i);
  std::memcpy(s.data(), &from, sizeof from);
  std::memcpy(s.data() + sizeof from, &to, sizeof to);
  return s;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
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
    throw std::runtime_error(fmt::format("N = {} needs {} file descriptors, but RLIMIT_NOFILE is "
                                         "{} (hard limit {}); raise it with ulimit -n",
                                         n, want, rl.rlim_cur, rl.rlim_max));
  }
}

struct Result {
  int n;
  double connect_ms;
  double exchange_ms;
  std::size_t up_bytes;
  std::size_t down_bytes;
  long wrong;
};

Result run(int n) {
  raise_fd_limit(n);
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  rdv::ServerOptions so;
  so.size = n;
  so.secret = rdv::generate_secret();
  rdv::Server server(io, so);
  std::thread io_thread([&] { io.run(); });

  std::vector<std::unique_ptr<rdv::Client>> clients(n);
  auto t0 = Clock::now();
  for (int r = 0; r < n; ++r) {
    rdv::ClientOptions co;
    co.host = "127.0.0.1";
    co.port = server.port();
    co.rank = r;
    co.size = n;
    co.secret = so.secret;
    clients[r] = rdv::Client::connect(co);
  }
  double connect_ms = ms_since(t0);

  std::vector<std::vector<rdv::Bytes>> rows(n);
  for (int r = 0; r < n; ++r) {
    rows[r].reserve(n);
    for (int to = 0; to < n; ++to) rows[r].push_back(make_slice(r, to));
  }
  std::vector<std::vector<rdv::Bytes>> columns(n);
  std::vector<std::string> errors(n);
  std::latch ready(n + 1);
  std::latch go(1);
  std::vector<std::thread> ranks;
  ranks.reserve(n);
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      ready.count_down();
      go.wait();
      try {
        columns[r] = clients[r]->exchange("bench", rows[r], kTimeout);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  ready.arrive_and_wait();  // every rank thread exists and waits at the start line
  auto t1 = Clock::now();
  go.count_down();
  for (auto& t : ranks) t.join();
  double exchange_ms = ms_since(t1);
  long wrong = 0;
  for (int r = 0; r < n; ++r) {
    if (!errors[r].empty()) throw std::runtime_error(errors[r]);
    for (int j = 0; j < n; ++j) {
      if (columns[r][j] != rows[j][r]) wrong++;
    }
  }

  rdv::wire::ExchangeRequest req{"bench", 0, rows[0]};
  std::size_t up = rdv::wire::kHeaderBytes + rdv::wire::encode(req).size();
  std::size_t down = rdv::wire::kHeaderBytes + rdv::wire::slices_wire_bytes(rows[0]);

  for (auto& c : clients) c->goodbye();
  clients.clear();
  server.stop();
  work.reset();
  io_thread.join();
  return {n, connect_ms, exchange_ms, up, down, wrong};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    int n = std::atoi(argv[i]);
    if (n < 1) {
      std::fprintf(stderr, "usage: %s [N ...]   (N >= 1; default 64 256 1024)\n", argv[0]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {64, 256, 1024};
  // Per-connection info lines would swamp the table.
  hora::rdv::logger()->set_level(spdlog::level::warn);

  std::printf("# one exchange of %zu-byte slices per rank pair, 127.0.0.1, one process\n",
              kSliceBytes);
  std::printf("%6s %12s %13s %16s %16s %8s\n", "N", "connect(ms)", "exchange(ms)",
              "up B/rank", "down B/rank", "#wrong");
  int status = 0;
  for (int n : sizes) {
    try {
      auto r = run(n);
      std::printf("%6d %12.1f %13.1f %16zu %16zu %8ld\n", r.n, r.connect_ms, r.exchange_ms,
                  r.up_bytes, r.down_bytes, r.wrong);
      std::fflush(stdout);
      if (r.wrong != 0) status = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "N = %d failed: %s\n", n, e.what());
      status = 1;
    }
  }
  return status;
}
