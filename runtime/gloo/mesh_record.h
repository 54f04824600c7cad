// What one rank publishes in the mesh exchange (runtime/gloo/mesh.h), and the Gloo pair
// addresses every other rank rebuilds from it.
//
// In the Gloo hora builds against (libgloo 0.0~git20220518), every pair listens on a port of
// its own on the device's address, and its address (Address::bytes(), 136 bytes) is a
// sockaddr_storage plus a sequence number that is never set (-1). All pairs of a rank share
// everything but the port, so a rank publishes the shared part once, in its record, and sends
// each peer only the 2-byte ports of its pairs for that peer. split_pair_address() checks that
// assumption on every pair and fails loudly if a Gloo build breaks it.
//
// Record byte layout (little-endian), version 2:
//   u8 version (2) | u32 host_index | u32 local_rank | u32 local_size | u32 cross_rank
//   | u32 cross_size | u8 family (4 or 6) | raw[4 or 16] address | u32 IPv6 scope id (family 6
//   only) | i64 Gloo sequence number | u16 n + n bytes host name (at most 1024)
// The whole record must be consumed; anything else is a malformed record.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hora::detail::gloo {

// The part of a Gloo TCP pair address that all pairs of one device share.
struct PairAddressBase {
  sockaddr_storage sockaddr{};  // the device's address, port 0
  std::int64_t seq = -1;        // Gloo's sequence number (unset in this Gloo)
};
bool operator==(const PairAddressBase& a, const PairAddressBase& b);

// A rank's layout (the launcher's numbers) and the base of its pair addresses.
struct RankRecord {
  int host_index = 0;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  std::string hostname;
  PairAddressBase base;
};

inline constexpr std::uint8_t kRecordVersion = 2;
inline constexpr std::size_t kMaxHostnameBytes = 1024;

// Gloo address bytes -> their base and port. Throws hora::Error if they are not a TCP address of
// an IPv4 or IPv6 socket.
std::uint16_t split_pair_address(const std::vector<char>& gloo_bytes, PairAddressBase* base);
// The Gloo address bytes of the pair listening on `port` at `base`.
std::vector<char> join_pair_address(const PairAddressBase& base, std::uint16_t port);

std::vector<std::uint8_t> encode_record(const RankRecord& record);
// Throws hora::Error naming rank `from` when the record is malformed or of another version.
RankRecord decode_record(std::span<const std::uint8_t> bytes, int from);

// "10.0.0.2:40123" / "[fe80::1]:40123"
std::string format_pair_endpoint(const PairAddressBase& base, std::uint16_t port);

}  // namespace hora::detail::gloo
