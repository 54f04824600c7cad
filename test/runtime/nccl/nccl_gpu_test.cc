// The NCCL backend on a real GPU: every collective and dtype with -np 1 (a world of one), in
// place and out of place, default and own stream, every scope; and the failure paths that one
// GPU can exercise: a peer that never joins (timeout), the launcher's abort while waiting, an
// abort before a collective, and two ranks on one GPU.
//
// Exits 77 (skipped) when libhora was built without NCCL or no GPU is visible.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "runtime/nccl/backend.h"

#if HORA_WITH_NCCL

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>  // driver API types; the functions come from cudart's entry-point query
#include <cuda_runtime.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <hora/error.h>
#include <hora/types.h>

#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "test/support/test_server.h"

namespace nccl = hora::detail::nccl;
using hora::DataType;
using hora::ReduceOp;
using hora::Scope;
using hora::detail::WorldInfo;
using namespace std::chrono_literals;

namespace {

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

const DataType kTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
                           DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                           DataType::kFloat32, DataType::kFloat64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};
const Scope kScopes[] = {Scope::kGlobal, Scope::kLocal, Scope::kCross};

// Device memory of `bytes`, freed on scope exit.
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    CUDA_OK(cudaMalloc(&ptr_, bytes ? bytes : 1));
    CUDA_OK(cudaMemset(ptr_, 0xAB, bytes ? bytes : 1));  // a sentinel results must overwrite
  }
  ~DeviceMemory() { cudaFree(ptr_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return ptr_; }
  char* at(std::size_t offset) const { return static_cast<char*>(ptr_) + offset; }
  void upload(const std::vector<std::uint8_t>& host, std::size_t offset = 0) {
    CUDA_OK(cudaMemcpy(at(offset), host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  std::vector<std::uint8_t> download(std::size_t offset, std::size_t bytes) const {
    std::vector<std::uint8_t> host(bytes);
    CUDA_OK(cudaMemcpy(host.data(), at(offset), bytes, cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

// `count` valid (finite, small) values of `type`, varying with the index and `seed`.
std::vector<std::uint8_t> values(DataType type, std::size_t count, int seed) {
  const std::size_t es = hora::size_of(type);
  std::vector<std::uint8_t> out(count * es);
  for (std::size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((i * 7 + static_cast<std::size_t>(seed) * 13) % 61) - 30;
    std::uint8_t* p = out.data() + i * es;
    switch (type) {
      case DataType::kUInt8: {
        auto x = static_cast<std::uint8_t>(v + 30);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kInt8: {
        auto x = static_cast<std::int8_t>(v);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kInt16: {
        auto x = static_cast<std::int16_t>(v);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kInt32: {
        auto x = static_cast<std::int32_t>(v * 1000);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kInt64: {
        auto x = static_cast<std::int64_t>(v) << 33;
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kFloat16: {
        auto x = hora::to_float16(static_cast<float>(v) * 0.5f);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kBFloat16: {
        auto x = hora::to_bfloat16(static_cast<float>(v) * 0.25f);
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kFloat32: {
        auto x = static_cast<float>(v) * 0.125f;
        std::memcpy(p, &x, es);
        break;
      }
      case DataType::kFloat64: {
        auto x = static_cast<double>(v) / 3.0;
        std::memcpy(p, &x, es);
        break;
      }
    }
  }
  return out;
}

WorldInfo world_of_one() {
  WorldInfo w;
  w.hostname = "gpuhost";
  return w;
}

using hora::test::TestServer;

// Rank r of 2 ranks on 2 hosts (1 rank each): both have local rank 0, so both pick GPU 0.
WorldInfo world_of_two(int rank) {
  WorldInfo w;
  w.rank = rank;
  w.size = 2;
  w.host_index = rank;
  w.cross_rank = rank;
  w.cross_size = 2;
  w.hostname = "host" + std::to_string(rank);
  w.rendezvous_host = "127.0.0.1";
  return w;
}

}  // namespace

// Whether device 0's primary context is active (the driver's view; creates nothing).
bool primary_context_active() {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  void* get = nullptr;
  void* state = nullptr;
  cudaDriverEntryPointQueryResult r1{}, r2{};
  REQUIRE(cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &r1) ==
          cudaSuccess);
  REQUIRE(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000,
                                           cudaEnableDefault, &r2) == cudaSuccess);
  CUdevice device{};
  REQUIRE(reinterpret_cast<DeviceGet>(get)(&device, 0) == CUDA_SUCCESS);
  unsigned int flags = 0;
  int active = 0;
  REQUIRE(reinterpret_cast<PrimaryCtxGetState>(state)(device, &flags, &active) == CUDA_SUCCESS);
  return active != 0;
}

// Declared first, so it runs before any test allocates GPU memory.
TEST_CASE("classifying host buffers before any CUDA use creates no CUDA context") {
  if (primary_context_active()) {
    WARN("a CUDA context already exists; run this test case alone to check it");
    return;
  }
  std::vector<float> host(16);
  CHECK_FALSE(nccl::is_device_pointer(host.data()));
  CHECK_FALSE(primary_context_active());  // a CPU-only job keeps its GPUs untouched
}

TEST_CASE("buffers are classified by where they live") {
  DeviceMemory device(64);
  void* managed = nullptr;
  void* pinned = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 64));
  CUDA_OK(cudaMallocHost(&pinned, 64));
  std::vector<char> pageable(64);

  CHECK(nccl::is_device_pointer(device.get()));
  CHECK(nccl::pointer_info(device.get()).device == 0);
  CHECK(nccl::is_device_pointer(managed));
  CHECK(nccl::pointer_info(managed).managed);
  CHECK_FALSE(nccl::is_device_pointer(pinned));
  CHECK_FALSE(nccl::is_device_pointer(pageable.data()));
  CHECK_FALSE(nccl::is_device_pointer(nullptr));
  CHECK(cudaGetLastError() == cudaSuccess);  // the queries left no error behind

  cudaFree(managed);
  cudaFreeHost(pinned);
}

TEST_CASE("allreduce: every dtype and op, in and out of place, every scope") {
  nccl::Backend backend(world_of_one(), 30s);
  const std::size_t count = 1001;
  for (Scope scope : kScopes) {
    for (DataType type : kTypes) {
      for (ReduceOp op : kOps) {
        INFO(hora::name_of(scope) << " " << hora::name_of(type) << " " << hora::name_of(op));
        const std::size_t bytes = count * hora::size_of(type);
        auto input = values(type, count, static_cast<int>(op));
        DeviceMemory send(bytes), recv(bytes);
        send.upload(input);
        // One rank: sum, avg, min, max and prod of a single contribution are the contribution.
        backend.allreduce(send.get(), recv.get(), count, type, op, scope, nullptr);
        CHECK(recv.download(0, bytes) == input);
        backend.allreduce(send.get(), send.get(), count, type, op, scope, nullptr);
        CHECK(send.download(0, bytes) == input);
      }
    }
  }
}

TEST_CASE("collectives on a stream of the caller complete before returning") {
  nccl::Backend backend(world_of_one(), 30s);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t count = 1 << 20;
  const DataType type = DataType::kFloat32;
  auto input = values(type, count, 3);
  DeviceMemory send(count * 4), recv(count * 4);
  send.upload(input);
  backend.allreduce(send.get(), recv.get(), count, type, ReduceOp::kSum, Scope::kGlobal, stream);
  // Returned means done: the stream has nothing left, and the result is there.
  CHECK(cudaStreamQuery(stream) == cudaSuccess);
  CHECK(recv.download(0, count * 4) == input);
  backend.barrier(Scope::kGlobal, stream);
  CHECK(cudaStreamQuery(stream) == cudaSuccess);
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST_CASE("allgather, broadcast, alltoall, reducescatter: every dtype") {
  nccl::Backend backend(world_of_one(), 30s);
  const std::size_t count = 517;
  for (DataType type : kTypes) {
    INFO(hora::name_of(type));
    const std::size_t bytes = count * hora::size_of(type);
    auto input = values(type, count, 5);
    {
      DeviceMemory send(bytes), recv(bytes);
      send.upload(input);
      backend.allgather(send.get(), count, recv.get(), {count}, type, Scope::kGlobal, nullptr);
      CHECK(recv.download(0, bytes) == input);
      backend.allgather(recv.get(), count, recv.get(), {count}, type, Scope::kLocal, nullptr);
      CHECK(recv.download(0, bytes) == input);
    }
    {
      DeviceMemory buf(bytes);
      buf.upload(input);
      backend.broadcast(buf.get(), count, type, 0, Scope::kCross, nullptr);
      CHECK(buf.download(0, bytes) == input);
    }
    {
      DeviceMemory send(bytes), recv(bytes);
      send.upload(input);
      backend.alltoall(send.get(), {count}, recv.get(), {count}, type, Scope::kGlobal, nullptr);
      CHECK(recv.download(0, bytes) == input);
    }
    for (ReduceOp op : kOps) {
      INFO(hora::name_of(op));
      DeviceMemory send(bytes), recv(bytes);
      send.upload(input);
      backend.reducescatter(send.get(), count, recv.get(), type, op, Scope::kGlobal, nullptr);
      CHECK(recv.download(0, bytes) == input);
      backend.reducescatter(send.get(), count, send.get(), type, op, Scope::kLocal, nullptr);
      CHECK(send.download(0, bytes) == input);
    }
  }
  backend.barrier(Scope::kGlobal, nullptr);
  backend.barrier(Scope::kLocal, nullptr);
  backend.barrier(Scope::kCross, nullptr);
}

TEST_CASE("allgather whose sendbuf overlaps recvbuf elsewhere is staged, not corrupted") {
  // One rank, so its block is at offset 0: sendbuf one element into recvbuf overlaps it without
  // being the in-place layout.
  nccl::Backend backend(world_of_one(), 30s);
  const std::size_t count = 100;
  const DataType type = DataType::kInt32;
  auto input = values(type, count, 9);
  DeviceMemory buf((count + 1) * 4);
  buf.upload(input, 4);
  backend.allgather(buf.at(4), count, buf.get(), {count}, type, Scope::kGlobal, nullptr);
  CHECK(buf.download(0, count * 4) == input);
}

TEST_CASE("bad arguments are usage errors that do not touch the communicator") {
  nccl::Backend backend(world_of_one(), 30s);
  DeviceMemory a(64), b(64);
  CHECK_THROWS_AS(backend.broadcast(a.get(), 4, DataType::kInt32, 1, Scope::kGlobal, nullptr),
                  hora::UsageError);
  CHECK_THROWS_AS(backend.allgather(a.get(), 4, b.get(), {4, 4}, DataType::kInt32, Scope::kGlobal,
                                    nullptr),
                  hora::UsageError);
  CHECK_THROWS_AS(backend.alltoall(a.get(), {4}, a.get(), {4}, DataType::kInt32, Scope::kGlobal,
                                   nullptr),
                  hora::UsageError);
  CHECK_THROWS_AS(backend.allreduce(nullptr, b.get(), 4, DataType::kInt32, ReduceOp::kSum,
                                    Scope::kGlobal, nullptr),
                  hora::UsageError);
  // Still usable.
  backend.allreduce(a.get(), b.get(), 4, DataType::kInt32, ReduceOp::kSum, Scope::kGlobal, nullptr);
}

TEST_CASE("HORA_CUDA_DEVICE out of range is a usage error naming it") {
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  const std::string bad = std::to_string(devices);
  setenv("HORA_CUDA_DEVICE", bad.c_str(), 1);
  nccl::Backend backend(world_of_one(), 30s);
  try {
    backend.device();
    FAIL("an out-of-range device was accepted");
  } catch (const hora::UsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("HORA_CUDA_DEVICE=\"" + bad + "\""));
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 0 of 1 on gpuhost"));
  }
  unsetenv("HORA_CUDA_DEVICE");
}

TEST_CASE("after abort() every collective throws AbortedError with the reason") {
  nccl::Backend backend(world_of_one(), 30s);
  DeviceMemory a(64);
  backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal,
                    nullptr);
  backend.abort("rank 3 on host2 exited with code 1");
  for (int i = 0; i < 2; ++i) {
    try {
      backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal,
                        nullptr);
      FAIL("a collective ran after abort()");
    } catch (const hora::AbortedError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("rank 3 on host2 exited with code 1"));
    }
  }
}

TEST_CASE("a peer that never joins ends in TimeoutError at the deadline, not a hang") {
  TestServer server(2);
  auto client = server.connect(0);
  const auto timeout = 3s;
  nccl::Backend backend(world_of_two(0), *client, timeout);
  DeviceMemory a(64);
  const auto start = std::chrono::steady_clock::now();
  try {
    backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal,
                      nullptr);
    FAIL("a collective completed without its peer");
  } catch (const hora::TimeoutError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("the global communicator (2 ranks)"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("HORA_TIMEOUT_SECONDS"));
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= timeout - 100ms);
  // Not a hang: ncclCommAbort of a half-made communicator may take a while on top of `timeout`.
  CHECK(elapsed < 10 * timeout);
  // The communicator is gone for good, and says so.
  CHECK_THROWS_WITH(backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum,
                                      Scope::kGlobal, nullptr),
                    Catch::Contains("unusable"));
}

TEST_CASE("the launcher's abort ends a collective that waits for a missing peer") {
  TestServer server(2);
  auto client0 = server.connect(0);
  auto client1 = server.connect(1);  // stands in for rank 1, which never calls NCCL
  nccl::Backend backend(world_of_two(0), *client0, 120s);
  DeviceMemory a(64);
  auto waiting = std::async(std::launch::async, [&] {
    backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal,
                      nullptr);
  });
  // Rank 0 publishes the unique id right before it starts NCCL's init: once rank 1 can read it,
  // rank 0 is creating the communicator (or about to).
  client1->get("nccl/global/0/uid", 30s);
  const auto start = std::chrono::steady_clock::now();
  backend.abort("horarun: rank 1 on host1 was killed by signal 9");
  try {
    waiting.get();
    FAIL("the collective completed after the abort");
  } catch (const hora::AbortedError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("killed by signal 9"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}

TEST_CASE("two ranks on one GPU is a usage error telling each rank to use its own GPU") {
  TestServer server(2);
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&server, r]() -> std::string {
      auto client = server.connect(r);
      nccl::Backend backend(world_of_two(r), *client, 60s);  // both local rank 0: GPU 0
      DeviceMemory a(64);
      try {
        backend.allreduce(a.get(), a.get(), 4, DataType::kFloat32, ReduceOp::kSum, Scope::kGlobal,
                          nullptr);
      } catch (const hora::UsageError& e) {
        return std::string("usage: ") + e.what();
      } catch (const hora::Error& e) {
        return std::string("other: ") + e.what();
      }
      return "completed";
    }));
  }
  std::string a = ranks[0].get(), b = ranks[1].get();
  INFO("rank 0: " << a << "\nrank 1: " << b);
  CHECK(a != "completed");
  CHECK(b != "completed");
  const bool told = a.rfind("usage: ", 0) == 0 || b.rfind("usage: ", 0) == 0;
  CHECK(told);
  CHECK((a.find("its own GPU") != std::string::npos || b.find("its own GPU") != std::string::npos));
}

#endif  // HORA_WITH_NCCL

int main(int argc, char** argv) {
  if (!hora::detail::nccl::compiled()) {
    std::puts("SKIP: libhora was built without NCCL (-Dnccl=enabled builds it)");
    return 77;
  }
  if (!hora::detail::nccl::gpu_available()) {
    std::puts("SKIP: no CUDA device is visible (needs one GPU; see CUDA_VISIBLE_DEVICES)");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
