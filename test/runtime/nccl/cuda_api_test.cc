// The public <hora/cuda.h> surface as a training program sees it, in a world of one (no
// launcher). Runs on every machine: with NCCL but no GPU, host buffers given to the stream
// overloads take the Gloo path; without NCCL, the overloads say how to rebuild.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <hora/cuda.h>
#include <hora/hora.h>

namespace {

struct World {
  World() { hora::init(); }
  ~World() { hora::shutdown(); }
};

}  // namespace

TEST_CASE("cuda_built() says whether libhora has NCCL") {
#if HORA_WITH_NCCL
  CHECK(hora::cuda_built());
#else
  CHECK_FALSE(hora::cuda_built());
  CHECK_FALSE(hora::gpu_available());
#endif
}

#if HORA_WITH_NCCL

TEST_CASE("host buffers given to the stream overloads take the host path") {
  if (hora::gpu_available()) {
    WARN("a GPU is visible: the host-path checks below still apply to host buffers");
  }
  World world;
  std::vector<float> in = {1.5f, -2.0f, 3.25f};
  std::vector<float> out(3, 0.0f);
  hora::allreduce(in.data(), out.data(), in.size(), hora::DataType::kFloat32, hora::ReduceOp::kSum,
                  nullptr);
  CHECK(out == in);

  std::vector<std::int32_t> gathered(2, 0);
  std::int32_t mine[2] = {7, 8};
  hora::allgather(mine, 2, gathered.data(), {2}, hora::DataType::kInt32, nullptr);
  CHECK(gathered == std::vector<std::int32_t>{7, 8});

  std::vector<std::int64_t> b = {5, 6};
  hora::broadcast(b.data(), b.size(), hora::DataType::kInt64, 0, nullptr);
  CHECK(b == std::vector<std::int64_t>{5, 6});

  std::vector<std::uint8_t> a = {1, 2, 3}, a_out(3, 0);
  hora::alltoall(a.data(), {3}, a_out.data(), {3}, hora::DataType::kUInt8, nullptr);
  CHECK(a_out == a);

  std::vector<double> r = {0.5, 0.25}, r_out(2, 0.0);
  hora::reducescatter(r.data(), r.size(), r_out.data(), hora::DataType::kFloat64,
                      hora::ReduceOp::kMax, nullptr);
  CHECK(r_out == r);

  if (!hora::gpu_available()) hora::barrier(nullptr);
}

TEST_CASE("without a GPU a CUDA stream or a device query is a usage error") {
  if (hora::gpu_available()) return;  // nothing to check on a GPU host
  World world;
  std::vector<float> v(4, 1.0f);
  int not_a_stream = 0;
  try {
    hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32, hora::ReduceOp::kSum,
                    &not_a_stream);
    FAIL("a stream was accepted without a GPU");
  } catch (const hora::UsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("no GPU is visible"));
  }
  try {
    hora::cuda_device();
    FAIL("cuda_device() answered without a GPU");
  } catch (const hora::UsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("no CUDA device is visible"));
  }
}

#else

TEST_CASE("without NCCL every stream overload says how to rebuild") {
  World world;
  std::vector<float> v(4, 1.0f);
  CHECK_THROWS_WITH(hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32,
                                    hora::ReduceOp::kSum, nullptr),
                    Catch::Contains("hora was built without NCCL (rebuild with -Dnccl=enabled"));
  CHECK_THROWS_WITH(hora::broadcast(v.data(), v.size(), hora::DataType::kFloat32, 0, nullptr),
                    Catch::Contains("built without NCCL"));
  CHECK_THROWS_WITH(hora::barrier(nullptr), Catch::Contains("built without NCCL"));
  CHECK_THROWS_WITH(hora::cuda_device(), Catch::Contains("built without NCCL"));
}

#endif
