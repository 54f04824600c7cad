// Where a rank's Gloo device listens: HORA_IFACE's address, or the route to the rendezvous.
#include <hora/error.h>
#include <catch2/catch.hpp>

#include "runtime/gloo/device.h"
#include "test/runtime/test_job.h"

using hora::detail::WorldInfo;
using hora::detail::gloo::choose_device_address;

TEST_CASE("without HORA_IFACE the device uses the route to the rendezvous server", "[device]") {
  WorldInfo world;
  world.rendezvous_host = "127.0.0.1";
  world.rendezvous_port = 9;  // no packet is sent: only the route is looked up
  const auto address = choose_device_address(world);
  CHECK(address.address == "127.0.0.1");
  CHECK_THAT(address.reason, Catch::Contains("route to the rendezvous server 127.0.0.1:9"));
}

TEST_CASE("HORA_IFACE selects that interface's address", "[device]") {
  WorldInfo world;
  world.iface = "lo";
  const auto address = choose_device_address(world);
  CHECK(address.address == "127.0.0.1");
  CHECK_THAT(address.reason, Catch::Contains("interface lo"));
}

TEST_CASE("an unknown HORA_IFACE is a usage error listing this host's interfaces", "[device]") {
  WorldInfo world;
  world.rank = 3;
  world.hostname = "server7";
  world.iface = "nosuch0";
  try {
    choose_device_address(world);
    FAIL("no error for an unknown interface");
  } catch (const hora::UsageError& e) {
    CHECK_THAT(e.what(), Catch::Contains("rank 3 on server7: HORA_IFACE=nosuch0 is not an "
                                         "interface of this host") &&
                             Catch::Contains("lo (127.0.0.1") &&
                             Catch::Contains("--network-interfaces"));
  }
}

TEST_CASE("a job whose ranks bind HORA_IFACE=lo runs collectives", "[device]") {
  hora::test::TestServer server(2);
  auto worlds = hora::test::make_worlds(hora::test::one_host(2), server, std::chrono::seconds(10));
  for (auto& w : worlds) w.iface = "lo";
  const auto results = hora::test::run_job(worlds, [](hora::detail::Runtime& rt, const WorldInfo&) {
    std::vector<std::int64_t> v{1, 2};
    rt.allreduce(v.data(), v.data(), 2, hora::DataType::kInt64, hora::ReduceOp::kSum,
                 hora::Scope::kGlobal);
    if (v != std::vector<std::int64_t>{2, 4}) throw std::runtime_error("wrong sum");
  });
  hora::test::rethrow_first(results);
}
