// rendezvous_bench: N simulated ranks in one process connect to a real rendezvous server on
// 127.0.0.1 and do the address exchange hora::init() uses to connect its Gloo mesh. Prints, per
// N: the time until every rank has connected and authenticated (all ranks connect at once, as
// in a job), the time until every rank has its answers, and the bytes each rank sends and
// receives (whole frames, headers included), and the CPU time the server's io thread used
// meanwhile (the part a real job pays on the launcher; the rest is the simulated ranks, 2N
// threads of this one process, waiting for a core). Every answer is checked (outside the timed
// part).
//
// Two modes:
//   mesh (default)  what libhora does now (runtime/gloo/mesh.cc): two GATHERs, "layout" with a
//                   kRecordBytes record per rank and 4 bytes (two ports) per peer, then "groups"
//                   with no record and 4 bytes per peer.
//   --legacy        what it did before: one EXCHANGE of 136-byte slices (a whole Gloo TCP
//                   address) per rank pair.
//
// Each rank is one thread (plus its client's reader thread), so the server sees N independent
// connections, as in a real job.
//
//   rendezvous_bench [--legacy] [N ...]      default: 64 256 1024
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "rendezvous/client.h"
#include "rendezvous/log.h"
#include "rendezvous/secret.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

namespace rdv = hora::rdv;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSliceBytes = 136;  // legacy: a Gloo TCP address
// mesh: a RankRecord (runtime/gloo/mesh_record.h) with an IPv4 address and a 14-byte host name.
constexpr std::size_t kRecordBytes = 50;
constexpr std::size_t kPortBytes = 4;
constexpr auto kTimeout = 120s;

rdv::Bytes make_record(int rank) {
  rdv::Bytes s(kRecordBytes);
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(rank * 13 + i);
  std::memcpy(s.data(), &rank, sizeof rank);
  return s;
}

// The 4 bytes rank `from` addresses to rank `to` in gather number `round`.
std::uint8_t port_byte(int round, int from, int to, std::size_t k) {
  return static_cast<std::uint8_t>(round * 101 + from * 31 + to * 7 + static_cast<int>(k));
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
  std::size_t up_bytes;
  std::size_t down_bytes;
  long wrong;
};

// Per rank: connect, then the exchange(s). Returns nothing; fills the rank's results.
struct Rank {
  std::unique_ptr<rdv::Client> client;
  Clock::time_point connected;
  Clock::time_point done;
  std::vector<rdv::Bytes> column;          // legacy
  std::vector<rdv::GatherResult> gathers;  // mesh: layout, groups
  std::string error;
};

Result run(int n, bool legacy) {
  raise_fd_limit(n);
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  rdv::ServerOptions so;
  so.size = n;
  so.secret = rdv::generate_secret();
  rdv::Server server(io, so);
  std::thread io_thread([&] { io.run(); });

  // Everything a rank uploads is made before the clock starts.
  std::vector<std::vector<rdv::Bytes>> rows(legacy ? n : 0);
  std::vector<std::vector<rdv::Bytes>> ports(legacy ? 0 : n);
  for (int r = 0; r < n; ++r) {
    if (legacy) {
      rows[r].reserve(n);
      for (int to = 0; to < n; ++to) rows[r].push_back(make_slice(r, to));
      continue;
    }
    for (int round = 0; round < 2; ++round) {
      rdv::Bytes slices(static_cast<std::size_t>(n) * kPortBytes);
      for (int to = 0; to < n; ++to) {
        for (std::size_t k = 0; k < kPortBytes; ++k) {
          slices[to * kPortBytes + k] = port_byte(round, r, to, k);
        }
      }
      ports[r].push_back(std::move(slices));
    }
  }
  std::vector<Rank> ranks(n);
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
        co.port = server.port();
        co.rank = r;
        co.size = n;
        co.secret = so.secret;
        co.connect_timeout = kTimeout;
        me.client = rdv::Client::connect(co);
        me.connected = Clock::now();
        if (legacy) {
          me.column = me.client->exchange("bench", rows[r], kTimeout);
        } else {
          const rdv::Bytes record = make_record(r);
          me.gathers.push_back(
              me.client->gather("hora/mesh/layout", record, kPortBytes, ports[r][0], kTimeout));
          me.gathers.push_back(
              me.client->gather("hora/mesh/groups", {}, kPortBytes, ports[r][1], kTimeout));
        }
        me.done = Clock::now();
      } catch (const std::exception& e) {
        me.error = e.what();
      }
    });
  }
  ready.arrive_and_wait();  // every rank thread exists and waits at the start line
  const double cpu0 = thread_cpu_ms(io_thread);
  auto t0 = Clock::now();
  go.count_down();
  for (auto& t : threads) t.join();
  const double server_cpu = thread_cpu_ms(io_thread) - cpu0;
  Clock::time_point last_connected = t0;
  Clock::time_point last_done = t0;
  long wrong = 0;
  for (int r = 0; r < n; ++r) {
    if (!ranks[r].error.empty()) throw std::runtime_error(ranks[r].error);
    last_connected = std::max(last_connected, ranks[r].connected);
    last_done = std::max(last_done, ranks[r].done);
    for (int j = 0; j < n; ++j) {
      if (legacy) {
        if (ranks[r].column[j] != rows[j][r]) wrong++;
        continue;
      }
      const auto& layout = ranks[r].gathers[0];
      const auto& record = layout.records[j];
      if (rdv::Bytes(record.begin(), record.end()) != make_record(j)) wrong++;
      for (int round = 0; round < 2; ++round) {
        auto slice = ranks[r].gathers[round].slice(j);
        for (std::size_t k = 0; k < kPortBytes; ++k) {
          if (slice[k] != port_byte(round, j, r, k)) {
            wrong++;
            break;
          }
        }
      }
    }
  }

  std::size_t up = 0;
  std::size_t down = 0;
  if (legacy) {
    rdv::wire::ExchangeRequest req{"bench", 0, rows[0]};
    up = rdv::wire::kHeaderBytes + rdv::wire::encode(req).size();
    down = rdv::wire::kHeaderBytes + rdv::wire::slices_wire_bytes(rows[0]);
  } else {
    const rdv::Bytes record = make_record(0);
    up =
        2 * rdv::wire::kHeaderBytes +
        rdv::wire::encode_gather("hora/mesh/layout", 0, record, kPortBytes, n, ports[0][0]).size() +
        rdv::wire::encode_gather("hora/mesh/groups", 0, {}, kPortBytes, n, ports[0][1]).size();
    down = 2 * rdv::wire::kHeaderBytes + ranks[0].gathers[0].payload.size() +
           ranks[0].gathers[1].payload.size();
  }

  for (auto& rank : ranks) rank.client->goodbye();
  ranks.clear();
  server.stop();
  work.reset();
  io_thread.join();
  auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - t0).count();
  };
  return {n, ms(last_connected), ms(last_done), server_cpu, up, down, wrong};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  bool legacy = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--legacy") == 0) {
      legacy = true;
      continue;
    }
    int n = std::atoi(argv[i]);
    if (n < 1) {
      std::fprintf(stderr, "usage: %s [--legacy] [N ...]   (N >= 1; default 64 256 1024)\n",
                   argv[0]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {64, 256, 1024};
  // Per-connection info lines would swamp the table.
  hora::rdv::logger()->set_level(spdlog::level::warn);

  if (legacy) {
    std::printf("# legacy: one EXCHANGE of %zu-byte slices per rank pair, 127.0.0.1, one process\n",
                kSliceBytes);
  } else {
    std::printf(
        "# mesh: GATHER of a %zu-byte record + %zu bytes per peer, then GATHER of %zu "
        "bytes per peer; 127.0.0.1, one process\n",
        kRecordBytes, kPortBytes, kPortBytes);
  }
  std::printf("%6s %12s %22s %16s %14s %14s %8s\n", "N", "connect(ms)", "connect+exchange(ms)",
              "server CPU(ms)", "up B/rank", "down B/rank", "#wrong");
  int status = 0;
  for (int n : sizes) {
    try {
      auto r = run(n, legacy);
      std::printf("%6d %12.1f %22.1f %16.1f %14zu %14zu %8ld\n", r.n, r.connect_ms, r.total_ms,
                  r.server_cpu_ms, r.up_bytes, r.down_bytes, r.wrong);
      std::fflush(stdout);
      if (r.wrong != 0) status = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "N = %d failed: %s\n", n, e.what());
      status = 1;
    }
  }
  return status;
}
