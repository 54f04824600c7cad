// A rank that rendezvouses through horarun's Horovod HTTP store exactly as Horovod 0.28.1's
// worker does (test/rendezvous/horovod/horovod_http_client.h), reading the same variables:
// HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, HOROVOD_RANK/SIZE, HOROVOD_LOCAL_RANK/SIZE,
// HOROVOD_CROSS_RANK/SIZE and HOROVOD_HOSTNAME. It forms the global, local and cross contexts,
// then the global process set's (scope suffix `_process_set_hash_<std::hash of "0,1,...,">`),
// checks every value it read, stores its slot's worker_addresses and reads its rank_and_size
// (Horovod's elastic API), and prints `horovod-store ok rank=R size=N`.
//
//   horovod_store_worker                 the above
//   horovod_store_worker rejections      rank 0 first sends an oversized body, a scope outside
//                                        the plan and a malformed request line, and checks
//                                        each is refused; then everyone does the above
//   horovod_store_worker skip-global R   rank R sleeps without ever storing anything; the others
//                                        store their address in `global` and wait for R
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

#include "test/rendezvous/horovod/horovod_http_client.h"

using hora::rdv::horovod::test::HorovodHttpClient;

namespace {

std::string need(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') throw std::runtime_error(std::string(name) + " is not set");
  return v;
}
int need_int(const char* name) { return std::stoi(need(name)); }

void expect_status(int got, int want, const std::string& what) {
  if (got != want) {
    throw std::runtime_error(what + ": expected status " + std::to_string(want) + ", got " +
                             std::to_string(got));
  }
}

void check_values(const std::vector<std::string>& all, const std::string& scope,
                  const std::function<std::string(int)>& expected) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i] != expected(static_cast<int>(i))) {
      throw std::runtime_error(scope + ": rank " + std::to_string(i) + " stored '" + all[i] +
                               "', expected '" + expected(static_cast<int>(i)) + "'");
    }
  }
}

void rejections(const HorovodHttpClient& c, const std::string& addr) {
  auto big = c.raw("PUT /global/oversized HTTP/1.1\r\nHost: " + addr +
                   "\r\nContent-Length: 104857600\r\n\r\nxx");
  if (!big) throw std::runtime_error("oversized body: no reply");
  expect_status(big->status, 413, "oversized body");
  expect_status(c.put("local_not-a-host-of-this-job", "0", "x").status, 403, "unknown scope");
  auto bad = c.raw("GARBAGE\r\n\r\n");
  if (!bad) throw std::runtime_error("malformed request line: no reply");
  expect_status(bad->status, 400, "malformed request line");
  std::printf("horovod-store rejections ok\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    const std::string addr = need("HOROVOD_GLOO_RENDEZVOUS_ADDR");
    const auto port = static_cast<std::uint16_t>(need_int("HOROVOD_GLOO_RENDEZVOUS_PORT"));
    const int rank = need_int("HOROVOD_RANK"), size = need_int("HOROVOD_SIZE");
    const int local_rank = need_int("HOROVOD_LOCAL_RANK");
    const int local_size = need_int("HOROVOD_LOCAL_SIZE");
    const int cross_rank = need_int("HOROVOD_CROSS_RANK");
    const int cross_size = need_int("HOROVOD_CROSS_SIZE");
    const std::string host = need("HOROVOD_HOSTNAME");
    HorovodHttpClient c(addr, port, std::chrono::seconds(120));

    if (mode == "skip-global") {
      if (rank == std::stoi(argv[2])) {
        ::sleep(600);
        return 0;
      }
      c.rendezvous("global", rank, size, "rank-" + std::to_string(rank));
      return 0;
    }
    if (mode == "rejections" && rank == 0) rejections(c, addr);

    const std::string me = host + "/" + std::to_string(local_rank);
    auto global = c.rendezvous("global", rank, size, "rank-" + std::to_string(rank));
    check_values(global, "global", [](int r) { return "rank-" + std::to_string(r); });
    auto local = c.rendezvous("local_" + host, local_rank, local_size, me);
    check_values(local, "local_" + host, [&](int l) { return host + "/" + std::to_string(l); });
    auto cross = c.rendezvous("cross_" + std::to_string(local_rank), cross_rank, cross_size,
                              "cross-" + std::to_string(cross_rank));
    check_values(cross, "cross", [](int x) { return "cross-" + std::to_string(x); });

    std::ostringstream ranks, hash;
    for (int r = 0; r < size; ++r) ranks << r << ",";
    hash << std::hex << std::hash<std::string>{}(ranks.str());
    const std::string suffix = "_process_set_hash_" + hash.str();
    auto set = c.rendezvous("global" + suffix, rank, size, "set-" + std::to_string(rank));
    check_values(set, "global" + suffix, [](int r) { return "set-" + std::to_string(r); });

    // Horovod's elastic API, keyed by slot: hvd.elastic.run stores the address of the rank's
    // notification service; a worker with HOROVOD_ELASTIC=1 reads its slot after a reset.
    const std::string slot = host + ":" + std::to_string(local_rank);
    expect_status(c.put("worker_addresses", slot, "gASVaddresses").status, 200, "worker_addresses");
    expect_status(c.put("worker_addresses", host + ":" + std::to_string(local_size), "x").status,
                  403, "worker_addresses of a slot the job does not have");
    const std::string expected = std::to_string(rank) + "," + std::to_string(size) + "," +
                                 std::to_string(local_rank) + "," + std::to_string(local_size) +
                                 "," + std::to_string(cross_rank) + "," +
                                 std::to_string(cross_size);
    const auto slot_info = c.get("rank_and_size", slot);
    if (slot_info.status != 200 || slot_info.body != expected) {
      throw std::runtime_error("rank_and_size/" + slot + ": " + std::to_string(slot_info.status) +
                               " '" + slot_info.body + "', expected '" + expected + "'");
    }
    std::printf("horovod-store ok rank=%d size=%d host=%s\n", rank, size, host.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "horovod_store_worker: %s\n", e.what());
    return 1;
  }
}
