// select_device: which GPU a rank uses, from its local rank, HORA_CUDA_DEVICE and the number of
// visible devices. Pure, so it runs on every machine.
#include <catch2/catch.hpp>

#include <string>

#include <hora/error.h>

#include "runtime/nccl/backend.h"

using hora::detail::nccl::select_device;

namespace {

// The message select_device throws for these arguments ("" when it does not throw).
std::string error_of(int local_rank, const char* env, int device_count) {
  try {
    select_device(local_rank, env, device_count);
  } catch (const hora::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("without HORA_CUDA_DEVICE a rank uses the device of its local rank") {
  CHECK(select_device(0, nullptr, 4) == 0);
  CHECK(select_device(3, nullptr, 4) == 3);
  // Set but empty counts as unset (horarun -x HORA_CUDA_DEVICE= ...).
  CHECK(select_device(2, "", 4) == 2);
}

TEST_CASE("more local ranks than devices is an error that says how to fix it") {
  std::string msg = error_of(2, nullptr, 2);
  REQUIRE_FALSE(msg.empty());
  CHECK_THAT(msg, Catch::Contains("local rank 2"));
  CHECK_THAT(msg, Catch::Contains("only 2 CUDA devices are visible (devices 0..1)"));
  CHECK_THAT(msg, Catch::Contains("-H host:2"));
  CHECK_THAT(msg, Catch::Contains("HORA_CUDA_DEVICE"));
}

TEST_CASE("no visible device is an error naming CUDA_VISIBLE_DEVICES") {
  for (const char* env : {static_cast<const char*>(nullptr), "0", "0,1"}) {
    std::string msg = error_of(0, env, 0);
    REQUIRE_FALSE(msg.empty());
    CHECK_THAT(msg, Catch::Contains("no CUDA device is visible"));
    CHECK_THAT(msg, Catch::Contains("CUDA_VISIBLE_DEVICES"));
  }
}

TEST_CASE("HORA_CUDA_DEVICE=N picks device N whatever the local rank") {
  CHECK(select_device(0, "1", 2) == 1);
  CHECK(select_device(5, "1", 2) == 1);
  CHECK(select_device(0, "0", 1) == 0);
}

TEST_CASE("HORA_CUDA_DEVICE=A,B,... gives one device per local rank") {
  CHECK(select_device(0, "3,1,2", 4) == 3);
  CHECK(select_device(1, "3,1,2", 4) == 1);
  CHECK(select_device(2, "3,1,2", 4) == 2);

  std::string msg = error_of(3, "3,1,2", 4);
  REQUIRE_FALSE(msg.empty());
  CHECK_THAT(msg, Catch::Contains("lists 3 devices"));
  CHECK_THAT(msg, Catch::Contains("local rank 3"));
}

TEST_CASE("a device index out of range names the variable and the visible range") {
  std::string msg = error_of(0, "2", 2);
  REQUIRE_FALSE(msg.empty());
  CHECK_THAT(msg, Catch::Contains("HORA_CUDA_DEVICE=\"2\""));
  CHECK_THAT(msg, Catch::Contains("devices 0..1"));
  CHECK_THAT(msg, Catch::Contains("CUDA_VISIBLE_DEVICES"));

  msg = error_of(1, "0,7", 4);
  REQUIRE_FALSE(msg.empty());
  CHECK_THAT(msg, Catch::Contains("device 7 for local rank 1"));

  CHECK_THAT(error_of(0, "1", 1), Catch::Contains("only 1 CUDA device is visible (device 0)"));
}

TEST_CASE("a malformed HORA_CUDA_DEVICE is rejected with the bad entry") {
  for (const char* bad : {"abc", "-1", "+1", "1x", " 1", "1 ", "0x1", "1.0", "99999999999"}) {
    INFO("HORA_CUDA_DEVICE=" << bad);
    std::string msg = error_of(0, bad, 4);
    REQUIRE_FALSE(msg.empty());
    CHECK_THAT(msg, Catch::Contains(std::string("HORA_CUDA_DEVICE=\"") + bad + "\""));
    CHECK_THAT(msg, Catch::Contains("is not a device index"));
  }
  // An empty entry in a list is malformed for the rank it belongs to.
  std::string msg = error_of(1, "0,,2", 4);
  CHECK_THAT(msg, Catch::Contains("bad entry \"\""));
  CHECK(select_device(0, "0,,2", 4) == 0);
}

TEST_CASE("a negative local rank is rejected") {
  CHECK_THAT(error_of(-1, nullptr, 4), Catch::Contains("HORA_LOCAL_RANK"));
}
