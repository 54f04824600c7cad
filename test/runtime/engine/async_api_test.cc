// The public async API (<hora/async.h>) through the Process's Engine, as libhora wires it: an
// engine over a one- or two-rank ThreadTransport, installed with Process::set_engine_for_test().
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include <hora/async.h>
#include <hora/error.h>

#include "runtime/engine/engine.h"
#include "runtime/process/process.h"
#include "test/runtime/engine/thread_transport.h"

using namespace hora;
using namespace hora::detail::engine;

namespace {

// One rank: every op is ready as soon as it is submitted.
struct WorldOfOne {
  hora::test::ThreadWorld world{1};
  hora::test::ThreadTransport transport{world, 0};
  std::shared_ptr<Engine> engine;
  WorldOfOne() {
    EngineOptions o;
    o.cycle_time = std::chrono::microseconds(200);
    engine = std::make_shared<Engine>(transport, o);
    engine->start();
    hora::detail::Process::instance().set_engine_for_test(engine);
  }
  ~WorldOfOne() {
    hora::detail::Process::instance().set_engine_for_test(nullptr);
    engine->shutdown();
  }
};

}  // namespace

TEST_CASE("Async functions need an installed engine", "[async]") {
  std::vector<float> v(4);
  CHECK_THROWS_AS(allreduce_async("g", v, ReduceOp::kSum), UsageError);
  CHECK_THROWS_WITH(allreduce_async("g", v, ReduceOp::kSum),
                    Catch::Contains("hora::allreduce_async('g')") &&
                        Catch::Contains("hora::init() has not been called"));
  Handle empty;
  CHECK_FALSE(empty.valid());
  CHECK_THROWS_AS(poll(empty), UsageError);
  CHECK_THROWS_AS(synchronize(empty), UsageError);
}

TEST_CASE("Every async collective works through the public API in a world of one", "[async]") {
  WorldOfOne w;
  std::vector<float> grad{1.5f, 2.5f};
  Handle a = allreduce_async("grad", grad, ReduceOp::kAverage);
  CHECK(a.name() == "grad");
  synchronize(a);
  CHECK(poll(a));
  CHECK(grad == std::vector<float>{1.5f, 2.5f});
  CHECK(received_counts(a).empty());

  std::vector<std::int32_t> in{7, 8, 9}, out;
  Handle g = allgather_async("gather", in, &out);
  synchronize(g);
  CHECK(out == in);
  CHECK(received_counts(g) == std::vector<std::size_t>{3});

  std::vector<double> b{4.0};
  synchronize(broadcast_async("bcast", b, 0));
  CHECK(b[0] == 4.0);

  std::vector<std::int64_t> a2a_in{5, 6}, a2a_out;
  Handle t = alltoall_async("a2a", a2a_in, {2}, &a2a_out);
  synchronize(t);
  CHECK(a2a_out == std::vector<std::int64_t>{5, 6});
  CHECK(received_counts(t) == std::vector<std::size_t>{2});

  std::vector<std::int32_t> rs_in{1, 2, 3}, rs_out(3);
  synchronize(
      reducescatter_async("rs", rs_in.data(), rs_out.data(), 3, DataType::kInt32, ReduceOp::kSum));
  CHECK(rs_out == rs_in);

  // The name is free once the op completed.
  synchronize(allreduce_async("grad", grad, ReduceOp::kSum));
}

TEST_CASE("Completion callbacks run once with the outcome", "[async]") {
  WorldOfOne w;
  std::vector<float> v{1.0f};
  std::atomic<int> calls{0};
  std::exception_ptr seen = std::make_exception_ptr(std::runtime_error("not called"));
  Handle h = allreduce_async("cb", v, ReduceOp::kSum, [&](std::exception_ptr e) {
    seen = e;
    calls++;
  });
  synchronize(h);
  // synchronize returns after complete() woke it; the callback runs right after on the engine
  // thread, so wait for it with a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  CHECK(calls.load() == 1);
  CHECK(seen == nullptr);

  // An allocator that throws fails the op (after the collective ran), through the callback too.
  std::exception_ptr alloc_error;
  std::atomic<bool> done{false};
  std::vector<float> in{1.0f};
  Handle bad = allgather_async(
      "bad-alloc", in.data(), 1, DataType::kFloat32,
      [](std::size_t) -> void* { throw std::bad_alloc(); },
      [&](std::exception_ptr e) {
        alloc_error = e;
        done = true;
      });
  CHECK_THROWS_WITH(synchronize(bad),
                    Catch::Contains("allgather 'bad-alloc': output allocation failed"));
  while (!done.load() && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(10))
    std::this_thread::yield();
  CHECK(alloc_error != nullptr);
}

TEST_CASE("synchronize with a timeout reports an op that is still in flight", "[async]") {
  hora::test::ThreadWorld world(2);
  hora::test::ThreadTransport t0(world, 0), t1(world, 1);
  EngineOptions o;
  o.cycle_time = std::chrono::microseconds(500);
  Engine e0(t0, o), e1(t1, o);
  e0.start();
  e1.start();
  std::vector<float> v(2, 1.0f), w(2, 2.0f);
  Handle h = e0.submit(
      make_allreduce_op("slow", v.data(), v.data(), 2, DataType::kFloat32, ReduceOp::kSum));
  CHECK_THROWS_AS(synchronize(h, std::chrono::milliseconds(50)), TimeoutError);
  CHECK_THROWS_WITH(synchronize(h, std::chrono::milliseconds(10)),
                    Catch::Contains("allreduce 'slow' did not complete within 10 ms"));
  CHECK_FALSE(poll(h));
  CHECK_THROWS_AS(received_counts(h), UsageError);
  synchronize(e1.submit(
      make_allreduce_op("slow", w.data(), w.data(), 2, DataType::kFloat32, ReduceOp::kSum)));
  synchronize(h, std::chrono::seconds(20));
  CHECK(v[0] == 3.0f);
  e0.shutdown();
  e1.shutdown();
}
