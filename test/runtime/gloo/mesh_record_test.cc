// The mesh exchange's record (runtime/gloo/mesh_record.h): round trips, real Gloo pair
// addresses split into base + port and joined back, and malformed records refused with an error
// naming the rank that sent them.
#include "runtime/gloo/mesh_record.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <hora/error.h>
#include <catch2/catch.hpp>
#include <cstring>

using namespace hora::detail::gloo;

namespace {

PairAddressBase v4(const char* text) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  REQUIRE(inet_pton(AF_INET, text, &in.sin_addr) == 1);
  PairAddressBase base;
  std::memcpy(&base.sockaddr, &in, sizeof in);
  return base;
}

PairAddressBase v6(const char* text, std::uint32_t scope) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  REQUIRE(inet_pton(AF_INET6, text, &in6.sin6_addr) == 1);
  in6.sin6_scope_id = scope;
  PairAddressBase base;
  std::memcpy(&base.sockaddr, &in6, sizeof in6);
  return base;
}

RankRecord sample(PairAddressBase base) {
  RankRecord r;
  r.host_index = 3;
  r.local_rank = 1;
  r.local_size = 4;
  r.cross_rank = 2;
  r.cross_size = 5;
  r.hostname = "node-3.cluster";
  r.base = base;
  return r;
}

void check_same(const RankRecord& a, const RankRecord& b) {
  CHECK(a.host_index == b.host_index);
  CHECK(a.local_rank == b.local_rank);
  CHECK(a.local_size == b.local_size);
  CHECK(a.cross_rank == b.cross_rank);
  CHECK(a.cross_size == b.cross_size);
  CHECK(a.hostname == b.hostname);
  CHECK(a.base == b.base);
}

}  // namespace

TEST_CASE("a record round-trips with an IPv4 and an IPv6 base", "[mesh_record]") {
  for (const auto& base : {v4("10.1.2.3"), v6("fe80::1", 7)}) {
    const RankRecord r = sample(base);
    const auto bytes = encode_record(r);
    CHECK(bytes[0] == kRecordVersion);
    check_same(decode_record(bytes, 9), r);
  }
  // IPv4: 1 + 5 x 4 + 1 + 4 + 8 + 2 + name bytes: a few dozen bytes, whatever the job size.
  CHECK(encode_record(sample(v4("10.1.2.3"))).size() == 36 + std::string("node-3.cluster").size());
}

TEST_CASE("a long host name is cut to the limit", "[mesh_record]") {
  RankRecord r = sample(v4("127.0.0.1"));
  r.hostname = std::string(5000, 'h');
  CHECK(decode_record(encode_record(r), 0).hostname == std::string(kMaxHostnameBytes, 'h'));
}

TEST_CASE("real Gloo pair addresses split into one base and their ports", "[mesh_record]") {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = device->createContext(0, 4);
  PairAddressBase first;
  std::vector<std::uint16_t> ports;
  for (int j = 1; j < 4; ++j) {
    const auto bytes = context->createPair(j)->address().bytes();
    PairAddressBase base;
    const std::uint16_t port = split_pair_address(bytes, &base);
    CHECK(port != 0);
    if (j == 1) first = base;
    CHECK(base == first);  // the assumption the exchange relies on
    ports.push_back(port);

    // Joining gives back an address Gloo reads as the same socket address and sequence number.
    const ::gloo::transport::tcp::Address original(bytes);
    const ::gloo::transport::tcp::Address rebuilt(join_pair_address(base, port));
    CHECK(rebuilt.str() == original.str());
    CHECK(rebuilt.getSeq() == original.getSeq());
    CHECK(format_pair_endpoint(base, port) == "127.0.0.1:" + std::to_string(port));
  }
  CHECK(ports[0] != ports[1]);
}

TEST_CASE("malformed records are refused naming the rank that sent them", "[mesh_record]") {
  const auto good = encode_record(sample(v6("2001:db8::5", 0)));
  SECTION("every truncation") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      std::vector<std::uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
      INFO("first " << n << " bytes");
      CHECK_THROWS_WITH(decode_record(cut, 17),
                        Catch::StartsWith("malformed mesh record from rank 17 (" +
                                          std::to_string(n) + " bytes): "));
    }
  }
  SECTION("trailing bytes") {
    auto longer = good;
    longer.push_back(0);
    CHECK_THROWS_WITH(decode_record(longer, 4),
                      Catch::Contains("rank 4") && Catch::Contains("1 bytes after the last field"));
  }
  SECTION("another version") {
    auto other = good;
    other[0] = 1;
    CHECK_THROWS_WITH(decode_record(other, 2),
                      Catch::Contains("from rank 2") &&
                          Catch::Contains("record version 1, this rank speaks 2") &&
                          Catch::Contains("same version of libhora"));
  }
  SECTION("an unknown address family") {
    auto other = good;
    other[21] = 5;
    CHECK_THROWS_WITH(decode_record(other, 3),
                      Catch::Contains("rank 3") && Catch::Contains("address family 5"));
  }
  SECTION("a zero group size") {
    auto other = good;
    std::memset(other.data() + 1 + 2 * 4, 0, 4);  // local_size
    CHECK_THROWS_WITH(decode_record(other, 6),
                      Catch::Contains("rank 6") && Catch::Contains("local size 0"));
  }
  SECTION("an empty record") { CHECK_THROWS_AS(decode_record({}, 0), hora::Error); }
}
