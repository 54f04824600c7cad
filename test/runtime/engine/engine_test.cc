// Multi-rank tests of the Engine: N threads act as N ranks over the in-process ThreadTransport
// (real semantics: shared memory and barriers with deadlines). Bodies record results; the
// assertions run on the main thread after RankHarness::run() returns.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <hora/async.h>
#include <hora/error.h>

#include "runtime/engine/engine.h"
#include "runtime/engine/op_state.h"
#include "test/read_file.h"
#include "test/runtime/engine/json_reader.h"
#include "test/runtime/engine/rank_harness.h"

using namespace hora;
using namespace hora::detail::engine;
using hora::test::fast_options;
using hora::test::RankHarness;

using hora::test::slurp;

namespace {

constexpr auto kWait = std::chrono::seconds(20);

std::string temp_path(const std::string& stem) {
  return hora::test::temp_path("hora_engine_test", stem);
}

// The error an op completed with, as text ("" = success), waiting at most kWait.
std::string outcome(const Handle& h) {
  try {
    synchronize(h, std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// A rank body that waits for each of the rank's handles, recording each failure.
std::function<void(RankHarness::Rank&)> wait_for_all(std::vector<std::vector<Handle>>& handles,
                                                     std::vector<std::string>& problems) {
  return [&](RankHarness::Rank& me) {
    for (const Handle& handle : handles[static_cast<std::size_t>(me.rank)]) {
      std::string e = outcome(handle);
      if (!e.empty()) problems[static_cast<std::size_t>(me.rank)] += e + "; ";
    }
  };
}

template <typename E>
bool fails_with(const Handle& h) {
  try {
    synchronize(h, std::chrono::duration_cast<std::chrono::milliseconds>(kWait));
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

// Tensor i of rank r: count(i) floats, element j = r + i + j (sum over ranks is checkable).
std::size_t count_of(int i) { return static_cast<std::size_t>(1 + (i * 37) % 300); }
float value(int rank, int i, std::size_t j) {
  return static_cast<float>(rank + i) + static_cast<float>(j % 7);
}
float summed(int n, int i, std::size_t j) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, i, j);
  return s;
}

}  // namespace

TEST_CASE("Ops submitted in a different order on each rank complete with correct results",
          "[engine]") {
  const int n = GENERATE(2, 3, 4);
  constexpr int kTensors = 24;
  RankHarness h(n, fast_options());
  std::vector<std::string> problems(static_cast<std::size_t>(n));
  h.run([&](RankHarness::Rank& me) {
    auto& bad = problems[static_cast<std::size_t>(me.rank)];
    std::vector<std::vector<float>> grads(kTensors);
    for (int i = 0; i < kTensors; ++i) {
      grads[static_cast<std::size_t>(i)].resize(count_of(i));
      for (std::size_t j = 0; j < count_of(i); ++j)
        grads[static_cast<std::size_t>(i)][j] = value(me.rank, i, j);
    }
    // Other collectives, each rank with its own inputs.
    std::vector<std::int32_t> gather_in(static_cast<std::size_t>(me.rank + 1), me.rank);
    std::vector<std::int32_t> gather_out;
    std::vector<double> bcast(5, me.rank == n - 1 ? 3.25 : -1.0);
    std::vector<std::size_t> splits;
    std::vector<std::int64_t> a2a_in;
    for (int q = 0; q < n; ++q) {
      splits.push_back(static_cast<std::size_t>(q + me.rank));
      for (int k = 0; k < q + me.rank; ++k) a2a_in.push_back(1000 * me.rank + q);
    }
    std::vector<std::int64_t> a2a_out;
    const std::size_t rs_count = 10;
    std::vector<std::int32_t> rs_in(rs_count);
    std::iota(rs_in.begin(), rs_in.end(), 0);
    std::vector<std::int32_t> rs_out(rs_count / n + 1);

    std::vector<int> order(kTensors + 4);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(),
                 std::mt19937(static_cast<unsigned>(me.rank) * 7919u + 1));
    std::map<int, Handle> handles;
    for (int i : order) {
      if (i < kTensors) {
        auto& g = grads[static_cast<std::size_t>(i)];
        handles[i] =
            me.engine->submit(make_allreduce_op("grad/" + std::to_string(i), g.data(), g.data(),
                                                g.size(), DataType::kFloat32, ReduceOp::kSum));
      } else if (i == kTensors) {
        handles[i] =
            me.engine->submit(make_allgather_op("gather", gather_in.data(), gather_in.size(),
                                                DataType::kInt32, [&](std::size_t c) -> void* {
                                                  gather_out.resize(c);
                                                  return gather_out.data();
                                                }));
      } else if (i == kTensors + 1) {
        handles[i] = me.engine->submit(
            make_broadcast_op("bcast", bcast.data(), bcast.size(), DataType::kFloat64, n - 1));
      } else if (i == kTensors + 2) {
        handles[i] =
            me.engine->submit(make_alltoall_op("a2a", a2a_in.data(), splits, DataType::kInt64,
                                               [&](std::size_t c) -> void* {
                                                 a2a_out.resize(c);
                                                 return a2a_out.data();
                                               }));
      } else {
        handles[i] =
            me.engine->submit(make_reducescatter_op("rs", rs_in.data(), rs_out.data(), rs_count,
                                                    DataType::kInt32, ReduceOp::kMax));
      }
    }
    for (auto& [i, handle] : handles) {
      std::string e = outcome(handle);
      if (!e.empty()) bad += "op " + std::to_string(i) + ": " + e + "; ";
    }
    for (int i = 0; i < kTensors; ++i) {
      for (std::size_t j = 0; j < count_of(i); ++j) {
        if (grads[static_cast<std::size_t>(i)][j] != summed(n, i, j)) {
          bad += "grad/" + std::to_string(i) + " wrong; ";
          break;
        }
      }
    }
    std::vector<std::int32_t> expect_gather;
    for (int q = 0; q < n; ++q)
      expect_gather.insert(expect_gather.end(), static_cast<std::size_t>(q + 1), q);
    if (gather_out != expect_gather) bad += "allgather wrong; ";
    std::vector<std::size_t> expect_counts;
    for (int q = 0; q < n; ++q) expect_counts.push_back(static_cast<std::size_t>(q + 1));
    if (received_counts(handles[kTensors]) != expect_counts) bad += "allgather counts wrong; ";
    if (bcast != std::vector<double>(5, 3.25)) bad += "broadcast wrong; ";
    std::vector<std::int64_t> expect_a2a;
    std::vector<std::size_t> expect_splits;
    for (int q = 0; q < n; ++q) {
      expect_splits.push_back(static_cast<std::size_t>(me.rank + q));
      for (int k = 0; k < me.rank + q; ++k) expect_a2a.push_back(1000 * q + me.rank);
    }
    if (a2a_out != expect_a2a) bad += "alltoall wrong; ";
    if (received_counts(handles[kTensors + 2]) != expect_splits) bad += "alltoall splits wrong; ";
    const std::size_t r = static_cast<std::size_t>(me.rank);
    const std::size_t block = rs_count / n + (r < rs_count % n ? 1 : 0);
    const std::size_t start = r * (rs_count / n) + std::min(r, rs_count % n);
    for (std::size_t k = 0; k < block; ++k) {
      if (rs_out[k] != static_cast<std::int32_t>(start + k)) bad += "reducescatter wrong; ";
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("size " << n << " rank " << r);
  }
}

TEST_CASE("Many small allreduces are fused into few transport calls", "[engine][fusion]") {
  constexpr int kTensors = 100;
  constexpr std::size_t kCount = 64;  // 256 bytes each
  const std::size_t threshold =
      GENERATE(std::size_t{128} << 20, std::size_t{10 * 256}, std::size_t{0});
  EngineOptions o = fast_options();
  o.fusion_threshold = threshold;
  const std::string timeline = temp_path("fusion.json");
  o.timeline_path = timeline;
  const int n = 3;
  RankHarness h(n, o);
  std::vector<std::vector<std::vector<float>>> data(n);
  std::vector<std::vector<Handle>> handles(n);
  std::vector<std::string> problems(n);
  // Submitted before the engines start: all of them meet in the first cycle.
  h.run(wait_for_all(handles, problems), [&](RankHarness::Rank& me) {
    auto& mine = data[static_cast<std::size_t>(me.rank)];
    mine.resize(kTensors);
    // Ranks submit in opposite orders; the agreed order is still the same everywhere.
    for (int k = 0; k < kTensors; ++k) {
      int i = me.rank % 2 == 0 ? k : kTensors - 1 - k;
      auto& v = mine[static_cast<std::size_t>(i)];
      v.assign(kCount, static_cast<float>(me.rank * 1000 + i));
      handles[static_cast<std::size_t>(me.rank)].push_back(
          me.engine->submit(make_allreduce_op("t" + std::to_string(i), v.data(), v.data(), kCount,
                                              DataType::kFloat32, ReduceOp::kSum)));
    }
  });
  const EngineStats s = h.engine(0).stats();
  h.shutdown_all();
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kTensors; ++i) {
      // 0*1000+i + 1000+i + 2000+i
      CHECK(data[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)][kCount - 1] ==
            static_cast<float>(3000 + 3 * i));
    }
  }
  INFO("threshold " << threshold);
  CHECK(h.transport(0).allreduce_calls.load() == static_cast<int>(s.allreduce_calls));
  if (threshold == 0) {
    CHECK(s.allreduce_calls == kTensors);
    CHECK(s.fused_tensors == 0);
  } else if (threshold == 10 * 256) {
    CHECK(s.largest_batch == 10);
    CHECK(s.allreduce_calls == kTensors / 10);
    CHECK(s.fused_tensors == kTensors);
  } else {
    CHECK(s.allreduce_calls == 1);
    CHECK(s.fused_batches == 1);
    CHECK(s.largest_batch == kTensors);
  }
  // The timeline shows the fusion: every tensor's MEMCPY_IN_FUSION_BUFFER carries the batch size.
  hora::test::JsonValue doc = hora::test::parse_json(slurp(timeline));
  std::map<std::string, int> names;
  int memcpy_in = 0, fused_100 = 0;
  for (const auto& e : doc.array) {
    names[e.find("name")->string]++;
    if (e.find("name")->string == "MEMCPY_IN_FUSION_BUFFER") {
      ++memcpy_in;
      if (e.find("args")->find("fused")->number == kTensors) ++fused_100;
    }
  }
  if (threshold == 0) {
    CHECK(memcpy_in == 0);
    CHECK(names["ALLREDUCE"] == kTensors);
  } else {
    CHECK(memcpy_in == kTensors);
    CHECK(names["MEMCPY_OUT_FUSION_BUFFER"] == kTensors);
    CHECK(fused_100 == (threshold > 10 * 256 ? kTensors : 0));
  }
  std::remove(timeline.c_str());
}

TEST_CASE("Slices of one buffer submitted in memory order are reduced where they lie",
          "[engine][fusion]") {
  constexpr int kTensors = 20;
  constexpr std::size_t kCount = 64;
  const int n = 3;
  RankHarness h(n, fast_options());
  // Ranks 0 and 2 submit the slices of one flat vector in order; rank 1 separate vectors, so
  // it goes through the fusion buffer while the others do not: the same elements line up.
  std::vector<std::vector<float>> flat(n, std::vector<float>(kTensors * kCount));
  std::vector<std::vector<std::vector<float>>> apart(n);
  std::vector<std::vector<Handle>> handles(n);
  std::vector<std::string> problems(n);
  h.run(wait_for_all(handles, problems), [&](RankHarness::Rank& me) {
    const auto r = static_cast<std::size_t>(me.rank);
    apart[r].resize(kTensors);
    for (int i = 0; i < kTensors; ++i) {
      float* v = flat[r].data() + static_cast<std::size_t>(i) * kCount;
      if (me.rank == 1) {
        apart[r][static_cast<std::size_t>(i)].resize(kCount);
        v = apart[r][static_cast<std::size_t>(i)].data();
      }
      std::fill(v, v + kCount, static_cast<float>(me.rank * 1000 + i));
      handles[r].push_back(
          me.engine->submit(make_allreduce_op("slice" + std::to_string(i), v, v, kCount,
                                              DataType::kFloat32, ReduceOp::kSum)));
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(problems[i].empty());
    const EngineStats s = h.engine(r).stats();
    CHECK(s.fused_tensors == kTensors);
    CHECK(s.fused_in_place == (r == 1 ? 0u : 1u));
    for (int t = 0; t < kTensors; ++t) {
      const float got = r == 1 ? apart[i][static_cast<std::size_t>(t)][kCount - 1]
                               : flat[i][static_cast<std::size_t>(t) * kCount + kCount - 1];
      CHECK(got == static_cast<float>(3000 + 3 * t));  // 0*1000+t + 1000+t + 2000+t
    }
  }
}

TEST_CASE("A mismatch fails the op on every rank naming the ranks and values",
          "[engine][mismatch]") {
  const int n = 3;
  RankHarness h(n, fast_options());
  std::vector<std::vector<std::string>> errors(n);
  std::vector<std::string> later(n);
  h.run([&](RankHarness::Rank& me) {
    auto& errs = errors[static_cast<std::size_t>(me.rank)];
    std::vector<float> x(1024), y(8);
    std::vector<std::int32_t> z(8);
    // Shapes: rank 2 sends 512 of 1024.
    Handle shape =
        me.engine->submit(make_allreduce_op("x", x.data(), x.data(), me.rank == 2 ? 512 : 1024,
                                            DataType::kFloat32, ReduceOp::kSum));
    // Data types: rank 1 sends int32.
    Handle dtype = me.rank == 1
                       ? me.engine->submit(make_allreduce_op("y", z.data(), z.data(), 8,
                                                             DataType::kInt32, ReduceOp::kSum))
                       : me.engine->submit(make_allreduce_op("y", y.data(), y.data(), 8,
                                                             DataType::kFloat32, ReduceOp::kSum));
    // Broadcast roots: rank 0 says root 1.
    Handle root = me.engine->submit(
        make_broadcast_op("b", y.data(), 8, DataType::kFloat32, me.rank == 0 ? 1 : 0));
    for (const Handle* hd : {&shape, &dtype, &root}) {
      errs.push_back(fails_with<MismatchError>(*hd) ? outcome(*hd)
                                                    : "not a MismatchError: " + outcome(*hd));
    }
    // The engine keeps working afterwards.
    std::vector<float> ok(4, 1.0f);
    Handle fine = me.engine->submit(
        make_allreduce_op("ok", ok.data(), ok.data(), 4, DataType::kFloat32, ReduceOp::kSum));
    std::string e = outcome(fine);  // before reading ok: operands of + are unsequenced
    later[static_cast<std::size_t>(me.rank)] = e + (ok[0] == 3.0f ? "" : "wrong result");
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    const auto& e = errors[static_cast<std::size_t>(r)];
    REQUIRE(e.size() == 3);
    CHECK_THAT(e[0], Catch::Contains("Mismatched allreduce tensor shapes for tensor 'x': rank 0 "
                                     "sent 1024 elements but rank 2 sent 512"));
    CHECK_THAT(e[1], Catch::Contains("Mismatched allreduce data types for tensor 'y': rank 0 "
                                     "sent float32 but rank 1 sent int32"));
    CHECK_THAT(e[2], Catch::Contains("Mismatched broadcast root ranks for tensor 'b': rank 0 sent "
                                     "root 1 but rank 1 sent root 0"));
    CHECK(later[static_cast<std::size_t>(r)] == "");
  }
  CHECK(h.engine(0).stats().mismatches == 3);
}

TEST_CASE("A mismatch on a cached name is caught through the invalid bits",
          "[engine][mismatch][cache]") {
  const int n = 3;
  RankHarness h(n, fast_options());
  std::vector<std::string> first(n), second(n), third(n);
  h.run([&](RankHarness::Rank& me) {
    std::vector<float> v(100, 1.0f);
    auto submit = [&](std::size_t count) {
      return me.engine->submit(
          make_allreduce_op("w", v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum));
    };
    first[static_cast<std::size_t>(me.rank)] = outcome(submit(100));  // now cached
    me.barrier("cached");
    Handle changed = submit(me.rank == 1 ? 50 : 100);
    second[static_cast<std::size_t>(me.rank)] =
        fails_with<MismatchError>(changed) ? outcome(changed) : "not a MismatchError";
    third[static_cast<std::size_t>(me.rank)] = outcome(submit(100));
  });
  for (int r = 0; r < n; ++r) {
    CHECK(first[static_cast<std::size_t>(r)].empty());
    CHECK_THAT(second[static_cast<std::size_t>(r)],
               Catch::Contains("rank 0 sent 100 elements but rank 1 sent 50"));
    CHECK(third[static_cast<std::size_t>(r)].empty());
  }
}

TEST_CASE("Steady state uses only the bit-vector exchange once responses are cached",
          "[engine][cache]") {
  const int n = 3;
  constexpr int kTensors = 10;
  constexpr int kSteps = 20;
  const std::size_t capacity = GENERATE(std::size_t{1024}, std::size_t{4});
  EngineOptions o = fast_options();
  o.cache_capacity = capacity;
  RankHarness h(n, o);
  std::vector<std::string> problems(n);
  std::vector<EngineStats> after_first(n), after_all(n);
  std::vector<int> gathers_after_first(n), gathers_after_all(n);
  h.run([&](RankHarness::Rank& me) {
    auto& bad = problems[static_cast<std::size_t>(me.rank)];
    std::vector<std::vector<std::int64_t>> t(kTensors, std::vector<std::int64_t>(16));
    std::mt19937 rng(static_cast<unsigned>(me.rank) + 11u);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<int> order(kTensors);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<Handle> hs;
      for (int i : order) {
        auto& v = t[static_cast<std::size_t>(i)];
        std::fill(v.begin(), v.end(), me.rank + step + i);
        hs.push_back(
            me.engine->submit(make_allreduce_op("layer" + std::to_string(i), v.data(), v.data(),
                                                v.size(), DataType::kInt64, ReduceOp::kSum)));
      }
      for (const Handle& hd : hs) {
        std::string e = outcome(hd);
        if (!e.empty()) bad += e + "; ";
      }
      for (int i = 0; i < kTensors; ++i) {
        if (t[static_cast<std::size_t>(i)][15] !=
            static_cast<std::int64_t>(n * (step + i) + n * (n - 1) / 2)) {
          bad += "wrong result step " + std::to_string(step) + "; ";
        }
      }
      // Every rank finishes step 0 before reading the counters, so none is still negotiating.
      me.barrier("step");
      if (step == 0) {
        after_first[static_cast<std::size_t>(me.rank)] = me.engine->stats();
        gathers_after_first[static_cast<std::size_t>(me.rank)] =
            me.transport->gather_bytes_calls.load();
      }
    }
    after_all[static_cast<std::size_t>(me.rank)] = me.engine->stats();
    gathers_after_all[static_cast<std::size_t>(me.rank)] = me.transport->gather_bytes_calls.load();
  });
  for (int r = 0; r < n; ++r) {
    INFO("capacity " << capacity << " rank " << r);
    const auto i = static_cast<std::size_t>(r);
    CHECK(problems[i].empty());
    if (capacity >= kTensors) {
      CHECK(after_all[i].full_negotiations == after_first[i].full_negotiations);
      CHECK(gathers_after_all[i] == gathers_after_first[i]);
      CHECK(after_all[i].cache_hits == static_cast<std::uint64_t>(kTensors * (kSteps - 1)));
      CHECK(after_all[i].cycles > after_first[i].cycles);
    } else {
      // Too small a cache keeps evicting: correct results, and full negotiations continue.
      CHECK(after_all[i].full_negotiations > after_first[i].full_negotiations);
    }
  }
}

TEST_CASE("A thread that synchronizes without a timeout runs the engine's cycles itself",
          "[engine][drive]") {
  const int n = 2;
  EngineOptions o;
  o.cycle_time = std::chrono::seconds(30);  // the engine thread ticks once, at its start
  RankHarness h(n, o);
  std::vector<std::string> problems(n);
  h.run([&](RankHarness::Rank& me) {
    auto& bad = problems[static_cast<std::size_t>(me.rank)];
    std::vector<std::int32_t> v(8, me.rank + 1);
    // A first op, so the engine thread's own first cycle is over before the checked one.
    synchronize(me.engine->submit(make_allreduce_op("warm-up", v.data(), v.data(), v.size(),
                                                    DataType::kInt32, ReduceOp::kSum)));
    me.barrier("warm");
    std::thread::id ran_on;
    const Handle hd = me.engine->submit(
        make_allreduce_op("checked", v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum,
                          [&](std::exception_ptr) { ran_on = std::this_thread::get_id(); }));
    synchronize(hd);  // without a timeout: drives the cycles here
    if (ran_on != std::this_thread::get_id()) bad += "the op completed on another thread; ";
    if (v[7] != 2 * (1 + 2)) bad += "wrong result " + std::to_string(v[7]) + "; ";
    // Every rank at once: a shutdown waits for the peers' next cycle, which no tick would start.
    me.engine->shutdown();
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
  }
}

TEST_CASE("The stall check names the stalled tensor and the missing ranks", "[engine][stall]") {
  EngineOptions o = fast_options();
  o.stall_warning_time = std::chrono::milliseconds(300);
  const int n = 4;
  RankHarness h(n, o);
  const bool cached = GENERATE(false, true);
  std::vector<std::string> results(n);
  bool warned = false;
  h.run([&](RankHarness::Rank& me) {
    std::vector<float> v(8, 1.0f);
    auto submit = [&] {
      return me.engine->submit(make_allreduce_op("grad/lonely", v.data(), v.data(), 8,
                                                 DataType::kFloat32, ReduceOp::kSum));
    };
    if (cached) {  // a first round puts the name in the response cache
      results[static_cast<std::size_t>(me.rank)] = outcome(submit());
      me.barrier("cached");
    }
    if (me.rank == 1 || me.rank == 3) {
      // Ranks 1 and 3 submit only after rank 0 has logged the warning.
      me.barrier("warned");
      results[static_cast<std::size_t>(me.rank)] += outcome(submit());
      return;
    }
    Handle handle = submit();
    if (me.rank == 0) warned = h.wait_for_warning(0, "grad/lonely", kWait);
    me.barrier("warned");
    results[static_cast<std::size_t>(me.rank)] += outcome(handle);
  });
  REQUIRE(warned);
  const std::vector<std::string> w = h.warnings(0);
  CHECK_THAT(w.front(), Catch::Contains("stall check") &&
                            Catch::Contains("allreduce 'grad/lonely': missing on ranks 1, 3; "
                                            "submitted by ranks 0, 2"));
  CHECK(h.warnings(1).empty());  // only rank 0 logs
  for (int r = 0; r < n; ++r) CHECK(results[static_cast<std::size_t>(r)].empty());
}

TEST_CASE("The stall shutdown fails a stalled op with TimeoutError on the ranks that submitted it",
          "[engine][stall]") {
  EngineOptions o = fast_options();
  o.stall_warning_time = std::chrono::milliseconds(200);
  o.stall_shutdown_time = std::chrono::milliseconds(400);
  const int n = 3;
  RankHarness h(n, o);
  std::vector<std::string> results(n);
  h.run([&](RankHarness::Rank& me) {
    std::vector<float> v(8, 1.0f);
    if (me.rank != 1) {
      Handle orphan = me.engine->submit(
          make_allreduce_op("orphan", v.data(), v.data(), 8, DataType::kFloat32, ReduceOp::kSum));
      results[static_cast<std::size_t>(me.rank)] = fails_with<TimeoutError>(orphan)
                                                       ? outcome(orphan)
                                                       : "not a TimeoutError: " + outcome(orphan);
    }
    me.barrier("abandoned");
    // The name is free again and the engine keeps working.
    Handle again = me.engine->submit(
        make_allreduce_op("orphan", v.data(), v.data(), 8, DataType::kFloat32, ReduceOp::kSum));
    std::string e = outcome(again);
    if (!e.empty() || v[0] != 3.0f)
      results[static_cast<std::size_t>(me.rank)] += " | second round: " + e;
  });
  for (int r : {0, 2}) {
    CHECK_THAT(results[static_cast<std::size_t>(r)],
               Catch::Contains(
                   "allreduce 'orphan' was abandoned by the stall check: rank 1 did not "
                   "submit it") &&
                   Catch::Contains("HORA_STALL_SHUTDOWN_SECONDS") &&
                   !Catch::Contains("second round"));
  }
  CHECK(results[1].empty());
  CHECK(h.engine(0).stats().abandoned == 1);
}

TEST_CASE("The timeline is valid JSON with each op's activities", "[engine][timeline]") {
  const std::string path = temp_path("timeline.json");
  EngineOptions o = fast_options();
  o.timeline_path = path;
  o.timeline_mark_cycles = true;
  const int n = 2;
  {
    RankHarness h(n, o);
    h.run(nullptr, [&](RankHarness::Rank& me) {
      static std::vector<std::vector<float>> bufs(2 * 3, std::vector<float>(32, 1.0f));
      for (int i = 0; i < 3; ++i) {
        auto& v = bufs[static_cast<std::size_t>(me.rank * 3 + i)];
        me.engine->submit(make_allreduce_op("fused/" + std::to_string(i), v.data(), v.data(),
                                            v.size(), DataType::kFloat32, ReduceOp::kSum));
      }
    });
    h.run([&](RankHarness::Rank& me) {
      std::vector<float> b(4, static_cast<float>(me.rank));
      synchronize(
          me.engine->submit(make_broadcast_op("weights", b.data(), 4, DataType::kFloat32, 0)));
    });
    // Only rank 0 writes; the file is completed at shutdown.
    h.shutdown_all();
  }
  hora::test::JsonValue doc = hora::test::parse_json(slurp(path));
  REQUIRE(doc.kind == hora::test::JsonValue::Kind::kArray);
  std::map<int, std::string> rows;  // pid -> tensor
  std::map<std::string, std::vector<std::string>> activities;
  int cycles = 0;
  for (const auto& e : doc.array) {
    const std::string& ph = e.find("ph")->string;
    const int pid = static_cast<int>(e.find("pid")->number);
    if (ph == "M" && e.find("name")->string == "process_name")
      rows[pid] = e.find("args")->find("name")->string;
    if (ph == "X") activities[rows.at(pid)].push_back(e.find("name")->string);
    if (ph == "i" && e.find("name")->string == "CYCLE_START") ++cycles;
  }
  CHECK(cycles >= 1);
  for (int i = 0; i < 3; ++i) {
    CHECK(activities["fused/" + std::to_string(i)] ==
          std::vector<std::string>{"NEGOTIATE_ALLREDUCE", "QUEUE", "MEMCPY_IN_FUSION_BUFFER",
                                   "ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"});
  }
  CHECK(activities["weights"] ==
        std::vector<std::string>{"NEGOTIATE_BROADCAST", "QUEUE", "BROADCAST"});
  std::remove(path.c_str());
}

TEST_CASE("Shutdown with ops in flight fails them cleanly on every rank", "[engine][shutdown]") {
  const int n = 3;
  RankHarness h(n, fast_options());
  std::vector<Handle> pending(n);
  std::vector<float> v(8 * n, 1.0f);
  h.run([&](RankHarness::Rank& me) {
    // Only rank 0 and 2 submit: the op cannot complete.
    if (me.rank != 1) {
      pending[static_cast<std::size_t>(me.rank)] = me.engine->submit(
          make_allreduce_op("never", v.data() + 8 * me.rank, v.data() + 8 * me.rank, 8,
                            DataType::kFloat32, ReduceOp::kSum));
    }
  });
  // Rank 1 shuts down; its flag stops every engine in the next cycle.
  h.engine(1).shutdown();
  for (int r : {0, 2}) {
    const Handle& p = pending[static_cast<std::size_t>(r)];
    CHECK(fails_with<hora::Error>(p));
    CHECK_THAT(outcome(p),
               Catch::Contains("hora was shut down before allreduce 'never' completed") &&
                   Catch::Contains("another rank called hora::shutdown()"));
  }
  // Later submissions complete at once with the reason; a duplicate check does not apply anymore.
  std::vector<float> w(4);
  Handle late = h.engine(0).submit(
      make_allreduce_op("late", w.data(), w.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  CHECK_THAT(outcome(late), Catch::Contains("'late'") && Catch::Contains("hora was shut down"));
  CHECK(poll(late));
  h.shutdown_all();  // idempotent
}

TEST_CASE("Shutting down this rank fails its own in-flight ops", "[engine][shutdown]") {
  RankHarness h(2, fast_options());
  std::vector<float> v(8);
  Handle mine;
  bool callback_ran = false;
  std::string callback_error;
  h.run([&](RankHarness::Rank& me) {
    if (me.rank == 0) {
      mine = me.engine->submit(make_allreduce_op("solo", v.data(), v.data(), 8, DataType::kFloat32,
                                                 ReduceOp::kSum, [&](std::exception_ptr e) {
                                                   callback_ran = true;
                                                   try {
                                                     if (e) std::rethrow_exception(e);
                                                   } catch (const hora::Error& err) {
                                                     callback_error = err.what();
                                                   }
                                                 }));
    }
  });
  h.shutdown_all();
  CHECK(poll(mine));
  CHECK(callback_ran);
  CHECK_THAT(callback_error, Catch::Contains("hora was shut down before allreduce 'solo' completed "
                                             "(hora::shutdown() was called on this rank)"));
}

TEST_CASE("A transport failure fails every op in flight with the transport's error type",
          "[engine][failure]") {
  // A transport whose data plane reports a dead peer, as Gloo does when a rank dies.
  class DyingTransport : public hora::test::ThreadTransport {
   public:
    using ThreadTransport::ThreadTransport;
    void allreduce(const void*, void*, std::size_t, DataType, ReduceOp) override {
      throw PeerFailure("allreduce: peer rank 1 (127.0.0.1:4711) closed the connection", rank(),
                        "host", 1);
    }
  };
  hora::test::ThreadWorld world(2);
  DyingTransport t0(world, 0), t1(world, 1);
  EngineOptions o = fast_options();
  Engine e0(t0, o), e1(t1, o);
  std::vector<float> a(4), b(4), c(4), d(4);
  Handle x0 =
      e0.submit(make_allreduce_op("x", a.data(), a.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  Handle x1 =
      e1.submit(make_allreduce_op("x", b.data(), b.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  Handle y0 =
      e0.submit(make_allreduce_op("y", c.data(), c.data(), 4, DataType::kFloat32, ReduceOp::kMax));
  e0.start();
  e1.start();
  CHECK(fails_with<PeerFailure>(x0));
  CHECK(fails_with<PeerFailure>(x1));
  CHECK_THAT(outcome(x0),
             Catch::Contains("allreduce 'x' failed") && Catch::Contains("peer rank 1"));
  // y was in flight on rank 0 only; it fails with the same cause once the engine stops.
  CHECK(fails_with<PeerFailure>(y0));
  CHECK_THAT(outcome(y0), Catch::Contains("hora's engine stopped before allreduce 'y' completed"));
  Handle z0 =
      e0.submit(make_allreduce_op("z", d.data(), d.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  CHECK(fails_with<PeerFailure>(z0));
}

TEST_CASE("Submission checks names and arguments", "[engine][usage]") {
  RankHarness h(2, fast_options());
  std::vector<float> v(8);
  Engine& e = h.engine(0);
  Handle first =
      e.submit(make_allreduce_op("dup", v.data(), v.data(), 8, DataType::kFloat32, ReduceOp::kSum));
  CHECK_THROWS_AS(e.submit(make_allreduce_op("dup", v.data(), v.data(), 8, DataType::kFloat32,
                                             ReduceOp::kSum)),
                  UsageError);
  CHECK_THROWS_WITH(e.submit(make_allreduce_op("dup", v.data(), v.data(), 8, DataType::kFloat32,
                                               ReduceOp::kSum)),
                    Catch::Contains("'dup' is still in flight on rank 0"));
  CHECK_THROWS_WITH(e.submit(make_allreduce_op("", v.data(), v.data(), 8, DataType::kFloat32,
                                               ReduceOp::kSum)),
                    Catch::Contains("name is empty"));
  CHECK_THROWS_WITH(e.submit(make_broadcast_op("b", v.data(), 8, DataType::kFloat32, 2)),
                    Catch::Contains("root 2 is not a rank of this job (ranks 0-1)"));
  CHECK_THROWS_WITH(e.submit(make_alltoall_op("a", v.data(), {1, 2, 3}, DataType::kFloat32,
                                              [](std::size_t) -> void* { return nullptr; })),
                    Catch::Contains("send_splits has 3 entries; it needs one per rank (2)"));
  CHECK_THROWS_WITH(e.submit(make_allreduce_op("null", nullptr, v.data(), 8, DataType::kFloat32,
                                               ReduceOp::kSum)),
                    Catch::Contains("sendbuf is null"));
  // Once the other rank submits too, the first op completes and the name is free again.
  std::vector<float> w(8);
  h.run([&](RankHarness::Rank& me) {
    if (me.rank == 1) {
      synchronize(me.engine->submit(
          make_allreduce_op("dup", w.data(), w.data(), 8, DataType::kFloat32, ReduceOp::kSum)));
    }
  });
  synchronize(first);
  CHECK_NOTHROW(e.submit(
      make_allreduce_op("dup", v.data(), v.data(), 8, DataType::kFloat32, ReduceOp::kSum)));
}

TEST_CASE("Ranks with different fusion thresholds or cache capacities are told so",
          "[engine][usage]") {
  const bool fusion = GENERATE(true, false);
  hora::test::ThreadWorld world(2);
  hora::test::ThreadTransport t0(world, 0), t1(world, 1);
  EngineOptions a = fast_options(), b = fast_options();
  if (fusion) {
    b.fusion_threshold = 0;
  } else {
    b.cache_capacity = 16;
  }
  Engine e0(t0, a), e1(t1, b);
  std::vector<float> v(4), w(4);
  Handle h0 =
      e0.submit(make_allreduce_op("x", v.data(), v.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  Handle h1 =
      e1.submit(make_allreduce_op("x", w.data(), w.data(), 4, DataType::kFloat32, ReduceOp::kSum));
  e0.start();
  e1.start();
  const std::string var = fusion ? "HORA_FUSION_THRESHOLD" : "HORA_CACHE_CAPACITY";
  for (const Handle* h : {&h0, &h1}) {
    CHECK(fails_with<UsageError>(*h));
    CHECK_THAT(outcome(*h), Catch::Contains(var + " differs between ranks"));
  }
}

TEST_CASE("After uneven steps a joined rank serves the others' allreduces with zeros",
          "[engine][join]") {
  // Rank r runs r + 1 steps of one allreduce (the same name each step: the cached path, and the
  // full negotiation once a rank has joined), then joins. Every join returns the last rank.
  const int n = GENERATE(2, 3, 4);
  RankHarness h(n, fast_options());
  std::vector<std::string> problems(static_cast<std::size_t>(n));
  std::vector<int> last(static_cast<std::size_t>(n), -2);
  h.run([&](RankHarness::Rank& me) {
    auto& bad = problems[static_cast<std::size_t>(me.rank)];
    for (int step = 0; step <= me.rank; ++step) {
      std::vector<float> v(7, static_cast<float>(me.rank + 1));
      const std::string e =
          outcome(me.engine->submit(make_allreduce_op("grad", v.data(), v.data(), v.size(),
                                                      DataType::kFloat32, ReduceOp::kAverage)));
      if (!e.empty()) bad += e + "; ";
      float want = 0;  // ranks q >= step still step and send q + 1; joined ranks send zeros
      for (int q = step; q < n; ++q) want += static_cast<float>(q + 1);
      want /= static_cast<float>(n);  // Horovod divides by the whole size
      for (float x : v) {
        if (x != want) {
          bad += "step " + std::to_string(step) + ": " + std::to_string(x) +
                 " != " + std::to_string(want) + "; ";
          break;
        }
      }
    }
    Handle join = me.engine->submit(make_join_op());
    const std::string e = outcome(join);
    if (!e.empty()) {
      bad += "join: " + e + "; ";
      return;
    }
    last[static_cast<std::size_t>(me.rank)] = static_cast<int>(received_counts(join).at(0));
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(problems[static_cast<std::size_t>(r)] == "");
    // Rank n-1's last step runs only once every other rank has joined: it joins last.
    CHECK(last[static_cast<std::size_t>(r)] == n - 1);
  }
  h.shutdown_all();
}
