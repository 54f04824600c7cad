// A rank program for horarun_test.sh's `mismatch` cases, public API only: every rank runs one
// synchronous collective, and the last rank (the "odd" one) passes a different count, type,
// reduce op or root. Usage:
//
//   mismatch_probe DIR CASE
//
// Each rank prints one line to stderr and exits 0 once every rank has printed (files DIR/R.done,
// so a rank that is done never closes its connections on a peer still inside the collective):
//   rank R: CLASS: what()     the collective threw (CLASS: MismatchError, TimeoutError, ...)
//   rank R: no error          it returned (silently wrong or truncated data)
// CASEs (N elements, small on Gloo's sync pairs, large over several shared-memory steps):
//   allreduce-count-{small,large,mixed}, allreduce-type, allreduce-op,
//   allgather-counts-{small,large}, broadcast-count-{small,large}, broadcast-root,
//   broadcast-type, alltoall-splits-{small,large}, reducescatter-count-{small,large},
//   reducescatter-op, barrier-vs-allreduce
#include <hora/hora.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

namespace {

constexpr std::size_t kSmall = 16;       // 64 bytes of float32: Gloo's sync pairs
constexpr std::size_t kLarge = 1 << 20;  // 4 MiB: Gloo's async path, many shm steps

std::size_t size_of_case(const std::string& c) {
  return c.size() > 6 && c.compare(c.size() - 6, 6, "-large") == 0 ? kLarge : kSmall;
}

const char* class_of(const hora::Error& e) {
  if (dynamic_cast<const hora::MismatchError*>(&e)) return "MismatchError";
  if (dynamic_cast<const hora::TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const hora::PeerFailure*>(&e)) return "PeerFailure";
  if (dynamic_cast<const hora::AbortedError*>(&e)) return "AbortedError";
  if (dynamic_cast<const hora::UsageError*>(&e)) return "UsageError";
  return "Error";
}

// Runs CASE; returns false for an unknown case.
bool run_case(const std::string& c, bool odd) {
  using hora::DataType;
  using hora::ReduceOp;
  const int n = hora::size();
  const int me = hora::rank();
  const std::size_t count = size_of_case(c);
  std::vector<float> in(count + 1, 1.0f);
  std::vector<float> out(static_cast<std::size_t>(n) * (count + 1) + 1, 0.0f);
  if (c == "allreduce-count-small" || c == "allreduce-count-large") {
    hora::allreduce(in.data(), out.data(), odd ? count + 1 : count, DataType::kFloat32,
                    ReduceOp::kSum);
  } else if (c == "allreduce-count-zero") {  // the odd rank passes nothing at all
    hora::allreduce(in.data(), out.data(), odd ? 0 : count, DataType::kFloat32, ReduceOp::kSum);
  } else if (c == "allreduce-count-mixed") {  // the odd rank's is larger than any sync message
    std::vector<float> big(odd ? kLarge : kSmall, 1.0f);
    hora::allreduce(big.data(), big.data(), big.size(), DataType::kFloat32, ReduceOp::kSum);
  } else if (c == "allreduce-type") {  // the same byte count, another type
    hora::allreduce(in.data(), out.data(), count, odd ? DataType::kInt32 : DataType::kFloat32,
                    ReduceOp::kSum);
  } else if (c == "allreduce-op") {
    hora::allreduce(in.data(), out.data(), count, DataType::kFloat32,
                    odd ? ReduceOp::kMax : ReduceOp::kSum);
  } else if (c == "allgather-counts-small" || c == "allgather-counts-large") {
    // Every rank believes every rank sends `count`, but the odd rank sends (and says) one more.
    std::vector<std::size_t> counts(static_cast<std::size_t>(n), count);
    if (odd) counts[static_cast<std::size_t>(me)] = count + 1;
    hora::allgather(in.data(), counts[static_cast<std::size_t>(me)], out.data(), counts,
                    DataType::kFloat32);
  } else if (c == "broadcast-count-small" || c == "broadcast-count-large") {
    hora::broadcast(out.data(), odd ? count + 1 : count, DataType::kFloat32, 0);
  } else if (c == "broadcast-count-zero") {
    hora::broadcast(in.data(), odd ? 0 : count, DataType::kFloat32, 0);
  } else if (c == "broadcast-root") {
    hora::broadcast(out.data(), count, DataType::kFloat32, odd ? 1 : 0);
  } else if (c == "broadcast-type") {  // the same byte count, another type
    hora::broadcast(out.data(), odd ? count * 2 : count,
                    odd ? DataType::kFloat16 : DataType::kFloat32, 0);
  } else if (c == "alltoall-splits-small" || c == "alltoall-splits-large") {
    // Everyone expects `count` from everyone; the odd rank sends one more to rank 0.
    std::vector<std::size_t> send(static_cast<std::size_t>(n), count);
    const std::vector<std::size_t> recv(static_cast<std::size_t>(n), count);
    if (odd) send[0] = count + 1;
    std::vector<float> data(static_cast<std::size_t>(n) * (count + 1), 1.0f);
    hora::alltoall(data.data(), send, out.data(), recv, DataType::kFloat32);
  } else if (c == "reducescatter-count-small" || c == "reducescatter-count-large") {
    std::vector<float> data(static_cast<std::size_t>(n) * count + 1, 1.0f);
    const std::size_t total =
        odd ? static_cast<std::size_t>(n) * count + 1 : static_cast<std::size_t>(n) * count;
    hora::reducescatter(data.data(), total, out.data(), DataType::kFloat32, ReduceOp::kSum);
  } else if (c == "reducescatter-count-zero") {
    std::vector<float> data(static_cast<std::size_t>(n) * count, 1.0f);
    hora::reducescatter(data.data(), odd ? 0 : data.size(), out.data(), DataType::kFloat32,
                        ReduceOp::kSum);
  } else if (c == "reducescatter-op") {
    std::vector<float> data(static_cast<std::size_t>(n) * count, 1.0f);
    hora::reducescatter(data.data(), data.size(), out.data(), DataType::kFloat32,
                        odd ? ReduceOp::kMin : ReduceOp::kSum);
  } else if (c == "barrier-vs-allreduce") {
    if (odd) {
      hora::allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
    } else {
      hora::barrier();
    }
  } else {
    return false;
  }
  return true;
}

// Waits (with a deadline) until every rank has written DIR/R.done.
void wait_for_all(const std::string& dir, int n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    int done = 0;
    for (int r = 0; r < n; ++r) {
      if (::access((dir + "/" + std::to_string(r) + ".done").c_str(), F_OK) == 0) ++done;
    }
    if (done == n || std::chrono::steady_clock::now() >= end) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mismatch_probe DIR CASE\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string c = argv[2];
  hora::init();
  const int me = hora::rank();
  const bool odd = me == hora::size() - 1;
  std::string line;
  try {
    if (!run_case(c, odd)) {
      std::fprintf(stderr, "mismatch_probe: unknown case %s\n", c.c_str());
      return 2;
    }
    line = "no error";
  } catch (const hora::Error& e) {
    line = std::string(class_of(e)) + ": " + e.what();
  }
  std::fprintf(stderr, "rank %d: %s\n", me, line.c_str());
  std::fflush(stderr);
  std::ofstream(dir + "/" + std::to_string(me) + ".done") << "\n";
  wait_for_all(dir, hora::size());
  return 0;
}
