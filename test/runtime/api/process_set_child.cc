// A rank process for process_set_test (public API only, <hora/process_set.h>): adds overlapping
// and disjoint process sets, runs every blocking collective and the async ones on each set this
// rank belongs to, and checks every result against what the members' inputs give when computed
// here, in one process. Then the refusals: a non-member's call, a duplicate set, a removed set,
// the global set's removal. Prints "PSET_OK rank R sets N" at the end, or "PSET_FAIL rank R:
// <what>" and exits 1 at the first wrong result.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <hora/async.h>
#include <hora/hora.h>
#include <hora/process_set.h>

namespace {

int me = -1;

[[noreturn]] void fail(const std::string& what) {
  std::printf("PSET_FAIL rank %d: %s\n", me, what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

template <typename T>
std::string text(const std::vector<T>& v) {
  std::string t;
  for (const T& x : v) t += (t.empty() ? "" : ",") + std::to_string(x);
  return "[" + t + "]";
}

// Rank r's input element i, the same formula on every rank.
double input(int r, std::size_t i) { return (r + 1) * 10.0 + static_cast<double>(i); }

void check_set(hora::ProcessSet set, const std::vector<int>& members) {
  const std::string tag = "set " + std::to_string(set.id) + " " + text(members);
  const int n = static_cast<int>(members.size());
  const int my = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  expect(hora::included(set), tag + ": included() is false on a member");
  expect(hora::rank(set) == my, tag + ": rank(set) " + std::to_string(hora::rank(set)));
  expect(hora::size(set) == n, tag + ": size(set) " + std::to_string(hora::size(set)));
  expect(hora::ranks(set) == members, tag + ": ranks(set) " + text(hora::ranks(set)));

  // allreduce: sum and average over the members only.
  const std::size_t count = 5;
  std::vector<double> x(count), want_sum(count, 0.0);
  for (std::size_t i = 0; i < count; ++i) x[i] = input(me, i);
  for (int m : members)
    for (std::size_t i = 0; i < count; ++i) want_sum[i] += input(m, i);
  std::vector<double> got(count);
  hora::allreduce(x.data(), got.data(), count, hora::DataType::kFloat64, hora::ReduceOp::kSum, set);
  expect(got == want_sum, tag + ": allreduce sum " + text(got) + " want " + text(want_sum));
  hora::allreduce(x.data(), got.data(), count, hora::DataType::kFloat64, hora::ReduceOp::kAverage,
                  set);
  for (std::size_t i = 0; i < count; ++i) {
    expect(got[i] == want_sum[i] / n, tag + ": allreduce average " + text(got));
  }

  // allgather: set rank k contributes k + 1 elements, concatenated in set-rank order.
  std::vector<double> mine(static_cast<std::size_t>(my + 1));
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = input(me, i);
  const std::vector<std::size_t> counts = hora::allgather_counts(mine.size(), set);
  std::vector<std::size_t> want_counts;
  std::vector<double> want_gather;
  for (int k = 0; k < n; ++k) {
    want_counts.push_back(static_cast<std::size_t>(k + 1));
    for (int i = 0; i <= k; ++i) want_gather.push_back(input(members[k], i));
  }
  expect(counts == want_counts, tag + ": allgather_counts " + text(counts));
  std::vector<double> gathered(want_gather.size());
  hora::allgather(mine.data(), mine.size(), gathered.data(), counts, hora::DataType::kFloat64, set);
  expect(gathered == want_gather, tag + ": allgather " + text(gathered));

  // broadcast from the last set rank (a set rank, not a global one).
  std::vector<double> b(count);
  for (std::size_t i = 0; i < count; ++i) b[i] = input(me, i);
  hora::broadcast(b.data(), count, hora::DataType::kFloat64, n - 1, set);
  for (std::size_t i = 0; i < count; ++i) {
    expect(b[i] == input(members[n - 1], i), tag + ": broadcast " + text(b));
  }

  // alltoall: set rank j receives j + 1 elements from each member, valued 100 * sender + j.
  std::vector<std::size_t> send_splits;
  std::vector<double> send;
  for (int j = 0; j < n; ++j) {
    send_splits.push_back(static_cast<std::size_t>(j + 1));
    for (int e = 0; e <= j; ++e) send.push_back(100.0 * me + j);
  }
  const std::vector<std::size_t> recv_splits = hora::alltoall_splits(send_splits, set);
  expect(recv_splits == std::vector<std::size_t>(static_cast<std::size_t>(n),
                                                 static_cast<std::size_t>(my + 1)),
         tag + ": alltoall_splits " + text(recv_splits));
  std::vector<double> received(static_cast<std::size_t>(n * (my + 1)));
  hora::alltoall(send.data(), send_splits, received.data(), recv_splits, hora::DataType::kFloat64,
                 set);
  for (int i = 0; i < n; ++i)
    for (int e = 0; e <= my; ++e) {
      expect(received[static_cast<std::size_t>(i * (my + 1) + e)] == 100.0 * members[i] + my,
             tag + ": alltoall " + text(received));
    }

  // reducescatter: this rank's block of the members' sum.
  const std::size_t rs_count = static_cast<std::size_t>(2 * n + 1);
  std::vector<double> rs_in(rs_count);
  for (std::size_t i = 0; i < rs_count; ++i) rs_in[i] = input(me, i);
  std::size_t offset = 0;
  for (int k = 0; k < my; ++k) offset += hora::reducescatter_count(rs_count, k, n);
  const std::size_t mine_count = hora::reducescatter_count(rs_count, my, n);
  std::vector<double> rs_out(mine_count);
  hora::reducescatter(rs_in.data(), rs_count, rs_out.data(), hora::DataType::kFloat64,
                      hora::ReduceOp::kSum, set);
  for (std::size_t i = 0; i < mine_count; ++i) {
    double want = 0;
    for (int m : members) want += input(m, offset + i);
    expect(rs_out[i] == want, tag + ": reducescatter " + text(rs_out));
  }

  hora::barrier(set);

  // The set's async engine: an allreduce and a broadcast, fused or not, with set ranks.
  std::vector<double> a(count);
  for (std::size_t i = 0; i < count; ++i) a[i] = input(me, i);
  std::vector<double> c = a;
  hora::Handle h1 =
      hora::allreduce_async("pset.sum", a.data(), a.data(), count, hora::DataType::kFloat64,
                            hora::ReduceOp::kSum, nullptr, set);
  hora::Handle h2 = hora::broadcast_async("pset.bcast", c.data(), count, hora::DataType::kFloat64,
                                          0, nullptr, set);
  hora::synchronize(h1);
  hora::synchronize(h2);
  expect(a == want_sum, tag + ": allreduce_async " + text(a));
  for (std::size_t i = 0; i < count; ++i) {
    expect(c[i] == input(members[0], i), tag + ": broadcast_async " + text(c));
  }
}

template <typename Body>
void expect_usage_error(const std::string& what, const std::string& needle, Body&& body) {
  try {
    body();
  } catch (const hora::UsageError& e) {
    expect(std::string(e.what()).find(needle) != std::string::npos,
           what + ": UsageError without '" + needle + "': " + e.what());
    return;
  }
  fail(what + ": no UsageError");
}

}  // namespace

int main() {
  hora::init();
  me = hora::rank();
  const int size = hora::size();

  // Overlapping and disjoint sets, as many as this size allows (none may be the whole job).
  std::vector<std::vector<int>> wanted;
  std::vector<int> evens, odds;
  for (int r = 0; r < size; ++r) (r % 2 ? odds : evens).push_back(r);
  wanted.push_back(evens);
  if (!odds.empty()) wanted.push_back(odds);
  if (size > 2) wanted.push_back({0, 1});
  if (size > 2) wanted.push_back({0, size - 1});
  if (size > 1) wanted.push_back({size - 1});
  std::vector<std::vector<int>> sets_ranks;
  std::vector<hora::ProcessSet> sets;
  for (const auto& w : wanted) {
    if (static_cast<int>(w.size()) == size) continue;
    if (std::find(sets_ranks.begin(), sets_ranks.end(), w) != sets_ranks.end()) continue;
    // Given in reverse order: add_process_set sorts.
    sets.push_back(hora::add_process_set(std::vector<int>(w.rbegin(), w.rend())));
    sets_ranks.push_back(w);
  }
  expect(static_cast<int>(hora::process_sets().size()) == 1 + static_cast<int>(sets.size()),
         "process_sets() has " + std::to_string(hora::process_sets().size()) + " entries");

  for (std::size_t s = 0; s < sets.size(); ++s) {
    const bool member = std::binary_search(sets_ranks[s].begin(), sets_ranks[s].end(), me);
    if (member) {
      check_set(sets[s], sets_ranks[s]);
    } else {
      expect(!hora::included(sets[s]) && hora::rank(sets[s]) == -1, "included() on a non-member");
      std::vector<double> v(3, 1.0);
      expect_usage_error("a non-member's allreduce", "is not in it", [&] {
        hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat64,
                        hora::ReduceOp::kSum, sets[s]);
      });
      expect_usage_error("a non-member's allreduce_async", "is not in it", [&] {
        hora::allreduce_async("x", v.data(), v.data(), v.size(), hora::DataType::kFloat64,
                              hora::ReduceOp::kSum, nullptr, sets[s]);
      });
    }
  }
  // A global collective still spans every rank, between the sets' ops.
  std::vector<double> one{1.0};
  hora::allreduce(one, hora::ReduceOp::kSum);
  expect(one[0] == size, "global allreduce after the sets: " + std::to_string(one[0]));

  if (!sets.empty()) {
    expect_usage_error("a duplicate set", "already holds these ranks",
                       [&] { hora::add_process_set(sets_ranks[0]); });
  }
  expect_usage_error("a rank out of range", "is not a rank of this job",
                     [&] { hora::add_process_set({size}); });
  expect_usage_error("removing the global set", "cannot be removed",
                     [&] { hora::remove_process_set(hora::kGlobalProcessSet); });
  for (hora::ProcessSet s : sets) hora::remove_process_set(s);
  if (!sets.empty()) {
    std::vector<double> v(1, 1.0);
    expect_usage_error("a removed set", "no process set", [&] {
      hora::allreduce(v.data(), v.data(), 1, hora::DataType::kFloat64, hora::ReduceOp::kSum,
                      sets[0]);
    });
    // Removed sets may be added again: a new id, new communicators.
    hora::ProcessSet again = hora::add_process_set(sets_ranks[0]);
    expect(again.id > sets.back().id, "re-added set's id " + std::to_string(again.id));
    if (hora::included(again)) check_set(again, sets_ranks[0]);
    hora::remove_process_set(again);
  }
  std::printf("PSET_OK rank %d sets %zu\n", me, sets.size());
  std::fflush(stdout);
  hora::shutdown();
  return 0;
}
